"""The radix tree of the prefix cache: worked examples, and property-based tests (hypothesis) that a hit
equals the brute-force longest common prefix with what was stored, and that eviction never drops a
node the engine rules out."""
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.engine.radix import RadixTree, shared_prefix_tokens
from helpers.serving.traces import agentic_trace, chat_trace


def test_insert_split_and_match_by_hand():
    t = RadixTree()
    assert t.insert([1, 2, 3, 4]) == 4
    assert t.insert([1, 2, 5]) == 1            # shares [1, 2]: the edge splits, one new token
    assert t.tokens == 5
    assert sorted((n.key, bool(n.children)) for n in t.nodes()) == [((1, 2), True), ((3, 4), False), ((5,), False)]
    assert t.match([1, 2, 3, 9]) == 3
    assert t.match([1, 2, 3, 4, 7]) == 4
    assert t.match([1, 2, 3, 4]) == 3          # the last prompt token is always computed
    assert t.match([7, 1]) == 0


def test_lru_eviction_drops_the_least_recently_used_leaf_first():
    t = RadixTree()
    t.insert([1, 2, 3, 4])
    t.insert([5, 6, 7, 8])
    t.match([1, 2, 3, 4, 0])                   # recently used
    assert t.evict(1) == 4 and t.match([5, 6, 7, 8, 0]) == 0 and t.match([1, 2, 3, 4, 0]) == 4
    assert t.evict(100) == 4 and t.tokens == 0


def test_values_follow_their_tokens_through_splits():
    t = RadixTree()
    t.insert([1, 2, 3], value=[10, 20, 30])
    t.insert([1, 2, 4, 5], value=[11, 21, 41, 51])       # splits the edge; tokens already stored keep their value
    assert t.prefix_values([1, 2, 4, 5]) == [10, 20, 41, 51]
    assert t.prefix_values([1, 2, 3, 9]) == [10, 20, 30]
    assert t.prefix_values([1, 9]) == [10]


def test_evict_calls_back_with_each_evicted_node_and_its_values():
    gone = []
    t = RadixTree(on_evict=lambda node: gone.append((node.key, node.value)))
    t.insert([1, 2], value=["a", "b"])
    t.insert([3, 4], value=["c", "d"])
    t.match([3, 4, 0])                                   # [1, 2] is the least recently used
    assert t.evict(2) == 2 and gone == [((1, 2), ("a", "b"))]


tokens = st.lists(st.integers(0, 3), min_size=1, max_size=12)   # a small alphabet: many shared prefixes


@settings(max_examples=300, deadline=None)
@given(st.lists(tokens, min_size=1, max_size=12), tokens)
def test_match_equals_brute_force_longest_common_prefix(stored, query):
    t = RadixTree()
    for s in stored:
        t.insert(s)
    best = max(shared_prefix_tokens(s, query) for s in stored)
    best = min(best, len(query) - 1)
    assert t.match(query) == best
    # the tree stores each distinct prefix once
    distinct = {tuple(s[:i]) for s in stored for i in range(1, len(s) + 1)}
    assert t.tokens == len(distinct)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(tokens, st.booleans()), min_size=1, max_size=15), st.integers(0, 20))
def test_eviction_never_drops_a_node_it_is_told_to_spare(ops, budget):
    t = RadixTree()
    kept = []
    for seq, keep in ops:
        t.insert(seq)
        if keep:
            kept.append(tuple(seq))
        t.evict(budget, lambda node: not any(node in t._walk(s)[1] for s in kept))   # the engine's: blocks in use
        for s in kept:
            assert t.match(list(s) + [99]) == len(s), f"kept {s} was evicted"
        assert t.tokens == sum(len(n.key) for n in t.nodes())
    kept.clear()
    t.evict(10 ** 6)
    assert t.tokens == 0 and t.nodes() == []


def hit_rate(prompts):
    """Replay prompts in order through one tree, each looked up then inserted: (cached ÷ prompt tokens, hits)."""
    t, hits = RadixTree(), []
    for ids in prompts:
        hits.append(t.match(ids))
        t.insert(ids)
    return sum(hits) / sum(len(p) for p in prompts), hits


def test_hit_rates_on_the_shipped_traces_by_brute_force():
    """The tree's hits on word-level 'tokens' of both traces equal a brute-force longest common prefix
    with every earlier prompt; the agentic trace shares far more than the chat trace."""
    for reqs in (chat_trace(12, seed=3), agentic_trace(agents=3, review_rounds=2, seed=3, system_words=80)):
        vocab: dict[str, int] = {}
        prompts = [[vocab.setdefault(wd, len(vocab)) for wd in r.prompt.split()] for r in reqs]
        got = hit_rate(prompts)
        want = [max([shared_prefix_tokens(p, q) for q in prompts[:i]], default=0) for i, p in enumerate(prompts)]
        assert got[1] == [min(w, len(p) - 1) for w, p in zip(want, prompts)]
    chat = hit_rate([[vocab.setdefault(wd, len(vocab)) for wd in r.prompt.split()] for r in chat_trace(12)])
    agent = hit_rate([[vocab.setdefault(wd, len(vocab)) for wd in r.prompt.split()] for r in agentic_trace()])
    assert agent[0] > 0.5 > chat[0]
