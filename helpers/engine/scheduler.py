"""The scheduler: which requests run in the next forward pass, and how many tokens of each.

Every step has a token budget (`max_batch_tokens`) and a cap on requests at once (`max_num_seqs`).

1. **Running requests first**, oldest first. A decoding request needs one token; one whose prompt is
   only partly prefilled gets its next chunk, as much as the budget has left (**chunked prefill**: a
   long prompt is cut into chunks that share steps with the others' decode rows, so nobody's next token
   waits for a whole long prefill). Each needs room in the cache for its new tokens; when the free
   blocks run out the newest running request is **preempted by recompute** — its blocks are freed, it
   goes back to the front of the queue, and its tokens (prompt and output so far) are prefilled again
   when it is readmitted (as vLLM's scheduler does; the prefix cache may still hold most of them).
2. **Then the waiting queue**, in arrival order: the head is admitted the moment a slot, budget and
   blocks allow — the step after a request finishes, its slot is refilled (continuous batching, Orca's
   iteration-level scheduling, Yu et al., OSDI 2022). It first looks up the prefix cache; only the
   tokens after the hit are computed. No request overtakes the head of the queue.

`finish_step` books the forward pass's results: `computed` moves on, a chunk that reached the last
token yields a sampled token, and a finished request gives its blocks back."""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from .kv import PagedKVCache
from .prefix_cache import NoCache
from .request import Request, Status


@dataclass
class Plan:
    """One step: what each scheduled request computes, in batch order, and who was preempted."""

    work: list[tuple[Request, int]] = field(default_factory=list)    # (request, tokens to compute)
    preempted: list[Request] = field(default_factory=list)
    admitted: list[Request] = field(default_factory=list)


class Scheduler:
    def __init__(self, kv: PagedKVCache, cache: NoCache, max_num_seqs: int, max_batch_tokens: int,
                 eos: int | None = None):
        self.kv, self.cache, self.eos = kv, cache, eos
        self.max_num_seqs, self.max_batch_tokens = max_num_seqs, max_batch_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []            # in admission order: the last is preempted first
        self.finished: list[Request] = []

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def _room(self, req: Request, n: int, alone: bool) -> bool:
        """Whether `req` can take `n` more tokens' slots, after evicting idle prefix-cache blocks; a
        request that runs alone may empty the prefix cache (no preemption could help it)."""
        if self.kv.cost(req.rid, n) > self.kv.free_blocks:
            self.cache.evict(self.kv.cost(req.rid, n) - self.kv.free_blocks)
        if self.kv.cost(req.rid, n) > self.kv.free_blocks and alone:
            self.cache.flush()
        return self.kv.cost(req.rid, n) <= self.kv.free_blocks        # (an eviction may have spared a copy)

    def schedule(self) -> Plan:
        plan, budget = Plan(), self.max_batch_tokens
        for req in list(self.running):               # 1. running: decode rows and unfinished prefills
            if budget == 0 or req.status is not Status.RUNNING:
                continue
            n = min(req.to_compute, budget)
            while not self._room(req, n, alone=len(self.running) == 1):
                victim = self.running[-1]
                self._preempt(victim)
                plan.preempted.append(victim)
                if victim is req:
                    break
            else:
                self.kv.reserve(req.rid, n)
                plan.work.append((req, n))
                budget -= n
        while self.waiting and budget > 0 and not plan.preempted and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]                    # 2. admission, in order
            hit = self.cache.match(req.tokens)
            self.kv.allocate(req.rid, hit.tokens, shared=hit.blocks)
            n = min(len(req.tokens) - hit.tokens, budget)
            if not self._room(req, n, alone=not self.running):   # no room: it waits, nothing changed
                self.kv.free(req.rid)
                break
            self.kv.reserve(req.rid, n)
            self.waiting.popleft()
            req.status, req.computed, req.cached_tokens = Status.RUNNING, hit.tokens, hit.tokens
            req.admitted_s = req.admitted_s or time.perf_counter()
            self.running.append(req)
            plan.work.append((req, n))
            plan.admitted.append(req)
            budget -= n
        assert plan.work or not self.has_work(), "a request that fits the cache alone must always be schedulable"
        return plan

    def _preempt(self, req: Request) -> None:
        """Recompute preemption: free the request's blocks; it waits at the front of the queue."""
        self.kv.free(req.rid)
        self.running.remove(req)
        req.lost_tokens += req.computed - req.cached_tokens
        req.status, req.computed = Status.WAITING, 0
        self.waiting.appendleft(req)

    def finish_step(self, plan: Plan, sampled: dict[int, int]) -> list[Request]:
        """Book a forward pass: `sampled` maps rid -> the token sampled for each request whose chunk
        reached its last token. Returns the requests that got a new token."""
        now, out = time.perf_counter(), []
        for req, n in plan.work:
            prompt_done = req.computed < len(req.prompt) <= req.computed + n
            req.computed += n
            if prompt_done:           # its prompt's K/V is complete: share its whole blocks from now on (its
                whole = len(req.prompt) // self.kv.block_size * self.kv.block_size    # last one it still writes)
                self.cache.insert(req.prompt[:whole], self.kv.tables[req.rid])
            if req.rid not in sampled:
                continue                              # a prefill chunk short of the end: no token yet
            req.tokens.append(sampled[req.rid])
            req.token_times.append(now)
            out.append(req)
            req.finish_reason = req.done(self.eos)
            if req.finish_reason:
                self._finish(req)
        return out

    def abort(self, req: Request) -> None:
        """Stop a request wherever it is (its client went away): its blocks are given back."""
        if req in self.waiting:
            self.waiting.remove(req)
            req.status, req.finish_reason = Status.FINISHED, "abort"
        elif req in self.running:
            req.finish_reason = "abort"
            self._finish(req)

    def _finish(self, req: Request) -> None:
        """Leave what it computed in the prefix cache, give the blocks back."""
        self.cache.insert(req.tokens[:req.computed], self.kv.tables[req.rid])
        self.kv.free(req.rid)
        self.running.remove(req)
        req.status = Status.FINISHED
        self.finished.append(req)
