"""The roofline of this device, measured, and where prefill and decode sit on it.

The two roofs are measured by the microbenchmarks in helpers.measure.microbench (memory bandwidth from a
device-to-device copy, peak matmul FLOP/s in a dtype; measure_bandwidth and measure_peak_flops are
importable from here too). Measured workloads use medians.

Computed from a model's shape by helpers.cost.stepcost, the one owner of a forward step's cost (the
planner and `make bench` use it too):
- FLOPs per token: 2 per parameter a token is multiplied by (Kaplan et al. 2020, "Scaling Laws for
  Neural Language Models", §2.1: C_forward ≈ 2N), plus attention's two context-length products,
  QKᵀ and softmax·V, 2·ctx·head_dim FLOPs each per query head and layer: 4·layers·heads·head_dim·ctx
  (the JAX scaling book, "All the Transformer Math You Need": 4·B·T·S·N·H attention FLOPs per layer).
- Bytes per forward: the weights streamed once (shared by every sequence of a batch; the input
  embedding by the rows read; MoE experts by those touched) plus the KV cache read and written;
  activations are left out (they stay on chip or are small beside weights).
- Arithmetic intensity = FLOPs / bytes; the ridge point = peak FLOP/s / bandwidth (Williams, Waterman
  & Patterson 2009, "Roofline", CACM 52(4)); attainable FLOP/s = min(peak, intensity × bandwidth).
- Decode's memory-bound floor = (weight bytes + KV bytes) / bandwidth: no step can be faster than
  the time to read what it must read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from . import stepcost
from ..measure.microbench import MATMUL_DTYPES
from ..measure.local_models import SMALL_OVERRIDES
from ..measure.microbench import measure_bandwidth, measure_peak_flops  # noqa: F401  (re-exported)
from .specs import ModelSpec, get_spec, param_breakdown
from .stepcost import attended_keys, attention_flops_per_key, decode_cost, forward_cost, matmul_params  # noqa: F401
from ..measure.timing import Stats
from .units import normalize_dtype, torch_dtype
from ..present import plots


def _spec(model) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else get_spec(model)


def _non_negative(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number ≥ 0, got {value!r}")
    return value


def _positive(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return value


# ============================================================================ FLOPs and bytes
# One owner: helpers.cost.stepcost. These names stay for the notebooks and the tests that use them.

def forward_flops(model, new_tokens: int, past_tokens: int = 0, batch: int = 1, logits_tokens: int = 1) -> int:
    """FLOPs of one forward pass (helpers.cost.stepcost.forward_cost): `batch` sequences, each `new_tokens`
    new after `past_tokens` cached. Prefill of n tokens: forward_flops(m, n); one decode step at
    context c: forward_flops(m, 1, c)."""
    return forward_cost(model, new_tokens, past_tokens, batch, logits_tokens=logits_tokens).flops


def forward_bytes(model, new_tokens: int, past_tokens: int = 0, batch: int = 1, dtype: str = "bf16",
                  kv_dtype: str | None = None) -> int:
    """Bytes one forward pass moves (helpers.cost.stepcost.forward_cost): the weights streamed once, the
    embedding rows read, every sequence's KV cache read and the new tokens' K/V written."""
    return forward_cost(model, new_tokens, past_tokens, batch, dtype, kv_dtype).bytes


def streamed_weight_bytes(model, dtype: str = "bf16", tokens: int = 1) -> int:
    """Weight bytes a forward over `tokens` tokens reads (helpers.cost.stepcost): every weight once, of
    the untied input embedding only the tokens' rows, of MoE experts the ones the tokens touch."""
    w, emb, _ = stepcost.streamed_weight_bytes(model, dtype, tokens)
    return w + emb


def decode_floor_bytes(model, context: int, dtype: str = "bf16", batch: int = 1, kv_dtype: str | None = None) -> int:
    """Bytes one decode step must move at `context` cached tokens: the numerator of its floor."""
    return decode_cost(model, context, batch, dtype, kv_dtype).bytes


# ============================================================================ the roofline

def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte moved."""
    return _non_negative(flops, "flops") / _positive(nbytes, "bytes")


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity (FLOP/B) where the memory roof meets the compute roof: peak / bandwidth.

    H100 SXM: 989e12 FLOP/s (dense bf16) / 3.35e12 B/s ≈ 295 FLOP/B.
    """
    return _positive(peak_flops, "peak FLOP/s") / _positive(bandwidth, "bandwidth")


def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """The roofline: min(peak, intensity × bandwidth)."""
    return min(_positive(peak_flops, "peak FLOP/s"),
               _non_negative(intensity, "intensity") * _positive(bandwidth, "bandwidth"))


def crossover_batch(peak_flops: float, bandwidth: float, bytes_per_param: float) -> float:
    """The decode batch at which a step turns from memory-bound to compute-bound.

    A decode step of batch B does 2·N·B FLOPs (N parameters) and reads N × bytes_per_param weight
    bytes (the KV cache neglected), so its intensity is 2B / bytes_per_param. It reaches the ridge
    at B = ridge × bytes_per_param / 2: in bf16 (2 B per parameter) B equals the ridge itself —
    about 295 on an H100; in fp32 twice the ridge, in int8 half of it.
    """
    return ridge_point(peak_flops, bandwidth) * _positive(bytes_per_param, "bytes per parameter") / 2


def decode_floor_s(weight_bytes: int, kv_bytes: int, bandwidth: float) -> float:
    """The memory-bound floor of one decode step: (weight bytes + KV bytes) / bandwidth, in seconds."""
    return (_non_negative(weight_bytes, "weight bytes") + _non_negative(kv_bytes, "KV bytes")) / _positive(
        bandwidth, "bandwidth")


def decode_efficiency(floor_s: float, measured_s: float) -> float:
    """Share of the memory-bound floor achieved: floor / measured, a number in 0..1 (1 = at the floor)."""
    return _non_negative(floor_s, "floor") / _positive(measured_s, "measured step time")


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
        return self.flops / self.seconds

    @property
    def achieved_bandwidth(self) -> float:
        return self.bytes / self.seconds

    def to_dict(self, peak_flops: float | None = None, bandwidth: float | None = None) -> dict[str, Any]:
        d = {"label": self.label, "kind": self.kind, "flops": self.flops, "bytes": self.bytes,
             "seconds": self.seconds, "tokens": self.tokens, "tokens_per_s": self.tokens / self.seconds,
             "intensity_flop_per_byte": self.intensity, "achieved_flops_per_s": self.achieved_flops}
        if peak_flops and bandwidth:
            roof = attainable_flops(self.intensity, peak_flops, bandwidth)
            d.update(attainable_flops_per_s=roof, share_of_roof=self.achieved_flops / roof,
                     bound="memory" if self.intensity < ridge_point(peak_flops, bandwidth) else "compute")
        return d


def prefill_point(model, tokens: int, seconds: float, dtype: str, batch: int = 1) -> RooflinePoint:
    """A prefill of `tokens` tokens (per sequence) that took `seconds`."""
    return RooflinePoint(f"prefill {tokens:,} tok" + (f" × {batch}" if batch > 1 else ""), "prefill",
                         forward_flops(model, tokens, 0, batch), forward_bytes(model, tokens, 0, batch, dtype),
                         seconds, tokens * batch)


def decode_point(model, context: int, seconds: float, dtype: str, batch: int = 1) -> RooflinePoint:
    """One decode step (one new token per sequence) at `context` cached tokens that took `seconds`."""
    return RooflinePoint(f"decode ctx {context:,}" + (f" × batch {batch}" if batch > 1 else ""),
                         "decode, batched" if batch > 1 else "decode",
                         forward_flops(model, 1, context, batch), forward_bytes(model, 1, context, batch, dtype),
                         seconds, batch)


def points_frame(points: Iterable[RooflinePoint], peak_flops: float, bandwidth: float):
    """A pandas table of roofline points with their share of the roof and which roof binds."""
    import pandas as pd

    return pd.DataFrame([p.to_dict(peak_flops, bandwidth) for p in points])


def roofline_figure(peak_flops: float, bandwidth: float, points: Sequence[RooflinePoint], source: Any,
                    dtype: str = "", title: str | None = None):
    """The roofline (log–log) with measured points: prefill as circles, decode (batch 1) as triangles,
    batched decode as squares; the first and last point of each kind labelled."""
    import numpy as np

    from ..present import plots

    ridge = ridge_point(peak_flops, bandwidth)
    xs = [p.intensity for p in points] or [ridge]
    lo, hi = min(min(xs), ridge) / 4, max(max(xs), ridge) * 4
    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    fig, ax = plots.figure(width=8, height=5)
    ax.loglog(grid, [attainable_flops(x, peak_flops, bandwidth) for x in grid], color="black", lw=2,
              label=f"roof: {bandwidth / 1e9:,.0f} GB/s × intensity, capped at {peak_flops / 1e12:,.2f} TFLOP/s {dtype}")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:,.1f} FLOP/B", (ridge, peak_flops), textcoords="offset points", xytext=(4, -14),
                fontsize=8, color="grey")
    styles = {"prefill": ("o", "tab:orange"), "decode": ("^", "tab:blue"), "decode, batched": ("s", "tab:green")}
    for kind, (marker, color) in styles.items():
        pts = [p for p in points if p.kind == kind]
        if pts:
            ax.scatter([p.intensity for p in pts], [p.achieved_flops for p in pts], marker=marker, color=color,
                       s=36, zorder=3, label=f"{kind} (measured)")
            for p in ((pts[0], pts[-1]) if kind == "prefill" else (pts[-1],)):
                ax.annotate(p.label, (p.intensity, p.achieved_flops), textcoords="offset points", xytext=(4, 4),
                            fontsize=7, color=color)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("FLOP/s achieved")
    ax.set_title(title or "Roofline of this device, measured")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, source)


@plots.notes_when_empty('Prefill throughput against prompt length')
def prefill_figure(df, model, dtype: str, peak_flops: float, source: Any):
    """Prefill time (left, log–log) and the FLOP/s it achieves (right, against the measured peak) by
    prompt length; df has columns tokens, ttft_s, oom (helpers.measure.sweeps.ttft_sweep)."""
    from ..present import plots

    ok = df[~df["oom"]]
    achieved = [forward_flops(model, int(n)) / t for n, t in zip(ok["tokens"], ok["ttft_s"])]
    fig, (left, right) = plots.figure(ncols=2, width=4.6, height=3.8)
    left.loglog(ok["tokens"], ok["ttft_s"] * 1e3, "o-", color="tab:orange")
    left.set_xlabel("prompt tokens")
    left.set_ylabel("prefill time, ms (median)")
    left.set_title("Prefill time")
    right.semilogx(ok["tokens"], [a / 1e12 for a in achieved], "o-", color="tab:orange", label="prefill achieves")
    right.axhline(peak_flops / 1e12, color="black", lw=1, ls="--", label=f"measured matmul peak ({dtype})")
    right.set_ylim(bottom=0)
    right.set_xlabel("prompt tokens")
    right.set_ylabel("TFLOP/s")
    right.set_title("Compute it keeps busy")
    right.legend(fontsize=8)
    return plots.finish(fig, source)


# ============================================================================ decode efficiency by model size

# Mistral-architecture configs with random weights for the decode-efficiency comparison. "probe" keeps
# the tiny model's operations but shrinks every width until the bytes are negligible: its step time is
# the per-step overhead (Python, operator dispatch, kernel launches) alone; efficiency_table gives it
# the loaded model's layer count (probe_config).
SIZE_OVERRIDES: dict[str, dict[str, Any]] = {
    "probe": {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
              "head_dim": 8, "vocab_size": 256},
    "tiny": {},
    "small": SMALL_OVERRIDES,  # the small profile's own widths (helpers.measure.local_models)
}


def size_config(name: str) -> dict[str, Any]:
    """The config.json dict of a named size (the tiny profile's config with SIZE_OVERRIDES applied)."""
    from ..measure.local_models import TINY_CONFIG

    if name not in SIZE_OVERRIDES:
        raise ValueError(f"unknown model size {name!r}; allowed: {', '.join(SIZE_OVERRIDES)}")
    return {**TINY_CONFIG, **SIZE_OVERRIDES[name]}


def probe_config(layers: int | None = None) -> dict[str, Any]:
    """The overhead probe's config: the tiny model's operations with negligible widths, and `layers`
    decoder layers (default the tiny model's 4). A step's fixed toll is paid per layer (a few dozen
    operator calls and kernel launches each), so the probe beside a model has that model's layer count:
    a 4-layer probe beside Mistral 7B's 32 layers would show an eighth of its toll."""
    cfg = size_config("probe")
    if layers is None:
        return cfg
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ValueError(f"layers must be a positive integer, got {layers!r}")
    return {**cfg, "num_hidden_layers": layers}


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
    from ..measure.timing import timed_generate
    from ..measure.sweeps import prompt_ids

    ids = prompt_ids(context, batch=batch, vocab=model.config.vocab_size, device=device)
    timed_generate(model, ids[:, : min(context, 8)], 3, device)  # warm-up
    g = timed_generate(model, ids, steps + 1, device)
    return Stats(tuple(g.step_s))


def efficiency_row(name: str, model, config: dict, dtype: str, device: str, bandwidth: float, context: int,
                   steps: int = 16) -> dict[str, Any]:
    """One model's decode step against its floor: measured median, floor, efficiency, bytes read."""
    from .specs import spec_from_config

    spec = spec_from_config(config, name)
    stats = decode_step_stats(model, context, device, steps)
    cost = decode_cost(spec, context, 1, dtype)
    floor = decode_floor_s(cost.weight_read_bytes, cost.kv_bytes, bandwidth)
    return {"model": name, "params": param_breakdown(spec).total, "dtype": dtype, "device": device,
            "context": context, "weight_bytes_read": cost.weight_read_bytes, "kv_bytes_read": cost.kv_read_bytes,
            "step_bytes": cost.bytes, "floor_s": floor,
            "step_s": stats.median, "step_p90_s": stats.p90, "efficiency": decode_efficiency(floor, stats.median)}


def efficiency_table(sizes: Sequence[str], device: str, dtype: str, bandwidth: float, context: int,
                     steps: int = 16, extra: Sequence[Any] = ()):
    """Decode efficiency (floor ÷ measured step) for named sizes built with random weights, plus
    already-loaded models (helpers.measure.models.Loaded) in `extra`. Adds the overhead probe's step time
    (the first loaded model's layer count, negligible bytes: probe_config) and what it leaves unexplained:

        measured step ≈ floor + fixed overhead + the rest (kernels short of the copy bandwidth).
    """
    import pandas as pd

    from ..measure.hardware import free_memory

    rows = []
    probe_s = None
    layers = extra[0].config["num_hidden_layers"] if extra else None   # the probe beside the loaded model
    for name in sizes:
        cfg = probe_config(layers) if name == "probe" else size_config(name)
        model = random_model(cfg, device, dtype)
        row = efficiency_row(name, model, cfg, dtype, device, bandwidth, context, steps)
        del model
        free_memory(device)
        if name == "probe":
            probe_s = row["step_s"]
        rows.append(row)
    for loaded in extra:
        rows.append(efficiency_row(f"{loaded.profile} (loaded)", loaded.model, loaded.config, loaded.dtype, loaded.device,
                                   bandwidth, context, steps))
    df = pd.DataFrame(rows).sort_values("weight_bytes_read", ignore_index=True)
    if probe_s is not None:
        df["overhead_s"] = probe_s
        df["overhead_share"] = df["overhead_s"] / df["step_s"]
    df["floor_share"] = df["efficiency"]
    return df


# Words for shares, chosen by rule (notebook 03, section 5): a share is "most" above one half,
# "about half" within a tenth of it, "a minority" below; a step is "at its floor" from 80 %.
AT_FLOOR = 0.8


def share_words(share: float) -> str:
    """'most' (> 60 %), 'about half' (40–60 %), 'a minority' (10–40 %), 'little' (< 10 %)."""
    if share > 0.6:
        return "most"
    if share >= 0.4:
        return "about half"
    return "a minority" if share >= 0.1 else "little"


def step_explained(row, probe_s: float | None) -> dict[str, Any]:
    """What the memory floor and the overhead probe explain of one measured step, and the words for it.

    floor_share = floor ÷ step; overhead_share = probe's step ÷ step; rest = 1 − both (negative: the two
    overlap — the overhead is paid while bytes stream, so they do not simply add).
    """
    step = float(row["step_s"])
    floor_share = float(row["floor_s"]) / step
    over = None if probe_s is None else probe_s / step
    rest = None if over is None else 1.0 - floor_share - over
    if floor_share >= AT_FLOOR:
        words = f"at its memory floor ({100 * floor_share:,.0f} % of the step is moving bytes)"
    else:
        words = f"{share_words(1 - floor_share)} of its step ({100 * (1 - floor_share):,.0f} %) is not moving bytes"
    if over is not None:
        words += f"; the fixed overhead alone is {share_words(over)} of it ({100 * over:,.0f} %)"
        if rest is not None and rest >= 0.1:
            words += (f", and {100 * rest:,.0f} % is explained by neither: kernels that stream memory below the "
                      "copy's bandwidth (small matrices, attention, norms)")
        elif rest is not None and rest < -0.1:
            words += ": floor and overhead add up to more than the step, so they overlap"
    return {"floor_share": floor_share, "overhead_share": over, "rest_share": rest, "words": words}


@plots.notes_when_empty('Decode efficiency')
def efficiency_figure(df, source: Any):
    """Each model's measured decode step split into its memory floor, the fixed overhead (the probe's
    step) and the rest; log scale, since the sizes differ by orders of magnitude."""
    from ..present import plots

    fig, ax = plots.figure(width=8, height=4)
    names = list(df["model"])
    y = range(len(names))
    floor = df["floor_s"] * 1e3
    over = (df["overhead_s"] if "overhead_s" in df else 0 * df["floor_s"]) * 1e3
    ax.barh(y, df["step_s"] * 1e3, color="#ddd", label="measured step")
    ax.barh(y, floor, color="tab:blue", height=0.5, label="memory floor (bytes ÷ bandwidth)")
    ax.scatter(over, y, marker="|", s=300, color="tab:red", zorder=3, label="fixed overhead (probe's step)")
    for i, (m, f, e) in enumerate(zip(df["step_s"] * 1e3, floor, df["efficiency"])):
        ax.annotate(f"{m:,.2f} ms · floor {f:,.3f} ms · {100 * e:,.1f} %", (m, i), textcoords="offset points",
                    xytext=(4, -3), fontsize=8)
    ax.set_yticks(list(y), names)
    ax.set_xscale("log")
    lo = float(min(floor.min(), (df["step_s"] * 1e3).min()))
    ax.set_xlim(lo / 3, float((df["step_s"] * 1e3).max()) * 60)
    ax.set_xlabel("ms per decode step (batch 1)")
    ax.set_title("Decode step against its memory-bound floor")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    return plots.finish(fig, source)
