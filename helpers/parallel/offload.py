"""What offloading the KV cache to host memory costs a decode step: its bytes read from HBM against brought
over PCIe (one way)."""
from __future__ import annotations

from dataclasses import dataclass

from ..formulas.gpus import get_gpu
from ..formulas.memory import kv_cache_bytes
from ..formulas.specs import get_spec
from .links import get_link


@dataclass(frozen=True)
class OffloadStep:
    """One context: the KV cache a step reads, its time from HBM and over PCIe, PCIe ÷ HBM."""

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
