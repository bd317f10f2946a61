"""Speculative decoding measured, greedy: the engine's loop (helpers.engine.speculative) with prompt lookup
and the early-exit draft, on a copy-edit (something to copy) and an open question (nothing), alone and as
one batch; where prompt lookup's kept drafts came from; the verify pass against a decode step; and
transformers' assisted generation with prompt lookup as the oracle (notebook 07, `make bench`)."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from ..engine import speculative as loop
from ..engine.request import SamplingParams
from ..formulas.regime import label, ratio
from ..formulas.speculation import VerifyCost
from .naive import _ForwardCounter

# A prompt whose answer repeats its context (an edit) and one whose answer has nothing to copy (an open
# question); the passages are paragraphs of the novel the tiny model trains on (helpers.measure.quality).
EDIT = "Copy-edit this passage: keep every word, correct only the punctuation.\n\n{passage}\n\nThe passage, copy-edited:\n\n"
QUESTIONS = ("Question: What makes a friendship last?\nAnswer:", "Question: Why do people travel?\nAnswer:")
PASSAGE_CHARS = 500


@dataclass(frozen=True)
class Prompt:
    name: str
    ids: tuple[int, ...]


def _passages(n: int) -> list[str]:
    """The first n paragraphs of the novel's training part longer than PASSAGE_CHARS, each cut at its last
    sentence end within PASSAGE_CHARS."""
    from ..measure.quality import split

    out = []
    for p in split()[0].split("\n\n"):
        p = " ".join(p.split())
        if len(p) > PASSAGE_CHARS:
            cut = p[:PASSAGE_CHARS]
            out.append(cut[:cut.rfind(". ") + 1] or cut)
        if len(out) == n:
            break
    return out


def prompts(tokenizer) -> list[Prompt]:
    """Two copy-edits of a passage and two open questions, alternating, as token ids."""
    from ..measure.quality import encode

    edits = [Prompt(f"copy-edit {i + 1}", tuple(encode(tokenizer, EDIT.format(passage=p))))
             for i, p in enumerate(_passages(len(QUESTIONS)))]
    opens = [Prompt(f"open question {i + 1}", tuple(encode(tokenizer, q))) for i, q in enumerate(QUESTIONS)]
    return [p for pair in zip(edits, opens) for p in pair]


def copies(prompt: Sequence[int], output: Sequence[int], k: int, ngram: int = 3) -> Counter:
    """Replays the engine's greedy loop with prompt lookup over a known greedy `output` (drafts of at most k,
    kept while they equal it), counting its rounds (the target passes it takes) and each drafted token by where
    it was copied from: prompt_drafted, prompt_kept, output_drafted, output_kept (position j is the prompt's
    when j < len(prompt), else the model's own output)."""
    lookup, out, pos, n = loop.PromptLookup(ngram), list(output), 0, Counter()
    while pos < len(out):
        tokens = list(prompt) + out[:pos]
        room = min(k, len(out) - pos - 1)
        start = lookup.match(tokens) if room > 0 else None
        draft = [] if start is None else tokens[start:start + room]
        kept = next((i for i, (d, o) in enumerate(zip(draft, out[pos:])) if d != o), len(draft))
        for i in range(len(draft)):
            where = "prompt" if start + i < len(prompt) else "output"
            n[f"{where}_drafted"] += 1
            n[f"{where}_kept"] += i < kept
        pos += kept + 1
        n["rounds"] += 1
    return n


def output_loop(tokens: Sequence[int], max_period: int = 8, min_repeats: int = 3) -> tuple[tuple[int, ...], int]:
    """The cycle a token sequence ends in — the period p ≤ max_period whose repetition covers the longest
    tail (the shortest p on a tie) — and how many times it repeats there; ((), 0) when no cycle repeats
    min_repeats times."""
    t = list(tokens)
    best, cover = 0, 0
    for p in range(1, max_period + 1):
        j = len(t) - 1
        while j - p >= 0 and t[j] == t[j - p]:
            j -= 1
        c = len(t) - 1 - j + p if j < len(t) - 1 else 0
        if c > cover:
            best, cover = p, c
    if not best or cover < min_repeats * best:
        return (), 0
    start = len(t) - cover
    return tuple(t[start:start + best]), cover // best


def _loop_text(outputs: Sequence[Sequence[int]], decode) -> str:
    """The loop each output ends in, as text (a newline shown as \\n): "“text” × times" for one output, else
    each distinct loop with how many of the outputs end in it; "" when none loops."""
    def shown(cycle):
        return "“" + str(decode(cycle)).replace("\n", "\\n") + "”"

    found = [output_loop(o) for o in outputs]
    if len(outputs) == 1:
        cycle, times = found[0]
        return f"{shown(cycle)} × {times}" if times else ""
    named = Counter(cycle for cycle, times in found if times)
    return ", ".join(f"{shown(c)} in {m} of {len(outputs)}" for c, m in named.items())


def speculative_runs(model, chosen: Sequence[Prompt], new_tokens: int, k: int = 4, draft_layers: int = 2,
                     ngram: int = 3, repeats: int = 3, decode=repr, library: bool = True) -> pd.DataFrame:
    """Plain decoding, prompt lookup and the early-exit draft on the prompts `chosen` served as one batch
    (one prompt: batch 1), greedy, a row each: tokens per target pass (per request), target passes, kept ÷
    drafted, wall-clock speed-up over plain decoding (the same loop, no draft; labelled), whether the tokens are
    the plain ones, the loop the output ends in; for prompt lookup where its drafts came from (`copies`) and, at
    batch 1, transformers' target passes with the same rule. After a short untimed warm-up the three run `repeats`
    times interleaved, each timed by its fastest run (a shared machine only slows a run down). `decode` turns the
    loop's token ids into text."""
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    ids = [list(p.ids) for p in chosen]
    blocks = sum(-(-(len(p) + new_tokens + k) // 16) for p in ids)      # the draft's cache, blocks of 16 tokens
    drafters = {"none": lambda: None, "prompt lookup": lambda: loop.PromptLookup(ngram),
                "draft model": lambda: loop.DraftModel(model, num_layers=draft_layers, num_blocks=blocks)}
    for make in drafters.values():
        loop.generate(model, [p[:16] for p in ids], SamplingParams(max_tokens=4, ignore_eos=True), k=k, drafter=make())
    runs = {name: [] for name in drafters}
    for _ in range(repeats):
        for name, make in drafters.items():
            runs[name].append(loop.generate(model, ids, params, k=k, drafter=make()))
    best = {name: min(r, key=lambda x: x.seconds) for name, r in runs.items()}
    plain = best["none"]
    looped = _loop_text(plain.outputs, decode)                      # every drafter's output is the plain one
    c = sum((copies(p, o, k, ngram) for p, o in zip(ids, plain.outputs)), Counter())   # prompt lookup's drafts
    copied = lambda where: f"{c[where + '_kept']} of {c[where + '_drafted']}"  # noqa: E731
    rows = []
    for name, res in best.items():
        kept, drafted = sum(a for _, a in res.rounds), sum(d for d, _ in res.rounds)
        lookup, drafts, speedup = name == "prompt lookup", name != "none", ratio(plain.seconds, res.seconds)
        rows.append({"prompt": chosen[0].name if len(chosen) == 1 else f"{len(chosen)} different prompts",
                     "batch": len(ids), "drafter": res.drafter, "k": k if drafts else 0,
                     "tokens per target pass": res.tokens_per_pass, "target passes": res.target_passes,
                     "transformers' target passes": speculate(model, ids[0], new_tokens, k=k, ngram=ngram)[1]
                     if lookup and library and len(ids) == 1 else None,
                     "kept ÷ drafted": (kept / drafted if drafted else 0.0) if drafts else None,
                     "drafts from the prompt (kept of drafted)": copied("prompt") if lookup else None,
                     "drafts from its own output (kept of drafted)": copied("output") if lookup else None,
                     "output ends in the loop": looped if looped and res.outputs == plain.outputs else "–",
                     "seconds": res.seconds, "speed-up": speedup, "label": label(speedup) if drafts else "–",
                     "identical to plain": res.outputs == plain.outputs})
    return pd.DataFrame(rows)


def verify_cost(model, k: int, context: int, batch: int, repeats: int = 5) -> VerifyCost:
    """One forward of `batch` sequences of `context` cached tokens with k + 1 new rows each against one row (a
    decode step), each the fastest of `repeats`: the measured twin of speculation.verify_step_ratio."""
    from ..engine.kv import PagedKVCache
    from ..engine.runner import Chunk, Runner

    kv = PagedKVCache.for_model(model, batch * -(-(context + k + 1) // 16), 16)
    runner = Runner(model, kv)
    for b in range(batch):
        kv.allocate(b, context + k + 1)

    def fastest(n: int) -> float:
        chunks = [Chunk(kv.tables[b], [5] * n, context, n) for b in range(batch)]
        runner.forward(chunks)                              # warm-up (first shapes)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            runner.forward(chunks)
            times.append(time.perf_counter() - t0)
        return min(times)

    one, many = fastest(1), fastest(k + 1)
    return VerifyCost(context, batch, k, 1e3 * one, 1e3 * many, many / one)


def speculate(model, ids, new_tokens: int, k: int = 4, ngram: int = 3) -> tuple[list[int], int]:
    """(tokens, target passes) of one greedy generation with transformers' prompt lookup (up to k tokens after the
    last n-gram's earlier occurrence, n ≤ `ngram`: the engine's PromptLookup rule), passes counted by a forward
    pre-hook."""
    import torch
    from transformers.utils import logging as hf_logging

    ids = torch.as_tensor(ids).reshape(1, -1).to(next(model.parameters()).device)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()   # generate() warns about its own arguments
    counter = _ForwardCounter(model)
    try:
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False, prompt_lookup_num_tokens=k,
                                 max_matching_ngram_size=ngram)
    finally:
        counter.close()
        hf_logging.set_verbosity(verbosity)
    return out[0, ids.shape[1]:].tolist(), counter.calls
