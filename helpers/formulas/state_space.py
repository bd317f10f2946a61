"""Attention beyond the KV cache, in bytes and FLOPs: sparse attention, linear attention and state-space models.

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
  arXiv:2403.19887) keeps a KV cache in its few attention layers (helpers.formulas.memory.kv_cache_bytes) and
  Mamba states in the rest. Configs: helpers/presets/falcon-mamba-7b.json and jamba-1.5-mini.json
  (sources in presets/SOURCES.md).

These are the formulas: bytes carried per sequence, the break-even context, the FLOPs sparse attention
saves (notebook 10 shows them as tables).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .. import checks
from .memory import kv_cache_bytes
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
    """A hybrid's attention layers as a ModelSpec (for helpers.formulas.memory's KV bytes), or None for pure Mamba."""
    s = model if isinstance(model, SSMShape) else ssm_shape(model)
    if not s.attention_layers:
        return None
    spec = spec_from_config(s.config, f"{s.name} (attention layers)")
    n = len(s.attention_layers)
    return dataclasses.replace(spec, num_layers=n, layer_types=("full_attention",) * n, sliding_window=None)


def sequence_state_bytes(model, tokens: int, batch: int = 1, dtype: str = "bf16") -> int:
    """Everything a model carries per sequence after `tokens` tokens: KV cache (helpers.formulas.memory, for a
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


# ============================================================================ linear attention and sparse attention

def linear_attention_state_bytes(layers: int, heads: int, d_k: int, d_v: int, dtype: str = "bf16") -> int:
    """Bytes of a linear-attention decoder's state per sequence: layers × heads × (d_k·d_v + d_k) × bytes."""
    return math.ceil(layers * heads * (d_k * d_v + d_k) * DTYPE_BYTES[normalize_dtype(dtype)])


@dataclass(frozen=True)
class SparseDecodeSaving:
    """One decode step's FLOPs at `context` tokens, attending to every key against `keep` chosen ones."""

    model: str
    context: int
    keep: int
    dense_flops: int
    attention_share: float      # of the dense step, the share spent on attention over the context
    sparse_flops: int

    @property
    def flops_saved(self) -> float:
        """The share of the dense step's FLOPs that attending to `keep` keys saves."""
        return 1 - self.sparse_flops / self.dense_flops


def sparse_decode_saving(model: str = "mistral-7b-v0.3", context: int = 131072, keep: int = 2048) -> SparseDecodeSaving:
    """FLOPs of one decode step at `context` tokens, attending to all keys against `keep` chosen ones
    (helpers.formulas.compute_share.flop_terms; the linear layers and the head are unchanged). Choosing the keys
    costs extra (scoring them, or a cheaper index) and is not counted."""
    from .compute_share import flop_terms

    context = checks.count(context, "context")
    keep = checks.count(keep, "keep", maximum=context)
    dense = flop_terms(model, 1, context - 1)                  # the new token is the context-th
    sparse = flop_terms(model, 1, keep - 1)                    # as if only `keep` keys were there
    return SparseDecodeSaving(model, context, keep, dense.total, dense.context_share, sparse.total)


# ============================================================================ the rules that word these figures
