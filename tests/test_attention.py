"""helpers.formulas.attention, helpers.measure.kv_caches and helpers.measure.mla: KV bytes of every preset pinned
by hand from the configs; measured caches of MHA/GQA/MQA, a sliding window and MLA equal to the formula
exactly; MLA's ratios against named baselines."""
import json

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
    assert row.bytes_per_token == expected


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
    assert attention.context_points()[-1] == 131072


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
    rows = kv_caches.measure_kv_heads(cases=((7, 1), (33, 3)), folder=tmp_path,
                                      configs=kv_caches.kv_heads_configs(SMALL))
    assert len(rows) == 6 and all(r.equal for r in rows), rows
    by = {(r.kv_heads, r.tokens, r.batch): r.measured_bytes for r in rows}
    # fp32: 2 × 4 layers × kv_heads × 32 dims × 4 B per token
    assert by[(8, 7, 1)] == 2 * 4 * 8 * 32 * 4 * 7
    assert by[(1, 33, 3)] == 2 * 4 * 1 * 32 * 4 * 33 * 3


def test_sliding_window_caps_a_real_cache(tmp_path):
    rows = kv_caches.measure_sliding(window=8, prompt=3, total=20, folder=tmp_path, base=SMALL)
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
    out, ref, _ = mla.run_mla(model, 24, 2, prompt=6, dtype=torch.float64)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    # token by token from the first gives the same
    out1, ref1, _ = mla.run_mla(model, 12, 1, prompt=1, dtype=torch.float64)
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
    assert attention.match_quoted(56, rows).baseline.startswith("MHA of the same model")
    assert attention.match_quoted(14, rows).baseline.startswith("MHA of a 7B-class model: 32 heads × 128")
    assert attention.match_quoted(474, rows) is None  # no baseline from the configs reproduces it
    assert attention.match_quoted(474, rows, tolerance=0.05).counted == "mixed"
    assert attention.nearest_baseline(474, rows).counted == "mixed"
    with pytest.raises(ValueError, match="does not use MLA"):
        attention.mla_baselines("mistral-7b-v0.1")


def test_scorecard_summary_by_hand():
    s = attention.scorecard_summary()
    # DeepSeek-V2 Tables 9: MLA ahead on 5 of 6 (50.0>48.7, 39.0>37.9, 50.9<51.6, 59.0>57.5, 50.7>46.6, 59.2>57.9)
    assert s.mla_comparisons == 6 and s.mla_won == 5 and s.mla_lost == (("C-Eval", "small MoE"),)
    lo, hi = s.mla_cache_share
    assert lo == pytest.approx(34.6 / 860.2) and hi == pytest.approx(15.6 / 110.6)   # 4 % and 14 %
    assert s.window_cache_smaller == 8 and s.window_at_tokens == 32 * 1024
    with pytest.raises(ValueError, match="no MLA"):
        attention.scorecard_summary([])


def test_the_labelled_tables_are_built_from_the_fields():
    from helpers.present import attention_figures

    kv = attention_figures.kv_table_frame(attention.kv_table(["mistral-7b-v0.1"]))
    assert kv.loc[0, "KV bytes per token"] == 131_072
    assert kv.loc[0, "one sequence of 128k tokens (GB)"] == round(4096 * 131_072 / 1e9, 3)   # the 4,096 window
    baselines = attention_figures.mla_baselines_frame(attention.mla_baselines("deepseek-v3"))
    assert baselines.loc[0, "baseline ÷ MLA"] == pytest.approx(32768 / 576) and bool(baselines.loc[0, "fair"])


# ----------------------------------------------------------------------- the rules that word these results
# Fed each committed CPU record's 06/kv_heads and synthetic results for what no record shows (a cache out of
# proportion, a formula that misses, a sliding cache still growing, an MLA output past rounding).

from helpers.formulas import verdicts  # noqa: E402
from helpers.measure.kv_caches import CacheCheck, SlidingStep  # noqa: E402
from helpers.measure.mla import MLACheck  # noqa: E402


@pytest.mark.parametrize("record", ["cpu-amd-epyc", "cpu-intel-xeon"])
def test_heads_words_follow_each_record(record):
    from helpers import records
    from helpers.present import replay

    rows, _ = replay.load("06/kv_heads", [records.RESULTS / record])
    equal, proportion = kv_caches.heads_verdicts(rows)
    assert equal.words == f"equal to the formula to the byte in every row ({len(rows)} of {len(rows)})"
    by = {(r.kv_heads, r.tokens, r.batch): r.measured_bytes for r in rows}
    assert all(by[(h, t, b)] * 1 == by[(1, t, b)] * h for h, t, b in by)        # checked here, independently
    assert proportion.evidence["exact"] == 1.0 and proportion.evidence["ratio"] == 8.0
    assert "exact proportion" in proportion.words and "holds exactly 8× the bytes of MQA (1 K/V head)" in proportion.words


def test_heads_words_when_a_cache_misses():
    rows = [CacheCheck("MHA", 16, 1, 1000, 1000, 8), CacheCheck("MQA", 16, 1, 130, 125, 1)]
    equal, proportion = kv_caches.heads_verdicts(rows)
    assert equal.words == "equal to the formula in 1 of 2 rows; row 2 differs"
    assert proportion.evidence["exact"] == 0.0 and "not in proportion" in proportion.words and "7.7×" in proportion.words


def _steps(measured, window=4, per=10):
    return [SlidingStep(window, n, m, per * min(n, window - 1), per * min(n, window), per * n)
            for n, m in enumerate(measured, start=1)]


def test_sliding_words_name_the_cap_from_the_bytes():
    equal, cap = kv_caches.sliding_verdicts(_steps([10, 20, 30, 30, 30, 30]))
    assert equal.words == "equal to the formula at window − 1 slots to the byte in every step (6 of 6)"
    assert cap.words.startswith("the cache stops growing at 3 tokens (30 B) and stays there to 6")
    assert cap.evidence["no_window_bytes"] == 60 and "2.0× that" in cap.words
    # a cache that never stops growing is not called capped
    equal, cap = kv_caches.sliding_verdicts(_steps([10, 20, 30, 40]))
    assert "3 of 4" in equal.words and cap.words.startswith("the cache is still growing at 4 tokens (40 B)")


def test_sliding_words_on_a_real_cache(tmp_path):
    rows = kv_caches.measure_sliding(window=8, prompt=3, total=20, folder=tmp_path, base=SMALL)
    equal, cap = kv_caches.sliding_verdicts(rows)
    per_token = 2 * 4 * 2 * 32 * 4
    assert "every step (18 of 18)" in equal.words
    assert cap.evidence["from_tokens"] == 7 and cap.evidence["cap_bytes"] == 7 * per_token


def test_mla_words_from_the_checks():
    rows = [MLACheck(16, 1, 12288, 12288, 163840, 1.07e-6, 4.16), MLACheck(100, 1, 76800, 76800, 1024000, 1.07e-6, 4.23)]
    words = mla.mla_verdicts(rows, [CacheCheck("hf", 16, 1, 10, 10)])
    assert [v.rule for v in words] == ["byte_for_byte", "byte_for_byte", "rounding", "times_as"]
    assert "every row (2 of 2)" in words[0].words and "every row (1 of 1)" in words[1].words
    assert "float rounding: 1.1e-06 = 2.2 ε × 4.16" in words[2].words
    assert "13× the latent cache (163,840 against 12,288 B" in words[3].words
    bad = mla.mla_verdicts([MLACheck(16, 1, 12288, 12000, 163840, 1e-3, 1.0)])
    assert "in 0 of 1 rows" in bad[0].words and "more than float rounding" in bad[1].words


def test_mla_savings_and_cache_comparisons_are_worded_from_the_bytes():
    rows = {r.baseline.split(":")[0]: r for r in attention.mla_baselines()}
    same = rows["MHA of the same model"]
    assert attention.mla_saving(same).words.startswith("MLA caches 57× less than MHA of the same model")
    assert attention.mla_saving(rows["GQA of the same model"]).words.startswith("MLA caches 3.6× less than")
    v3, llama = memory.kv_bytes_per_token("deepseek-v3"), memory.kv_bytes_per_token("llama-3.1-8b")
    assert attention.cache_against(v3, llama, "Llama 3.1 8B").words == f"{verdicts.factor(llama / v3)} less than Llama 3.1 8B"
    assert attention.cache_against(2.0, 1.0, "x").words == "2.0× more than x"
    assert attention.cache_against(1.05, 1.0, "x").words == "as much as x (within 10%: 1.05×)"


def test_scorecard_words_by_hand():
    gqa, dense_gqa, dense_mqa = attention.scorecard_verdicts()
    # GQA paper, Table 1: GQA-8-XXL 47.1 against MHA-XXL 47.2, 0.28 s per sample against MQA-XXL's 0.24 and MHA's 1.51
    assert gqa.evidence["share"] == pytest.approx(47.1 / 47.2) and "99.8 % of it (nearly all)" in gqa.words
    assert "1.17× slower than MQA's 0.24 s" in gqa.words and "5.4× faster than MHA-XXL's 1.51 s" in gqa.words
    # DeepSeek-V2, Table 8: MHA 45.2 / 37.0 / 42.9 against GQA 41.2 / 35.6 / 37.7 and MQA 37.9 / 33.2 / 30.0
    assert dense_gqa.words.endswith("GQA (8 groups) on 3 of 3 benchmarks (by +1.4 to +5.2 points)")
    assert dense_mqa.words.endswith("MQA on 3 of 3 benchmarks (by +3.8 to +12.9 points)")
