"""helpers.formulas.attention, helpers.measure.kv_caches and helpers.measure.mla: KV bytes of every preset pinned
by hand from the configs; measured caches of MHA/GQA/MQA, a sliding window and MLA equal to the formula
exactly; MLA's ratios against named baselines."""
import json
import math

import pytest
import torch

from helpers.formulas import attention, memory, specs
from helpers.measure import kv_caches, mla
from helpers.__main__ import main as cli
from helpers.measure.local_models import TINY_CONFIG

# KV bytes per token in bf16, by hand from each config.json:
#   GQA/MHA: 2 (K, V) × layers × kv_heads × head_dim × 2 B;  MLA: layers × (kv_lora_rank + qk_rope_head_dim) × 2 B
PRESET_KV_PER_TOKEN = {
    "mistral-7b-v0.1": 2 * 32 * 8 * 128 * 2,     # 131,072
    "mistral-7b-v0.3": 2 * 32 * 8 * 128 * 2,
    "llama-3.1-8b": 2 * 32 * 8 * 128 * 2,
    "qwen2.5-7b": 2 * 28 * 4 * 128 * 2,          # 57,344
    "deepseek-v2-lite": 27 * (512 + 64) * 2,     # 31,104
    "deepseek-v3": 61 * (512 + 64) * 2,          # 70,272
    "gpt-oss-120b": 2 * 36 * 8 * 64 * 2,         # 73,728 (all 36 layers, at short context)
}
# One sequence of 131,072 tokens, honouring windows.
PRESET_KV_128K = {
    "mistral-7b-v0.1": 32 * 4096 * (2 * 8 * 128 * 2),                        # every layer capped at 4,096
    "gpt-oss-120b": (18 * 131072 + 18 * 128) * (2 * 8 * 64 * 2),             # 18 full + 18 sliding (128)
    "deepseek-v3": 131072 * 61 * 576 * 2,
    "llama-3.1-8b": 131072 * 131072,
}
SMALL = {**TINY_CONFIG, "vocab_size": 1000}   # fast to build; the attention is the tiny model's


@pytest.mark.parametrize("name,expected", sorted(PRESET_KV_PER_TOKEN.items()))
def test_preset_kv_bytes_per_token(name, expected):
    assert memory.kv_bytes_per_token(name) == expected
    row = next(r for r in attention.kv_table([name]))
    assert row["bytes_per_token"] == expected


@pytest.mark.parametrize("name,expected", sorted(PRESET_KV_128K.items()))
def test_preset_kv_bytes_at_128k(name, expected):
    assert memory.kv_cache_bytes(name, 131072) == expected
    rows = [r for r in attention.kv_vs_context([name]) if r["tokens"] == 131072]
    assert rows[0]["bytes"] == expected


def test_context_curves_cap_where_windows_are():
    rows = attention.kv_vs_context(["mistral-7b-v0.1", "gpt-oss-120b"])
    v01 = {r["tokens"]: r["bytes"] for r in rows if r["model"] == "mistral-7b-v0.1"}
    assert v01[4096] == v01[8192] == v01[131072]
    oss = {r["tokens"]: r["bytes"] for r in rows if r["model"] == "gpt-oss-120b"}
    # past the 128-token window only the 18 full layers grow: half the per-token rate
    assert oss[131072] - oss[65536] == 65536 * 18 * 2048


# ----------------------------------------------------------------------- the CLI answers for every kind

@pytest.mark.parametrize("name", sorted(PRESET_KV_PER_TOKEN))
def test_cli_kv_every_preset_at_any_context(name, capsys):
    assert cli(["kv", "--model", name, "--tokens", "131072", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["kv_bytes_per_token"] == PRESET_KV_PER_TOKEN[name]
    assert r["kv_bytes_total"] == memory.kv_cache_bytes(name, 131072)


def test_cli_kv_answers_for_every_attention_kind(tmp_path, capsys):
    kinds = {}
    for kv_heads in (8, 2, 1):
        path = tmp_path / f"kv{kv_heads}.json"
        path.write_text(json.dumps({**TINY_CONFIG, "num_key_value_heads": kv_heads}))
        assert cli(["kv", "--model", str(path), "--tokens", "1000", "--json"]) == 0
        r = json.loads(capsys.readouterr().out)
        kinds[r["attention"]] = r["kv_bytes_total"]
    for name in ("deepseek-v3", "gpt-oss-120b"):
        assert cli(["kv", "--model", name, "--tokens", "5000", "--batch", "3", "--json"]) == 0
        r = json.loads(capsys.readouterr().out)
        kinds[r["attention"]] = r["kv_bytes_total"]
    assert set(kinds) == {"mha", "gqa", "mqa", "mla", "hybrid"}
    assert kinds["mha"] == 4 * kinds["gqa"] == 8 * kinds["mqa"] == 2 * 4 * 8 * 32 * 2 * 1000
    assert kinds["mla"] == 3 * 5000 * 61 * 576 * 2
    assert kinds["hybrid"] == 3 * (18 * 5000 + 18 * 128) * 2048


# ----------------------------------------------------------------------- measured: MHA / GQA / MQA

def test_kv_heads_variants_differ_only_in_kv_heads():
    cfgs = kv_caches.kv_heads_configs(SMALL)
    assert [c["num_key_value_heads"] for c in cfgs.values()] == [8, 2, 1]
    for c in cfgs.values():
        assert {k: v for k, v in c.items() if k != "num_key_value_heads"} == \
               {k: v for k, v in SMALL.items() if k != "num_key_value_heads"}


def test_measured_kv_heads_caches_equal_formula(tmp_path):
    rows = kv_caches.measure_kv_heads(cases=((7, 1), (33, 3)), base=SMALL)
    assert len(rows) == 6 and all(r.equal for r in rows), rows
    by = {(r.kv_heads, r.tokens, r.batch): r.measured_bytes for r in rows}
    # fp32: 2 × 4 layers × kv_heads × 32 dims × 4 B per token
    assert by[(8, 7, 1)] == 2 * 4 * 8 * 32 * 4 * 7
    assert by[(1, 33, 3)] == 2 * 4 * 1 * 32 * 4 * 33 * 3


def test_sliding_window_caps_a_real_cache(tmp_path):
    rows = kv_caches.measure_sliding(window=8, prompt=3, total=20, base=SMALL)
    assert all(r.equal for r in rows), rows
    per_token = 2 * 4 * 2 * 32 * 4
    measured = {r.tokens_seen: r.measured_bytes for r in rows}
    assert measured[5] == 5 * per_token
    # transformers keeps window − 1 = 7 tokens between steps, however long the sequence
    assert measured[7] == measured[8] == measured[20] == 7 * per_token
    assert rows[-1].no_window_bytes == 20 * per_token


# ----------------------------------------------------------------------- measured: MLA

def test_mla_latent_cache_equals_formula_and_holds_no_heads():
    cfg = mla.TINY_MLA_CONFIG
    rows = mla.measure_mla(cases=((16, 1), (40, 3)), prompt=5)
    assert all(r.equal for r in rows)
    per_token = cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * 4   # fp32
    assert [r.measured_bytes for r in rows] == [16 * per_token, 40 * 3 * per_token]
    assert all(r.max_output_error < 1e-4 * r.output_scale for r in rows)
    model = mla.tiny_mla()
    _, _, cache = mla.run_mla(model, 10, 2, prompt=4)
    assert [tuple(layer.latent.shape) for layer in cache.layers] == [(2, 10, 48)] * 4


def test_mla_absorbed_attention_equals_expanded_heads_in_float64():
    model = mla.tiny_mla(dtype=torch.float64)
    out, ref, _ = mla.run_mla(model, 24, 2, prompt=6)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    # token by token from the first gives the same
    out1, ref1, _ = mla.run_mla(model, 12, 1, prompt=1)
    torch.testing.assert_close(out1, ref1, rtol=1e-10, atol=1e-10)


def test_transformers_deepseek_v3_caches_the_latent_too():
    rows = mla.measure_hf_mla(cases=((9, 2),))
    assert rows[0].equal and rows[0].measured_bytes == 9 * 2 * 4 * 48 * 4


# ----------------------------------------------------------------------- MLA's ratios

def test_mla_ratios_against_named_baselines():
    rows = attention.mla_ratios("deepseek-v3", "mistral-7b-v0.1")
    mla, mha, mha192, gqa = rows
    assert mla.bytes_per_token == 61 * (512 + 64) * 2 == 70_272 and mla.baseline_over_mla == 1.0
    assert mha.bytes_per_token == 2 * 128 * 128 * 61 * 2 == 3_997_696
    assert mha192.bytes_per_token == 128 * (192 + 128) * 61 * 2 == 4_997_120
    assert gqa.bytes_per_token == 131_072
    assert mha.baseline_over_mla == pytest.approx(56.89, abs=0.01)
    assert mha192.baseline_over_mla == pytest.approx(71.11, abs=0.01)
    assert gqa.baseline_over_mla == pytest.approx(1.87, abs=0.01)
    assert "MHA of the same model" in mha.cache and "128 heads × 128" in mha.cache
    assert "mistral-7b-v0.1 GQA" in gqa.cache
    assert attention.mla_equivalent_gqa_groups("deepseek-v3") == 2.25
    with pytest.raises(ValueError, match="does not use MLA"):
        attention.mla_ratios("mistral-7b-v0.1")


def test_mha_formula_with_equal_widths_is_helpers_memory():
    import dataclasses

    s = specs.get_spec("mistral-7b-v0.1")
    mha = dataclasses.replace(s, num_kv_heads=s.num_heads, sliding_window=None,
                              layer_types=("full_attention",) * s.num_layers)
    assert attention.mha_kv_bytes_per_token(32, 32, 128, 128) == memory.kv_bytes_per_token(mha) == 524_288


# ----------------------------------------------------------------------- published scorecard

def test_scorecard_rows_are_cited():
    rows = attention.scorecard()
    assert {r["variant"].split(" ")[0].split("-")[0] for r in rows} >= {"MQA", "GQA", "MLA", "sliding"}
    for r in rows:
        assert "arXiv:" in r["source"] and r["where"], r
    numeric = [r for r in rows if r["metric"] != "KV cache memory"]
    assert all(float(r["variant_value"]) > 0 and float(r["baseline_value"]) > 0 for r in numeric)
    gqa = next(r for r in rows if r["variant"] == "GQA-8-XXL")
    assert (gqa["variant_value"], gqa["baseline_value"], gqa["where"]) == ("47.1", "47.2", "Table 1")


def test_mla_baselines_by_hand_and_the_fairness_rule():
    """DeepSeek V3 caches 512 + 64 elements per layer. By hand, per layer: MHA of the same model
    2 × 128 × 128 = 32,768 → 56.9×; a 32-head × 128 MHA model 2 × 32 × 128 = 8,192 → 14.2×; GQA-8 of the
    same model 2 × 8 × 128 = 2,048 → 3.56×. Whole models: Mistral 7B 131,072 B against 61 × 576 × 2 = 70,272 B."""
    rows = attention.mla_baselines("deepseek-v3", "mistral-7b-v0.1")
    ratio = {r.baseline.split(":")[0]: r.baseline_over_mla for r in rows}
    assert ratio["MHA of the same model"] == pytest.approx(32768 / 576)
    assert ratio["MHA with DeepSeek's head sizes"] == pytest.approx(128 * (192 + 128) / 576)
    assert ratio["GQA of the same model"] == pytest.approx(2048 / 576)
    assert ratio["MHA of a 7B-class model"] == pytest.approx(8192 / 576)
    whole = next(r for r in rows if r.counted == "whole model")
    assert (whole.baseline_bytes, whole.mla_bytes) == (131_072, 70_272)
    mixed = [r for r in rows if r.counted == "mixed"]
    assert [round(r.baseline_over_mla) for r in mixed] == [round(61 * 32768 / 576), round(32 * 8192 / 576)]
    fair = [r.baseline.split(":")[0] for r in rows if r.fair]
    assert fair == ["MHA of the same model", "GQA of the same model"]


def test_the_talks_quoted_ratios_map_to_named_baselines():
    rows = attention.mla_baselines("deepseek-v3")
    for quoted, start in ((56, "MHA of the same model"), (14, "MHA of a 7B-class model: 32 heads × 128")):
        best = attention.nearest_baseline(quoted, rows)
        assert best.baseline.startswith(start) and abs(best.baseline_over_mla / quoted - 1) <= attention.MATCH_TOLERANCE
    best = attention.nearest_baseline(474, rows)     # no baseline from the configs reproduces it within 3 %
    assert best.counted == "mixed" and 0.03 < abs(best.baseline_over_mla / 474 - 1) <= 0.05
    with pytest.raises(ValueError, match="does not use MLA"):
        attention.mla_baselines("mistral-7b-v0.1")


def test_the_labelled_tables_are_built_from_the_fields():
    from helpers.present import attention_figures

    kv = attention_figures.kv_table_frame(attention.kv_table(["mistral-7b-v0.1"]))
    assert kv.loc[0, "KV bytes per token"] == 131_072
    assert kv.loc[0, "one sequence of 128k tokens (GB)"] == round(4096 * 131_072 / 1e9, 3)   # the 4,096 window
    baselines = attention_figures.mla_baselines_frame(attention.mla_baselines("deepseek-v3"))
    assert baselines.loc[0, "baseline ÷ MLA"] == pytest.approx(32768 / 576) and bool(baselines.loc[0, "fair"])


# ----------------------------------------------------------------------- the tables, on every value a result can take

from helpers.formulas import compute_share, regime  # noqa: E402
from helpers.measure.kv_caches import CacheCheck, SlidingStep  # noqa: E402
from helpers.measure.mla import MLACheck  # noqa: E402
from helpers.present import attention_figures  # noqa: E402


@pytest.mark.parametrize("record", ["cpu-amd-epyc", "cpu-intel-xeon"])
def test_each_records_caches_are_in_proportion_to_their_kv_heads(record):
    """06's static words: measured ÷ formula is 1 and ÷ 1 K/V head equals the K/V heads, on both records."""
    from helpers import records
    from helpers.present import replay

    rows, _ = replay.load("06/kv_heads", [records.RESULTS / record])
    df = attention_figures.cache_checks_frame(rows)
    assert (df["measured ÷ formula"] == 1.0).all() and df["equal"].all()
    assert list(df["÷ 1 K/V head"]) == [float(h) for h in df["K/V heads"]]


def test_cache_tables_on_a_miss_zero_bytes_and_nothing():
    df = attention_figures.cache_checks_frame([CacheCheck("MHA", 16, 1, 1000, 1000, 8), CacheCheck("MQA", 16, 1, 130, 125, 1),
                                               CacheCheck("zero", 4, 1, 0, 0, 2), CacheCheck("hf", 4, 1, 10, 0)])
    assert df["measured ÷ formula"][1] == pytest.approx(130 / 125) and not df["equal"][1]
    assert df["÷ 1 K/V head"][0] == pytest.approx(1000 / 130)
    assert math.isnan(df["measured ÷ formula"][2]) and math.isinf(df["measured ÷ formula"][3])
    assert math.isnan(df["÷ 2 K/V heads"][2])               # 0 ÷ 0: nothing to compare, not an error
    assert attention_figures.cache_checks_frame([]).empty
    assert attention_figures.sliding_frame([]).empty and attention_figures.mla_checks_frame([]).empty


def _steps(measured, window=4, per=10):
    return [SlidingStep(window, n, m, per * min(n, window - 1), per * min(n, window), per * n)
            for n, m in enumerate(measured, start=1)]


def test_sliding_table_from_the_cap_on_is_window_minus_one_over_tokens(tmp_path):
    """06's static words: flat from window − 1 tokens on, measured ÷ no window = (window − 1) ÷ tokens seen."""
    rows = kv_caches.measure_sliding(window=8, prompt=3, total=20, base=SMALL)
    df = attention_figures.sliding_frame(rows)
    capped = df[df["tokens seen"] >= 7]
    assert (capped["measured ÷ no window"] == [pytest.approx(7 / n) for n in capped["tokens seen"]]).all()
    zero = attention_figures.sliding_frame(_steps([0, 0, 0]) + [SlidingStep(4, 0, 0, 0, 0, 0)])
    assert (zero["measured ÷ no window"][:3] == 0).all() and math.isnan(zero["measured ÷ no window"][3])


def test_mla_table_counts_the_error_in_fp32_epsilons():
    rows = [MLACheck(16, 1, 12288, 12288, 163840, 1.07e-6, 4.16), MLACheck(4, 1, 0, 0, 0, 0.0, 0.0),
            MLACheck(4, 1, 10, 12, 100, 1e-3, 1.0)]
    df = attention_figures.mla_checks_frame(rows)
    assert df["error (fp32 ε at that scale)"][0] == pytest.approx(1.07e-6 / (2**-23 * 4.16))       # 2.2 ε: rounding
    assert df["expanded ÷ latent"][0] == pytest.approx(163840 / 12288)
    assert math.isnan(df["error (fp32 ε at that scale)"][1]) and math.isnan(df["expanded ÷ latent"][1])
    assert df["error (fp32 ε at that scale)"][2] > 8000 and not df["equal"][2]                     # a bug, not rounding


def test_mla_absorbs_both_up_projections():
    """DeepSeek-V2 §2.1.2: W^UK into the query, W^UV into the output projection — the cached path never calls
    kv_b_proj (the up-projection that would rebuild per-head K and V); the expanded reference does."""
    model = mla.tiny_mla(dtype=torch.float64)
    layer = model.layers[0]
    w_uk, w_uv = layer._weights()
    w_o = layer.o_proj.weight.view(-1, layer.h, layer.v_dim)
    torch.testing.assert_close(layer.absorbed_output(), torch.einsum("dhv,hvr->dhr", w_o, w_uv))
    for block in model.layers:
        block.kv_b_proj.forward = lambda *a, **k: (_ for _ in ()).throw(AssertionError("K and V rebuilt"))
    x = torch.randn(1, 6, model.cfg["hidden_size"], dtype=torch.float64)
    model(x, model.new_cache())                                      # absorbed: runs on the latent alone
    with pytest.raises(AssertionError, match="K and V rebuilt"):
        model.forward_expanded(x)


def test_the_quoted_savings_table():
    df = attention_figures.quoted_frame(attention.TALK_MLA_RATIOS, attention.mla_baselines("deepseek-v3"))
    assert list(df["within 3%"]) == [False, True, True] and list(df["fair"]) == [False, True, False]
    assert df["quoted ÷ computed"][1] == pytest.approx(56 / (32768 / 576))
    assert list(df["counted"]) == ["mixed", "per layer", "per layer"]
    empty = attention_figures.quoted_frame([0, 5], [])
    assert list(empty["nearest baseline"]) == ["–", "–"] and not empty["within 3%"].any()


def test_the_scorecards_static_words_by_hand():
    """06's "What the rows say", from helpers/data/attention_scorecard.csv: GQA paper Table 1 (GQA-8-XXL 47.1
    against MHA-XXL 47.2; 0.28, 0.24 and 1.51 s per sample); DeepSeek-V2 Table 8 (MHA 45.2 / 37.0 / 42.9 against
    GQA 41.2 / 35.6 / 37.7 and MQA 37.9 / 33.2 / 30.0) and Table 9 (MLA ahead in 5 of 6; cache 15.6K of 110.6K,
    34.6K of 860.2K elements); Mistral's 1/8 at 32k."""
    df = attention_figures.scorecard_frame(attention.scorecard())
    gqa = df[df["variant"] == "GQA-8-XXL"].iloc[0]
    assert gqa["variant − baseline"] == pytest.approx(-0.1) and "0.28 s vs MHA-XXL's 1.51 s" in gqa["kv_cache_note"]
    assert "0.24 s" in df[df["variant"] == "MQA-XXL"].iloc[0]["kv_cache_note"]
    dense = df[df["setting"].str.startswith("7B dense")]
    assert (dense["variant − baseline"] < 0).all() and len(dense) == 6
    assert -dense["variant − baseline"].max() == pytest.approx(1.4) and -dense["variant − baseline"].min() == pytest.approx(12.9)
    mla_rows = df[(df["variant"] == "MLA") & (df["baseline"] == "MHA")]
    assert (mla_rows["variant − baseline"] > 0).sum() == 5 and len(mla_rows) == 6
    assert round(100 * 34.6 / 860.2) == 4 and round(100 * 15.6 / 110.6) == 14
    window = df[df["variant"].str.startswith("sliding")].iloc[0]
    assert window["variant_value"] == "1/8" and "32k-token" in window["setting"] and math.isnan(window["variant − baseline"])
    assert attention_figures.scorecard_frame([]).empty


def test_notebook_06s_computed_words():
    """The words 06 types at its fixed cases: DeepSeek V3 caches less per token than Llama 3.1 8B; at 128k GPT-OSS
    caches least of the three; V2 Lite's saving against MHA is smaller than V3's, by 128 ÷ 16 heads; Mistral 7B v0.3's
    parity length is within its context in decode, beyond it in a prefill."""
    assert memory.kv_bytes_per_token("deepseek-v3") == 70_272 < memory.kv_bytes_per_token("llama-3.1-8b") == 131_072
    at = {m: memory.kv_cache_bytes(m, 131072, 1, "bf16") for m in ("deepseek-v3", "llama-3.1-8b", "gpt-oss-120b")}
    assert min(at, key=at.get) == "gpt-oss-120b"
    same = {m: next(r.baseline_over_mla for r in attention.mla_baselines(m) if r.baseline.startswith("MHA of the same"))
            for m in ("deepseek-v2-lite", "deepseek-v3")}
    assert same["deepseek-v2-lite"] < same["deepseek-v3"] and same["deepseek-v3"] / same["deepseek-v2-lite"] == pytest.approx(128 / 16)
    d, p = compute_share.parity_parts("mistral-7b-v0.3", "decode"), compute_share.parity_parts("mistral-7b-v0.3", "prefill")
    assert d.tokens <= d.context < p.tokens
    assert regime.ratio(8, attention.mla_equivalent_gqa_groups("deepseek-v3")) == pytest.approx(2048 / 576)
