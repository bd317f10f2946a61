"""Speculative decoding's arithmetic (Leviathan et al., ICML 2023, eq. 1 and its break-even). A drafter proposes
k tokens; the target checks them in one pass, keeps them up to the first it rejects and adds one of its own. With
each kept independently with probability α, the i-th draft counts only when drafts 1 … i are all kept (α^i), so
a pass yields 1 + α + … + α^k = (1 − α^(k+1)) ÷ (1 − α) tokens. A round costs the verify pass and k draft steps
(`round_cost`, in decode steps) and pays when its tokens ÷ its cost is above 1 (`break_even_alpha`).
"""
from __future__ import annotations

from dataclasses import dataclass


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """(1 − α^(k+1)) ÷ (1 − α), k + 1 at α = 1."""
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


@dataclass(frozen=True)
class TokensPerPass:
    """Eq. 1 term by term: the target's own token, then each draft's chance to be kept."""

    alpha: float
    k: int
    kept: tuple[float, ...]          # kept[i - 1] = α^i: the chance that drafts 1 … i are all kept
    total: float                     # 1 + Σ α^i, the expected tokens per pass
    closed_form: float               # (1 − α^(k+1)) ÷ (1 − α), the same sum
    whole_draft_kept: float          # α^k: the share of passes that keep all k drafts
    kept_share_of_drafted: float     # (total − 1) ÷ k: the share of drafted tokens a pass keeps, on average


def tokens_per_pass_parts(alpha: float, k: int) -> TokensPerPass:
    kept = tuple(alpha ** i for i in range(1, k + 1))
    total = 1 + sum(kept)
    return TokensPerPass(alpha, k, kept, total, expected_tokens_per_pass(alpha, k),
                         kept[-1] if kept else 1.0, (total - 1) / k if k else 0.0)


def round_cost(verify_over_decode: float, k: int, draft_share: float) -> float:
    """A round in decode steps: the verify pass (about 1 while memory-bound, up to k + 1 once compute-bound) plus
    k draft steps of `draft_share` of a decode step each (0 for prompt lookup, which runs no model)."""
    return verify_over_decode + k * draft_share


def break_even_alpha(k: int, cost: float, tol: float = 1e-12) -> float | None:
    """The α at which a round of k drafts yields as many tokens as it costs decode steps: 0 when it costs at most
    one step (any α pays), None above the k + 1 tokens a fully kept draft yields (no α pays); else by bisection,
    eq. 1 climbing with α from 1 to k + 1."""
    if cost <= 1:
        return 0.0
    if cost > k + 1:
        return None
    if cost == k + 1:                       # every draft must be kept (eq. 1 is flat in float arithmetic there)
        return 1.0
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens_per_pass(mid, k) < cost else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class VerifyCost:
    """A verify pass of k + 1 rows per sequence against a one-row decode step (measured:
    helpers.serving.speculative.verify_cost)."""

    context: int
    batch: int
    k: int
    decode_step_ms: float
    verify_pass_ms: float
    verify_over_decode: float


@dataclass(frozen=True)
class VerifyRatio(VerifyCost):
    """The same, both at a GPU's roofline floor."""

    verify_bound: str                # "memory" or "compute"
    decode_bound: str
    gpu: str


def verify_step_ratio(spec, k: int, context: int, batch: int, gpu: str = "H100 SXM",
                      dtype: str = "bf16") -> VerifyRatio:
    """A target pass over k + 1 tokens per sequence ÷ a decode step of one, both at a GPU's roofline floor: the
    same bytes, k + 1 times the FLOPs, so about 1 while memory-bound, up to k + 1 once compute-bound."""
    from .gpus import get_gpu
    from .roofline import step_floor
    from .stepcost import forward_cost

    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)
    one, many = (step_floor(forward_cost(spec, n, context, batch, dtype, logits_tokens=n), peak, g.bandwidth)
                 for n in (1, k + 1))
    return VerifyRatio(context, batch, k, 1e3 * one.seconds, 1e3 * many.seconds, many.seconds / one.seconds,
                       many.bound, one.bound, g.name)
