"""Notebook 09's results as tables (helpers.parallel.views) on every value a measurement can give — the two
committed CPU records, zero, NaN, below / at / above each reference — and disaggregated prefill and decode
(helpers.parallel.disagg) against its formulas worked by hand."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from helpers import records
from helpers.capacity.planner import plan
from helpers.formulas import regime
from helpers.formulas.memory import kv_cache_bytes
from helpers.parallel import disagg, views
from helpers.parallel.collectives import all_reduce_s, send_s
from helpers.parallel.links import custom_link, get_link
from helpers.parallel.tp_demo import TPRun
from helpers.present import replay

M7 = "mistral-7b-v0.1"
CASE = dict(model=M7, gpu="H100 SXM", gpus=4, prompt=4096, output=128, link="infiniband")


def recorded(record: str) -> TPRun:
    return replay.load("09/tp_forward", [records.RESULTS / record])[0]


def tp_runs():
    """The two recordings, and what other machines could measure: all zero, below and far above every
    prediction, equal parts, a logit scale missing (an old recording)."""
    amd, intel = recorded("cpu-amd-epyc"), recorded("cpu-intel-xeon")
    times = [f for f in amd.__dataclass_fields__ if f.endswith("_s")]
    zero = replace(amd, **{f: 0.0 for f in times}, max_abs_diff=0.0, link_bandwidth=0.0)
    below = replace(amd, **{f: getattr(amd, f) * 0.01 for f in times})
    above = replace(amd, **{f: getattr(amd, f) * 1000 for f in times})
    at = replace(amd, all_reduce_s=amd.predicted_all_reduce_s, forward_s=amd.single_forward_s)
    return {"amd": amd, "intel": intel, "zero": zero, "below": below, "above": above, "at": at,
            "no scale": replace(amd, logit_scale=float("nan"), load_per_core=None)}


@pytest.mark.parametrize("name", list(tp_runs()))
def test_tp_tables_take_every_run(name):
    run = tp_runs()[name]
    frame = views.tp_frame(run)
    value = dict(zip(frame["quantity"], frame["value"]))
    eps = value["that difference in fp32 ε × scale"]
    assert eps == regime.epsilons(run.max_abs_diff, run.logit_scale) or (math.isnan(eps) and math.isnan(run.diff_epsilons))
    ratio = value["measured ÷ predicted"]
    assert ratio == regime.ratio(run.all_reduce_s, run.predicted_all_reduce_s) or math.isnan(ratio)
    parts = views.tp_parts_frame(run)
    assert list(parts["part"])[:2] == ["one process: the whole model", "two processes: the forward"]
    calls = views.tp_calls_frame(run)
    assert len(calls) == 5 and calls["µs"].iloc[-1] > 0      # the computed NVLink row, whatever was measured
    if name == "amd":     # 7.15e-7 at a scale of 1.60: 7.15e-7 ÷ (2^-23 × 1.60) = 3.75 units of fp32 rounding
        assert eps == pytest.approx(7.152557373046875e-07 / (2**-23 * 1.6008226871490479))
        assert 3.7 < eps < 3.8
        one = all_reduce_s(run.message_bytes, 2, get_link("H100 SXM", "nvlink", 2))
        assert calls["µs"].iloc[-1] == pytest.approx(1e6 * one)


def test_recorded_logits_differ_by_rounding_alone():
    for record in ("cpu-amd-epyc", "cpu-intel-xeon"):
        run = recorded(record)
        assert run.same_argmax and 1 <= run.diff_epsilons < 10, (record, run.diff_epsilons)


def test_all_reduce_frame_by_hand():
    nv, pc = (get_link("H100 SXM", k, 8) for k in ("nvlink", "pcie"))
    frame = views.all_reduce_frame(65_536, 8, {"nvlink": nv, "pcie": pc})
    assert frame["all-reduce µs"].tolist() == pytest.approx([1e6 * all_reduce_s(65_536, 8, lk) for lk in (nv, pc)])
    assert frame["time ÷ first link's"].iloc[0] == 1.0
    assert frame["latency share"].iloc[0] == pytest.approx(10.18e-6 / all_reduce_s(65_536, 8, nv))
    one = views.all_reduce_frame(0, 1, {"nvlink": nv})          # one GPU: no communication, nothing to divide
    assert one["all-reduce µs"].iloc[0] == 0 and math.isnan(one["latency share"].iloc[0])
    assert views.all_reduce_frame(65_536, 8, {}).empty


def test_links_and_moe_frames():
    links = views.links_frame(("H100 SXM",))
    assert links["source's figure"].tolist() == ["900 GB/s, both directions", "128 GB/s, both directions",
                                                 "400 Gb/s, each direction"]
    assert links["GB/s each way"].tolist() == [450, 64, 50]
    from helpers.parallel.plan import moe_rows

    frame = moe_rows("deepseek-v3", "H200", batches=(1,), ep=8, weight_dtype="fp8")
    assert frame["all-to-all share, busiest GPU"].iloc[0] < frame["all-to-all share, mean GPU"].iloc[0]


# ----------------------------------------------------------------------------- disaggregation, computed

def test_disagg_by_hand():
    rows = disagg.deployments(rate=8.0, **CASE)
    shared, splits = rows[0], rows[1:]
    assert [r.name for r in rows] == ["shared 4", "split 1 + 3", "split 2 + 2", "split 3 + 1"]
    p = plan(M7, "H100 SXM", 1, context=4096 + 64, batch=1, prompt_tokens=4096)
    t_p = p.prefill_s
    assert shared.prefill_s == t_p and shared.prefill_load == pytest.approx(8 * t_p / 4)
    step = lambda b: plan(M7, "H100 SXM", 1, context=4096 + 64, batch=b).step_s   # noqa: E731
    # shared: ITL = t_d ÷ (1 − ρ) at the fewest slots n that hold the sequences Little's law puts on a GPU
    n = math.ceil(shared.decode_batch - 1e-9)
    assert shared.decode_step_s == step(n) and shared.itl_s == pytest.approx(step(n) / (1 - shared.prefill_load))
    assert shared.decode_batch == pytest.approx(8 * 128 * shared.itl_s / 4)
    assert shared.longest_gap_s == pytest.approx(step(n) + t_p) and shared.kv_send_s == 0
    rho = shared.prefill_load                          # M/D/1: the prefill plus ρ·t_p ÷ (2(1 − ρ))
    assert shared.ttft_s == pytest.approx(t_p + rho * t_p / (2 * (1 - rho)))
    send = send_s(kv_cache_bytes(M7, 4096, 1, "bf16"), get_link("H100 SXM", "infiniband"))
    for s in splits:
        assert s.prefill_gpus + s.decode_gpus == 4 and s.kv_send_s == pytest.approx(send)
        assert s.prefill_load == pytest.approx(8 * t_p / s.prefill_gpus)
        if s.prefill_load < 1:
            assert s.itl_s == pytest.approx(s.decode_step_s + send / 127)
            assert s.longest_gap_s == pytest.approx(s.decode_step_s + send)
            assert s.decode_batch == pytest.approx(8 * 128 * s.decode_step_s / s.decode_gpus)
        else:
            assert all(math.isnan(v) for v in (s.ttft_s, s.itl_s, s.longest_gap_s))


def test_disagg_extremes():
    idle = disagg.deployments(rate=0.0, **CASE)
    assert all(r.prefill_load == 0 and r.decode_batch == 0 for r in idle)
    assert idle[0].itl_s == idle[0].decode_step_s and idle[0].ttft_s == idle[0].prefill_s
    flooded = disagg.deployments(rate=1e4, **CASE)
    assert all(math.isnan(r.itl_s) and math.isnan(r.ttft_s) for r in flooded)
    # the decode batch outgrows the KV cache before the prefills saturate: NaN, not an error
    crowded = disagg.deployments(rate=30.0, **CASE)
    assert crowded[0].prefill_load < 1 and math.isnan(crowded[0].itl_s)
    slow = disagg.deployments(rate=8.0, **{**CASE, "link": custom_link("slow", 1e9, 5e-6)})
    assert slow[2].kv_send_s == pytest.approx(5e-6 + 3.6e-6 + kv_cache_bytes(M7, 4096, 1, "bf16") / 1e9)
    for bad in ({"gpus": 1}, {"output": 1}, {"rate": -1.0}, {"rate": float("nan")}):
        with pytest.raises(ValueError):
            disagg.deployments(**{**CASE, "rate": 8.0, **bad})


@pytest.mark.parametrize("rate", [4, 8, 12, 14, 16, 20])
def test_the_notebooks_rates_give_the_shared_pool_an_itl(rate):
    """Section 6's control: at every rate it offers the shared pool keeps up, so the self-check's ITL label is
    one of below / at / above."""
    frame = views.deployments_frame(disagg.deployments(rate=float(rate), **CASE), 1.0, 0.015)
    assert frame["ITL ÷ SLO label"].iloc[0] in regime.LABELS


def test_deployments_frame_labels_against_the_slos():
    rows = disagg.deployments(rate=12.0, **CASE)
    frame = views.deployments_frame(rows, 1.0, 0.015)
    for r, (_, row) in zip(rows, frame.iterrows()):
        assert row["ITL ÷ SLO label"] == regime.label(regime.ratio(1e3 * r.itl_s, 15.0))
        assert row["TTFT ÷ SLO label"] == regime.label(regime.ratio(1e3 * r.ttft_s, 1e3))
    nan = replace(rows[0], ttft_s=float("nan"), itl_s=float("nan"))
    zero = replace(rows[0], ttft_s=0.0, itl_s=0.0)
    frame = views.deployments_frame([nan, zero], 1.0, 0.015)
    assert frame["ITL ÷ SLO label"].tolist() == [regime.NONE, regime.BELOW]
    assert views.deployments_frame([], 1.0, 0.015).empty


def test_the_notebooks_computed_statements():
    """Notebook 09's static prose, pinned: one GPU cannot hold Mistral 7B's batch of 128 at 4,096 tokens (the
    speed-up is over 2 GPUs); tp=4 shortens Llama 3.1 8B's decode step, pp=4 with one micro-batch does not."""
    from helpers.parallel.plan import parallel_step, tp_scaling

    assert tp_scaling(M7, "H100 SXM", batch=128, context=4096)[0].tp == 2
    assert [r.tp for r in tp_scaling(M7, "H100 SXM", batch=8, context=4096)][0] == 1
    one, tp4, pp4 = (parallel_step("llama-3.1-8b", "H100 SXM", t, p, 1, 32, 8192) for t, p in ((1, 1), (4, 1), (1, 4)))
    assert regime.label(regime.ratio(tp4.step_s, one.step_s)) == regime.BELOW
    assert regime.label(regime.ratio(pp4.step_s, one.step_s)) == regime.AT
    assert pp4.max_batch > one.max_batch
