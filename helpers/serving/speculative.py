"""Speculative decoding measured, greedy: transformers' assisted generation with prompt lookup (the
library's version of the rule the readable engine's PromptLookup follows), counted round by round.

A drafter proposes k tokens, the target checks them all in one forward pass and keeps the longest prefix it
agrees with, plus one token of its own (Leviathan et al., ICML 2023; Chen et al., 2023). Greedy, so the
output is exactly the target's greedy output. Prompt lookup drafts the continuation of the last n-gram's
earlier occurrence in the context (no model). The early-exit draft model is the engine's
(helpers.engine.speculative.DraftModel).

Counted, not inferred: the target's forward calls (a hook), tokens drafted and accepted (wrapping the
candidate generator's two methods), round by round. The two acceptance figures, accepted ÷ drafted and the
per-token α = accepted ÷ checked, and eq. 1 at that α: helpers.formulas.speculation (acceptance_model).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from .. import checks
from ..formulas.speculation import acceptance_model
from .naive import _ForwardCounter


@dataclass(frozen=True)
class Speculation:
    """One greedy generation with a drafter (transformers' assisted generation) against plain greedy."""

    drafter: str
    k: int
    new_tokens: int
    drafted: int
    accepted: int
    acceptance_rate: float           # accepted ÷ drafted
    rejections: int
    alpha: float                     # per-token acceptance, accepted ÷ checked
    rounds: int
    target_passes: int
    plain_target_passes: int
    tokens_per_pass: float           # tokens per target pass, measured
    expected_tokens_per_pass: float  # eq. 1, (1 − α^(k+1)) ÷ (1 − α), at the fitted α
    mean_drafted_per_pass: float     # per pass that drafted
    plain_s: float
    speculative_s: float
    speedup: float                   # wall clock, plain ÷ speculative
    identical_to_greedy: bool


@contextlib.contextmanager
def _count_drafts(stats: dict):
    """Wrap the prompt-lookup candidate generator's get_candidates and update_candidate_strategy to count drafted and
    accepted tokens (restored on exit)."""
    from transformers.generation import candidate_generator as cg

    classes = [cg.PromptLookupCandidateGenerator]
    saved = [(c, c.get_candidates, c.update_candidate_strategy) for c in classes]

    def wrap(get, update):
        def get_candidates(self, input_ids, *a, **kw):
            out = get(self, input_ids, *a, **kw)
            drafted = out[0].shape[1] - input_ids.shape[1]
            stats["drafted"] += drafted
            stats["passes with a draft"] += drafted > 0
            stats["last drafted"] = drafted
            return out

        def update_candidate_strategy(self, input_ids, scores, num_matches):
            stats["accepted"] += int(num_matches)
            stats["rounds"] += 1
            stats["per round"].append((stats["last drafted"], int(num_matches)))
            return update(self, input_ids, scores, num_matches)

        return get_candidates, update_candidate_strategy

    try:
        for c, get, update in saved:
            c.get_candidates, c.update_candidate_strategy = wrap(get, update)
        yield stats
    finally:
        for c, get, update in saved:
            c.get_candidates, c.update_candidate_strategy = get, update


def _generate(model, ids, new_tokens: int, **kw):
    import torch

    with torch.inference_mode():
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, **kw)


def speculate(model, ids, new_tokens: int, k: int = 4, ngram: int = 3) -> Speculation:
    """One greedy generation with prompt lookup (up to k tokens after the last n-gram's earlier occurrence,
    n ≤ `ngram`) against plain greedy generation, both timed, back to back: acceptance, target passes,
    tokens per pass (measured and expected from α), wall-clock speed-up, identical output.

    Counted: `drafted` and `accepted` from the candidate generator, `rounds` (its update calls), and
    independently `target_passes` (a hook on the target); tokens generated = accepted + target passes."""
    import torch
    from transformers.utils import logging as hf_logging

    from ..measure.timing import check_ids

    checks.count(new_tokens, "new_tokens")
    checks.count(k, "k", 1, 64)
    checks.count(ngram, "ngram", 1, 64)
    ids = check_ids(model, ids, new_tokens, "ids", one_sequence=True).to(next(model.parameters()).device)
    kw = {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": ngram}
    name = f"prompt lookup (n-gram ≤ {ngram})"
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()   # generate() warns about its own arguments
    counter = None
    try:
        _generate(model, ids[:, :8], 4)                 # warm-up, untimed
        _generate(model, ids[:, :8], 4, **kw)
        counter = _ForwardCounter(model)
        t0 = time.perf_counter()
        plain = _generate(model, ids, new_tokens)
        plain_s = time.perf_counter() - t0
        plain_calls = counter.calls
        counter.calls = 0
        stats = {"drafted": 0, "accepted": 0, "passes with a draft": 0, "rounds": 0, "last drafted": 0,
                 "per round": []}
        with _count_drafts(stats):
            t0 = time.perf_counter()
            spec = _generate(model, ids, new_tokens, **kw)
            spec_s = time.perf_counter() - t0
        spec_calls = counter.calls
    finally:
        if counter is not None:
            counter.close()
        hf_logging.set_verbosity(verbosity)
    made = spec.shape[1] - ids.shape[1]
    kept = stats["accepted"] / stats["drafted"] if stats["drafted"] else 0.0
    k_eff = stats["drafted"] / stats["passes with a draft"] if stats["passes with a draft"] else 0.0
    fit = acceptance_model(stats["per round"])
    return Speculation(name, k, made, stats["drafted"], stats["accepted"], kept, fit.rejections, fit.alpha,
                       stats["rounds"], spec_calls, plain_calls, made / spec_calls, fit.expected, k_eff,
                       plain_s, spec_s, plain_s / spec_s, bool(torch.equal(plain, spec)))
