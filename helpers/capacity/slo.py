"""The largest batch a latency SLO allows on one configuration: found by bisection over plan()'s decode step
(plan_for_slo, used by the ranking, the triangle and the command line), and derived term by term for a
memory-bound step (slo_batch, notebook 04's worked example); and the quality–latency–throughput triangle on one
GPU: the same model served for latency (batch 1), within an SLO, for throughput (the largest batch), and with
fp8 weights and cache (more batch, less cost, a quality cost to check on a benchmark).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import checks
from ..formulas.specs import get_spec
from .planner import DEFAULT_EFFICIENCY, Plan, max_batch, plan


def plan_for_slo(model, gpu, slo_ms: float, gpus: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                 context: int = 4096, min_batch: int = 1, **kw) -> tuple[Plan, bool]:
    """(plan, meets SLO): the largest batch whose decode step stays within `slo_ms` per output token, by bisection
    (the step grows with the batch); when even `min_batch` misses it, that batch's plan and False."""
    slo_s = checks.number(slo_ms, "SLO", positive=True, unit="ms per output token") / 1e3
    min_batch = checks.count(min_batch, "minimum batch")
    base = plan(model, gpu, gpus, weight_dtype, kv_dtype, context, min_batch, **kw)   # max_batch: whatever the batch
    if not base.fits or base.step_s > slo_s:
        return base, False
    lo, hi = min_batch, base.max_batch
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if plan(model, gpu, gpus, weight_dtype, kv_dtype, context, mid, **kw).step_s <= slo_s:
            lo = mid
        else:
            hi = mid - 1
    return plan(model, gpu, gpus, weight_dtype, kv_dtype, context, lo, **kw), True


@dataclass(frozen=True)
class SloBatch:
    """The largest batch an SLO allows, derived term by term (a memory-bound step, a dense model): the step
    reads the weights once (weight_bytes) and each sequence's cache (seq_bytes), at efficiency × bandwidth, so

        step(b) = (W + b · k) ÷ (efficiency × bandwidth) ≤ SLO   ⇒   b_SLO = ⌊(SLO × efficiency × bandwidth − W) ÷ k⌋

    and the batch is the smaller of b_SLO and the largest batch the KV budget holds (max_batch). `batch` is
    what plan_for_slo finds by bisection; `derived` the formula's, equal to it while the step stays memory-bound."""

    gpu: str
    slo_s: float
    efficiency: float
    bandwidth: float
    weight_bytes: float        # W: bytes a step reads whatever the batch
    seq_bytes: float           # k: bytes each sequence adds to a step (its cache read, its new token's written)
    step_budget_bytes: float   # SLO × efficiency × bandwidth: the bytes a step may move within the SLO
    slo_batch: int             # b_SLO (0: even one sequence misses the SLO)
    max_batch: int             # what the KV budget holds
    derived: int               # min(b_SLO, max_batch)
    batch: int                 # plan_for_slo's (0 when no batch meets the SLO)
    parity_batch: float        # W ÷ k: the batch whose cache reads equal the weights' read
    plan: Plan


def slo_batch(model, gpu, slo_ms: float, context: int = 4096, efficiency: float = DEFAULT_EFFICIENCY,
              weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> SloBatch:
    """The SLO's batch of `model` on one `gpu`, derived (SloBatch) beside plan_for_slo's; W and k are the
    step's bytes at batch 1 and what batch 2 adds (helpers.formulas.stepcost through plan)."""
    one = plan(model, gpu, 1, weight_dtype, kv_dtype, context, 1, efficiency=efficiency)
    if not one.fits:
        raise ValueError(one.reason)
    k = plan(model, gpu, 1, weight_dtype, kv_dtype, context, 2, efficiency=efficiency).step_bytes_per_gpu - one.step_bytes_per_gpu \
        if one.max_batch >= 2 else one.kv_bytes_per_seq_per_gpu
    w = one.step_bytes_per_gpu - k
    slo_s = checks.number(slo_ms, "SLO", positive=True, unit="ms per output token") / 1e3
    budget = slo_s * one.efficiency * one.bandwidth
    b_slo = max(0, int((budget - w) // k))
    found, meets = plan_for_slo(model, gpu, slo_ms, 1, weight_dtype, kv_dtype, context, efficiency=efficiency)
    return SloBatch(one.gpu, slo_s, one.efficiency, one.bandwidth, w, k, budget, b_slo, one.max_batch,
                    min(b_slo, one.max_batch), found.batch if meets else 0, w / k, found)


def triangle(model, gpu: str = "H100 SXM", weight_dtype: str = "bf16", kv_dtype: str = "bf16",
             context: int = 4096, slo_ms: float = 10.0, gpus: int = 1,
             efficiency: float = DEFAULT_EFFICIENCY) -> list[dict]:
    """The corners as rows of Plan.to_dict() with corner, meets_slo and what: latency, within the SLO, throughput,
    and (unless already fp8, and when fp8 fits) throughput with fp8 weights and cache. ValueError when batch 1
    does not fit."""
    spec = get_spec(model)

    def corner(name: str, p: Plan, what: str) -> dict:
        return {"corner": name, **p.to_dict(), "meets_slo": p.step_s <= slo_ms / 1e3, "what": what}

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
