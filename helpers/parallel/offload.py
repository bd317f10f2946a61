"""What offloading the KV cache to host memory costs a decode step, computed: the cache's bytes
(helpers.formulas.memory.kv_cache_bytes) read from HBM at the GPU's bandwidth (helpers.formulas.gpus) against
brought over PCIe at the link's one-way bandwidth (helpers.parallel.links). The offloaded cache run for
real, and eviction measured, are in helpers.parallel.kv_offload.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..formulas.gpus import get_gpu
from ..formulas.memory import kv_cache_bytes
from ..formulas.specs import get_spec
from ..formulas.verdicts import Verdict, speed
from .links import get_link


@dataclass(frozen=True)
class OffloadStep:
    """One context: the KV cache a decode step reads (GB), its time from HBM and over PCIe (ms), and
    how many times slower PCIe is."""

    context: int
    kv_gb: float
    from_hbm_ms: float
    over_pcie_ms: float
    slower: float


def offload_steps(model, gpu, contexts=(4096, 32768, 131072), batch: int = 1,
                  kv_dtype: str = "bf16") -> list[OffloadStep]:
    """Per decode step at each context: the KV cache's bytes read from HBM against brought over PCIe."""
    spec, g = get_spec(model), get_gpu(gpu)
    pcie = get_link(g, "pcie")
    steps = []
    for c in contexts:
        kv = kv_cache_bytes(spec, c, batch, kv_dtype)
        steps.append(OffloadStep(c, kv / 1e9, kv / g.bandwidth * 1e3, kv / pcie.bandwidth * 1e3,
                                 g.bandwidth / pcie.bandwidth))
    return steps


def reading(steps: list[OffloadStep]) -> Verdict:
    """offload_steps read by rule: the cache over PCIe against from HBM (helpers.formulas.verdicts.speed), at the
    longest context."""
    last = steps[-1]
    v = speed(last.over_pcie_ms, last.from_hbm_ms, than="HBM reads it")
    return Verdict(f"an offloaded step brings the cache over PCIe {v.words} ({last.over_pcie_ms:,.0f} against "
                   f"{last.from_hbm_ms:,.2f} ms a step at {last.context:,} tokens)", "speed", v.evidence)


def eviction_bytes(model, context: int, sinks: int, window: int, kv_dtype: str = "bf16") -> Verdict:
    """What keeping `sinks` + `window` tokens of a `context`-token cache saves, computed
    (helpers.formulas.memory.kv_cache_bytes; a sliding window, where the model has one, caps both)."""
    spec = get_spec(model)
    full, kept = kv_cache_bytes(spec, context, 1, kv_dtype), kv_cache_bytes(spec, min(context, sinks + window), 1, kv_dtype)
    return Verdict(f"{spec.name} at {context:,} tokens: the {kv_dtype} cache is {full / 1e9:,.2f} GB, {sinks} sinks + a "
                   f"{window}-token window keep {kept / 1e6:,.1f} MB of it ({100 * kept / full:.2f} %)",
                   "share", {"full": full, "kept": kept})
