"""The roofline: arithmetic intensity, the ridge point, the attainable FLOP/s, and where a forward pass
sits under it.

- Arithmetic intensity = FLOPs / bytes; the ridge point = peak FLOP/s / bandwidth (Williams, Waterman
  & Patterson 2009, "Roofline", CACM 52(4)); attainable FLOP/s = min(peak, intensity × bandwidth).
- Decode's memory-bound floor = (weight bytes + KV bytes) / bandwidth: no step can be faster than
  the time to read what it must read.

A step's FLOPs and bytes come from helpers.formulas.stepcost (forward_cost, decode_cost: the one owner, which
the planner and `make bench` use too); the two roofs of this device are measured by
helpers.measure.microbench, the decode steps by helpers.measure.decode_efficiency, and the figures are drawn by
helpers.present.roofline_figures.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .regime import ratio
from .stepcost import forward_cost


# ============================================================================ the roofline

def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte moved (inf over zero bytes, nan where nothing is known: helpers.formulas.regime.ratio)."""
    return ratio(flops, nbytes)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity (FLOP/B) where the memory roof meets the compute roof: peak / bandwidth.

    H100 SXM: 989e12 FLOP/s (dense bf16) / 3.35e12 B/s ≈ 295 FLOP/B. A measured bandwidth of zero gives inf,
    nothing measured nan (helpers.formulas.regime.ratio): never an exception.
    """
    return ratio(peak_flops, bandwidth)


def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """The roofline: min(peak, intensity × bandwidth)."""
    return min(peak_flops, intensity * bandwidth)


def crossover_batch(peak_flops: float, bandwidth: float, bytes_per_param: float) -> float:
    """The decode batch at which a step turns from memory-bound to compute-bound.

    A decode step of batch B does 2·N·B FLOPs (N parameters) and reads N × bytes_per_param weight
    bytes (the KV cache neglected), so its intensity is 2B / bytes_per_param. It reaches the ridge
    at B = ridge × bytes_per_param / 2: in bf16 (2 B per parameter) B equals the ridge itself —
    about 295 on an H100; in fp32 twice the ridge, in int8 half of it.
    """
    return ridge_point(peak_flops, bandwidth) * bytes_per_param / 2


@dataclass(frozen=True)
class StepFloor:
    """A step's floor on a device: the longer of reading its bytes and doing its FLOPs, and which bounds it."""

    seconds: float
    bound: str                       # "memory" or "compute"


def step_floor(cost, peak_flops: float, bandwidth: float) -> StepFloor:
    """max(bytes ÷ bandwidth, FLOPs ÷ peak) of a helpers.formulas.stepcost.StepCost: no step is faster."""
    read = cost.bytes / bandwidth
    compute = cost.flops / peak_flops
    return StepFloor(max(read, compute), "memory" if read >= compute else "compute")


def decode_floor_s(weight_bytes: int, kv_bytes: int, bandwidth: float) -> float:
    """The memory-bound floor of one decode step: (weight bytes + KV bytes) / bandwidth, in seconds."""
    return (weight_bytes + kv_bytes) / bandwidth


def decode_efficiency(floor_s: float, measured_s: float) -> float:
    """Share of the memory-bound floor achieved: floor / measured, a number in 0..1 (1 = at the floor)."""
    return ratio(floor_s, measured_s)


@dataclass(frozen=True)
class RooflinePoint:
    """A measured forward pass placed on the roofline: its FLOPs and bytes (computed) and time (measured)."""

    label: str
    kind: str        # "prefill", "decode" (batch 1) or "decode, batched"
    flops: float
    bytes: float
    seconds: float
    tokens: int      # tokens produced or processed (for tokens/s)

    @property
    def intensity(self) -> float:
        return arithmetic_intensity(self.flops, self.bytes)

    @property
    def achieved_flops(self) -> float:
        return ratio(self.flops, self.seconds)

    def to_dict(self, peak_flops: float | None = None, bandwidth: float | None = None) -> dict[str, Any]:
        d = {"label": self.label, "kind": self.kind, "flops": self.flops, "bytes": self.bytes,
             "seconds": self.seconds, "tokens": self.tokens, "tokens_per_s": ratio(self.tokens, self.seconds),
             "intensity_flop_per_byte": self.intensity, "achieved_flops_per_s": self.achieved_flops}
        if peak_flops and bandwidth:
            roof = attainable_flops(self.intensity, peak_flops, bandwidth)
            d.update(attainable_flops_per_s=roof, share_of_roof=ratio(self.achieved_flops, roof),
                     bound="memory" if self.intensity < ridge_point(peak_flops, bandwidth) else "compute")
        return d


def prefill_point(model, tokens: int, seconds: float, dtype: str, batch: int = 1) -> RooflinePoint:
    """A prefill of `tokens` tokens (per sequence) that took `seconds`."""
    cost = forward_cost(model, tokens, 0, batch, dtype)
    return RooflinePoint(f"prefill {tokens:,} tok" + (f" × {batch}" if batch > 1 else ""), "prefill",
                         cost.flops, cost.bytes, seconds, tokens * batch)


def decode_point(model, context: int, seconds: float, dtype: str, batch: int = 1) -> RooflinePoint:
    """One decode step (one new token per sequence) at `context` cached tokens that took `seconds`."""
    cost = forward_cost(model, 1, context, batch, dtype)
    return RooflinePoint(f"decode ctx {context:,}" + (f" × batch {batch}" if batch > 1 else ""),
                         "decode, batched" if batch > 1 else "decode",
                         cost.flops, cost.bytes, seconds, batch)


def gpu_roofline(gpu: str, model, contexts=(512, 4096), prompt: int = 2048) -> dict[str, Any]:
    """The roofline figures of `model` in bf16 on a catalogued GPU (notebooks 03 and 04): ridge, crossover batch,
    decode floor (batch 1) at `contexts`, the prefill floor of a `prompt`-token prompt, and the decode step at
    the planner's default efficiency (helpers.capacity.planner.DEFAULT_EFFICIENCY)."""
    from ..capacity.planner import DEFAULT_EFFICIENCY
    from .gpus import get_gpu
    from .stepcost import decode_cost

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
    """The shortest prompt whose prefill reaches a catalogued GPU's ridge (dense `dtype` FLOP/s ÷ bandwidth):
    below it a prefill is memory-bound too. Its intensity is helpers.formulas.stepcost.forward_cost's FLOPs ÷ bytes
    (the weights read once, the prompt's K/V written; activations not counted), which grows with the prompt, so
    the answer is found by bisection. Mistral 7B in bf16 on an H100 SXM: 301 tokens."""
    from .gpus import get_gpu

    g = get_gpu(gpu)
    ridge = ridge_point(g.peak_flops(dtype)[0], g.bandwidth)
    lo, hi = 1, most
    if forward_cost(model, hi, 0, 1, dtype).intensity < ridge:
        raise ValueError(f"no prompt up to {most:,} tokens reaches the {g.name}'s ridge of {ridge:,.0f} FLOP/B")
    while lo < hi:
        mid = (lo + hi) // 2
        if forward_cost(model, mid, 0, 1, dtype).intensity >= ridge:
            hi = mid
        else:
            lo = mid + 1
    return lo


def fixed_cost_weight(small, big, context: int = 128, dtype: str = "bf16") -> dict[str, float]:
    """How much less a step's fixed cost weighs against the floor of `big` than of `small`, when that cost is
    paid per layer (each layer launches the same few dozen operators, whatever its width): the bytes ratio
    (big's decode bytes ÷ small's, helpers.formulas.stepcost.decode_cost) ÷ the layers ratio. Mistral 7B against
    the tiny model: 610× the bytes, 8× the layers, so a fixed cost per byte about 76× lower."""
    from .specs import get_spec
    from .stepcost import decode_cost

    s, b = get_spec(small), get_spec(big)
    bytes_ratio = ratio(decode_cost(b, context, 1, dtype).bytes, decode_cost(s, context, 1, dtype).bytes)
    layers_ratio = ratio(b.num_layers, s.num_layers)
    return {"bytes_ratio": bytes_ratio, "layers_ratio": layers_ratio,
            "per_byte_ratio": ratio(bytes_ratio, layers_ratio)}
