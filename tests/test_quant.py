"""helpers.measure.quant: bitsandbytes footprints measured against the formula, the quality measures against
hand-computed values, and GPT-OSS-120B's MXFP4 size against its published checkpoint."""
import math

import pytest
import torch

from helpers import capacity
from helpers.formulas import memory, quantization, specs
from helpers.measure import local_models, quality, quant, texts
from helpers.present import quant_figures
from helpers.formulas.specs import PRESETS

SCHEMES = ("bf16", "int8", "nf4", "nf4-dq")


# ----------------------------------------------------------------------- footprint: measured

@pytest.fixture(scope="module")
def tiny_bf16_variants():
    """The tiny model loaded four ways with a bf16 base: plain bf16 and the three bitsandbytes schemes."""
    from transformers import AutoModelForCausalLM

    folder = local_models.build_tiny()
    out = {"bf16": AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).eval()}
    for scheme in quant.SCHEMES:
        out[scheme] = quant.load_quantized(folder, scheme, "cpu", "bf16")
    spec = specs.spec_from_config(out["bf16"].config.to_dict(), "tiny")
    return out, spec


def test_tiny_measured_equals_prediction_exactly_and_bf16_gt_int8_gt_nf4(tiny_bf16_variants):
    variants, spec = tiny_bf16_variants
    measured = {}
    for scheme, model in variants.items():
        fp = quant.footprint(model, spec, scheme, "bf16")
        assert fp["exact"], (scheme, fp)
        assert fp["measured_weight_bytes"] == memory.weight_bytes(spec, scheme, base_dtype="bf16").bytes
        assert fp["buffer_bytes"] >= 0
        assert fp["measured_model_bytes"] == fp["measured_weight_bytes"] + fp["buffer_bytes"]
        measured[scheme] = fp["measured_model_bytes"]
    assert measured["bf16"] > measured["int8"] > measured["nf4"] > measured["nf4-dq"]


def test_quantized_models_hold_bitsandbytes_layers(tiny_bf16_variants):
    import bitsandbytes as bnb

    variants, _ = tiny_bf16_variants
    assert any(isinstance(m, bnb.nn.Linear8bitLt) for m in variants["int8"].modules())
    four = [m for m in variants["nf4-dq"].modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert four and all(m.weight.quant_state.nested for m in four)
    assert not any(m.weight.quant_state.nested for m in variants["nf4"].modules() if isinstance(m, bnb.nn.Linear4bit))
    # the output head stays unquantized
    assert type(variants["nf4"].lm_head) is torch.nn.Linear


@pytest.mark.parametrize("name", PRESETS)
def test_presets_computed_bf16_gt_int8_gt_nf4(name):
    b = [memory.weight_bytes(name, s).bytes for s in SCHEMES]
    assert b[0] > b[1] > b[2] > b[3], dict(zip(SCHEMES, b))
    rows = quantization.preset_footprints(name, SCHEMES)
    assert [r.bytes for r in rows] == b


def test_mistral_footprints_worked_example():
    rows = {r.scheme: r for r in quantization.preset_footprints("mistral-7b-v0.1")}
    assert rows["bf16"].bytes == 2 * 7_241_732_096
    # int8: 6,979,321,856 linear weights at 1 B + 4 B per output row (1,376,256 rows) + the rest at bf16
    assert rows["int8"].bytes == 6_979_321_856 + 4 * 1_376_256 + 2 * (7_241_732_096 - 6_979_321_856)
    assert 0.51 < rows["int8"].vs_first < 0.52 and 0.30 < rows["nf4"].vs_first < 0.31


def test_embedding_share_tiny_against_mistral(tiny):
    t = quantization.embedding_share(tiny.spec)
    assert t.embedding_and_head == 2 * 32000 * 256 and t.share > 0.8
    assert quantization.embedding_share("mistral-7b-v0.1").share < 0.04


# ----------------------------------------------------------------------- quality measures

def test_perplexity_of_uniform_is_vocab_size():
    v = 50
    lp = torch.full((10, v), -math.log(v), dtype=torch.float64)
    assert quality.perplexity(lp, list(range(10))) == pytest.approx(v, rel=1e-9)


def test_kl_and_top1_hand_computed():
    ref = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    q = torch.log(torch.tensor([[0.9, 0.1], [0.9, 0.1]]))
    kl = quality.kl_per_position(ref, q)
    assert kl[0].item() == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1), rel=1e-6)
    assert kl[1].item() == pytest.approx(0.0, abs=1e-12)
    # argmax of [0.5, 0.5] is token 0, as for [0.9, 0.1]
    assert quality.top1_agreement(ref, q) == 1.0
    assert quality.top1_agreement(ref, torch.log(torch.tensor([[0.1, 0.9], [0.9, 0.1]]))) == 0.5
    same = quality.quality(ref, ref, [0, 1])
    assert same["kl_mean"] == 0 and same["top1_agreement"] == 1 and same["perplexity"] == same["reference_perplexity"]


def test_eval_text_is_shipped_and_tokenizes(tiny):
    text = texts.eval_text()
    assert 2_000 < len(text.encode()) < 20_000
    ids = quality.eval_ids(tiny.tokenizer)
    assert len(ids) > 500 and all(isinstance(i, int) for i in ids)
    assert quality.eval_ids(tiny.tokenizer, 100) == ids[:100]


# ----------------------------------------------------------------------- the comparison on the tiny model

def test_compare_on_tiny_profile(tiny):
    sizes = quant.Sizes(prompt_tokens=16, new_tokens=3, repeats=1, eval_tokens=96)
    res = quant.compare(tiny, sizes=sizes, progress=False)
    assert [r.scheme for r in res] == ["fp32", "int8", "nf4", "nf4-dq"]
    assert all(r.error is None for r in res), [r.error for r in res]
    assert all(r.footprint["exact"] for r in res)
    total = [r.footprint["measured_model_bytes"] for r in res]
    assert total[0] > total[1] > total[2] > total[3]
    assert res[0].quality["kl_mean"] == 0 and res[0].quality["top1_agreement"] == 1
    for r in res[1:]:
        assert r.quality["kl_mean"] > 0 and r.quality["positions"] == 96
        assert r.speed["prefill_s"] > 0 and r.speed["decode_tok_s"] > 0 and r.speed["prompt_tokens"] == 16
    # 8 bits lose less than 4
    assert res[1].quality["kl_mean"] < res[2].quality["kl_mean"]
    assert len(quant_figures.footprint_rows(res, tiny.spec, tiny.label)) == 4
    assert len(quant_figures.speed_rows(res, tiny.label)) == 4 and len(quant_figures.quality_rows(res, tiny.label)) == 4


def test_failed_scheme_is_a_row_not_a_crash(tiny, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("no kernel for this device")

    monkeypatch.setattr(quant, "load_quantized", boom)
    res = quant.compare(tiny, schemes=("nf4",), sizes=quant.Sizes(8, 2, 1, 32), progress=False)
    assert res[1].error == "RuntimeError: no kernel for this device"
    assert quant_figures.footprint_rows(res, tiny.spec, tiny.label)[1]["error"].startswith("RuntimeError")


def test_bnb_config_per_scheme():
    cfg = quant.bnb_config("nf4-dq", torch.float32)
    assert cfg.load_in_4bit and cfg.bnb_4bit_use_double_quant and cfg.bnb_4bit_quant_type == "nf4"
    assert quant.bnb_config("int8").load_in_8bit


# ----------------------------------------------------------------------- GPT-OSS-120B on one GPU

def test_gpt_oss_mxfp4_matches_published_checkpoint():
    pred = memory.weight_bytes("gpt-oss-120b", "mxfp4").bytes
    published = quantization.GPT_OSS_120B_CHECKPOINT_BYTES
    assert abs(pred - published) / published < 0.01
    assert pred == published  # the expert blocks + scales, the rest bf16: byte for byte


def test_gpt_oss_fits_one_h100_only_in_mxfp4_by_the_planners_budget():
    rows = {r.scheme: r for r in quantization.fit_on_gpu("gpt-oss-120b")}
    assert not rows["bf16"].fits and not rows["fp8"].fits and rows["mxfp4"].fits
    assert rows["bf16"].weight_bytes / 1e9 == pytest.approx(233.66, abs=0.01)   # "about 234 GB"
    # an H100 SXM reports 79.11 GiB; the planner keeps 0.9 of it less 1.5 GB: 0.9 × 79.11 × 2^30 − 1.5e9
    usable = 0.9 * 79.11 * 2**30 - 1.5e9
    assert rows["mxfp4"].memory_bytes == pytest.approx(79.11 * 2**30, rel=1e-6)
    assert rows["mxfp4"].usable_bytes == pytest.approx(usable, rel=1e-6)
    left = usable - 65_248_815_744
    assert rows["mxfp4"].kv_budget_bytes == pytest.approx(left, rel=1e-6)
    # the notebook's figures are the planner's: its KV budget, its max batch, its fits (max_batch ≥ 1)
    for s, r in rows.items():
        p = capacity.plan("gpt-oss-120b", "H100 SXM", weight_dtype=s, context=4096)
        assert r.kv_budget_bytes == p.kv_budget_bytes_per_gpu
        assert r.max_batch == p.max_batch and r.fits == (p.max_batch >= 1) == p.fits
    assert rows["mxfp4"].max_batch == int(left // memory.kv_cache_bytes("gpt-oss-120b", 4096))
    n = quantization.max_context_in(left, "gpt-oss-120b")
    assert memory.kv_cache_bytes("gpt-oss-120b", n) <= left < memory.kv_cache_bytes("gpt-oss-120b", n + 1)
    assert n > 131072 and rows["mxfp4"].longest_sequence == 131072
    assert rows["fp8"].longest_sequence == 0
    # the table the notebook draws labels the same figures
    table = {r["scheme"]: r for r in quant_figures.fit_rows(rows.values())}
    assert table["bf16"]["weights (GB)"] == pytest.approx(233.66, abs=0.01)
    assert table["mxfp4"]["KV cache room (bf16), one sequence up to (tokens)"] == 131072


def test_gpt_oss_fit_refuses_an_unknown_gpu():
    with pytest.raises(ValueError, match="unknown GPU"):
        quantization.fit_on_gpu(gpu="H800")


def test_max_context_honours_sliding_windows():
    # Mistral 7B v0.1 slides on every layer: beyond 4,096 tokens its cache stops growing
    assert quantization.max_context_in(10e9, "mistral-7b-v0.1", limit=10**6) == 10**6
    per = memory.kv_bytes_per_token("llama-3.1-8b")
    assert quantization.max_context_in(per * 1000, "llama-3.1-8b") == 1000
    assert quantization.max_context_in(per - 1, "llama-3.1-8b") == 0


def test_random_7b_copy_is_saved_again_when_it_may_hold_other_weights(tiny, tmp_path, monkeypatch):
    """mistral-7b-random is saved once to be quantized while loading. Here the tiny model stands in for
    it: a copy stamped by an older run (no GPU or library versions in the stamp) is replaced, without
    leaving its single model.safetensors beside the new shards; a matching copy is reused."""
    import dataclasses
    import json

    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    loaded = dataclasses.replace(tiny, profile="mistral-7b-random")
    folder = tmp_path / "mistral-7b-random"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"stale")
    (folder / "workshop-build.json").write_text(json.dumps({"config": tiny.config, "seed": 0}))
    assert quant.model_source(loaded) == folder
    stamp = json.loads((folder / "workshop-build.json").read_text())
    assert {"device", "torch", "transformers"} <= stamp.keys() and stamp["device"] == "cpu"
    assert (folder / "model.safetensors").stat().st_size > 1000   # written again, not the stale bytes
    before = (folder / "model.safetensors").stat().st_mtime_ns
    assert quant.model_source(loaded) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == before   # reused
    model = quant.load_quantized(folder, "nf4")
    assert quant.footprint(model, tiny.spec, "nf4", "fp32")["exact"]


# ----------------------------------------------------------------------- the rules that word a comparison
# Every rule is fed each regime it can meet: the two committed CPU records (05/compare, 05/random_vs_trained),
# and synthetic GPU-like results for what neither CPU shows — a step at ~90 % of its memory floor, a step 10×
# its floor (fixed cost), a step shorter than its floor (weights resident in a cache). The words are checked
# against the numbers, computed here independently of the rule.

from helpers.formulas import verdicts  # noqa: E402
from helpers.present import replay  # noqa: E402
from helpers import records  # noqa: E402

RECORDS = ("cpu-amd-epyc", "cpu-intel-xeon")


def _recorded(key: str, record: str):
    value, meta = replay.load(key, [records.RESULTS / record])
    assert meta["record"] == record
    return value


def _way(ratio: float) -> str:
    """The change rule written out again: 10 % either way."""
    return "up" if ratio > 1.1 else "down" if ratio < 1 / 1.1 else "same"


@pytest.mark.parametrize("record", RECORDS)
def test_speed_words_follow_each_records_numbers(record):
    on, res = _recorded("05/compare", record)
    ref = res[0]
    words = quant.speed_verdicts(res, on.spec)
    decode, prefill = words[0].words, words[1].words
    for r in res[1:]:
        for key, text in (("itl_s", decode), ("prefill_s", prefill)):
            part = text.split(f"{r.label} ")[1].split(";")[0]
            expect = {"up": "faster", "down": "slower", "same": "as fast"}[_way(ref.speed[key] / r.speed[key])]
            assert expect in part, (record, r.scheme, key, part)
    # the bytes a step reads: the measured weights less the fp32 embedding table (32,000 × 256 × 4 B)
    ref_bytes = ref.footprint["measured_weight_bytes"] - 32000 * 256 * 4
    assert quant.streamed_bytes(ref, on.spec, "fp32") == ref_bytes == 46_408_704
    follows = [v for v in words if v.rule == "time_follows_bytes"]
    assert len(follows) == 3
    for v, r in zip(follows, res[1:]):
        t = r.speed["itl_s"] / ref.speed["itl_s"]
        b = (r.footprint["measured_weight_bytes"] - 32000 * 256 * 4) / ref_bytes
        assert v.evidence["ratio"] == pytest.approx(t / b)
        # on both CPUs every quantized step takes more time than its bytes would give: not bytes-bound
        assert t / b > 1.1 and "something other than reading the weights sets its step" in v.words
    assert not any(v.rule == "against_floor" for v in words)       # no bandwidth known on a CPU
    assert "mostly" not in " ".join(map(str, words))


def test_the_records_disagree_where_their_numbers_do():
    """nf4's decode step is 1.37× slower on the Xeon and within the margin on the EPYC: the words differ."""
    (xon, xres), (eon, eres) = _recorded("05/compare", "cpu-intel-xeon"), _recorded("05/compare", "cpu-amd-epyc")
    xeon, epyc = quant.speed_verdicts(xres, xon.spec)[0].words, quant.speed_verdicts(eres, eon.spec)[0].words
    assert "bitsandbytes nf4 1.37× slower" in xeon and "bitsandbytes nf4 as fast (within 10%: 1.07×)" in epyc


def _synthetic(steps, bandwidth: float):
    """Mistral 7B in bf16 and the schemes of `steps` ({scheme: f(floors) → step seconds}) as a GPU would hold
    them; floors: each scheme's memory floor (weights less the embedding table, ÷ bandwidth)."""
    from helpers.formulas.specs import get_spec

    spec = get_spec("mistral-7b-v0.1")
    held = {s: memory.weight_bytes(spec, s).bytes for s in steps}
    floors = {s: (w - spec.vocab_size * spec.hidden_size * 2) / bandwidth for s, w in held.items()}
    rows = [quant.VariantResult(s, s if s == "bf16" else f"bitsandbytes {s}", 0.0,
                                {"measured_weight_bytes": held[s], "exact": True},
                                {"itl_s": step(floors), "prefill_s": 0.1}, None) for s, step in steps.items()]
    return spec, rows


def test_a_floor_dominated_gpu_step_reads_as_set_by_its_bytes():
    spec, rows = _synthetic({"bf16": lambda f: f["bf16"] / 0.9, "nf4": lambda f: f["nf4"] / 0.9}, 3.35e12)
    words = quant.speed_verdicts(rows, spec, 3.35e12, "the H100 SXM's datasheet 3,350 GB/s")
    follows = next(v for v in words if v.rule == "time_follows_bytes")
    assert follows.evidence["ratio"] == pytest.approx(1.0) and "its time follows its bytes" in follows.words
    assert "faster" in words[0].words
    floors = [v for v in words if v.rule == "against_floor"]
    assert len(floors) == 2
    for v in floors:
        assert v.evidence["fraction"] == pytest.approx(0.9)
        assert "90 % of the step (nearly all)" in v.words and "reading the weights sets the step" in v.words


def test_a_fixed_cost_gpu_step_reads_as_set_by_something_else():
    spec, rows = _synthetic({"bf16": lambda f: 10 * f["bf16"], "nf4": lambda f: 0.97 * 10 * f["bf16"]}, 3.35e12)
    ref, q = rows
    t = q.speed["itl_s"] / ref.speed["itl_s"]
    words = quant.speed_verdicts(rows, spec, 3.35e12, "the datasheet")
    follows = next(v for v in words if v.rule == "time_follows_bytes")
    assert follows.evidence["time_ratio"] == pytest.approx(t)
    assert follows.evidence["ratio"] > 1.1 and "something other than reading the weights" in follows.words
    assert "as fast (within 10%: 1.03×)" in words[0].words
    ref_floor = next(v for v in words if v.rule == "against_floor")
    assert ref_floor.evidence["fraction"] == pytest.approx(0.1)
    # 10 % sits on the SMALL threshold; whichever side its last bit falls, the words are that band's
    assert f"10 % of the step ({verdicts.share_band(ref_floor.evidence['fraction'])})" in ref_floor.words
    assert "something other than reading the weights sets most of the step" in ref_floor.words


def test_a_step_shorter_than_its_floor_is_named_with_its_reason():
    spec, rows = _synthetic({"bf16": lambda f: f["bf16"] / 1.7}, 26.7e9)
    w = quant.streamed_bytes(rows[0], spec, "bf16")
    v = quant.against_floor(rows[0].speed["itl_s"], w, 26.7e9, "the copy bandwidth", "bf16", cache_bytes=2 * w)
    assert v.evidence["fraction"] == pytest.approx(1.7)
    assert "read at 1.70× the copy bandwidth" in v.words and "fit the last-level cache" in v.words
    v = quant.against_floor(rows[0].speed["itl_s"], w, 26.7e9, "the copy bandwidth", "bf16", cache_bytes=w // 2)
    assert "that bandwidth was not what bounded it" in v.words
    # at the floor (within the margin) the floor is nearly all of the step
    v = quant.against_floor(1.0, 95, 100.0, "x", "y")
    assert "95 % of the step (nearly all)" in v.words and "reading the weights sets the step" in v.words


@pytest.mark.parametrize("record", RECORDS)
def test_footprint_and_quality_words_follow_each_record(record):
    on, res = _recorded("05/compare", record)
    fp = quant.footprint_verdicts(res, on.spec)
    assert fp[0].words == "equal to the prediction to the byte in every row (4 of 4)"
    for v, r in zip(fp[1:4], res[1:]):
        ratio = r.footprint["measured_weight_bytes"] / res[0].footprint["measured_weight_bytes"]
        ideal = {"int8": 0.25, "nf4": 0.125, "nf4-dq": 0.125}[r.scheme]      # of fp32
        assert v.evidence["ratio"] == pytest.approx(ratio) and v.evidence["rule_of_thumb"] == ideal
        assert "as the rule of thumb says" not in v.words and f"{verdicts.factor(ratio / ideal)} the rule of thumb's" in v.words
    assert "83 % of the parameters (most)" in fp[-1].words
    for v, r in zip(quant.quality_verdicts(res), res[1:]):
        q = r.quality
        assert f"{round((1 - q['top1_agreement']) * q['positions']):,} of {q['positions']:,} positions" in v.words
        assert ("about equal" in v.words) == (_way(q["perplexity"] / res[0].quality["perplexity"]) == "same")
    kl = {r.scheme: r.quality["kl_mean"] for r in res[1:3]}
    c = quant.closer(kl)
    assert kl["nf4"] / kl["int8"] > 1.1 and c.words.startswith("int8 stays closer to the reference")
    assert verdicts.factor(kl["nf4"] / kl["int8"]) in c.words


def test_closer_and_flips_at_their_edges():
    assert "stay as close" in quant.closer({"a": 1.0e-3, "b": 1.05e-3}).words
    assert quant.closer({"a": 0.0, "b": 1e-3}).words.startswith("a reproduces the reference")
    assert "both reproduce" in quant.closer({"a": 0.0, "b": 0.0}).words
    v = quant.flips_against(0.993, 0.55, "nf4")
    assert "0.7% of the positions on the trained model against 45.0%" in v.words and "64× fewer flips" in v.words
    assert "flips" not in quant.flips_against(1.0, 0.55, "int8").words.split("random one")[-1]


@pytest.mark.parametrize("record", RECORDS)
def test_trained_against_random_on_each_record(record):
    pair = _recorded("05/random_vs_trained", record)
    p = {x.profile: x.perplexity for x in pair["perplexities"]}
    uniform = pair["perplexities"][-1].perplexity
    a, b = quality.trained_against_random(p["tiny"], p["tiny-trained"], uniform)
    assert a.evidence["ratio"] == pytest.approx(p["tiny"] / uniform) and "1.08× a uniform guess's 32,000" in a.words
    assert b.evidence["ratio"] == pytest.approx(p["tiny"] / p["tiny-trained"]) and b.evidence["ratio"] > 20
    assert f"{verdicts.factor(p['tiny'] / p['tiny-trained'])} lower" in b.words


def test_rule_of_thumb_and_what_bitsandbytes_leaves_alone():
    assert quantization.rule_of_thumb("int8") == 0.5 and quantization.rule_of_thumb("nf4-dq") == 0.25
    assert quantization.rule_of_thumb("int8", "fp32") == 0.25
    rows = {w.scheme: w for w in quantization.preset_footprints("mistral-7b-v0.1")}
    assert "as the rule of thumb says" in quantization.against_rule_of_thumb(rows["int8"].vs_first, "int8").words
    nf4 = quantization.against_rule_of_thumb(rows["nf4"].vs_first, "nf4")
    assert nf4.evidence["over_rule"] == pytest.approx(rows["nf4"].vs_first / 0.25) and "1.23× the rule" in nf4.words
    assert quantization.moe_presets() == ["deepseek-v2-lite", "deepseek-v3", "gpt-oss-120b"]
    for m in quantization.moe_presets():
        v = quantization.left_alone(m)
        w = {x.scheme: x for x in quantization.preset_footprints(m, ("bf16", "int8"))}["int8"]
        assert v.evidence["fraction"] == pytest.approx(1 - w.quantized_share) and "(nearly all)" in v.words
    dense = quantization.left_alone("mistral-7b-v0.1")
    assert "(a small part)" in dense.words
    assert quantization.checkpoint_check(5, 5).words == "equal to the byte (5 B both)"
    assert quantization.checkpoint_check(105, 100).words.startswith("+5 B apart (5.00%")


def test_the_gpu_half_is_computed_or_cited():
    from helpers.present import expected, on_gpu, recorded

    sentences = quant_figures.footprint_on_gpu() + quant_figures.speed_on_gpu()
    assert [s.source for s in sentences] == ["computed", "computed", "cited", "computed"]
    floors = {f.scheme: f for f in on_gpu.quantized_decode_floors()}
    assert f"nf4 {floors['nf4'].step_floor_ms:,.2f} ms ({verdicts.factor(floors['bf16'].step_floor_ms / floors['nf4'].step_floor_ms)} shorter)" in sentences[1].text
    assert all("recorded" != s.source for s in sentences) and recorded.gpu_records("05") == []


def test_an_unknown_scheme_is_refused_not_read_as_nf4():
    with pytest.raises(ValueError, match="unknown bitsandbytes scheme 'int4'"):
        quant.bnb_config("int4")
