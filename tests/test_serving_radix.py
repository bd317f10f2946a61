"""The radix tree of the prefix cache: worked examples, and property-based tests (hypothesis) that a hit
equals the brute-force longest common prefix with what was stored, and that eviction never drops a
node a request is using."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.serving.radix import RadixTree, hit_rate
from helpers.serving.traces import agentic_trace, chat_trace, shared_prefix_tokens


def test_insert_split_and_match_by_hand():
    t = RadixTree()
    assert t.insert([1, 2, 3, 4]) == 4
    assert t.insert([1, 2, 5]) == 1            # shares [1, 2]: the edge splits, one new token
    assert t.tokens == 5
    assert sorted(t.sequences()) == [(1, 2, 3, 4), (1, 2, 5)]
    assert t.match([1, 2, 3, 9]) == 3
    assert t.match([1, 2, 3, 4, 7]) == 4
    assert t.match([1, 2, 3, 4]) == 3          # the last prompt token is always computed
    assert t.match([7, 1]) == 0


def test_block_aligned_hits():
    t = RadixTree(block_size=4)
    t.insert(list(range(10)))
    assert t.match(list(range(10)) + [99]) == 8   # 10 cached tokens, two whole blocks of 4
    assert t.match(list(range(3)) + [99]) == 0


def test_lru_eviction_spares_locked_paths():
    t = RadixTree(capacity_tokens=8)
    t.insert([1, 2, 3, 4])
    t.lock([1, 2, 3, 4])
    t.insert([5, 6, 7, 8])
    t.match([5, 6, 7, 8, 0])                   # recently used
    t.insert([9, 10])                          # 10 tokens > 8: evict the least recently used unlocked leaf
    assert (1, 2, 3, 4) in t.sequences() and (5, 6, 7, 8) not in t.sequences() and t.tokens == 6
    t.unlock([1, 2, 3, 4])
    assert t.evict(100) == 6 and t.tokens == 0
    t.insert([1, 2])
    with pytest.raises(ValueError, match="not locked"):
        t.unlock([1, 2])


def test_bad_input():
    with pytest.raises(ValueError, match="block_size"):
        RadixTree(block_size=0)
    with pytest.raises(ValueError, match="capacity_tokens"):
        RadixTree(capacity_tokens=-1)


tokens = st.lists(st.integers(0, 3), min_size=1, max_size=12)   # a small alphabet: many shared prefixes


@settings(max_examples=300, deadline=None)
@given(st.lists(tokens, min_size=1, max_size=12), tokens, st.integers(1, 4))
def test_match_equals_brute_force_longest_common_prefix(stored, query, block):
    t = RadixTree(block_size=block)
    for s in stored:
        t.insert(s)
    best = max(shared_prefix_tokens(s, query) for s in stored)
    best = min(best, len(query) - 1)
    assert t.match(query) == best - best % block
    # the tree stores each distinct prefix once
    distinct = {tuple(s[:i]) for s in stored for i in range(1, len(s) + 1)}
    assert t.tokens == len(distinct)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(tokens, st.booleans()), min_size=1, max_size=15), st.integers(0, 20))
def test_eviction_never_drops_a_locked_prefix(ops, capacity):
    t = RadixTree(capacity_tokens=capacity)
    locked = []
    for seq, lock in ops:
        t.insert(seq)
        if lock and t.match(seq + [99]) == len(seq):   # still fully stored: a request starts using it
            t.lock(seq)
            locked.append(tuple(seq))
        for s in locked:
            assert t.match(list(s) + [99]) == len(s), f"locked {s} was evicted"
        assert t.tokens == sum(len(n.key) for n in t.nodes())
    for s in locked:
        t.unlock(list(s))
    t.evict(10 ** 6)
    assert t.tokens == 0 and t.nodes() == []


def test_hit_rates_on_the_shipped_traces_by_brute_force():
    """The tree's hits on word-level 'tokens' of both traces equal a brute-force longest common prefix
    with every earlier prompt; the agentic trace shares far more than the chat trace."""
    for reqs in (chat_trace(12, seed=3), agentic_trace(agents=3, review_rounds=2, seed=3, system_words=80)):
        vocab: dict[str, int] = {}
        prompts = [[vocab.setdefault(wd, len(vocab)) for wd in r.prompt.split()] for r in reqs]
        got = hit_rate(prompts, block_size=1)
        want = [max([shared_prefix_tokens(p, q) for q in prompts[:i]], default=0) for i, p in enumerate(prompts)]
        assert got["hits"] == [min(w, len(p) - 1) for w, p in zip(want, prompts)]
    chat = hit_rate([[vocab.setdefault(wd, len(vocab)) for wd in r.prompt.split()] for r in chat_trace(12)])
    agent = hit_rate([[vocab.setdefault(wd, len(vocab)) for wd in r.prompt.split()] for r in agentic_trace()])
    assert agent["hit rate"] > 0.5 > chat["hit rate"]
