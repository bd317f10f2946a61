"""What you should see on a GPU: the figures notebooks 03 and 04 would show for Mistral 7B, computed
from its config.json and the GPU catalog (helpers.gpus) — the numbers a learner on a CPU compares
with, and a facilitator on a GPU checks the live run against.

Each figure is a floor at the datasheet's bandwidth or FLOP/s (helpers.stepcost for the bytes and
FLOPs, helpers.roofline for the ridge), and the same at the planner's default efficiency
(helpers.capacity.planner.DEFAULT_EFFICIENCY, with its source) where a measured step is compared.
"""
from __future__ import annotations

from typing import Any

from .gpus import get_gpu
from .roofline import crossover_batch, ridge_point
from .stepcost import decode_cost, forward_cost

MODEL = "mistral-7b-v0.1"


def on_gpu(gpu: str = "H100 SXM", model: str = MODEL, contexts=(512, 4096), prompt: int = 2048) -> dict[str, Any]:
    """The roofline figures of `model` in bf16 on a catalogued GPU: ridge, crossover batch, decode
    floor (batch 1) at `contexts`, the prefill floor of a `prompt`-token prompt, and the decode step at
    the planner's default efficiency."""
    from .capacity.planner import DEFAULT_EFFICIENCY

    g = get_gpu(gpu)
    peak, _ = g.peak_flops("bf16")
    decode = {c: decode_cost(model, c, 1, "bf16") for c in contexts}
    pre = forward_cost(model, prompt, 0, 1, "bf16")
    return {
        "gpu": g.name, "model": model, "bandwidth": g.bandwidth, "peak_flops": peak,
        "ridge": ridge_point(peak, g.bandwidth), "crossover_batch": crossover_batch(peak, g.bandwidth, 2),
        "decode_floor_s": {c: d.bytes / g.bandwidth for c, d in decode.items()},
        "decode_intensity": {c: d.intensity for c, d in decode.items()},
        "decode_at_efficiency_s": {c: d.bytes / g.bandwidth / DEFAULT_EFFICIENCY for c, d in decode.items()},
        "efficiency": DEFAULT_EFFICIENCY,
        "prompt": prompt, "prefill_floor_s": max(pre.flops / peak, pre.bytes / g.bandwidth),
        "prefill_intensity": pre.intensity,
    }
