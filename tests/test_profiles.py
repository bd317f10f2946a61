"""Every function whose behaviour depends on the profile, for every profile a CPU can run (tiny,
tiny-trained — the default without a GPU —, small), and the 7B profiles as far as a CPU allows: the
message when their weights or their GPU are missing. Each expectation is the profile's own definition
(helpers.measure.models' configs, the training split, the notebooks' sizes), not a copy of the function."""
from __future__ import annotations

import json

import pytest

import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import roofline_bench  # noqa: E402  (scripts/roofline_bench.py)
from helpers.measure import local_models, models, quality, quant, sweeps  # noqa: E402
from helpers.decoding import regimes as decoding_regimes
from helpers.serving import measured as serving_bench
from helpers.serving import trained_profile

CPU_PROFILES = ("tiny", "tiny-trained", "small")
CONFIGS = {"tiny": local_models.TINY_CONFIG, "tiny-trained": local_models.TINY_CONFIG, "small": local_models.SMALL_CONFIG}


def test_the_cpu_profiles_are_the_local_ones():
    assert set(CPU_PROFILES) == set(local_models.LOCAL_PROFILES)
    assert set(local_models.TINY_PROFILES) < set(CPU_PROFILES)


@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_each_profile_resolves_as_set_and_runs_fp32_on_a_cpu(profile, monkeypatch):
    monkeypatch.setenv("WORKSHOP_PROFILE", f"  {profile.upper()} ")    # as typed: case and spaces forgiven
    assert models.resolve_profile() == (profile, f"WORKSHOP_PROFILE={profile} was set")
    assert models.default_dtype(profile, "cpu") == "fp32"


def test_auto_on_a_cpu_is_the_trained_tiny_model(monkeypatch):
    monkeypatch.delenv("WORKSHOP_PROFILE", raising=False)
    monkeypatch.setenv("WORKSHOP_DEVICE", "cpu")
    name, reason = models.resolve_profile()
    assert name == "tiny-trained" and "no CUDA GPU" in reason


@pytest.mark.slow
@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_each_profile_builds_a_folder_that_loads_with_its_own_config(profile):
    folder = models.built_folder(profile)
    cfg = json.loads((folder / "config.json").read_text())
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "vocab_size"):
        assert cfg[key] == CONFIGS[profile][key], key
    assert (folder / "model.safetensors").stat().st_size > 0
    assert (folder / local_models.TOKENIZER_FILE).exists()
    loaded = models.load(profile, device="cpu")
    assert (loaded.profile, loaded.dtype, loaded.device) == (profile, "fp32", "cpu")
    assert loaded.label.startswith(models.display_name(profile))
    assert quant.model_source(loaded) == folder              # notebook 05 reloads from here, quantized
    assert loaded.tokenizer.encode("Hello", add_special_tokens=False)


def test_tiny_trained_is_trained_and_the_random_tiny_is_not():
    assert models.display_name("tiny-trained") != models.display_name("tiny")
    assert trained_profile("tiny-trained") == "tiny-trained"
    assert trained_profile("tiny") == "tiny-trained"      # quality figures from trained weights
    assert trained_profile("small") == "tiny-trained"


@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_evaluation_text_by_profile(profile):
    text = quality.eval_text(profile)
    if profile in local_models.TINY_PROFILES:      # the novel's held-out chapter, which tiny-trained never saw
        assert text == quality.heldout_eval_text()
    else:                                    # prose shipped with helpers, which no published model has seen
        assert text == quality.EVAL_TEXT.read_text(encoding="utf-8")
    assert len(text) > 1000


@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_sweep_sizes_on_a_cpu_stay_small(profile):
    s = sweeps.sweep_sizes(profile, "cpu")
    if profile in local_models.TINY_PROFILES:
        assert max(s.memory_tokens) == 2048 and s.requests == 8
    else:   # the small model's forward costs ~40× the tiny one's: modest sizes
        assert max(s.memory_tokens) <= 1024 and max(s.ttft_tokens) <= 512 and max(s.users_batches) <= 4


@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_serving_workload_on_a_cpu_is_the_cpu_one(profile):
    w = serving_bench.workload(profile, "cpu")
    assert w == serving_bench.Workload()          # was: the small profile got the 7B GPU sizes on a CPU
    assert serving_bench.workload("mistral-7b").slots > w.slots
    assert serving_bench.workload("small", "cuda").slots > w.slots


@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_prefill_lengths_by_profile(profile):
    lengths = roofline_bench.prefill_lengths(profile, "cpu")
    ctx = CONFIGS[profile]["max_position_embeddings"]
    assert lengths == tuple(sorted(lengths)) and max(lengths) <= ctx
    assert lengths == ((128, 512, 2048) if profile in local_models.TINY_PROFILES else (64, 256))


class _Loaded:
    def __init__(self, profile, device="cpu"):
        self.profile, self.device = profile, device


@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_decode_regimes_measure_tiny_and_small_on_a_cpu(profile):
    got = decoding_regimes.regime_profiles(_Loaded(profile))
    assert set(got) <= set(CPU_PROFILES) and "small" in got and len(got) == 2
    assert got[0] == (profile if profile in local_models.TINY_PROFILES else "tiny")   # the loaded model reused
    assert decoding_regimes.regime_profiles(_Loaded(profile, "cuda")) == (profile,)

# The 7B profiles on a CPU (their missing GPU or weights, each with its fix): tests/test_models.py.
