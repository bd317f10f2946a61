"""The paged KV cache: fixed-size blocks, a free list, a block table per request, reference counts,
copy-on-write (vLLM's PagedAttention, Kwon et al., SOSP 2023, §4.2–4.4), and the tensor they index.

Token t of a request sits in block `table[t // block_size]`, slot `t % block_size`; keys and values live
in `k` and `v`, each [layers, num_blocks, block_size, kv_heads, head_dim]. The runner writes each new
token's K/V to its slot (`slots`, `write`) and reads a request's K/V back through its table (`gather`):
a request's cache need not be contiguous, so any free block fits any request, and at most
`block_size − 1` slots per request sit unused. A block shared by two tables (a prefix-cache hit) is read
by both; the first write into a shared, partly filled block copies it (copy-on-write, `reserve`)."""
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

    def cost(self, seq, tokens: int = 1) -> int:
        """Free blocks that `append(seq, tokens)` would take (a new block per one filled, one for a copy)."""
        return self.blocks_for(self.lengths[seq] + tokens) - len(self.tables[seq]) + self._cow(seq)

    def append(self, seq, tokens: int = 1) -> tuple[int, int] | None:
        """Write `tokens` more tokens of `seq`. Returns (source, copy) when a shared block was copied, else
        None. On OutOfBlocks nothing has changed."""
        table, n, need = self.tables[seq], self.lengths[seq], self.cost(seq, tokens)
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

    def free(self, seq) -> None:
        """Each of the sequence's blocks loses a reference; unreferenced ones are free again."""
        for b in self.tables.pop(seq):
            self._release(b)
        del self.lengths[seq]


class PagedKVCache(BlockAllocator):
    """The allocator's blocks as real tensors."""

    def __init__(self, num_layers: int, num_blocks: int, block_size: int, kv_heads: int, head_dim: int,
                 dtype=None, device="cpu"):
        import torch

        super().__init__(num_blocks, block_size)
        shape = (num_layers, num_blocks, block_size, kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype or torch.float32, device=device)
        self.v = torch.zeros_like(self.k)

    @classmethod
    def for_model(cls, model, num_blocks: int, block_size: int, num_layers: int | None = None) -> "PagedKVCache":
        """A cache shaped for a transformers model (its layers, KV heads, head size, dtype, device)."""
        c = model.config
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        p = next(model.parameters())
        return cls(num_layers or c.num_hidden_layers, num_blocks, block_size, c.num_key_value_heads, head_dim,
                   p.dtype, p.device)

    def reserve(self, rid, tokens: int) -> None:
        """Room for `tokens` more tokens of `rid`; a shared block copied on write is copied in the tensor too."""
        copied = self.append(rid, tokens)
        if copied is not None:
            src, dst = copied
            self.k[:, dst] = self.k[:, src]
            self.v[:, dst] = self.v[:, src]

    def slots(self, table: list[int], start: int, n: int) -> list[int]:
        """Flat slot indices (block × block_size + offset) of token positions start … start + n − 1."""
        bs = self.block_size
        return [table[p // bs] * bs + p % bs for p in range(start, start + n)]

    def write(self, layer: int, slots, k, v) -> None:
        """Store the new tokens' keys and values (rows of k, v: [tokens, kv_heads, head_dim]) at `slots`."""
        self.k[layer].view(-1, *k.shape[1:]).index_copy_(0, slots, k)
        self.v[layer].view(-1, *v.shape[1:]).index_copy_(0, slots, v)

    def gather(self, layer: int, tables):
        """K and V of several requests through their block tables (a [requests, blocks] tensor, padded with
        any block id): [requests, kv_heads, blocks × block_size, head_dim] each, position j at column j."""
        s, b = tables.shape
        flat = tables.reshape(-1)
        k = self.k[layer].index_select(0, flat).view(s, b * self.block_size, *self.k.shape[3:])
        v = self.v[layer].index_select(0, flat).view(s, b * self.block_size, *self.v.shape[3:])
        return k.transpose(1, 2), v.transpose(1, 2)
