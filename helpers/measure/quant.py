"""Weight quantization with bitsandbytes, measured: footprint against helpers.formulas.memory's prediction,
prefill and decode speed, and quality against the unquantized model on a fixed text (helpers.measure.quality).

- ``int8``: LLM.int8() (Dettmers et al. 2022, arXiv:2208.07339) — int8 weights, one fp32 scale per row.
- ``nf4``: 4-bit NormalFloat in blocks of 64 with an fp32 absmax each (QLoRA, arXiv:2305.14314, §3).
- ``nf4-dq``: nf4 with double quantization — the absmax themselves stored in 8 bits (QLoRA §3).
bitsandbytes replaces the decoder blocks' ``nn.Linear`` layers only: embedding, lm_head and norms stay.
"""
from __future__ import annotations

import json
import logging
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..formulas.memory import weight_bytes
from ..formulas.units import dtype_bytes
from .quality import eval_ids, next_token_logprobs, quality
from ..formulas.specs import ModelSpec
from .dtypes import torch_dtype
from .tensor_bytes import measured_model_bytes, measured_weight_bytes
from .hardware import free_memory

SCHEMES = ("int8", "nf4", "nf4-dq")

# bitsandbytes' int8 matmul on CPU announces on every call that it casts its inputs to fp16;
# it is expected, and the notebooks' readers need not see it hundreds of times.
warnings.filterwarnings("ignore", message=r".*MatMul8bitLt: inputs will be cast.*")
logging.getLogger("bitsandbytes").setLevel(logging.ERROR)


def bnb_config(scheme: str, compute_dtype: Any = None):
    """transformers' BitsAndBytesConfig for a scheme; compute_dtype: the dtype 4-bit matmuls run in."""
    import torch
    from transformers import BitsAndBytesConfig

    if scheme == "int8":
        return BitsAndBytesConfig(load_in_8bit=True)
    if scheme not in ("nf4", "nf4-dq"):
        raise ValueError(f"unknown bitsandbytes scheme {scheme!r}; allowed: {', '.join(SCHEMES)}")
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                              bnb_4bit_use_double_quant=scheme == "nf4-dq",
                              bnb_4bit_compute_dtype=compute_dtype or torch.bfloat16)


def model_source(loaded) -> str | Path:
    """Where the active profile's weights can be loaded from again, quantized on the way in:
    the tiny model's folder, the Hub repository, or — for ``mistral-7b-random`` — a folder the random
    model is saved to once (bitsandbytes quantizes while loading a checkpoint)."""
    from . import local_models, models

    if loaded.profile in local_models.LOCAL_PROFILES:   # tiny, tiny-trained, small: built on this machine
        return models.built_folder(loaded.profile)
    if loaded.profile == "mistral-7b-random":
        import torch
        import transformers

        folder = local_models.cache_dir() / "mistral-7b-random"
        # random weights depend on the GPU (torch's CUDA generator fills by a grid sized by its SMs) and on
        # the versions: a copy saved under others holds another model, and the quality columns would lie
        gpu = torch.cuda.get_device_name() if str(loaded.device).startswith("cuda") else str(loaded.device)
        stamp = {"config": loaded.config, "seed": local_models.TINY_SEED, "device": gpu,
                 "torch": torch.__version__, "transformers": transformers.__version__}
        marker = folder / "workshop-build.json"
        if not (marker.exists() and json.loads(marker.read_text()) == stamp):
            # from an empty folder: no stale model.safetensors beside a new sharded index, no marker if cut short
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True, exist_ok=True)
            # 2 GB shards: safetensors copies a whole shard to host memory before writing it
            loaded.model.save_pretrained(folder, max_shard_size="2GB")
            marker.write_text(json.dumps(stamp, indent=1))
        return folder
    return models.hub_model_id(loaded.model_name)


def load_quantized(source: str | Path, scheme: str, device: str = "cpu", dtype: str = "fp32"):
    """Load a checkpoint with bitsandbytes quantizing its decoder Linear layers on the way in. dtype: the
    reference's, for what stays unquantized (embeddings, lm_head, norms) and what 4-bit matmuls compute in."""
    from transformers import AutoModelForCausalLM

    from .local_models import quiet_progress

    dt = torch_dtype(dtype)
    with quiet_progress():
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=dt, device_map={"": 0 if device == "cuda" else device},
            quantization_config=bnb_config(scheme, dt))
    return model.eval()


def footprint(model, spec: ModelSpec | dict | str, scheme: str, base_dtype: str) -> dict[str, Any]:
    """The loaded model's own bytes (parameters as stored, quantization states, buffers) against
    helpers.formulas.memory.weight_bytes — the prediction, metadata included."""
    pred = weight_bytes(spec, scheme, base_dtype=base_dtype)
    weights = measured_weight_bytes(model)
    total = measured_model_bytes(model)
    return {"measured_weight_bytes": weights, "buffer_bytes": total - weights, "measured_model_bytes": total,
            "predicted_weight_bytes": pred.bytes, "metadata_bytes": pred.metadata_bytes,
            "quantized_params": pred.quantized_params, "unquantized_params": pred.unquantized_params,
            "exact": weights == pred.bytes}


def speed(models: dict[str, Any], prompt_ids, new_tokens: int, repeats: int = 3,
          device: str | None = None) -> dict[str, dict[str, float]]:
    """Prefill time (median TTFT) and the median decode step (inter-token latency; nan with a single new token)
    of greedy generation, for each model of a {name: model} dict, after a warm-up each; the models take turns,
    one generation each per round, so that anything else slowing the machine slows them all alike. Tokens/s
    (1 ÷ the step) is a table's column (helpers.present.quant_figures.speed_rows), which a zero step cannot stop."""
    import statistics

    import torch

    from .timing import timed_generate

    x = torch.as_tensor(prompt_ids, dtype=torch.long).reshape(1, -1)
    for m in models.values():
        timed_generate(m, x, new_tokens, device=device)  # warm-up: kernels, allocator, caches
    runs: dict[str, list] = {k: [] for k in models}
    for _ in range(repeats):
        for k, m in models.items():
            runs[k].append(timed_generate(m, x, new_tokens, device=device))
    out = {}
    for k, rs in runs.items():
        itl = statistics.median(s for r in rs for s in r.step_s) if new_tokens > 1 else float("nan")
        out[k] = {"prompt_tokens": x.shape[1], "new_tokens": new_tokens, "repeats": repeats,
                  "prefill_s": statistics.median(r.ttft_s for r in rs), "itl_s": itl}
    return out


@dataclass
class Sizes:

    prompt_tokens: int
    new_tokens: int
    repeats: int
    eval_tokens: int | None  # None: the whole text


def sizes_for(profile: str, device: str) -> Sizes:
    """Seconds on a CPU; on a GPU, four 7B variants within the recorded-results script's budget."""
    return Sizes(128, 16, 3, None) if device == "cpu" else Sizes(512, 64, 3, None)


@dataclass
class VariantResult:
    """One scheme's row: footprint, speed and quality against the reference (the reference's own row
    has KL 0 and agreement 1); error says why a scheme could not run here, its other fields empty."""

    scheme: str
    label: str
    load_s: float
    footprint: dict[str, Any]
    speed: dict[str, float]
    quality: dict[str, float] | None
    error: str | None = None


def compare(loaded, schemes=SCHEMES, sizes: Sizes | None = None, progress: bool = True,
            hold_all: bool | None = None, timing: bool = True) -> list[VariantResult]:
    """The reference (the loaded model as it is) and each bitsandbytes scheme in one run: footprint, prefill
    and decode speed, quality on the fixed text against the reference. hold_all (default: on a CPU): every
    variant held and timed in alternating rounds; else (a 7B and its copies may not fit a GPU together) each
    is loaded, measured and freed before the next. A scheme that fails gives a row with its error.
    timing=False: no speed figures."""
    from tqdm.auto import tqdm

    sizes = sizes or sizes_for(loaded.profile, loaded.device)
    hold_all = loaded.device == "cpu" if hold_all is None else hold_all
    ids = eval_ids(loaded.tokenizer, sizes.eval_tokens, loaded.profile)
    prompt = ids[: sizes.prompt_tokens]
    spec = loaded.spec
    ref_name = loaded.dtype
    ref_lp = next_token_logprobs(loaded.model, ids)
    results = {ref_name: VariantResult(ref_name, f"{ref_name} (reference)", 0.0,
                                       footprint(loaded.model, spec, ref_name, ref_name), {},
                                       quality(ref_lp, ref_lp, ids))}
    held = {ref_name: loaded.model}

    def timed(models: dict) -> None:
        if not timing:
            return
        for k, v in speed(models, prompt, sizes.new_tokens, sizes.repeats, loaded.device).items():
            results[k].speed = v

    if not hold_all:
        timed({ref_name: loaded.model})
    source = model_source(loaded)
    for scheme in tqdm(schemes, desc="quantized variants", disable=not progress):
        t0 = time.perf_counter()
        model = None
        try:
            model = load_quantized(source, scheme, loaded.device, loaded.dtype)
            load_s = time.perf_counter() - t0
            results[scheme] = VariantResult(scheme, f"bitsandbytes {scheme}", load_s,
                                            footprint(model, spec, scheme, loaded.dtype), {},
                                            quality(ref_lp, next_token_logprobs(model, ids), ids))
            if hold_all:
                held[scheme] = model
            else:
                timed({scheme: model})
        except Exception as exc:  # noqa: BLE001 - a scheme that cannot run here is a result, not a crash
            results[scheme] = VariantResult(scheme, f"bitsandbytes {scheme}", time.perf_counter() - t0, {}, {},
                                            None, error=f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}")
        finally:
            if not hold_all:
                del model
                free_memory(loaded.device)
    if hold_all:
        try:
            timed(held)
        finally:
            held.clear()
            free_memory(loaded.device)
    return list(results.values())


def streamed_bytes(result: VariantResult, spec: ModelSpec, base_dtype: str) -> int:
    """The weight bytes one decode step reads: the measured weights, less the input embedding table (a lookup:
    a step reads one row of it; helpers.formulas.stepcost counts the same way)."""
    table = 0 if spec.tie_word_embeddings else spec.vocab_size * spec.hidden_size * dtype_bytes(base_dtype)
    return int(result.footprint["measured_weight_bytes"] - table)
