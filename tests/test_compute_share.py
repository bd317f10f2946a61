"""Where the compute goes: FLOP shares for Mistral 7B against hand-worked values (helpers.formulas.compute_share),
and their tables (helpers.present.hood_figures)."""
import pytest

from helpers.formulas import compute_share as cs
from helpers.formulas.specs import param_breakdown
from helpers.measure.local_models import TINY_CONFIG
from helpers.present import hood_figures

# Mistral 7B (paper, arXiv:2310.06825, Table 1): dim 4096, 32 layers, head_dim 128, 32 heads, 8 KV heads,
# hidden_dim 14336, vocab 32000, window 4096. By hand, per layer:
#   attention projections q, o: 4096 × 4096 each; k, v: 4096 × 1024 each → 41,943,040
#   MLP gate, up, down: 3 × 4096 × 14336 → 176,160,768
ATTN_PROJ = 32 * 41_943_040          # 1,342,177,280
MLP = 32 * 176_160_768               # 5,637,144,576
HEAD = 2 * 4096 * 32000              # 262,144,000 FLOPs per token's logits
PER_KEY = 32 * 32 * 4 * 128          # QKᵀ and softmax·V: 4·head_dim per head, 32 heads, 32 layers = 524,288


def test_attention_projection_params_by_hand():
    assert param_breakdown("mistral-7b-v0.1").attention_projections == ATTN_PROJ


def test_decode_shares_of_mistral_by_hand():
    # one decode step at context 4,095 (the query at position 4,096 sees 4,096 keys, inside the window)
    t = cs.flop_terms("mistral-7b-v0.1", 1, 4095)
    assert t.attention_projections == 2 * ATTN_PROJ
    assert t.mlp == 2 * MLP
    assert t.attention_context == PER_KEY * 4096
    assert t.head == HEAD and t.embedding == 0
    total = 2 * ATTN_PROJ + 2 * MLP + PER_KEY * 4096 + HEAD   # 16,368,271,360
    assert t.total == total == 16_368_271_360
    assert t.layers == total - HEAD and t.linear == 2 * (ATTN_PROJ + MLP)
    assert cs.layer_share("mistral-7b-v0.1", 1, 4095) == pytest.approx((total - HEAD) / total)  # 0.98398…
    # at context 0 the head's share is 262,144,000 / 14,221,312,000 = 1.843 %: layers 98.16 %
    assert cs.layer_share("mistral-7b-v0.1", 1, 0) == pytest.approx(1 - HEAD / 14_221_312_000)


def test_prefill_shares_of_mistral_by_hand():
    # prefill of 512 tokens, logits of the last position only: keys attended = 512·513/2 per layer
    t = cs.flop_terms("mistral-7b-v0.1", 512)
    ctx = PER_KEY * (512 * 513 // 2)
    lin = 512 * 2 * (ATTN_PROJ + MLP)
    total = lin + ctx + HEAD
    assert t.attention_context == ctx and t.context_share == pytest.approx(ctx / total)
    assert t.head / t.total == pytest.approx(HEAD / total)
    assert t.embedding == 0


def test_where_the_talks_95_percent_stops_holding():
    # the tiny model: head 2 × 256 × 32,000 = 16,384,000 FLOPs against 2 × 3,407,872 linear weights per token
    tiny_linear = 4 * (256 * 256 * 2 + 256 * 64 * 2 + 3 * 256 * 896)   # 3,407,872
    head = 2 * 256 * 32000
    per_key = 4 * 8 * 4 * 32
    share = cs.layer_share(TINY_CONFIG, 1, 0)
    assert share == pytest.approx((2 * tiny_linear + per_key) / (2 * tiny_linear + per_key + head))
    assert share < cs.TALK_LAYER_SHARE
    # attention over the context equals all linear layers at 53,247 prompt tokens in a prefill of
    # Mistral 7B v0.3 (no window): n(n+1)/2 · 524,288 ≥ n · 2 · 6,979,321,856 ⇔ n + 1 ≥ 53,248
    assert cs.attention_crossover("mistral-7b-v0.3", "prefill") == 53_247
    # one decode step: c keys · 524,288 ≥ 13,958,643,712 ⇔ c ≥ 26,624 (the query sees past + 1 keys)
    assert cs.attention_crossover("mistral-7b-v0.3", "decode") == 26_623
    assert cs.attention_crossover("mistral-7b-v0.1", "prefill") is None   # the 4,096 window caps it


def test_share_sweep_its_table_and_bad_phase():
    rows = cs.share_sweep(["mistral-7b-v0.1"], [128, 4096], phases=("decode",))
    assert [(r.phase, r.tokens) for r in rows] == [("decode", 128), ("decode", 4096)]
    assert rows[1].terms == cs.flop_terms("mistral-7b-v0.1", 1, 4096)
    table = hood_figures.shares_frame(rows)
    shares = table.drop(columns=["phase", "tokens"])
    assert list(shares.columns) == list(hood_figures.FLOP_PARTS.values())
    assert all(abs(total - 1) < 1e-12 for total in shares.sum(axis=1))
    with pytest.raises(ValueError, match="phase must be one of prefill, decode, got 'train'"):
        cs.phase_args("train", 3)


def test_the_bytes_of_a_step_by_hand():
    b = cs.byte_terms("mistral-7b-v0.1", 2048)
    kv = 2048 * 2 * 32 * 8 * 128 * 2 + 2 * 32 * 8 * 128 * 2     # read 2,048 tokens, write one, bf16
    assert b.attention == 2 * ATTN_PROJ + kv and b.head == HEAD
    from helpers.formulas.stepcost import forward_cost

    assert b.total == forward_cost("mistral-7b-v0.1", 1, 2048).bytes
    assert b.mlp == b.total - b.attention - b.head > 2 * MLP      # the MLP's weights, the norms and one embedding row


def test_parity_parts_of_mistral_v03_by_hand():
    """Decode: 4·32·128 = 16,384 FLOPs per key per layer; 2 × (ATTN_PROJ + MLP) = 13,958,643,712 linear FLOPs per
    token; 32 layers × 16,384 = 524,288 per key over the model, so parity at 13,958,643,712 ÷ 524,288 = 26,624 keys
    per layer, a context of 26,623 (the new token is the 26,624th key). Prefill: twice that, 53,248 − 1."""
    d = cs.parity_parts("mistral-7b-v0.3", "decode")
    assert (d.layers, d.flops_per_key, d.linear_flops) == (32, 16_384, 2 * (ATTN_PROJ + MLP)) == (32, 16_384, 13_958_643_712)
    assert d.keys_needed == 26_624 and d.tokens == 26_623 and not d.windowed and d.context == 32_768
    p = cs.parity_parts("mistral-7b-v0.3", "prefill")
    assert p.keys_needed == 53_248 and p.tokens == 53_247 > p.context          # beyond its context
    # Llama 3.1 8B has the same layer shapes: the same length, within its 131,072-token context
    assert cs.parity_parts("llama-3.1-8b").tokens == 26_623
    # at parity the two FLOP terms of flop_terms meet: one short of it attention is less, at it no less
    t_at, t_before = cs.flop_terms("mistral-7b-v0.3", 1, 26_623), cs.flop_terms("mistral-7b-v0.3", 1, 26_622)
    assert t_at.attention_context == t_at.linear and t_before.attention_context < t_before.linear


def test_parity_parts_of_the_tiny_model_and_a_window_by_hand():
    c = TINY_CONFIG
    h, hd, layers = c["hidden_size"], c["head_dim"], c["num_hidden_layers"]
    per_layer = 2 * h * c["num_attention_heads"] * hd + 2 * h * c["num_key_value_heads"] * hd + 3 * h * c["intermediate_size"]
    linear = 2 * layers * per_layer                  # 2 FLOPs per weight, every layer
    f = 4 * c["num_attention_heads"] * hd            # 4 × 8 × 32 = 1,024
    from helpers.formulas.specs import spec_from_config

    d = cs.parity_parts(spec_from_config(c, "tiny"))
    # per layer 2·256·256 (q, o) + 2·256·64 (k, v) + 3·256·896 (MLP) = 851,968 weights; × 4 layers × 2 FLOPs
    assert (d.flops_per_key, d.linear_flops) == (f, linear) == (1_024, 6_815_744)
    assert d.tokens == -(-linear // (layers * f)) - 1 == 1_663      # 6,815,744 ÷ 4,096 = 1,664 keys per layer
    assert cs.parity_parts(spec_from_config(c, "tiny"), "prefill").tokens == 3_327   # test_expected's, by hand
    # GQA's K/V heads do not enter: the same model with one K/V head (MQA) loses their k/v weights only
    mqa = spec_from_config({**c, "num_key_value_heads": 1}, "tiny-mqa")
    assert cs.parity_parts(mqa).flops_per_key == f
    # a window on every layer caps the keys: never
    w = cs.parity_parts("mistral-7b-v0.1")
    assert w.windowed and w.tokens is None and w.tokens == cs.attention_crossover("mistral-7b-v0.1", "decode")
