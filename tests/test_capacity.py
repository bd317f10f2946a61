"""The capacity planner against hand-worked cases: bytes ÷ bandwidth, the runtime reserve, tensor
parallel splits, the SLO search, the ranking, and bad input."""
import math

import pytest

from helpers import capacity
from helpers.formulas import gpus
from helpers.capacity import measured as capacity_measured, ranking as capacity_ranking, views as capacity_views
from helpers.capacity import slo as capacity_slo
from helpers.formulas.memory import kv_cache_bytes, weight_bytes
from helpers.formulas.specs import get_spec

MISTRAL = "mistral-7b-v0.1"
W_BF16 = 14_483_464_192          # 7,241,732,096 parameters × 2 B (published count)
KV_4096 = 4096 * 131_072         # 4,096 tokens × 131,072 B per token (bf16)
# What one decode step reads of the weights: all but the 32,000 × 4,096 input table, plus one row of it.
W_READ = W_BF16 - 32_000 * 4096 * 2 + 4096 * 2      # 14,221,328,384 B
H100_BYTES = 79.11 * 2**30       # what an H100 SXM reports (helpers/data/gpu_memory.csv): 84.94e9 B


# ----------------------------------------------------------------------------- hand-worked cases

def test_mistral_bf16_on_one_h100_sxm_batch_1():
    p = capacity.plan(MISTRAL, "H100 SXM", context=4096, batch=1)
    assert p.fits and p.bound == "memory"
    # The floor by hand: the weights read (one embedding row) + 4,096 cached tokens read + 1 written,
    # (14,221,328,384 + 4,097 × 131,072) B ÷ 3.35 TB/s = 4.4055 ms at the datasheet's bandwidth.
    assert p.step_bytes_per_gpu == W_READ + 4097 * 131_072 == 14_758_330_368
    assert p.step_floor_s == pytest.approx(14_758_330_368 / 3.35e12, rel=1e-12)
    assert p.step_floor_ms == pytest.approx(4.4055, abs=1e-4)
    # The step the SLO and the cost use: at the default efficiency (0.5, cited), twice the floor.
    assert p.efficiency == capacity.DEFAULT_EFFICIENCY == 0.5 and "Databricks" in p.efficiency_source
    assert p.step_ms == pytest.approx(8.8110, abs=1e-4)
    assert p.tokens_per_s == pytest.approx(1 / p.step_s)
    assert p.usd_per_million_tokens == pytest.approx(3.49 / (p.tokens_per_s * 3600) * 1e6)
    assert p.provider == "RunPod"
    full = capacity.plan(MISTRAL, "H100 SXM", context=4096, batch=1, efficiency=1.0)
    assert full.step_s == full.step_floor_s == p.step_floor_s


def test_mistral_bf16_does_not_fit_a_t4_once_the_reserve_is_counted():
    p = capacity.plan(MISTRAL, "T4", context=4096, batch=1)
    assert not p.fits and p.max_batch == 0
    assert p.step_s is None and p.usd_per_million_tokens is None
    assert "14.48 GB" in p.reason and "92%" in p.reason and "overhead" in p.reason
    # 14.48 GB of weights is less than the 16 GB on the label: only the reserve makes it fail.
    bare = capacity.plan(MISTRAL, "T4", context=4096, batch=1, utilization=1.0, overhead_bytes=0)
    assert bare.fits


def test_max_batch_is_the_kv_budget_over_one_sequence():
    # The H100 SXM is labelled 80 GB and reports 79.11 GiB = 84.94e9 B: the budget is 92 % of what it
    # reports (vLLM 0.32's default), less 1.5 GB and the weights: 62.16e9 B, 115 sequences of 4,096 tokens.
    p = capacity.plan(MISTRAL, "H100 SXM", context=4096, batch=1)
    assert p.memory_bytes_per_gpu == pytest.approx(H100_BYTES) and p.memory_label_gb == 80
    budget = 0.92 * H100_BYTES - 1.5e9 - W_BF16
    assert p.kv_budget_bytes_per_gpu == pytest.approx(budget)
    assert p.max_batch == int(budget // KV_4096) == 115
    assert capacity.plan(MISTRAL, "H100 SXM", context=4096, batch=115).fits
    over = capacity.plan(MISTRAL, "H100 SXM", context=4096, batch=116)
    assert not over.fits and "enough for batch 115" in over.reason


def test_kv_dtype_is_chosen_apart_from_the_weights():
    bf = capacity.plan(MISTRAL, "H100 SXM", context=4096, kv_dtype="bf16")
    f8 = capacity.plan(MISTRAL, "H100 SXM", context=4096, kv_dtype="fp8")
    assert f8.weight_bytes == bf.weight_bytes == W_BF16
    assert f8.kv_bytes_per_seq_per_gpu == KV_4096 / 2
    assert f8.max_batch == int(bf.kv_budget_bytes_per_gpu // (KV_4096 / 2))
    w8 = capacity.plan(MISTRAL, "H100 SXM", context=4096, weight_dtype="fp8")
    assert w8.weight_bytes == weight_bytes(MISTRAL, "fp8").bytes and w8.kv_bytes_per_seq_per_gpu == KV_4096


def test_prefill_is_compute_bound_for_a_long_prompt():
    spec = get_spec(MISTRAL)
    p = capacity.plan(spec, "H100 SXM", context=4096, batch=1, efficiency=1.0)
    # 2 × 6,979,321,856 linear weights × 4,096 tokens + causal attention (4 × 32 heads × 128 per key,
    # 32 layers × 4,096·4,097/2 keys) + one position's logits (2 × 4,096 × 32,000)
    flops = 2 * 6_979_321_856 * 4096 + 4 * 32 * 128 * 32 * (4096 * 4097 // 2) + 2 * 4096 * 32000
    assert p.prefill_s == pytest.approx(flops / 989.5e12)
    assert p.prefill_s > (W_BF16 + KV_4096) / 3.35e12   # compute beats reading the weights once
    # A one-token prompt costs about one read of the weights (and writes one token's K/V).
    short = capacity.plan(spec, "H100 SXM", context=4096, batch=1, prompt_tokens=1, efficiency=1.0)
    assert short.prefill_s == pytest.approx((W_READ + 131_072) / 3.35e12)
    assert capacity.plan(spec, "H100 SXM", context=4096, prompt_tokens=1).prefill_s == pytest.approx(
        2 * short.prefill_s)                          # at the default efficiency of 0.5


def test_fp8_weights_use_the_fp8_peak_where_it_exists():
    h = capacity.plan(MISTRAL, "H100 SXM", context=512, weight_dtype="fp8")
    a = capacity.plan(MISTRAL, "A100 80GB", context=512, weight_dtype="fp8")
    assert (h.peak_kind, h.peak_flops) == ("fp8", 1979e12)
    assert (a.peak_kind, a.peak_flops) == ("bf16", 312e12)


def test_compute_bound_at_large_batch_and_short_context():
    p = capacity.plan(MISTRAL, "B200", context=128, batch=2048)
    assert p.fits and p.bound == "compute"
    assert p.step_floor_s == pytest.approx(p.step_compute_s)
    # per sequence: 2 × linear weights + attention over 128 cached keys and the new one's + the logits
    per_seq = 2 * 6_979_321_856 + 4 * 32 * 128 * 32 * 129 + 2 * 4096 * 32000
    assert p.step_compute_s == pytest.approx(2048 * per_seq / 2250e12)


def test_sliding_window_caps_the_cache():
    # Mistral 7B v0.1 slides a 4,096-token window on every layer: 16k tokens cache no more than 4k.
    p16 = capacity.plan(MISTRAL, "H100 SXM", context=16384)
    assert p16.kv_bytes_per_seq_per_gpu == KV_4096


# ----------------------------------------------------------------------------- tensor parallel

def test_two_gpus_split_weights_and_kv_heads():
    one = capacity.plan(MISTRAL, "T4", context=4096)
    two = capacity.plan(MISTRAL, "T4", gpus=2, context=4096)
    assert not one.fits and two.fits
    assert two.weight_bytes_per_gpu == W_BF16 / 2
    assert two.kv_bytes_per_seq_per_gpu == KV_4096 / 2
    assert "4 KV heads each" in two.sharding
    assert two.step_floor_s == pytest.approx((W_READ / 2 + 4097 * 131_072 / 2) / 0.32e12)
    assert two.usd_per_million_tokens == pytest.approx(0.59 * 2 / (two.tokens_per_s * 3600) * 1e6)


def test_more_gpus_than_kv_heads_replicates_them():
    spec = get_spec("llama-3.1-8b")          # 32 query heads, 8 KV heads
    s = capacity.sharding(spec, 16)
    assert s.kv_heads_per_gpu == 1 and s.kv_fraction == 1 / 8 and s.weight_fraction == 1 / 16
    assert "replicated 2×" in s.note


def test_mla_latent_is_replicated_on_every_gpu():
    spec = get_spec("deepseek-v2-lite")
    s = capacity.sharding(spec, 2)
    assert s.kv_fraction == 1.0 and "replicated" in s.note
    p = capacity.plan(spec, "A100 80GB", gpus=2, context=4096)
    assert p.kv_bytes_per_seq_per_gpu == kv_cache_bytes(spec, 4096, 1, "bf16")


def test_gpu_count_must_divide_the_heads():
    with pytest.raises(ValueError, match="divisible by 3"):
        capacity.plan(MISTRAL, "H100 SXM", gpus=3)


# ----------------------------------------------------------------------------- mixture of experts

def test_moe_decode_reads_only_the_experts_the_batch_touches():
    spec = get_spec("gpt-oss-120b")          # 128 experts, 4 per token
    assert capacity.experts_touched(spec, 1) == pytest.approx(4 / 128)
    assert capacity.experts_touched(spec, 10_000) == pytest.approx(1.0)
    assert capacity.experts_touched(get_spec(MISTRAL), 1) == 1.0
    p1 = capacity.plan(spec, "H100 SXM", weight_dtype="mxfp4", context=2048, batch=1)
    assert p1.fits   # the talk's claim: GPT-OSS-120B with MXFP4 experts fits one 80 GB H100
    assert p1.step_memory_s * p1.bandwidth < p1.weight_bytes / 3
    from helpers.formulas.stepcost import matmul_params

    assert 4e9 < matmul_params(spec) < 6.5e9       # "5.1B active parameters", less embeddings and head


# ----------------------------------------------------------------------------- SLO and ranking

def test_slo_search_finds_the_largest_batch_within_it():
    p, ok = capacity_slo.plan_for_slo(MISTRAL, "H100 SXM", 10, context=4096)
    assert ok and p.step_ms <= 10
    nxt = capacity.plan(MISTRAL, "H100 SXM", context=4096, batch=p.batch + 1)
    assert nxt.step_ms > 10 or not nxt.fits
    slow, ok = capacity_slo.plan_for_slo(MISTRAL, "L4", 10, context=4096)
    assert not ok and slow.batch == 1 and slow.step_ms > 10


def test_rank_orders_by_cost_and_explains_the_rest():
    rows = capacity_ranking.rank(MISTRAL, context=4096, slo_ms=10)
    assert {r["gpu"] for r in rows} == set(gpus.names())
    ok = [r for r in rows if r["status"] == "ok"]
    costs = [r["usd_per_million_tokens"] for r in ok]
    assert costs == sorted(costs) and [r["rank"] for r in ok] == list(range(1, len(ok) + 1))
    assert all(r["step_ms"] <= 10 for r in ok)
    by = {r["gpu"]: r for r in rows}
    assert by["T4"]["status"] == "does not fit" and by["L4"]["status"] == "misses SLO"
    assert rows[-1]["status"] != "ok"
    # The talk's point: the most expensive GPU per hour is not the most expensive per token.
    by20 = {r["gpu"]: r for r in capacity_ranking.rank(MISTRAL, context=4096, slo_ms=20)}
    assert by20["B200"]["usd_per_hour"] > by20["A100 40GB"]["usd_per_hour"]
    assert by20["B200"]["usd_per_million_tokens"] < by20["A100 40GB"]["usd_per_million_tokens"]


def test_rank_with_minimum_batch_and_a_relaxed_slo_changes_the_table():
    strict = capacity_ranking.rank(MISTRAL, context=4096, slo_ms=10)
    relaxed = capacity_ranking.rank(MISTRAL, context=4096, slo_ms=50)
    assert sum(r["status"] == "ok" for r in relaxed) > sum(r["status"] == "ok" for r in strict)
    big = capacity_ranking.rank(MISTRAL, context=4096, min_batch=64)
    by = {r["gpu"]: r for r in big}
    assert by["A100 40GB"]["status"] == "batch too small"
    assert all(r["batch"] >= 64 for r in big if r["status"] == "ok")


def test_rank_frame_is_a_labelled_dataframe():
    df = capacity_views.rank_frame(capacity_ranking.rank(MISTRAL, context=4096, slo_ms=10))
    assert "$ per M output tokens" in df.columns and "ms per token (at efficiency)" in df.columns
    assert "ms per token (datasheet floor)" in df.columns and "price from" in df.columns
    assert len(df) == len(gpus.names())
    text = capacity_views.source_text(MISTRAL, "bf16", "bf16", 1, 4096)
    assert "mistral-7b-v0.1" in text and "prices read" in text


def test_a_model_that_fits_no_gpu_says_which_count_would():
    with pytest.raises(ValueError) as e:
        capacity_ranking.rank("deepseek-v3", context=4096)
    msg = str(e.value)
    assert "fits no catalogued GPU" in msg and "--gpus 8" in msg
    rows = capacity_ranking.rank("deepseek-v3", "fp8", context=4096, gpus=8)
    assert rows[0]["status"] == "ok"


def test_curve_and_triangle():
    df = capacity_views.curve(MISTRAL, ["H100 SXM", "T4"], context=4096)
    h = df[df.gpu == "H100 SXM"]
    assert list(h.batch)[0] == 1 and list(h.batch)[-1] == 115
    assert h.step_ms.is_monotonic_increasing and h.tokens_per_s.is_monotonic_increasing
    assert df[df.gpu == "T4"].empty          # does not fit: no points
    tri = {c["corner"]: c for c in capacity_slo.triangle(MISTRAL, "H100 SXM", context=4096, slo_ms=10)}
    assert tri["latency"]["batch"] == 1 and tri["throughput"]["batch"] == 115
    assert tri["throughput"]["usd_per_million_tokens"] < tri["latency"]["usd_per_million_tokens"]
    assert tri["throughput, less precision"]["max_batch"] > 115
    df = capacity_views.triangle_frame(tri.values())
    assert df.loc["throughput", "$ per M output tokens"] == round(tri["throughput"]["usd_per_million_tokens"], 3)


def test_prefill_bound_by_hand():
    # 100 tokens on an H100 SXM: moving the weights (the embedding by 100 rows) and 100 tokens' K/V takes
    # (14,221,320,192 + 100 × 8,192 + 100 × 131,072) ÷ 3.35e12 = 4.25 ms; the arithmetic, 2 FLOPs per
    # linear weight per token (the lm_head for the last token only) ÷ 989.5e12, about 1.41 ms: memory-bound
    short = capacity.plan(MISTRAL, "H100 SXM", context=8192, prompt_tokens=100)
    assert short.prefill_memory_s == pytest.approx((14_221_320_192 + 100 * 8192 + 100 * 131_072) / 3.35e12, rel=1e-12)
    linear = 6_979_321_856
    assert short.prefill_compute_s == pytest.approx((2 * linear * 100 + 2 * 131_072_000) / 989.5e12, rel=0.01)
    assert short.prefill_bound == "memory" and short.prefill_floor_s == short.prefill_memory_s
    # 6,000 tokens: 2 × 6.98e9 × 6,000 ÷ 989.5e12 ≈ 85 ms of arithmetic against 4.5 ms of bytes: compute-bound
    long = capacity.plan(MISTRAL, "H100 SXM", context=8192, prompt_tokens=6000)
    assert long.prefill_compute_s > 2 * linear * 6000 / 989.5e12
    assert long.prefill_bound == "compute" and long.prefill_floor_s == long.prefill_compute_s
    assert long.prefill_s == pytest.approx(long.prefill_floor_s / 0.5)


def test_triangle_and_curve_follow_the_efficiency():
    # step at batch b = (weights streamed + b × (one embedding row + 4,096 tokens' K/V + the new token's)) ÷ 3.35e12
    # ÷ efficiency ≤ 10 ms: b ≤ (3.35e10 × eff − 14,221,320,192) ÷ 537,010,176 → 35 at 1.0, 4 at 0.5
    per_seq = 4096 * 2 + 4097 * 131_072
    for eff, by_hand in ((1.0, 35), (0.5, 4)):
        assert int((3.35e12 * 0.010 * eff - 14_221_320_192) // per_seq) == by_hand
        tri = capacity_slo.triangle(MISTRAL, "H100 SXM", context=4096, slo_ms=10, efficiency=eff)
        p, ok = capacity_slo.plan_for_slo(MISTRAL, "H100 SXM", 10, context=4096, efficiency=eff)
        assert ok and tri[1]["batch"] == p.batch == by_hand and tri[1]["meets_slo"]
        assert tri[0]["corner"] == "latency"
        assert tri[0]["step_ms"] == capacity.plan(MISTRAL, "H100 SXM", efficiency=eff).step_ms
    curve_1 = capacity_views.curve(MISTRAL, ["H100 SXM"], context=4096, efficiency=1.0)
    curve_half = capacity_views.curve(MISTRAL, ["H100 SXM"], context=4096, efficiency=0.5)
    assert list(curve_half.step_ms) == pytest.approx([2 * x for x in curve_1.step_ms])
    # an SLO below batch 1's step: the SLO row says it misses
    tri = capacity_slo.triangle(MISTRAL, "H100 SXM", context=4096, slo_ms=5, efficiency=0.5)
    assert tri[1]["batch"] == 1 and not tri[1]["meets_slo"]


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs,match", [
    ({"gpu": "H800"}, "unknown GPU 'H800'; choose one of: T4"),
    ({"context": 65536}, "exceeds mistral-7b-v0.1's maximum of 32,768"),
    ({"context": 0}, "context must be a whole number ≥ 1"),
    ({"context": -5}, "context must be a whole number ≥ 1"),
    ({"batch": 0}, "batch must be a whole number ≥ 1"),
    ({"gpus": 0}, "GPU count must be a whole number ≥ 1"),
    ({"weight_dtype": "int3"}, "unknown dtype 'int3'"),
    ({"kv_dtype": "nf4"}, "unknown dtype 'nf4'"),
    ({"prompt_tokens": 5000}, "longer than the context"),
])
def test_bad_input_is_a_value_error_saying_what_is_allowed(kwargs, match):
    args = {"model": MISTRAL, "gpu": "H100 SXM", "context": 4096, **kwargs}
    with pytest.raises(ValueError, match=match):
        capacity.plan(**args)


@pytest.mark.parametrize("slo", [0, -1, float("inf"), "fast"])
def test_bad_slo(slo):
    with pytest.raises(ValueError, match="SLO"):
        capacity_ranking.rank(MISTRAL, slo_ms=slo)


def test_unknown_model_is_a_value_error():
    with pytest.raises(ValueError, match="unknown model"):
        capacity.plan("not-a-model", "H100 SXM")


# ----------------------------------------------------------------------------- prediction against measurement

def test_predict_vs_measure_on_the_tiny_model(tiny):
    r = capacity_measured.predict_vs_measure(tiny, bandwidth=20e9)
    assert r["bandwidth_source"] == "given" and r["profile"] == "tiny"
    from helpers.measure.tensor_bytes import measured_weight_bytes
    from helpers.formulas.stepcost import decode_cost

    # the loaded weights are the bytes helpers.formulas.memory counts; a step reads them but the embedding table
    assert r["loaded_weight_bytes"] == measured_weight_bytes(tiny.model)
    cost = decode_cost(tiny.spec, r["mean_cached_tokens"], 1, "fp32")
    assert r["step_bytes"] == cost.bytes == r["weight_bytes"] + r["kv_bytes"]
    assert r["predicted_step_s"] == pytest.approx(cost.bytes / 20e9)
    assert r["measured_step_s"] > 0 and r["ratio"] == pytest.approx(r["measured_step_s"] / r["predicted_step_s"])
    assert r["measured_p90_s"] >= r["measured_step_s"]
    row = capacity_measured.floor_row(r)
    assert row["measured ÷ floor"] == pytest.approx(r["ratio"]) and row["label"] in ("below", "at", "above")


@pytest.mark.parametrize("reported, name", [("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
                                            ("NVIDIA A100-SXM4-80GB", "A100 80GB"), ("NVIDIA L40S", "L40S"),
                                            ("NVIDIA L4", "L4"), ("Tesla T4", "T4"), ("NVIDIA H200", "H200"),
                                            ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("Some Future GPU", None)])
def test_datasheet_gpu_from_the_name_cuda_reports(reported, name):
    g = gpus.datasheet_gpu("cuda", reported)
    assert (g.name if g else None) == name
    assert gpus.datasheet_gpu("cpu", reported) is None


def test_predict_vs_measure_with_the_measured_bandwidth(tiny):
    pytest.importorskip("helpers.measure.microbench", reason="helpers.measure.microbench (notebook 03) is not in this tree yet")
    r = capacity_measured.predict_vs_measure(tiny)
    assert r["bandwidth_source"].startswith("measured") and r["bandwidth"] > 1e8
    assert math.isfinite(r["ratio"]) and r["ratio"] > 0


def test_usable_bytes_is_the_reserve_every_notebook_counts():
    from helpers.formulas.memory import runtime_reserve_bytes

    assert 80e9 - runtime_reserve_bytes(80e9) == pytest.approx(0.92 * 80e9 - 1.5e9)   # 72.1 GB
    assert 16e9 - runtime_reserve_bytes(16e9) == pytest.approx(13.22e9)              # a T4: less than 14.48 GB of weights


# ----------------------------------------------------------------------------- hostile input (issue 20)

@pytest.mark.parametrize("kw, needle", [
    ({"context": math.inf}, "context"), ({"context": math.nan}, "context"), ({"batch": math.inf}, "batch"),
    ({"utilization": None}, "utilization"), ({"utilization": "0.9"}, "utilization"),
    ({"overhead_bytes": math.inf}, "overhead_bytes"), ({"overhead_bytes": "1"}, "overhead_bytes"),
    ({"pipeline_stages": 33}, "32 layers"),
])
def test_plan_refuses_non_finite_wrong_typed_and_impossible_values(kw, needle):
    with pytest.raises(ValueError, match=needle):   # not OverflowError/TypeError from inside
        capacity.plan(MISTRAL, "H100 SXM", **{"context": 4096, "batch": 1, **kw})


def test_slo_and_views_refuse_bool_text_and_infinite_values():
    for bad in (True, "8", math.inf, math.nan):
        with pytest.raises(ValueError, match="SLO"):
            capacity_slo.plan_for_slo(MISTRAL, "H100 SXM", bad)
        with pytest.raises(ValueError, match="SLO"):
            capacity_slo.triangle(MISTRAL, slo_ms=bad)
    assert capacity_views.batch_points(0) == [] and capacity_views.batch_points(5) == [1, 2, 4, 5]
    with pytest.raises(ValueError, match="prompt tokens"):
        capacity_ranking.rank_requests(MISTRAL, "1000", 100)


def test_planner_inputs_refuse_fractions_and_infinities():
    from helpers.capacity.inputs import check

    good = ("", MISTRAL, "bf16", "bf16", 4096, 10, 1, "2")
    assert check(*good).gpus == 2
    for i, bad in ((4, 4096.5), (4, math.inf), (7, 1.5), (7, math.inf), (7, "٢"), (5, "abc")):
        values = list(good)
        values[i] = bad
        with pytest.raises(ValueError):               # was truncated to 4096 / 1, or OverflowError
            check(*values)
