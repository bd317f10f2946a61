"""helpers.serving.traces: the same trace for the same seed, the shapes the notebooks rely on."""
from helpers.engine.radix import shared_prefix_tokens
from helpers.serving import traces


def test_chat_trace_is_reproducible_and_long_tailed():
    a, b = traces.chat_trace(200, seed=3), traces.chat_trace(200, seed=3)
    assert a == b
    assert traces.chat_trace(200, seed=4) != a
    outs = sorted(r.max_new_tokens for r in a)
    median, p95 = outs[100], outs[190]
    assert 30 <= median <= 70            # log-normal around the asked median of 48
    assert p95 > 1.8 * median            # a long tail, as in ShareGPT
    assert all(r.arrival_s == 0.0 for r in a)


def test_agentic_trace_rounds_share_growing_prefixes():
    reqs = traces.agentic_trace(agents=3, review_rounds=2, seed=0)
    assert [r.round for r in reqs] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    words = [r.prompt.split(" ") for r in reqs]
    # every prompt starts with the same system prompt
    assert all(r.prompt.startswith(traces.SYSTEM_PROMPT_HEAD) for r in reqs)
    # reviewers of one round share everything up to their own line; later rounds extend earlier ones
    same_round = shared_prefix_tokens(words[3], words[4])
    cross_round = shared_prefix_tokens(words[0], words[3])
    assert same_round > cross_round > 600
    assert shared_prefix_tokens(words[6], words[7]) > same_round


def test_shared_prefix_is_brute_force_lcp():
    assert shared_prefix_tokens([1, 2, 3], [1, 2, 4]) == 2
    assert shared_prefix_tokens([], [1]) == 0
    assert shared_prefix_tokens([5, 6], [5, 6, 7]) == 2
