"""One decode-step model and one memory budget, used everywhere: helpers.formulas.stepcost against hand-worked
bytes and FLOPs; notebook 03's floor, notebook 04's planner at full bandwidth and `make bench`
agreeing to the byte; notebook 02's users and the planner's batch from the same budget; the
planner's new fields (step floor against step at an efficiency, cost per request, providers,
memory as the device reports it) against hand-worked values."""
import dataclasses
import json
import sys

import pytest

from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import roofline_bench  # noqa: E402  (scripts/roofline_bench.py)
from cli_run import in_process as _cli, python_m
from helpers import capacity
from helpers.formulas import gpus, memory, roofline, stepcost
from helpers.capacity import ranking as capacity_ranking, slo as capacity_slo
from helpers.measure.local_models import TINY_CONFIG
from helpers.formulas.specs import get_spec, spec_from_config

MISTRAL = "mistral-7b-v0.1"
W_BF16 = 14_483_464_192                      # 7,241,732,096 parameters × 2 B
TABLE = 32_000 * 4096 * 2                    # Mistral's input embedding table, bf16


# ----------------------------------------------------------------------------- hand-worked

def test_mistral_decode_step_by_hand():
    c = stepcost.decode_cost(MISTRAL, 4096, 1, "bf16")
    assert c.weight_bytes == W_BF16 - TABLE == 14_221_320_192       # every weight but the input table
    assert c.embedding_bytes == 4096 * 2                             # one row of it, the new token's
    assert c.kv_read_bytes == 4096 * 131_072                         # 4,096 cached tokens
    assert c.kv_write_bytes == 131_072                               # the new token's K/V
    assert c.bytes == 14_758_330_368
    # 2 × 6,979,321,856 linear weights + 4 × 32 heads × 128 × 32 layers × 4,096 keys + 2 × 4,096 × 32,000
    assert c.flops == 2 * 6_979_321_856 + 4 * 32 * 128 * 32 * 4096 + 2 * 4096 * 32000 == 16_368_271_360
    assert c.intensity == pytest.approx(1.109, abs=1e-3)


def test_batch_shares_the_weights_but_not_the_cache_or_the_rows():
    one, eight = stepcost.decode_cost(MISTRAL, 1000, 1), stepcost.decode_cost(MISTRAL, 1000, 8)
    assert eight.weight_bytes == one.weight_bytes
    assert eight.embedding_bytes == 8 * one.embedding_bytes
    assert eight.kv_bytes == 8 * one.kv_bytes and eight.flops == 8 * one.flops


def test_tied_head_is_read_in_full_and_no_rows_added():
    cfg = {**get_spec(MISTRAL).config, "tie_word_embeddings": True}
    c = stepcost.decode_cost(cfg, 16)
    from helpers.formulas.specs import param_count

    assert c.weight_bytes == 2 * param_count(cfg) and c.embedding_bytes == 0


def test_moe_reads_only_the_experts_touched():
    spec = get_spec("gpt-oss-120b")                       # 128 experts, 4 per token
    assert stepcost.experts_touched(spec, 1) == pytest.approx(4 / 128)
    assert stepcost.experts_touched(spec, 8) == pytest.approx(1 - (124 / 128) ** 8)
    experts = stepcost.expert_bytes(spec, "mxfp4")
    full = memory.weight_bytes(spec, "mxfp4").bytes
    c = stepcost.decode_cost(spec, 1, 1, "mxfp4")
    table = spec.vocab_size * spec.hidden_size * 2         # untied, bf16 under mxfp4
    assert c.weight_bytes == round(full - table - experts * (1 - 4 / 128))
    # a batch of 512 touches nearly every expert: close to every weight
    assert stepcost.decode_cost(spec, 1, 512, "mxfp4").weight_bytes == pytest.approx(full - table, rel=1e-6)


def test_sliding_window_caps_the_cache_read():
    # Mistral 7B v0.1 slides a 4,096-token window on every layer: 16k cached tokens read as 4k
    assert stepcost.decode_cost(MISTRAL, 16384).kv_read_bytes == 4096 * 131_072


def test_mla_flops_as_transformers_computes_them_and_absorbed():
    spec = get_spec("deepseek-v2-lite")      # 16 heads; qk_nope 128, qk_rope 64, v 128; kv_lora_rank 512
    assert stepcost.attention_flops_per_key(spec) == 16 * (2 * (128 + 64) + 2 * 128)
    assert stepcost.attention_flops_per_key(spec, mla_absorbed=True) == 16 * (2 * (512 + 64) + 2 * 512)


@pytest.mark.parametrize("kwargs", [{"weights": "int3"}])
def test_bad_input(kwargs):
    with pytest.raises(ValueError):
        stepcost.forward_cost(MISTRAL, **kwargs)


# ----------------------------------------------------------------------------- the agreement

CASES = [(spec_from_config(TINY_CONFIG, "tiny"), "bf16"), (get_spec(MISTRAL), "bf16"),
         (get_spec("llama-3.1-8b"), "bf16"), (get_spec("gpt-oss-120b"), "mxfp4"),
         (get_spec("deepseek-v2-lite"), "bf16")]


@pytest.mark.parametrize("spec,dtype", CASES, ids=lambda x: getattr(x, "name", x))
@pytest.mark.parametrize("batch", [1, 8, 32])
def test_notebook_03_floor_planner_and_bench_agree_to_the_byte(spec, dtype, batch):
    context, bw = 1024, 5.3e12
    gpu = gpus.get_gpu("MI300X")
    floor_03 = stepcost.decode_cost(spec, context, batch, dtype).bytes
    assert floor_03 == stepcost.forward_cost(spec, 1, context, batch, dtype).bytes
    p = capacity.plan(spec, gpu, context=context, batch=batch, weight_dtype=dtype, kv_dtype="bf16", efficiency=1.0)
    assert p.fits
    assert p.step_bytes_per_gpu == floor_03                          # the planner's step, to the byte
    assert p.step_memory_s * gpu.bandwidth == pytest.approx(floor_03, rel=1e-12)
    if batch == 1:                                                   # `make bench` measures batch 1
        fig = roofline_bench.decode_floor_figures(spec, dtype, context, bw)
        assert fig["decode_step_bytes"] == floor_03
        assert fig["decode_floor_s"] == pytest.approx(floor_03 / bw, rel=1e-12)


def test_the_tiny_model_gets_one_floor_in_03_and_04():
    """The issue's case: the same tiny model on the same CPU got 2.58 ms in 03 and 4.42 ms in 04."""
    spec, bw = spec_from_config(TINY_CONFIG, "tiny"), 10e9
    row_03 = roofline.decode_floor_s(*(lambda c: (c.weight_read_bytes, c.kv_bytes))(
        stepcost.decode_cost(spec, 64, 1, "fp32")), bw)
    assert row_03 == pytest.approx(stepcost.decode_cost(spec, 64, 1, "fp32").bytes / bw)


# ----------------------------------------------------------------------------- the memory budget

def test_notebook_02_users_and_the_planner_batch_come_from_one_budget():
    w, kv = memory.weight_bytes(MISTRAL, "bf16").bytes, memory.kv_bytes_per_token(MISTRAL, "bf16")
    # an 80·10⁹ B GPU, 8 % kept back (vLLM 0.32's 0.92), plus the 1.5 GB overhead
    reserve = memory.runtime_reserve_bytes(80e9)
    assert reserve == pytest.approx(7.9e9)
    users = memory.max_users(80e9, w, reserve, kv, 4096)
    # ⌊(80e9 − 14,483,464,192 − 7.9e9) / (131,072 × 4,096)⌋ = ⌊107.3⌋
    assert users == (80_000_000_000 - W_BF16 - 7_900_000_000) // (131_072 * 4096) == 107
    eighty = dataclasses.replace(gpus.get_gpu("H100 SXM"), memory_reported_gib=80e9 / 2**30)   # 80e9 B exactly
    assert eighty.usable_memory_bytes == pytest.approx(80e9, abs=1e-3)
    assert capacity.plan(MISTRAL, eighty, context=4096).max_batch == users
    # The same function on the memory an H100 reports (79.11 GiB) gives 115
    h100 = gpus.get_gpu("H100 SXM").usable_memory_bytes
    assert memory.max_users(h100, w, memory.runtime_reserve_bytes(h100), kv, 4096) == 115
    assert capacity.plan(MISTRAL, "H100 SXM", context=4096).max_batch == 115


def test_reserve_rejects_bad_input():
    with pytest.raises(ValueError, match="utilization"):
        memory.runtime_reserve_bytes(80e9, 1.5)
    with pytest.raises(ValueError, match="GPU memory"):
        memory.runtime_reserve_bytes(-1)


def test_memory_as_the_device_reports_it():
    h100, h200, l4 = gpus.get_gpu("H100 SXM"), gpus.get_gpu("H200"), gpus.get_gpu("L4")
    assert h100.usable_memory_bytes == 79.11 * 2**30 and h100.usable_memory_bytes > 80e9
    assert h200.usable_memory_bytes == 139.81 * 2**30 > 141e9     # "about 139 GiB, more than 141·10⁹ B"
    # the L4 has no reported figure: its label in GiB × the T4's reported share (14.75 of 16 GiB), GDDR6 both
    assert l4.usable_memory_bytes == pytest.approx(24 * 14.75 / 16 * 2**30) and "no reported figure" in l4.usable_memory_note
    names = set(gpus.names())
    for name, gib, source in ((g.name, g.memory_reported_gib, g.memory_source) for g in gpus.catalog() if g.memory_reported_gib):
        assert name in names and source.startswith("https://")
        assert 0.85 < gib * 2**30 / (gpus.get_gpu(name).memory_gb * 1e9) < 1.1   # near the label


# ----------------------------------------------------------------------------- the planner's new fields

def test_step_floor_and_step_at_an_efficiency():
    floor = capacity.plan(MISTRAL, "H100 SXM", context=4096, efficiency=1.0)
    at = capacity.plan(MISTRAL, "H100 SXM", context=4096, efficiency=0.8)
    assert at.step_floor_s == floor.step_floor_s == floor.step_s == pytest.approx(14_758_330_368 / 3.35e12)
    assert at.step_s == pytest.approx(floor.step_s / 0.8)
    assert at.usd_per_million_tokens == pytest.approx(floor.usd_per_million_tokens / 0.8)
    with pytest.raises(ValueError, match="efficiency"):
        capacity.plan(MISTRAL, "H100 SXM", efficiency=1.2)
    # the SLO search uses the step at the efficiency: a tighter budget per token, a smaller batch
    fast, _ = capacity_slo.plan_for_slo(MISTRAL, "H100 SXM", 10, context=4096, efficiency=1.0)
    slow, _ = capacity_slo.plan_for_slo(MISTRAL, "H100 SXM", 10, context=4096, efficiency=0.5)
    assert slow.batch < fast.batch and slow.step_ms <= 10


def test_cost_of_a_request_by_hand():
    p = capacity.plan(MISTRAL, "H100 SXM", context=4096, batch=1, prompt_tokens=1000, output_tokens=200,
                      efficiency=1.0)
    # prefill of 1,000 tokens, compute-bound: (2 × 6,979,321,856 × 1,000 + 4 × 32 × 128 × 32 × 500,500
    #   + 2 × 4,096 × 32,000) FLOPs ÷ 989.5e12 = 14.372 ms
    prefill_flops = 2 * 6_979_321_856 * 1000 + 4 * 32 * 128 * 32 * (1000 * 1001 // 2) + 2 * 4096 * 32000
    assert prefill_flops == 14_221_312_000_000
    assert p.request_prefill_s == pytest.approx(prefill_flops / 989.5e12) == pytest.approx(0.014372, abs=1e-6)
    # 200 decode steps at the mean context 1,100, memory-bound at batch 1:
    #   (14,221,320,192 + 8,192 + 1,101 × 131,072) B ÷ 3.35e12 B/s = 4.2883 ms each
    step = (W_BF16 - TABLE + 8192 + 1101 * 131_072) / 3.35e12
    assert p.request_decode_s == pytest.approx(200 * step) == pytest.approx(0.85765, abs=1e-5)
    usd_per_s = 3.49 / 3600
    assert p.usd_per_request == pytest.approx(usd_per_s * (p.request_prefill_s + 200 * step))
    assert p.usd_per_million_input_tokens == pytest.approx(0.013933, abs=1e-6)      # $ per M prompt tokens
    assert p.usd_per_million_output_tokens == pytest.approx(4.1572, abs=1e-4)       # decode at 1,100 tokens
    assert p.usd_per_million_tokens == pytest.approx(4.2709, abs=1e-4)              # decode-only, at 4,096
    # a batch of 32 shares each decode step: the output tokens' share of the GPU is 32× smaller
    b32 = capacity.plan(MISTRAL, "H100 SXM", context=4096, batch=32, prompt_tokens=1000, output_tokens=200,
                        efficiency=1.0)
    assert b32.request_decode_s < p.request_decode_s / 20 and b32.request_prefill_s == p.request_prefill_s
    with pytest.raises(ValueError, match="exceed the context"):
        capacity.plan(MISTRAL, "H100 SXM", context=1024, prompt_tokens=1000, output_tokens=200)


def test_providers_are_shown_and_a_ranking_lists_those_it_mixes():
    rows = capacity_ranking.rank(MISTRAL, context=4096, slo_ms=20)
    assert all(r["provider"] == gpus.get_gpu(r["gpu"]).price_provider for r in rows)
    assert capacity_ranking.providers_of(rows) == list(dict.fromkeys(r["provider"] for r in rows)) and \
        len(capacity_ranking.providers_of(rows)) == len(gpus.providers())
    runpod = capacity_ranking.rank(MISTRAL, context=4096, slo_ms=20, provider="runpod")
    assert runpod and {r["provider"] for r in runpod} == {"RunPod"}
    assert capacity_ranking.providers_of(runpod) == ["RunPod"]
    with pytest.raises(ValueError, match="prices come from"):
        capacity_ranking.rank(MISTRAL, context=4096, provider="nobody")


def test_request_ranking_orders_by_cost_per_request():
    rows = capacity_ranking.rank(MISTRAL, context=4096, slo_ms=20, prompt_tokens=1000, output_tokens=200)
    ok = [r["usd_per_request"] for r in rows if r["status"] == "ok"]
    assert ok == sorted(ok) and all(x > 0 for x in ok)


# ----------------------------------------------------------------------------- the command line

def test_cli_new_options_and_json_keys():
    r = _cli("capacity", "--model", MISTRAL, "--gpu", "H100 SXM", "--context", "4096", "--batch", "8",
             "--prompt-tokens", "1000", "--output-tokens", "200", "--efficiency", "0.7", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    old = {"model", "gpu", "fits", "max_batch", "step_ms", "step_s", "step_memory_s", "step_compute_s", "bound",
           "prefill_ms", "tokens_per_s", "usd_per_million_tokens", "usd_per_hour_total", "memory_bytes_per_gpu"}
    new = {"step_floor_ms", "efficiency", "efficiency_source", "usd_per_request", "usd_per_million_input_tokens",
           "usd_per_million_output_tokens", "provider", "memory_source", "step_bytes_per_gpu"}
    assert old | new <= set(d)
    assert d["efficiency"] == 0.7 and d["step_ms"] == pytest.approx(d["step_floor_ms"] / 0.7)
    text = _cli("capacity", "--model", MISTRAL, "--gpu", "all", "--context", "4096", "--slo-ms", "20",
                "--provider", "RunPod", "--output-tokens", "100", "--prompt-tokens", "500")
    assert text.returncode == 0, text.stderr
    assert "['RunPod']" in text.stdout and "$ per request" in text.stdout and "$ per M input tokens" in text.stdout


@pytest.mark.parametrize("args,match", [(["--efficiency", "1.5"], "efficiency"),
                                        (["--output-tokens", "5000"], "exceed"),
                                        (["--gpu", "all", "--provider", "nobody"], "prices come from")])
def test_cli_bad_new_options_exit_2(args, match):
    base = ["capacity", "--model", MISTRAL, "--gpu", "H100 SXM", "--context", "4096", "--batch", "1"]
    if "--gpu" in args:
        base = base[:3] + base[5:]
    r = _cli(*base, *args)
    assert r.returncode == 2 and match in r.stderr


def test_help_describes_the_new_options():  # the real process, once; the rest in-process
    r = python_m("capacity", "--help")
    for opt in ("--efficiency", "--output-tokens", "--prompt-tokens", "--provider", "Databricks"):
        assert opt in r.stdout
