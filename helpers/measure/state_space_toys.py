"""Attention beyond the KV cache, run on real tensors: toy Mamba and Jamba models whose transformers cache
is measured against helpers.formulas.state_space.sequence_state_bytes; linear attention in its parallel and
recurrent forms (Katharopoulos et al. 2020, arXiv:2006.16236, §3.2–3.4), which must agree; and sparse
attention's trade, one decode query against many keys, dense against top-k and sinks + window (StreamingLLM,
Xiao et al. 2023, arXiv:2309.17453).

The formulas are helpers.formulas.state_space; the tables and figure are helpers.present.state_space_figures;
toy_verdicts and sparse_verdicts word these results from their numbers (helpers.formulas.verdicts).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from ..formulas import verdicts
from ..formulas.state_space import sequence_state_bytes, ssm_shape
from .tensor_bytes import measured_cache_bytes, measured_state_bytes


@dataclass(frozen=True)
class ToyStateCheck:
    """What a toy model's transformers cache holds after `tokens` tokens, against the formula."""

    model: str
    tokens: int
    kv_bytes: int          # keys and values (a hybrid's attention layers)
    state_bytes: int       # Mamba conv and recurrent states
    formula_bytes: int     # helpers.formulas.state_space.sequence_state_bytes

    @property
    def total_bytes(self) -> int:
        return self.kv_bytes + self.state_bytes

    @property
    def equal(self) -> bool:
        return self.total_bytes == self.formula_bytes


@dataclass(frozen=True)
class SparsePattern:
    """One kind of query against one pattern of kept keys, compared with dense attention."""

    query: str               # "needle" (one early key matches strongly) or "diffuse"
    pattern: str             # "dense", "top-k" or "s sinks + window"
    keys_attended: int
    share_of_keys: float
    mass_kept: float         # the share of the dense softmax mass the kept keys carry
    output_error: float      # mean ‖o − o_dense‖ ÷ mean ‖v‖
    needle_kept: bool | None  # None for diffuse queries


# ============================================================================ state-space models

def toy_config(kind: str) -> dict[str, Any]:
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


def measure_toy_states(kind: str, lengths: Sequence[int] = (8, 64, 256), seed: int = 0) -> list[ToyStateCheck]:
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
        rows.append(ToyStateCheck(f"toy {kind}", n, measured_cache_bytes(cache), measured_state_bytes(cache),
                                  sequence_state_bytes(shape, n, 1, "fp32")))
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


@dataclass(frozen=True)
class LinearAttentionCheck:
    """Linear attention's recurrent form against its parallel form on random inputs."""

    tokens: int
    max_difference: float          # max |recurrent − parallel| over every output
    state_elements_per_head: int   # d_k·d_v + d_k: what a decoder carries, whatever the tokens


def check_linear_attention(tokens: int = 512, heads: int = 8, head_dim: int = 32, seed: int = 0) -> LinearAttentionCheck:
    """Both forms of causal linear attention over `tokens` random tokens (fp32): how far apart they are,
    and the size of the state the recurrent one ends with."""
    import torch

    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, 1, heads, tokens, head_dim, generator=g).unbind(0)
    out, state, norm = linear_attention_recurrent(q, k, v)
    return LinearAttentionCheck(tokens, float((out - linear_attention_parallel(q, k, v)).abs().max()),
                                state[0, 0].numel() + norm[0, 0].numel())


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
                          needle_at: int = 1000, queries: int = 32, seed: int = 0) -> list[SparsePattern]:
    """One decode-time query against `context` keys, three ways: dense, top-k and sinks + window, each
    of the two sparse ones attending to `keep` keys. Two kinds of query: 'needle' (one earlier key at
    `needle_at` matches it strongly: a fact stated once, far back) and 'diffuse' (random keys and
    queries: attention spread thin). Reported: the share of the dense softmax mass the kept keys carry,
    the output's distance from dense in units of a value vector's length (mean ‖o − o_dense‖ ÷ mean ‖v‖),
    and whether the needle was kept."""
    import torch

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
            rows.append(SparsePattern(kind, pattern, int(mask[0].sum()), float(mask[0].float().mean()),
                                      float((dense_p * mask).sum(-1).mean()),
                                      float((out - dense).norm(dim=-1).mean() / v.norm(dim=-1).mean()),
                                      bool(mask[..., needle_at].all()) if kind == "needle" else None))
    return rows


# ============================================================================ the rules that word them

def toy_verdicts(toys: Sequence[ToyStateCheck], linear: LinearAttentionCheck) -> list[verdicts.Verdict]:
    """The toy caches against the formula (byte for byte) and linear attention's two forms against each other
    (float rounding or not, at the unit scale of its random values: its outputs are averages of them)."""
    v = verdicts.byte_for_byte([t.equal for t in toys], "the formula", "toy run")
    r = verdicts.rounding(linear.max_difference, 1.0, "fp32", "the unit-variance values")
    return [verdicts.Verdict(f"transformers' real toy caches: {v}", "byte_for_byte", v.evidence),
            verdicts.Verdict(f"linear attention, recurrent against parallel over {linear.tokens} tokens: {r}", "rounding",
                             r.evidence)]


def sparse_verdicts(rows: Sequence[SparsePattern]) -> list[verdicts.Verdict]:
    """The sparse-attention demo in words from its numbers: which patterns keep the needle and how far each
    output is from dense; with diffuse attention, the share of the softmax mass each kept set carries (its
    band) and its output error."""
    out = []
    for kind in ("needle", "diffuse"):
        for r in (r for r in rows if r.query == kind and r.pattern != "dense"):
            mass = verdicts.share(r.mass_kept, 1, "the dense softmax mass")
            kept = ("keeps the needle" if r.needle_kept else "drops the needle") if kind == "needle" else f"keeps {mass}"
            out.append(verdicts.Verdict(
                f"{kind}: {r.pattern} ({r.keys_attended:,} keys, {r.share_of_keys:.1%} of them) {kept}; its output is "
                f"{r.output_error:.3f} of a value's length from dense", "sparse",
                {"mass_kept": r.mass_kept, "output_error": r.output_error}))
    return out
