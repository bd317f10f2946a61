"""Attention beyond the KV cache, in bytes and FLOPs: what one sequence carries and what sparse attention saves.
Sparse attention attends to chosen keys only (top-k, or sink tokens plus a recent window: StreamingLLM,
arXiv:2309.17453). Linear attention (Katharopoulos et al. 2020, arXiv:2006.16236, §3.2–3.4) carries a fixed
d_k × d_v state and a normaliser. Mamba (Gu & Dao 2023, arXiv:2312.00752, §3) carries per layer a d_inner ×
d_state SSM state and a d_inner × d_conv convolution window, as transformers' cache stores them; a hybrid such as
Jamba (arXiv:2403.19887) keeps a KV cache in its few attention layers. Configs: helpers/presets/ (SOURCES.md).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .. import checks
from .memory import kv_cache_bytes
from .specs import PRESET_DIR, get_spec, load_config, spec_from_config
from .units import DTYPE_BYTES, normalize_dtype

SSM_PRESETS = {"falcon-mamba-7b": PRESET_DIR / "falcon-mamba-7b.json",
               "jamba-1.5-mini": PRESET_DIR / "jamba-1.5-mini.json"}


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
    name, cfg = load_config(SSM_PRESETS.get(model, model) if isinstance(model, str) else model)
    name = model if isinstance(model, str) and model in SSM_PRESETS else name
    kind, layers = cfg.get("model_type"), cfg.get("num_hidden_layers")
    if kind in ("mamba", "falcon_mamba"):
        d_inner = cfg.get("intermediate_size") or cfg["expand"] * cfg["hidden_size"]
        return SSMShape(name, kind, tuple(range(layers)), (), d_inner, cfg["state_size"], cfg["conv_kernel"], cfg)
    if kind == "jamba":
        types = cfg.get("layers_block_type") or [
            "attention" if i % cfg["attn_layer_period"] == cfg["attn_layer_offset"] else "mamba" for i in range(layers)]
        attn = tuple(i for i, t in enumerate(types) if t == "attention")
        return SSMShape(name, kind, tuple(i for i in range(len(types)) if i not in attn), attn,
                        cfg["mamba_expand"] * cfg["hidden_size"], cfg["mamba_d_state"], cfg["mamba_d_conv"], cfg)
    raise ValueError(f"model_type {kind!r} is not a state-space model here; allowed: mamba, falcon_mamba, jamba "
                     f"(presets: {', '.join(SSM_PRESETS)})")


def ssm_state_bytes(model, batch: int = 1, dtype: str = "bf16") -> int:
    """batch × Mamba layers × d_inner × (d_state + d_conv) × bytes, at any context length."""
    s = model if isinstance(model, SSMShape) else ssm_shape(model)
    return math.ceil(batch * len(s.mamba_layers) * s.d_inner * (s.d_state + s.d_conv) * DTYPE_BYTES[normalize_dtype(dtype)])


def sequence_state_bytes(model, tokens: int, batch: int = 1, dtype: str = "bf16") -> int:
    """Everything a model carries per sequence after `tokens` tokens: the KV cache (of a transformer or of a
    hybrid's attention layers) plus the Mamba states (fixed)."""
    if isinstance(model, str) and model not in SSM_PRESETS:
        return kv_cache_bytes(get_spec(model), tokens, batch, dtype)
    s = model if isinstance(model, SSMShape) else ssm_shape(model)
    if not (n := len(s.attention_layers)):
        return ssm_state_bytes(s, batch, dtype)
    attn = dataclasses.replace(spec_from_config(s.config, f"{s.name} (attention layers)"), num_layers=n,
                               layer_types=("full_attention",) * n, sliding_window=None)
    return ssm_state_bytes(s, batch, dtype) + kv_cache_bytes(attn, tokens, batch, dtype)


def state_vs_kv(models: Sequence[str] = ("mistral-7b-v0.3", "mistral-7b-v0.1", "jamba-1.5-mini", "falcon-mamba-7b"),
                contexts: Sequence[int] = (1024, 4096, 32768, 131072, 262144), dtype: str = "bf16") -> list[dict]:
    """Long-form rows: bytes one sequence carries at each context, per model."""
    return [{"model": m, "tokens": n, "bytes": sequence_state_bytes(m, n, 1, dtype)} for m in models for n in contexts]


def break_even_tokens(fixed_bytes: int, model: str = "mistral-7b-v0.3", dtype: str = "bf16") -> float:
    """The context at which a transformer's KV cache equals a fixed state: fixed ÷ KV bytes per token."""
    return fixed_bytes / kv_cache_bytes(get_spec(model), 1, 1, dtype)


def linear_attention_state_bytes(layers: int, heads: int, d_k: int, d_v: int, dtype: str = "bf16") -> int:
    """layers × heads × (d_k·d_v + d_k) × bytes: a linear-attention decoder's state per sequence."""
    return math.ceil(layers * heads * (d_k * d_v + d_k) * DTYPE_BYTES[normalize_dtype(dtype)])


def sparse_decode_saving(model: str = "mistral-7b-v0.3", context: int = 131072, keep: int = 2048) -> dict:
    """compute_share.flop_terms of one decode step at `context` tokens, dense_flops attending to every key against
    sparse_flops to `keep` chosen ones (the linear layers and the head unchanged; choosing the keys, by scoring them
    or a cheaper index, is not counted), and attention_share: of the dense step, the share spent on attention."""
    from .compute_share import flop_terms

    context = checks.count(context, "context")
    keep = checks.count(keep, "keep", maximum=context)
    dense, sparse = flop_terms(model, 1, context - 1), flop_terms(model, 1, keep - 1)   # the new token is the last
    return {"model": model, "context": context, "keep": keep, "dense_flops": dense.total,
            "attention_share": dense.context_share, "sparse_flops": sparse.total}
