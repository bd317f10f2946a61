"""Tiled attention with the online softmax equals PyTorch's SDPA (helpers.measure.attention_kernels); its HBM byte
counts (helpers.formulas.flash) against hand-worked values."""
import pytest
import torch
import torch.nn.functional as F

from helpers.formulas import flash
from helpers.measure import attention_kernels as kernels
from helpers.present import hood_figures


@pytest.mark.parametrize("batch,heads,kv_heads,n,d,bq,bk", [
    (1, 4, 4, 100, 32, 16, 32),     # blocks that do not divide n
    (2, 8, 2, 257, 64, 64, 64),     # GQA, n one past a block
    (1, 2, 1, 64, 16, 64, 64),      # one block
    (1, 4, 2, 130, 32, 7, 13),      # odd, unequal blocks
    (3, 2, 2, 1, 8, 4, 4),          # a single token
])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_attention_equals_sdpa(batch, heads, kv_heads, n, d, bq, bk, causal):
    g = torch.Generator().manual_seed(n * 7 + d)
    q = torch.randn(batch, heads, n, d, generator=g)
    k = torch.randn(batch, kv_heads, n, d, generator=g)
    v = torch.randn(batch, kv_heads, n, d, generator=g)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != heads)
    torch.testing.assert_close(kernels.tiled_attention(q, k, v, causal, bq, bk), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kernels.naive_attention(q, k, v, causal), ref, rtol=1e-5, atol=1e-5)


def test_tiled_attention_in_bf16_and_non_causal_cross_attention():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 40, 32, generator=g)
    k, v = torch.randn(2, 1, 2, 90, 32, generator=g)          # fewer queries than keys, not causal
    ref = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(kernels.tiled_attention(q, k, v, False, 16, 32), ref, rtol=1e-5, atol=1e-5)
    qb, kb, vb = (t.bfloat16() for t in (q, k, v))
    out = kernels.tiled_attention(qb, kb, vb, False, 16, 32).float()
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)



def test_standard_bytes_by_hand():
    # N = 1024, d = 64 (FlashAttention paper, Algorithm 0):
    # read Q, K (2·65,536) + S (1,048,576) + P and V (1,048,576 + 65,536) = 2,293,760
    # write S, P (2·1,048,576) + O (65,536) = 2,162,688; total 4Nd + 4N² = 4,456,448 elements
    e = flash.standard_hbm_elements(1024, 64)
    assert (e.read, e.write, e.total) == (2_293_760, 2_162_688, 4_456_448)
    assert e.nxn_matrix == 1_048_576


def test_tiled_bytes_by_hand():
    # N = 1024, d = 64, blocks of 128: 8 query blocks, each reads all 1,024 keys' K and V:
    # Q 65,536 + K/V 8 × 2 × 65,536 = 1,048,576 → read 1,114,112; write O 65,536; total 1,179,648
    e = flash.tiled_hbm_elements(1024, 64, 128, 128, causal=False)
    assert (e.read, e.write, e.total) == (1_114_112, 65_536, 1_179_648)
    # causal: query block i visits keys up to (i + 1)·128 → 128 × (1 + … + 8) = 4,608 keys
    # K/V 2 × 64 × 4,608 = 589,824; + Q 65,536 + O 65,536 = 720,896
    assert flash.keys_visited(1024, 128, 128, causal=True) == 4_608
    assert flash.tiled_hbm_elements(1024, 64, 128, 128, causal=True).total == 720_896
    # a ragged end: N = 100, blocks 64 → 2 query blocks × 100 keys = 200; causal: 64 + 100 = 164
    assert flash.keys_visited(100, 64, 64, causal=False) == 200
    assert flash.keys_visited(100, 64, 64, causal=True) == 164


def test_byte_table_in_bytes_and_ratio():
    shape = flash.AttentionShape(batch=1, heads=32, head_dim=128, dtype="bf16")
    row = flash.hbm_bytes_table(shape, [4096], 128, 128, causal=False)[0]
    # standard: (4·4096·128 + 4·4096²) × 32 heads × 2 B = (2,097,152 + 67,108,864) × 64 = 4,429,185,024
    assert row.standard_bytes == 4_429_185_024
    # tiled: (2·4096·128 + 32 query blocks × 2 × 4096 × 128) × 64 = (1,048,576 + 33,554,432) × 64
    assert row.tiled_bytes == 2_214_592_512
    assert row.nxn_bytes == 4096 * 4096 * 64
    assert row.standard_over_tiled == pytest.approx(69_206_016 / 34_603_008)


def test_the_traffic_ratio_tends_to_4_br_over_d_not_the_block_height():
    """Notebook 10's figure: at 131,072 tokens, Mistral's 128-dim heads, H100 blocks 128 × 228, causal —
    4,402 GB against 1,104.6 GB, 3.99× — tends to 4·B_r/d = 4, not to B_r = 128."""
    assert flash.traffic_ratio_limit(128, 128) == 4.0 and flash.traffic_ratio_limit(128, 128, causal=False) == 2.0
    assert flash.traffic_ratio_limit(64, 128) == 2.0
    shape = flash.AttentionShape(batch=1, heads=32, head_dim=128, dtype="bf16")
    row = flash.hbm_bytes_table(shape, [131072], 128, 228, causal=True)[0]
    assert row.standard_bytes / 1e9 == pytest.approx(4402, abs=1)
    assert row.tiled_bytes / 1e9 == pytest.approx(1104.6, abs=0.1)
    assert row.standard_over_tiled == pytest.approx(flash.traffic_ratio_limit(128, 128), rel=0.01)
    with pytest.raises(ValueError, match="block_q must be a whole number ≥ 1, got 0"):
        flash.traffic_ratio_limit(0, 128)


def test_paper_block_sizes_by_hand():
    # Algorithm 1: M = 228 KiB of bf16 = 116,736 elements; d = 128: B_c = ⌈116,736 / 512⌉ = 228, B_r = min(228, 128)
    assert flash.paper_block_sizes(228 * 1024, 128, "bf16") == (128, 228)
    # A100's 192 KB, fp32, d = 64: M = 49,152; B_c = ⌈49,152 / 256⌉ = 192; B_r = 64
    assert flash.paper_block_sizes(192 * 1024, 64, "fp32") == (64, 192)


def test_time_attention_runs_and_reports():
    shape = flash.AttentionShape(1, 2, 16, "fp32")
    df = kernels.time_attention([32, 64], shape, "cpu", causal=True, repeats=1, tiled_up_to=32)
    assert list(df["tokens"]) == [32, 64] and not df["oom"].any()
    assert (df["naive_s"] > 0).all() and (df["sdpa_s"] > 0).all()
    assert df["tiled_s"].notna().tolist() == [True, False]


def test_the_hbm_table_at_4096_tokens():
    shape = flash.AttentionShape(batch=1, heads=32, head_dim=128, dtype="bf16")
    (row,) = flash.hbm_bytes_table(shape, [4096], 128, 128, causal=False)
    assert row.standard_bytes == 4_429_185_024
    assert row.standard_over_tiled == pytest.approx(69_206_016 / 34_603_008)


# ----------------------------------------------------------------------- the timings' table
# Fed each committed CPU record's 10/attention_times and synthetic sweeps for what neither shows (a sweep that
# runs out of memory, zero times, one length, none, two equal times): naive ÷ fused and its label, never raising.

def _frame(rows, oom_at=None):
    import pandas as pd

    df = pd.DataFrame([{**r, "oom": False} for r in rows] + ([{"tokens": oom_at, "oom": True}] if oom_at else []),
                      columns=["tokens", "naive_s", "sdpa_s", "oom"])
    df["oom"] = df["oom"].astype(bool)
    df.attrs["oom_at"] = oom_at
    return df


@pytest.mark.parametrize("record", ["cpu-amd-epyc", "cpu-intel-xeon"])
def test_timing_table_follows_each_record(record):
    from helpers import records
    from helpers.present import replay

    (_, measured), _ = replay.load("10/attention_times", [records.RESULTS / record])
    df = measured["times"]
    t = hood_figures.timing_frame(df)
    assert list(t["naive ÷ fused"]) == pytest.approx(list(df["naive_s"] / df["sdpa_s"]))
    assert set(t["naive ÷ fused label"]) <= {"below", "at", "above"}
    assert "naive_over_sdpa" not in t and "oom" not in t


@pytest.mark.parametrize("rows,oom_at,labels", [
    ([{"tokens": 1024, "naive_s": 2e-4, "sdpa_s": 1e-4}, {"tokens": 16384, "naive_s": 0.05, "sdpa_s": 0.01}], 32768,
     ["above", "above"]),
    ([{"tokens": 256, "naive_s": 1.0, "sdpa_s": 1.0}, {"tokens": 512, "naive_s": 1.05, "sdpa_s": 1.0}], None, ["at", "at"]),
    ([{"tokens": 256, "naive_s": 1.0, "sdpa_s": 3.0}], None, ["below"]),                       # one length, below
    ([{"tokens": 256, "naive_s": 0.0, "sdpa_s": 0.0}, {"tokens": 512, "naive_s": 1.0, "sdpa_s": 0.0}], None, ["–", "above"]),
    ([], 1024, []),                                                                           # nothing ran
])
def test_timing_table_on_synthetic_sweeps(rows, oom_at, labels):
    t = hood_figures.timing_frame(_frame(rows, oom_at))
    assert list(t["naive ÷ fused label"]) == labels
    hood_figures.timing_figure(_frame(rows, oom_at), "synthetic")
