"""The read side of the engine benchmark (helpers.benchmark) on every value a measurement can produce: a
run's figures worked by hand; a run with no request, every request failed, a zero duration, one repeat,
two equal repeats; the level table, the batching and queue tables, the ranking, the goodput and the guide's
rows on them, never raising; records of the older format (one run per level, a fresh trace per level) read
as they are; and the committed record, whose runs made under load are gone or said to be."""
import math
from pathlib import Path

import pytest

from helpers import records as helper_records
from helpers.benchmark import figures, guide, metrics, records
from helpers.formulas import regime

ROOT = Path(__file__).resolve().parent.parent
SLO = metrics.SLO(1.0, 0.1)


def run(rows, duration=1.0, concurrency=1, rate=None, repeat=0, achieved=None, tool="client", workload="chat",
        trace="t1", others=0.0):
    return {"tool": tool, "workload": workload, "concurrency": concurrency, "rate": rate, "repeat": repeat,
            "trace": trace, "duration_s": duration, "achieved_rate": achieved, "requests_detail": rows,
            "others": others, "load_average": [0.5, 0.6]}


def record(*configs) -> dict:
    return {"plan": {"slo": [1.0, 0.1], "concurrencies": [1, 4]}, "measured_on": {"profile": "tiny"},
            "configs": [{"config": {"name": n}, "runs": rs, "faults": []} for n, rs in configs]}


GOOD = [[0.2, 0.01, 0.5, 31], [0.3, 0.02, 0.9, 32]]


def test_run_figures_worked_by_hand():
    f = metrics.run_figures(run(GOOD + [None], duration=2.0), SLO)
    assert f["requests"] == 3 and f["failed"] == 1 and f["output tok/s"] == pytest.approx(63 / 2)
    assert f["TTFT mean ms"] == pytest.approx(250) and f["ITL mean ms"] == pytest.approx(15)
    assert f["E2E mean ms"] == pytest.approx(700) and f["SLO attained"] == pytest.approx(2 / 3)
    assert f["norm. latency ms/token"] == pytest.approx((500 / 31 + 900 / 32) / 2)


@pytest.mark.parametrize("rows, duration", [([], 1.0), ([None, None], 1.0), (GOOD, 0.0), (GOOD, None),
                                            ([[0.0, None, 0.0, 1]], 1e-9), ([[0.0, 0.0, 0.0, 0]], 1.0),
                                            ([[0.2]], 1.0), ([[], "x"], 1.0)])
def test_run_figures_never_raise_on_what_a_run_can_be(rows, duration):
    f = metrics.run_figures(run(rows, duration=duration), SLO)
    assert f["requests"] == len(rows) and all(isinstance(v, (int, float)) for v in f.values())


def test_spread_median_and_held_on_the_extremes():
    assert math.isnan(metrics.spread([])) and math.isnan(metrics.spread([5.0]))      # one run: no spread
    assert metrics.spread([2.0, 2.0]) == 0 and metrics.spread([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert metrics.spread([0.0, 0.0]) == 0 and math.isnan(metrics.spread([-1.0, 1.0, 0.0]))   # a zero median
    assert math.isnan(metrics.median([None, float("nan")]))
    assert metrics.held(8.0, 7.5, 48) and not metrics.held(8.0, 5.0, 48) and not metrics.held(8.0, 8.0, 4)
    assert not metrics.held(None, 8.0, 48) and not metrics.held(8.0, None, 48)


def test_distserve_goodput_reads_only_held_rates():
    pts = [(2.0, 1.0, True), (4.1, 0.95, True), (8.3, 0.5, True), (16.0, 1.0, True)]
    assert metrics.distserve_goodput(pts) == 4.1                         # stops at the first rate below 90 %
    assert metrics.distserve_goodput([(2.0, 1.0, False), (4.0, 1.0, True)]) == 4.0
    assert math.isnan(metrics.distserve_goodput([(2.0, 0.5, True)])) and math.isnan(metrics.distserve_goodput([]))
    assert math.isnan(metrics.distserve_goodput([(2.0, None, True)]))


SYNTHETIC = {
    "regular": record(("HF transformers serve", [run(GOOD, 1.0, 1, repeat=i) for i in range(3)]
                       + [run(GOOD, 3.0, 4, repeat=i) for i in range(3)]),
                      ("HF transformers serve + continuous batching", [run(GOOD, 0.5, c, repeat=i) for c in (1, 4)
                                                                      for i in range(3)])),
    "empty": record(),
    "every request failed": record(("HF transformers serve", [run([None, None], 1.0, c) for c in (1, 4)])),
    "zero": record(("HF transformers serve", [run([[0.0, 0.0, 0.0, 1]], 0.0, c) for c in (1, 4)])),
    "one sample": record(("HF transformers serve", [run(GOOD[:1], 1.0, 1)])),
    "equal": record(("HF transformers serve", [run(GOOD, 1.0, 1, repeat=i) for i in range(2)]),
                    ("HF transformers serve + continuous batching", [run(GOOD, 1.0, 1, repeat=i) for i in range(2)])),
    "open loop only": record(("HF transformers serve", [run(GOOD * 20, 2.0, None, rate=r, achieved=r * 0.99, repeat=i)
                                                        for r in (2.0, 8.0) for i in range(2)])),
}


@pytest.mark.parametrize("name", SYNTHETIC)
def test_every_table_and_figure_reads_every_regime(name):
    data = SYNTHETIC[name]
    levels = records.levels_table(data, SLO)
    for table in (records.runs_table(data), levels, records.goodput_table(levels), records.batching_table(levels),
                  records.queue_table(levels), records.ranking(levels, 1), records.ranking(levels, 4),
                  guide.cpu_rows(data, data), guide.cpu_rows(None, data), guide.cpu_rows(data, None),
                  records.levels_table(data, workload="agentic")):
        assert table is not None
    for fig in (figures.curve_figure(levels, "s"), figures.open_loop_figure(levels, "s"),
                figures.prefix_figure(levels, "s"), figures.tools_figure(levels, "s"),
                figures.chunks_figure({"token_s": [], "error": "x"}, "s"), figures.chunks_figure(None, "s")):
        assert fig is not None
    assert records.status_markdown(data) and records.provenance(data)


def test_the_level_table_holds_the_median_and_spread_of_repeats():
    levels = records.levels_table(SYNTHETIC["regular"], SLO)
    one = levels[(levels["configuration"] == "HF transformers serve") & (levels["concurrency"] == 4)].iloc[0]
    assert one["runs"] == 3 and one["requests per run"] == 2 and one["output tok/s"] == pytest.approx(63 / 3)
    assert one["output spread"] == 0 and one["trace"] == "t1" and one["SLO attained"] == 1.0


def test_batching_and_queue_tables_worked_by_hand():
    levels = records.levels_table(SYNTHETIC["regular"], SLO)
    b = records.batching_table(levels).set_index("concurrency")
    assert b.at[4, "tok/s on ÷ off"] == pytest.approx(6.0) and b.at[4, "tok/s label"] == regime.ABOVE
    assert b.at[1, "ITL ms on ÷ off"] == pytest.approx(1.0) and b.at[1, "ITL ms label"] == regime.AT
    q = records.queue_table(levels).iloc[0]
    assert q["TTFT by the law ms"] == pytest.approx(250 + 3 * 700) and q["label"] == regime.BELOW
    equal = records.batching_table(records.levels_table(SYNTHETIC["equal"], SLO))
    assert list(equal["tok/s label"]) == [regime.AT]


def test_the_ranking_is_sorted_and_a_tie_is_two_at_the_top():
    r = records.ranking(records.levels_table(SYNTHETIC["regular"], SLO), 4)
    assert list(r["output tok/s"]) == sorted(r["output tok/s"], reverse=True)
    assert list(r["÷ best label"]) == [regime.AT, regime.BELOW]
    tie = records.ranking(records.levels_table(SYNTHETIC["equal"], SLO), 1)
    assert list(tie["÷ best label"]) == [regime.AT, regime.AT]


def test_the_guide_shows_both_runs_where_they_disagree_and_cites_each():
    live, rec = SYNTHETIC["regular"], SYNTHETIC["equal"]
    rows = guide.cpu_rows(live, rec, live_label="live")
    one = rows[rows["situation"] == "one user"]
    cb = one[one["configuration"] == "HF transformers serve + continuous batching"]
    assert set(cb["from"]) == {"live", f"record: {records.provenance(rec)}"}           # 2× apart: both
    base = one[one["configuration"] == "HF transformers serve"]
    assert list(base["from"]) == ["live"] and base["live ÷ record label"].iloc[0] == regime.AT
    assert set(guide.cpu_rows(None, rec)["from"]) == {f"record: {records.provenance(rec)}"}


def test_the_committed_record_was_measured_idle_on_the_same_requests_three_times_a_level():
    """The committed engine record (make engines on an idle 2-core Xeon): no run measured while other
    processes took more than IDLE_OTHERS of the cores; every chat level of every configuration ran three
    times on one trace, so each figure has its spread; continuous batching's rows are there and healthy
    (its first token in tens of ms, not the 519–591 ms of the AMD record made under load, now removed)."""
    import json

    data = helper_records.load(records.RECORD, "engines")
    assert data["idle"] is True and data["others_max"] <= data["idle_others"]
    assert "idle" in records.provenance(data) and "under load" not in records.provenance(data)
    levels = records.levels_table(data)
    assert len(levels) >= 30 and (levels["runs"] == 3).all() and levels["output spread"].notna().all()
    assert levels["trace"].nunique() == 1
    cb = levels[levels["configuration"] == "HF transformers serve + continuous batching"]
    assert len(cb) >= 5 and (cb["TTFT mean ms"] < 100).all() and (cb["ITL mean ms"] < 25).all()
    assert not (ROOT / "workshop/results/cpu-amd-epyc/engines.json").exists()
    assert "engines.json" not in json.loads((ROOT / "workshop/results/cpu-amd-epyc/meta.json").read_text())["bench_files"]


def test_the_slo_of_a_record_that_holds_none_or_a_cut_one_is_the_default():
    for d in ({"configs": [], "skipped": []}, {"slo_s": [1.0]}):
        assert records.slo_of(d) == records.DEFAULT_SLO
    assert records.slo_of({"slo_s": [2.0, 0.2]}) == metrics.SLO(2.0, 0.2)
    assert records.slo_of({"plan": {"slo": [0.5, 0.05]}}) == metrics.SLO(0.5, 0.05)


def test_the_client_shown_in_08_is_the_one_that_runs():
    src = records.client_source()
    assert src.startswith("async def stream_one(") and "time.perf_counter()" in src
    assert records.client_source("no_such_function") == ""


def test_the_gpu_batching_table_is_the_planners_step():
    """Mistral 7B bf16 on an H100 SXM: 14.5 GB of weights read per step (notebook 08's prose); its floor grows
    by the batch's KV cache alone, so tokens/s grows with the batch; the tiny model has 20 M parameters."""
    from helpers.formulas.memory import weight_bytes
    from helpers.formulas.specs import get_spec, param_count
    from helpers.measure.local_models import TINY_CONFIG

    assert weight_bytes(get_spec("mistral-7b-v0.1"), "bf16").bytes / 1e9 == pytest.approx(14.5, abs=0.05)
    assert round(param_count(dict(TINY_CONFIG)) / 1e6) == 20                 # "the 20 M-parameter fp32 model"
    t = guide.gpu_batching_table()
    assert list(t["batch"]) == [1, 4, 8, 32] and t["step floor ms"].is_monotonic_increasing
    assert 1 < t["× batch 1"].iloc[2] <= 8 and t["× batch 1"].iloc[1] == pytest.approx(4, rel=0.05)
