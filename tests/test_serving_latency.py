"""helpers.serving.naive.latency_cost: what batching costs each request, on hand-made timelines."""
import pytest

from helpers.serving.naive import RequestTiming, ServeResult, ServingComparison, latency_cost


def test_latency_cost_by_hand():
    # one after another: request 0 prefills 0–0.1 s and decodes 4 tokens to 0.4 s; request 1 waits until 0.4 s
    seq = ServeResult("one after another", [RequestTiming(0, 10, 4, 0.0, 0.1, 0.4),
                                            RequestTiming(1, 20, 2, 0.4, 0.6, 0.7)], 0.7, 6)
    # together: one padded prefill to 0.3 s, steps of 0.15 s
    bat = ServeResult("together (one batch)", [RequestTiming(0, 10, 4, 0.0, 0.3, 0.75),
                                               RequestTiming(1, 20, 2, 0.0, 0.3, 0.45)], 0.75, 4)
    rows = {r.mode: r for r in latency_cost(ServingComparison(seq, bat))}
    s, b = rows["one after another"], rows["together (one batch)"]
    assert s.median_ttft_ms == pytest.approx(350)      # (100 + 600) / 2
    assert s.median_prefill_ms == pytest.approx(150)   # (100 + 200) / 2
    assert s.median_decode_step_ms == pytest.approx(100)   # 300/3 and 100/1
    assert b.median_ttft_ms == b.median_prefill_ms == pytest.approx(300)
    assert b.median_decode_step_ms == pytest.approx(150)   # 450/3 and 150/1
    assert s.tokens_per_s == pytest.approx(6 / 0.7) and b.tokens_per_s == pytest.approx(6 / 0.75)


def test_latency_cost_skips_a_mode_that_ran_out_of_memory_and_single_token_requests():
    bat = ServeResult("together (one batch)", [RequestTiming(0, 5, 1, 0.0, 0.2, 0.2)], 0.2, 1)
    rows = latency_cost(ServingComparison(None, bat, "sequential: OutOfMemoryError"))
    assert len(rows) == 1 and rows[0].median_decode_step_ms != rows[0].median_decode_step_ms  # NaN
