"""Notebook 09's conclusions: every rule that writes a sentence of notebook 09 fed each regime it can meet —
the committed CPU records (09/tp_forward, 09/eviction, 09/offload on the AMD EPYC and the Intel Xeon), the
computed GPU figures, and synthetic results for what neither CPU shows (a GPU-like run where every part meets its
prediction, a fixed-cost-dominated one, an offloaded cache that ran, a model that reads its context) — and the
words checked against the numbers each rule returns as evidence, with the 10 % margin written out here."""
from __future__ import annotations

from dataclasses import replace

import pytest

from helpers import records
from helpers.formulas import verdicts
from helpers.formulas.memory import kv_cache_bytes
from helpers.formulas.verdicts import factor
from helpers.parallel import collectives, kv_offload, links, offload, sim, tp_demo
from helpers.parallel import plan as par
from helpers.present import replay

CPU_RECORDS = ("cpu-amd-epyc", "cpu-intel-xeon")


def way(ratio: float) -> str:
    """The 10 % margin, written out independently of helpers.formulas.verdicts."""
    return "up" if ratio > 1.1 else "down" if ratio < 1 / 1.1 else "same"


def recorded(key: str, record: str):
    return replay.load(key, [records.RESULTS / record])[0]


# ----------------------------------------------------------------------------- all-reduce, TP, PP, MoE (computed)

H100 = {k: links.get_link("H100 SXM", k, 8) for k in ("nvlink", "pcie", "infiniband")}


def test_all_reduce_crossover_is_where_the_bytes_take_the_latency():
    for link in H100.values():
        m = collectives.all_reduce_crossover_bytes(8, link)
        latency = collectives.all_reduce_latency_s(8, link)
        assert collectives.all_reduce_s(m, 8, link) == pytest.approx(2 * latency)   # half latency, half bytes
        assert latency == pytest.approx(collectives.BASE_LATENCY_S + 14 * link.hop_latency_s)


@pytest.mark.parametrize("message", [65_536, 2**30])
def test_all_reduce_reading_at_a_decode_message_and_a_large_one(message):
    v = collectives.all_reduce_reading(message, 8, H100)
    for text, link in zip(v[:3], H100.values()):
        share = collectives.all_reduce_latency_s(8, link) / collectives.all_reduce_s(message, 8, link)
        assert f"({verdicts.share_band(share)})" in text.words
    if message == 65_536:     # a decode step's message: latency is nearly all of it on every link
        assert all("(nearly all)" in t.words for t in v[:3])
    else:
        assert all("(a small part)" in t.words for t in v[:3])
    assert "at 1 GiB PCIe Gen5 x16 is 7.0× slower than NVLink 4 (NVSwitch)" in v[-2].words


def rows(gains, shares):
    out, speed = [par.TPScaling(1, "link, x", 10, 0, 10, 0, 1.0)], 1.0
    for n, (g, s) in enumerate(zip(gains, shares), 1):
        speed *= g
        out.append(par.TPScaling(2 ** n, "link, x", 10 / 2 ** n, 1, 10 / speed, s, speed, g))
    return out


def test_tp_reading_flattens_by_the_rule_and_bands_the_communication():
    flat, steady = rows([1.9, 1.8, 1.4], [0.05, 0.2, 0.62]), rows([1.95, 1.9, 1.8], [0.02, 0.05, 0.08])
    a, b = par.tp_reading({"x": flat, "y": steady})
    assert "flattens at 8 GPUs" in a.words and "(most) at 8 GPUs" in a.words
    assert "does not flatten up to 8 GPUs" in b.words and "(a small part)" in b.words
    for batch in (1, 8, 128):                     # the computed rows the notebook shows
        scaling = {k: par.tp_scaling("mistral-7b-v0.1", "H100 SXM", batch=batch, link=k) for k in ("nvlink", "pcie")}
        for v, r in zip(par.tp_reading(scaling), scaling.values()):
            n = par.flattens_at(r)
            assert (f"flattens at {n} GPUs" if n else "does not flatten") in v.words


@pytest.mark.parametrize("micro", [2, 4, 8, 16])
def test_pipeline_reading_against_the_planners_steps(micro):
    steps = {(t, p, m): par.parallel_step("llama-3.1-8b", "H100 SXM", t, p, m, 32, 8192)
             for t, p, m in ((1, 1, 1), (1, 2, 1), (1, 2, micro), (1, 4, 1), (1, 4, micro), (4, 1, 1))}
    v = par.pipeline_reading(steps, micro)
    one, two = steps[(1, 1, 1)], steps[(1, 2, 1)]
    assert {"up": "faster", "down": "slower", "same": "as fast"}[way(one.step_s / two.step_s)] in v[0].words
    for text, pp in zip(v[1:3], (2, 4)):
        a, b = steps[(1, pp, 1)], steps[(1, pp, micro)]
        assert {"up": "raise", "down": "cut", "same": "within the change margin"}[way(b.tokens_per_s / a.tokens_per_s)] in text.words
        assert factor(b.slot_s / a.slot_s) in text.words and f"not 1/{micro}" in text.words
    assert "tp=4's step is 3.8× faster" in v[3].words and "pp=4's as fast" in v[3].words


def test_moe_reading_bands():
    r = par.moe_rows("deepseek-v3", "H200", batches=(1, 8, 32, 128, 512), ep=8, weight_dtype="fp8")
    v = par.moe_reading(r)
    assert f"({verdicts.share_band(r[0].all_to_all_share)}) at batch 1" in v.words
    assert f"({verdicts.share_band(1 - r[-1].all_to_all_share)}) at batch 512" in v.words


# ----------------------------------------------------------------------------- the two-process forward

def tp_regimes():
    out = {rec: recorded("09/tp_forward", rec) for rec in CPU_RECORDS}
    x = out["cpu-intel-xeon"]
    one = x.message_all_reduce_s
    # GPU-like: every part as predicted — the shard at its FLOPs, each call on the link's line, no extra inside
    out["floor"] = replace(x, compute_s=x.expected_compute_ratio * x.single_forward_s, predicted_all_reduce_s=8 * one,
                           all_reduce_s=8 * one, after_compute_all_reduce_s=one, wait_s=0.1 * one,
                           forward_s=x.expected_compute_ratio * x.single_forward_s + 8 * one)
    # fixed cost: each small operator's dispatch paid in both processes, three times what the FLOPs predict
    out["fixed"] = replace(x, compute_s=3 * x.expected_compute_ratio * x.single_forward_s,
                           after_compute_all_reduce_s=one * 1.02, all_reduce_s=8 * one * 1.05)
    return out


@pytest.mark.parametrize("regime", ["cpu-amd-epyc", "cpu-intel-xeon", "floor", "fixed"])
def test_tp_reading_says_what_its_numbers_show(regime):
    run = tp_regimes()[regime]
    r = tp_demo.reading(run, 2)
    assert "(float sums in another order)" in r.agree.words and "the same token wins" in r.agree.words
    w = way(run.single_forward_s / run.forward_s)
    assert {"up": "faster than one", "down": "slower than one", "same": "as fast as one"}[w] in r.overall.words
    c = run.compute_s / run.single_forward_s / run.expected_compute_ratio
    assert {"up": "what they leave out", "down": "took longer than its FLOPs say",
            "same": "as the FLOPs predict"}[way(c)] in r.compute.words
    assert f"({verdicts.share_band(run.replicated_flop_share)})" in r.head.words
    assert factor(run.all_reduce_s / run.predicted_all_reduce_s) in r.all_reduces.words
    pred = run.predicted_all_reduce_s / run.all_reduces
    assert ("on the line" in r.link.words) == (way(run.message_all_reduce_s / pred) == "same")
    after = run.after_compute_all_reduce_s / run.message_all_reduce_s
    inside = run.all_reduce_s / run.all_reduces / run.after_compute_all_reduce_s
    assert ("costs part of it" in r.inside.words) == (way(after) == "up" and way(inside) == "up")
    assert ("appears only there" in r.inside.words) == (way(inside) == "up")
    if regime.startswith("cpu"):        # both records: the all-reduces cost several times the link's prediction
        assert "slower than one" in r.overall.words and way(run.all_reduce_s / run.predicted_all_reduce_s) == "up"
    if regime == "floor":
        assert "as the FLOPs predict" in r.compute.words and "on the line" in r.link.words
        assert "1.00× the prediction" in r.all_reduces.words
    if regime == "fixed":
        assert "what they leave out" in r.compute.words and "does not explain it" not in r.inside.words


def test_logits_that_disagree_are_not_called_float_reordering():
    r = tp_demo.reading(replace(recorded("09/tp_forward", "cpu-intel-xeon"), max_abs_diff=0.3, same_argmax=False))
    assert "more than float sums in another order give" in r.agree.words and "differs" in r.agree.words


def test_tp_on_gpu_by_hand():
    run = recorded("09/tp_forward", "cpu-amd-epyc")
    v = tp_demo.on_gpu(run)
    link = links.get_link("H100 SXM", "nvlink", 2)
    one = collectives.BASE_LATENCY_S + 2 * link.hop_latency_s + run.message_bytes / link.bandwidth
    assert v.evidence["one_s"] == pytest.approx(one) and f"{1e6 * one:,.1f} µs" in v.words


# ----------------------------------------------------------------------------- disaggregation

def summary(att, good, span, deployment="", prefill=0, itl=0.013, ttft=0.3):
    return sim.Summary(48, ttft / 2, ttft, itl * 0.9, itl, att, good, span, deployment, prefill)


def test_split_rules_on_the_cases_that_matter():
    shared = summary(0.81, 7.62, 5.12, "shared × 4", itl=0.0215, ttft=0.27)
    split = [summary(0.19, 1.08, 8.35, "split 1 prefill + 3 decode", 1, itl=0.0103, ttft=3.88),
             summary(0.96, 7.95, 5.79, "split 2 prefill + 2 decode", 2)]
    rows24 = [shared] + split
    assert "**about equal**" in sim.rate_reading(24, rows24).words            # 7.95 ÷ 7.62 = 1.04
    d = sim.disagreement({8.0: [summary(1, 5.48, 8.76)] + [summary(1, 5.47, 8.77, "s", 2)], 24.0: rows24})
    assert d is not None and d.evidence["rate"] == 24 and "1.13× later than the shared pool" in d.words
    assert sim.disagreement({8.0: [summary(1, 5.48, 8.76)] + [summary(1, 5.47, 8.77, "s", 2)]}) is None
    paid = [summary(0.83, 6.59, 6.07)] + [summary(1.0, 7.98, 6.01, "s", 2)]
    assert "**pays**" in sim.rate_reading(16, paid).words and sim.disagreement({16.0: paid}) is None
    itl, ttft = sim.latency_reading(rows24)
    assert f"{factor(0.0215 / 0.013)} shorter" in itl.words and "14× longer" in ttft.words


def test_drain_share_of_the_makespan():
    reqs = [sim.Request(i, t, 100, 10) for i, t in enumerate((0.0, 1.0, 2.26))]
    v = sim.drain_share(reqs, summary(1, 1, 5.12, "shared × 4"))
    assert v.evidence["drain_s"] == pytest.approx(2.86) and "(most)" in v.words


# ----------------------------------------------------------------------------- offload and eviction

def test_offload_readings_computed_and_measured():
    steps = offload.offload_steps("llama-3.1-8b", "H100 SXM", contexts=(4096, 131072))
    v = offload.reading(steps)
    assert f"{factor(steps[-1].over_pcie_ms / steps[-1].from_hbm_ms)} slower than HBM reads it" in v.words
    for rec in CPU_RECORDS:                       # both CPUs: the offloaded cache needs CUDA
        assert "did not run on this device" in kv_offload.offload_reading(recorded("09/offload", rec)).words
    ran = {"device": "cuda:0", "context": 256, "steps": 8, "plain_step_s": 0.004, "plain_error": None,
           "offloaded_step_s": 0.04, "offloaded_error": None}      # a GPU where it ran: ten times the plain step
    assert "10× slower than the plain cache" in kv_offload.offload_reading(ran).words
    same = dict(ran, offloaded_step_s=0.0042)                      # prefetch hiding the copy: as fast
    assert "as fast as the plain cache" in kv_offload.offload_reading(same).words


def test_eviction_bytes_by_hand():
    v = offload.eviction_bytes("llama-3.1-8b", 32768, 4, 60)
    assert v.evidence["kept"] == kv_cache_bytes("llama-3.1-8b", 64, 1, "bf16") == 64 * 131072
    assert v.evidence["full"] == kv_cache_bytes("llama-3.1-8b", 32768, 1, "bf16")


def reads_context(measured: dict) -> dict:
    """A model that copies from its context: the repeat at 0.1× the first copy's perplexity, and small windows
    that cost it (perplexity up 2× at 28 tokens), KL that does not fall at every window."""
    rows = [dict(r) for r in measured["rows"]]
    ref = rows[0]["reference_perplexity"]
    for r, ppl, kl in zip(rows, (2.0 * ref, 1.3 * ref, 1.05 * ref, ref), (0.4, 0.5, 0.1, 0.0)):
        r.update(perplexity=ppl, kl_mean=kl)
    use = dict(measured["context_use"], second_over_first=0.1, uses_context=True)
    return dict(measured, rows=rows, context_use=use)


@pytest.mark.parametrize("regime", ["cpu-amd-epyc", "cpu-intel-xeon", "reads"])
def test_eviction_reading_says_what_its_numbers_show(regime):
    m = reads_context(recorded("09/eviction", "cpu-intel-xeon")) if regime == "reads" else recorded("09/eviction", regime)
    v = kv_offload.eviction_reading(m)
    assert "exactly" in v[0].words and "keeps all 319 tokens" in v[1].words
    use = next(x for x in v if x.rule == "kv_offload.context_use")
    assert ("reads its context" in use.words) == (m["context_use"]["second_over_first"] < kv_offload.USES_CONTEXT_BELOW)
    far = next(x for x in v if x.rule == "kv_offload.perplexity")
    assert {"up": "(higher)", "down": "(lower)", "same": "within the change margin"}[way(far.evidence["ratio"])] in far.words
    kl = next(x for x in v if x.rule == "kv_offload.kl")
    if regime.startswith("cpu"):      # both records: a model that does not copy, perplexity unmoved, KL falling
        assert "does not copy" in use.words and "within the change margin" in far.words
        assert "fell with every larger window" in kl.words
    else:
        assert "2.0× the full cache's (higher)" in far.words and "did not fall" in kl.words
