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
    held = t.lock([1, 2, 3, 4])
    t.insert([5, 6, 7, 8])
    t.match([5, 6, 7, 8, 0])                   # recently used
    t.insert([9, 10])                          # 10 tokens > 8: evict the least recently used unlocked leaf
    assert (1, 2, 3, 4) in t.sequences() and (5, 6, 7, 8) not in t.sequences() and t.tokens == 6
    t.unlock(held)
    assert t.evict(100) == 6 and t.tokens == 0
    with pytest.raises(ValueError, match="already released"):
        t.unlock(held)
    with pytest.raises(ValueError, match="handle"):
        t.unlock([1, 2])


# SGLang's radix-cache unit cases (test/srt/test_radix_cache_unit.py: lock_ref_operations, insert/match
# with values, evict, page alignment), replayed on this tree.

def test_lock_moves_tokens_from_evictable_to_protected_and_back():
    t = RadixTree()
    t.insert([1, 2, 3], value=[10, 20, 30])
    assert (t.evictable_tokens(), t.protected_tokens()) == (3, 0)
    held = t.lock([1, 2, 3])
    assert (t.evictable_tokens(), t.protected_tokens()) == (0, 3) and held.tokens == 3
    assert t.values(held) == [10, 20, 30]
    t.unlock(held)
    assert (t.evictable_tokens(), t.protected_tokens()) == (3, 0)


def test_values_follow_their_tokens_through_splits_and_partial_matches():
    t = RadixTree()
    t.insert([1, 2, 3], value=[10, 20, 30])
    assert t.values(t.lock([1, 2])) == [10, 20]          # a partial match splits the edge: values split too
    t.insert([1, 2, 4, 5], value=[11, 21, 41, 51])       # tokens already stored keep their first value
    assert t.values(t.lock([1, 2, 4, 5])) == [10, 20, 41, 51]
    with pytest.raises(ValueError, match="one entry per token"):
        t.insert([7, 8], value=[70])


def test_lock_then_insert_then_unlock_releases_exactly_what_was_taken():
    """The case that broke the old unlock(ids): a request locks the cached part of its prompt, inserts
    the whole prompt (which grows the path and splits an edge), then unlocks with its prompt — the old
    walk met nodes it never locked, raised "not locked" and left its lock held."""
    t = RadixTree()
    t.insert([1, 2, 3, 4])
    prompt = [1, 2, 3, 4, 5, 6]
    held = t.lock(prompt)                                # 4 cached tokens locked
    assert held.tokens == 4 and t.protected_tokens() == 4
    t.insert(prompt)                                     # grows the locked path by [5, 6]
    t.insert([1, 2, 9])                                  # splits the locked edge after [1, 2]
    t.unlock(held)
    assert t.protected_tokens() == 0 and all(n.refs == 0 for n in t.nodes())


def test_one_requests_unlock_leaves_another_requests_lock_held():
    """Request A locks the cached [1, 2] of its prompt [1, 2, 3, 4]; B, with the same prompt, finds it
    all cached once A's prompt is in and locks [1, 2, 3, 4]. A's unlock must not release what B holds
    (the old unlock(ids) took B's reference on [3, 4], which an eviction then dropped while B ran)."""
    t = RadixTree()
    t.insert([1, 2])
    a = t.lock([1, 2, 3, 4])
    t.insert([1, 2, 3, 4])
    b = t.lock([1, 2, 3, 4])
    assert (a.tokens, b.tokens) == (2, 4)
    t.unlock(a)
    t.insert([7, 8, 9])
    assert t.evict(100) == 3                             # only [7, 8, 9] can go
    assert t.match([1, 2, 3, 4, 0]) == 4 and t.protected_tokens() == 4
    t.unlock(b)
    assert t.evict(100) == 4 and t.tokens == 0


def test_evict_calls_back_with_each_evicted_node_and_its_values():
    gone = []
    t = RadixTree(on_evict=lambda node: gone.append((node.key, node.value)))
    t.insert([1, 2], value=["a", "b"])
    t.insert([3, 4], value=["c", "d"])
    t.match([3, 4, 0])                                   # [1, 2] is the least recently used
    assert t.evict(2) == 2 and gone == [((1, 2), ("a", "b"))]


@pytest.mark.parametrize("page, length", [(1, 5), (2, 5), (4, 6)])
def test_hits_are_page_aligned(page, length):
    t = RadixTree(block_size=page)
    t.insert(list(range(length)))
    hit = t.match(list(range(length)) + [99])
    assert hit > 0 and hit % page == 0 and hit == length - length % page


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
            locked.append((tuple(seq), t.lock(seq)))
        for s, held in locked:
            assert t.match(list(s) + [99]) == len(s) == held.tokens, f"locked {s} was evicted"
        assert t.tokens == sum(len(n.key) for n in t.nodes())
    for _, held in locked:
        t.unlock(held)
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
        assert got.hits == [min(w, len(p) - 1) for w, p in zip(want, prompts)]
    chat = hit_rate([[vocab.setdefault(wd, len(vocab)) for wd in r.prompt.split()] for r in chat_trace(12)])
    agent = hit_rate([[vocab.setdefault(wd, len(vocab)) for wd in r.prompt.split()] for r in agentic_trace()])
    assert agent.hit_rate > 0.5 > chat.hit_rate
