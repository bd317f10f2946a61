"""Paged allocation against contiguous reservation, step by step on a request trace (notebook 07, `make bench`).

`ContiguousPool`: each sequence reserves one contiguous run of slots for its longest possible length
when it is admitted (what servers did before paging). Reserved-but-unused slots are internal waste;
free slots in holes too small for the next request are external fragmentation. The paged side is the
engine's own allocator (helpers.engine.blocks.BlockAllocator). `simulate` runs a trace through either
one, a decode step at a time, and records what was reserved, used and wasted, and how many sequences
ran at once.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from ..engine.blocks import BlockAllocator
from ..formulas.verdicts import Verdict, share, times_as


class ContiguousPool:
    def __init__(self, slots: int):
        self.slots = slots
        self.runs: dict[object, tuple[int, int]] = {}   # seq -> (start, length)

    def _holes(self) -> list[tuple[int, int]]:
        out, pos = [], 0
        for start, length in sorted(self.runs.values()):
            if start > pos:
                out.append((pos, start - pos))
            pos = start + length
        if pos < self.slots:
            out.append((pos, self.slots - pos))
        return out

    def reserve(self, seq, length: int) -> bool:
        """Reserve `length` slots for `seq` in the first hole that holds them; False when none does."""
        for start, h in self._holes():
            if h >= length:
                self.runs[seq] = (start, length)
                return True
        return False

    def free(self, seq) -> None:
        del self.runs[seq]

    @property
    def reserved(self) -> int:
        return sum(length for _, length in self.runs.values())

    def stranded(self, next_length: int | None) -> int:
        """Free slots in holes too small for a request of `next_length` slots (external fragmentation)."""
        return 0 if next_length is None else sum(h for _, h in self._holes() if h < next_length)


# ---------------------------------------------------------------------------- the simulation

@dataclass(frozen=True)
class SimRequest:
    rid: int
    prompt_tokens: int
    output_tokens: int        # what it actually generates
    max_tokens: int           # what it could generate (the reservation a contiguous server must make)


@dataclass(frozen=True)
class SimSummary:
    scheme: str
    capacity_slots: int
    steps: int                       # decode steps to finish
    mean_running: float              # sequences running
    max_running: int
    preemptions: int
    mean_used_slots: float           # slots holding tokens
    mean_reserved_slots: float
    mean_internal_waste: float       # slots reserved but holding no token
    mean_external_fragmentation: float   # free slots in holes too small for the next request
    used_share_of_reserved: float


@dataclass(frozen=True)
class FitCounts:
    contiguous: int
    paged: int
    ratio: float                     # paged ÷ contiguous


@dataclass
class SimResult:
    scheme: str
    capacity_slots: int
    steps: int
    rows: list[dict] = field(repr=False, default_factory=list)   # per step
    max_running: int = 0
    preemptions: int = 0

    def summary(self) -> SimSummary:
        n = len(self.rows)
        mean = lambda k: sum(r[k] for r in self.rows) / n  # noqa: E731
        return SimSummary(self.scheme, self.capacity_slots, self.steps, mean("running"), self.max_running,
                          self.preemptions, mean("used"), mean("reserved"), mean("internal waste"),
                          mean("external fragmentation"),
                          sum(r["used"] for r in self.rows) / max(1, sum(r["reserved"] for r in self.rows)))


def reading(contiguous: SimSummary, paged: SimSummary, fit: FitCounts) -> list[Verdict]:
    """What the simulation shows, by rule (helpers.formulas.verdicts): the share of what each scheme held that
    held tokens, paging's sequences at once and steps against contiguous reservation's, and the sequences that
    fit at their full lengths."""
    running = times_as(paged.mean_running, contiguous.mean_running, "contiguous reservation's")
    steps = times_as(paged.steps, contiguous.steps, "the steps")
    fits = times_as(fit.paged, fit.contiguous, "as many as contiguously")
    return [Verdict(f"contiguous reservation filled {share(contiguous.used_share_of_reserved, 1, 'what it reserved').words}"
                    f", paging {share(paged.used_share_of_reserved, 1, 'what it held').words}", "share",
                    {"contiguous": contiguous.used_share_of_reserved, "paged": paged.used_share_of_reserved}),
            Verdict(f"paging ran {running.words} sequences at once ({paged.mean_running:.1f} against "
                    f"{contiguous.mean_running:.1f}) and finished in {steps.words} ({paged.steps:,} against "
                    f"{contiguous.steps:,})", "paging", {**running.evidence, "steps_ratio": steps.evidence["ratio"]}),
            Verdict(f"at their full lengths {fit.paged} sequences fit paged, {fits.words} ({fit.contiguous})",
                    "times_as", fits.evidence)]


def sim_requests(prompt_lens: Sequence[int], output_lens: Sequence[int], max_tokens: int) -> list[SimRequest]:
    """One SimRequest per (prompt, output) length, each output capped at max_tokens."""
    return [SimRequest(i, p, min(o, max_tokens), max_tokens) for i, (p, o) in enumerate(zip(prompt_lens, output_lens))]


def simulate(requests: Sequence[SimRequest], capacity_slots: int, scheme: str = "paged",
             block_size: int = 16) -> SimResult:
    """Serve the requests first come, first served on a KV cache of `capacity_slots` token slots: each
    step every running sequence writes one token; a finished one frees its memory; waiting requests are
    admitted in order while memory allows ('paged': blocks for the prompt and first token; 'contiguous':
    a run of prompt + max_tokens slots). Paged admission is optimistic: when the running sequences need
    more blocks than are free, the newest is preempted (its blocks freed, its tokens recomputed when it is
    readmitted — vLLM's default recompute preemption); contiguous never needs to preempt."""
    paged = scheme == "paged"
    waiting = deque(requests)
    running: dict[int, list[int]] = {}   # rid -> [tokens written, tokens still to generate]
    alloc = BlockAllocator(capacity_slots // block_size, block_size) if paged else None
    pool = None if paged else ContiguousPool(capacity_slots)
    res = SimResult(scheme, capacity_slots, 0)
    while waiting or running:
        while waiting:   # admission, in order (no overtaking)
            r = waiting[0]
            if paged and alloc.can_allocate(r.prompt_tokens + 1):
                alloc.allocate(r.rid, r.prompt_tokens)
            elif paged or not pool.reserve(r.rid, r.prompt_tokens + r.max_tokens):
                break
            running[r.rid] = [r.prompt_tokens, r.output_tokens]
            waiting.popleft()
        if not running:
            raise RuntimeError(f"request {waiting[0].rid} does not fit {capacity_slots} slots")
        if paged:   # a sequence whose next token opens a block needs a free one: preempt the newest
            while sum(1 for x in running.values() if x[0] % block_size == 0) > alloc.free_blocks:
                rid = next(reversed(running))
                written, left = running.pop(rid)
                alloc.free(rid)
                waiting.appendleft(SimRequest(rid, written, left, requests[rid].max_tokens))   # recomputed later
                res.preemptions += 1
        used = sum(s[0] for s in running.values())
        if paged:
            reserved, external = alloc.used_blocks * block_size, 0
        else:
            reserved = pool.reserved
            external = pool.stranded(waiting[0].prompt_tokens + waiting[0].max_tokens if waiting else None)
        res.rows.append({"step": res.steps, "running": len(running), "waiting": len(waiting), "used": used,
                         "reserved": reserved, "internal waste": reserved - used, "external fragmentation": external})
        res.max_running = max(res.max_running, len(running))
        for rid in list(running):   # one decode step: every running sequence writes one token
            s = running[rid]
            if paged:
                alloc.append(rid, 1)
            s[0] += 1
            s[1] -= 1
            if s[1] == 0:
                (alloc or pool).free(rid)
                del running[rid]
        res.steps += 1
    return res


def fit_counts(requests: Sequence[SimRequest], capacity_slots: int, block_size: int = 16) -> FitCounts:
    """How many of these sequences, at their full final length, fit at once in `capacity_slots`, taken in
    order until the next does not fit: contiguous (each reserves prompt + max_tokens slots) against paged
    (each holds ceil((prompt + output) / block_size) blocks of a pool of capacity_slots // block_size)."""
    def count(sizes, room):
        n = 0
        for size in sizes:
            if size > room:
                break
            room -= size
            n += 1
        return n

    contiguous = count((r.prompt_tokens + r.max_tokens for r in requests), capacity_slots)
    paged = count((math.ceil((r.prompt_tokens + r.output_tokens) / block_size) for r in requests),
                  capacity_slots // block_size)
    return FitCounts(contiguous, paged, paged / max(1, contiguous))
