"""Weight quantization with bitsandbytes, measured: footprint against helpers.cost.memory's prediction,
prefill and decode speed, and quality against the unquantized model on a fixed text.

Schemes (bitsandbytes on CUDA and, in its recent versions, on CPU):
- ``int8``: LLM.int8() (Dettmers et al. 2022, arXiv:2208.07339) — int8 weights, one fp32 scale per row.
- ``nf4``: 4-bit NormalFloat in blocks of 64 with an fp32 absmax each (QLoRA, arXiv:2305.14314, §3).
- ``nf4-dq``: nf4 with double quantization — the absmax themselves stored in 8 bits (QLoRA §3).
bitsandbytes replaces the ``nn.Linear`` layers of the decoder blocks only: the input embedding, the
output head (lm_head) and the norms stay in the reference dtype.

Quality against the unquantized model in the same run: helpers.measure.quality (perplexity, KL, top-1).
"""
from __future__ import annotations

import gc
import json
import logging
import shutil
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..cost.memory import measured_model_bytes, measured_weight_bytes, weight_bytes
from .quality import eval_ids, next_token_logprobs, quality
from ..cost.specs import ModelSpec, get_spec, param_breakdown
from ..cost.units import GB, torch_dtype

SCHEMES = ("int8", "nf4", "nf4-dq")

# bitsandbytes' int8 matmul on CPU announces on every call that it casts its inputs to fp16;
# it is expected, and the notebooks' readers need not see it hundreds of times.
warnings.filterwarnings("ignore", message=r".*MatMul8bitLt: inputs will be cast.*")
logging.getLogger("bitsandbytes").setLevel(logging.ERROR)


def _check_scheme(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise ValueError(f"unknown quantization scheme {scheme!r}; allowed: {', '.join(SCHEMES)}")
    return scheme


# ----------------------------------------------------------------------------- loading

def bnb_config(scheme: str, compute_dtype: Any = None):
    """transformers' BitsAndBytesConfig for a scheme; compute_dtype: the dtype 4-bit matmuls run in."""
    import torch
    from transformers import BitsAndBytesConfig

    _check_scheme(scheme)
    if scheme == "int8":
        return BitsAndBytesConfig(load_in_8bit=True)
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
        # The random weights depend on more than config and seed: torch's CUDA generator fills a tensor
        # with a launch grid sized by the GPU's SM count, and init code changes between versions. A
        # copy saved under another GPU or version holds different weights, and the quality columns
        # would compare two unrelated models: save again then.
        gpu = torch.cuda.get_device_name() if str(loaded.device).startswith("cuda") else str(loaded.device)
        stamp = {"config": loaded.config, "seed": local_models.TINY_SEED, "device": gpu,
                 "torch": torch.__version__, "transformers": transformers.__version__}
        marker = folder / "workshop-build.json"
        if not (marker.exists() and json.loads(marker.read_text()) == stamp):
            # start from an empty folder: an interrupted save then leaves no marker, and no weights file
            # of an earlier save stays beside the new ones (from_pretrained would prefer a stale single
            # model.safetensors to a new sharded index)
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True, exist_ok=True)
            # shards of 2 GB: safetensors copies a whole shard from the GPU to host memory before it
            # writes it, and one 14.5 GB shard (transformers' default allows 50 GB) needs that much RAM
            loaded.model.save_pretrained(folder, max_shard_size="2GB")
            marker.write_text(json.dumps(stamp, indent=1))
        return folder
    from .. import env

    return env.text("WORKSHOP_MODEL_ID", loaded.model_name)


def _device_map(device: str) -> dict:
    if device == "cuda":
        return {"": 0}
    if device == "cpu":
        return {"": "cpu"}
    raise ValueError(f"bitsandbytes quantization runs on cuda or cpu here, not on {device!r}")


def load_quantized(source: str | Path, scheme: str, device: str = "cpu", dtype: str = "fp32"):
    """Load a checkpoint with bitsandbytes quantizing its decoder Linear layers on the way in.

    dtype: what stays unquantized (embeddings, lm_head, norms) and what 4-bit matmuls compute in —
    the reference model's dtype, so the only difference from the reference is the quantization.
    """
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    _check_scheme(scheme)
    dt = torch_dtype(dtype)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=dt, device_map=_device_map(device),
            quantization_config=bnb_config(scheme, dt))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return model.eval()


# ----------------------------------------------------------------------------- footprint

def footprint(model, spec: ModelSpec | dict | str, scheme: str, base_dtype: str) -> dict[str, Any]:
    """The loaded model's own bytes (parameters as stored, quantization states, buffers) against
    helpers.cost.memory.weight_bytes — the prediction, metadata included."""
    pred = weight_bytes(spec, scheme, base_dtype=base_dtype)
    weights = measured_weight_bytes(model)
    total = measured_model_bytes(model)
    return {"measured_weight_bytes": weights, "buffer_bytes": total - weights, "measured_model_bytes": total,
            "predicted_weight_bytes": pred.bytes, "metadata_bytes": pred.metadata_bytes,
            "quantized_params": pred.quantized_params, "unquantized_params": pred.unquantized_params,
            "exact": weights == pred.bytes}


def preset_footprints(model: str = "mistral-7b-v0.1", schemes=("bf16", "int8", "nf4", "nf4-dq"),
                      base_dtype: str = "bf16") -> list[dict[str, Any]]:
    """Computed weight bytes of a model under each scheme, with the share of parameters quantized."""
    spec = get_spec(model)
    ref = weight_bytes(spec, schemes[0], base_dtype=base_dtype).bytes
    rows = []
    for s in schemes:
        w = weight_bytes(spec, s, base_dtype=base_dtype)
        rows.append({"model": spec.name, "scheme": s, "bytes": w.bytes, "GB": round(w.bytes / GB, 3),
                     "GiB": round(w.bytes / 2**30, 3), "metadata_bytes": w.metadata_bytes,
                     "quantized_share": round(w.quantized_params / w.params, 4), "vs_first": round(w.bytes / ref, 4)})
    return rows


def presets_table(models=None, schemes=("bf16", "int8", "nf4", "nf4-dq")) -> list[dict[str, Any]]:
    """Weight GB (10^9 bytes) of every preset under each bitsandbytes scheme (bf16 base), and the
    share of parameters bitsandbytes quantizes (nn.Linear in the blocks; not embeddings, not fused experts)."""
    from ..cost.specs import PRESETS

    rows = []
    for name in models or PRESETS:
        fp = preset_footprints(name, schemes)
        row = {"model": name}
        row.update({f"{r['scheme']} (GB)": round(r["GB"], 2) for r in fp})
        row["share bitsandbytes quantizes"] = round(fp[-1]["quantized_share"], 3)
        rows.append(row)
    return rows


def embedding_share(model: str | dict | ModelSpec) -> dict[str, Any]:
    """How much of a model bitsandbytes leaves alone: input embedding and lm_head, of all parameters."""
    pb = param_breakdown(model)
    emb = pb.embedding + pb.lm_head
    return {"params": pb.total, "embedding_and_head": emb, "share": emb / pb.total, "linear": pb.linear}


# ----------------------------------------------------------------------------- speed

def speed(models: dict[str, Any], prompt_ids, new_tokens: int, repeats: int = 3,
          device: str | None = None) -> dict[str, dict[str, float]]:
    """Prefill time (median TTFT) and decode tokens/s (1 / median inter-token latency) of greedy
    generation with a real KV cache, for each model of a {name: model} dict.

    Each model runs one untimed warm-up generation; then the models take turns, one generation each
    per round, so that anything else slowing the machine down slows them all alike.
    """
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
                  "prefill_s": statistics.median(r.ttft_s for r in rs), "itl_s": itl, "decode_tok_s": 1.0 / itl}
    return out


# ----------------------------------------------------------------------------- the comparison

@dataclass
class Sizes:
    """How much work the comparison does: chosen per profile and device (small on a CPU)."""

    prompt_tokens: int
    new_tokens: int
    repeats: int
    eval_tokens: int | None  # None: the whole text


def sizes_for(profile: str, device: str) -> Sizes:
    """A CPU gets a short prompt and few tokens (seconds); a GPU a 512-token prompt and 64 new tokens,
    3 repeats (four 7B variants must time within the recorded-results script's budget)."""
    if device == "cpu":
        return Sizes(prompt_tokens=128, new_tokens=16, repeats=3, eval_tokens=None)
    return Sizes(prompt_tokens=512, new_tokens=64, repeats=3, eval_tokens=None)


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _free(device: str) -> None:
    gc.collect()
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


def _error_text(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return f"{type(exc).__name__}: {first}"


def compare(loaded, schemes=SCHEMES, sizes: Sizes | None = None, progress: bool = True,
            hold_all: bool | None = None, timing: bool = True) -> list[VariantResult]:
    """The reference (the loaded model as it is) and each bitsandbytes scheme, side by side in one run:
    footprint, prefill and decode speed, quality on the fixed text against the reference.

    hold_all (default: on a CPU): keep every variant loaded and time them in alternating rounds.
    Otherwise (a GPU, where a 7B model and its copies may not fit together) each quantized model is
    loaded, measured, timed and freed before the next. A scheme that fails (no kernel for this
    device, out of memory) gives a row with its error instead of a crash. timing=False: footprint
    and quality only, no speed figures (their rows stay empty).
    """
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
                                            None, error=_error_text(exc))
        finally:
            if not hold_all:
                del model
                _free(loaded.device)
    if hold_all:
        try:
            timed(held)
        finally:
            held.clear()
            _free(loaded.device)
    return list(results.values())


def footprint_rows(results: list[VariantResult], spec: ModelSpec, loaded_label: str) -> list[dict[str, Any]]:
    """Table rows: measured model bytes against prediction, with the bf16-base prediction beside it."""
    ref = results[0].footprint.get("measured_model_bytes")
    rows = []
    for r in results:
        if r.error:
            rows.append({"scheme": r.label, "error": r.error})
            continue
        f = r.footprint
        scheme = r.scheme if r.scheme in SCHEMES else "bf16"  # the reference at bf16
        rows.append({
            "scheme": r.label,
            "measured weights (B)": f["measured_weight_bytes"],
            "predicted weights (B)": f["predicted_weight_bytes"],
            "exact": f["exact"],
            "of which metadata (B)": f["metadata_bytes"],
            "buffers (B)": f["buffer_bytes"],
            "model total (MB)": round(f["measured_model_bytes"] / 1e6, 2),
            "vs reference": round(f["measured_model_bytes"] / ref, 3),
            "predicted at bf16 base (MB)": round(weight_bytes(spec, scheme, base_dtype="bf16").bytes / 1e6, 2),
            "measured on": loaded_label,
        })
    return rows


def speed_rows(results: list[VariantResult], loaded_label: str) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        if r.error or not r.speed:
            continue
        s = r.speed
        rows.append({"scheme": r.label, "prompt tokens": s["prompt_tokens"],
                     "prefill (ms)": round(s["prefill_s"] * 1e3, 2),
                     "decode step (ms)": round(s["itl_s"] * 1e3, 2),
                     "decode (tokens/s)": round(s["decode_tok_s"], 1), "measured on": loaded_label})
    return rows


def quality_rows(results: list[VariantResult], loaded_label: str) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        if r.error or r.quality is None:
            continue
        q = r.quality
        rows.append({"scheme": r.label, "perplexity": round(q["perplexity"], 2),
                     "KL(ref ‖ q) mean (nats)": q["kl_mean"], "KL max (nats)": q["kl_max"],
                     "top-1 agreement": round(q["top1_agreement"], 4), "positions": q["positions"],
                     "measured on": loaded_label})
    return rows


# ----------------------------------------------------------------------------- a big model, a small GPU

# openai/gpt-oss-120b on the Hub: the safetensors tensors' total (model.safetensors.index.json
# total_size; helpers/presets/SOURCES.md).
GPT_OSS_120B_CHECKPOINT_BYTES = 65_248_815_744


def fit_on_gpu(model: str = "gpt-oss-120b", schemes=("bf16", "fp8", "mxfp4"), gpu: Any = "H100 SXM",
               kv_dtype: str = "bf16", context: int = 4096) -> list[dict[str, Any]]:
    """Does the model fit on one GPU under each scheme? The capacity planner's answer (helpers.capacity.plan,
    the one owner of the memory budget): weight bytes from helpers.cost.memory against the memory the GPU
    reports (its usable_memory_bytes: 79.11 GiB for an H100 SXM, not the 80 GB label) less the runtime
    reserve, and what is left for the KV cache (the plan's kv_budget_bytes_per_gpu). 'fits' is the
    planner's: at least one sequence of `context` tokens fits beside the weights (max_batch ≥ 1); the row
    also gives that max batch and the longest single sequence whose cache fits the budget (sliding windows
    honoured; capped at the model's context). gpu: a catalogued GPU (helpers.cost.gpus) or its name; an
    unknown name raises ValueError."""
    from ..capacity import plan
    from ..cost.gpus import get_gpu

    g = get_gpu(gpu)
    spec = get_spec(model)
    rows = []
    for s in schemes:
        p = plan(spec, g, weight_dtype=s, kv_dtype=kv_dtype, context=context)
        usable = p.budget_bytes_per_gpu - p.overhead_bytes_per_gpu      # weights + KV cache
        left = p.kv_budget_bytes_per_gpu
        longest = min(max_context_in(left, spec, kv_dtype), spec.max_position_embeddings or 2**24) if left > 0 else 0
        rows.append({"model": spec.name, "scheme": s, "gpu": g.name, "weight bytes": p.weight_bytes,
                     "weights (GB)": round(p.weight_bytes / GB, 2),
                     "GPU reports (GB)": round(p.memory_bytes_per_gpu / GB, 2), "usable after reserve (GB)": round(usable / GB, 2),
                     "fits": p.max_batch >= 1, "left for KV cache (GB)": round(left / GB, 2),
                     f"sequences of {context:,} tokens": p.max_batch,
                     f"KV cache room ({kv_dtype}), one sequence up to (tokens)": longest})
    return rows


def max_context_in(budget_bytes: float, model: str | dict | ModelSpec, kv_dtype: str = "bf16",
                   limit: int = 2**24) -> int:
    """Tokens of one sequence whose KV cache fits in a budget, honouring sliding-window layers
    (helpers.cost.memory.kv_cache_bytes, searched by bisection); capped at `limit`."""
    from ..cost.memory import kv_cache_bytes

    spec = model if isinstance(model, ModelSpec) else get_spec(model)
    if budget_bytes < kv_cache_bytes(spec, 1, 1, kv_dtype):
        return 0
    lo, hi = 1, limit
    if kv_cache_bytes(spec, hi, 1, kv_dtype) <= budget_bytes:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if kv_cache_bytes(spec, mid, 1, kv_dtype) <= budget_bytes:
            lo = mid
        else:
            hi = mid
    return lo
