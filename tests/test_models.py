"""Profiles: the tiny model through the real loading path, the real Mistral tokenizer, and clear
messages (never a hang) when a profile cannot run here."""
import json
import time

import pytest

from helpers import models, specs


def test_tiny_loads_through_from_pretrained(tiny):
    assert tiny.profile == "tiny" and tiny.device == "cpu" and tiny.dtype == "fp32"
    assert type(tiny.model).__name__ == "MistralForCausalLM"
    # the folder from_pretrained read holds safetensors weights, the config and the tokenizer file
    folder = models.build_tiny()
    assert {"config.json", "model.safetensors", models.TOKENIZER_FILE} <= {p.name for p in folder.iterdir()}
    assert json.loads((folder / "config.json").read_text())["num_key_value_heads"] == 2
    assert sum(p.numel() for p in tiny.model.parameters()) == specs.param_count(models.TINY_CONFIG)


def test_tiny_label_names_model_dtype_device_profile(tiny):
    assert tiny.label == "tiny (Mistral architecture, random weights) · fp32 · cpu · profile tiny"


def test_tiny_weights_are_reproducible(tmp_path):
    from safetensors.torch import load_file

    a = load_file(models.build_tiny(tmp_path / "a") / "model.safetensors")
    b = load_file(models.build_tiny(tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_real_mistral_tokenizer(tiny):
    """The same ids as mistral-common's own SentencePiece tokenizer (the Mistral 7B v0.1 vocabulary)."""
    from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer

    ref = SentencePieceTokenizer(str(models.tokenizer_source()))
    text = "Inference is a recurring cost."
    ids = tiny.tokenizer(text)["input_ids"]
    assert ids == ref.encode(text, bos=True, eos=False)
    assert ids[0] == 1 and len(tiny.tokenizer) == 32000
    assert tiny.tokenizer.decode(ids, skip_special_tokens=True) == text


def test_profile_from_environment(monkeypatch):
    monkeypatch.setenv("WORKSHOP_PROFILE", "tiny")
    assert models.resolve_profile() == ("tiny", "WORKSHOP_PROFILE=tiny was set")
    monkeypatch.setenv("WORKSHOP_PROFILE", "auto")
    name, reason = models.resolve_profile(device="cpu")
    assert name == "tiny" and "no CUDA GPU" in reason


def test_unknown_profile(monkeypatch):
    monkeypatch.setenv("WORKSHOP_PROFILE", "mistral-70b")
    with pytest.raises(ValueError, match="allowed: auto, tiny, mistral-7b, mistral-7b-random"):
        models.resolve_profile()


def test_mistral_7b_offline_gives_the_fix_fast(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))   # an empty cache: weights absent
    t0 = time.perf_counter()
    with pytest.raises(models.ProfileUnavailable, match="HF_HUB_OFFLINE=1.*hf download mistralai/Mistral-7B-v0.1"):
        models.load("mistral-7b")
    assert time.perf_counter() - t0 < 10


def test_mistral_7b_random_needs_cuda():
    with pytest.raises(models.ProfileUnavailable, match="CUDA GPU"):
        models.load("mistral-7b-random", device="cpu")


def test_unknown_device():
    with pytest.raises(ValueError, match="allowed: auto, cuda, mps, cpu"):
        models.load("tiny", device="tpu")
