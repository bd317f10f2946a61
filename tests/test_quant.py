"""helpers.measure.quant: bitsandbytes footprints measured against the formula, the quality measures against
hand-computed values, GPT-OSS-120B's MXFP4 size against its published checkpoint, AWQ's bytes against
AutoAWQ's packing, and the tables notebook 05 draws on every value a measurement can take."""
import math

import pytest
import torch

from helpers import capacity
from helpers.formulas import memory, quantization, regime, specs
from helpers.measure import local_models, quality, quant
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
    text = quality.eval_text()
    assert 2_000 < len(text.encode()) < 20_000
    ids = quality.eval_ids(tiny.tokenizer)
    assert len(ids) > 500 and all(isinstance(i, int) for i in ids)
    assert quality.eval_ids(tiny.tokenizer, 100) == ids[:100]


# ----------------------------------------------------------------------- the comparison on the tiny model

def test_compare_on_tiny_profile(tiny):
    sizes = quant.Sizes(prompt_tokens=16, new_tokens=3, repeats=1, eval_tokens=96)
    res = quant.compare(tiny, sizes=sizes)
    assert [r.scheme for r in res] == ["fp32", "int8", "nf4", "nf4-dq"]
    assert all(r.error is None for r in res), [r.error for r in res]
    assert all(r.footprint["exact"] for r in res)
    total = [r.footprint["measured_model_bytes"] for r in res]
    assert total[0] > total[1] > total[2] > total[3]
    assert res[0].quality["kl_mean"] == 0 and res[0].quality["top1_agreement"] == 1
    for r in res[1:]:
        assert r.quality["kl_mean"] > 0 and r.quality["positions"] == 96
        assert r.speed["prefill_s"] > 0 and r.speed["itl_s"] > 0 and r.speed["prompt_tokens"] == 16
    # 8 bits lose less than 4
    assert res[1].quality["kl_mean"] < res[2].quality["kl_mean"]
    assert len(quant_figures.footprint_rows(res, tiny.spec)) == 4
    assert len(quant_figures.speed_rows(res, tiny.spec)) == 4 and len(quant_figures.quality_rows(res)) == 4


def test_failed_scheme_is_a_row_not_a_crash(tiny, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("no kernel for this device")

    monkeypatch.setattr(quant, "load_quantized", boom)
    res = quant.compare(tiny, schemes=("nf4",), sizes=quant.Sizes(8, 2, 1, 32))
    assert res[1].error == "RuntimeError: no kernel for this device"
    assert quant_figures.footprint_rows(res, tiny.spec)[1]["error"].startswith("RuntimeError")
    assert len(quant_figures.speed_rows(res, tiny.spec)) == 1 and len(quant_figures.quality_rows(res)) == 1


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
    rows = {r["scheme"]: r for r in quantization.fit_on_gpu("gpt-oss-120b")}
    assert not rows["bf16"]["fits"] and not rows["fp8"]["fits"] and rows["mxfp4"]["fits"]
    assert rows["bf16"]["weight_bytes"] / 1e9 == pytest.approx(233.66, abs=0.01)   # "about 234 GB"
    # an H100 SXM reports 79.11 GiB; the planner keeps 0.92 of it less 1.5 GB: 0.92 × 79.11 × 2^30 − 1.5e9
    usable = 0.92 * 79.11 * 2**30 - 1.5e9
    assert rows["mxfp4"]["memory_bytes"] == pytest.approx(79.11 * 2**30, rel=1e-6)
    assert rows["mxfp4"]["usable_bytes"] == pytest.approx(usable, rel=1e-6)
    left = usable - 65_248_815_744
    assert rows["mxfp4"]["kv_budget_bytes"] == pytest.approx(left, rel=1e-6)
    # the notebook's figures are the planner's: its KV budget, its max batch, its fits (max_batch ≥ 1)
    for s, r in rows.items():
        p = capacity.plan("gpt-oss-120b", "H100 SXM", weight_dtype=s, context=4096)
        assert r["kv_budget_bytes"] == p.kv_budget_bytes_per_gpu
        assert r["max_batch"] == p.max_batch and r["fits"] == (p.max_batch >= 1) == p.fits
    assert rows["mxfp4"]["max_batch"] == int(left // memory.kv_cache_bytes("gpt-oss-120b", 4096))
    n = quantization.max_context_in(left, "gpt-oss-120b")
    assert memory.kv_cache_bytes("gpt-oss-120b", n) <= left < memory.kv_cache_bytes("gpt-oss-120b", n + 1)
    assert n > 131072 and rows["mxfp4"]["longest_sequence"] == 131072
    assert rows["fp8"]["longest_sequence"] == 0
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


def test_an_unknown_scheme_is_refused_not_read_as_nf4():
    with pytest.raises(ValueError, match="unknown bitsandbytes scheme 'int4'"):
        quant.bnb_config("int4")


# ----------------------------------------------------------------------- the computed facts 05's prose states

def test_gpt_oss_facts_the_notebook_states():
    """05 types these from the config in static prose: pinned here."""
    spec, pb = specs.get_spec("gpt-oss-120b"), specs.param_breakdown("gpt-oss-120b")
    assert f"{pb.total / 1e9:,.1f}" == "116.8" and f"{pb.experts / pb.total:.0%}" == "98%"
    assert spec.num_experts == 128 and spec.num_layers == 36 and spec.sliding_window == 128
    assert sum(t == "sliding_attention" for t in spec.layer_types) == 18
    moe = [m for m in specs.PRESETS if specs.get_spec(m).num_experts]
    assert moe == ["deepseek-v2-lite", "deepseek-v3", "gpt-oss-120b"]
    for m in moe:        # "share bitsandbytes quantizes is small" for the experts' presets
        assert quantization.preset_footprints(m, ("bf16", "int8"))[1].quantized_share < 0.1


def test_rule_of_thumb():
    assert quantization.rule_of_thumb("int8") == 0.5 and quantization.rule_of_thumb("nf4-dq") == 0.25
    assert quantization.rule_of_thumb("int8", "fp32") == 0.25 and quantization.rule_of_thumb("nf4", "fp32") == 0.125


# ----------------------------------------------------------------------- bytes per weight, format by format

def test_awq_bytes_are_autoawqs_packing():
    """AutoAWQ's WQLinear_GEMM (awq/modules/linear/gemm.py) registers qweight int32 (in, out / 8), qzeros int32
    (in / group, out / 8): the zero points are 4-bit integers, eight to an int32, not fp16; scales fp16
    (in / group, out). Their bytes are matrix_bytes('awq')."""
    for k, n, g in ((4096, 4096, 128), (4096, 14336, 128), (14336, 4096, 128), (256, 896, 64)):
        pack = 32 // 4
        qweight = torch.zeros((k, n // pack), dtype=torch.int32)
        qzeros = torch.zeros((k // g, n // pack), dtype=torch.int32)
        scales = torch.zeros((k // g, n), dtype=torch.float16)
        held = sum(t.numel() * t.element_size() for t in (qweight, qzeros, scales))
        assert quantization.matrix_bytes("awq", k, n, g) == held
        # per group of g weights: g/2 B of codes, ½ B of zero point, 2 B of scale
        assert held == k * n * (0.5 + 0.5 / g + 2 / g)
        # an fp16 zero point would have cost 2 B a group, not ½
        assert held < k * n * (0.5 + 2 / g + 2 / g)
    assert quantization.bits_per_weight("awq") == pytest.approx(4 + 20 / 128)
    with pytest.raises(ValueError, match="groups of 128"):
        quantization.matrix_bytes("awq", 100, 4096)


def test_bits_per_weight_of_each_format():
    bits = {f: quantization.bits_per_weight(f) for f in quantization.FORMATS}
    assert bits["bf16"] == 16 and bits["mxfp4"] == 4.25          # gpt-oss's model card: "4.25 bits per parameter"
    assert bits["nf4"] == pytest.approx(4 + 32 / 64 + 8 * 64 / 4096**2)                # absmax per 64 + code book
    assert bits["int8"] == pytest.approx(8 + 32 / 4096) and bits["fp8"] == pytest.approx(8, abs=1e-5)
    assert bits["nf4-dq"] < bits["awq"] < bits["mxfp4"] < bits["nf4"] < bits["fp8"] < bits["int8"] < bits["bf16"]
    rows = quant_figures.formats_rows()
    assert [r["format"] for r in rows] == list(quantization.FORMATS) and rows[0]["÷ bf16"] == 1
    with pytest.raises(ValueError, match="unknown format"):
        quantization.matrix_bytes("int3")


def test_the_checkpoint_row_on_equal_and_unequal_bytes():
    (row,) = quantization.checkpoint_rows(5, 5)
    assert row["predicted − checkpoint (B)"] == 0 and row["predicted ÷ checkpoint"] == 1.0
    (row,) = quantization.checkpoint_rows(95, 100)
    assert row["predicted − checkpoint (B)"] == -5 and row["predicted ÷ checkpoint"] == 0.95
    (row,) = quantization.checkpoint_rows(0, 0)
    assert math.isnan(row["predicted ÷ checkpoint"])


# ----------------------------------------------------------------------- 05's tables on every value a measurement can take
# The two committed CPU records, and synthetic results for what neither shows: a timer that saw nothing (0), a
# step below its floor, at it, far above it, a failed scheme, a reference alone, one untimed model.

from helpers.present import replay  # noqa: E402
from helpers import records  # noqa: E402

RECORDS = ("cpu-amd-epyc", "cpu-intel-xeon")


def _recorded(key: str, record: str):
    value, meta = replay.load(key, [records.RESULTS / record])
    assert meta["record"] == record
    return value


def _synthetic(steps, bandwidth: float = 3.35e12, prefill: float = 0.1):
    """Mistral 7B in bf16 and the schemes of `steps` ({scheme: f(floors) → step seconds}) as a GPU would hold
    them; floors: each scheme's memory floor (weights less the embedding table, ÷ bandwidth)."""
    spec = specs.get_spec("mistral-7b-v0.1")
    held = {s: memory.weight_bytes(spec, s).bytes for s in steps}
    floors = {s: (w - spec.vocab_size * spec.hidden_size * 2) / bandwidth for s, w in held.items()}
    rows = [quant.VariantResult(s, s if s == "bf16" else f"bitsandbytes {s}", 0.0,
                                {"measured_weight_bytes": held[s], "predicted_weight_bytes": held[s], "metadata_bytes": 0,
                                 "buffer_bytes": 0, "measured_model_bytes": held[s], "exact": True},
                                {"prompt_tokens": 8, "itl_s": step(floors), "prefill_s": prefill},
                                {"perplexity": 5.0, "reference_perplexity": 5.0, "kl_mean": 0.0, "kl_max": 0.0,
                                 "top1_agreement": 1.0, "positions": 100}) for s, step in steps.items()]
    return spec, rows


@pytest.mark.parametrize("record", RECORDS)
def test_the_tables_of_each_record(record):
    on, res = _recorded("05/compare", record)
    fp = {r["scheme"]: r for r in quant_figures.footprint_rows(res, on.spec)}
    assert all(r["measured − predicted (B)"] == 0 for r in fp.values())
    # the tiny model is mostly embedding: every scheme holds more than the rule of thumb's share of fp32
    assert [fp[r.label]["÷ rule of thumb label"] for r in res] == ["at", "above", "above", "above"]
    sp = quant_figures.speed_rows(res, on.spec)
    ref_bytes = res[0].footprint["measured_weight_bytes"] - 32000 * 256 * 4
    for row, r in zip(sp, res):
        t = r.speed["itl_s"] / res[0].speed["itl_s"]
        b = (r.footprint["measured_weight_bytes"] - 32000 * 256 * 4) / ref_bytes
        assert row["step ÷ reference"] == pytest.approx(t) and row["bytes read ÷ reference"] == pytest.approx(b)
        assert row["time ÷ bytes"] == pytest.approx(t / b) and row["decode (tokens/s)"] == pytest.approx(1 / r.speed["itl_s"])
        assert row["time ÷ bytes label"] == regime.label(t / b)
    assert sp[0]["time ÷ bytes label"] == "at" and "floor (ms)" not in sp[0]    # no bandwidth known on a CPU
    # on both CPUs each quantized step costs more than its bytes would give
    assert all(row["time ÷ bytes label"] == "above" for row in sp[1:])
    q = quant_figures.quality_rows(res)
    assert q[0]["perplexity ÷ reference label"] == "at" and q[0]["positions with another top token"] == 0
    for row, r in zip(q[1:], res[1:]):
        assert row["positions with another top token"] == round((1 - r.quality["top1_agreement"]) * r.quality["positions"])


def test_speed_rows_at_below_and_far_above_the_floor():
    for factor, want in ((1.0, "at"), (0.5, "below"), (1000.0, "above")):
        spec, rows = _synthetic({"bf16": lambda f, k=factor: k * f["bf16"], "nf4": lambda f, k=factor: k * f["nf4"]})
        out = quant_figures.speed_rows(rows, spec, 3.35e12)
        assert [r["step ÷ floor label"] for r in out] == [want, want]
        assert out[1]["time ÷ bytes label"] == "at" and out[1]["step ÷ floor"] == pytest.approx(factor)
        assert out[1]["floor (ms)"] < out[0]["floor (ms)"]
    # a fixed cost: the same step whatever the bytes, so time ÷ bytes is above
    spec, rows = _synthetic({"bf16": lambda f: 10 * f["bf16"], "nf4": lambda f: 10 * f["bf16"]})
    out = quant_figures.speed_rows(rows, spec, 3.35e12)
    assert out[1]["step ÷ reference"] == 1.0 and out[1]["time ÷ bytes label"] == "above"


def test_speed_rows_on_a_zero_timer_one_model_and_a_failure():
    spec, rows = _synthetic({"bf16": lambda f: 0.0, "nf4": lambda f: 0.0}, prefill=0.0)
    out = quant_figures.speed_rows(rows, spec, 3.35e12)
    assert math.isinf(out[0]["decode (tokens/s)"]) and math.isnan(out[1]["step ÷ reference"])
    assert out[1]["time ÷ bytes label"] == "–" and out[0]["step ÷ floor label"] == "below"
    spec, rows = _synthetic({"bf16": lambda f: f["bf16"], "nf4": lambda f: 0.0})
    out = quant_figures.speed_rows(rows, spec)
    assert out[1]["step ÷ reference"] == 0 and out[1]["time ÷ bytes label"] == "below"
    spec, rows = _synthetic({"bf16": lambda f: f["bf16"]})
    assert len(quant_figures.speed_rows(rows, spec)) == 1 and quant_figures.speed_rows(rows, spec)[0]["step ÷ reference"] == 1
    spec, rows = _synthetic({"bf16": lambda f: f["bf16"], "nf4": lambda f: f["nf4"]})
    rows[1] = quant.VariantResult("nf4", "bitsandbytes nf4", 0.0, {}, {}, None, error="RuntimeError: no kernel")
    assert len(quant_figures.speed_rows(rows, spec)) == 1 and len(quant_figures.quality_rows(rows)) == 1
    assert quant_figures.footprint_rows(rows, spec)[1] == {"scheme": "bitsandbytes nf4", "error": "RuntimeError: no kernel"}
    rows[0].speed = {}                               # the reference untimed: nothing to time against
    assert quant_figures.speed_rows(rows, spec) == []


def test_quality_rows_below_at_and_above_the_reference():
    spec, rows = _synthetic({"bf16": lambda f: 1.0, "int8": lambda f: 1.0, "nf4": lambda f: 1.0})
    rows[1].quality = {**rows[1].quality, "perplexity": 4.0, "kl_mean": 1e-3, "top1_agreement": 0.97}
    rows[2].quality = {**rows[2].quality, "perplexity": 6.0}
    q = quant_figures.quality_rows(rows)
    assert [r["perplexity ÷ reference label"] for r in q] == ["at", "below", "above"]
    assert q[1]["positions with another top token"] == 3
    rows[0].quality = {**rows[0].quality, "perplexity": 0.0}       # nothing to divide by
    assert quant_figures.quality_rows(rows)[1]["perplexity ÷ reference label"] == "above"


def test_footprint_rows_when_measured_and_predicted_differ():
    spec, rows = _synthetic({"bf16": lambda f: 1.0, "nf4": lambda f: 1.0})
    rows[1].footprint = {**rows[1].footprint, "measured_weight_bytes": rows[1].footprint["predicted_weight_bytes"] - 64}
    fp = quant_figures.footprint_rows(rows, spec)
    assert fp[1]["measured − predicted (B)"] == -64 and fp[0]["÷ rule of thumb label"] == "at"
    assert fp[1]["÷ rule of thumb label"] == "above"     # Mistral's nf4: 0.31 of bf16 against the quarter


def test_computed_tables_of_weights_and_presets():
    rows = {r["scheme"]: r for r in quant_figures.weights_rows(quantization.preset_footprints("mistral-7b-v0.1"))}
    assert rows["int8"]["÷ rule of thumb label"] == "at" and rows["nf4"]["÷ rule of thumb label"] == "above"
    presets = quant_figures.presets_rows()
    assert [r["model"] for r in presets] == list(PRESETS)
    assert {r["model"]: r["nf4 ÷ bf16 ÷ ¼ label"] for r in presets}["gpt-oss-120b"] == "above"


def test_perplexity_rows_on_zero_and_empty():
    from helpers.measure.training import Perplexity

    ps = [Perplexity("a", "tiny", 100.0, 10, "x"), Perplexity("b", "tiny-trained", 0.0, 10, "x")]
    rows = quant_figures.perplexity_rows(ps)
    assert rows[0]["first ÷ this"] == 1 and math.isinf(rows[1]["first ÷ this"])
    assert quant_figures.perplexity_rows([]) == []


# ----------------------------------------------------------------------- KV-cache quantization's tables

def _kv(steps_ms, kl=(1e-4, 1e-3, 1e-2)):
    from helpers.serving import kv_quant

    names = list(kv_quant.SCHEMES)
    sizes = [kv_quant.SchemeBytes(s, 301, m, m, m, m, 0, 0, 0.0) for s, m in zip(names, (1000, 520, 300, 200))]
    steps = [kv_quant.SchemeSpeed(s, 300, ms, 0.0) for s, ms in zip(names, steps_ms)]
    quality = [kv_quant.SchemeQuality(s, 99, k, 10 * k, 1 - k) for s, k in zip(names[1:], kl)]
    return sizes, steps, quality


def test_kv_tables_on_every_value():
    sizes, steps, quality = _kv((2.0, 2.0, 4.0, 1.0))
    b = quant_figures.kv_bytes_rows(sizes)
    assert [r["÷ full precision"] for r in b] == [1.0, 0.52, 0.3, 0.2] and all(r["measured − formula (B)"] == 0 for r in b)
    s = quant_figures.kv_speed_rows(steps)
    assert [r["÷ full precision label"] for r in s] == ["at", "at", "above", "below"]
    q = quant_figures.kv_quality_rows(quality)
    assert [r["positions with another top token"] for r in q] == [0, 0, 1]
    zero = quant_figures.kv_speed_rows(_kv((0.0, 0.0, 0.0, 0.0))[1])     # a timer that saw nothing
    assert all(r["÷ full precision label"] == "–" for r in zero)
    one = quant_figures.kv_speed_rows(_kv((3.0,))[1])                   # the full-precision cache alone
    assert len(one) == 1 and one[0]["÷ full precision"] == 1
    assert quant_figures.kv_bytes_rows([]) == [] and quant_figures.kv_speed_rows([]) == []


@pytest.mark.parametrize("record", RECORDS)
def test_kv_recording_of_each_record_loads_when_there_is_one(record):
    got = replay.load("05/kv_cache", [records.RESULTS / record])
    if isinstance(got, str):
        pytest.skip(f"{record} holds no 05/kv_cache recording: {got}")
    run = got[0]
    assert [r.scheme for r in run.sizes][0] == "full precision"
    assert all(r["measured − formula (B)"] == 0 for r in quant_figures.kv_bytes_rows(run.sizes))
    assert len(quant_figures.kv_speed_rows(run.steps)) == len(run.steps)


def test_kv_projected_rows_for_mistral():
    rows = {r["scheme"]: r for r in quant_figures.kv_projected_rows("mistral-7b-v0.1", 4096)}
    assert rows["full precision"]["÷ full precision"] == 1
    assert rows["full precision"]["cache (B)"] == memory.kv_cache_bytes("mistral-7b-v0.1", 4096)
    assert rows["fp8"]["users or context ×"] == pytest.approx(2, rel=0.01)
    assert rows["2-bit"]["users or context ×"] > rows["4-bit"]["users or context ×"] > rows["fp8"]["users or context ×"]
