"""Paged attention's memory manager, written out: a block allocator for the KV cache.

The KV cache is cut into fixed-size blocks of `block_size` token slots. A sequence owns a *block
table* (the list of its blocks, in order); it takes a new block only when its last one is full, so at
most `block_size − 1` slots per sequence sit unused (internal fragmentation), and any free block fits
any sequence (no external fragmentation). A forked sequence (a shared prompt, beam or parallel
sampling) shares its parent's blocks — reference counts say how many tables hold each block — and the
first write into a shared, partly filled block copies it (copy-on-write). This is the scheme of vLLM's
PagedAttention (Kwon et al., SOSP 2023, "Efficient Memory Management for Large Language Model Serving
with PagedAttention", §4.2–4.4).

The contrast, `ContiguousPool`: each sequence reserves one contiguous run of slots for its longest
possible length when it is admitted (what servers did before paging). Reserved-but-unused slots are
internal waste; free slots in holes too small for the next request are external fragmentation.

`simulate` runs a request trace through either one, a decode step at a time, and records what was
reserved, used and wasted, and how many sequences ran at once.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence


from ..formulas.config_schema import MAX_TOKENS
from .. import checks
from ..formulas.verdicts import Verdict, share, times_as

# A pool's blocks are a Python list here: 10 M blocks of 16 tokens is 160 M token slots, 2,000 times
# what an 80 GB GPU holds of Mistral 7B's cache (about 38,000 blocks), and a list that still fits a laptop.
MAX_BLOCKS = 10_000_000


class OutOfBlocks(RuntimeError):
    """No free block is left: the scheduler must wait, preempt or swap."""


class BlockAllocator:
    """Fixed-size blocks, a free list, a block table per sequence, reference counts, copy-on-write."""

    def __init__(self, num_blocks: int, block_size: int = 16):
        self.num_blocks = checks.count(num_blocks, "num_blocks", 1, MAX_BLOCKS)
        self.block_size = checks.count(block_size, "block_size", 1, MAX_TOKENS)
        self.free_list: deque[int] = deque(range(num_blocks))
        self.refcount = [0] * num_blocks
        self.tables: dict[object, list[int]] = {}
        self.lengths: dict[object, int] = {}
        self.held: dict[int, int] = {}   # references held outside any table (a prefix cache's), per block
        self.copies = 0     # copy-on-write copies made so far (each one block of K and V per layer)

    # ------------------------------------------------------------------ state
    @property
    def free_blocks(self) -> int:
        return len(self.free_list)

    @property
    def used_blocks(self) -> int:
        return self.num_blocks - len(self.free_list)

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def can_allocate(self, tokens: int) -> bool:
        return self.blocks_for(tokens) <= self.free_blocks

    def stored_tokens(self) -> int:
        """Token slots holding data, a shared block counted once."""
        filled: dict[int, int] = {}
        for seq, table in self.tables.items():
            n = self.lengths[seq]
            for i, b in enumerate(table):
                filled[b] = max(filled.get(b, 0), min(self.block_size, n - i * self.block_size))
        return sum(filled.values())

    # ------------------------------------------------------------------ operations
    def _take(self) -> int:
        if not self.free_list:
            raise OutOfBlocks(f"all {self.num_blocks} blocks are in use")
        b = self.free_list.popleft()
        self.refcount[b] = 1
        return b

    def _release(self, b: int) -> None:
        self.refcount[b] -= 1
        if self.refcount[b] == 0:
            self.free_list.append(b)

    def allocate(self, seq, tokens: int, shared: Sequence[int] = ()) -> list[int]:
        """A new sequence holding `tokens` tokens (its prompt); all-or-nothing. `shared`: blocks already
        holding its first tokens (a prefix-cache hit), referenced rather than taken from the free list."""
        if seq in self.tables:
            raise ValueError(f"sequence {seq!r} already has a block table")
        checks.count(tokens, "tokens", 0)
        if len(shared) > self.blocks_for(tokens) or any(not 0 <= b < self.num_blocks or self.refcount[b] < 1
                                                        for b in shared):
            raise ValueError(f"shared blocks {list(shared)} must be in use and at most {self.blocks_for(tokens)}")
        new = self.blocks_for(tokens) - len(shared)
        if new > self.free_blocks:
            raise OutOfBlocks(f"{tokens} tokens need {new} new blocks, {self.free_blocks} free")
        for b in shared:
            self.refcount[b] += 1
        self.tables[seq] = list(shared) + [self._take() for _ in range(new)]
        self.lengths[seq] = tokens
        return list(self.tables[seq])

    def append_cost(self, seq, tokens: int = 1) -> int:
        """Free blocks that `append(seq, tokens)` would take (a new block per one filled, one for a copy)."""
        table, n = self._table(seq), self.lengths[seq]
        cow = bool(table) and n % self.block_size != 0 and self.refcount[table[-1]] > 1
        return self.blocks_for(n + tokens) - len(table) + (1 if cow else 0)

    def append(self, seq, tokens: int = 1) -> tuple[int, int] | None:
        """Write `tokens` more tokens of `seq`: a new block when the last is full, a copy when the last
        is shared and partly filled (copy-on-write). Returns (source, copy) when a block was copied (the
        cache must copy its data), else None. On OutOfBlocks nothing has changed."""
        table = self._table(seq)
        checks.count(tokens, "tokens", 1)
        n, need = self.lengths[seq], self.append_cost(seq, tokens)
        cow = bool(table) and n % self.block_size != 0 and self.refcount[table[-1]] > 1
        if need > self.free_blocks:
            raise OutOfBlocks(f"sequence {seq!r} needs {need} more blocks, {self.free_blocks} free")
        copied = None
        if cow:
            old = table[-1]
            table[-1] = self._take()
            self._release(old)
            self.copies += 1
            copied = (old, table[-1])
        while len(table) < self.blocks_for(n + tokens):
            table.append(self._take())
        self.lengths[seq] = n + tokens
        return copied

    def truncate(self, seq, tokens: int) -> None:
        """Keep only the first `tokens` tokens of `seq` (rejected speculative tokens); blocks past them
        lose this sequence's reference."""
        table = self._table(seq)
        checks.count(tokens, "tokens", 0, self.lengths[seq])
        while len(table) > self.blocks_for(tokens):
            self._release(table.pop())
        self.lengths[seq] = tokens

    def retain(self, b: int) -> None:
        """A holder outside the tables (a prefix cache) keeps block `b` alive."""
        assert self.refcount[b] >= 1, f"block {b} is free: nothing to retain"
        self.refcount[b] += 1
        self.held[b] = self.held.get(b, 0) + 1

    def release(self, b: int) -> None:
        """That holder lets go of block `b`; it is free again when nothing else references it."""
        assert self.held.get(b, 0) >= 1, f"block {b} is not retained"
        self.held[b] -= 1
        if not self.held[b]:
            del self.held[b]
        self._release(b)

    def fork(self, parent, child) -> None:
        """`child` starts as a copy of `parent` that shares every block (no data copied)."""
        table = self._table(parent)
        if child in self.tables:
            raise ValueError(f"sequence {child!r} already has a block table")
        for b in table:
            self.refcount[b] += 1
        self.tables[child] = list(table)
        self.lengths[child] = self.lengths[parent]

    def free(self, seq) -> None:
        """The sequence is done: each of its blocks loses a reference; unreferenced ones are free again."""
        for b in self._table(seq):
            self._release(b)
        del self.tables[seq], self.lengths[seq]

    def _table(self, seq) -> list[int]:
        try:
            return self.tables[seq]
        except KeyError:
            raise ValueError(f"unknown sequence {seq!r}; known: {sorted(map(str, self.tables))[:10]}") from None

    def check(self) -> None:
        """Invariants (raise AssertionError): every block is free xor referenced, reference counts equal
        the number of tables holding the block plus its retains, each table is just long enough."""
        held: dict[int, int] = dict(self.held)
        for seq, table in self.tables.items():
            assert len(table) == self.blocks_for(self.lengths[seq]), f"table of {seq!r} has the wrong length"
            assert len(set(table)) == len(table), f"table of {seq!r} holds a block twice"
            for b in table:
                held[b] = held.get(b, 0) + 1
        free = set(self.free_list)
        assert len(free) == len(self.free_list), "a block is on the free list twice"
        for b in range(self.num_blocks):
            assert self.refcount[b] == held.get(b, 0), f"block {b}: refcount {self.refcount[b]} != {held.get(b, 0)}"
            assert (b in free) == (self.refcount[b] == 0), f"block {b} is leaked or double-owned"


class ContiguousPool:
    """One contiguous run of slots per sequence, reserved for its longest possible length at admission,
    placed first-fit in a linear address space of `slots` token slots."""

    def __init__(self, slots: int):
        self.slots = checks.count(slots, "slots", 1)
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

    def can_reserve(self, length: int) -> bool:
        length = checks.count(length, "length", 1)
        return any(h >= length for _, h in self._holes())

    def reserve(self, seq, length: int) -> int:
        length = checks.count(length, "length", 1)
        if seq in self.runs:
            raise ValueError(f"sequence {seq!r} already holds a run of slots")
        for start, h in self._holes():
            if h >= length:
                self.runs[seq] = (start, length)
                return start
        raise OutOfBlocks(f"no contiguous run of {length} slots is free (largest hole "
                          f"{max((h for _, h in self._holes()), default=0)})")

    def free(self, seq) -> None:
        if seq not in self.runs:
            raise ValueError(f"unknown sequence {seq!r}; it holds no run of slots")
        del self.runs[seq]

    @property
    def reserved(self) -> int:
        return sum(length for _, length in self.runs.values())

    def stranded(self, next_length: int | None) -> int:
        """Free slots in holes too small for a request of `next_length` slots (external fragmentation)."""
        if next_length is None:
            return 0
        next_length = checks.count(next_length, "next_length", 1)
        return sum(h for _, h in self._holes() if h < next_length)


# ---------------------------------------------------------------------------- the simulation

@dataclass(frozen=True)
class SimRequest:
    rid: int
    prompt_tokens: int
    output_tokens: int        # what it actually generates
    max_tokens: int           # what it could generate (the reservation a contiguous server must make)


@dataclass(frozen=True)
class SimSummary:
    """A simulation's means over its steps."""

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
    """How many sequences fit at once at their full length, contiguous against paged."""

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
    """One SimRequest per (prompt, output) length, each output capped at max_tokens (all whole ≥ 1)."""
    max_tokens = checks.count(max_tokens, "max_tokens", 1)
    prompts, outputs = _lengths(prompt_lens, "prompt_lens"), _lengths(output_lens, "output_lens")
    if len(prompts) != len(outputs):
        raise ValueError(f"{len(prompts)} prompt lengths but {len(outputs)} output lengths")
    return [SimRequest(i, p, min(o, max_tokens), max_tokens) for i, (p, o) in enumerate(zip(prompts, outputs))]


def _lengths(values, what: str) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) and not hasattr(values, "tolist"):
        raise ValueError(f"{what} must be a list of whole numbers ≥ 1, got {type(values).__name__}")
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    return [checks.count(v, f"{what}[{i}]", 1) for i, v in enumerate(values)]


def _check_requests(requests: Sequence[SimRequest]) -> list[SimRequest]:
    """A non-empty list of SimRequests (helpers.serving.blocks.sim_requests makes them) that can finish."""
    requests = list(requests) if isinstance(requests, (list, tuple)) else None
    if not requests or not all(isinstance(r, SimRequest) for r in requests):
        raise ValueError("requests must be a non-empty list of SimRequest (make them with sim_requests)")
    for r in requests:
        checks.count(r.prompt_tokens, f"request {r.rid}'s prompt_tokens", 0)
        checks.count(r.output_tokens, f"request {r.rid}'s output_tokens", 1)
        checks.count(r.max_tokens, f"request {r.rid}'s max_tokens", r.output_tokens)
    return requests


def simulate(requests: Sequence[SimRequest], capacity_slots: int, scheme: str = "paged",
             block_size: int = 16, max_steps: int = 100_000) -> SimResult:
    """Serve the requests first come, first served on a KV cache of `capacity_slots` token slots: each
    step every running sequence writes one token; a finished one frees its memory; waiting requests are
    admitted in order while memory allows ('paged': blocks for the prompt and first token; 'contiguous':
    a run of prompt + max_tokens slots). Paged admission is optimistic: when the running sequences need
    more blocks than are free, the newest is preempted (its blocks freed, its tokens recomputed when it is
    readmitted — vLLM's default recompute preemption); contiguous never needs to preempt."""
    if scheme not in ("paged", "contiguous"):
        raise ValueError(f"scheme must be 'paged' or 'contiguous', got {scheme!r}")
    requests = _check_requests(requests)
    capacity_slots = checks.count(capacity_slots, "capacity_slots", 1)
    block_size = checks.count(block_size, "block_size", 1, capacity_slots)
    max_steps = checks.count(max_steps, "max_steps", 1)
    for r in requests:
        need = r.prompt_tokens + (r.max_tokens if scheme == "contiguous" else r.output_tokens)
        if need > capacity_slots:
            raise ValueError(f"request {r.rid} needs {need} slots, more than the capacity of {capacity_slots}")
    waiting = deque(requests)
    running: dict[int, list[int]] = {}   # rid -> [tokens written, tokens still to generate]
    alloc = BlockAllocator(capacity_slots // block_size, block_size) if scheme == "paged" else None
    pool = ContiguousPool(capacity_slots) if scheme == "contiguous" else None
    res = SimResult(scheme, capacity_slots, 0)
    step = 0
    while waiting or running:
        if step >= max_steps:
            raise RuntimeError(f"simulation did not finish in {max_steps} steps")
        while waiting:   # admission, in order (no overtaking)
            r = waiting[0]
            if alloc is not None:
                if not alloc.can_allocate(r.prompt_tokens + 1):
                    break
                alloc.allocate(r.rid, r.prompt_tokens)
            else:
                if not pool.can_reserve(r.prompt_tokens + r.max_tokens):
                    break
                pool.reserve(r.rid, r.prompt_tokens + r.max_tokens)
            running[r.rid] = [r.prompt_tokens, r.output_tokens]
            waiting.popleft()
        if not running:
            raise RuntimeError("nothing can be admitted")   # guarded by the capacity check above
        if alloc is not None:   # a sequence whose next token opens a block needs a free one: preempt the
            while sum(1 for x in running.values() if x[0] % block_size == 0) > alloc.free_blocks:  # newest
                rid = next(reversed(running))
                written, left = running.pop(rid)
                alloc.free(rid)
                old = next(q for q in requests if q.rid == rid)
                waiting.appendleft(SimRequest(rid, written, left, old.max_tokens))   # recomputed when readmitted
                res.preemptions += 1
        used = sum(s[0] for s in running.values())
        if alloc is not None:
            reserved = alloc.used_blocks * block_size
            external = 0
        else:
            reserved = pool.reserved
            external = pool.stranded(waiting[0].prompt_tokens + waiting[0].max_tokens if waiting else None)
        res.rows.append({"step": step, "running": len(running), "waiting": len(waiting), "used": used,
                         "reserved": reserved, "internal waste": reserved - used, "external fragmentation": external})
        res.max_running = max(res.max_running, len(running))
        for rid in list(running):   # one decode step: every running sequence writes one token
            s = running[rid]
            if alloc is not None:
                alloc.append(rid, 1)
            s[0] += 1
            s[1] -= 1
            if s[1] == 0:
                (alloc or pool).free(rid)
                del running[rid]
        step += 1
    res.steps = step
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

    requests = _check_requests(requests)
    capacity_slots = checks.count(capacity_slots, "capacity_slots", 1)
    block_size = checks.count(block_size, "block_size", 1, capacity_slots)
    contiguous = count((r.prompt_tokens + r.max_tokens for r in requests), capacity_slots)
    paged = count((math.ceil((r.prompt_tokens + r.output_tokens) / block_size) for r in requests),
                  capacity_slots // block_size)
    return FitCounts(contiguous, paged, paged / max(1, contiguous))
