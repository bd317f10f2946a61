"""The prefix cache's radix tree over token ids (SGLang's RadixAttention, Zheng et al., 2024, §3).

A trie whose edges carry runs of tokens finds the longest cached prefix of a new prompt in time
proportional to its length. Each token may carry a value (the engine stores its block id), kept in step
with the tokens through splits. `evict` drops least-recently-used leaves."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Sequence


def shared_prefix_tokens(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@dataclass(eq=False)
class Node:
    key: tuple[int, ...] = ()                 # the tokens on the edge into this node
    parent: "Node | None" = None
    children: dict[int, "Node"] = field(default_factory=dict)   # first token of the child's edge -> child
    last_used: int = 0
    value: tuple = ()                          # one value per token of `key` (empty when none was given)


class RadixTree:
    def __init__(self, on_evict=None):
        self.on_evict = on_evict   # called with each evicted node (its key and value), e.g. to free its K/V
        self.root = Node()
        self.tokens = 0            # tokens stored (sum of edge lengths)
        self._clock = itertools.count(1)

    def _walk(self, ids: Sequence[int]) -> tuple[int, list[Node]]:
        """Tokens matched from the root, and the nodes whose edge matched (the last maybe in part)."""
        node, n, path = self.root, 0, []
        while n < len(ids) and (child := node.children.get(ids[n])) is not None:
            k = shared_prefix_tokens(child.key, ids[n:])
            n += k
            path.append(child)
            if k < len(child.key):
                break
            node = child
        return n, path

    def match(self, ids: Sequence[int]) -> int:
        """Cached tokens at the start of `ids`, at most len(ids) − 1 (the last prompt token is always
        computed: its logits give the first new token)."""
        n, path = self._walk(ids)
        now = next(self._clock)
        for node in path:
            node.last_used = now
        return min(n, max(0, len(ids) - 1))

    def insert(self, ids: Sequence[int], value: Sequence | None = None) -> int:
        """Add a sequence, with one value per token if given (tokens already stored keep their value);
        returns how many tokens were new."""
        ids = tuple(int(t) for t in ids)
        node, n, now = self.root, 0, next(self._clock)
        while n < len(ids):
            child = node.children.get(ids[n])
            if child is None:
                leaf = Node(ids[n:], node, last_used=now, value=tuple(value[n:]) if value is not None else ())
                node.children[ids[n]] = leaf
                self.tokens += len(leaf.key)
                return len(leaf.key)
            k = shared_prefix_tokens(child.key, ids[n:])
            if k < len(child.key):
                child = self._split(child, k)
            child.last_used = now
            node, n = child, n + k
        return 0

    def _split(self, child: Node, k: int) -> Node:
        """Cut child's edge after k tokens: a new middle node takes the first k, child keeps the rest."""
        parent = child.parent
        mid = Node(child.key[:k], parent, {child.key[k]: child}, child.last_used, child.value[:k])
        parent.children[child.key[0]] = mid
        child.key, child.parent, child.value = child.key[k:], mid, child.value[k:]
        return mid

    def prefix_values(self, ids: Sequence[int]) -> list:
        """The values of the longest cached prefix of `ids`, one per matched token."""
        n, path = self._walk(ids)
        return [v for node in path for v in node.value][:n]

    def evict(self, tokens: int, can_evict=None) -> int:
        """Drop least-recently-used leaves until `tokens` tokens are freed (or none is left to drop); a
        parent left childless becomes a leaf in turn. `can_evict(node)`, when given, rules out more (the
        engine's: a node whose blocks a running request still reads). Returns tokens freed."""
        freed = 0
        while freed < tokens:
            leaves = [n for n in self.nodes() if not n.children and (can_evict is None or can_evict(n))]
            if not leaves:
                break
            victim = min(leaves, key=lambda n: n.last_used)
            del victim.parent.children[victim.key[0]]
            freed += len(victim.key)
            self.tokens -= len(victim.key)
            if self.on_evict is not None:
                self.on_evict(victim)
        return freed

    def nodes(self) -> list[Node]:
        out, stack = [], list(self.root.children.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out
