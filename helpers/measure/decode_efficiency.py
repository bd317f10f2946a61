"""Decode efficiency, measured: a decode step's median time against its memory-bound floor, for models of several
sizes with random weights and an overhead probe (negligible widths: its step is the fixed toll of Python, dispatch,
launches): measured step ≈ floor + fixed overhead + the rest."""
from __future__ import annotations

from typing import Any, Sequence

from ..formulas.regime import ratio
from ..formulas.roofline import decode_floor_s
from ..formulas.specs import param_breakdown, spec_from_config
from ..formulas.stepcost import decode_cost
from .local_models import SMALL_OVERRIDES, tiny_config, tiny_model
from .timing import Stats, prompt_ids, timed_generate

# The sizes built for the comparison, as overrides of the tiny config. "probe" keeps the tiny model's
# operations with negligible widths; efficiency_table gives it the loaded model's layer count, since a step's
# fixed toll is paid per layer (a 4-layer probe beside Mistral 7B's 32 layers would show an eighth of it).
SIZE_OVERRIDES: dict[str, dict[str, Any]] = {
    "probe": {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
              "head_dim": 8, "vocab_size": 256},
    "tiny": {},
    "small": SMALL_OVERRIDES,  # the small profile's own widths
}


def size_config(name: str) -> dict[str, Any]:
    return tiny_config(**SIZE_OVERRIDES[name])


def decode_step_stats(model, context: int, device: str, steps: int = 16, batch: int = 1) -> Stats:
    """Decode step times after a prefill of `context` tokens: `steps` timed greedy steps after a warm-up."""
    ids = prompt_ids(context, batch=batch, vocab=model.config.vocab_size, device=device)
    timed_generate(model, ids[:, : min(context, 8)], 3, device)  # warm-up
    return Stats(tuple(timed_generate(model, ids, steps + 1, device).step_s))


def efficiency_row(name: str, model, config: dict, dtype: str, device: str, bandwidth: float, context: int,
                   steps: int = 16) -> dict[str, Any]:
    """One model's decode step (batch 1) against its floor, in B and s: the step's bytes (weights streamed once,
    the new token's embedding row included; KV read and written), floor = bytes ÷ bandwidth, efficiency = floor ÷ step."""
    spec = spec_from_config(config, name)
    stats = decode_step_stats(model, context, device, steps)
    cost = decode_cost(spec, context, 1, dtype)
    floor = decode_floor_s(cost.weight_read_bytes, cost.kv_bytes, bandwidth)
    return {"model": name, "params": param_breakdown(spec).total, "dtype": dtype, "device": device, "context": context,
            "weight_bytes_read": cost.weight_read_bytes, "kv_bytes_read": cost.kv_read_bytes, "step_bytes": cost.bytes,
            "floor_s": floor, "step_s": stats.median, "step_p90_s": stats.p90, "efficiency": ratio(floor, stats.median)}


def efficiency_table(sizes: Sequence[str], device: str, dtype: str, bandwidth: float, context: int,
                     steps: int = 16, extra: Sequence[Any] = ()):
    """efficiency_row of named sizes (the probe with `extra`'s first layer count), then of `extra`'s loaded models."""
    import pandas as pd

    from .hardware import free_memory

    rows = []
    layers = {"num_hidden_layers": extra[0].config["num_hidden_layers"]} if extra else {}
    for name in sizes:
        cfg = tiny_config(**SIZE_OVERRIDES[name], **(layers if name == "probe" else {}))
        rows.append(efficiency_row(name, tiny_model(cfg, device, dtype), cfg, dtype, device, bandwidth, context, steps))
        free_memory(device)
    rows += [efficiency_row(f"{m.profile} (loaded)", m.model, m.config, m.dtype, m.device, bandwidth, context, steps)
             for m in extra]
    return pd.DataFrame(rows).sort_values("weight_bytes_read", ignore_index=True)
