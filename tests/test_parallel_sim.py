"""helpers.parallel.sim: the shared pool and the disaggregated split on cases worked by hand."""
import pytest

from helpers.parallel.links import custom_link
from helpers.parallel.sim import (FixedCosts, PlannerCosts, Request, compare, per_request, simulate_shared,
                                  simulate_split, split_verdict, summarize, Summary, SPLIT_VERDICTS)

MS = 1e-3
COSTS = FixedCosts(prefill_per_token_s=1 * MS, decode_step_s=5 * MS, kv_bytes_per_token=1000)
TWO = [Request(0, 0.0, 10, 3), Request(1, 0.0, 10, 3)]


def _by_rid(finished):
    return {r.rid: r for r in per_request(finished, 1.0, 1.0)}


def test_one_request_one_gpu():
    # prefill 10 tokens × 1 ms → first token at 10 ms; then tokens at 15 and 20 ms
    (s,) = simulate_shared([Request(0, 0.0, 10, 3)], COSTS, gpus=1)
    assert s.times == pytest.approx([10 * MS, 15 * MS, 20 * MS]) and s.done_s == pytest.approx(20 * MS)


def test_shared_pool_stalls_decode_for_a_prefill():
    # r0 prefill 0–10, r1 prefill 10–20 (r0 waits), both decode 20–25 and 25–30
    r = _by_rid(simulate_shared(TWO, COSTS, gpus=1))
    assert r[0].ttft_s == pytest.approx(10 * MS) and r[0].itl_s == pytest.approx(10 * MS)
    assert r[1].ttft_s == pytest.approx(20 * MS) and r[1].itl_s == pytest.approx(5 * MS)


def test_split_without_link_cost_keeps_itl_steady():
    # prefill GPU: r0 0–10, r1 10–20; decode GPU: r0 at 10 → 15, 20; r1 at 20 → 25, 30
    r = _by_rid(simulate_split(TWO, COSTS, 1, 1, link=None))
    assert [r[i].ttft_s for i in (0, 1)] == pytest.approx([10 * MS, 20 * MS])
    assert [r[i].itl_s for i in (0, 1)] == pytest.approx([5 * MS, 5 * MS])


def test_split_pays_for_the_kv_transfer():
    # 10 tokens × 1000 B over 1e6 B/s each way = 10 ms, plus NCCL's 3.6 µs base latency (hop 0 here)
    link = custom_link("slow", 1e6, 0.0)
    move = 10 * MS + 3.6e-6
    r = _by_rid(simulate_split(TWO, COSTS, 1, 1, link=link))
    # r0 ready at 10 + move (= 20.0036 ms): tokens at 25.0036 and 30.0036 ms;
    # r1 prefilled 10–20, ready at 20 + move (= 30.0036 ms): tokens at 35.0036 and 40.0036 ms
    assert r[0].ttft_s == pytest.approx(10 * MS)
    assert r[0].itl_s == pytest.approx((10 * MS + move) / 2)        # (20 + move − 10) / 2
    assert r[1].itl_s == pytest.approx((10 * MS + move) / 2)        # (30 + move − 20) / 2


def test_goodput_and_attainment_by_hand():
    # SLO: TTFT ≤ 25 ms, ITL ≤ 6 ms. Shared on 1 GPU: r0 misses (ITL 10 ms), r1 meets; 1 in 30 ms
    s = summarize(simulate_shared(TWO, COSTS, gpus=1), 25 * MS, 6 * MS)
    assert s.slo_attainment == 0.5 and s.goodput_rps == pytest.approx(1 / (30 * MS))
    # shared on 2 GPUs: each request alone on a GPU, done at 20 ms, both meet: 2 in 20 ms
    rows = compare(TWO, COSTS, 2, None, 25 * MS, 6 * MS)
    assert rows[0].goodput_rps == pytest.approx(2 / (20 * MS))
    # split 1 + 1: both meet, done at 30 ms
    assert rows[1].goodput_rps == pytest.approx(2 / (30 * MS))
    assert split_verdict(rows) == "does not pay"


def test_split_verdict_reads_goodput_with_a_ten_percent_margin():
    def rows(shared, *splits):
        return [Summary(1, None, None, None, None, 1.0, g, 1.0) for g in (shared, *splits)]

    assert split_verdict(rows(10.0, 11.5)) == "pays"                                      # 1.15 > 1.10
    assert split_verdict(rows(10.0, 10.5, 9.0)) == "about equal"                          # best 1.05: within 10%
    assert split_verdict(rows(10.0, 10.5)) != "pays"                                      # was "pays" at a strict >
    assert split_verdict(rows(10.0, 11.0)) == "about equal"                               # exactly 1.10: not more
    assert split_verdict(rows(10.0, 9.2)) == "about equal"                                # 0.92 ≥ 1/1.1 = 0.909
    assert split_verdict(rows(10.0, 9.0)) == "does not pay"                               # 0.90 < 0.909
    assert split_verdict(rows(0.0, 1.0)) == "pays" and split_verdict(rows(0.0, 0.0)) == "about equal"
    assert SPLIT_VERDICTS == ("pays", "about equal", "does not pay")                      # notebook 09's options
    assert split_verdict(rows(10.0, 10.5), margin=0.0) == "pays"
    with pytest.raises(ValueError, match="shared pool and at least one split"):
        split_verdict(rows(10.0))


def test_planner_costs_are_the_planners_and_deterministic():
    from helpers.capacity.planner import plan

    c = PlannerCosts("mistral-7b-v0.1", "H100 SXM")
    assert c.prefill_s(512) == plan("mistral-7b-v0.1", "H100 SXM", context=512, batch=1).prefill_s
    assert c.decode_s(4, 300) == plan("mistral-7b-v0.1", "H100 SXM", context=512, batch=4).step_s
    reqs = [Request(i, i * 0.01, 2000, 50) for i in range(12)]
    a = compare(reqs, c, 4, custom_link("x", 50e9, 1e-6), 0.5, 0.03)
    b = compare(reqs, c, 4, custom_link("x", 50e9, 1e-6), 0.5, 0.03)
    assert a == b and len(a) == 4 and all(r.requests == 12 for r in a)


def test_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        simulate_shared([], COSTS)
    with pytest.raises(ValueError, match="prompt and output"):
        simulate_shared([Request(0, 0.0, 0, 3)], COSTS)
    with pytest.raises(ValueError, match="decode GPUs"):
        simulate_split(TWO, COSTS, 1, 0)
