"""Attention beyond the KV cache: Mamba, Jamba and linear-attention state bytes against hand-worked numbers,
sparse attention's saving by hand."""
import pytest

from helpers.formulas import state_space as ss


def test_falcon_mamba_state_by_hand():
    # tiiuae/falcon-mamba-7b: 64 layers, intermediate 8192, state 16, conv kernel 4, bf16:
    # 64 × 8192 × (16 + 4) × 2 B = 20,971,520 B, at any context
    assert ss.ssm_state_bytes("falcon-mamba-7b") == 20_971_520
    assert ss.sequence_state_bytes("falcon-mamba-7b", 1) == ss.sequence_state_bytes("falcon-mamba-7b", 262_144)


def test_jamba_state_and_kv_by_hand():
    # ai21labs/AI21-Jamba-1.5-Mini: 32 layers, attention where i % 8 == 4 → layers 4, 12, 20, 28
    s = ss.ssm_shape("jamba-1.5-mini")
    assert s.attention_layers == (4, 12, 20, 28) and len(s.mamba_layers) == 28
    # Mamba: 28 × (2 × 4096) × (16 + 4) × 2 B = 9,175,040 B
    assert ss.ssm_state_bytes(s) == 9_175_040
    # KV of 4 attention layers: 2 × 4 × 8 KV heads × 128 × 2 B = 16,384 B per token; at 4,096 tokens 67,108,864 B
    assert ss.sequence_state_bytes(s, 4096) == 9_175_040 + 67_108_864


def test_against_mistral_kv_by_hand():
    # Mistral 7B v0.3 (no window): 131,072 B per token; at 32k tokens 4,294,967,296 B
    rows = {(r["model"], r["tokens"]): r["bytes"] for r in ss.state_vs_kv(contexts=(32768,))}
    assert rows[("mistral-7b-v0.3", 32768)] == 4_294_967_296
    assert rows[("mistral-7b-v0.1", 32768)] == 4096 * 131_072          # the 4,096-token window caps v0.1
    assert rows[("falcon-mamba-7b", 32768)] == 20_971_520
    assert ss.break_even_tokens(20_971_520) == pytest.approx(160.0)    # 20,971,520 / 131,072


def test_unknown_model_type_says_what_is_allowed():
    with pytest.raises(ValueError, match="mamba, falcon_mamba, jamba"):
        ss.ssm_shape("mistral-7b-v0.1")


def test_sparse_decode_saving_by_hand():
    # Mistral 7B v0.3 at 131,072 tokens: linear 13,958,643,712 + head 2 × 4096 × 32,768 = 268,435,456
    # + attention 524,288 × 131,072 = 68,719,476,736; with 2,048 keys: 524,288 × 2,048 = 1,073,741,824
    r = ss.sparse_decode_saving("mistral-7b-v0.3", 131072, 2048)
    dense = 13_958_643_712 + 268_435_456 + 68_719_476_736
    sparse = 13_958_643_712 + 268_435_456 + 1_073_741_824
    assert (r["dense_flops"], r["sparse_flops"]) == (dense, sparse)
    assert r["attention_share"] == pytest.approx(68_719_476_736 / dense)
    for bad in (0, 131073, 1.5):
        with pytest.raises(ValueError, match="keep must be a whole number from 1 to 131,072"):
            ss.sparse_decode_saving(keep=bad)


# ----------------------------------------------------------------------- the rules that word them
