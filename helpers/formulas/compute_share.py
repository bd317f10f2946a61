"""Where the compute goes: the FLOPs of one forward pass by part (embedding, attention, MLP, head), and the bytes
of a decode step split the same way. Every FLOP and byte is helpers.formulas.stepcost's; the only split added is
which weights belong to the attention block (q/k/v/o: specs.param_breakdown), the MLP the rest.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Sequence

from .. import checks
from .specs import get_spec, param_breakdown
from .stepcost import attention_flops_per_key, forward_cost, matmul_params
from .units import dtype_bytes

TALK_LAYER_SHARE = 0.95  # the talk: "about 95 % of compute is in the transformer layers"
PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class FlopTerms:
    """FLOPs of one forward pass by part; `total` is stepcost.forward_cost's FLOPs (batch 1)."""

    embedding: int              # a lookup: no arithmetic
    attention_projections: int  # the layers' q, k, v, o projections
    attention_context: int      # the layers' attention over the context (QKᵀ, softmax·V)
    mlp: int
    head: int                   # the logits

    @property
    def linear(self) -> int:
        return self.attention_projections + self.mlp

    @property
    def layers(self) -> int:
        return self.attention_projections + self.attention_context + self.mlp

    @property
    def total(self) -> int:
        return self.embedding + self.layers + self.head

    @property
    def layer_share(self) -> float:
        return self.layers / self.total

    @property
    def context_share(self) -> float:
        return self.attention_context / self.total


def flop_terms(model, new_tokens: int, past_tokens: int = 0, logits_tokens: int = 1) -> FlopTerms:
    """forward_cost's FLOPs by part, the matmuls split by parameter count."""
    spec = get_spec(model)
    cost = forward_cost(spec, new_tokens, past_tokens, 1, logits_tokens=logits_tokens)
    proj = 2 * param_breakdown(spec).attention_projections * new_tokens
    return FlopTerms(0, proj, cost.attention_flops, cost.matmul_flops - proj, cost.head_flops)


def layer_share(model, new_tokens: int, past_tokens: int = 0, logits_tokens: int = 1) -> float:
    """Share of a forward pass's FLOPs inside the transformer layers (attention + MLP)."""
    return flop_terms(model, new_tokens, past_tokens, logits_tokens).layer_share


def phase_args(phase: str, tokens: int) -> tuple[int, int]:
    """(new_tokens, past_tokens) of a prefill of `tokens` tokens or of one decode step at that context."""
    return (tokens, 0) if checks.choice(phase, "phase", PHASES) == "prefill" else (1, tokens)


@dataclass(frozen=True)
class PhaseTerms:
    model: str
    phase: str
    tokens: int
    terms: FlopTerms


def share_sweep(models: Sequence, lengths: Sequence[int], phases: Sequence[str] = PHASES) -> list[PhaseTerms]:
    """The FLOPs by part of each model, phase and length (logits of the last position only)."""
    return [PhaseTerms(spec.name, phase, n, flop_terms(spec, *phase_args(phase, n)))
            for spec in map(get_spec, models) for phase in phases for n in lengths]


def attention_crossover(model, phase: str = "prefill", limit: int = 2**22) -> int | None:
    """The shortest context at which attention over it costs as many FLOPs as every linear layer together, or
    None up to `limit` tokens (a sliding window caps attention's cost per token)."""
    spec = get_spec(model)

    def over(n: int) -> bool:
        t = flop_terms(spec, *phase_args(phase, n))
        return t.attention_context >= t.linear

    return 1 + bisect_left(range(1, limit + 1), True, key=over) if over(limit) else None


@dataclass(frozen=True)
class ParityParts:
    """attention_crossover in closed form: a query against a key in one layer costs f = 4 × heads × head_dim
    FLOPs, a new token 2 per linear parameter; a decode step at context c attends to c + 1 keys per layer, so
    c = ⌈linear ÷ (L × f)⌉ − 1; a prefill of n tokens to n(n + 1)/2, so n = ⌈2 × linear ÷ (L × f)⌉ − 1. K/V heads
    appear nowhere (sharing them shrinks the cache, not the FLOPs). Under a window, `tokens` is the search's."""

    model: str
    phase: str
    layers: int
    flops_per_key: int     # one query × one key, one layer, all query heads
    linear_flops: int      # one new token through every linear layer (projections + MLP)
    keys_needed: float     # decode: linear ÷ (L × f), the keys per layer at parity; prefill: twice that
    tokens: int | None     # the parity length (None: never, a window caps attention's cost)
    windowed: bool
    context: int | None    # the model's own context (max_position_embeddings)


def parity_parts(model, phase: str = "decode") -> ParityParts:
    spec = get_spec(model)
    phase = checks.choice(phase, "phase", PHASES)
    f, linear, layers = attention_flops_per_key(spec), 2 * matmul_params(spec), spec.num_layers
    per = 1 if phase == "decode" else 2            # a prefill's mean query sees (n + 1)/2 keys
    windowed = "sliding_attention" in spec.layer_types
    tokens = attention_crossover(spec, phase) if windowed else max(1, -(-per * linear // (layers * f)) - 1)
    return ParityParts(spec.name, phase, layers, f, linear, per * linear / (layers * f), tokens, windowed,
                       spec.max_position_embeddings)


@dataclass(frozen=True)
class ByteTerms:
    """Bytes one decode step reads by part (batch 1); their sum is stepcost's total."""

    attention: int   # q/k/v/o weights + the KV cache read and written
    mlp: int         # the rest of the weights streamed (norms and embedding rows included)
    head: int        # the output head's weights (none apart when tied)

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.head


def byte_terms(model, context: int, dtype: str = "bf16") -> ByteTerms:
    spec = get_spec(model)
    cost = forward_cost(spec, 1, context, 1, dtype)
    size = dtype_bytes(dtype)
    proj = int(param_breakdown(spec).attention_projections * size)
    head = 0 if spec.tie_word_embeddings else int(spec.hidden_size * spec.vocab_size * size)
    return ByteTerms(proj + cost.kv_bytes, cost.weight_read_bytes - proj - head, head)


def attention_share_frame(models: Sequence = ("mistral-7b-v0.1", "mistral-7b-v0.3", "llama-3.1-8b", "qwen2.5-7b"),
                          tokens: Sequence[int] = (512, 2048, 4096, 32768), extra: dict | None = None):
    """Notebook 01's table, one row per model (`extra`'s named specs first): width, depth, window, context, the
    prompt length where attention's FLOPs reach the linear layers' in a prefill ("never" under a window), whether
    that is within its context, and attention's share (%) of the prefill at each length (NaN past the context)."""
    import pandas as pd

    rows = []
    for name, model in [*(extra or {}).items(), *((m, m) for m in models)]:
        spec = get_spec(model)
        parity, limit = attention_crossover(spec), spec.max_position_embeddings
        rows.append({"model": name, "hidden size": spec.hidden_size, "layers": spec.num_layers,
                     "window": spec.sliding_window or "none", "context (tokens)": limit,
                     "attention = matmuls at (tokens)": "never" if parity is None else parity,
                     "within its context": parity is not None and parity <= (limit or parity),
                     **{f"attention share at {n:,} (%)": round(100 * flop_terms(spec, n).context_share, 1)
                        if limit is None or n <= limit else float("nan") for n in tokens}})
    return pd.DataFrame(rows)
