"""Notebook 03's results as tables and figures (helpers.present.roofline_figures, helpers.decoding.views) on every
value a measurement can produce — zero, below / at / above each floor, two equal values, one sample, an empty run
— and the computed facts its static prose states, pinned against the GPU catalog and the model configs."""
import math

import pandas as pd
from pathlib import Path

import pytest

from helpers.decoding import regimes, views
from helpers.formulas import gpus, regime, roofline, stepcost
from helpers.measure.local_models import TINY_CONFIG
from helpers.measure.microbench import CopyBenchmark, MatmulBenchmark
from helpers.measure.timing import Stats
from helpers.present import expected
from helpers.present import roofline_figures as rf

MISTRAL = expected.REFERENCE_MODEL
MiB = 2**20


# ----------------------------------------------------------------------------- the computed facts the prose states

def test_the_h100_ridge_and_crossover_batch_from_the_catalog():
    g = gpus.get_gpu("H100 SXM")
    assert (g.bandwidth, g.peak_flops("bf16")[0]) == (3.35e12, 989.5e12)     # the datasheet's SXM column, dense
    h = roofline.gpu_roofline("H100 SXM", MISTRAL)
    assert h["ridge"] == pytest.approx(295.37, abs=0.01) and h["crossover_batch"] == pytest.approx(h["ridge"])


def test_a_bf16_prefill_of_mistral_is_memory_bound_below_about_300_tokens_on_an_h100():
    """Issue 45: 'prefill is compute-bound' holds only past the ridge. The shortest prompt that reaches it."""
    n = roofline.prefill_ridge_tokens(MISTRAL, "H100 SXM")
    ridge = roofline.gpu_roofline("H100 SXM", MISTRAL)["ridge"]
    assert n == 301
    glossary = " ".join((Path(__file__).resolve().parents[1] / "workshop" / "glossary.md").read_text().split())
    assert f"about {round(n, -2)} for Mistral 7B in bf16 on an H100 SXM" in glossary    # the glossary's figure
    assert stepcost.forward_cost(MISTRAL, n, 0, 1, "bf16").intensity >= ridge
    assert stepcost.forward_cost(MISTRAL, n - 1, 0, 1, "bf16").intensity < ridge
    # the 16–64-token prompts notebook 03 measures are memory-bound on an H100 too
    assert all(stepcost.forward_cost(MISTRAL, k, 0, 1, "bf16").intensity < ridge for k in (16, 32, 64))
    with pytest.raises(ValueError, match="no prompt up to 8 tokens reaches"):
        roofline.prefill_ridge_tokens(MISTRAL, "H100 SXM", most=8)


def test_the_fixed_cost_weighs_about_76_times_less_on_mistral_not_610():
    """Issue 45: the fixed cost grows with the layer count (32 against 4), the floor with the bytes (610×)."""
    w = roofline.fixed_cost_weight(TINY_CONFIG, MISTRAL)
    assert w["bytes_ratio"] == pytest.approx(610.1, abs=0.1) and w["layers_ratio"] == 8
    assert w["per_byte_ratio"] == pytest.approx(76.3, abs=0.1)


def test_the_decode_floors_the_prose_quotes():
    h = roofline.gpu_roofline("H100 SXM", MISTRAL)
    assert h["decode_floor_s"][512] == pytest.approx(stepcost.decode_cost(MISTRAL, 512, 1, "bf16").bytes / 3.35e12)
    assert h["decode_floor_s"][4096] > h["decode_floor_s"][512]
    assert h["prompt"] == 2048 and h["prefill_intensity"] > h["ridge"]


# ----------------------------------------------------------------------------- the roofs' table

def _bench(seconds, nbytes=256 * MiB, moved=None):
    return CopyBenchmark("cpu", nbytes, moved or nbytes, 1, Stats(tuple(seconds)))


def _matmul(seconds, n=1024):
    return MatmulBenchmark("cpu", "fp32", n, 1, Stats(tuple(seconds)))


H100 = roofline.gpu_roofline("H100 SXM", MISTRAL)


@pytest.mark.parametrize("read,copy,mm,cache", [
    ([0.01, 0.02], [0.02], [0.1, 0.2], 32 * MiB),      # a buffer past the cache
    ([0.01], [0.01], [0.1], 480 * MiB),                 # one sample each; the cache holds the buffer
    ([0.0, 0.0], [0.0], [0.0], None),                   # zero: a timer that saw nothing; no cache reported
    ([0.01, 0.01], [0.01, 0.01], [0.1, 0.1], 256 * MiB),  # two equal samples; buffer the cache's size
])
def test_roofs_frame_on_every_extreme(read, copy, mm, cache):
    t = rf.roofs_frame(_bench(read), _bench(copy, moved=2 * 256 * MiB), _matmul(mm), H100, cache)
    assert len(t) == 6 and H100["gpu"] in t
    ridge = t.set_index("quantity")["this device"].iloc[3]
    if min(read) > 0:
        assert ridge == pytest.approx((2 * 1024**3 / min(mm)) / (256 * MiB / min(read)))
    else:
        assert math.isnan(ridge) or math.isinf(ridge) or ridge >= 0
    ratio = t["this device"].iloc[-1]
    assert (math.isnan(ratio) if cache is None else ratio == pytest.approx(256 * MiB / cache))


# ----------------------------------------------------------------------------- sections 2–4

def _prefill(rows):
    return pd.DataFrame(rows, columns=["tokens", "ttft_s", "oom"]).astype({"oom": bool})


@pytest.mark.parametrize("rows", [
    [(16, 0.007, False), (1024, 0.07, False)],
    [(16, 0.0, False), (32, 0.0, False)],           # zero
    [(16, 0.007, False)],                           # one sample
    [(16, 0.007, False), (32, 0.007, False)],       # two equal values
    [(16, None, True)],                             # nothing fitted
    [],                                             # an empty run
])
def test_prefill_table_and_figure_take_every_extreme(tiny_config, rows):
    df = _prefill(rows)
    t = rf.prefill_frame(df, tiny_config, "fp32", 1e11, 2e10)
    assert len(t) == len(df[~df["oom"]])
    assert set(t["label"]) <= {"below", "at", "above", "–"}
    rf.prefill_figure(df, tiny_config, "fp32", 1e11, "synthetic")


def test_prefill_intensity_labels_follow_the_ridge(tiny_config):
    # ridge = peak ÷ bandwidth: a ridge of 2/3 of the prefill's intensity, equal to it, ten times it
    df = _prefill([(16, 0.01, False)])
    intensity = stepcost.forward_cost(tiny_config, 16, 0, 1, "fp32").intensity
    assert rf.prefill_frame(df, tiny_config, "fp32", intensity * 1e9 / 1.5, 1e9)["label"].iloc[0] == "above"
    assert rf.prefill_frame(df, tiny_config, "fp32", intensity * 1e9, 1e9)["label"].iloc[0] == "at"
    assert rf.prefill_frame(df, tiny_config, "fp32", 10 * intensity * 1e9, 1e9)["label"].iloc[0] == "below"


@pytest.mark.parametrize("steps,labels", [
    ([0.004, 0.005], ["above", "above"]),
    ([0.001, 0.001], ["at", "at"]),                 # two equal values, at the floor
    ([1e-5, 0.0], ["below", "below"]),              # below the floor; zero
])
def test_decode_table_labels_each_step_against_its_floor(steps, labels):
    df = pd.DataFrame({"context": [64, 128], "itl_s": steps, "oom": [False, False]})
    t = rf.decode_frame(df, lambda c: 0.001)
    assert list(t["step ÷ floor label"]) == labels
    empty = rf.decode_frame(df.iloc[:0], lambda c: 0.001)
    assert len(empty) == 0


@pytest.mark.parametrize("seconds", [0.01, 0.0, 1e-9, 1e3])
def test_points_table_and_figure_take_every_extreme(tiny_config, seconds):
    pts = [roofline.prefill_point(tiny_config, 64, seconds, "fp32"), roofline.decode_point(tiny_config, 64, seconds, "fp32"),
           roofline.decode_point(tiny_config, 64, seconds, "fp32", batch=8)]
    t = rf.points_frame(pts, 1e11, 2e10)
    assert list(t["side of the ridge"]) == ["above", "below", "below"]   # ridge 5 FLOP/B; decode 0.5, batch 8 4
    assert len(t) == 3
    rf.roofline_figure(1e11, 2e10, pts, "synthetic", "fp32")
    rf.roofline_figure(0.0, 0.0, pts, "synthetic", "fp32")               # no roof measured: a note, no exception
    assert len(rf.points_frame([], 1e11, 2e10)) == 0


# ----------------------------------------------------------------------------- section 5

def _efficiency(steps):
    names = ["probe", "tiny", "small"]
    return pd.DataFrame({"model": names[:len(steps)], "params": [1, 2, 3][:len(steps)],
                         "step_bytes": [1e5, 4.6e7, 5.7e8][:len(steps)], "step_s": steps})


@pytest.mark.parametrize("steps,labels", [
    ([6e-4, 4.5e-3, 4.2e-2], ["above", "above", "above"]),   # the records' overhead regime
    ([2.5e-6, 1.15e-3, 1.4e-2], ["at", "at", "at"]),         # at each floor: step bytes ÷ 40 GB/s
    ([1e-7, 1e-4, 1e-3], ["below", "below", "below"]),       # below: the bytes came from a cache
    ([0.0, 0.0, 0.0], ["below", "below", "below"]),          # zero
    ([6e-4], ["above"]),                                     # one sample: the probe alone
])
def test_efficiency_table_and_figure_take_every_extreme(steps, labels):
    t = rf.efficiency_frame(_efficiency(steps), 4e10)
    assert list(t["step ÷ floor label"]) == labels
    assert t["probe ÷ step"].iloc[0] == 1.0 or (math.isnan(t["probe ÷ step"].iloc[0]) and steps[0] == 0)
    rf.efficiency_figure(t, "synthetic")
    no_probe = rf.efficiency_frame(_efficiency(steps).iloc[1:], 4e10)
    assert no_probe["probe ÷ step"].isna().all()


# ----------------------------------------------------------------------------- section 6

def _regime(steps, floor=0.001):
    results = [regimes.ImplResult(impl, s, 10, 40, 37, floor, regime.ratio(floor, s), True, None,
                                  roofline.decode_point(TINY_CONFIG, 40, s, "fp32")) for impl, s in steps]
    return regimes.Regime("tiny", "tiny · fp32 · cpu", "fp32", "cpu", None, 46_000_000, results,
                          skipped=["static+compile"], bandwidth=4e10)


@pytest.mark.parametrize("steps,labels", [
    ([("eager", 0.0049), ("generate", 0.0053), ("static", 0.005)], ["above", "above", "above"]),
    ([("eager", 0.001), ("generate", 0.001)], ["at", "at"]),
    ([("eager", 0.0), ("static", 1e-5)], ["below", "below"]),
    ([("eager", 0.0049)], ["above"]),
])
def test_implementations_table_and_figure_take_every_extreme(steps, labels):
    reg = _regime(steps)
    t = views.implementations_frame([reg])
    assert list(t["label"].iloc[:len(steps)]) == labels and t["label"].iloc[-1] == "–"
    assert "WORKSHOP_COMPILE=1" in t["note"].iloc[-1]
    views.roofline_figure([reg], 1e11, "fp32")
    assert "read bandwidth" in views.source([reg])
    old = _regime(steps)
    old.bandwidth_kind = "copy"
    assert "copy bandwidth" in views.source([old])
    assert len(views.implementations_frame([])) == 0
