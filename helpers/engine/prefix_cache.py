"""The prefix cache: blocks of K/V left behind by earlier requests, found again by a new prompt.

Two ways to find them, switchable so they can be compared on one trace:

- `HashCache` (vLLM's automatic prefix caching): each *full* block is named by a hash chained through
  its predecessors, h_j = H(h_{j−1}, tokens of block j), so equal hashes mean equal whole prefixes. A new
  prompt hashes its full blocks in order and stops at the first unknown one. Only whole blocks hit.
- `RadixCache` (after SGLang's RadixAttention, Zheng et al., 2024, which keeps a KV slot per token): a
  radix tree over token ids (radix.py) whose values are the block id of each token. A hit can end inside
  a block: the request shares that partly filled block and copies it on its first write (copy-on-write).

Both hold one reference on each block they keep (BlockAllocator.retain), so a finished request's
blocks stay in the cache until `evict` lets them go, least recently used first, when the scheduler
runs short of free blocks. A block a running request reads has its table's reference too: the
allocator's reference counts say what is idle, so no separate lock is needed. A hit is capped at the prompt's
length − 1: the last prompt token is always computed, its logits give the first new token."""
from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

from .radix import RadixTree
from .kv import PagedKVCache


@dataclass
class Hit:
    tokens: int                 # prompt tokens whose K/V is reused
    blocks: list[int]           # the blocks holding them, in order (the last may be partly filled)


class NoCache:
    """Prefix caching off: never a hit, nothing kept."""

    def __init__(self, kv: PagedKVCache):
        self.kv = kv
        self.hit_tokens = 0

    def match(self, tokens) -> Hit:
        return Hit(0, [])

    def insert(self, tokens, table) -> None:
        """Keep the K/V of `tokens`, which sits in the blocks of `table`."""

    def evict(self, blocks: int) -> int:
        """Let go of up to `blocks` blocks no request reads; returns how many were freed."""
        return 0

    def flush(self) -> None:
        """Let go of everything (what running requests read stays in their own tables)."""
        self.evict(self.kv.num_blocks)


class HashCache(NoCache):
    def __init__(self, kv: PagedKVCache):
        super().__init__(kv)
        self.by_hash: dict[bytes, int] = {}      # chained hash of a full block -> its block id
        self.hash_of: dict[int, bytes] = {}
        self.used: dict[int, tuple] = {}         # block -> (last use, -depth): LRU, a chain's tail first
        self.clock = itertools.count()

    def _hashes(self, tokens):
        h, bs = b"", self.kv.block_size
        for j in range(len(tokens) // bs):
            h = hashlib.sha256(h + repr(tuple(tokens[j * bs:(j + 1) * bs])).encode()).digest()
            yield j, h

    def match(self, tokens) -> Hit:
        now, blocks = next(self.clock), []
        for j, h in self._hashes(tokens[:-1]):
            b = self.by_hash.get(h)
            if b is None:
                break
            blocks.append(b)
            self.used[b] = (now, -j)
        self.hit_tokens += len(blocks) * self.kv.block_size
        return Hit(len(blocks) * self.kv.block_size, blocks)

    def insert(self, tokens, table) -> None:
        now = next(self.clock)
        for j, h in self._hashes(tokens):
            if h not in self.by_hash and table[j] not in self.hash_of:
                self.by_hash[h], self.hash_of[table[j]] = table[j], h
                self.kv.retain(table[j])
            self.used[self.by_hash[h]] = (now, -j)

    def evict(self, blocks: int) -> int:
        idle = sorted((self.used[b], b) for b in self.hash_of if self.kv.refcount[b] == 1)
        for _, b in idle[:blocks]:
            del self.by_hash[self.hash_of.pop(b)], self.used[b]
            self.kv.release(b)
        return min(blocks, len(idle))


class RadixCache(NoCache):
    def __init__(self, kv: PagedKVCache):
        super().__init__(kv)
        self.tree = RadixTree(on_evict=self._dropped)
        self.tokens_in: dict[int, int] = {}      # block -> cached tokens stored in it

    def match(self, tokens) -> Hit:
        n = self.tree.match(tokens)               # longest cached prefix, at most len − 1
        values, bs = self.tree.prefix_values(tokens[:n]), self.kv.block_size
        # block j of the hit: the block of its last matched token, written by a request whose tokens
        # equal the prompt's up to there (earlier tokens of block j may carry an older copy's id)
        blocks = [values[min(n, (j + 1) * bs) - 1] for j in range(self.kv.blocks_for(n))]
        self.hit_tokens += n
        return Hit(n, blocks)

    def insert(self, tokens, table) -> None:
        """Store `tokens` with the block of each (tokens already stored keep theirs)."""
        bs = self.kv.block_size
        ids = [table[i // bs] for i in range(len(tokens))]
        added = self.tree.insert(tokens, ids)
        for b in ids[len(ids) - added:]:          # the values stored for the tokens that were new
            self.tokens_in[b] = self.tokens_in.get(b, 0) + 1
            if self.tokens_in[b] == 1:
                self.kv.retain(b)

    def _dropped(self, node) -> None:
        for b in node.value:
            self.tokens_in[b] -= 1
            if self.tokens_in[b] == 0:
                del self.tokens_in[b]
                self.kv.release(b)

    def evict(self, blocks: int) -> int:
        """Drop least-recently-used leaves whose blocks no request reads until `blocks` more blocks are
        free (an idle block under a node still in use stays: a radix tree drops leaves only)."""
        want, before = self.kv.free_blocks + blocks, self.kv.free_blocks
        idle = lambda node: all(self.kv.refcount[b] == 1 for b in node.value)  # noqa: E731
        while self.kv.free_blocks < want and self.tree.evict(1, idle):
            pass
        return self.kv.free_blocks - before

    def flush(self) -> None:
        self.tree.evict(self.tree.tokens)


CACHES = {"off": NoCache, "hash": HashCache, "radix": RadixCache}
