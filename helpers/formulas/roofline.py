"""The roofline (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4)): arithmetic intensity = FLOPs ÷
bytes, the ridge = peak FLOP/s ÷ bandwidth, attainable FLOP/s = min(peak, intensity × bandwidth); decode's
memory-bound floor = (weight bytes + KV bytes) ÷ bandwidth, since no step is faster than reading what it must.
A step's FLOPs and bytes are helpers.formulas.stepcost's; a measured step against its floor is regime.ratio.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from .regime import ratio
from .stepcost import decode_cost, forward_cost


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """peak ÷ bandwidth (FLOP/B): 989e12 ÷ 3.35e12 ≈ 295 on an H100 SXM in dense bf16; inf over a zero bandwidth."""
    return ratio(peak_flops, bandwidth)


def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    return min(peak_flops, intensity * bandwidth)


def crossover_batch(peak_flops: float, bandwidth: float, bytes_per_param: float) -> float:
    """The decode batch where a step turns compute-bound: 2·N·B FLOPs over N × bytes_per_param weight bytes (the
    KV cache neglected) reaches the ridge at B = ridge × bytes_per_param ÷ 2 (bf16: the ridge itself)."""
    return ridge_point(peak_flops, bandwidth) * bytes_per_param / 2


@dataclass(frozen=True)
class StepFloor:
    seconds: float
    bound: str                       # "memory" or "compute"


def step_floor(cost, peak_flops: float, bandwidth: float) -> StepFloor:
    """max(bytes ÷ bandwidth, FLOPs ÷ peak) of a stepcost.StepCost: no step is faster."""
    read, compute = cost.bytes / bandwidth, cost.flops / peak_flops
    return StepFloor(max(read, compute), "memory" if read >= compute else "compute")


def decode_floor_s(weight_bytes: int, kv_bytes: int, bandwidth: float) -> float:
    """(weight bytes + KV bytes) ÷ bandwidth, in seconds."""
    return (weight_bytes + kv_bytes) / bandwidth


@dataclass(frozen=True)
class RooflinePoint:
    """A measured forward pass on the roofline: its FLOPs and bytes (computed) and time (measured)."""

    label: str
    kind: str        # "prefill", "decode" (batch 1) or "decode, batched"
    flops: float
    bytes: float
    seconds: float
    tokens: int      # tokens produced or processed (for tokens/s)

    @property
    def intensity(self) -> float:
        return ratio(self.flops, self.bytes)

    @property
    def achieved_flops(self) -> float:
        return ratio(self.flops, self.seconds)


def prefill_point(model, tokens: int, seconds: float, dtype: str, batch: int = 1) -> RooflinePoint:
    cost = forward_cost(model, tokens, 0, batch, dtype)
    return RooflinePoint(f"prefill {tokens:,} tok" + (f" × {batch}" if batch > 1 else ""), "prefill",
                         cost.flops, cost.bytes, seconds, tokens * batch)


def decode_point(model, context: int, seconds: float, dtype: str, batch: int = 1) -> RooflinePoint:
    cost = decode_cost(model, context, batch, dtype)
    return RooflinePoint(f"decode ctx {context:,}" + (f" × batch {batch}" if batch > 1 else ""),
                         "decode, batched" if batch > 1 else "decode", cost.flops, cost.bytes, seconds, batch)


def gpu_roofline(gpu: str, model, contexts=(512, 4096), prompt: int = 2048) -> dict[str, Any]:
    """`model`'s roofline figures in bf16 on a catalogued GPU: ridge, crossover batch, decode floor (batch 1) at
    `contexts`, a `prompt`-token prefill's floor, the decode step at the planner's DEFAULT_EFFICIENCY."""
    from .stepcost import DEFAULT_EFFICIENCY
    from .gpus import get_gpu

    g = get_gpu(gpu)
    peak, _ = g.peak_flops("bf16")
    decode = {c: decode_cost(model, c, 1, "bf16") for c in contexts}
    floor = {c: d.bytes / g.bandwidth for c, d in decode.items()}
    pre = forward_cost(model, prompt, 0, 1, "bf16")
    return {"gpu": g.name, "model": model, "bandwidth": g.bandwidth, "peak_flops": peak,
            "ridge": ridge_point(peak, g.bandwidth), "crossover_batch": crossover_batch(peak, g.bandwidth, 2),
            "decode_floor_s": floor, "decode_intensity": {c: d.intensity for c, d in decode.items()},
            "decode_at_efficiency_s": {c: f / DEFAULT_EFFICIENCY for c, f in floor.items()},
            "efficiency": DEFAULT_EFFICIENCY, "prompt": prompt,
            "prefill_floor_s": step_floor(pre, peak, g.bandwidth).seconds, "prefill_intensity": pre.intensity}


def prefill_ridge_tokens(model, gpu: str = "H100 SXM", dtype: str = "bf16", most: int = 1 << 20) -> int:
    """The shortest prompt whose prefill reaches a catalogued GPU's ridge, by bisection (forward_cost's intensity
    grows with the prompt). Mistral 7B, bf16, H100 SXM: 301 tokens."""
    from .gpus import get_gpu

    g = get_gpu(gpu)
    ridge = ridge_point(g.peak_flops(dtype)[0], g.bandwidth)

    def reaches(n: int) -> bool:
        return forward_cost(model, n, 0, 1, dtype).intensity >= ridge

    if not reaches(most):
        raise ValueError(f"no prompt up to {most:,} tokens reaches the {g.name}'s ridge of {ridge:,.0f} FLOP/B")
    return 1 + bisect_left(range(1, most + 1), True, key=reaches)


def fixed_cost_weight(small, big, context: int = 128, dtype: str = "bf16") -> dict[str, float]:
    """How much less a fixed cost per layer weighs against `big`'s floor than `small`'s: the decode bytes ratio ÷
    the layers ratio (Mistral 7B against the tiny model: 610× ÷ 8×, about 76×)."""
    from .specs import get_spec

    s, b = get_spec(small), get_spec(big)
    bytes_ratio = ratio(decode_cost(b, context, 1, dtype).bytes, decode_cost(s, context, 1, dtype).bytes)
    layers_ratio = ratio(b.num_layers, s.num_layers)
    return {"bytes_ratio": bytes_ratio, "layers_ratio": layers_ratio, "per_byte_ratio": ratio(bytes_ratio, layers_ratio)}
