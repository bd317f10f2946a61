"""Serving optimizations on the tiny model: each lossless one gives the same greedy tokens as without
it; KV-cache bytes against the formula and the bytes of the real tensors; speculative decoding's counts."""
import math

import pytest
import torch

from helpers.formulas import memory
from helpers.measure import quality
from helpers.formulas import speculation
from helpers.serving import batching, engine_runs, kv_cache, kv_quant, naive, speculative, trained_profile
from helpers.serving.traces import TraceRequest


def requests(prompts, new_tokens):
    return [TraceRequest(i, tuple(p), n) for i, (p, n) in enumerate(zip(prompts, new_tokens))]


def test_work_without_cache_by_hand():
    # prompt 3, 4 new tokens: steps process 3, 4, 5, 6 tokens
    assert kv_cache.work_without_cache(3, 4) == 18


def test_kv_cache_is_lossless_and_the_work_is_quadratic(tiny):
    r = kv_cache.cache_on_off(tiny.model, torch.tensor([quality.eval_ids(tiny.tokenizer, 16)]), 12)
    assert r.identical_tokens
    assert r.tokens_without_cache == kv_cache.work_without_cache(r.prompt_tokens, 12)
    assert r.tokens_with_cache == r.prompt_tokens + 11
    assert [x.tokens_without_cache for x in r.steps] == list(range(r.prompt_tokens, r.prompt_tokens + 12))


def test_continuous_batching_gives_the_sequential_greedy_tokens(tiny):
    prompts = [quality.eval_ids(tiny.tokenizer, 40)[i:i + n] for i, n in ((0, 12), (5, 30), (9, 7), (2, 20))]
    reqs = requests(prompts, [9, 3, 14, 6])
    seq = naive.serve_sequential(tiny.model, reqs)
    cont = batching.serve_continuous(tiny.model, reqs, max_batch_tokens=64, concurrent=2)
    assert batching.same_tokens(cont, seq) == 1.0
    assert [t.new_tokens for t in cont.timings] == [9, 3, 14, 6]
    # the paged cache is bounded from the work: 2 of the longest requests in blocks of 16, + 2 spare
    assert batching.cb_config(tiny.model, reqs, concurrent=2).num_blocks == 2 * math.ceil((30 + 3) / 16) + 2
    # all four rows share forward passes: fewer calls than one per token
    assert cont.forward_calls < sum(t.new_tokens for t in seq.timings)
    # a request holds a slot from when the manager took it off the queue: with 2 slots, never 3 at once,
    # and the two queued requests start only after others began
    for t in cont.timings:
        assert t.arrival_s == 0.0 and 0 <= t.start_s <= t.first_token_s <= t.finish_s
    edges = sorted([(t.start_s, 1) for t in cont.timings] + [(t.finish_s, -1) for t in cont.timings],
                   key=lambda e: (e[0], e[1]))
    running = [sum(d for _, d in edges[:i + 1]) for i in range(len(edges))]
    assert max(running) <= 2
    segs = batching.slot_segments(cont, 2)
    assert 0 <= batching.idle_share(segs, cont.wall_s, 2) < 1
    assert {s["slot"] for s in segs} == {0, 1}


def test_compare_batching_runs_every_way_off_the_callers_thread_and_keeps_the_fastest_round(tiny, monkeypatch):
    import threading

    caller = threading.get_ident()
    seen, walls = [], iter([3.0, 2.0, 1.0, 5.0, 4.0, 0.5])

    def fake(mode):
        def serve(model, requests, *args, **kwargs):
            seen.append((mode, threading.get_ident() != caller))
            return naive.ServeResult(mode, [], next(walls) if len(requests) > 2 else 9.9, 0)
        return serve

    monkeypatch.setattr(batching, "serve_sequential", fake("sequential"))
    monkeypatch.setattr(batching, "serve_static", fake("static"))
    monkeypatch.setattr(batching, "serve_continuous", fake("continuous"))
    reqs = requests([[5, 6, 7]] * 4, [3] * 4)
    best = batching.compare_batching(tiny.model, reqs, 2, rounds=2)
    assert {k: v.wall_s for k, v in best.items()} == {"sequential": 3.0, "static": 2.0, "continuous": 0.5}
    # the baselines in a worker thread; the manager (here faked) makes its own, as transformers' does
    assert all(off for mode, off in seen if mode != "continuous")
    assert [m for m, _ in seen] == ["sequential", "static", "continuous"] * 3     # warm-up, then 2 rounds


def test_a_worker_thread_hands_back_its_result_and_its_error():
    import threading

    assert batching.in_worker_thread(lambda a, b=0: (a + b, threading.current_thread().name), 2, b=3)[0] == 5
    assert batching.in_worker_thread(threading.current_thread).name != threading.current_thread().name

    def boom():
        raise KeyError("lost")

    with pytest.raises(KeyError, match="lost"):
        batching.in_worker_thread(boom)


def test_static_batches_and_slot_timeline(tiny):
    prompts = [quality.eval_ids(tiny.tokenizer, 30)[:n] for n in (5, 9, 12, 7)]
    reqs = requests(prompts, [4, 2, 6, 3])
    res = batching.serve_static(tiny.model, reqs, 2)
    assert res.forward_calls == 4 + 6       # a batch runs until its longest: 4 then 6 steps
    segs = batching.slot_segments(res, 2, static_batch=2)
    # in each batch the shorter request's slot idles until the longer one finishes
    assert sum(s["idle_until_s"] > s["finish_s"] for s in segs) == 2
    pad = batching.padding_tokens(reqs, 2).iloc[0]
    assert pad["prompt padding tokens"] == (9 - 5) + (12 - 7)
    assert pad["finished rows' decode steps"] == (4 - 2) + (6 - 3)
    # rows computed: 2 × (9 + 4 − 1) + 2 × (12 + 6 − 1) = 58, of which useful (5 + 9 + 3 + 1) + (12 + 7 + 5 + 2) = 44
    assert pad["useful tokens"] == 44 and pad["wasted share"] == pytest.approx(14 / 58)


def test_quantized_cache_bytes_match_the_formula_and_the_tensors(tiny):
    spec = tiny.spec
    ids = quality.eval_ids(tiny.tokenizer, 100)
    rows = {r.scheme: r for r in kv_quant.bytes_by_scheme(tiny.model, spec, ids, "fp32")}
    tokens = len(ids) + 1
    # by hand: 4 layers × 2 (K, V) × 2 KV heads × 32 head_dim = 512 values per token
    assert rows["full precision"].measured_bytes == tokens * 512 * 4 == memory.kv_cache_bytes(spec, tokens, dtype="fp32")
    assert rows["fp8"].measured_values_bytes == tokens * 512 == rows["fp8"].formula_values_bytes
    assert rows["fp8"].metadata_bytes == 4 * 2 * 4        # one fp32 scale per K and V tensor
    for scheme, bits in (("4-bit", 4), ("2-bit", 2)):
        r = rows[scheme]
        quantized = tokens - 1                # the prompt was quantized; the decoded token waits in the residual
        assert r.measured_values_bytes == quantized * 512 * bits // 8 == r.formula_values_bytes
        assert r.residual_bytes == 1 * 512 * 4
        # optimum-quanto: an fp32 scale and shift per group of 64 values
        assert r.metadata_bytes == quantized * 512 // 64 * 2 * 4
        assert r.measured_bytes == r.measured_values_bytes + r.metadata_bytes + r.residual_bytes
    for r in rows.values():                   # the formula with every part is the real cache to the byte
        assert r.formula_bytes == r.measured_bytes, r.scheme


def test_a_quanto_cpu_kernel_that_cannot_be_built_is_a_reason_and_the_other_schemes_run(tiny, monkeypatch):
    """quanto compiles its CPU kernel with a C++ compiler on first use: without one, its schemes say so in
    one line, and the full-precision and fp8 caches are still measured."""
    import subprocess

    from optimum.quanto.library.extensions.extension import Extension

    def no_compiler(self):
        raise subprocess.CalledProcessError(1, ["c++", "--version"])

    monkeypatch.setattr(Extension, "lib", property(no_compiler))
    kv_quant._quanto_cpu_kernel.cache_clear()
    try:
        why = kv_quant.available("4-bit")
        ids = quality.eval_ids(tiny.tokenizer, 20)
        schemes = [r.scheme for r in kv_quant.bytes_by_scheme(tiny.model, tiny.spec, ids, "fp32")]
    finally:
        kv_quant._quanto_cpu_kernel.cache_clear()
    assert why and "C++ compiler" in why and "'c++', '--version'" in why and "\n" not in why
    assert kv_quant.available("fp8") is None and kv_quant.available("2-bit", "cuda") is None
    assert schemes == ["full precision", "fp8"]


def test_quantized_cache_formula_holds_for_a_bf16_model(tiny):
    """The formula's parts in bf16: quanto's scales and zero points take the model's width (2 B), fp8's
    per-tensor scale stays fp32 — measured on a bf16 copy of the tiny model."""
    import copy

    m = copy.deepcopy(tiny.model).to(torch.bfloat16)
    ids = quality.eval_ids(tiny.tokenizer, 100)
    rows = {r.scheme: r for r in kv_quant.bytes_by_scheme(m, tiny.spec, ids, "bf16")}
    quantized = len(ids)                                      # the decoded token waits in the residual
    assert rows["fp8"].metadata_bytes == 4 * 2 * 4
    assert rows["4-bit"].metadata_bytes == quantized * 512 // 64 * 2 * 2
    for r in rows.values():
        assert r.formula_bytes == r.measured_bytes, r.scheme


def test_projected_kv_shares_for_mistral_in_bf16():
    """By hand, Mistral 7B at 4,096 tokens in bf16 (131,072 B per token): fp8 stores 1 of 2 bytes per value
    plus 64 two-byte scales; 4 bits store 0.5 B per value plus a 2-byte scale and zero point per 64 values
    (1/16 B per value), and 64 tokens waiting in full precision."""
    full = 4096 * 131072
    shares = kv_quant.projected_shares("mistral-7b-v0.1", 4096, "bf16")
    assert shares["full precision"] == 1.0
    assert shares["fp8"] == pytest.approx((full / 2 + 32 * 2 * 4) / full)        # fp32 scales
    per_value = 131072 // 2                                  # values per token
    four = 4032 * per_value * (0.5 + 4 / 64) + 64 * 131072
    two = 4032 * per_value * (0.25 + 4 / 64) + 64 * 131072
    assert shares["4-bit"] == pytest.approx(four / full) and shares["2-bit"] == pytest.approx(two / full)
    assert 3.4 < 1 / shares["4-bit"] < 3.6 and 5.7 < 1 / shares["2-bit"] < 6.0


def test_quantized_cache_quality_degrades_with_fewer_bits(tiny):
    rows = {r.scheme: r for r in kv_quant.quality_by_scheme(tiny.model, quality.eval_ids(tiny.tokenizer, 120),
                                                            prefill=32, chunk=16)}
    assert rows["fp8"].positions == 120 - 32
    assert 0 <= rows["fp8"].kl_mean_nats < rows["2-bit"].kl_mean_nats
    assert rows["4-bit"].kl_mean_nats < rows["2-bit"].kl_mean_nats


def test_expected_tokens_per_pass_by_hand():
    assert speculation.expected_tokens_per_pass(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert speculation.expected_tokens_per_pass(0.0, 4) == 1.0
    assert speculation.expected_tokens_per_pass(1.0, 4) == 5.0


def test_speculative_decoding_is_lossless_and_counted(tiny):
    from helpers.engine import speculative as loop
    from helpers.engine.request import SamplingParams

    ids = quality.eval_ids(tiny.tokenizer, 60)
    tokens, passes = speculative.speculate(tiny.model, ids, 20, k=3)
    plain = loop.generate(tiny.model, [ids], SamplingParams(max_tokens=20, ignore_eos=True))
    assert tokens == plain.outputs[0] and plain.target_passes == 20       # one pass per token without speculation
    assert 1 <= passes <= 20


def test_chunked_prefill_splits_the_long_prompt_by_the_token_budget(tiny):
    """The engine's chunked prefill (helpers.serving.engine_runs) on the tiny model: without chunking one
    prefill step; with a budget of 32 and three requests decoding beside it, chunks of 32 less their 3 decode
    rows, ⌈150 ÷ 29⌉ = 6 steps, none larger than the budget; every request's tokens the same either way."""
    ids = quality.eval_ids(tiny.tokenizer, 200)
    shorts = [ids[:10], ids[3:15], ids[5:13]]
    rows = engine_runs.chunked_prefill(tiny.model, shorts, ids[:150], 6, 2, [256, 32], repeats=1)
    assert [r.token_budget for r in rows] == [256, 32]
    assert rows[0].prefill_steps == 1 and rows[0].largest_step_tokens >= 150
    assert rows[1].prefill_steps == math.ceil(150 / (32 - 3)) and rows[1].largest_step_tokens <= 32
    assert all(r.long_prompt_tokens == 150 and r.long_prompt_ttft_ms > 0 for r in rows)
    assert all(r.worst_gap_ms >= r.median_gap_ms > 0 for r in rows)
    assert all(r.same_tokens_as_first_budget for r in rows)       # chunking is lossless


def test_quality_profile_is_trained_weights_whenever_offered():
    """The quality figures run on trained weights: the current profile's when they are trained, else
    tiny-trained (helpers.measure.models always offers it)."""
    from helpers.measure import models

    assert "tiny-trained" in models.PROFILES
    assert trained_profile() == "tiny-trained"
    assert trained_profile("tiny") == "tiny-trained"
    assert trained_profile("mistral-7b-random") == "tiny-trained"
    assert trained_profile("mistral-7b") == "mistral-7b"
    assert trained_profile("tiny-trained") == "tiny-trained"
    for p in models.PROFILES:           # any other profile (random weights, auto) measures on tiny-trained
        if p not in ("mistral-7b", "tiny-trained"):
            assert trained_profile(p) == "tiny-trained", p


def test_round_cost_worked():
    # a verify pass of 1.2 decode steps and 4 drafts at 85 % of a step each: 1.2 + 3.4 = 4.6 steps
    assert speculation.round_cost(1.2, 4, 0.85) == pytest.approx(4.6)
    assert speculation.round_cost(1.0, 4, 0.0) == 1.0      # free drafts (prompt lookup): the verify pass alone
