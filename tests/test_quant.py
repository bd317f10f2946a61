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


def test_bad_scheme_and_device():
    with pytest.raises(ValueError, match="allowed: int8, nf4, nf4-dq"):
        quant.bnb_config("int4")
    with pytest.raises(ValueError, match="cuda or cpu"):
        quant._device_map("mps")
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
