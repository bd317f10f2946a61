"""The block allocator under the paged KV cache: fixed-size blocks, a free list, a block table per
request, reference counts, copy-on-write (vLLM's PagedAttention, Kwon et al., SOSP 2023, §4.2–4.4).

A sequence takes a new block only when its last one is full, so at most `block_size − 1` slots per
sequence sit unused, and any free block fits any sequence. A forked sequence (a prefix-cache hit, beam
or parallel sampling) shares its parent's blocks; the first write into a shared, partly filled block
copies it (copy-on-write).
"""
from __future__ import annotations

import math
from collections import deque
from typing import Sequence


class OutOfBlocks(RuntimeError):
    """No free block is left: the scheduler must wait, preempt or swap."""


class BlockAllocator:
    def __init__(self, num_blocks: int, block_size: int = 16):
        self.num_blocks, self.block_size = num_blocks, block_size
        self.free_list: deque[int] = deque(range(num_blocks))
        self.refcount = [0] * num_blocks
        self.tables: dict[object, list[int]] = {}
        self.lengths: dict[object, int] = {}
        self.held: dict[int, int] = {}   # references held outside any table (a prefix cache's), per block
        self.copies = 0     # copy-on-write copies made so far

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
            for i, b in enumerate(table):
                filled[b] = max(filled.get(b, 0), min(self.block_size, self.lengths[seq] - i * self.block_size))
        return sum(filled.values())

    def _take(self) -> int:
        b = self.free_list.popleft()
        self.refcount[b] = 1
        return b

    def _release(self, b: int) -> None:
        self.refcount[b] -= 1
        if self.refcount[b] == 0:
            self.free_list.append(b)

    def allocate(self, seq, tokens: int, shared: Sequence[int] = ()) -> list[int]:
        """A new sequence holding `tokens` tokens, all or nothing; `shared`: blocks already holding its
        first tokens (a prefix-cache hit), referenced rather than taken from the free list."""
        assert seq not in self.tables, f"sequence {seq!r} already has a block table"
        new = self.blocks_for(tokens) - len(shared)
        if new > self.free_blocks:
            raise OutOfBlocks(f"{tokens} tokens need {new} new blocks, {self.free_blocks} free")
        for b in shared:
            self.refcount[b] += 1
        self.tables[seq] = list(shared) + [self._take() for _ in range(new)]
        self.lengths[seq] = tokens
        return list(self.tables[seq])

    def _cow(self, seq) -> bool:
        """Whether the next write into `seq` lands in a shared, partly filled block."""
        table = self.tables[seq]
        return bool(table) and self.lengths[seq] % self.block_size != 0 and self.refcount[table[-1]] > 1

    def append_cost(self, seq, tokens: int = 1) -> int:
        """Free blocks that `append(seq, tokens)` would take (a new block per one filled, one for a copy)."""
        return self.blocks_for(self.lengths[seq] + tokens) - len(self.tables[seq]) + self._cow(seq)

    def append(self, seq, tokens: int = 1) -> tuple[int, int] | None:
        """Write `tokens` more tokens of `seq`. Returns (source, copy) when a shared block was copied (the
        cache must copy its data), else None. On OutOfBlocks nothing has changed."""
        table, n, need = self.tables[seq], self.lengths[seq], self.append_cost(seq, tokens)
        if need > self.free_blocks:
            raise OutOfBlocks(f"sequence {seq!r} needs {need} more blocks, {self.free_blocks} free")
        copied = None
        if self._cow(seq):
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
        """Keep only the first `tokens` tokens of `seq` (rejected speculative tokens)."""
        table = self.tables[seq]
        while len(table) > self.blocks_for(tokens):
            self._release(table.pop())
        self.lengths[seq] = tokens

    def retain(self, b: int) -> None:
        """A holder outside the tables (a prefix cache) keeps block `b` alive."""
        self.refcount[b] += 1
        self.held[b] = self.held.get(b, 0) + 1

    def release(self, b: int) -> None:
        """That holder lets go of block `b`; it is free again when nothing else references it."""
        self.held[b] -= 1
        if not self.held[b]:
            del self.held[b]
        self._release(b)

    def fork(self, parent, child) -> None:
        """`child` starts as a copy of `parent` that shares every block (no data copied)."""
        for b in self.tables[parent]:
            self.refcount[b] += 1
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]

    def free(self, seq) -> None:
        """Each of the sequence's blocks loses a reference; unreferenced ones are free again."""
        for b in self.tables.pop(seq):
            self._release(b)
        del self.lengths[seq]

    def check(self) -> None:
        """Invariants: every block is free xor referenced, reference counts equal the tables holding the
        block plus its retains, each table is just long enough."""
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
