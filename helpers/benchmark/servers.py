"""The server configurations the benchmark compares, as command lines for `ServerProcess`:
`transformers serve` one request at a time (the talk's "HF baseline") and with continuous batching
(its KV cache bounded on a CPU); the talk's vLLM steps, each one change from today's default (its CPU
build from .venv-vllm here, this Python's on a CUDA host); SGLang on a CUDA host; the workshop's own
readable engine. `available(profile)` lists what this machine can run and why not the others.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..measure import local_models, models
from ..records import mask_paths, write_atomic

# A Mistral [INST] chat template (what Mistral 7B Instruct's tokenizer_config.json carries), for the
# chat endpoint; the benchmark itself uses /v1/completions (plain text prompts, no template).
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
                 "{% elif m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}{% else %}"
                 "{{ raise_exception('this chat template takes the roles user and assistant') }}{% endif %}{% endfor %}")

# Continuous batching's KV cache, bounded on a CPU: 64 blocks (transformers' default page holds 256 tokens:
# ContinuousBatchingConfig.page_size) and at most 512 tokens per step keep the server near 0.6 GB resident.
CPU_CB_LIMITS = {"num_blocks": 64, "max_batch_tokens": 512}


@dataclass
class EngineConfig:
    name: str
    engine: str                      # "transformers", "vllm", "sglang"
    command: list[str]
    model: str                       # the model name requests must carry
    description: str
    ready_timeout_s: float = 120.0
    health_path: str = "/health"
    env: dict = field(default_factory=dict)
    needs_cuda: bool = False
    spinners: tuple[str, ...] = ()   # its processes that busy-wait (process.yield_spinners), by title

    @property
    def command_line(self) -> str:
        return mask_paths(" ".join(self.command))

    def to_dict(self) -> dict:
        return {"name": self.name, "engine": self.engine, "command": self.command_line,
                "model": self.model, "description": self.description}


def serve_folder(profile: str | None = None, folder: Path | None = None, weights: bool = True) -> Path | str:
    """A model folder `transformers serve`, vLLM and SGLang can load: the profile's weights and config
    (linked) plus what AutoTokenizer needs (`tokenizer.model`, a Llama `tokenizer_config.json`). mistral-7b:
    the Hub id, once its weights are here; mistral-7b-random: notebook 05's saved weights, or with
    `weights=False` the config alone (vLLM and SGLang make random weights: --load-format dummy)."""
    name, _ = models.resolve_profile(profile)
    if name == "mistral-7b":
        model_id = models.hub_model_id()
        status = models.weights_status(model_id)
        if not status.available:
            raise local_models.ProfileUnavailable(f"profile mistral-7b cannot be served: {status.message}")
        return model_id
    if name in local_models.LOCAL_PROFILES:
        src = models.built_folder(name)
    else:
        src = random_7b_folder()
        saved = (src / "workshop-build.json").exists() and any(src.glob("*.safetensors"))
        if not saved and weights:
            raise local_models.ProfileUnavailable(unsaved_random_weights(src))
        if not saved:
            from ..formulas.specs import load_config

            src.mkdir(parents=True, exist_ok=True)
            write_atomic(src / "config.json", json.dumps(load_config("mistral-7b-v0.1")[1], indent=1).encode())
    dst = Path(folder or local_models.cache_dir() / f"{src.name}-serve")
    dst.mkdir(parents=True, exist_ok=True)
    wanted = {item.name: item for item in src.iterdir()
              if item.suffix in (".json", ".safetensors") and item.name not in ("workshop-build.json", "training.json")}
    for old in dst.iterdir():   # links of an earlier build (a sharded save replaced by one file, say)
        if old.is_symlink() and old.name not in wanted:
            old.unlink()
    for item_name, item in wanted.items():
        tmp_link = dst / f".{item_name}.{os.getpid()}.link"   # a rename: a reader never sees no link
        tmp_link.unlink(missing_ok=True)
        tmp_link.symlink_to(item.resolve())
        os.replace(tmp_link, dst / item_name)
    write_atomic(dst / "tokenizer.model", local_models.tokenizer_source().read_bytes())
    tok_config = {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                  "add_bos_token": True, "add_eos_token": False, "legacy": False, "model_max_length": 32768,
                  "chat_template": CHAT_TEMPLATE}
    write_atomic(dst / "tokenizer_config.json", json.dumps(tok_config, indent=1).encode())
    return dst


def random_7b_folder() -> Path:
    return local_models.cache_dir() / "mistral-7b-random"


def unsaved_random_weights(folder: Path) -> str:
    return (f"profile mistral-7b-random cannot be served by transformers serve: no saved random weights in "
            f"{folder} (it loads weights from a folder and makes none). Fix: run notebook 05 once on a CUDA GPU "
            "(it saves them there), serve with vLLM or SGLang, which make random weights themselves "
            "(--load-format dummy), or use WORKSHOP_PROFILE=tiny-trained")


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def transformers_serve(model: str | Path, continuous_batching: bool, device: str = "cpu",
                       num_blocks: int | None = None, max_batch_tokens: int | None = None) -> EngineConfig:
    """`transformers serve MODEL` on 127.0.0.1; with continuous batching its KV cache bounded (CPU_CB_LIMITS on a CPU)."""
    cmd = [_bin("transformers"), "serve", str(model), "--host", "{host}", "--port", "{port}",
           "--device", device, "--log-level", "info"]
    name = "HF transformers serve"
    if continuous_batching:
        if device == "cpu":
            num_blocks = num_blocks or CPU_CB_LIMITS["num_blocks"]
            max_batch_tokens = max_batch_tokens or CPU_CB_LIMITS["max_batch_tokens"]
        cmd.append("--continuous-batching")
        if num_blocks:
            cmd += ["--cb-num-blocks", str(int(num_blocks))]
        if max_batch_tokens:
            cmd += ["--cb-max-batch-tokens", str(int(max_batch_tokens))]
        name += " + continuous batching"
        desc = (f"transformers serve, continuous batching with paged attention (KV cache bounded: "
                f"{num_blocks or 'server default'} blocks, {max_batch_tokens or 'server default'} tokens per step)")
    else:
        desc = "transformers serve, one request at a time (the talk's HF baseline)"
    return EngineConfig(name, "transformers", cmd, str(model), desc, ready_timeout_s=180.0 if device == "cpu" else 600.0,
                        env={"HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}, needs_cuda=device == "cuda")


# The talk's vLLM configurations (section 7 of the talk outline), each one change from today's default.
# The talk added n-gram speculation on top of fp8 KV; here it is added to the default alone, so that
# each row measures one change.
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
VLLM_STEPS = (
    ("vLLM, prefix caching off", ["--no-enable-prefix-caching"],
     "paged attention and continuous batching, no prefix cache (the talk's 'vLLM default': vLLM < 0.8)"),
    ("vLLM default", ["--enable-prefix-caching"],
     "paged attention, continuous batching, chunked prefill and prefix caching (hashed blocks): vLLM ≥ 0.8"),
    ("vLLM + fp8 KV cache", ["--enable-prefix-caching", "--kv-cache-dtype", "fp8"],
     "the default with its KV cache stored in fp8: half the bytes of bf16, a quarter of fp32"),
    ("vLLM + n-gram speculation", ["--enable-prefix-caching", "--speculative-config", json.dumps(NGRAM)],
     "the default, drafting up to 4 tokens by matching n-grams of the prompt, verified in one pass"),
)


def vllm_configs(model: str | Path, device: str = "cuda", load_format: str | None = None,
                 python: str | Path | None = None) -> list[EngineConfig]:
    """The talk's vLLM servers (VLLM_STEPS): the CPU build from .venv-vllm, or this Python's vLLM on a GPU."""
    from . import vllm_env

    python = python or (vllm_env.venv_python() if device == "cpu" else sys.executable)
    extra = ["--load-format", load_format] if load_format else []
    return [EngineConfig(n, "vllm", vllm_env.server_command(python, model, extra + flags, device), str(model), d,
                         ready_timeout_s=300.0 if device == "cpu" else 600.0, env=vllm_env.server_env(device),
                         needs_cuda=device == "cuda", spinners=vllm_env.SPINNERS)
            for n, flags, d in VLLM_STEPS]


def readable_engine_config(model_folder: str | Path, device: str = "cpu", prefix_cache: str = "radix",
                           max_num_seqs: int = 8, max_batch_tokens: int = 256) -> EngineConfig:
    """The workshop's readable engine behind its OpenAI-compatible server (helpers.engine.server)."""
    cmd = [sys.executable, "-m", "helpers.engine.server", str(model_folder), "--host", "{host}",
           "--port", "{port}", "--device", device, "--prefix-cache", prefix_cache,
           "--max-num-seqs", str(max_num_seqs), "--max-batch-tokens", str(max_batch_tokens)]
    return EngineConfig("readable engine", "readable", cmd, str(model_folder),
                        f"helpers.engine: paged KV, continuous batching with chunked prefill, {prefix_cache} "
                        f"prefix cache, {max_num_seqs} requests and {max_batch_tokens} tokens per step",
                        ready_timeout_s=180.0 if device == "cpu" else 600.0, env={"HF_HUB_OFFLINE": "1"},
                        needs_cuda=device == "cuda")


def sglang_config(model: str | Path, load_format: str | None = None) -> EngineConfig:
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--host", "{host}",
           "--port", "{port}", "--dtype", "bfloat16", "--mem-fraction-static", "0.85"]
    if load_format:
        cmd += ["--load-format", load_format]
    return EngineConfig("SGLang", "sglang", cmd, str(model), "SGLang: radix-tree prefix cache, continuous batching",
                        ready_timeout_s=600.0, needs_cuda=True)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def available(profile: str | None = None, include: tuple[str, ...] = ("transformers", "readable", "vllm", "sglang")
              ) -> tuple[list[EngineConfig], list[dict]]:
    """(the configurations this machine can run, [{name, why not}] for the others)."""
    cuda = _cuda()
    device = "cuda" if cuda else "cpu"
    runnable: list[EngineConfig] = []
    skipped: list[dict] = []
    try:
        model = serve_folder(profile, weights=False)
    except local_models.ProfileUnavailable as exc:
        return [], [{"name": "all engines", "why": str(exc)}]
    has_weights = isinstance(model, str) or any(Path(model).glob("*.safetensors"))   # a str: a Hub repository
    if "transformers" in include:
        if not has_weights:                       # transformers serve makes no weights: serve_folder says why
            skipped.append({"name": "transformers serve", "why": unsaved_random_weights(random_7b_folder())})
        elif _installed("fastapi") and _installed("uvicorn"):
            runnable += [transformers_serve(model, False, device), transformers_serve(model, True, device)]
        else:
            skipped.append({"name": "transformers serve", "why": "the transformers[serving] extra is not installed"})
    if "readable" in include and has_weights:    # the workshop's own engine (helpers.engine)
        runnable.append(readable_engine_config(model, device))
    fmt = None if has_weights else "dummy"      # vLLM/SGLang make random weights themselves
    if "vllm" in include:
        from . import vllm_env

        why = vllm_env.cpu_unavailable() if not cuda else (None if _installed("vllm") else
                                                           "vllm is not installed in this Python (pip install vllm)")
        if why is None and not cuda and name_of(profile) not in local_models.LOCAL_PROFILES:
            why = f"vLLM on a CPU serves the locally built models (tiny, tiny-trained, small), not {name_of(profile)}"
        if why:
            skipped.append({"name": "vllm", "why": why})
        else:
            runnable += vllm_configs(model, device, load_format=fmt)
    if "sglang" in include:
        if not cuda:
            skipped.append({"name": "sglang", "why": "SGLang has no CPU wheel on PyPI (its wheels need CUDA); "
                                                     "its GPU command line is kept (servers.sglang_config)"})
        elif not _installed("sglang"):
            skipped.append({"name": "sglang", "why": "sglang is not installed (pip install sglang)"})
        else:
            runnable.append(sglang_config(model, load_format=fmt))
    return runnable, skipped


def name_of(profile: str | None) -> str:
    return models.resolve_profile(profile)[0]
