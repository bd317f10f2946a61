"""The models built on this machine, with no download: the ``tiny`` and ``small`` Mistral-architecture configs,
random weights from a fixed seed, the Mistral tokenizer shipped in ``mistral-common``, the cache folder. Loading a
profile by name: helpers.measure.models."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import env

TINY_PROFILES = ("tiny", "tiny-trained")  # the tiny config: same sizes, timing and memory
LOCAL_PROFILES = ("tiny", "tiny-trained", "small")  # built on this machine, no download; fp32 on a CPU
TOKENIZER_FILE = "tokenizer.model.v1"  # Mistral 7B v0.1's SentencePiece tokenizer, 32,000 tokens

# The tiny model keeps Mistral 7B's proportions where they matter for the lessons: grouped-query
# attention with 4 query heads per KV head, SwiGLU MLP 3.5× wide, the real 32,000-token vocabulary.
TINY_CONFIG: dict[str, Any] = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 32000,
    "hidden_size": 256, "intermediate_size": 896, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
    "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "sliding_window": None, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
    "initializer_range": 0.02,
}
TINY_SEED = 0

# The small profile: the tiny recipe widened until one decode step streams 0.5–1 GB of weights (fp32),
# so a CPU's decode step waits for memory rather than for Python. Mistral 7B's ratios are kept
# (4 query heads per KV head, MLP 3.5× the hidden size, head_dim 64 as in many 1B-class models).
SMALL_OVERRIDES: dict[str, Any] = {"hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 8,
                                   "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64}
SMALL_CONFIG: dict[str, Any] = {**TINY_CONFIG, **SMALL_OVERRIDES}
# the profiles built locally from a config with random weights: (config, cache folder name, display name)
BUILT_PROFILES: dict[str, tuple[dict[str, Any], str, str]] = {
    "tiny": (TINY_CONFIG, "tiny-mistral", "tiny (Mistral architecture, random weights)"),
    "small": (SMALL_CONFIG, "small-mistral", "small (Mistral architecture, random weights)"),
}


class ProfileUnavailable(RuntimeError):
    """A profile cannot run here; the message says why and how to fix it."""


def cache_dir() -> Path:
    """Where built models live: WORKSHOP_CACHE, else ~/.cache/llm-inference-workshop (EnvError if not writable)."""
    return env.folder("WORKSHOP_CACHE", Path.home() / ".cache" / "llm-inference-workshop")


def tokenizer_source() -> Path:
    import mistral_common

    path = Path(mistral_common.__file__).parent / "data" / TOKENIZER_FILE
    if not path.exists():
        raise ProfileUnavailable(f"mistral-common has no {TOKENIZER_FILE} at {path}; reinstall mistral-common")
    return path


def tiny_model(config: dict | None = None, device: str = "cpu", dtype: str = "fp32", **overrides):
    """The one builder of a random-weight model (fixed seed, eval mode) from a config.json dict with `overrides`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from .dtypes import torch_dtype

    cfg = {**(config or TINY_CONFIG), **overrides}
    hf_config = AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    torch.manual_seed(TINY_SEED)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(hf_config, dtype=torch_dtype(dtype)).eval()


def build_tiny(folder: Path | None = None, config: dict | None = None) -> Path:
    """tiny_model saved with its tokenizer in a folder for ``from_pretrained`` (reused for the same config)."""
    config = dict(config or TINY_CONFIG)

    def write(tmp: Path) -> None:
        tiny_model(config).save_pretrained(tmp)
        shutil.copy(tokenizer_source(), tmp / TOKENIZER_FILE)

    return cached_build(Path(folder or cache_dir() / "tiny-mistral"), {"config": config, "seed": TINY_SEED}, write)


def cached_build(folder: Path, stamp: dict, write) -> Path:
    """`folder`, written by write(tmp) unless its workshop-build.json already holds `stamp` (build_once)."""
    marker = folder / "workshop-build.json"

    def write_stamped(tmp: Path) -> None:
        write(tmp)
        (tmp / marker.name).write_text(json.dumps(stamp, indent=1))

    return build_once(folder, lambda: marker.exists() and json.loads(marker.read_text()) == stamp, write_stamped)


def build_once(folder: Path, built, write) -> Path:
    """`folder`, written by write(tmp) into a temporary sibling (atomic_folder) unless built() says it is there,
    under a file lock: processes that need it at once build it once, the others wait and find it."""
    if not built():
        from filelock import FileLock   # huggingface_hub's own dependency

        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(folder.parent / f".{folder.name}.lock"):
            if not built():              # else another process built it while this one waited
                with atomic_folder(folder) as tmp:
                    write(tmp)
    return folder


@contextmanager
def atomic_folder(folder: Path):
    """Build a folder in a temporary sibling, then rename it in place: no half-written folder is ever left."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        yield tmp
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def quiet_progress():
    """transformers' progress bars off within the block (a local model loads in seconds)."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def load_tokenizer(folder: str | Path):
    from transformers import MistralCommonBackend

    return MistralCommonBackend.from_pretrained(str(folder))
