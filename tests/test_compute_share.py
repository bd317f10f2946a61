"""Where the compute goes: FLOP shares for Mistral 7B against hand-worked values, and per-part timing."""
import pytest

from helpers.cost import compute_share as cs
from helpers.measure.local_models import TINY_CONFIG

# Mistral 7B (paper, arXiv:2310.06825, Table 1): dim 4096, 32 layers, head_dim 128, 32 heads, 8 KV heads,
# hidden_dim 14336, vocab 32000, window 4096. By hand, per layer:
#   attention projections q, o: 4096 × 4096 each; k, v: 4096 × 1024 each → 41,943,040
#   MLP gate, up, down: 3 × 4096 × 14336 → 176,160,768
ATTN_PROJ = 32 * 41_943_040          # 1,342,177,280
MLP = 32 * 176_160_768               # 5,637,144,576
HEAD = 2 * 4096 * 32000              # 262,144,000 FLOPs per token's logits
PER_KEY = 32 * 32 * 4 * 128          # QKᵀ and softmax·V: 4·head_dim per head, 32 heads, 32 layers = 524,288


def test_attention_projection_params_by_hand():
    assert cs.attention_projection_params("mistral-7b-v0.1") == ATTN_PROJ


def test_decode_shares_of_mistral_by_hand():
    # one decode step at context 4,095 (the query at position 4,096 sees 4,096 keys, inside the window)
    t = cs.flop_terms("mistral-7b-v0.1", 1, 4095)
    assert t["layers: attention projections (q, k, v, o)"] == 2 * ATTN_PROJ
    assert t["layers: MLP"] == 2 * MLP
    assert t["layers: attention over the context (QKᵀ, softmax·V)"] == PER_KEY * 4096
    assert t["head (logits)"] == HEAD
    total = 2 * ATTN_PROJ + 2 * MLP + PER_KEY * 4096 + HEAD   # 16,368,271,360
    assert sum(t.values()) == total == 16_368_271_360
    assert cs.layer_share("mistral-7b-v0.1", 1, 4095) == pytest.approx((total - HEAD) / total)  # 0.98398…
    # at context 0 the head's share is 262,144,000 / 14,221,312,000 = 1.843 %: layers 98.16 %
    assert cs.layer_share("mistral-7b-v0.1", 1, 0) == pytest.approx(1 - HEAD / 14_221_312_000)


def test_prefill_shares_of_mistral_by_hand():
    # prefill of 512 tokens, logits of the last position only: keys attended = 512·513/2 per layer
    rows = {r["part"]: r for r in cs.compute_shares("mistral-7b-v0.1", 512)}
    ctx = PER_KEY * (512 * 513 // 2)
    lin = 512 * 2 * (ATTN_PROJ + MLP)
    total = lin + ctx + HEAD
    assert rows["layers: attention over the context (QKᵀ, softmax·V)"]["FLOPs"] == ctx
    assert rows["head (logits)"]["share"] == pytest.approx(HEAD / total)
    assert rows["embedding (a lookup)"]["FLOPs"] == 0


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


def test_share_sweep_and_bad_phase():
    rows = cs.share_sweep(["mistral-7b-v0.1"], [128, 4096], phases=("decode",))
    assert [r["tokens"] for r in rows] == [128, 4096]
    assert all(abs(sum(v for k, v in r.items() if k.startswith(("embedding", "layers:", "head"))) - 1) < 1e-12
               for r in rows)
    with pytest.raises(ValueError, match="prefill' or 'decode"):
        cs.phase_args("train", 3)


def test_measured_parts_on_the_tiny_model():
    from helpers.measure import models

    loaded = models.load("tiny", "cpu")
    rows = cs.measure_parts(loaded, "The lighthouse keeper wrote in his ledger every night.", 32, "prefill", repeats=2)
    assert [r["part"] for r in rows] == list(cs.PARTS)
    assert abs(sum(r["share"] for r in rows) - 1) < 1e-9 and all(r["seconds"] >= 0 for r in rows)
    dec = cs.measure_parts(loaded, "A short text.", 16, "decode", repeats=2)
    assert {r["part"] for r in dec} == set(cs.PARTS)
    both = cs.side_by_side(cs.compute_shares(loaded.spec, 32), rows)
    assert abs(sum(r["FLOP share"] for r in both) - 1) < 1e-9 and abs(sum(r["time share"] for r in both) - 1) < 1e-9
