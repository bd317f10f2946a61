"""Notebook 07's conclusions: every rule that writes a sentence of notebook 07 fed each regime it can meet —
the committed CPU records (07/batching on the AMD EPYC and the Intel Xeon), live runs on the tiny model where
the notebook measures live, and synthetic results for the regimes neither CPU shows: floor-dominated (a GPU-like
step at about 90 % of its memory floor), fixed-cost-dominated (a step ten times its floor) — and the words
checked against the numbers each rule returns as evidence, with the 10 % margin written out here."""
from __future__ import annotations

import math

import pytest
import torch

from helpers import records
from helpers.engine.llm import EngineArgs
from helpers.formulas import speculation, verdicts
from helpers.formulas.gpus import get_gpu
from helpers.formulas.memory import weight_bytes
from helpers.formulas.stepcost import decode_cost, forward_cost
from helpers.formulas.verdicts import factor
from helpers.measure import quality
from helpers.present import expected, replay
from helpers.serving import batching, engine_caches, engine_runs, kv_cache, kv_quant, paging, speculative
from helpers.serving.naive import RequestTiming, ServeResult
from helpers.serving.traces import TraceRequest

CPU_RECORDS = ("cpu-amd-epyc", "cpu-intel-xeon")
MODEL, GPU = expected.REFERENCE_MODEL, expected.REFERENCE_GPU


def way(ratio: float) -> str:
    """The 10 % margin, written out independently of helpers.formulas.verdicts."""
    return "up" if ratio > 1.1 else "down" if ratio < 1 / 1.1 else "same"


def said(v, ratio: float, up: str, down: str, same: str):
    """The verdict's words say the direction its own ratio has, with the factor the sentences print."""
    w = way(ratio)
    word = {"up": up, "down": down, "same": same}[w]
    assert word in v.words, (word, v.words)
    shown = ratio if w == "up" else 1 / ratio if w == "down" else max(ratio, 1 / ratio)
    assert factor(shown) in v.words, (factor(shown), v.words)


def floor_s(cost, gpu=GPU):
    g = get_gpu(gpu)
    return max(cost.bytes / g.bandwidth, cost.flops / g.peak_flops("bf16")[0])


# ----------------------------------------------------------------------------- the KV cache on and off

def on_off(p: int, n: int, off, on) -> kv_cache.CacheOnOff:
    steps = [kv_cache.CacheStep(i, p + i, off(p + i), on(i), p + i, p if i == 0 else 1) for i in range(n)]
    return kv_cache.CacheOnOff(steps, p, n, True, sum(s.seconds_without_cache for s in steps),
                               sum(s.seconds_with_cache for s in steps), sum(p + i for i in range(n)), p + n - 1,
                               kv_cache.work_without_cache(p, n))


GPU_STEP = floor_s(decode_cost(MODEL, 111)) / 0.9        # a GPU-like step: 90 % of the memory floor
REGIMES_ON_OFF = {
    # a CPU: 5.6 ms a step whatever its tokens, 35 µs a token (as 07 measured on the Xeon), the cached step 4.5 ms
    "cpu": on_off(64, 48, lambda t: 5.6e-3 + 35e-6 * t, lambda i: 5.6e-3 + 35e-6 * 64 if i == 0 else 4.5e-3),
    # a GPU below the ridge: one weight read either way, so both steps at the floor ÷ 0.9
    "floor": on_off(64, 48, lambda t: GPU_STEP, lambda i: GPU_STEP),
    # fixed cost ten times a 0.5 ms floor, 1 µs a token on top
    "fixed": on_off(64, 48, lambda t: 5e-3 + 1e-6 * t, lambda i: 5e-3),
    # a GPU past the ridge: the no-cache step proportional to its tokens
    "compute": on_off(512, 256, lambda t: 14e-6 * t, lambda i: 4.3e-3),
    # a shared CPU whose load eased during the run: the no-cache line falls, the fit's fixed part below zero
    "falling": on_off(64, 48, lambda t: 9e-3 - 30e-6 * (t - 64), lambda i: 4e-3),
}


def check_on_off(r):
    v = kv_cache.reading(r)
    work = r.tokens_without_cache / r.tokens_with_cache
    assert f"{factor(work)} fewer" in v[0].words and f"{r.tokens_without_cache:,}" in v[0].words
    said(v[1], r.total_s_without_cache / r.total_s_with_cache, "faster", "slower", "as fast")
    for line in v[2:4]:           # a line prints last ÷ first as it is (0.85× for one that fell)
        ratio = line.evidence["ratio"]
        assert {"up": "climbed", "down": "fell", "same": "stayed level"}[way(ratio)] in line.words
        assert f"({factor(ratio)})" in line.words
    fixed = v[4].evidence["fixed_s"]
    if v[4].evidence["per_token_s"] <= 0:
        assert "cannot separate a fixed part" in v[4].words
    elif fixed > 0:
        band = verdicts.share_band(min(fixed * len(r.steps), r.total_s_without_cache) / r.total_s_without_cache)
        assert f"({band})" in v[4].words
    else:
        assert "no fixed part" in v[4].words
    return v


@pytest.mark.parametrize("regime", REGIMES_ON_OFF)
def test_the_cache_on_and_off_says_what_its_numbers_show(regime):
    v = check_on_off(REGIMES_ON_OFF[regime])
    if regime == "cpu":
        assert "faster" in v[1].words and "no-cache step climbed" in v[2].words and "cached step stayed level" in v[3].words
        assert "(lower)" in v[4].words and "(most)" in v[4].words        # the fixed part: most of the no-cache run
    if regime in ("floor", "fixed"):          # one weight read, or a fixed cost, either way: no speed-up to show
        assert "as fast" in v[1].words and "stayed level" in v[2].words and "(nearly all)" in v[4].words
    if regime == "falling":
        assert "no-cache step fell" in v[2].words and "cannot separate a fixed part" in v[4].words
    if regime == "compute":   # the no-cache step follows its tokens; the cached one still reads all the weights
        assert "no-cache step climbed" in v[2].words and "(lower)" in v[4].words
        assert "(a small part)" in v[4].words or "no fixed part" in v[4].words


def test_the_cache_on_and_off_live_on_the_tiny_model(tiny):
    check_on_off(kv_cache.cache_on_off(tiny.model, torch.tensor([quality.eval_ids(tiny.tokenizer, 32)]), 16))


def test_no_cache_on_gpu_finds_the_ridge_by_brute_force():
    g = get_gpu(GPU)
    first = next(n for n in range(1, 4096) if forward_cost(MODEL, n).flops / g.peak_flops("bf16")[0]
                 > forward_cost(MODEL, n).bytes / g.bandwidth)
    below = kv_cache.no_cache_on_gpu(MODEL, GPU, 64, 48)
    assert below.evidence["compute_bound_from"] == first and f"below n = {first:,} tokens" in below.words
    assert "both lines sit on the same memory floor" in below.words
    assert "climbs from 512 tokens on" in kv_cache.no_cache_on_gpu(MODEL, GPU, 512, 64).words
    assert f"level up to {first:,} tokens and climbs after" in kv_cache.no_cache_on_gpu(MODEL, GPU, 200, 200).words


# ----------------------------------------------------------------------------- paging

def test_paging_reading_on_a_trace_and_where_reservations_are_exact():
    reqs = batching.requests_from_ids([[0] * n for n in [40, 120, 80, 300, 20, 60] * 4], [30, 200, 10, 90, 250, 5] * 4)
    c, p = (paging.simulate(reqs, 1500, 256, s, 16).summary() for s in ("contiguous", "paged"))
    fit = paging.FitCounts(10, 15, 1.5)
    v = paging.reading(c, p, fit)
    assert f"({verdicts.share_band(c.used_share_of_reserved)})" in v[0].words
    assert f"{factor(p.mean_running / c.mean_running)} contiguous reservation's" in v[1].words
    assert f"{factor(p.steps / c.steps)} the steps" in v[1].words and "1.50× as many as contiguously" in v[2].words
    # answers exactly as long as max_tokens, all fitting at once: both run every sequence from the start
    exact = batching.requests_from_ids([[0] * 32] * 8, [32] * 8)
    c, p = (paging.simulate(exact, 512, 32, s, 16).summary() for s in ("contiguous", "paged"))
    v = paging.reading(c, p, paging.FitCounts(8, 8, 1.0))
    assert f"({verdicts.share_band(c.used_share_of_reserved)})" in v[0].words
    assert "1.00× contiguous reservation's" in v[1].words and "1.00× the steps" in v[1].words


# ----------------------------------------------------------------------------- the scheduler

def test_log_reading_and_the_blocks_that_prevent_preemption(tiny):
    prompts = [quality.eval_ids(tiny.tokenizer, 80)[i:i + n] for i, n in ((0, 40), (3, 60), (7, 25), (1, 70))]
    reqs = [TraceRequest(i, tuple(p), 24) for i, p in enumerate(prompts)]
    need = engine_runs.blocks_without_preemption(reqs, 8, 4)
    assert need == sum(math.ceil((len(p) + 24) / 8) for p in prompts)
    small = EngineArgs(block_size=8, num_blocks=engine_runs.blocks_needed(reqs, 8), max_num_seqs=4, max_batch_tokens=32)
    res, e = engine_runs.serve(tiny.model, reqs, small)
    s = engine_runs.log_summary(e, res)
    v = engine_runs.log_reading(s, small, reqs)
    assert s.preemptions > 0 and f"{s.preemptions} preemptions with {small.blocks} blocks" in v[1].words
    assert "cut" in v[0].words                      # 40–70-token prompts, a 32-token budget
    assert f"({verdicts.share_band(s.tokens_at_peak / (s.peak_blocks * 8))})" in v[2].words
    # with the blocks the rule names, none is preempted: the sentence's claim, run
    big = EngineArgs(block_size=8, num_blocks=need, max_num_seqs=4, max_batch_tokens=256)
    res, e = engine_runs.serve(tiny.model, reqs, big)
    s = engine_runs.log_summary(e, res)
    v = engine_runs.log_reading(s, big, reqs)
    assert s.preemptions == 0 and v[1].words.startswith("no preemption") and "every prompt prefilled in one step" in v[0].words


# ----------------------------------------------------------------------------- chunked prefill

def chunk_run(budget, steps, largest, worst, ttft):
    return engine_runs.ChunkedRun(budget, 512, steps, largest, worst, worst, ttft)


GPU_WHOLE = floor_s(forward_cost(MODEL, 4096))
GPU_CHUNK = max(floor_s(forward_cost(MODEL, 512, s)) for s in range(0, 4096, 512))
CHUNKED = {
    "xeon": (chunk_run(520, 1, 515, 27.2, 27.1), chunk_run(64, 9, 64, 6.15, 48.7)),     # 07's executed text, Xeon
    "floor": (chunk_run(4104, 1, 4099, 1e3 * GPU_WHOLE, 1e3 * GPU_WHOLE),
              chunk_run(512, 8, 512, 1e3 * GPU_CHUNK, 8e3 * GPU_CHUNK)),
    "fixed": (chunk_run(520, 1, 515, 10.0, 10.0), chunk_run(64, 9, 64, 10.0, 90.0)),   # every step the same 10 ms
}


@pytest.mark.parametrize("regime", CHUNKED)
def test_chunked_reading_says_what_its_numbers_show(regime):
    one, chunked = CHUNKED[regime]
    v = engine_runs.chunked_reading(one, chunked)
    assert f"{one.largest_step_tokens:,} tokens in one step and {chunked.largest_step_tokens:,}" in v[0].words
    said(v[1], one.worst_gap_ms / chunked.worst_gap_ms, "shorter", "longer", "as long")
    assert factor(one.worst_gap_ms / one.long_prompt_ttft_ms) in v[1].words
    said(v[2], one.long_prompt_ttft_ms / chunked.long_prompt_ttft_ms, "shorter", "longer", "as long")
    if regime == "fixed":
        assert "as long" in v[1].words and "9.0× longer" in v[2].words


def test_chunked_reading_without_gaps_says_so():
    v = engine_runs.chunked_reading(chunk_run(520, 1, 515, None, 27.1), chunk_run(64, 9, 64, None, 48.7))
    assert "no gap to compare" in v[1].words


def test_chunks_on_gpu_against_each_chunks_floor():
    v = batching.chunks_on_gpu(MODEL, GPU, 4096, 512)
    assert v.evidence["chunks"] == 8 and v.evidence["whole_s"] == pytest.approx(GPU_WHOLE)
    assert v.evidence["chunk_max_s"] == pytest.approx(GPU_CHUNK) and f"{1e3 * GPU_WHOLE:,.1f} ms" in v.words


# ----------------------------------------------------------------------------- prefix caching

def hits(prompt, radix, hashed):
    run = lambda kind, h: engine_caches.CacheRun(kind, sum(prompt), sum(h), sum(h) / sum(prompt), 0, h, prompt)  # noqa: E731
    return engine_caches.CacheHits(run("radix", radix), run("hash", hashed), True)


def test_hits_reading_bands_and_the_block_between_the_caches():
    runs = {"agentic": hits([600, 900, 900], [0, 590, 880], [0, 576, 880]),
            "chat": hits([70, 80, 75], [3, 4, 0], [0, 0, 0])}
    agentic, chat = engine_caches.hits_reading(runs, 16)
    assert "(most)" in agentic.words and "0 to 14 tokens more" in agentic.words and "less than one 16-token block" in agentic.words
    assert "(a small part)" in chat.words
    # a hash hit the tree missed (another eviction order): no claim of "less than a block"
    (odd,) = engine_caches.hits_reading({"odd": hits([64, 64], [0, 16], [0, 32])}, 16)
    assert "-16 to 0 tokens more" in odd.words and "block" not in odd.words.split(";")[1]


def test_edit_reading_checks_where_each_cache_stopped():
    ok = engine_caches.edit_reading(engine_caches.EditHits(670, 300, 16, 300, 288))
    assert "(up to the edit)" in ok.words and "(the 18 whole blocks before it)" in ok.words
    bad = engine_caches.edit_reading(engine_caches.EditHits(670, 300, 16, 296, 300))
    assert "NOT up to the edit" in bad.words and "NOT the whole blocks" in bad.words


def ttft(cold, warm, prefix=1000, suffix=32):
    return engine_caches.PrefixTTFT(prefix, suffix, "radix", cold, warm, cold / warm, [prefix] * 3, True)


GPU_HIT = engine_caches.hit_on_gpu(MODEL, GPU, 1000, 32)
TTFT = {"xeon": ttft(63.2, 6.86),                                 # 07's executed text on the Xeon
        "floor": ttft(1e3 * GPU_HIT.evidence["cold_s"] / 0.9, 1e3 * GPU_HIT.evidence["warm_s"] / 0.9),
        "proportional": ttft(32.25, 1.0), "above": ttft(40.0, 1.0)}


@pytest.mark.parametrize("regime", TTFT)
def test_ttft_reading_against_the_token_ratio(regime):
    p = TTFT[regime]
    v = engine_caches.ttft_reading(p)
    said(v[0], p.ttft_cold_ms / p.ttft_warm_ms, "faster", "slower", "as fast")
    expect = {"xeon": "below the token ratio", "floor": "below the token ratio",
              "proportional": "at the token ratio", "above": "above the token ratio"}[regime]
    assert expect in v[1].words and factor(p.ttft_ratio / ((p.prefix_tokens + p.suffix_tokens) / p.suffix_tokens)) in v[1].words


def test_hit_on_gpu_by_hand():
    cold, warm = floor_s(forward_cost(MODEL, 1032)), floor_s(forward_cost(MODEL, 32, 1000))
    assert GPU_HIT.evidence["ratio"] == pytest.approx(cold / warm) and "compute-bound" in GPU_HIT.words
    assert f"{factor(cold / warm)}, {factor(cold / warm / (1032 / 32))} the token ratio" in GPU_HIT.words


def test_ttft_reading_live_on_the_tiny_model(tiny):
    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(3, 1000, (200,), generator=g).tolist()
    suffixes = [torch.randint(3, 1000, (16,), generator=g).tolist() for _ in range(3)]
    p = engine_caches.prefix_ttft(tiny.model, prefix, suffixes)
    v = engine_caches.ttft_reading(p)
    said(v[0], p.ttft_ratio, "faster", "slower", "as fast")


# ----------------------------------------------------------------------------- continuous batching

def serve(mode, calls, step_s, tokens=40, requests=64):
    timings = [RequestTiming(i, 10, tokens, 0.0, 0.0, 0.0) for i in range(requests)]
    return ServeResult(mode, timings, calls * step_s, calls)


def synthetic_batching(one_step, batched_step):
    n = 64 * 40
    return {"sequential": serve("one after another", n, one_step), "static": serve("static", 353, batched_step),
            "continuous": serve("continuous batching", 219, batched_step),
            "engine": serve("readable engine", 219, batched_step * 0.97)}


def batching_regimes():
    out = {rec: replay.load("07/batching", [records.RESULTS / rec])[0][1] for rec in CPU_RECORDS}
    out["floor"] = synthetic_batching(GPU_STEP, GPU_STEP * 1.05)      # 16 rows read the weights once: 1.05×
    out["fixed"] = synthetic_batching(5e-3, 5.2e-3)                   # a 5 ms fixed step, 10× a 0.5 ms floor
    return out


@pytest.mark.parametrize("regime", ["cpu-amd-epyc", "cpu-intel-xeon", "floor", "fixed"])
def test_batching_reading_says_what_its_numbers_show(regime):
    served = batching_regimes()[regime]
    v = batching.reading(served)
    seq, cb = served["sequential"], served["continuous"]
    for k in ("continuous", "static", "engine"):
        assert factor(served[k].tokens_per_s / seq.tokens_per_s) in v[0].words
    said(v[1], served["static"].tokens_per_s / cb.tokens_per_s, "faster", "slower", "as fast")
    said(v[2], served["engine"].tokens_per_s / cb.tokens_per_s, "faster", "slower", "as fast")
    said(v[3], seq.mean_step_s / cb.mean_step_s, "shorter", "longer", "as long")
    if regime.startswith("cpu"):               # the two records: the engine ahead, a batched step longer than one row's
        assert "the readable engine was 1.4" in v[2].words or "the readable engine was 1.2" in v[2].words
        assert "longer than one request's step" in v[3].words
    else:
        assert "as long as one request's step" in v[3].words


def test_decode_bytes_on_gpu_by_hand():
    from helpers.capacity.planner import max_batch

    v = batching.decode_bytes_on_gpu(MODEL, GPU, 4096)
    top = max_batch(MODEL, GPU, context=4096)
    one, many = decode_cost(MODEL, 4096, 1), decode_cost(MODEL, 4096, top)
    assert v.evidence["max_batch"] == top
    assert v.evidence["weights_share_1"] == pytest.approx(one.weight_read_bytes / one.bytes)
    assert f"({verdicts.share_band(one.weight_read_bytes / one.bytes)}) at batch 1" in v.words
    assert f"({verdicts.share_band(many.weight_read_bytes / many.bytes)}) at batch {top}" in v.words


# ----------------------------------------------------------------------------- KV-cache quantization

def speeds(*ms):
    return [kv_quant.SchemeSpeed(s, 300, m, m / ms[0]) for s, m in zip(kv_quant.SCHEMES, ms)]


@pytest.mark.parametrize("rows, words", [
    (speeds(2.74, 3.32, 3.44, 3.47), ["fp8 1.21× slower", "4-bit 1.26× slower", "2-bit 1.27× slower"]),  # Xeon text
    (speeds(4.72, 3.0, 2.4, 2.2), ["fp8 1.57× faster", "4-bit 1.97× faster", "2-bit 2.1× faster"]),      # fused, GPU-like
    (speeds(5.0, 5.05, 5.1, 5.2), ["fp8 as fast", "4-bit as fast", "2-bit as fast"]),                     # fixed cost
])
def test_kv_quant_speed_reading(rows, words):
    v = kv_quant.speed_reading(rows)
    assert all(w in v.words for w in words), v.words


def test_kv_quant_quality_and_bytes_readings():
    q = lambda *kl: [kv_quant.SchemeQuality(s, 336, k, 10 * k, 0.99) for s, k in zip(("fp8", "4-bit", "2-bit"), kl)]  # noqa: E731
    assert "grew with every bit removed" in kv_quant.quality_reading(q(0.00014, 0.000264, 0.0124)).words
    odd = kv_quant.quality_reading(q(0.0005, 0.0002, 0.0124))
    assert "did not grow" in odd.words and "largest at 2-bit" in odd.words
    b = lambda measured: [kv_quant.SchemeBytes("full precision", 301, 616448, 616448, 616448, 616448, 0, 0, 1.0),  # noqa: E731
                          kv_quant.SchemeBytes("fp8", 301, measured, 154112, 154144, 154112, 32, 0, measured / 616448)]
    assert "to the byte" in kv_quant.bytes_reading(b(154144)).words
    assert "NOT exactly" in kv_quant.bytes_reading(b(154148)).words


# ----------------------------------------------------------------------------- speculative decoding

@pytest.mark.parametrize("tokens, cost, word", [(3.2, 1.39, "can pay"), (3.0, 1.39 + 4 * 0.85, "cannot pay"),
                                                (1.05, 1.0, "breaks even"), (2.5, 1.0, "can pay")])
def test_pays_reads_tokens_against_the_rounds_cost(tokens, cost, word):
    v = speculation.pays(tokens, cost)
    assert v.words.startswith(word) and factor(tokens / cost) in v.words


def spec_rows(batch, plain_s, lookup, draft):
    return [speculative.SpecRun("none (plain decoding)", 0, batch, 1.0, 48, plain_s, 1.0, None, True),
            speculative.SpecRun("prompt lookup (n-gram ≤ 3)", 4, batch, 3.2, 15, plain_s / lookup, lookup, 0.58, True),
            speculative.SpecRun("draft model (2 of 4 layers, early exit)", 4, batch, 3.0, 16, plain_s / draft, draft, 0.52, True)]


SPEC = {  # (rows, verify ÷ decode, draft share)
    "xeon": (spec_rows(1, 0.111, 2.03, 0.664), 1.39, 0.85),         # 07's executed text on the Xeon
    "floor": (spec_rows(1, 0.2, 2.9, 1.9), 1.0, 0.1),                 # a GPU: verify as one step, a small draft
    "fixed": (spec_rows(1, 0.5, 3.0, 0.9), 1.0, 0.85),                # fixed cost: k + 1 rows as one, the draft dear
}


@pytest.mark.parametrize("regime", SPEC)
def test_speculative_reading_says_what_its_numbers_show(regime):
    rows, verify, share = SPEC[regime]
    v = speculative.speculative_reading(rows, [speculative.VerifyCost(184, 1, 4, 2.0, 2.0 * verify, verify)], share)
    for r, text in zip(rows[1:], v):
        said(text, r.speedup, "faster", "slower", "as fast")
        cost = verify + (0 if r.drafter.startswith("prompt") else 4 * share)
        word = {"up": "can pay", "down": "cannot pay", "same": "breaks even"}[way(r.tokens_per_pass / cost)]
        assert word in text.words and "(above 1: drafts were kept)" in text.words


def test_verify_on_gpu_and_the_head_share():
    rows = [speculation.verify_step_ratio(MODEL, 4, c, b) for c in (512, 4096) for b in (1, 16, 64, 256)]
    short, long_ = speculation.verify_on_gpu(rows)
    first = min(r.batch for r in rows if r.context == 512 and r.verify_bound == "compute")
    assert f"compute-bound at batch {first}" in short.words and "memory-bound at every batch up to 256" in long_.words
    from helpers.measure.local_models import TINY_CONFIG

    v = speculation.head_share(TINY_CONFIG, "fp32")
    head = TINY_CONFIG["vocab_size"] * TINY_CONFIG["hidden_size"] * 4
    assert v.evidence["fraction"] == pytest.approx(head / decode_cost(TINY_CONFIG, 1, 1, "fp32").weight_read_bytes)
    assert f"({verdicts.share_band(v.evidence['fraction'])})" in v.words
    assert weight_bytes(TINY_CONFIG, "fp32").bytes >= head


def test_speed_names_what_it_compares_with():
    assert verdicts.speed(1.0, 2.3, than="X").words == "2.3× faster than X"
    assert verdicts.speed(1.0, 1.05, than="X").words == "as fast as X (within 10%: 1.05×)"
    assert verdicts.speed(2.0, 1.0, "shorter", "longer", "as long", "Y").words == "2.0× longer than Y"


def test_the_cited_speculative_figures_are_the_abstracts():
    low, high = expected.published("leviathan_t5xxl_speedup_low"), expected.published("leviathan_t5xxl_speedup_high")
    assert (low.value, high.value) == (2.0, 3.0) and low.url == high.url == "https://arxiv.org/abs/2211.17192"
