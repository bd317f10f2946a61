"""The rules notebook 04 says its conclusions with (helpers.capacity.measured's against_floor, against_floor_way and
floor_shares, helpers.capacity.ranking.against_datasheet, helpers.capacity.slo.slo_batch), each fed every regime it can
meet — the two committed CPU records (Intel Xeon, AMD EPYC), the Intel record's live run (its executed text: a step
shorter than its floor, the tiny model's 46 MB of weights in a 480 MiB L3), a GPU-like step at 90 % of its floor,
fixed-cost steps 10× and 20× their floor — and its words checked against numbers recomputed here."""
from __future__ import annotations

import math

import pytest

from helpers import capacity, records
from helpers.capacity import measured, ranking, slo as capacity_slo
from helpers.formulas.verdicts import factor, share_band
from helpers.present import replay

CPUS = ("cpu-intel-xeon", "cpu-amd-epyc")
MiB = 2**20


def recorded(key: str, record: str):
    value, _ = replay.load(key, [records.RESULTS / record])
    return value


def result(floor_s: float, step_s: float, cache: int | None = None, step_bytes: float = 46_559_232,
           weight_bytes: float = 46_409_728) -> dict:
    """A predict_vs_measure result with the tiny model's bytes, its floor at step_bytes ÷ floor_s."""
    return {"profile": "tiny", "predicted_step_s": floor_s, "measured_step_s": step_s, "step_bytes": step_bytes,
            "weight_bytes": weight_bytes, "bandwidth": step_bytes / floor_s, "last_level_cache_bytes": cache}


def _checked(r: dict):
    v = measured.against_floor(r)
    ratio = r["measured_step_s"] / r["predicted_step_s"]
    assert v.evidence["ratio"] == pytest.approx(ratio)
    assert v.evidence["beyond_s"] == pytest.approx(r["measured_step_s"] - r["predicted_step_s"])
    assert f"{r['measured_step_s'] * 1e3:,.3f} ms" in v.words and f"{r['predicted_step_s'] * 1e3:,.3f} ms" in v.words
    assert f"{r['bandwidth'] / 1e9:,.1f} GB/s" in v.words
    return v, ratio


# ----------------------------------------------------------------------------- the measured step against its floor

def test_against_floor_on_the_intel_record():
    r = recorded("04/predict_vs_measure", "cpu-intel-xeon")
    v, ratio = _checked(r)
    # 2.499 ms against 1.837 ms: 1.36×, the floor 74 % of the step
    assert ratio == pytest.approx(2.4988680 / 1.8370789, rel=1e-6)
    assert "1.36× the planner's floor" in v.words
    assert "74 % of the step (most)" in v.words and "reading the bytes sets most of the step" in v.words
    assert "0.662 ms per step are beyond it" in v.words
    assert measured.against_floor_way(r) == "above the floor"


def test_against_floor_on_the_amd_record():
    r = recorded("04/predict_vs_measure", "cpu-amd-epyc")
    v, ratio = _checked(r)
    # 4.730 ms against 1.128 ms: 4.2×, the floor 24 % of the step — the per-step costs set most of it
    assert ratio == pytest.approx(4.7295075 / 1.1281250, rel=1e-6) and f"{factor(ratio)} the planner's floor" in v.words
    assert "24 % of the step (less than half)" in v.words and "something other than reading the bytes" in v.words
    assert measured.against_floor_way(r) == "above the floor"


def test_against_floor_on_the_intel_live_run_that_beat_its_floor():
    # workshop/results/cpu-intel-xeon/executed-text/04: floor 3.464 ms at 13.4 GB/s, measured 3.080 ms (0.89)
    r = result(3.464e-3, 3.080e-3, cache=480 * MiB)
    v, ratio = _checked(r)
    assert ratio == pytest.approx(0.889, abs=1e-3)
    assert "0.89× the planner's floor" in v.words and "shorter than the floor" in v.words
    assert f"read at {factor(1 / ratio)} the measured bandwidth" in v.words and factor(1 / ratio) == "1.12×"
    assert "its weights (46.4 MB) fit the last-level cache (480 MiB)" in v.words
    assert measured.against_floor_way(r) == "below the floor"
    # the same step where the cache is unknown (an old record), or smaller than the weights
    for cache in (None, 32 * MiB):
        words = measured.against_floor(result(3.464e-3, 3.080e-3, cache=cache)).words
        assert "the measured copy bandwidth was not what bounded it" in words and "last-level" not in words


def test_against_floor_on_a_gpu_like_step():
    # 90 % of the floor's speed: 1.11× the floor, outside the margin, the floor nearly all of the step
    v, ratio = _checked(result(4.27e-3, 4.27e-3 / 0.9))
    assert share_band(1 / ratio) == "nearly all" and "90 % of the step (nearly all)" in v.words
    assert "reading the bytes is the step" in v.words
    # within the margin: at the floor
    v, _ = _checked(result(4.27e-3, 4.27e-3 * 1.05))
    assert "at the floor (within 10%)" in v.words and "1.05× the planner's floor" in v.words
    assert measured.against_floor_way(result(4.27e-3, 4.27e-3 * 1.05)) == "at the floor"


@pytest.mark.parametrize("times, band", [(10, "less than half"), (20, "a small part"), (2, "about half")])
def test_against_floor_when_a_fixed_cost_dominates(times, band):
    v, ratio = _checked(result(1e-3, times * 1e-3))
    assert f"{100 / times:,.0f} % of the step ({band})" in v.words
    if band == "about half":
        assert "reading the bytes sets about half of it" in v.words
    else:
        assert "something other than reading the bytes sets most of the step" in v.words


# ----------------------------------------------------------------------------- the profile's model against the larger one

def larger(floor_s: float, step_s: float) -> dict:
    """A predict_vs_measure result of the small profile: 568.5 MB per step."""
    return dict(result(floor_s, step_s, step_bytes=568_549_376, weight_bytes=567_353_344), profile="small")


def test_floor_shares_on_the_amd_record():
    # the tiny-trained step 4.73 ms against its 1.13 ms floor (24 %); the small step 47.2 ms against 17.7 ms (38 %)
    small, large = recorded("04/predict_vs_measure", "cpu-amd-epyc"), recorded("04/larger", "cpu-amd-epyc")
    assert large["profile"] == "small" and large["step_bytes"] == 568_549_376
    v = measured.floor_shares(small, large)
    f_small = small["predicted_step_s"] / small["measured_step_s"]
    f_large = large["predicted_step_s"] / large["measured_step_s"]
    assert v.evidence["small_fraction"] == pytest.approx(f_small) and v.evidence["large_fraction"] == pytest.approx(f_large)
    assert (round(100 * f_small), round(100 * f_large)) == (24, 38)
    assert "24 % of tiny-trained's step (46.6 MB read) and 38 % of small's (569 MB)" in v.words
    assert f"the larger model's step is more of its floor ({factor(f_large / f_small)} the share)" in v.words
    beyond = (small["measured_step_s"] - small["predicted_step_s"], large["measured_step_s"] - large["predicted_step_s"])
    assert f"{beyond[0] * 1e3:,.2f} ms and {beyond[1] * 1e3:,.2f} ms beyond the floors" in v.words
    assert f"the larger model's is {factor(beyond[1] / beyond[0])} the smaller's" in v.words     # 3.60 and 29.46 ms
    assert "time that grows with the bytes" in v.words and "a cost paid per step, whatever" not in v.words
    assert "2.7× the planner's floor" in measured.against_floor(large).words


def test_the_larger_profile_is_small_only_where_it_reads_more_bytes():
    from types import SimpleNamespace

    from helpers.formulas.specs import get_spec, spec_from_config
    from helpers.measure.local_models import SMALL_CONFIG, TINY_CONFIG

    def loaded(spec):
        return SimpleNamespace(spec=spec)

    assert measured.larger_profile(loaded(spec_from_config(TINY_CONFIG, "tiny"))) == "small"   # 46 MB against 567 MB
    assert measured.larger_profile(loaded(spec_from_config(SMALL_CONFIG, "small"))) is None    # the same bytes
    assert measured.larger_profile(loaded(get_spec("mistral-7b-v0.1"))) is None                # a GPU's profile


def test_floor_shares_when_the_small_model_beat_its_floor():
    # the Intel live run: tiny 0.89× its floor, small 1.17× its (executed text: 21.6 ms planner, 25.3 ms measured)
    v = measured.floor_shares(result(3.464e-3, 3.080e-3), larger(21.6e-3, 25.3e-3))
    assert "112 % of tiny's step" in v.words and "85 % of small's" in v.words
    assert "tiny's step beat its floor" in v.words and "do not compare" in v.words


def test_floor_shares_same_and_lower():
    same = measured.floor_shares(result(1e-3, 2e-3), larger(10.5e-3, 20e-3))
    assert "the same share within 10%" in same.words            # 50 % and 52.5 %
    lower = measured.floor_shares(result(1e-3, 1.2e-3), larger(10e-3, 40e-3))
    assert "less of its floor (its share 3.3× smaller)" in lower.words   # 83 % against 25 %


def test_floor_shares_on_a_gpu_like_pair():
    # both at 90 % of their floors: the same share, and the time beyond each grows with its bytes (0.1 and 1 ms)
    v = measured.floor_shares(result(0.9e-3, 1e-3), larger(9e-3, 10e-3))
    assert "the same share within 10%, whatever the bytes" in v.words
    assert "0.10 ms and 1.00 ms beyond the floors: the larger model's is 10× the smaller's" in v.words


def test_floor_shares_when_a_fixed_cost_is_all_there_is():
    # 10 ms beyond each floor, whatever the bytes: a cost paid per step, a smaller share of the larger step
    v = measured.floor_shares(result(1e-3, 11e-3), larger(10e-3, 20e-3))
    assert "the larger model's step is more of its floor" in v.words
    assert "10.00 ms and 10.00 ms beyond the floors, the same within 10%: a cost paid per step, whatever the bytes" in v.words
    less = measured.floor_shares(result(1e-3, 5e-3), larger(10e-3, 11e-3))
    assert "4.00 ms and 1.00 ms beyond the floors: the larger model's is less than the smaller's" in less.words


# ----------------------------------------------------------------------------- the SLO's batch, derived

# Mistral 7B v0.1 in bf16 by hand: 7,241,732,096 parameters, 32,000 × 4,096 of them the input embedding;
# KV per token 2 (K, V) × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B
W_MISTRAL = 2 * (7_241_732_096 - 32_000 * 4096)
ROW = 4096 * 2                                      # one embedding row a token reads


def k_mistral(context: int) -> int:
    return context * 131_072 + 131_072 + ROW        # the cache read, the new token's written, its embedding row


def test_slo_batch_by_hand_on_an_h100():
    d = capacity_slo.slo_batch("mistral-7b-v0.1", "H100 SXM", 10, 4096, 0.5)
    assert d.weight_bytes == W_MISTRAL == 14_221_320_192 and d.seq_bytes == k_mistral(4096) == 537_010_176
    assert d.step_budget_bytes == pytest.approx(0.010 * 0.5 * 3.35e12)
    assert d.slo_batch == math.floor((0.010 * 0.5 * 3.35e12 - W_MISTRAL) / k_mistral(4096)) == 4
    assert d.max_batch == 112 and d.derived == d.batch == 4
    assert d.parity_batch == pytest.approx(W_MISTRAL / k_mistral(4096))
    # the self-check's first question: at 20 ms
    assert capacity_slo.slo_batch("mistral-7b-v0.1", "H100 SXM", 20, 4096, 0.5).batch == \
        math.floor((0.020 * 0.5 * 3.35e12 - W_MISTRAL) / k_mistral(4096)) == 35
    # the exercise: at 50 ms the memory binds
    d50 = capacity_slo.slo_batch("mistral-7b-v0.1", "H100 SXM", 50, 4096, 0.5)
    assert d50.slo_batch == math.floor((0.050 * 0.5 * 3.35e12 - W_MISTRAL) / k_mistral(4096)) == 129
    assert d50.derived == d50.batch == 112


@pytest.mark.parametrize("gpu", ["H100 SXM", "H200", "A100 80GB", "MI300X", "L40S", "B200"])
@pytest.mark.parametrize("slo_ms", [10, 20, 50, 100])
def test_slo_batch_formula_is_the_bisection_while_memory_bound(gpu, slo_ms):
    d = capacity_slo.slo_batch("mistral-7b-v0.1", gpu, slo_ms, 4096, 0.5)
    if d.plan.bound == "memory":
        assert d.derived == d.batch, (gpu, slo_ms, d)


def test_slo_batch_when_one_sequence_misses_the_slo():
    d = capacity_slo.slo_batch("mistral-7b-v0.1", "L4", 10, 4096, 0.5)
    assert d.slo_batch == 0 and d.batch == 0 and d.derived == 0


# ----------------------------------------------------------------------------- the ranking at the floor

def test_against_datasheet_counts_the_gpus_in_both_rankings():
    at_half = ranking.rank("mistral-7b-v0.1", context=4096, slo_ms=10)
    at_floor = ranking.rank("mistral-7b-v0.1", context=4096, slo_ms=10, efficiency=1.0)
    v = ranking.against_datasheet(at_half, at_floor)
    ok = {r.gpu: r.batch for r in at_half if r.status == "ok"}
    ok_floor = {r.gpu: r.batch for r in at_floor if r.status == "ok"}
    assert v.evidence["ok"] == len(ok) and v.evidence["ok_at_floor"] == len(ok_floor)
    assert v.words.startswith(f"at 100 % of the datasheet {len(ok_floor)} of {len(at_floor)} GPUs meet the constraints, "
                              f"against {len(ok)} at 50 %")
    # every GPU within a 10 ms SLO at 50 % runs a batch more than 10 % larger at the floor (MI300X: 72 against 22)
    assert v.evidence["larger_batch"] == sum(ok_floor[g] > 1.1 * ok[g] for g in ok) == len(ok)
    assert "(MI300X: batch 72 against 22, 3.3×)" in v.words
    # the same ranking twice: no GPU gains
    same = ranking.against_datasheet(at_half, at_half)
    assert same.evidence["larger_batch"] == 0 and "the same batch within 10%" in same.words


def test_last_level_cache_is_none_on_a_gpu():
    assert measured.last_level_cache_bytes("cuda:0") is None
    got = measured.last_level_cache_bytes("cpu")
    assert got is None or got > 0


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
