"""The measured decision guide and the headline figures of `make engines`, on a run built by hand
(summaries of hand-made request records), so every ratio and verdict below is worked out here: vLLM's
scaling with concurrency, prefix caching off ÷ on, continuous batching's effect on throughput, TTFT and
each request's ITL, open-loop attainment and DistServe's goodput, the radix-against-blocks bound, the
vllm bench cross-check gaps, and the workloads (ShareGPT-like lengths from the published means)."""
import json
import math
import sys
from pathlib import Path

import pytest

from helpers.benchmark import agreement, findings, guide, harness, metrics, prefix, records, workloads
from helpers.benchmark.metrics import SLO, RequestRecord, summarize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import engines_guide  # noqa: E402 - scripts/engines_guide.py writes workshop/engines.md

SLO_ = SLO(1.0, 0.1)


def _recs(ttft, itl, n=4, tokens=5, t0=0.0):
    return [RequestRecord(i, t0, t0 + ttft + itl * (tokens - 1), [t0 + ttft + itl * k for k in range(tokens)], tokens)
            for i in range(n)]


def _run(name, workload, c, ttft, itl, rate=None, n=4, duration=None):
    s = summarize(_recs(ttft, itl, n), name, c, SLO_, duration_s=duration, rate=rate, detail=True)
    return dict(s.to_dict(), workload=workload)


def _data():
    base, cb = "HF transformers serve", "HF transformers serve + continuous batching"
    off, on = "vLLM, prefix caching off", "vLLM default"
    cfgs = {
        base: [_run(base, "chat", 1, 0.2, 0.05), _run(base, "chat", 8, 2.0, 0.05, duration=8.0)],
        cb: [_run(cb, "chat", 1, 0.2, 0.05), _run(cb, "chat", 8, 0.4, 0.08, duration=2.0)],
        off: [_run(off, "agentic", 1, 0.6, 0.01), _run(off, "agentic", 4, 0.9, 0.01)],
        on: [_run(on, "chat", 1, 0.1, 0.01, duration=1.0), _run(on, "chat", 8, 0.2, 0.02, duration=0.2),
             _run(on, "agentic", 1, 0.1, 0.01), _run(on, "agentic", 4, 0.85, 0.01),
             _run(on, "chat", 4, 0.1, 0.01, rate=1.0), _run(on, "chat", 4, 0.5, 0.05, rate=4.0),
             _run(on, "chat", 4, 3.0, 0.2, rate=16.0)],
    }
    data = {"measured_on": {"recorded_at": "2026-12-01T10:00:00+00:00", "profile": "tiny-trained",
                            "device": {"kind": "cpu", "name": "AMD EPYC", "cores": 2}},
            "concurrencies": [1, 8], "load_average_at_start": [3.5, 3, 2],
            "configs": [{"config": {"name": n, "engine": "vllm" if "vLLM" in n else "transformers"}, "runs": r,
                         "faults": [], "ready_s": 1.0} for n, r in cfgs.items()],
            "prefix_model": {"agentic": {"prompt tokens": 1000, "radix (token-granular)": 0.895, "blocks of 16": 0.884,
                                         "blocks of 128": 0.80}}}
    data["configs"].append({"config": {"name": "vLLM + fp8 KV cache", "engine": "vllm"}, "runs": [], "ready_s": None,
                            "faults": [{"kind": "ServerDied", "detail": "vllm exited with code 1. End of its log:\n"
                                        "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."}]})
    on_cfg = next(c for c in data["configs"] if c["config"]["name"] == on)
    on_cfg["prefix_cache"] = {"agentic": {"queried tokens": 1000, "hit tokens": 600, "hit rate": 0.6}}
    ms = lambda ttft, tpot, itl, e2el: {"ttft": ttft, "tpot": tpot, "itl": itl, "e2el": e2el}  # noqa: E731
    bench = [ms(70.0, 9.0, 9.0, 110.0), ms(90.0, 11.0, 11.0, 130.0)]          # vllm bench's two runs: mean 80
    on_cfg["crosscheck"] = [
        {"concurrency": 1, "our client's own run": ms(84.0, 10.2, 10.1, 141.0), "vllm bench, direct": ms(80.0, 10.0, 10.0, 120.0),
         "ours on its requests": ms(80.0, 10.0, 10.0, 120.0), "runs": {"our client's own run": [ms(84.0, 10.2, 10.1, 141.0)] * 2,
                                                                       "vllm bench, direct": bench},
         "side by side": {"ours": ms(99.0, 10.05, 10.05, 141.0), "vllm bench": ms(100.0, 10.0, 10.0, 140.0),
                          "shared steps": {"ours": 10.05, "vllm bench": 10.0, "gaps": 800, "gaps left out": 20}}},
        {"concurrency": 4, "our client's own run": ms(104.0, 10.2, 10.1, 141.0), "vllm bench, direct": ms(80.0, 10.0, 10.0, 120.0),
         "ours on its requests": ms(80.0, 10.0, 10.0, 120.0), "runs": {"our client's own run": [ms(104.0, 10.2, 10.1, 141.0)] * 2,
                                                                       "vllm bench, direct": bench},
         "side by side": {"ours": ms(99.0, 10.3, 10.2, 141.0), "vllm bench": ms(100.0, 10.0, 10.0, 140.0),
                          "shared steps": {"ours": 10.2, "vllm bench": 10.0, "gaps": 3000, "gaps left out": 0}}},
        {"concurrency": 8, "our client's own run": ms(84.0, 10.2, 10.1, 141.0), "vllm bench, direct": ms(80.0, 10.0, 10.0, 120.0),
         "runs": {"our client's own run": [ms(84.0, 10.2, 10.1, 141.0)], "vllm bench, direct": bench[:1]}}]
    return data


def test_key_figures_worked_by_hand():
    f = findings.key_figures(_data())
    assert f.vllm_scaling is None                 # no one-length ("fixed") runs in this data
    sc = f.vllm_scaling_chat
    # 4 requests × 5 tokens: 20 tokens in 1.0 s at concurrency 1, in 0.2 s at 8: × 5.0
    assert (sc.tok_s_at_1, sc.tok_s_at_top, sc.ratio) == (20.0, 100.0, 5.0)
    pc = f.prefix_caching["agentic"]
    assert [(r.concurrency, r.off_over_on, r.verdict) for r in pc] == [
        (1, 6.0, "prefix caching cut TTFT"), (4, round(0.9 / 0.85, 2), "prefix caching left TTFT unchanged")]
    assert pc[0].vllm_hit_rate_on == 0.6
    cb = f.continuous_batching["chat"]
    # at 8: off 20 tokens in 8 s, on in 2 s: × 4 throughput; TTFT 2.0 ÷ 0.4 = 5; ITL 0.05 → 0.08 s: × 1.6
    assert (cb.throughput_ratio, cb.throughput, cb.ttft_ratio, cb.ttft) == (4.0, "higher", 5.0, "lower with it")
    assert (cb.itl_ratio, cb.itl, cb.itl_off_ms, cb.itl_on_ms) == (1.6, "higher", 50.0, 80.0)
    ol = f.open_loop["vLLM default"]
    # SLO TTFT ≤ 1 s, TPOT ≤ 0.1 s: met at 1/s (0.1, 0.01) and 4/s (0.5, 0.05), missed at 16/s (3.0 s)
    assert [p.slo_attained for p in ol.points] == [1.0, 1.0, 0.0] and ol.distserve_goodput == 4.0
    rb = f.radix_against_blocks
    assert rb.most_saved == pytest.approx(round(0.116 / 0.105, 3))
    assert rb.verdict == "a radix tree could cut the prefill work"      # × 1.105: just past the 10 % margin
    one, four, eight = f.crosscheck
    # c=1: our client's runs against vllm bench's, TTFT 84 against 80: 5 %; vllm bench's own runs 70 and 90
    # (mean 80): (90 − 70) ÷ 80 = 25 % — inside its own spread; over the steps both streamed, ITL 10.05
    # against 10: 0.5 % ≤ 1 %
    assert (one.client.ttft, one.bench_spread.ttft, one.bench_spread.tpot, one.repeats) == (0.05, 0.25, 0.2, 2)
    assert (one.shared_itl, one.shared_gaps) == (0.005, 800) and one.side_by_side.ttft == 0.01
    assert one.definitions.ttft == 0.0 and one.verdict == "agree"
    assert "ITL 0.5% apart over the 800 steps both streamed at once" in engines_guide.crosscheck_line(one)
    assert engines_guide.crosscheck_line(one).endswith("**agree**.")
    # c=4: TTFT 104 against 80, 30 % beyond the 25 % spread; over the shared steps ITL 10.2 against 10: 2 %
    assert four.client.ttft == 0.3 and four.shared_itl == 0.02
    assert four.verdict == "apart: TTFT beyond vllm bench's own spread and ITL beyond 1%"
    # c=8: one run of vllm bench has no spread, and no side-by-side run
    assert eight.bench_spread is None and eight.side_by_side is None and eight.verdict.startswith("not judged")
    assert f.fp8_kv_cache == findings.Outcome(
        False, why="NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX.")
    stored = findings.as_json(f)                  # what a record keeps: plain JSON
    assert json.loads(json.dumps(stored)) == stored and stored["vllm_scaling_chat"]["ratio"] == 5.0


def test_the_measured_guide_cites_its_run_and_labels_gpu_claims_cited():
    data = _data()
    rows = guide.measured_decisions(data)
    label = guide.run_label(data)
    assert label == "make engines of 2026-12-01 10:00 UTC (cpu: AMD EPYC, 2 cores; profile tiny-trained; load average 3.5)"
    assert f"From `r.json`, {label}." in engines_guide.guide_markdown(data, "r.json")        # no run time recorded: none said
    assert f"From `r.json`, {label}, which took 399 s." in engines_guide.guide_markdown(dict(data, seconds=398.8), "r.json")
    by = {r["workload"].split(",")[0].split(" (")[0]: r for r in rows}
    several = next(r for r in rows if r["workload"].startswith("several users"))
    assert several["engine"] == "vLLM default" and label in several["evidence"]
    # at 8: vLLM 20 tokens in 0.2 s = 100 tok/s; continuous batching 20 in 2 s = 10; one at a time 20 in 8 s = 2.5
    assert ("at concurrency 8, vLLM default gave the most output tokens/s: 100 — 10× HF transformers serve + "
            "continuous batching's 10, 40× HF transformers serve's 2.5") in several["evidence"]
    assert "one request at a time queues them" in several["why"]
    one = next(r for r in rows if r["workload"].startswith("one user"))
    # at 1: vLLM 20 tokens in 1.0 s = 20 tok/s; both transformers serve 20 tokens in 0.2 + 4 × 0.05 = 0.4 s = 50:
    # a tie (within 10 %) between the two, the simplest picked
    assert one["engine"] == "transformers serve" and "within 10% of each other" in one["evidence"]
    assert "as fast as the fastest" in one["why"] and label in one["evidence"]
    agents = next(r for r in rows if r["workload"].startswith("agents"))
    assert "c=1: TTFT 600 → 100 ms (÷ 6.0)" in agents["evidence"] and "cited: the talk §8" in agents["evidence"]
    assert "a radix tree could cut the prefill work (at most × 1.10 less prefill)" in agents["evidence"]
    fp8 = next(r for r in rows if "fp8" in r["engine"])
    assert "not measured here: NotImplementedError" in fp8["evidence"] and "no speed claim" in fp8["evidence"]
    trt = next(r for r in rows if "TensorRT" in r["engine"])
    assert trt["evidence"].startswith("cited") and "20" not in trt["evidence"]
    gpu = next(r for r in rows if "NVIDIA GPUs" in r["workload"])
    assert gpu["evidence"].startswith("cited:") and "× 5.0" in gpu["evidence"]
    assert all(r["evidence"] for r in rows) and by


def test_engines_md_holds_the_guide_generated_from_the_committed_record(tmp_path):
    """The committed workshop/engines.md is what `python scripts/engines_guide.py` writes from the committed
    record (regenerate it after a new make engines record); a file without the markers is refused."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    md = root / "workshop" / "engines.md"
    copy = tmp_path / "engines.md"
    copy.write_text(md.read_text())
    engines_guide.write_guide(records.RECORD, copy)
    assert copy.read_text() == md.read_text(), "workshop/engines.md is stale: python scripts/engines_guide.py"
    (tmp_path / "bare.md").write_text("no markers")
    with pytest.raises(ValueError, match="no generated section"):
        engines_guide.write_guide(records.RECORD, tmp_path / "bare.md")
    record = json.loads(records.RECORD.read_text())
    assert record["complete"] and record["figures"] == findings.as_json(findings.key_figures(record))


def test_distserve_goodput_and_attainment_rules():
    assert metrics.distserve_goodput([(1, 1.0), (2, 0.95), (4, 0.89), (8, 0.95)]) == 2     # stops at the first miss
    assert metrics.distserve_goodput([(1, 0.5)]) is None
    assert metrics.distserve_goodput([(2, 0.9), (1, 1.0)]) == 2                             # sorted by rate; ≥ goal
    detail = [[0.5, 0.05, 1.0, 10], [2.0, 0.05, 3.0, 10], None, [0.5, None, 0.6, 1]]
    assert metrics.attainment(detail, SLO(1.0, 0.1)) == 0.5 and metrics.attainment([], SLO_) is None
    s = summarize(_recs(0.2, 0.05, n=2, tokens=5), "x", 2, SLO_, detail=True)
    # E2E 0.2 + 4 × 0.05 = 0.4 s over 5 tokens: 0.08 s a token; pooled ITL = 2 × 0.2 s ÷ 2 × 4 gaps = 0.05
    assert s.normalized_latency_s == pytest.approx(0.08) and s.itl_pooled_s == pytest.approx(0.05)
    assert s.slo_attainment == 1.0 and s.requests_detail[0] == pytest.approx([0.2, 0.05, 0.4, 5])


def test_vllm_bench_view_worked_by_hand():
    """Our records read by vLLM bench's definitions: an empty first chunk is its TTFT, the last chunk with
    choices its end, every chunk gap its ITL, a stream with choices but no text a success."""
    a = RequestRecord(0, 0.0, 1.0, [0.3, 0.4, 0.5], 3, chunk_times=[0.1, 0.3, 0.4, 0.5, 0.7])
    b = RequestRecord(1, 0.0, 0.5, [], 0, error="no tokens", chunk_times=[0.2, 0.4])
    c = RequestRecord(2, 0.0, 0.1, error="http 500")
    v = metrics.vllm_bench_view([a, b, c])
    assert v["completed"] == 2 and v["ttft_mean"] == pytest.approx((0.1 + 0.2) / 2)
    assert v["e2el_mean"] == pytest.approx((0.7 + 0.4) / 2)
    assert v["tpot_mean"] == pytest.approx((0.7 - 0.1) / 2)                 # b has no tokens: no TPOT
    assert v["itl_mean"] == pytest.approx((0.2 + 0.1 + 0.1 + 0.2 + 0.2) / 5)
    assert a.ttft_s == pytest.approx(0.3) and a.e2e_s == 1.0 and not b.ok   # ours: text chunks, stream close


def test_sharegpt_like_lengths_follow_the_published_means():
    reqs = workloads.sharegpt_trace(4000, seed=0, max_prompt_tokens=100_000, max_output_tokens=100_000)
    prompt = sum(len(r.prompt.split()) for r in reqs) * workloads.TOKENS_PER_WORD / len(reqs)
    output = sum(r.max_new_tokens for r in reqs) / len(reqs)
    # a log-normal of σ = 1 has a heavy tail: 4,000 draws put the sample mean within about 5 % of the target
    assert prompt == pytest.approx(workloads.SHAREGPT_MEAN_PROMPT_TOKENS + 3 * workloads.TOKENS_PER_WORD, rel=0.08)
    assert output == pytest.approx(workloads.SHAREGPT_MEAN_OUTPUT_TOKENS, rel=0.08)
    small = workloads.sharegpt_trace(8, seed=1, scale=0.1)
    assert small == workloads.sharegpt_trace(8, seed=1, scale=0.1) and len({r.prompt for r in small}) == 8
    timed = workloads.poisson(small, 4.0, seed=3)
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(timed, timed[1:])]
    assert timed[0].arrival_s == 0 and all(g > 0 for g in gaps) and [r.prompt for r in timed] == [r.prompt for r in small]
    assert math.isclose(workloads.words_for(105), 100)


def test_tokens_per_word_is_the_tokenizers_rate_on_the_word_list():
    from helpers.measure import local_models
    from helpers.serving.traces import chat_trace

    tok = local_models.load_tokenizer(local_models.build_tiny())
    reqs = chat_trace(100, seed=0, prompt_words_median=100, sigma=0.0)
    words = sum(len(r.prompt.split()) for r in reqs)
    tokens = sum(len(tok(r.prompt).input_ids) for r in reqs)
    assert tokens / words == pytest.approx(workloads.TOKENS_PER_WORD, abs=0.02)
    agentic = workloads.agentic(4, 1, 1200, 24, 12)
    assert len(tok(agentic[0].prompt).input_ids) == pytest.approx(1200 + 40 * 1.05, rel=0.05)   # + the task's words


def test_open_loop_and_prefix_figures_draw_what_they_are_given():
    import matplotlib

    matplotlib.use("Agg")
    from helpers.benchmark import figures

    data = _data()
    table = records.runs_table(data)
    pts = findings.attainment_points(data, "chat", SLO(0.2, 0.1))
    # TTFT ≤ 0.2 s: only the 1/s run (0.1 s) meets it: attainment 1, 0, 0 and DistServe goodput 1/s
    assert pts["vLLM default"] == findings.Attainment(((1.0, 1.0), (4.0, 0.0), (16.0, 0.0)), 1.0)
    fig = figures.open_loop_figure(table, "measured: by hand", "chat", {k: v.points for k, v in pts.items()})
    assert fig._suptitle.get_text().startswith(figures.OPEN_LOOP_TITLE)
    assert [list(line.get_ydata()) for line in fig.axes[1].lines if line.get_label() == "vLLM default"] == [[100, 0, 0]]
    rows = prefix.prefix_caching_effect(data, "agentic")
    fig = figures.prefix_figure(rows, "measured: by hand", data["prefix_model"]["agentic"])
    heights = [round(b.get_height(), 1) for b in fig.axes[0].patches]
    assert heights == [600.0, 900.0, 100.0, 850.0]          # off at c=1, 4; on at c=1, 4 (ms)
    assert fig._suptitle.get_text() == figures.PREFIX_TITLE
    note = figures.open_loop_figure(table[table["rate req/s"].isna()], "measured: closed only", "chat")
    assert any("no open-loop run" in t.get_text() for ax in note.axes for t in ax.texts)
