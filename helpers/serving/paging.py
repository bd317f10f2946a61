"""Paged allocation against contiguous reservation, step by step on a request trace. `ContiguousPool`
reserves each sequence's longest possible length at admission (what servers did before paging): reserved,
unused slots are internal waste, holes too small for the next request external fragmentation. The paged
side is the engine's own scheduler and allocator, run with no model."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from ..engine.kv import PagedKVCache
from ..engine.prefix_cache import NoCache
from ..engine.request import Request as EngineRequest, SamplingParams
from ..engine.scheduler import Scheduler
from .traces import TraceRequest


class ContiguousPool:
    def __init__(self, slots: int):
        self.slots = slots
        self.runs: dict[object, tuple[int, int]] = {}   # seq -> (start, length)

    def _holes(self) -> list[tuple[int, int]]:
        out, pos = [], 0
        for start, length in sorted(self.runs.values()) + [(self.slots, 0)]:      # the end closes the last hole
            if start > pos:
                out.append((pos, start - pos))
            pos = start + length
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


@dataclass
class SimResult:
    scheme: str
    capacity_slots: int
    steps: int
    rows: list[dict] = field(repr=False, default_factory=list)   # per step
    max_running: int = 0
    preemptions: int = 0

    @property
    def mean_running(self) -> float:
        return sum(r["running"] for r in self.rows) / max(1, len(self.rows))


def contiguous(requests: Sequence[TraceRequest], capacity_slots: int, max_tokens: int) -> SimResult:
    """Serve the requests first come, first served on `capacity_slots` KV slots, a step at a time: admit waiting
    requests in order while a hole holds prompt + `max_tokens` slots; every running sequence writes one token; a
    finished one frees its run. It never needs to preempt."""
    waiting, pool = deque(requests), ContiguousPool(capacity_slots)
    running: dict[int, list[int]] = {}   # rid -> [tokens written, tokens still to generate]
    res = SimResult("contiguous", capacity_slots, 0)
    while waiting or running:
        while waiting and pool.reserve(waiting[0].rid, len(waiting[0].prompt) + max_tokens):
            r = waiting.popleft()
            running[r.rid] = [len(r.prompt), r.max_new_tokens]
        if not running:
            raise RuntimeError(f"request {waiting[0].rid} does not fit {capacity_slots} slots")
        used = sum(s[0] for s in running.values())
        nxt = len(waiting[0].prompt) + max_tokens if waiting else None
        res.rows.append({"step": res.steps, "running": len(running), "waiting": len(waiting), "used": used,
                         "reserved": pool.reserved, "internal waste": pool.reserved - used,
                         "external fragmentation": pool.stranded(nxt)})
        res.max_running = max(res.max_running, len(running))
        for rid, s in list(running.items()):
            s[0], s[1] = s[0] + 1, s[1] - 1
            if s[1] == 0:
                pool.free(rid)
                del running[rid]
        res.steps += 1
    return res


def paged(requests: Sequence[TraceRequest], capacity_slots: int, block_size: int = 16) -> SimResult:
    """The same requests on the same slots in blocks of `block_size`, a step at a time: the engine's scheduler on a paged cache with no layers: no model runs, a finished chunk 'samples' token 0.
    Admission is optimistic and preempts the newest when blocks run out (vLLM's default); no step budget."""
    kv = PagedKVCache(0, capacity_slots // block_size, block_size, 1, 1)
    sched = Scheduler(kv, NoCache(kv), max_num_seqs=len(requests), max_batch_tokens=capacity_slots)
    for r in requests:
        sched.waiting.append(EngineRequest(r.rid, list(r.prompt), SamplingParams(max_tokens=r.max_new_tokens, ignore_eos=True)))
    res = SimResult("paged", capacity_slots, 0)
    while sched.has_work():
        plan = sched.schedule()
        used, reserved = kv.stored_tokens(), kv.used_blocks * block_size
        res.rows.append({"step": res.steps, "running": len(plan.work), "waiting": len(sched.waiting), "used": used,
                         "reserved": reserved, "internal waste": reserved - used, "external fragmentation": 0})
        res.max_running = max(res.max_running, len(plan.work))
        res.preemptions += len(plan.preempted)
        sched.finish_step(plan, {req.rid: 0 for req, n in plan.work if req.computed + n == len(req.tokens)})
        res.steps += 1
    return res

