"""Attention beyond the KV cache: Mamba state bytes against hand-worked numbers and real caches,
linear attention's two forms, sparse attention's trade."""
import pytest
import torch

from helpers.formulas import state_space as ss
from helpers.measure import state_space_toys as toys


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


@pytest.mark.parametrize("kind", ["falcon_mamba", "jamba"])
def test_formula_equals_a_real_transformers_cache(kind):
    rows = toys.measure_toy_states(kind, lengths=(5, 40))
    assert all(r.equal for r in rows), rows
    if kind == "falcon_mamba":
        assert rows[0].total_bytes == rows[1].total_bytes == 2 * 128 * (16 + 4) * 4
    else:  # the attention layer grows by 2 × 2 KV heads × 16 × 4 B = 256 B per token
        assert rows[1].kv_bytes - rows[0].kv_bytes == 35 * 256


def test_linear_attention_recurrent_equals_parallel_and_state_is_fixed():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 2, 3, 40, 16, generator=g).unbind(0)
    out, s, z = toys.linear_attention_recurrent(q, k, v)
    torch.testing.assert_close(out, toys.linear_attention_parallel(q, k, v), rtol=1e-5, atol=1e-5)
    assert s.shape == (2, 3, 16, 16) and z.shape == (2, 3, 16)
    c = toys.check_linear_attention(64, heads=2, head_dim=16)
    assert c.max_difference < 1e-4 and c.state_elements_per_head == 16 * 16 + 16
    # Mistral-shaped: 32 layers × 8 KV heads × (128·128 + 128) × 2 B = 8,454,144 B
    assert ss.linear_attention_state_bytes(32, 8, 128, 128) == 8_454_144


def test_sparse_attention_saves_and_risks():
    rows = {(r.query, r.pattern): r for r in toys.sparse_attention_demo(context=1024, keep=64, needle_at=200,
                                                                        queries=8)}
    assert rows[("needle", "dense")].output_error == pytest.approx(0, abs=1e-6)
    assert rows[("needle", "top-64")].needle_kept and not rows[("needle", "4 sinks + window")].needle_kept
    assert rows[("needle", "top-64")].output_error < 0.05 < rows[("needle", "4 sinks + window")].output_error
    assert rows[("diffuse", "top-64")].share_of_keys == 64 / 1024
    assert rows[("diffuse", "top-64")].mass_kept < 0.9


def test_unknown_model_type_says_what_is_allowed():
    with pytest.raises(ValueError, match="mamba, falcon_mamba, jamba"):
        ss.ssm_shape("mistral-7b-v0.1")


def test_sparse_decode_saving_by_hand():
    # Mistral 7B v0.3 at 131,072 tokens: linear 13,958,643,712 + head 2 × 4096 × 32,768 = 268,435,456
    # + attention 524,288 × 131,072 = 68,719,476,736; with 2,048 keys: 524,288 × 2,048 = 1,073,741,824
    r = ss.sparse_decode_saving("mistral-7b-v0.3", 131072, 2048)
    dense = 13_958_643_712 + 268_435_456 + 68_719_476_736
    sparse = 13_958_643_712 + 268_435_456 + 1_073_741_824
    assert (r.dense_flops, r.sparse_flops) == (dense, sparse)
    assert r.flops_saved == pytest.approx(1 - sparse / dense)
    assert r.attention_share == pytest.approx(68_719_476_736 / dense)
    for bad in (0, 131073, 1.5):
        with pytest.raises(ValueError, match="keep must be a whole number from 1 to 131,072"):
            ss.sparse_decode_saving(keep=bad)


# ----------------------------------------------------------------------- the rules that word them

def test_growth_words_by_hand():
    assert ss.growth([(1, 7), (2, 7), (4, 7)]).words == "the same at every length (7 B)"
    assert ss.growth([(1, 3), (2, 6), (8, 24)]).words == "in proportion to the context"
    assert ss.growth([(1, 13), (2, 16), (4, 22)]).words == "a fixed 10 B plus 3 B per token"
    assert ss.growth([(1, 3), (2, 6), (4, 12), (8, 12)]).words.startswith("in proportion to the context up to 2 tokens, "
                                                                          "and the same from 4 on")
    assert ss.growth([(1, 1), (2, 4), (3, 9)]).words == "growing with the context, not in proportion to it"


def test_state_words_from_the_formulas():
    rows = ss.state_vs_kv(contexts=[2**k for k in range(8, 19)])
    words = {v.words.split(":")[0]: v.words for v in ss.state_verdicts(rows) if v.rule == "growth"}
    assert words["mistral-7b-v0.3"].endswith("in proportion to the context")
    assert "the same from 4,096 on (536,870,912 B)" in words["mistral-7b-v0.1"]
    fixed, per = ss.ssm_state_bytes("jamba-1.5-mini"), 16384
    assert words["jamba-1.5-mini"].endswith(f"a fixed {fixed:,} B plus {per:,} B per token")
    assert words["falcon-mamba-7b"].endswith(f"the same at every length ({ss.ssm_state_bytes('falcon-mamba-7b'):,} B)")
    against = [v for v in ss.state_verdicts(rows) if v.rule == "speed"]
    mistral = 262144 * 131072
    assert "falcon-mamba-7b carries 1,638× less than mistral-7b-v0.3" in against[-1].words
    assert against[-1].evidence["ratio"] == pytest.approx(mistral / ss.ssm_state_bytes("falcon-mamba-7b"))


@pytest.mark.parametrize("record", ["cpu-amd-epyc", "cpu-intel-xeon"])
def test_toy_words_follow_each_record(record):
    from helpers import records
    from helpers.present import replay

    value, _ = replay.load("10/state_checks", [records.RESULTS / record])
    caches, linear = toys.toy_verdicts(value["toy_states"], value["linear_check"])
    assert caches.words.endswith("equal to the formula to the byte in every toy run (6 of 6)")
    d = value["linear_check"].max_difference
    assert linear.evidence["epsilons"] == pytest.approx(d / 2**-23) and "float rounding" in linear.words
    bad = toys.ToyStateCheck("toy jamba", 8, 2048, 71680, 70000)
    assert "in 0 of 1 toy runs" in toys.toy_verdicts([bad], value["linear_check"])[0].words


@pytest.mark.parametrize("keep", [256, 1024])
def test_sparse_words_follow_the_demo(keep):
    rows = toys.sparse_attention_demo(keep=keep)
    words = toys.sparse_verdicts(rows)
    by = {(r.query, r.pattern): r for r in rows}
    for v in words:
        kind, pattern = v.words.split(": ")[0], v.words.split(": ")[1].split(" (")[0]
        r = by[(kind, pattern)]
        if kind == "needle":
            assert ("keeps the needle" in v.words) == r.needle_kept
        else:
            from helpers.formulas import verdicts

            assert f"({verdicts.share_band(r.mass_kept)})" in v.words
        assert f"{r.output_error:.3f} of a value's length" in v.words
    top = by[("diffuse", f"top-{keep}")]
    assert ("(less than half)" if keep == 256 else "(most)") in next(v.words for v in words if v.words.startswith(f"diffuse: top-{keep}"))
    assert top.mass_kept < 0.5 if keep == 256 else top.mass_kept > 0.5
