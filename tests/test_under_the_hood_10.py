"""Notebook 10's computed facts, each stated in its static prose, pinned against the configs and the catalogs; and
its tables on the extremes a measurement can produce (the staircase's and the timings' are in test_hierarchy.py
and test_flash.py)."""
import pytest

from helpers.formulas import compute_share, flash, state_space
from helpers.measure import hierarchy


def test_where_the_compute_goes_in_one_mistral_decode_step():
    # the talk's 95 % holds for Mistral 7B v0.1's decode step at 4k tokens; Llama 3.1's 128k vocabulary breaks it
    assert compute_share.layer_share("mistral-7b-v0.1", 1, 4095) == pytest.approx(0.984, abs=5e-4)
    assert compute_share.layer_share("llama-3.1-8b", 1, 4096) < compute_share.TALK_LAYER_SHARE
    t = compute_share.flop_terms("mistral-7b-v0.1", 1, 4095)
    assert t.head == 2 * 4096 * 32000                     # the head: 4,096 × 32,000 weights


def test_attention_over_the_context_matches_the_linear_layers_at_these_lengths():
    assert compute_share.attention_crossover("mistral-7b-v0.3", "prefill") == 53247
    assert compute_share.attention_crossover("mistral-7b-v0.3", "decode") == 26623
    assert compute_share.attention_crossover("mistral-7b-v0.1", "prefill") is None     # its 4,096-token window


def test_the_h100_tiles_and_the_traffic_limit():
    # FlashAttention's Algorithm 1: M = 228 KiB ÷ 2 B; B_c = ⌈M / 4d⌉ = 228, B_r = min(B_c, d) = 128
    assert flash.paper_block_sizes(228 * 1024, 128, "bf16") == (128, 228)
    assert flash.traffic_ratio_limit(128, 128, causal=True) == 4.0
    h100 = next(g for g in hierarchy.gpu_hierarchy() if g.gpu == "H100 SXM")
    assert h100.smem_per_sm_bytes == 228 * 1024 and h100.sms == 132
    assert h100.onchip_over_hbm_bandwidth == pytest.approx(31e12 / 3.35e12)         # FlashAttention-3, Table 1


def test_state_sizes_and_their_break_even_contexts():
    mamba = state_space.ssm_state_bytes("falcon-mamba-7b")
    assert mamba == 20 * 2**20 and state_space.break_even_tokens(mamba) == 160.0
    linear = state_space.linear_attention_state_bytes(32, 8, 128, 128)
    assert linear == 32 * 8 * (128 * 128 + 128) * 2 and state_space.break_even_tokens(linear) == 64.5
    per_token = state_space.sequence_state_bytes("mistral-7b-v0.3", 1)
    assert per_token == 2 * 32 * 8 * 128 * 2                                             # 128 KiB per token
    # a window stops the cache growing; a state never grows
    rows = state_space.state_vs_kv(contexts=(4096, 262144))
    at = {(r["model"], r["tokens"]): r["bytes"] for r in rows}
    assert at[("mistral-7b-v0.1", 4096)] == at[("mistral-7b-v0.1", 262144)]
    assert at[("falcon-mamba-7b", 4096)] == at[("falcon-mamba-7b", 262144)] == mamba
    assert at[("mistral-7b-v0.3", 262144)] == 64 * at[("mistral-7b-v0.3", 4096)]
    jamba = state_space.ssm_shape("jamba-1.5-mini")
    assert (len(jamba.attention_layers), len(jamba.attention_layers) + len(jamba.mamba_layers)) == (4, 32)


def test_sparse_attention_saving_at_the_notebooks_cases():
    s = state_space.sparse_decode_saving("mistral-7b-v0.3", 131072, 2048)
    assert s["attention_share"] == pytest.approx(0.828, abs=1e-3) and 0 < s["sparse_flops"] < s["dense_flops"]
