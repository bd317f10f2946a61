"""Speculative decoding, written out: draft k tokens cheaply, verify them all in one target pass.

Each round, for every request:
1. **draft** — a drafter proposes up to k tokens: `PromptLookup` copies what followed the latest n-gram's
   first earlier occurrence (no model; transformers' rule), `DraftModel` runs a smaller model (or the
   target's own first layers: an early exit) k times, one token each, keeping its distributions q;
2. **verify** — the target runs the request's pending token and the k drafts in one forward pass (a chunk
   of k + 1 rows, runner.py), which gives its distribution p at every drafted position and one past them;
3. **accept** — greedy: keep drafts while they equal the target's argmax, then the target's own token.
   Sampled: Leviathan et al. (ICML 2023), Algorithm 1 — keep draft x with probability min(1, p(x)/q(x));
   at the first rejection draw from the residual norm(max(0, p − q)) and stop; if all k are kept, draw
   one more from p. Each emitted token is then distributed exactly as p (their proof of Algorithm 1), so the
   output has the target's distribution: lossless, for sampling too. A drafter without a distribution
   (prompt lookup) proposes with q = 1 on its token. The K/V of rejected drafts is dropped
   (BlockAllocator.truncate) and overwritten next round.

A round costs one target pass plus the drafting, and yields between 1 and k + 1 tokens per request."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .kv import PagedKVCache
from .request import Request, SamplingParams, probabilities
from .runner import Chunk, Runner


class PromptLookup:
    """Drafts by copying from the context (Saxena 2023, prompt lookup decoding): for n from `ngram` down
    to 1, the earliest earlier occurrence of the last n tokens that has a continuation; up to k of the
    tokens after it. transformers' PromptLookupCandidateGenerator rule, so it can be the oracle."""

    def __init__(self, ngram: int = 3):
        self.ngram, self.name = ngram, f"prompt lookup (n-gram ≤ {ngram})"

    def propose(self, reqs: list[Request], ks: list[int]) -> list[tuple[list[int], None]]:
        out = []
        for r, k in zip(reqs, ks):
            start = self.match(r.tokens) if k else None
            out.append(([] if start is None else r.tokens[start:start + k], None))
        return out

    def match(self, tokens: list[int]) -> int | None:
        """Where the copied draft starts in `tokens`: just past the earliest earlier occurrence of the last n
        tokens, for the longest n ≤ `ngram` that has one; None when no n-gram recurs."""
        n_tok = len(tokens)
        for n in range(min(self.ngram, n_tok - 1), 0, -1):
            tail = tokens[-n:]
            for i in range(n_tok - n):
                if tokens[i:i + n] == tail:
                    return i + n
        return None



class DraftModel:
    """A draft model with its own paged cache: another model of the same vocabulary, or with
    `num_layers` the target's first layers, its final norm and head (early exit, LayerSkip-style)."""

    def __init__(self, model, num_layers: int | None = None, num_blocks: int = 256, block_size: int = 16):
        self.kv = PagedKVCache.for_model(model, num_blocks, block_size, num_layers)
        self.runner = Runner(model, self.kv, num_layers)
        self.computed: dict[object, int] = {}
        self.name = f"draft model ({len(self.runner.layers)} of {model.config.num_hidden_layers} layers" + (
            ", early exit)" if num_layers else ")")

    def propose(self, reqs: list[Request], ks: list[int]) -> list[tuple[list[int], object]]:
        """k_i tokens for request i, one draft forward per token over all requests still drafting."""
        import torch

        drafts = [[] for _ in reqs]
        qs = [[] for _ in reqs]
        for step in range(max(ks, default=0)):
            live = [i for i, k in enumerate(ks) if step < k]
            chunks = []
            for i in live:
                r, done = reqs[i], self.computed.setdefault(reqs[i].rid, 0)
                if r.rid not in self.kv.tables:
                    self.kv.allocate(r.rid, 0)
                run = (r.tokens + drafts[i])[done:]
                self.kv.reserve(r.rid, len(run))
                chunks.append(Chunk(self.kv.tables[r.rid], run, done, 1))
                self.computed[r.rid] = done + len(run)
            logits = self.runner.forward(chunks)
            for row, i in enumerate(live):
                p = reqs[i].params
                if p.greedy:
                    drafts[i].append(int(logits[row].argmax()))
                else:
                    q = probabilities(logits[row], p)
                    drafts[i].append(int(torch.multinomial(q, 1, generator=reqs[i].generator)))
                    qs[i].append(q)
        return [(d, torch.stack(q) if q else None) for d, q in zip(drafts, qs)]

    def rewind(self, rid, keep: int) -> None:
        """Forget the draft K/V past `keep` tokens (tokens the target did not keep; 0 when it is done)."""
        if rid in self.computed and self.computed[rid] > keep:
            self.computed[rid] = keep
            self.kv.truncate(rid, keep)


def accept_probability(p, q, x: int) -> float:
    """Algorithm 1's chance of keeping drafted token x: min(1, p(x) / q(x))."""
    return min(1.0, float(p[x]) / float(q[x])) if float(q[x]) > 0 else 1.0


def residual(p, q):
    """What to draw from after a rejection: norm(max(0, p − q)) (p itself if nothing is left)."""
    r = (p - q).clamp(min=0)
    return r / r.sum() if float(r.sum()) > 1e-12 else p


def verify(logits, drafts: list[int], q, params: SamplingParams, generator) -> tuple[int, int]:
    """(drafts kept, the token the target adds) from the target's logits at the len(drafts) + 1 positions."""
    import torch

    if params.greedy:
        best = logits.argmax(-1).tolist()
        kept = next((i for i, (d, b) in enumerate(zip(drafts, best)) if d != b), len(drafts))
        return kept, best[kept]
    p = probabilities(logits, params)
    for i, x in enumerate(drafts):
        qi = q[i] if q is not None else torch.nn.functional.one_hot(torch.tensor(x), p.shape[-1]).to(p)
        if float(torch.rand((), generator=generator)) >= accept_probability(p[i], qi, x):
            return i, int(torch.multinomial(residual(p[i], qi), 1, generator=generator))
    return len(drafts), int(torch.multinomial(p[len(drafts)], 1, generator=generator))


@dataclass
class SpecResult:
    drafter: str
    outputs: list[list[int]]
    rounds: list[tuple[int, int]] = field(default_factory=list)    # (drafted, kept) per request per round
    target_passes: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Tokens a request gets per target pass it takes part in: (kept + 1) per round, averaged."""
        return sum(a + 1 for _, a in self.rounds) / len(self.rounds)


def generate(model, prompts, params: SamplingParams, k: int = 4, drafter=None, eos: int | None = None,
             block_size: int = 16) -> SpecResult:
    """Speculative decoding of all prompts as one batch on the target `model` (drafter None: plain decoding,
    one token per pass, the baseline timed the same way). Sampled requests use `params.seed` + i."""
    import torch

    reqs = [Request(i, list(p), params) for i, p in enumerate(prompts)]
    kv = PagedKVCache.for_model(model, sum(-(-(len(r.prompt) + params.max_tokens + k) // block_size)
                                            for r in reqs), block_size)
    target = Runner(model, kv)
    for r in reqs:
        kv.allocate(r.rid, 0)
        r.generator = torch.Generator(kv.k.device.type).manual_seed((params.seed or 0) + r.rid)
    result = SpecResult(drafter.name if drafter else "none (plain decoding)", [])
    t0, active = time.perf_counter(), list(reqs)
    while active:
        ks = [min(k, r.params.max_tokens - len(r.output) - 1) if drafter else 0 for r in active]
        proposals = drafter.propose(active, ks) if drafter else [([], None)] * len(active)
        chunks = []
        for r, (d, _) in zip(active, proposals):                    # 2. verify: one pass for everyone
            run = r.tokens[r.computed:] + d
            kv.reserve(r.rid, len(run))
            chunks.append(Chunk(kv.tables[r.rid], run, r.computed, len(d) + 1))
        logits, row = target.forward(chunks), 0
        for r, (d, q) in zip(list(active), proposals):              # 3. accept
            kept, extra = verify(logits[row:row + len(d) + 1], d, q, r.params, r.generator)
            row += len(d) + 1
            result.rounds.append((len(d), kept))
            r.computed = len(r.tokens) + kept                        # K/V of the kept drafts stays
            new = d[:kept] + [extra]
            if eos is not None and not r.params.ignore_eos and eos in new:
                new = new[:new.index(eos) + 1]
            r.tokens += new[:r.params.max_tokens - len(r.output)]
            kv.truncate(r.rid, r.computed)
            if isinstance(drafter, DraftModel):
                drafter.rewind(r.rid, 0 if r.done(eos) else r.computed)
            if r.done(eos):
                active.remove(r)
    result.seconds, result.target_passes = time.perf_counter() - t0, target.forwards
    result.outputs = [r.output for r in reqs]
    return result
