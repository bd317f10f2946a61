"""Profiles: the tiny model through the real loading path, the real Mistral tokenizer, and clear
messages (never a hang) when a profile cannot run here."""
import json
import time

import pytest

from helpers.measure import local_models, models
from helpers.formulas import specs


def test_tiny_loads_through_from_pretrained(tiny):
    assert tiny.profile == "tiny" and tiny.device == "cpu" and tiny.dtype == "fp32"
    assert type(tiny.model).__name__ == "MistralForCausalLM"
    # the folder from_pretrained read holds safetensors weights, the config and the tokenizer file
    folder = local_models.build_tiny()
    assert {"config.json", "model.safetensors", local_models.TOKENIZER_FILE} <= {p.name for p in folder.iterdir()}
    assert json.loads((folder / "config.json").read_text())["num_key_value_heads"] == 2
    assert sum(p.numel() for p in tiny.model.parameters()) == specs.param_count(local_models.TINY_CONFIG)


def test_tiny_label_names_model_dtype_device_profile(tiny):
    assert tiny.label == "tiny (Mistral architecture, random weights) · fp32 · cpu · profile tiny"


def test_without_weights_keeps_the_description_and_records_small(tiny):
    import json

    from helpers import records

    bare = models.run_on(tiny, lambda m: None)[0]
    assert bare.model is None and bare.tokenizer is None and tiny.model is not None   # the original keeps its model
    assert bare.label == tiny.label and bare.spec == tiny.spec and bare.spec.hidden_size == local_models.TINY_CONFIG["hidden_size"]
    assert len(json.dumps(records.encode(bare))) < 20_000   # a recording keeps this beside its result (helpers.present.replay)
    on, value = models.run_on(tiny, lambda m, x, y=0: (m.model is not None, x + y), 3, y=4)
    assert value == (True, 7) and on.model is None and on.label == tiny.label   # fn saw the weights; the record does not


def test_tiny_weights_are_reproducible(tmp_path):
    from safetensors.torch import load_file

    a = load_file(local_models.build_tiny(tmp_path / "a") / "model.safetensors")
    b = load_file(local_models.build_tiny(tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_real_mistral_tokenizer(tiny):
    """The same ids as mistral-common's own SentencePiece tokenizer (the Mistral 7B v0.1 vocabulary)."""
    from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer

    ref = SentencePieceTokenizer(str(local_models.tokenizer_source()))
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
    assert name == "tiny-trained" and "no CUDA GPU" in reason


def test_unknown_profile(monkeypatch):
    monkeypatch.setenv("WORKSHOP_PROFILE", "mistral-70b")
    with pytest.raises(ValueError, match="allowed: auto, tiny, mistral-7b, mistral-7b-random"):
        models.resolve_profile()


def test_mistral_7b_offline_gives_the_fix_fast(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))   # an empty cache: weights absent
    t0 = time.perf_counter()
    with pytest.raises(local_models.ProfileUnavailable, match="HF_HUB_OFFLINE=1.*hf download mistralai/Mistral-7B-v0.1"):
        models.load("mistral-7b")
    assert time.perf_counter() - t0 < 10


def test_mistral_7b_random_needs_cuda():
    with pytest.raises(local_models.ProfileUnavailable, match="CUDA GPU"):
        models.load("mistral-7b-random", device="cpu")


def test_unknown_device():
    with pytest.raises(ValueError, match="allowed: auto, cuda, mps, cpu"):
        models.load("tiny", device="tpu")


# A stand-in Hub on 127.0.0.1 that answers every request the way huggingface.co answers a gated or
# missing repository (status and X-Error-Code header), so the profile's messages are tested on the
# real huggingface_hub client code path.
HUB_ANSWERS = {"gated": (403, "GatedRepo"), "missing": (404, "RepoNotFound")}


@pytest.fixture
def fake_hub():
    import http.server
    import threading

    servers = []

    def start(kind):
        status, code = HUB_ANSWERS[kind]

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", f"{code} (test hub)")
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(b'{"error": "test hub"}')

            do_GET = do_HEAD = _answer

            def log_message(self, *a):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()


def _load_message(env_extra):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(env_extra)
    code = ("from helpers.measure import local_models, models\n"
            "try:\n    models.load('mistral-7b')\nexcept local_models.ProfileUnavailable as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    return r.stdout + r.stderr


@pytest.mark.parametrize("kind,needle", [("gated", "is gated"), ("missing", "was not found on the Hub")])
def test_hub_answers_become_fixes(fake_hub, tmp_path, kind, needle):
    t0 = time.perf_counter()
    out = _load_message({"HF_ENDPOINT": fake_hub(kind), "HF_HUB_CACHE": str(tmp_path)})
    assert needle in out and "Fix:" in out and "Traceback" not in out
    assert time.perf_counter() - t0 < 30


def test_unreachable_hub_is_not_a_hang(tmp_path):
    t0 = time.perf_counter()
    out = _load_message({"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path)})
    assert "cannot be reached" in out and "Fix:" in out
    assert time.perf_counter() - t0 < 30


def test_stalled_hub_is_not_a_hang(tmp_path):
    """A Hub that accepts the connection and never answers: huggingface_hub's auth_check has no timeout
    of its own, so weights_status must give up after its `timeout` and say the Hub cannot be reached."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)   # the kernel completes the handshake; nothing ever reads or answers
        env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
        env.update(HF_ENDPOINT=f"http://127.0.0.1:{srv.getsockname()[1]}", HF_HUB_CACHE=str(tmp_path))
        code = "from helpers.measure import models\nprint(models.weights_status(probe_hub=True, timeout=2).message)\n"
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert "cannot be reached (TimeoutError)" in r.stdout and "Fix:" in r.stdout, r.stdout + r.stderr
    assert time.perf_counter() - t0 < 30


def test_default_dtype_by_device(monkeypatch):
    import torch

    assert models.default_dtype("tiny", "cpu") == "fp32"
    assert models.default_dtype("mistral-7b", "mps") == "bf16"
    # a CUDA GPU without native bf16 (a T4: compute capability 7.5) gets fp16, a newer one bf16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    assert models.default_dtype("mistral-7b", "cuda") == "fp16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert models.default_dtype("mistral-7b-random", "cuda") == "bf16"
