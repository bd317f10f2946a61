"""Prefix caching, written out: a radix tree over token ids.

Every prompt a server has prefilled leaves its K/V behind; a later prompt that starts with the same
tokens can reuse them and prefill only the rest. A radix tree (a trie whose edges carry runs of
tokens) finds the longest cached prefix of a new prompt in time proportional to its length. This is
SGLang's RadixAttention (Zheng et al., 2024, "SGLang: Efficient Execution of Structured Language Model
Programs", §3). Servers that page their cache reuse only whole blocks (vLLM hashes full blocks), so
`match` rounds a hit down to a multiple of `block_size`.

Each token may carry a value (where its K/V is stored: SGLang keeps a KV index, the readable engine a
block id), kept in step with the tokens through splits and returned by `values`.

Memory is bounded: `evict` drops least-recently-used *leaves* whose reference count is 0 — a request
in flight holds references (`lock`) on the path it is using, and those nodes are never evicted. A lock
is a handle on the deepest node it covers and `unlock(handle)` walks up from that node, so it releases
exactly what was taken, however the tree was split or grown in between (SGLang's inc_lock_ref /
dec_lock_ref on the request's last node).

`hit_rate` replays a trace's prompts through a tree: the share of prompt tokens that need no prefill.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Sequence

from .. import checks
from .traces import shared_prefix_tokens


@dataclass(eq=False)
class Node:
    key: tuple[int, ...] = ()                 # the tokens on the edge into this node
    parent: "Node | None" = None
    children: dict[int, "Node"] = field(default_factory=dict)   # first token of the child's edge -> child
    refs: int = 0                              # requests in flight using this node
    last_used: int = 0
    value: tuple = ()                          # one value per token of `key` (empty when none was given)


@dataclass(eq=False)
class Lock:
    """What `lock` returns and `unlock` takes back: the deepest node locked and how many tokens it covers."""

    node: Node
    tokens: int
    released: bool = False


class RadixTree:
    def __init__(self, block_size: int = 1, capacity_tokens: int | None = None, on_evict=None):
        checks.count(block_size, "block_size")
        if capacity_tokens is not None:
            checks.count(capacity_tokens, "capacity_tokens (None: unbounded)", 0)
        self.block_size = block_size
        self.capacity_tokens = capacity_tokens
        self.on_evict = on_evict   # called with each evicted node (its key and value), e.g. to free its K/V
        self.root = Node()
        self.tokens = 0            # tokens stored (sum of edge lengths)
        self._clock = itertools.count(1)

    # ------------------------------------------------------------------ lookup
    def _walk(self, ids: Sequence[int]) -> tuple[int, list[Node]]:
        """Tokens matched from the root, and the nodes whose whole edge matched."""
        node, n, path = self.root, 0, []
        while n < len(ids):
            child = node.children.get(ids[n])
            if child is None:
                break
            k = shared_prefix_tokens(child.key, ids[n:])
            n += k
            if k < len(child.key):
                path.append(child)   # a partial edge still uses this node's K/V
                break
            path.append(child)
            node = child
        return n, path

    def match(self, ids: Sequence[int]) -> int:
        """Cached tokens at the start of `ids`, rounded down to whole blocks (and at most len(ids) − 1:
        the last prompt token is always computed, its logits give the first new token)."""
        n, path = self._walk(ids)
        now = next(self._clock)
        for node in path:
            node.last_used = now
        n = min(n, max(0, len(ids) - 1))
        return n - n % self.block_size

    # ------------------------------------------------------------------ update
    def insert(self, ids: Sequence[int], value: Sequence | None = None) -> int:
        """Add a prefilled sequence, with one value per token if given (tokens already stored keep their
        value); returns how many tokens were new. Evicts when over capacity."""
        ids = tuple(int(t) for t in ids)
        if value is not None and len(value) != len(ids):
            raise ValueError(f"value must have one entry per token: {len(value)} for {len(ids)} tokens")
        node, n, now = self.root, 0, next(self._clock)
        added = 0
        while n < len(ids):
            child = node.children.get(ids[n])
            if child is None:
                leaf = Node(ids[n:], node, last_used=now, value=tuple(value[n:]) if value is not None else ())
                node.children[ids[n]] = leaf
                added += len(leaf.key)
                break
            k = shared_prefix_tokens(child.key, ids[n:])
            if k < len(child.key):
                child = self._split(child, k)
            child.last_used = now
            node, n = child, n + k
        self.tokens += added
        if self.capacity_tokens is not None and self.tokens > self.capacity_tokens:
            self.evict(self.tokens - self.capacity_tokens)
        return added

    def _split(self, child: Node, k: int) -> Node:
        """Cut child's edge after k tokens: a new middle node takes the first k, child keeps the rest."""
        parent = child.parent
        mid = Node(child.key[:k], parent, {child.key[k]: child}, child.refs, child.last_used, child.value[:k])
        parent.children[child.key[0]] = mid
        child.key, child.parent, child.value = child.key[k:], mid, child.value[k:]
        return mid

    def lock(self, ids: Sequence[int]) -> Lock:
        """A request starts using the cached prefix of `ids`: its nodes cannot be evicted until it gives the
        returned handle to `unlock`. A prefix that ends inside an edge splits it there, so a lock always
        covers whole nodes (as SGLang's match_prefix does)."""
        n, path = self._walk(ids)
        if path:
            done = sum(len(x.key) for x in path[:-1])
            if n - done < len(path[-1].key):
                path[-1] = self._split(path[-1], n - done)
        now = next(self._clock)
        for node in path:
            node.refs += 1
            node.last_used = now
        return Lock(path[-1] if path else self.root, n)

    def unlock(self, lock: Lock) -> None:
        """The request that took `lock` is done with it: every node from the locked one up to the root
        loses one reference (a split since copied the references to the new middle node)."""
        if not isinstance(lock, Lock):
            raise ValueError(f"unlock takes the handle lock() returned, got {type(lock).__name__}")
        if lock.released:
            raise ValueError("unlock of a lock already released")
        path = self._path(lock.node)
        assert all(node.refs > 0 for node in path), "a locked node lost its reference"
        for node in path:
            node.refs -= 1
        lock.released = True

    def _path(self, node: Node) -> list[Node]:
        """The nodes from `node` up to the root's child (the root itself holds no tokens)."""
        out = []
        while node is not self.root:
            out.append(node)
            node = node.parent
        return out

    def prefix_values(self, ids: Sequence[int]) -> list:
        """The values of the longest cached prefix of `ids`, one per matched token (no lock taken)."""
        n, path = self._walk(ids)
        return [v for node in path for v in node.value][:n]

    def values(self, lock: Lock) -> list:
        """The values of the tokens `lock` covers, from the first token on."""
        return [v for node in reversed(self._path(lock.node)) for v in node.value]

    def evict(self, tokens: int, can_evict=None) -> int:
        """Drop least-recently-used unreferenced leaves until `tokens` tokens are freed (or none is left
        to drop); a parent left childless becomes a leaf and a candidate in turn. `can_evict(node)`, when
        given, rules out more (the engine's: a node whose K/V blocks a running request still reads).
        Returns tokens freed."""
        freed = 0
        while freed < tokens:
            leaves = [n for n in self.nodes() if not n.children and n.refs == 0 and (can_evict is None or can_evict(n))]
            if not leaves:
                break
            victim = min(leaves, key=lambda n: n.last_used)
            del victim.parent.children[victim.key[0]]
            freed += len(victim.key)
            self.tokens -= len(victim.key)
            if self.on_evict is not None:
                self.on_evict(victim)
        return freed

    def protected_tokens(self) -> int:
        """Tokens on locked nodes (in use by a request: never evicted)."""
        return sum(len(n.key) for n in self.nodes() if n.refs > 0)

    def evictable_tokens(self) -> int:
        return self.tokens - self.protected_tokens()

    # ------------------------------------------------------------------ views
    def nodes(self) -> list[Node]:
        out, stack = [], list(self.root.children.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out

    def sequences(self) -> list[tuple[int, ...]]:
        """Every root-to-leaf token sequence stored (for checks)."""
        out = []

        def walk(node: Node, prefix: tuple[int, ...]) -> None:
            here = prefix + node.key
            if not node.children and node is not self.root:
                out.append(here)
            for c in node.children.values():
                walk(c, here)

        walk(self.root, ())
        return out


@dataclass(frozen=True)
class HitRate:
    """Prompts replayed through a radix tree, in order."""

    requests: int
    prompt_tokens: int
    cached_tokens: int               # hits, all requests
    hit_rate: float                  # cached ÷ prompt tokens
    hits: list[int]                  # per request
    lengths: list[int]               # prompt tokens per request
    tree_tokens: int                 # tokens the tree holds at the end


def hit_rate(prompts: Sequence[Sequence[int]], block_size: int = 16, capacity_tokens: int | None = None) -> HitRate:
    """Replay prompts in order: each looks up its cached prefix, then is inserted. Returns prompt tokens,
    cached (hit) tokens, the hit rate (hit ÷ prompt tokens) and per-request hits."""
    tree = RadixTree(block_size, capacity_tokens)
    hits = []
    for ids in prompts:
        hits.append(tree.match(ids))
        tree.insert(ids)
    total = sum(len(p) for p in prompts)
    return HitRate(len(prompts), total, sum(hits), sum(hits) / total if total else 0.0, hits,
                   [len(p) for p in prompts], tree.tokens)
