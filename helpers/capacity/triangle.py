"""The quality–latency–throughput triangle on one GPU, in numbers: the same model served for latency (batch 1),
within an SLO, for throughput (the largest batch), and with fp8 weights and cache (more batch, less cost, a
quality cost to check on a benchmark). Each corner a plan of helpers.capacity.planner.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import checks
from ..formulas.specs import get_spec
from .planner import DEFAULT_EFFICIENCY, Plan, max_batch, plan
from .slo import plan_for_slo


@dataclass(frozen=True)
class Corner:
    corner: str                # "latency", "latency ≤ 10 ms", "throughput", "throughput, less precision"
    weight_dtype: str
    kv_dtype: str
    batch: int
    meets_slo: bool            # the step within the SLO the triangle was drawn for
    step_ms: float
    tokens_per_s: float
    usd_per_million_tokens: float
    max_batch: int
    what: str


def triangle(model, gpu: str = "H100 SXM", weight_dtype: str = "bf16", kv_dtype: str = "bf16",
             context: int = 4096, slo_ms: float = 10.0, gpus: int = 1,
             efficiency: float = DEFAULT_EFFICIENCY) -> list[Corner]:
    """The corners in order: latency, within the SLO, throughput, and (unless the weights and cache are fp8
    already, and when fp8 fits) throughput with fp8 weights and cache. ValueError when batch 1 does not fit."""
    spec = get_spec(model)
    slo_ms = checks.number(slo_ms, "SLO", positive=True, unit="ms per output token")

    def corner(name: str, p: Plan, what: str) -> Corner:
        return Corner(name, p.weight_dtype, p.kv_dtype, p.batch, p.step_s <= slo_ms / 1e3, p.step_ms, p.tokens_per_s,
                      p.usd_per_million_tokens, p.max_batch, what)

    def at(batch: int, w: str = weight_dtype, kv: str = kv_dtype) -> Plan:
        return plan(spec, gpu, gpus, w, kv, context, batch, efficiency=efficiency)

    one = at(1)
    if one.max_batch < 1:
        raise ValueError(one.reason)
    p, ok = plan_for_slo(spec, gpu, slo_ms, gpus, weight_dtype, kv_dtype, context, efficiency=efficiency)
    corners = [corner("latency", one, "one user, fastest tokens"),
               corner(f"latency ≤ {slo_ms:g} ms", p, "largest batch within the SLO" if ok else "misses the SLO even at batch 1"),
               corner("throughput", at(one.max_batch), "largest batch that fits")]
    q = max_batch(spec, gpu, gpus, "fp8", "fp8", context)
    if q >= 1 and (weight_dtype, kv_dtype) != ("fp8", "fp8"):
        corners.append(corner("throughput, less precision", at(q, "fp8", "fp8"),
                              "fp8 weights and cache: quality to check on a benchmark"))
    return corners
