"""Weight quantization with bitsandbytes, measured: footprint against helpers.formulas.memory's prediction, speed,
and quality against the unquantized model (helpers.measure.quality). ``int8``: LLM.int8() (arXiv:2208.07339), one
fp32 scale per row; ``nf4``: 4-bit NormalFloat in blocks of 64 with an fp32 absmax each (QLoRA, arXiv:2305.14314
§3); ``nf4-dq``: the absmax stored in 8 bits (QLoRA §3). Only the decoder blocks' ``nn.Linear`` layers change."""
from __future__ import annotations

import logging
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
    """Where the profile's weights load from again, quantized on the way in (bitsandbytes quantizes while loading a
    checkpoint): the built folder, the Hub id, or for ``mistral-7b-random`` a folder it is saved to once."""
    from . import local_models, models

    if loaded.profile in local_models.LOCAL_PROFILES:   # tiny, tiny-trained, small: built on this machine
        return models.built_folder(loaded.profile)
    if loaded.profile == "mistral-7b-random":
        import torch
        import transformers

        # random weights depend on the GPU (torch's CUDA generator fills by a grid sized by its SMs) and on
        # the versions: a copy saved under others holds another model, and the quality columns would lie
        gpu = torch.cuda.get_device_name() if str(loaded.device).startswith("cuda") else str(loaded.device)
        stamp = {"config": loaded.config, "seed": local_models.TINY_SEED, "device": gpu,
                 "torch": torch.__version__, "transformers": transformers.__version__}
        # 2 GB shards: safetensors copies a whole shard to host memory before writing it
        return local_models.cached_build(local_models.cache_dir() / "mistral-7b-random", stamp,
                                         lambda tmp: loaded.model.save_pretrained(tmp, max_shard_size="2GB"))
    return models.hub_model_id(loaded.model_name)


def load_quantized(source: str | Path, scheme: str, device: str = "cpu", dtype: str = "fp32"):
    """A checkpoint loaded with its decoder Linear layers quantized; `dtype` for the rest and 4-bit matmuls."""
    from transformers import AutoModelForCausalLM

    from .local_models import quiet_progress

    dt = torch_dtype(dtype)
    with quiet_progress():
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=dt, device_map={"": 0 if device == "cuda" else device},
            quantization_config=bnb_config(scheme, dt))
    return model.eval()


def footprint(model, spec: ModelSpec | dict | str, scheme: str, base_dtype: str) -> dict[str, Any]:
    """The model's measured bytes against helpers.formulas.memory.weight_bytes, metadata included."""
    pred = weight_bytes(spec, scheme, base_dtype=base_dtype)
    weights = measured_weight_bytes(model)
    total = measured_model_bytes(model)
    return {"measured_weight_bytes": weights, "buffer_bytes": total - weights, "measured_model_bytes": total,
            "predicted_weight_bytes": pred.bytes, "metadata_bytes": pred.metadata_bytes,
            "quantized_params": pred.quantized_params, "unquantized_params": pred.unquantized_params,
            "exact": weights == pred.bytes}


def speed(models: dict[str, Any], prompt_ids, new_tokens: int, repeats: int = 3,
          device: str | None = None) -> dict[str, dict[str, float]]:
    """Median prefill and decode step (nan with one new token) of each {name: model}, after a warm-up each; the
    models take turns, one generation per round, so that whatever slows the machine slows them alike."""
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
    """One scheme's footprint, speed and quality against the reference; error: why it could not run here."""

    scheme: str
    label: str
    load_s: float
    footprint: dict[str, Any]
    speed: dict[str, float]
    quality: dict[str, float] | None
    error: str | None = None


def compare(loaded, schemes=SCHEMES, sizes: Sizes | None = None, timing: bool = True) -> list[VariantResult]:
    """The reference and each scheme: footprint, speed, quality. On a CPU all are held and timed in alternating rounds;
    on a GPU (a 7B and its copies may not fit) each is measured and freed in turn. A failed scheme: a row, its error."""
    from tqdm.auto import tqdm

    sizes, dev, spec, ref = sizes or sizes_for(loaded.profile, loaded.device), loaded.device, loaded.spec, loaded.dtype
    hold_all = dev == "cpu"
    ids = eval_ids(loaded.tokenizer, sizes.eval_tokens, loaded.profile)
    ref_lp = next_token_logprobs(loaded.model, ids)
    results = {ref: VariantResult(ref, f"{ref} (reference)", 0.0, footprint(loaded.model, spec, ref, ref), {},
                                  quality(ref_lp, ref_lp, ids))}
    held = {ref: loaded.model}

    def timed() -> None:
        for k, v in (speed(held, ids[: sizes.prompt_tokens], sizes.new_tokens, sizes.repeats, dev) if timing else {}).items():
            results[k].speed = v
        held.clear()
        free_memory(dev)

    if not hold_all:
        timed()
    source = model_source(loaded)
    for scheme in tqdm(schemes, desc="quantized variants"):
        t0 = time.perf_counter()
        try:
            held[scheme] = model = load_quantized(source, scheme, dev, ref)
            results[scheme] = VariantResult(scheme, f"bitsandbytes {scheme}", time.perf_counter() - t0,
                                            footprint(model, spec, scheme, ref), {},
                                            quality(ref_lp, next_token_logprobs(model, ids), ids))
            del model
            if not hold_all:
                timed()
        except Exception as exc:  # noqa: BLE001 - a scheme that cannot run here is a result, not a crash
            held.pop(scheme, None)
            model = None
            results[scheme] = VariantResult(scheme, f"bitsandbytes {scheme}", time.perf_counter() - t0, {}, {},
                                            None, error=f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}")
            free_memory(dev)
    if hold_all:
        timed()
    return list(results.values())


def streamed_bytes(result: VariantResult, spec: ModelSpec, base_dtype: str) -> int:
    """The measured weights less the input embedding table (a step reads one row of it, as stepcost counts)."""
    table = 0 if spec.tie_word_embeddings else spec.vocab_size * spec.hidden_size * dtype_bytes(base_dtype)
    return int(result.footprint["measured_weight_bytes"] - table)
