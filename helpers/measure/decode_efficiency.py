"""Decode efficiency, measured: a decode step's median time against its memory-bound floor, for models
of several sizes built with random weights (timing does not depend on the values) and for an overhead
probe — the loaded model's operations and layer count with every width shrunk until its bytes are
negligible, so that its step time is the fixed toll of a step (Python, operator dispatch, kernel
launches) and nothing else.

    measured step ≈ floor + fixed overhead + the rest (kernels that read below the read benchmark's rate)

The floor is helpers.formulas.roofline.decode_floor_s over helpers.formulas.stepcost's bytes; the steps are timed
by helpers.measure.timing.timed_generate; the figure is helpers.present.roofline_figures.efficiency_figure.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ..formulas.regime import ratio
from ..formulas.roofline import decode_floor_s
from ..formulas.specs import param_breakdown, spec_from_config
from ..formulas.stepcost import decode_cost
from ..formulas.units import normalize_dtype
from .dtypes import torch_dtype
from .microbench import MATMUL_DTYPES
from .local_models import SMALL_OVERRIDES, TINY_CONFIG
from .timing import Stats

# Mistral-architecture configs with random weights for the decode-efficiency comparison. "probe" keeps
# the tiny model's operations but shrinks every width until the bytes are negligible (probe_config gives
# it the loaded model's layer count).
SIZE_OVERRIDES: dict[str, dict[str, Any]] = {
    "probe": {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
              "head_dim": 8, "vocab_size": 256},
    "tiny": {},
    "small": SMALL_OVERRIDES,  # the small profile's own widths (helpers.measure.models)
}


def size_config(name: str) -> dict[str, Any]:
    """The config.json dict of a named size (the tiny profile's config with SIZE_OVERRIDES applied)."""
    return {**TINY_CONFIG, **SIZE_OVERRIDES[name]}


def probe_config(layers: int | None = None) -> dict[str, Any]:
    """The overhead probe's config: the tiny model's operations with negligible widths, and `layers`
    decoder layers (default the tiny model's 4). A step's fixed toll is paid per layer (a few dozen
    operator calls and kernel launches each), so the probe beside a model has that model's layer count:
    a 4-layer probe beside Mistral 7B's 32 layers would show an eighth of its toll."""
    cfg = size_config("probe")
    return cfg if layers is None else {**cfg, "num_hidden_layers": layers}


def random_model(config: dict, device: str = "cpu", dtype: str = "fp32", seed: int = 0):
    """A causal LM built from a config dict with random weights (fixed seed), in eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    c = {k: v for k, v in config.items() if k != "model_type"}
    hf_config = AutoConfig.for_model(config["model_type"], **c)
    dt = torch_dtype(normalize_dtype(dtype, MATMUL_DTYPES))
    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(hf_config, dtype=dt).eval()


def decode_step_stats(model, context: int, device: str, steps: int = 16, batch: int = 1) -> Stats:
    """Decode step times at a context: a prefill of `context` tokens into a real DynamicCache, then
    `steps` timed greedy steps of one token per sequence each (helpers.measure.timing.timed_generate)."""
    from .timing import prompt_ids
    from .timing import timed_generate

    ids = prompt_ids(context, batch=batch, vocab=model.config.vocab_size, device=device)
    timed_generate(model, ids[:, : min(context, 8)], 3, device)  # warm-up
    g = timed_generate(model, ids, steps + 1, device)
    return Stats(tuple(g.step_s))


@dataclass(frozen=True)
class DecodeEfficiency:
    """One model's decode step (batch 1) against its floor: bytes, floor and measured step, in B and s."""

    model: str
    params: int
    dtype: str
    device: str
    context: int
    weight_bytes_read: int   # weights streamed once, the new token's embedding row included
    kv_bytes_read: int
    step_bytes: int          # everything the step moves: weights, KV read and written
    floor_s: float           # step_bytes ÷ bandwidth
    step_s: float            # measured, median
    step_p90_s: float
    efficiency: float        # floor_s ÷ step_s, 0..1 (1 = at the floor)


def efficiency_row(name: str, model, config: dict, dtype: str, device: str, bandwidth: float, context: int,
                   steps: int = 16) -> DecodeEfficiency:
    """One model's decode step against its floor: measured median, floor, efficiency, bytes read."""
    spec = spec_from_config(config, name)
    stats = decode_step_stats(model, context, device, steps)
    cost = decode_cost(spec, context, 1, dtype)
    floor = decode_floor_s(cost.weight_read_bytes, cost.kv_bytes, bandwidth)
    return DecodeEfficiency(name, param_breakdown(spec).total, dtype, device, context, cost.weight_read_bytes,
                            cost.kv_read_bytes, cost.bytes, floor, stats.median, stats.p90,
                            ratio(floor, stats.median))


def efficiency_table(sizes: Sequence[str], device: str, dtype: str, bandwidth: float, context: int,
                     steps: int = 16, extra: Sequence[Any] = ()):
    """Decode efficiency (floor ÷ measured step) for named sizes built with random weights, plus
    already-loaded models (helpers.measure.models.Loaded) in `extra`, as a pandas table with the fields of
    DecodeEfficiency, smallest first. With the probe among the sizes (built with the first loaded model's
    layer count: probe_config) every row also has overhead_s (the probe's step) and overhead_share."""
    import pandas as pd

    from .hardware import free_memory

    rows: list[DecodeEfficiency] = []
    layers = extra[0].config["num_hidden_layers"] if extra else None   # the probe beside the loaded model
    for name in sizes:
        cfg = probe_config(layers) if name == "probe" else size_config(name)
        model = random_model(cfg, device, dtype)
        rows.append(efficiency_row(name, model, cfg, dtype, device, bandwidth, context, steps))
        del model
        free_memory(device)
    for loaded in extra:
        rows.append(efficiency_row(f"{loaded.profile} (loaded)", loaded.model, loaded.config, loaded.dtype,
                                   loaded.device, bandwidth, context, steps))
    probe_s = next((r.step_s for r in rows if r.model == "probe"), None)
    df = pd.DataFrame([asdict(r) for r in rows]).sort_values("weight_bytes_read", ignore_index=True)
    if probe_s is not None:
        df["overhead_s"] = probe_s
        df["overhead_share"] = df["overhead_s"] / df["step_s"]
    df["floor_share"] = df["efficiency"]
    return df
