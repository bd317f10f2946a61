"""helpers.formulas.roofline: the arithmetic against hand-worked cases, with the FLOPs and bytes of
helpers.formulas.stepcost; helpers.measure.microbench: the microbenchmarks against known sizes;
helpers.decoding.regimes: decode steps against their floor; helpers.present.roofline_figures."""
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.formulas import regime, roofline, stepcost
from helpers.decoding import regimes
from helpers.measure import local_models, microbench
from helpers.present import roofline_figures
from helpers.formulas.specs import get_spec

H100_BF16 = 989e12   # FLOP/s, dense bf16, NVIDIA H100 SXM datasheet
H100_BW = 3.35e12    # B/s, HBM3, same datasheet


# ----------------------------------------------------------------------------- the roofline, by hand

def test_h100_ridge_point():
    assert roofline.ridge_point(H100_BF16, H100_BW) == pytest.approx(295.22, abs=0.01)


@pytest.mark.parametrize("bytes_per_param, expected", [(2, 295.22), (4, 590.45), (1, 147.61), (0.5, 73.81)])
def test_crossover_batch_scales_with_bytes_per_parameter(bytes_per_param, expected):
    # intensity of decode at batch B ≈ 2B / bytes_per_param; equal to the ridge at B = ridge × bytes / 2
    assert roofline.crossover_batch(H100_BF16, H100_BW, bytes_per_param) == pytest.approx(expected, abs=0.01)


def test_attainable_is_the_lower_roof():
    assert roofline.attainable_flops(10, H100_BF16, H100_BW) == pytest.approx(33.5e12)   # 10 FLOP/B × 3.35 TB/s
    assert roofline.attainable_flops(1000, H100_BF16, H100_BW) == H100_BF16
    assert roofline.attainable_flops(roofline.ridge_point(H100_BF16, H100_BW), H100_BF16, H100_BW) == pytest.approx(
        H100_BF16)


def test_a_step_against_its_floor_is_the_one_ratio():
    assert regime.ratio(0.004, 0.016) == 0.25          # floor ÷ measured: the share of the floor achieved


def test_mistral_decode_floor_on_h100():
    # weights read: every parameter but the 32,000 × 4,096 input table, of which one row (4,096 values);
    # (14,221,328,384 B + 4,096 tokens × 131,072 B of cache) / 3.35e12 B/s = 4.4054 ms
    weights = stepcost.decode_cost(get_spec("mistral-7b-v0.1"), 0, 1, "bf16").weight_read_bytes
    assert weights == (7_241_732_096 - 32_000 * 4096 + 4096) * 2 == 14_221_328_384
    floor = roofline.decode_floor_s(weights, 4096 * 131_072, H100_BW)
    assert floor == pytest.approx((14_221_328_384 + 536_870_912) / 3.35e12)
    assert floor == pytest.approx(4.4054e-3, rel=1e-4)


# ----------------------------------------------------------------------------- FLOPs and bytes of a model

def test_mistral_matmul_params_by_hand():
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336   # q, o; k, v (8 KV heads × 128); gate, up, down
    assert stepcost.matmul_params(get_spec("mistral-7b-v0.1")) == 32 * per_layer == 6_979_321_856


def test_mistral_decode_flops_by_hand():
    # one token at 4,096 cached tokens: 2 × linear + 4 × 32 heads × 128 × 32 layers × 4,096 keys (window 4,096)
    # + 2 × 4,096 × 32,000 for the logits
    m = get_spec("mistral-7b-v0.1")
    expected = 2 * 6_979_321_856 + 4 * 32 * 128 * 32 * 4096 + 2 * 4096 * 32000
    assert stepcost.forward_cost(m, 1, 4096).flops == expected == 16_368_271_360
    assert stepcost.forward_cost(m, 1, 4096, batch=8).flops == 8 * expected


def test_attended_keys_by_hand_and_against_a_loop():
    m = get_spec("mistral-7b-v0.1")  # window 4,096 on all 32 layers
    assert stepcost.attended_keys(m, 4) == 32 * (1 + 2 + 3 + 4)
    assert stepcost.attended_keys(m, 3, 4094) == 32 * (4095 + 4096 + 4096)
    for window in (None, 1, 5, 16):
        for past in (0, 3, 20):
            for new in (1, 7, 30):
                loop = sum(min(past + i, window) if window else past + i for i in range(1, new + 1))
                assert stepcost._keys_in_span(past + 1, past + new, window) == loop


def test_prefill_flops_of_the_tiny_model(tiny_config):
    # tiny: 4 layers, hidden 256, 8 heads × 32, 2 KV heads, MLP 896, vocab 32,000, no window
    linear = 4 * (2 * 256 * 256 + 2 * 256 * 64 + 3 * 256 * 896)
    n = 100
    expected = 2 * linear * n + 4 * 8 * 32 * 4 * (n * (n + 1) // 2) + 2 * 256 * 32000
    assert stepcost.forward_cost(tiny_config, n).flops == expected


def test_forward_cost_bytes_of_decode_read_weights_and_cache():
    m = get_spec("mistral-7b-v0.1")
    weights = stepcost.decode_cost(m, 0, 1, "bf16").weight_read_bytes
    # 1,000 cached tokens read + 1 new token's K/V written, per sequence; weights once for the batch,
    # the input embedding by the rows of the batch's tokens (4,096 bf16 values each)
    assert stepcost.forward_cost(m, 1, 1000).bytes == weights + 1001 * 131_072
    assert stepcost.forward_cost(m, 1, 1000, batch=4).bytes == weights + 3 * 4096 * 2 + 4 * 1001 * 131_072


def test_tied_embeddings_are_streamed_in_full():
    cfg = {**get_spec("mistral-7b-v0.1").config, "tie_word_embeddings": True}
    from helpers.formulas.specs import param_count

    assert stepcost.decode_cost(cfg, 0, 1, "bf16").weight_read_bytes == 2 * param_count(cfg)


def test_decode_intensity_reaches_the_ridge_near_the_crossover_batch():
    """The crossover batch's claim, checked with the full FLOP and byte counts at a short context."""
    m = get_spec("mistral-7b-v0.1")
    b = round(roofline.crossover_batch(H100_BF16, H100_BW, 2))
    step = stepcost.forward_cost(m, 1, 16, b)
    intensity = regime.ratio(step.flops, step.bytes)
    assert intensity == pytest.approx(roofline.ridge_point(H100_BF16, H100_BW), rel=0.1)
    one = stepcost.forward_cost(m, 1, 16).intensity
    assert 0.9 < one < 1.1  # batch 1 in bf16: about 1 FLOP per byte


def test_roofline_points():
    m = get_spec("mistral-7b-v0.1")
    p = roofline.decode_point(m, 4096, 0.02, "bf16")
    assert p.kind == "decode" and p.tokens == 1
    assert p.intensity == pytest.approx(16_368_271_360 / stepcost.forward_cost(m, 1, 4096).bytes)
    assert p.achieved_flops == pytest.approx(16_368_271_360 / 0.02)
    ridge = roofline.ridge_point(H100_BF16, H100_BW)
    assert p.intensity < ridge and 0 < p.achieved_flops / roofline.attainable_flops(p.intensity, H100_BF16, H100_BW) < 1
    assert roofline.prefill_point(m, 8192, 0.1, "bf16").intensity >= ridge          # compute-bound
    assert roofline.decode_point(m, 10, 0.01, "bf16", batch=4).kind == "decode, batched"


# ----------------------------------------------------------------------------- microbenchmarks

def test_copy_benchmark_counts_read_and_write_of_a_known_size():
    nbytes = 8 * 2**20
    b = microbench.copy_benchmark("cpu", nbytes=nbytes, repeats=3)
    assert b.nbytes == nbytes and b.bytes_moved == 2 * nbytes and b.iters == 1
    assert len(b.stats.samples) == 3
    assert b.bandwidth == pytest.approx(2 * nbytes / b.stats.min)
    assert 1e8 < b.bandwidth < 1e13  # 0.1 GB/s .. 10 TB/s: anything else is a units error


def test_bandwidth_agrees_with_an_independent_copy():
    """torch's copy and numpy's copyto of the same 64 MiB, best of 5 each, agree in order of magnitude
    (a factor of 8 leaves room for threading differences and a busy machine; a units slip is 1000×)."""
    nbytes = 64 * 2**20
    bw = microbench.copy_benchmark("cpu", nbytes=nbytes, repeats=5).bandwidth
    src, dst = np.ones(nbytes, dtype=np.uint8), np.zeros(nbytes, dtype=np.uint8)
    np.copyto(dst, src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(5))
    assert 1 / 8 < bw / (2 * nbytes / best) < 8


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def test_read_benchmark_counts_bytes_read():
    b = microbench.read_benchmark("cpu", nbytes=8 * 2**20 + 3, repeats=2)
    assert b.nbytes == b.bytes_moved == 8 * 2**20   # whole fp32 elements only
    assert b.bandwidth == pytest.approx(8 * 2**20 / b.stats.min)
    assert 1e8 < b.bandwidth < 1e13


def test_matmul_benchmark_counts_two_n_cubed():
    b = microbench.matmul_benchmark("cpu", "fp32", n=256, repeats=3)
    assert b.flops_per_matmul == 2 * 256**3
    assert b.flops_per_s == pytest.approx(2 * 256**3 / b.stats.min)
    assert 1e8 < b.flops_per_s < 1e15


def test_matmul_benchmark_rejects_a_dtype_it_does_not_cover():
    with pytest.raises(ValueError, match="dtype"):
        microbench.matmul_benchmark("cpu", "fp8")


# ----------------------------------------------------------------------------- decode efficiency

def test_efficiency_table_with_the_probe_and_the_loaded_model(tiny):
    df = regimes.efficiency_table(["probe"], "cpu", "fp32", bandwidth=2e10, context=16, steps=3, extra=[tiny])
    assert list(df["model"]) == ["probe", "tiny (loaded)"]
    row = df.iloc[1]
    assert row["weight_bytes_read"] == stepcost.decode_cost(tiny.spec, 0, 1, "fp32").weight_read_bytes
    assert row["kv_bytes_read"] == 16 * 2048                 # 16 cached tokens × 2,048 B (fp32), and 1 written
    assert row["step_bytes"] == row["weight_bytes_read"] + 17 * 2048
    assert row["floor_s"] == pytest.approx(row["step_bytes"] / 2e10)
    assert row["efficiency"] == pytest.approx(row["floor_s"] / row["step_s"])
    table = roofline_figures.efficiency_frame(df, 2e10)
    assert list(table["floor_s"]) == pytest.approx(list(df["floor_s"]))
    assert table["probe ÷ step"].iloc[1] == pytest.approx(df.iloc[0]["step_s"] / row["step_s"])
    fig = roofline_figures.efficiency_figure(table, "test")
    assert len(fig.axes) == 1


def test_the_overhead_probe_has_the_loaded_models_layer_count(tiny_config):
    from types import SimpleNamespace

    from helpers.formulas.specs import param_breakdown, spec_from_config

    assert regimes.size_config("probe")["hidden_size"] == 16
    cfg = {**tiny_config, "num_hidden_layers": 6, "hidden_size": 64, "intermediate_size": 128,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512}
    six = SimpleNamespace(profile="six", model=local_models.tiny_model(cfg), config=cfg, dtype="fp32", device="cpu")
    df = regimes.efficiency_table(["probe"], "cpu", "fp32", bandwidth=2e10, context=8, steps=2, extra=[six])
    probe = df[df["model"] == "probe"].iloc[0]
    # the probe built has six layers: its parameters, counted by helpers.formulas.specs from its config
    assert probe["params"] == param_breakdown(spec_from_config(regimes.size_config("probe") | {"num_hidden_layers": 6}, "probe")).total
    assert probe["params"] != param_breakdown(spec_from_config(regimes.size_config("probe"), "probe")).total


def test_roofline_figure_draws(tiny):
    m = tiny.spec
    pts = [roofline.prefill_point(m, 64, 0.01, "fp32"), roofline.decode_point(m, 64, 0.004, "fp32")]
    fig = roofline_figures.roofline_figure(1e11, 3e10, pts, tiny, "fp32")
    assert fig.axes[0].get_xscale() == "log"
