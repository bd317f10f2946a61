"""Where the compute goes: text → tokens → embeddings → layers → head → next token.

Computed: the FLOPs of one forward pass split by part, from helpers.cost.stepcost (the owner of a forward
pass's FLOPs: 2 per parameter a token is multiplied by, plus attention's two context products, plus
the output head). The only split added here is which nn.Linear weights belong to the attention block
(q/k/v/o projections), read from the architecture built on the meta device; the MLP is the rest.

Measured: the time of each part of a real forward pass on the loaded model, with forward hooks
around the embedding, every layer's attention and MLP, the final norm and the head (synchronising
the device at each boundary), plus the tokenizer (text → tokens) and the greedy pick of the next token.
"""
from __future__ import annotations

import functools
import json
import time
from collections import defaultdict
from typing import Any, Sequence

from .specs import ModelSpec, build_meta_model, get_spec
from ..present import plots

TALK_LAYER_SHARE = 0.95  # the talk: "about 95 % of compute is in the transformer layers"


def _spec(model) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else get_spec(model)


@functools.lru_cache(maxsize=16)
def _attention_linear_params(cfg_json: str) -> int:
    """Weights of the nn.Linear layers inside each decoder layer's attention block (q/k/v/o), summed."""
    import torch.nn as nn

    model = build_meta_model(json.loads(cfg_json))
    return sum(m.weight.numel() for name, m in model.named_modules()
               if isinstance(m, nn.Linear) and ".self_attn." in f".{name}.")


def attention_projection_params(model) -> int:
    """Parameters of the attention projections (q, k, v, o) over all layers, from the architecture."""
    spec = _spec(model)
    return _attention_linear_params(json.dumps(spec.config, sort_keys=True))


def flop_terms(model, new_tokens: int, past_tokens: int = 0, logits_tokens: int = 1) -> dict[str, int]:
    """FLOPs of one forward pass by part; their sum is helpers.cost.stepcost.forward_cost's FLOPs (batch 1).

    Every FLOP formula is helpers.cost.stepcost's (forward_cost); this is the one place that calls it for this
    module. The weight matmuls are split into the attention projections and the MLP by parameter count.
    """
    from .stepcost import forward_cost

    spec = _spec(model)
    cost = forward_cost(spec, new_tokens, past_tokens, 1, logits_tokens=logits_tokens)
    proj = 2 * attention_projection_params(spec) * new_tokens
    terms = {
        "embedding (a lookup)": 0,
        "layers: attention projections (q, k, v, o)": proj,
        "layers: attention over the context (QKᵀ, softmax·V)": cost.attention_flops,
        "layers: MLP": cost.matmul_flops - proj,
        "head (logits)": cost.head_flops,
    }
    return terms


def compute_shares(model, new_tokens: int, past_tokens: int = 0, logits_tokens: int = 1) -> list[dict[str, Any]]:
    """Rows (part, FLOPs, share of the forward pass) for one forward pass."""
    terms = flop_terms(model, new_tokens, past_tokens, logits_tokens)
    total = sum(terms.values())
    return [{"part": k, "FLOPs": v, "share": v / total} for k, v in terms.items()]


def layer_share(model, new_tokens: int, past_tokens: int = 0, logits_tokens: int = 1) -> float:
    """Share of a forward pass's FLOPs inside the transformer layers (attention + MLP)."""
    terms = flop_terms(model, new_tokens, past_tokens, logits_tokens)
    return sum(v for k, v in terms.items() if k.startswith("layers")) / sum(terms.values())


def phase_args(phase: str, tokens: int) -> tuple[int, int]:
    """(new_tokens, past_tokens) of a prefill of `tokens` tokens or of one decode step at that context."""
    if phase == "prefill":
        return tokens, 0
    if phase == "decode":
        return 1, tokens
    raise ValueError(f"phase must be 'prefill' or 'decode', got {phase!r}")


def share_sweep(models: Sequence, lengths: Sequence[int], phases: Sequence[str] = ("prefill", "decode")):
    """Long-form rows: model, phase, tokens, and the share of each part (logits of the last position only)."""
    rows = []
    for m in models:
        spec = _spec(m)
        for phase in phases:
            for n in lengths:
                new, past = phase_args(phase, n)
                terms = flop_terms(spec, new, past)
                total = sum(terms.values())
                rows.append({"model": spec.name, "phase": phase, "tokens": n, "total FLOPs": total,
                             **{k: v / total for k, v in terms.items()},
                             "layers": sum(v for k, v in terms.items() if k.startswith("layers")) / total})
    return rows


def attention_crossover(model, phase: str = "prefill", limit: int = 2**22) -> int | None:
    """The smallest context length at which attention over the context costs as many FLOPs as every
    linear layer together (projections + MLP), or None when it never does up to `limit` tokens (a
    sliding window caps attention's cost per token)."""
    def over(n: int) -> bool:
        new, past = phase_args(phase, n)
        t = flop_terms(model, new, past)
        ctx = t["layers: attention over the context (QKᵀ, softmax·V)"]
        return ctx >= t["layers: attention projections (q, k, v, o)"] + t["layers: MLP"]

    if not over(limit):
        return None
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if over(mid) else (mid + 1, hi)
    return lo


# ============================================================================ measured

PARTS = ("tokenize (text → tokens)", "embedding", "layers: attention", "layers: MLP", "layers: norms and residuals",
         "final norm", "head (logits)", "other (rotary, masks, Python)", "next token (argmax)")


def _blocks(model):
    """(embedding, decoder layers, final norm, head) of a transformers causal LM (Mistral/Llama layout)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or not hasattr(layers[0], "self_attn") or not hasattr(layers[0], "mlp"):
        raise ValueError(f"{type(model).__name__} has no model.layers[i].self_attn / .mlp; "
                         "per-part timing supports Mistral/Llama-style decoders")
    return model.get_input_embeddings(), layers, getattr(inner, "norm", None), model.get_output_embeddings()


def prompt_from_text(tokenizer, text: str, tokens: int) -> list[int]:
    """The text's token ids, repeated until there are `tokens` of them."""
    ids = list(tokenizer(text)["input_ids"])
    if not ids:
        raise ValueError("the text tokenizes to nothing")
    return (ids * (tokens // len(ids) + 1))[:tokens]


def _timed_forward(model, ids, device: str, cache=None):
    """One forward pass with hooks: seconds per part and the whole, and the logits of the last position."""
    import torch

    from ..measure.hardware import synchronize

    embed, layers, norm, head = _blocks(model)
    spent: dict[str, float] = defaultdict(float)
    started: dict[str, float] = {}
    handles = []

    def watch(module, part: str) -> None:
        key = f"{part}#{id(module)}"

        def pre(*_):
            synchronize(device)
            started[key] = time.perf_counter()

        def post(*_):
            synchronize(device)
            spent[part] += time.perf_counter() - started.pop(key)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))

    watch(embed, "embedding")
    for layer in layers:
        watch(layer, "layer")
        watch(layer.self_attn, "layers: attention")
        watch(layer.mlp, "layers: MLP")
    if norm is not None:
        watch(norm, "final norm")
    watch(head, "head (logits)")
    try:
        synchronize(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model(input_ids=ids, cache=cache, use_cache=cache is not None, logits_to_keep=1)
        synchronize(device)
        spent["forward"] = time.perf_counter() - t0
    finally:
        for h in handles:
            h.remove()
    spent["layers: norms and residuals"] = spent.pop("layer") - spent["layers: attention"] - spent["layers: MLP"]
    inside = sum(spent[p] for p in ("embedding", "layers: attention", "layers: MLP", "layers: norms and residuals",
                                    "final norm", "head (logits)"))
    spent["other (rotary, masks, Python)"] = max(0.0, spent["forward"] - inside)
    return dict(spent), out.logits


def measure_parts(loaded, text: str, tokens: int, phase: str = "prefill", repeats: int = 5,
                  cpu_threads: int | None = 1) -> list[dict[str, Any]]:
    """Median seconds per part of the pipeline on the loaded model, over `repeats` runs after a warm-up.

    prefill: tokenize the text, one forward pass over `tokens` tokens, pick the next token.
    decode: the same text prefilled into a cache (untimed), then one step of one token at that context.
    On a CPU it runs on `cpu_threads` threads (helpers.measure.hierarchy.cpu_threads).
    """
    from ..measure.hierarchy import cpu_threads as _threads

    with _threads(cpu_threads, loaded.device):
        return _measure_parts(loaded, text, tokens, phase, repeats)


def _measure_parts(loaded, text: str, tokens: int, phase: str, repeats: int) -> list[dict[str, Any]]:
    import statistics

    import torch

    from ..measure.hardware import synchronize
    from ..measure.sweeps import new_cache

    new, past = phase_args(phase, tokens)
    model, device = loaded.model, loaded.device
    ids = torch.tensor([prompt_from_text(loaded.tokenizer, text, tokens + (1 if phase == "decode" else 0))],
                       device=device)
    samples: dict[str, list[float]] = defaultdict(list)
    for rep in range(repeats + 1):  # the first run warms up and is dropped
        t0 = time.perf_counter()
        loaded.tokenizer(text)
        tokenize_s = time.perf_counter() - t0
        cache = None
        if phase == "decode":
            cache = new_cache(model)
            with torch.inference_mode():
                model(input_ids=ids[:, :past], cache=cache, use_cache=True, logits_to_keep=1)
            step_ids = ids[:, past:past + 1]
        else:
            step_ids = ids
        spent, logits = _timed_forward(model, step_ids, device, cache)
        t0 = time.perf_counter()
        logits[:, -1].argmax(dim=-1).tolist()
        synchronize(device)
        spent["next token (argmax)"] = time.perf_counter() - t0
        spent["tokenize (text → tokens)"] = tokenize_s
        if rep:
            for k, v in spent.items():
                samples[k].append(v)
    med = {k: statistics.median(v) for k, v in samples.items()}
    total = sum(med[p] for p in PARTS)
    return [{"part": p, "seconds": med[p], "share": med[p] / total} for p in PARTS]


def side_by_side(flops_rows: list[dict], time_rows: list[dict]) -> list[dict[str, Any]]:
    """FLOP shares and time shares on common parts: embedding, attention, MLP, head, everything else."""
    def group(part: str) -> str:
        for key, name in (("embedding", "embedding"), ("attention", "attention"), ("MLP", "MLP"), ("head", "head")):
            if key in part:
                return name
        return "everything else"

    out: dict[str, dict[str, float]] = {g: {"FLOP share": 0.0, "time share": 0.0}
                                        for g in ("embedding", "attention", "MLP", "head", "everything else")}
    for r in flops_rows:
        out[group(r["part"])]["FLOP share"] += r["share"]
    for r in time_rows:
        out[group(r["part"])]["time share"] += r["share"]
    return [{"part": g, **v} for g, v in out.items()]


@plots.notes_when_empty('Share of compute in each part of a forward pass')
def share_figure(sweep, source: Any, threshold: float = TALK_LAYER_SHARE):
    """Share of FLOPs in all layers and in attention over the context, by length, prefill and decode."""
    from ..present import plots

    fig, axes = plots.figure(ncols=2, width=5.2, height=4)
    for ax, phase in zip(axes, ("prefill", "decode")):
        part = sweep[sweep["phase"] == phase]
        for (name, g), style in zip(part.groupby("model", sort=False), ("-", "--", ":", "-.")):
            ax.plot(g["tokens"], 100 * g["layers"], style, color="tab:orange", lw=2, label=f"{name}: all layers")
            ax.plot(g["tokens"], 100 * g["layers: attention over the context (QKᵀ, softmax·V)"], style,
                    color="tab:purple", label=f"{name}: attention over the context")
        ax.axhline(100 * threshold, color="grey", lw=1, ls="-.", label=f"the talk's {threshold:.0%}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("prompt tokens" if phase == "prefill" else "context (tokens in the cache)")
        ax.set_ylabel("share of the forward pass's FLOPs (%)")
        ax.set_title(f"{phase}: one {'prompt' if phase == 'prefill' else 'decode step'}", fontsize=10)
        ax.set_ylim(0, 101)
    axes[0].legend(fontsize=6.5, loc="center left")   # the empty middle-left of the prefill panel
    fig.suptitle("Where the FLOPs go, by context length")
    return plots.finish(fig, source)


@plots.notes_when_empty('FLOPs by part of a forward pass')
def parts_figure(table, tokens: int, source: Any):
    """FLOP share (computed) beside time share (measured) for each part, prefill and decode side by side."""
    from ..present import plots

    fig, axes = plots.figure(ncols=2, width=5, height=3.6)
    for ax, (phase, g) in zip(axes, table.groupby("phase", sort=False)):
        y = range(len(g))
        ax.barh([i + 0.2 for i in y], 100 * g["FLOP share"], height=0.4, color="tab:orange", label="FLOPs (computed)")
        ax.barh([i - 0.2 for i in y], 100 * g["time share"], height=0.4, color="tab:blue", label="time (measured)")
        ax.set_yticks(list(y), g["part"])
        ax.invert_yaxis()
        ax.set_xlabel("share (%)")
        ax.set_title(f"{phase}, {tokens} tokens", fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle("FLOPs against time, part by part")
    return plots.finish(fig, source)
