"""Attention beyond the KV cache: sparse attention, linear attention and state-space models (Mamba).

- Sparse attention: each query attends to chosen keys only — the top-k scores (dynamic) or a fixed
  pattern such as the first "sink" tokens plus a recent window (StreamingLLM: Xiao et al. 2023,
  arXiv:2309.17453). It saves the products with the keys left out; it risks whatever those keys held.
- Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs", arXiv:2006.16236, §3.2–3.4):
  with a feature map φ (elu + 1) in place of the softmax, causal attention is a recurrence over a
  fixed d_k × d_v state S = Σ φ(k) vᵀ and a normaliser z = Σ φ(k): the same output as the parallel
  form, from a state that never grows.
- State-space models (Mamba: Gu & Dao 2023, arXiv:2312.00752, §3): each Mamba layer carries an SSM
  state of d_inner × d_state numbers and a convolution window of d_inner × d_conv inputs, whatever
  the context length — as transformers' cache stores them (conv_states (batch, d_inner, d_conv),
  recurrent_states (batch, d_inner, d_state)). A hybrid such as Jamba (Lieber et al. 2024,
  arXiv:2403.19887) keeps a KV cache in its few attention layers (helpers.cost.memory.kv_cache_bytes) and
  Mamba states in the rest. Configs: helpers/presets/falcon-mamba-7b.json and jamba-1.5-mini.json
  (sources in presets/SOURCES.md).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .memory import kv_cache_bytes, measured_cache_bytes
from .specs import PRESET_DIR, ModelSpec, get_spec, load_config, spec_from_config
from .units import DTYPE_BYTES, normalize_dtype

SSM_PRESETS = {"falcon-mamba-7b": PRESET_DIR / "falcon-mamba-7b.json",
               "jamba-1.5-mini": PRESET_DIR / "jamba-1.5-mini.json"}


# ============================================================================ state-space models

@dataclass(frozen=True)
class SSMShape:
    """What a Mamba or hybrid model carries per sequence, from its config.json."""

    name: str
    model_type: str
    mamba_layers: tuple[int, ...]
    attention_layers: tuple[int, ...]
    d_inner: int
    d_state: int
    d_conv: int
    config: dict = dataclasses.field(repr=False, compare=False, hash=False, default_factory=dict)


def ssm_shape(model: str | Path | dict) -> SSMShape:
    """The Mamba shape of a falcon_mamba / mamba / jamba config (a name in SSM_PRESETS, a path or a dict)."""
    if isinstance(model, str) and model in SSM_PRESETS:
        name, (_, cfg) = model, load_config(SSM_PRESETS[model])
    else:
        name, cfg = load_config(model)
    kind = cfg.get("model_type")
    layers = cfg.get("num_hidden_layers")
    if kind in ("mamba", "falcon_mamba"):
        d_inner = cfg.get("intermediate_size") or cfg["expand"] * cfg["hidden_size"]
        return SSMShape(name, kind, tuple(range(layers)), (), d_inner, cfg["state_size"], cfg["conv_kernel"], cfg)
    if kind == "jamba":
        types = cfg.get("layers_block_type") or [
            "attention" if i % cfg["attn_layer_period"] == cfg["attn_layer_offset"] else "mamba" for i in range(layers)]
        attn = tuple(i for i, t in enumerate(types) if t == "attention")
        mamba = tuple(i for i, t in enumerate(types) if t != "attention")
        return SSMShape(name, kind, mamba, attn, cfg["mamba_expand"] * cfg["hidden_size"], cfg["mamba_d_state"],
                        cfg["mamba_d_conv"], cfg)
    raise ValueError(f"model_type {kind!r} is not a state-space model here; allowed: mamba, falcon_mamba, jamba "
                     f"(presets: {', '.join(SSM_PRESETS)})")


def ssm_state_bytes(model, batch: int = 1, dtype: str = "bf16") -> int:
    """Bytes of the Mamba states of `batch` sequences, at any context length:
    batch × Mamba layers × d_inner × (d_state + d_conv) × bytes per element."""
    s = model if isinstance(model, SSMShape) else ssm_shape(model)
    size = DTYPE_BYTES[normalize_dtype(dtype)]
    return math.ceil(batch * len(s.mamba_layers) * s.d_inner * (s.d_state + s.d_conv) * size)


def attention_part(model) -> ModelSpec | None:
    """A hybrid's attention layers as a ModelSpec (for helpers.cost.memory's KV bytes), or None for pure Mamba."""
    s = model if isinstance(model, SSMShape) else ssm_shape(model)
    if not s.attention_layers:
        return None
    spec = spec_from_config(s.config, f"{s.name} (attention layers)")
    n = len(s.attention_layers)
    return dataclasses.replace(spec, num_layers=n, layer_types=("full_attention",) * n, sliding_window=None)


def sequence_state_bytes(model, tokens: int, batch: int = 1, dtype: str = "bf16") -> int:
    """Everything a model carries per sequence after `tokens` tokens: KV cache (helpers.cost.memory, for a
    transformer or a hybrid's attention layers) plus Mamba states (fixed)."""
    if isinstance(model, str) and model not in SSM_PRESETS:
        return kv_cache_bytes(get_spec(model), tokens, batch, dtype)
    s = model if isinstance(model, SSMShape) else ssm_shape(model)
    attn = attention_part(s)
    return ssm_state_bytes(s, batch, dtype) + (kv_cache_bytes(attn, tokens, batch, dtype) if attn else 0)


def state_vs_kv(models: Sequence[str] = ("mistral-7b-v0.3", "mistral-7b-v0.1", "jamba-1.5-mini", "falcon-mamba-7b"),
                contexts: Sequence[int] = (1024, 4096, 32768, 131072, 262144), dtype: str = "bf16") -> list[dict]:
    """Long-form rows: bytes one sequence carries at each context, per model."""
    return [{"model": m, "tokens": n, "bytes": sequence_state_bytes(m, n, 1, dtype)} for m in models for n in contexts]


def break_even_tokens(fixed_bytes: int, model: str = "mistral-7b-v0.3", dtype: str = "bf16") -> float:
    """The context at which a transformer's KV cache equals a fixed state: fixed ÷ KV bytes per token."""
    return fixed_bytes / kv_cache_bytes(get_spec(model), 1, 1, dtype)


def toy_config(kind: str, tokens_window: int | None = None) -> dict[str, Any]:
    """A toy falcon_mamba or jamba config (random weights) whose cache is small enough to measure here."""
    if kind == "falcon_mamba":
        return {"model_type": "falcon_mamba", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                "state_size": 16, "conv_kernel": 4, "vocab_size": 256, "time_step_rank": 8}
    if kind == "jamba":
        return {"model_type": "jamba", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 8,
                "num_attention_heads": 4, "num_key_value_heads": 2, "mamba_d_state": 16, "mamba_d_conv": 4,
                "mamba_expand": 2, "mamba_dt_rank": 8, "attn_layer_period": 8, "attn_layer_offset": 4,
                "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 2, "num_experts_per_tok": 1,
                "vocab_size": 256}
    raise ValueError(f"kind must be 'falcon_mamba' or 'jamba', got {kind!r}")


def _state_tensor_bytes(cache) -> int:
    """Bytes of the Mamba state tensors a transformers cache holds (dict-valued conv/recurrent states),
    which helpers.cost.memory.measured_cache_bytes (keys and values) does not count."""
    import torch

    total = 0
    for layer in getattr(cache, "layers", []):
        for value in vars(layer).values():
            if isinstance(value, dict):
                total += sum(t.numel() * t.element_size() for t in value.values() if isinstance(t, torch.Tensor))
    return total


def measure_toy_states(kind: str, lengths: Sequence[int] = (8, 64, 256), seed: int = 0) -> list[dict[str, Any]]:
    """A toy model (random weights, fp32) run forward over each length with transformers' cache: the
    bytes it holds against sequence_state_bytes."""
    import logging

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = toy_config(kind)
    c = {k: v for k, v in cfg.items() if k != "model_type"}
    logging.getLogger("transformers").setLevel(logging.ERROR)  # "falling back to the PyTorch kernel" notices
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **c), dtype=torch.float32).eval()
    shape = ssm_shape({**cfg, "_name_or_path": f"toy {kind}"})
    rows = []
    for n in lengths:
        ids = torch.randint(0, cfg["vocab_size"], (1, n), generator=torch.Generator().manual_seed(seed))
        with torch.inference_mode():
            cache = model(input_ids=ids, use_cache=True).cache
        kv, states = measured_cache_bytes(cache), _state_tensor_bytes(cache)
        formula = sequence_state_bytes(shape, n, 1, "fp32")
        rows.append({"model": f"toy {kind}", "tokens": n, "measured KV (B)": kv, "measured states (B)": states,
                     "measured total (B)": kv + states, "formula (B)": formula, "equal": kv + states == formula})
    return rows


# ============================================================================ linear attention

def _phi(x):
    import torch

    return torch.nn.functional.elu(x) + 1


def linear_attention_parallel(q, k, v):
    """Causal linear attention, parallel form: A = φ(Q)φ(K)ᵀ masked lower-triangular; O = AV ÷ A·1."""
    import torch

    a = _phi(q) @ _phi(k).transpose(-1, -2)
    a = a * torch.ones(a.shape[-2:], dtype=torch.bool, device=q.device).tril()
    return (a @ v) / a.sum(dim=-1, keepdim=True)


def linear_attention_recurrent(q, k, v):
    """The same, as a recurrence: state S (d_k × d_v) and normaliser z (d_k) updated token by token.
    Returns (outputs, final state S, final z): the state is all a decoder has to carry."""
    import torch

    fq, fk = _phi(q), _phi(k)
    s = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=q.dtype, device=q.device)
    z = torch.zeros(*q.shape[:-2], q.shape[-1], dtype=q.dtype, device=q.device)
    outs = []
    for t in range(q.shape[-2]):
        s = s + fk[..., t, :, None] * v[..., t, None, :]
        z = z + fk[..., t, :]
        outs.append((fq[..., t, None, :] @ s).squeeze(-2) / (fq[..., t, :] * z).sum(-1, keepdim=True))
    return torch.stack(outs, dim=-2), s, z


def linear_attention_state_bytes(layers: int, heads: int, d_k: int, d_v: int, dtype: str = "bf16") -> int:
    """Bytes of a linear-attention decoder's state per sequence: layers × heads × (d_k·d_v + d_k) × bytes."""
    return math.ceil(layers * heads * (d_k * d_v + d_k) * DTYPE_BYTES[normalize_dtype(dtype)])


# ============================================================================ sparse attention

def _keep_masks(scores, keep: int, sinks: int):
    """(top-k mask, sinks + recent-window mask) over the keys, each keeping `keep` keys per query."""
    import torch

    n = scores.shape[-1]
    top = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, scores.topk(keep, dim=-1).indices, True)
    window = torch.zeros(n, dtype=torch.bool)
    window[:sinks] = True
    window[n - (keep - sinks):] = True
    return top, window.expand_as(scores)


def sparse_attention_demo(context: int = 4096, head_dim: int = 64, keep: int = 256, sinks: int = 4,
                          needle_at: int = 1000, queries: int = 32, seed: int = 0) -> list[dict[str, Any]]:
    """One decode-time query against `context` keys, three ways: dense, top-k and sinks + window, each
    of the two sparse ones attending to `keep` keys. Two kinds of query: 'needle' (one earlier key at
    `needle_at` matches it strongly: a fact stated once, far back) and 'diffuse' (random keys and
    queries: attention spread thin). Reported: the share of the dense softmax mass the kept keys carry,
    the output's distance from dense in units of a value vector's length (mean ‖o − o_dense‖ ÷ mean ‖v‖),
    and whether the needle was kept."""
    import torch

    if not 0 < sinks < keep < context:
        raise ValueError(f"need 0 < sinks < keep < context, got sinks={sinks}, keep={keep}, context={context}")
    if not sinks <= needle_at < context - (keep - sinks):
        raise ValueError(f"needle_at must lie between the sinks and the recent window: {sinks} ≤ needle_at < "
                         f"{context - (keep - sinks)}, got {needle_at}")
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(queries, context, head_dim, generator=g)
    v = torch.randn(queries, context, head_dim, generator=g)
    q = torch.randn(queries, 1, head_dim, generator=g)
    rows = []
    for kind in ("needle", "diffuse"):
        keys = k.clone()
        if kind == "needle":
            keys[:, needle_at] = q[:, 0] * 4.0  # a key that matches the query: its score dominates
        scores = (q @ keys.transpose(-1, -2)) / math.sqrt(head_dim)
        dense_p = torch.softmax(scores, dim=-1)
        dense = dense_p @ v
        top, window = _keep_masks(scores, keep, sinks)
        for pattern, mask in (("dense", torch.ones_like(top)), (f"top-{keep}", top), (f"{sinks} sinks + window", window)):
            p = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            out = p @ v
            rows.append({"query": kind, "pattern": pattern, "keys attended": int(mask[0].sum()),
                         "share of keys": float(mask[0].float().mean()),
                         "dense softmax mass kept": float((dense_p * mask).sum(-1).mean()),
                         "output error (÷ ‖v‖)": float((out - dense).norm(dim=-1).mean() / v.norm(dim=-1).mean()),
                         "needle kept": bool(mask[..., needle_at].all()) if kind == "needle" else None})
    return rows


def state_figure(rows, linear_state_bytes: int | None, source: Any):
    """Bytes one sequence carries against context (log–log), one line per model, plus a flat linear-attention state."""
    from ..present import plots

    colours = {"mistral-7b-v0.3": ("tab:red", "-"), "mistral-7b-v0.1": ("tab:red", "--"),
               "jamba-1.5-mini": ("tab:purple", "-"), "falcon-mamba-7b": ("tab:green", "-")}
    fig, ax = plots.figure(width=7.5, height=4.3)
    for name in dict.fromkeys(r["model"] for r in rows):
        pts = [r for r in rows if r["model"] == name]
        colour, style = colours.get(name, ("black", "-"))
        ax.loglog([r["tokens"] for r in pts], [r["bytes"] / 2**30 for r in pts], style, color=colour, marker=".", label=name)
    if linear_state_bytes:
        ax.axhline(linear_state_bytes / 2**30, color="tab:blue", ls=":",
                   label="linear attention, Mistral-shaped (32 layers × 8 heads × 128²)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length (tokens, one sequence)")
    ax.set_ylabel("bytes carried per sequence (GiB, 2³⁰ B)")
    ax.set_title("KV cache against fixed-size state")
    ax.legend(fontsize=7)
    return plots.finish(fig, source)


def sparse_decode_saving(model: str = "mistral-7b-v0.3", context: int = 131072, keep: int = 2048) -> dict[str, Any]:
    """FLOPs of one decode step at `context` tokens, attending to all keys against `keep` chosen ones
    (helpers.cost.compute_share.flop_terms; the linear layers and the head are unchanged). Choosing the keys
    costs extra (scoring them, or a cheaper index) and is not counted."""
    from .compute_share import flop_terms

    if not 0 < keep <= context:
        raise ValueError(f"keep must be between 1 and the context ({context}), got {keep}")
    dense = flop_terms(model, 1, context - 1)                  # the new token is the context-th
    sparse = flop_terms(model, 1, keep - 1)                    # as if only `keep` keys were there
    total_dense, total_sparse = dense.total, sparse.total
    return {"model": model, "context": context, "keep": keep, "dense FLOPs": total_dense,
            "attention share (dense)": dense.context_share, "sparse FLOPs": total_sparse,
            "FLOPs saved": 1 - total_sparse / total_dense}
