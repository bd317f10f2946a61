"""Speculative decoding measured, greedy: the readable engine's loop (helpers.engine.speculative) with prompt
lookup and the early-exit draft, its verify pass against a decode step, read by rule; and transformers'
assisted generation with prompt lookup, its target passes counted by a hook (the engine's oracle). The
figures of notebook 07 and `make bench`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from typing import Sequence

from ..engine import speculative as loop
from ..engine.request import SamplingParams
from ..formulas.speculation import VerifyCost, pays, round_cost
from ..formulas.verdicts import Verdict, speed
from .naive import _ForwardCounter


@dataclass(frozen=True)
class Speculation:
    """transformers' assisted generation with prompt lookup, greedy, against plain greedy generation."""

    drafter: str
    k: int
    new_tokens: int
    target_passes: int
    plain_target_passes: int
    identical_to_greedy: bool

    @property
    def accepted(self) -> int:
        """Drafted tokens kept: every target pass adds one token of its own, the rest were drafts."""
        return self.new_tokens - self.target_passes

    @property
    def tokens_per_pass(self) -> float:
        return self.new_tokens / self.target_passes


def _generate(model, ids, new_tokens: int, **kw):
    import torch

    with torch.inference_mode():
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, **kw)


def speculate(model, ids, new_tokens: int, k: int = 4, ngram: int = 3) -> Speculation:
    """One greedy generation with transformers' prompt lookup (up to k tokens after the last n-gram's earlier
    occurrence, n ≤ `ngram`: the engine's PromptLookup rule) against plain greedy generation: the target's
    forward calls each way (a forward pre-hook) and whether the tokens are the same — the library's version
    of the engine's loop, its oracle."""
    import torch
    from transformers.utils import logging as hf_logging

    ids = torch.as_tensor(ids).reshape(1, -1).to(next(model.parameters()).device)
    kw = {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": ngram}
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()   # generate() warns about its own arguments
    counter = _ForwardCounter(model)
    try:
        plain = _generate(model, ids, new_tokens)
        plain_calls, counter.calls = counter.calls, 0
        spec = _generate(model, ids, new_tokens, **kw)
    finally:
        counter.close()
        hf_logging.set_verbosity(verbosity)
    return Speculation(f"prompt lookup (n-gram ≤ {ngram})", k, spec.shape[1] - ids.shape[1], counter.calls,
                       plain_calls, bool(torch.equal(plain, spec)))


# ----------------------------------------------------------------------------- the readable engine's loop

@dataclass(frozen=True)
class SpecRun:
    drafter: str
    k: int
    batch: int
    tokens_per_pass: float           # tokens per target pass
    target_passes: int
    seconds: float
    speedup: float                   # wall clock, over plain decoding
    acceptance_rate: float | None    # kept ÷ drafted (None for plain decoding)
    identical_to_plain: bool


def speculative_runs(model, prompt: Sequence[int], new_tokens: int, k: int = 4, draft_layers: int = 2,
                        ngram: int = 3, batch: int = 1, repeats: int = 2) -> list[SpecRun]:
    """Plain decoding, prompt lookup and the early-exit draft on `batch` copies of one prompt, greedy:
    tokens per target pass, target passes, wall-clock speed-up over plain decoding (same loop, no draft)
    and whether the tokens are the plain ones. After a short untimed warm-up, the three run `repeats`
    times interleaved, each timed by its fastest run (a shared machine only slows a run down)."""
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    blocks = batch * -(-(len(prompt) + new_tokens + k) // 16)     # the draft's cache, blocks of 16 tokens
    drafters = {"none": lambda: None, "prompt lookup": lambda: loop.PromptLookup(ngram),
                "draft model": lambda: loop.DraftModel(model, num_layers=draft_layers, num_blocks=blocks)}
    for make in drafters.values():
        loop.generate(model, [list(prompt)[:16]] * batch, SamplingParams(max_tokens=4, ignore_eos=True),
                             k=k, drafter=make())
    runs = {name: [] for name in drafters}
    for _ in range(repeats):
        for name, make in drafters.items():
            runs[name].append(loop.generate(model, [list(prompt)] * batch, params, k=k, drafter=make()))
    best = {name: min(r, key=lambda x: x.seconds) for name, r in runs.items()}
    plain = best.pop("none")
    rows = [SpecRun("none (plain decoding)", 0, batch, 1.0, plain.target_passes, plain.seconds, 1.0, None, True)]
    for res in best.values():
        kept = sum(a for _, a in res.rounds)
        drafted = sum(d for d, _ in res.rounds)
        rows.append(SpecRun(res.drafter, k, batch, res.tokens_per_pass, res.target_passes, res.seconds,
                            plain.seconds / res.seconds, kept / drafted if drafted else 0.0,
                            res.outputs == plain.outputs))
    return rows


def verify_cost(model, k: int, context: int, batch: int, repeats: int = 5) -> VerifyCost:
    """What a verify pass costs on this machine: one forward of `batch` sequences with `context` cached
    tokens each, k + 1 new rows per sequence, against the same with one row (a decode step); each the
    fastest of `repeats`. The measured twin of helpers.formulas.speculation.verify_step_ratio."""
    from ..engine.kv import PagedKVCache
    from ..engine.runner import Chunk, Runner

    kv = PagedKVCache.for_model(model, batch * -(-(context + k + 1) // 16), 16)
    runner = Runner(model, kv)
    for b in range(batch):
        kv.alloc.allocate(b, context + k + 1)

    def best(n: int) -> float:
        chunks = [Chunk(kv.table(b), [5] * n, context, n) for b in range(batch)]
        runner.forward(chunks)                              # warm-up (first shapes)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            runner.forward(chunks)
            times.append(time.perf_counter() - t0)
        return min(times)

    one, many = best(1), best(k + 1)
    return VerifyCost(context, batch, k, 1e3 * one, 1e3 * many, many / one)


def speculative_reading(rows: Sequence[SpecRun], verify: Sequence[VerifyCost], draft_share: float) -> list[Verdict]:
    """Each drafter's runs: tokens per target pass against 1, the wall clock against plain decoding at the same
    batch (helpers.formulas.verdicts.speed), and what the measured verify pass predicts for it
    (helpers.formulas.speculation.pays: a round's tokens against its cost in decode steps — the verify pass, and
    for a draft model k draft steps of `draft_share` of a step each)."""
    cost = {v.batch: v.verify_over_decode for v in verify}
    plain = {r.batch: r for r in rows if not r.k}
    out = []
    for r in rows:
        if not r.k:
            continue
        wall = speed(r.seconds, plain[r.batch].seconds, than="plain decoding")
        lookup = r.drafter.startswith("prompt lookup")           # no model: its drafts cost no step
        drafts = 0.0 if lookup else r.k * draft_share
        said = [f"{r.drafter} at batch {r.batch}: {r.tokens_per_pass:.2f} tokens per target pass "
                + ("(above 1: drafts were kept)" if r.tokens_per_pass > 1 else "(1: no draft kept)"),
                f"{wall.words} on the wall clock"]
        evidence = {"tokens_per_pass": r.tokens_per_pass, **wall.evidence}
        if r.batch in cost:
            steps = round_cost(cost[r.batch], r.k, 0.0 if lookup else draft_share)
            v = pays(r.tokens_per_pass, steps)
            said.append(f"a round costs {steps:.2f} decode steps here (verify {cost[r.batch]:.2f}"
                        + (f" + {r.k} drafts × {draft_share:.2f}" if drafts else "") + f"), so it {v.words}")
            evidence.update(pass_cost_steps=steps, predicted=v.evidence["ratio"])
        out.append(Verdict(", ".join(said), "speculative", evidence))
    return out
