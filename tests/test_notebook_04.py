"""Notebook 04's results as tables, and the computed facts its static prose states.

- helpers.capacity.measured.floor_table — each measured model's step beside its floor (bytes ÷ the measured
  bandwidth), their ratio with its label, the time beyond the floor, and the planner's computed row for
  Mistral 7B on an H100 SXM — fed every value a measurement can take: the two committed CPU records, a
  step below its floor beside one above its own (the machine of issue 44), zero, negative differences,
  equal values, missing fields and nothing measured. It never raises.
- The words the notebook types at its fixed cases, checked against the planner (the SLO sets the batch at
  10 ms, the memory at 50 ms; the winner changes within one provider; the decode costs more than the prefill).
"""
from __future__ import annotations

import math

import pytest

from helpers import capacity, records
from helpers.capacity import measured, ranking, slo as capacity_slo, views
from helpers.formulas import regime
from helpers.present import replay

CPUS = ("cpu-intel-xeon", "cpu-amd-epyc")
MiB = 2**20


def recorded(key: str, record: str):
    value, _ = replay.load(key, [records.RESULTS / record])
    return value


def result(floor_s: float, step_s: float, step_bytes: float = 46_559_232, cache: int | None = None,
           device: str = "cpu", device_name: str = "AMD EPYC", profile: str = "tiny") -> dict:
    """A predict_vs_measure result: step_bytes read at step_bytes ÷ floor_s (the measured bandwidth)."""
    return {"label": f"{profile} · fp32 · {device}", "profile": profile, "device": device, "device_name": device_name,
            "predicted_step_s": floor_s, "measured_step_s": step_s, "step_bytes": step_bytes,
            "bandwidth": step_bytes / floor_s if floor_s else 0.0, "last_level_cache_bytes": cache}


# ----------------------------------------------------------------------------- the table

def test_the_table_on_the_amd_record_by_hand():
    tiny, small = recorded("04/predict_vs_measure", "cpu-amd-epyc"), recorded("04/larger", "cpu-amd-epyc")
    t = measured.floor_table([tiny, small])
    assert list(t["label"]) == ["above", "above", regime.NONE]
    # 4.7295 ms against 1.1281 ms (46.6 MB at 41.3 GB/s), 47.159 ms against 17.703 ms (568.5 MB at 32.1 GB/s)
    assert t["measured ÷ floor"][0] == pytest.approx(4.7295075 / 1.1281250, rel=1e-6)
    assert t["measured ÷ floor"][1] == pytest.approx(47.158520 / 17.703346, rel=1e-6)
    assert t["beyond the floor (ms)"][0] == pytest.approx(4.7295075 - 1.1281250, rel=1e-6)
    assert t["beyond the floor (ms)"][1] == pytest.approx(47.158520 - 17.703346, rel=1e-6)
    assert t["bytes per step (MB)"][1] == pytest.approx(568.549376)
    assert t["floor (ms)"][1] == pytest.approx(568.549376e6 / 32.11536267e9 * 1e3, rel=1e-6)
    assert t["last-level cache (MiB)"][1] == 32 and math.isnan(t["last-level cache (MiB)"][0])
    assert math.isnan(t["datasheet floor ÷ measured"][0])        # a CPU has no datasheet


def test_the_table_on_the_intel_record():
    t = measured.floor_table([recorded("04/predict_vs_measure", "cpu-intel-xeon")])
    assert len(t) == 2 and t["label"][0] == "above"
    assert t["measured ÷ floor"][0] == pytest.approx(2.4988680 / 1.8370789, rel=1e-6)


def test_a_step_below_its_floor_beside_one_above_its_own():
    """Issue 44's machine: the small model a few per cent under its floor, the tiny one above (the crash)."""
    t = measured.floor_table([result(3.464e-3, 3.080e-3, cache=480 * MiB),
                              result(21.6e-3, 21.6e-3 * 0.96, step_bytes=568.5e6, profile="small")])
    assert list(t["label"][:2]) == ["below", "at"]
    assert t["beyond the floor (ms)"][0] == pytest.approx(-0.384) and t["beyond the floor (ms)"][1] < 0
    assert t["measured ÷ floor"][0] == pytest.approx(3.080 / 3.464)
    assert t["last-level cache (MiB)"][0] == 480


@pytest.mark.parametrize("step, label", [(0.0, "below"), (1e-9, "below"), (0.95e-3, "at"), (1e-3, "at"),
                                          (1.1e-3, "at"), (1.2e-3, "above"), (1.0, "above")])
def test_every_side_of_the_floor(step, label):
    t = measured.floor_table([result(1e-3, step)], reference=None)
    assert t["label"][0] == label and t["beyond the floor (ms)"][0] == pytest.approx((step - 1e-3) * 1e3)


def test_values_no_measurement_should_give_still_make_a_table():
    t = measured.floor_table([result(0.0, 0.0), result(0.0, 1e-3), {"measured_step_s": float("nan")}, {},
                              result(1e-3, -1e-3)], reference=None)
    assert list(t["label"]) == [regime.NONE, "above", regime.NONE, regime.NONE, "below"]
    assert math.isinf(t["measured ÷ floor"][1]) and t["beyond the floor (ms)"][4] == pytest.approx(-2.0)
    assert t["model"][3] == "?"


def test_nothing_measured_leaves_the_computed_row():
    t = measured.floor_table([None])
    assert len(t) == 1 and t["label"][0] == regime.NONE and math.isnan(t["measured step (ms)"][0])
    empty = measured.floor_table([], reference=None)
    assert empty.empty and "measured ÷ floor" in empty.columns


def test_the_computed_row_is_the_planners_floor_for_mistral_on_an_h100():
    """By hand: the weights a step reads (all but the 32,000 × 4,096 input table, plus one row of it) and 513
    tokens' cache (512 read, 1 written) at 131,072 B per token, ÷ the datasheet's 3.35 TB/s: 4.27 ms."""
    row = measured.computed_row()
    w_read = 2 * (7_241_732_096 - 32_000 * 4096) + 4096 * 2
    step_bytes = w_read + 513 * 131_072
    assert row["bytes per step (MB)"] == pytest.approx(step_bytes / 1e6)
    assert row["floor (ms)"] == pytest.approx(step_bytes / 3.35e12 * 1e3) == pytest.approx(4.2652, abs=1e-4)
    assert row["bandwidth (GB/s)"] == 3350 and row["datasheet floor ÷ measured"] == capacity.DEFAULT_EFFICIENCY
    assert "H100 SXM" in row["model"] and "computed" in row["model"]


def test_a_gpu_rows_datasheet_share_is_the_planners_efficiency():
    # 15e9 B measured at 10 ms on an H100 SXM: the floor at its datasheet's 3.35e12 B/s is 4.478 ms, 44.8 %
    r = result(15e9 / 3.0e12, 0.010, step_bytes=15e9, device="cuda", device_name="NVIDIA H100 80GB HBM3")
    t = measured.floor_table([r], reference=None)
    assert t["datasheet floor ÷ measured"][0] == pytest.approx(15e9 / 3.35e12 / 0.010)
    assert t["measured ÷ floor"][0] == pytest.approx(2.0) and t["label"][0] == "above"


def test_the_larger_profile_is_small_only_where_it_reads_more_bytes():
    from types import SimpleNamespace

    from helpers.formulas.specs import get_spec, spec_from_config
    from helpers.measure.local_models import SMALL_CONFIG, TINY_CONFIG

    def loaded(spec):
        return SimpleNamespace(spec=spec)

    assert measured.larger_profile(loaded(spec_from_config(TINY_CONFIG, "tiny"))) == "small"   # 46 MB against 567 MB
    assert measured.larger_profile(loaded(spec_from_config(SMALL_CONFIG, "small"))) is None    # the same bytes
    assert measured.larger_profile(loaded(get_spec("mistral-7b-v0.1"))) is None                # a GPU's profile


def test_the_glossary_cache_figure_is_the_records():
    """workshop/glossary.md's last-level cache entry quotes the Intel record's L3 as its meta and lscpu say it."""
    from helpers.present import glossary

    text = " ".join(glossary.GLOSSARY.read_text(encoding="utf-8").split())
    meta = records.load(records.RESULTS / "cpu-intel-xeon" / "meta.json", "record-meta")
    lscpu = (records.RESULTS / "cpu-intel-xeon" / "lscpu.txt").read_text(encoding="utf-8")
    l3 = meta["caches"]["l3"].split(" (")[0]                      # '480 MiB'
    assert f"L3 cache: {l3}" in " ".join(lscpu.split())
    assert f"({l3} on the Intel Xeon recorded in `workshop/results/cpu-intel-xeon/`" in text
    assert "last-level-cache" in glossary.anchors()


# ----------------------------------------------------------------------------- the SLO's batch, derived

# Mistral 7B v0.1 in bf16 by hand: 7,241,732,096 parameters, 32,000 × 4,096 of them the input embedding;
# KV per token 2 (K, V) × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B
W_MISTRAL = 2 * (7_241_732_096 - 32_000 * 4096)
ROW = 4096 * 2                                      # one embedding row a token reads
# the KV budget of an H100 SXM (79.11 GiB reported), vLLM's reserve (10 % + 1.5e9 B), the bf16 weights
H100_KV_BUDGET = 79.11 * 2**30 * 0.92 - 1.5e9 - 2 * 7_241_732_096


def k_mistral(context: int) -> int:
    return context * 131_072 + 131_072 + ROW        # the cache read, the new token's written, its embedding row


def test_slo_batch_by_hand_on_an_h100():
    """The derivation's words: at 10 ms the SLO sets the batch; at 50 ms (exercise 1) the memory does."""
    d = capacity_slo.slo_batch("mistral-7b-v0.1", "H100 SXM", 10, 4096, 0.5)
    assert d.weight_bytes == W_MISTRAL == 14_221_320_192 and d.seq_bytes == k_mistral(4096) == 537_010_176
    assert d.step_budget_bytes == pytest.approx(0.010 * 0.5 * 3.35e12)
    assert d.slo_batch == math.floor((0.010 * 0.5 * 3.35e12 - W_MISTRAL) / k_mistral(4096)) == 4
    assert d.max_batch == math.floor(H100_KV_BUDGET / (4096 * 131_072)) == 115
    assert d.derived == d.batch == 4 and d.slo_batch < d.max_batch                    # "the SLO sets it"
    assert d.parity_batch == pytest.approx(W_MISTRAL / k_mistral(4096))
    # the self-check's first question: at 20 ms
    assert capacity_slo.slo_batch("mistral-7b-v0.1", "H100 SXM", 20, 4096, 0.5).batch == \
        math.floor((0.020 * 0.5 * 3.35e12 - W_MISTRAL) / k_mistral(4096)) == 35
    d50 = capacity_slo.slo_batch("mistral-7b-v0.1", "H100 SXM", 50, 4096, 0.5)
    assert d50.slo_batch == math.floor((0.050 * 0.5 * 3.35e12 - W_MISTRAL) / k_mistral(4096)) == 129
    assert d50.derived == d50.batch == 115 and d50.slo_batch >= d50.max_batch         # "the memory sets it"


@pytest.mark.parametrize("gpu", ["H100 SXM", "H200", "A100 80GB", "MI300X", "L40S", "B200"])
@pytest.mark.parametrize("slo_ms", [10, 20, 50, 100])
def test_slo_batch_formula_is_the_bisection_while_memory_bound(gpu, slo_ms):
    d = capacity_slo.slo_batch("mistral-7b-v0.1", gpu, slo_ms, 4096, 0.5)
    if d.plan.bound == "memory":
        assert d.derived == d.batch, (gpu, slo_ms, d)


def test_slo_batch_when_one_sequence_misses_the_slo():
    d = capacity_slo.slo_batch("mistral-7b-v0.1", "L4", 10, 4096, 0.5)
    assert d.slo_batch == 0 and d.batch == 0 and d.derived == 0


# ----------------------------------------------------------------------------- the exercises' static words

def test_exercise_2_the_winner_changes_within_one_provider():
    every = [r for r in ranking.rank("mistral-7b-v0.1", context=4096, slo_ms=20) if r["rank"] == 1][0]
    runpod = [r for r in ranking.rank("mistral-7b-v0.1", context=4096, slo_ms=20, provider="RunPod") if r["rank"] == 1][0]
    assert every["gpu"] != runpod["gpu"] and (every["gpu"], every["provider"], runpod["gpu"]) == ("MI300X", "Vultr", "B200")


def test_exercise_3_the_decode_still_costs_more_than_the_prefill():
    r = capacity.plan("mistral-7b-v0.1", "H100 SXM", context=8192, batch=16, prompt_tokens=6000, output_tokens=500)
    assert r.request_decode_s > r.request_prefill_s and r.prefill_bound == "compute"
    assert r.usd_per_million_output_tokens > r.usd_per_million_input_tokens


def test_the_decode_only_price_is_never_below_the_requests():
    """The request section's static words: the decode-only column, every step timed at the full context, is
    never the lower of the two."""
    for p, o in ((1000, 200), (6000, 500), (100, 3000)):
        rows = ranking.rank_requests("mistral-7b-v0.1", p, o, slo_ms=50)
        ok = [r for r in rows if r["status"] == "ok"]
        # equal where Mistral 7B v0.1's 4,096-token window caps the cache (6,000 + 500 tokens), up to rounding
        assert ok and all(r["usd_per_million_tokens"] >= r["usd_per_million_output_tokens"] * (1 - 1e-12) for r in ok)
        df = views.request_frame(rows)
        assert list(df["output ÷ input price"][: len(ok)]) == [
            round(r["usd_per_million_output_tokens"] / r["usd_per_million_input_tokens"], 1) for r in ok]
        assert df["output ÷ input price"][len(ok):].isna().all()
