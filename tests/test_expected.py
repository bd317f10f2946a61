"""helpers.present.on_gpu and helpers.formulas.compute_share's attention shares: the figures the notebooks' 'what you should see' notes and conclusions quote,
against hand-worked values from published configs and datasheets."""
import math

import pytest

from helpers.formulas import compute_share
from helpers.present import expected, on_gpu
from helpers.measure.local_models import TINY_CONFIG
from helpers.formulas.stepcost import forward_cost
from helpers.formulas.specs import spec_from_config

from helpers.measure.sweeps import sweep_sizes  # noqa: E402

GPU_SIZES = sweep_sizes("mistral-7b", "cuda")   # notebook 01's sizes on a GPU

MISTRAL_PARAMS = 7_241_732_096                    # published parameter count (talk outline, helpers tests)
MISTRAL_EMBED_AND_HEAD = 2 * 32000 * 4096          # untied input embedding and output head
MISTRAL_NORMS = (2 * 32 + 1) * 4096                # two RMSNorms per layer and the final one
H100_BANDWIDTH = 3.35e12                           # NVIDIA H100 SXM datasheet, B/s
MISTRAL_BF16_BYTES = 14_483_464_192                # 7,241,732,096 × 2
MISTRAL_STREAMED = 14_221_320_192                  # less the 32,000 × 4,096 × 2 B embedding table, read by rows
ROW = 4096 * 2                                     # one embedding row, bf16


def _tiny_linear_params():
    c = TINY_CONFIG
    h, hd = c["hidden_size"], c["head_dim"]
    attn = h * c["num_attention_heads"] * hd * 2 + h * c["num_key_value_heads"] * hd * 2
    mlp = 3 * h * c["intermediate_size"]
    return c["num_hidden_layers"] * (attn + mlp)


def test_flop_terms_sum_to_forward_flops():
    for model in ("mistral-7b-v0.1", "llama-3.1-8b", "deepseek-v3"):
        for n in (1, 100, 5000):
            assert compute_share.flop_terms(model, n).total == forward_cost(model, n).flops


def test_attention_reaches_the_matmuls_near_53k_for_mistral_shape():
    """By hand: prefill attention 4·L·H·hd·n(n+1)/2 ≥ 2·P·n  ⇔  n + 1 ≥ P / (L·H·hd)."""
    p = MISTRAL_PARAMS - MISTRAL_EMBED_AND_HEAD - MISTRAL_NORMS
    n = math.ceil(p / (32 * 32 * 128)) - 1
    assert n == 53_247
    assert compute_share.attention_crossover("mistral-7b-v0.3") == n   # no window: beyond its 32k context
    assert compute_share.attention_crossover("llama-3.1-8b") == n      # same layer shapes, 128k context
    assert compute_share.attention_crossover("mistral-7b-v0.1") is None  # the 4,096-token window caps it


def test_attention_parity_for_the_tiny_model_by_hand():
    n = math.ceil(_tiny_linear_params() / (4 * 8 * 32)) - 1
    assert n == 3_327
    assert compute_share.attention_crossover(spec_from_config(TINY_CONFIG, "tiny")) == n


def test_attention_share_rows_fall_with_width():
    table = compute_share.attention_share_frame(extra={"tiny": spec_from_config(TINY_CONFIG, "tiny")}).set_index("model")
    share, long = table["attention share at 2,048 (%)"], table["attention share at 32,768 (%)"]
    assert share["tiny"] > 10 * share["mistral-7b-v0.3"]
    assert table.loc["mistral-7b-v0.1", "attention = matmuls at (tokens)"] == "never"
    assert not table.loc["mistral-7b-v0.3", "within its context"] and table.loc["llama-3.1-8b", "within its context"]
    # v0.1 and v0.3 agree below the window and part beyond it
    assert share["mistral-7b-v0.1"] == share["mistral-7b-v0.3"] and long["mistral-7b-v0.1"] < long["mistral-7b-v0.3"]


def test_gpu_expectations_by_hand():
    e = on_gpu.gpu_expectations(GPU_SIZES)
    assert e["gpu"] == "H100 SXM" and e["bandwidth"] == H100_BANDWIDTH and e["weight_bytes"] == MISTRAL_BF16_BYTES
    assert e["kv_bytes_per_token"] == 131_072
    # 128 tokens: memory-bound, read the weights once (the embedding by the 128 rows used) and write 128 tokens' K/V
    assert math.isclose(e["ttft_floors_s"][128], (MISTRAL_STREAMED + 128 * ROW + 128 * 131_072) / H100_BANDWIDTH,
                        rel_tol=1e-9)
    # decode at 16,384 tokens of context: weights + one row + a cache capped at the window + the new token's K/V
    assert math.isclose(on_gpu.gpu_plan(context=16384).step_floor_s,
                        (MISTRAL_STREAMED + ROW + 4096 * 131_072 + 131_072) / H100_BANDWIDTH, rel_tol=1e-3)
    # the whole memory the H100 reports to CUDA (79.11 GiB, labelled 80 GB) beside the weights, 1,024-token sequences
    assert e["memory_bytes"] == 79.11 * 2**30
    assert e["users_fit"] == int((79.11 * 2**30 - MISTRAL_BF16_BYTES) // (1024 * 131_072)) == 524
    assert e["users_cache_oom_at"] == 1024        # the doubling sweep's first batch past the cache alone
    # 512 sequences: weights + 512 × 1,024 × 131,072 B of cache + one MLP activation 512 × 1,024 × 14,336 × 2 B
    need = MISTRAL_BF16_BYTES + 512 * 1024 * 131_072 + 512 * 1024 * 14_336 * 2
    assert need > 79.11 * 2**30 and e["users_oom_at"] == 512
    assert MISTRAL_BF16_BYTES + 256 * 1024 * (131_072 + 14_336 * 2) < 79.11 * 2**30     # 256 fits: 512 is the first
    steps = [on_gpu.gpu_plan(context=1024, batch=b).step_floor_s for b in (1, 8, 64)]
    assert steps[0] < steps[1] < steps[2] < 2 * steps[0]


def test_quantized_decode_floors_by_hand():
    rows = on_gpu.quantized_decode_floors().set_index("scheme")
    kv = 1024 * 131_072
    assert math.isclose(rows.at["bf16", "step floor (ms)"], (MISTRAL_STREAMED + ROW + kv + 131_072) / H100_BANDWIDTH * 1e3,
                        rel_tol=1e-9)
    # nf4 keeps the embedding in bf16 (not quantized): the step reads the quantized rest and one bf16 row
    assert rows.at["nf4", "step floor (ms)"] < rows.at["bf16", "step floor (ms)"] / 3
    assert rows.at["bf16", "vs bf16 (×)"] == 1.0 and 3 < rows.at["nf4", "vs bf16 (×)"] < 3.5
    assert (rows["bound"] == "memory").all()


def test_gpu_plan_step_floor_by_hand():
    """Notebook 05, exercise 2: the step floor at 4,096 tokens is (weights streamed + KV) ÷ datasheet
    bandwidth; the planner's step_s is that floor ÷ its default efficiency 0.5."""
    kv = 4096 * 131_072 + 131_072                   # the cache read at 4,096 tokens and the new token's K/V
    bf16 = on_gpu.gpu_plan(weight_dtype="bf16", context=4096)
    assert math.isclose(bf16.step_floor_s, (MISTRAL_STREAMED + ROW + kv) / H100_BANDWIDTH, rel_tol=1e-12)
    assert round(bf16.step_floor_s * 1e3, 2) == 4.41 and round(bf16.step_s * 1e3, 2) == 8.81
    # nf4 (bitsandbytes): 6,979,321,856 linear weights at 4 bits + an fp32 absmax per 64 + a 16-entry fp32
    # code book per Linear (32 layers × 7); the lm_head stays bf16, the embedding read by one row, norms bf16
    linear = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    nf4_streamed = linear // 2 + linear // 64 * 4 + 32 * 7 * 64 + 32000 * 4096 * 2 + (2 * 32 + 1) * 4096 * 2 + ROW
    nf4 = on_gpu.gpu_plan(weight_dtype="nf4", context=4096)
    assert math.isclose(nf4.step_floor_s, (nf4_streamed + kv) / H100_BANDWIDTH, rel_tol=1e-12)
    assert round(nf4.step_floor_s * 1e3, 2) == 1.41 and round(nf4.step_s * 1e3, 2) == 2.82
    assert bf16.efficiency == nf4.efficiency == 0.5
