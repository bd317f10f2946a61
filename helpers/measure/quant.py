"""Weight quantization with bitsandbytes, measured: footprint against helpers.formulas.memory's prediction,
prefill and decode speed, and quality against the unquantized model on a fixed text.

Schemes (bitsandbytes on CUDA and, in its recent versions, on CPU):
- ``int8``: LLM.int8() (Dettmers et al. 2022, arXiv:2208.07339) — int8 weights, one fp32 scale per row.
- ``nf4``: 4-bit NormalFloat in blocks of 64 with an fp32 absmax each (QLoRA, arXiv:2305.14314, §3).
- ``nf4-dq``: nf4 with double quantization — the absmax themselves stored in 8 bits (QLoRA §3).
bitsandbytes replaces the ``nn.Linear`` layers of the decoder blocks only: the input embedding, the
output head (lm_head) and the norms stay in the reference dtype.

Quality against the unquantized model in the same run: helpers.measure.quality (perplexity, KL, top-1).
What the schemes save computed from a config alone: helpers.formulas.quantization; the tables:
helpers.present.quant_figures. The *_verdicts word one comparison's results by rule (helpers.formulas.verdicts).
"""
from __future__ import annotations

import json
import logging
import shutil
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..formulas import verdicts
from ..formulas.memory import weight_bytes
from ..formulas.quantization import against_rule_of_thumb, embedding_share
from ..formulas.units import dtype_bytes, fmt_si
from .quality import eval_ids, next_token_logprobs, quality
from ..formulas.specs import ModelSpec
from .dtypes import torch_dtype
from .tensor_bytes import measured_model_bytes, measured_weight_bytes
from .hardware import free_memory
from ..formulas.verdicts import above_floor_reason

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
    """Prefill time (median TTFT) and decode tokens/s (1 / median inter-token latency) of greedy generation,
    for each model of a {name: model} dict, after a warm-up each; the models take turns, one generation each
    per round, so that anything else slowing the machine slows them all alike."""
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


@dataclass
class Sizes:

    prompt_tokens: int
    new_tokens: int
    repeats: int
    eval_tokens: int | None  # None: the whole text


def sizes_for(profile: str, device: str) -> Sizes:
    """Seconds on a CPU; on a GPU, four 7B variants within the recorded-results script's budget."""
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


def _error_text(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return f"{type(exc).__name__}: {first}"


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
                                            None, error=_error_text(exc))
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


def _ran(results: list[VariantResult]) -> tuple[VariantResult, list[VariantResult]]:
    """The reference and the quantized rows that ran (no error)."""
    return results[0], [r for r in results[1:] if r.error is None]


def footprint_verdicts(results: list[VariantResult], spec: ModelSpec) -> list[verdicts.Verdict]:
    """The footprint section's words: measured against predicted (byte for byte), each scheme's bytes against
    the reference's and the rule of thumb, and the share of parameters bitsandbytes leaves alone."""
    ref, quantized = _ran(results)
    base = ref.scheme
    out = [verdicts.byte_for_byte([r.footprint["exact"] for r in [ref, *quantized]], "the prediction")]
    failed = [r for r in results if r.error]
    if failed:
        out.append(verdicts.Verdict("did not run here: " + "; ".join(f"{r.label} ({r.error})" for r in failed),
                                    "failed", {"failed": len(failed)}))
    total = ref.footprint["measured_weight_bytes"]
    out += [against_rule_of_thumb(r.footprint["measured_weight_bytes"] / total, r.scheme, base, r.label)
            for r in quantized]
    e = embedding_share(spec)
    v = verdicts.share(e.embedding_and_head, e.params, "the parameters")
    out.append(verdicts.Verdict(f"the embedding and the head, which bitsandbytes leaves in {base}, are {v.words}",
                                "share", v.evidence))
    return out


def streamed_bytes(result: VariantResult, spec: ModelSpec, base_dtype: str) -> int:
    """The weight bytes one decode step reads: the measured weights, less the input embedding table (a lookup:
    a step reads one row of it; helpers.formulas.stepcost counts the same way)."""
    table = 0 if spec.tie_word_embeddings else spec.vocab_size * spec.hidden_size * dtype_bytes(base_dtype)
    return int(result.footprint["measured_weight_bytes"] - table)


def time_follows_bytes(time_ratio: float, bytes_ratio: float, name: str) -> verdicts.Verdict:
    """A quantized step's time ÷ the reference's against its weight bytes ÷ the reference's: a step bound by
    reading its weights takes time in proportion to them (within the change margin); more time than that
    means something other than reading the weights sets the step; less, that they were read faster."""
    r = time_ratio / bytes_ratio
    way = verdicts.change_verdict(r)
    head = f"{name}'s decode step takes {time_ratio:.2f}× the reference's time for {bytes_ratio:.2f}× the weight bytes it reads"
    words = {"about equal": f"{head}: its time follows its bytes (within {verdicts.CHANGE_MARGIN:.0%})",
             "higher": f"{head} — {verdicts.factor(r)} what the bytes alone would give: something other than reading "
                       "the weights sets its step",
             "lower": f"{head} — {verdicts.factor(r)} what the bytes alone would give: a shorter step than reading "
                      "its weights in proportion would make"}[way]
    return verdicts.Verdict(words, "time_follows_bytes", {"time_ratio": time_ratio, "bytes_ratio": bytes_ratio, "ratio": r})


def against_floor(step_s: float, weight_bytes: int, bandwidth: float, bandwidth_name: str, name: str,
                  cache_bytes: int | None = None) -> verdicts.Verdict:
    """A decode step against its memory floor (its weight bytes ÷ `bandwidth`): the floor's share of the step
    and what that says — reading the weights sets it (most of it or more), or something else does; a step
    shorter than its floor read its weights faster than that bandwidth, from a cache when they fit in it."""
    floor = weight_bytes / bandwidth
    head = f"{name}: floor {floor * 1e3:,.3g} ms ({fmt_si(weight_bytes)} at {bandwidth_name}) against a {step_s * 1e3:,.3g} ms step"
    if verdicts.change_verdict(floor / step_s) == "higher":
        why = above_floor_reason(weight_bytes, cache_bytes)
        words = f"{head} — read at {verdicts.factor(floor / step_s)} {bandwidth_name}{why}"
    else:
        v = verdicts.share(floor, step_s, "the step")
        f = v.evidence["fraction"]
        words = f"{head}: the floor is {v.words} — " + (
            "reading the weights sets the step" if f > 0.5 + verdicts.HALF_BAND else
            "reading the weights sets about half of it" if verdicts.share_band(f) == "about half" else
            "something other than reading the weights sets most of the step")
    return verdicts.Verdict(words, "against_floor", {"step_s": step_s, "floor_s": floor, "fraction": floor / step_s})


def speed_verdicts(results: list[VariantResult], spec: ModelSpec, bandwidth: float | None = None,
                   bandwidth_name: str = "", cache_bytes: int | None = None) -> list[verdicts.Verdict]:
    """The speed section's words from one comparison: each scheme's decode step and prefill against the
    reference's (helpers.formulas.verdicts.speed), whether each quantized step's time follows the bytes it
    reads (time_follows_bytes), and — where a bandwidth is known (a catalogued GPU's datasheet) — each step
    against its memory floor (against_floor)."""
    ref, quantized = _ran(results)
    timed = [r for r in quantized if r.speed]
    if not ref.speed or not timed:
        return []
    base = ref.scheme
    out = []
    for key, what in (("itl_s", "decode step"), ("prefill_s", "prefill")):
        each = {r.label: verdicts.speed(r.speed[key], ref.speed[key]) for r in timed}
        out.append(verdicts.Verdict(f"{what}, against the {base} reference: " + "; ".join(f"{k} {v}" for k, v in each.items()),
                                    "speed", {k: v.evidence["ratio"] for k, v in each.items()}))
    ref_bytes = streamed_bytes(ref, spec, base)
    out.append(verdicts.Verdict(f"the reference's decode step reads {fmt_si(ref_bytes)} of weights in "
                                f"{ref.speed['itl_s'] * 1e3:,.2f} ms: {ref_bytes / ref.speed['itl_s'] / 1e9:,.1f} GB/s",
                                "rate", {"bytes": ref_bytes, "step_s": ref.speed["itl_s"]}))
    out += [time_follows_bytes(r.speed["itl_s"] / ref.speed["itl_s"], streamed_bytes(r, spec, base) / ref_bytes, r.label)
            for r in timed]
    if bandwidth:
        out += [against_floor(r.speed["itl_s"], streamed_bytes(r, spec, base), bandwidth, bandwidth_name, r.label,
                              cache_bytes) for r in [ref, *timed]]
    return out


def _perplexity_words(p: float, ref: float) -> str:
    way = verdicts.change_verdict(p / ref)
    return {"about equal": f"about equal, ×{p / ref:.4f}", "higher": f"{verdicts.factor(p / ref)} higher",
            "lower": f"{verdicts.factor(ref / p)} lower"}[way]


def quality_verdicts(results: list[VariantResult]) -> list[verdicts.Verdict]:
    """Each quantized scheme's quality against the reference, from its numbers: perplexity against the
    reference's (the change margin), mean KL, and top-1 agreement as the positions whose first token differs."""
    ref, quantized = _ran(results)
    out = []
    for r in quantized:
        q = r.quality
        flips = round((1 - q["top1_agreement"]) * q["positions"])
        out.append(verdicts.Verdict(
            f"{r.label}: perplexity {q['perplexity']:,.2f} against the reference's {ref.quality['perplexity']:,.2f} "
            f"({_perplexity_words(q['perplexity'], ref.quality['perplexity'])}); mean KL {q['kl_mean']:.2e} nats; "
            f"top-1 agreement {q['top1_agreement']:.1%} ({flips:,} of {q['positions']:,} positions rank another token first)",
            "quality", {"perplexity": q["perplexity"], "reference_perplexity": ref.quality["perplexity"],
                        "kl_mean": q["kl_mean"], "top1_agreement": q["top1_agreement"], "flips": flips}))
    return out


def closer(kl: dict[str, float]) -> verdicts.Verdict:
    """Of two schemes' mean KL against the reference ({name: nats}), which stays closer: the smaller, when it
    is smaller by more than the change margin; otherwise as close."""
    (a, ka), (b, kb) = sorted(kl.items(), key=lambda x: x[1])
    if kb == 0:
        words = f"{a} and {b} both reproduce the reference (mean KL 0)"
    elif ka == 0:
        words = f"{a} reproduces the reference (mean KL 0); {b}'s mean KL is {kb:.2e} nats"
    elif verdicts.change_verdict(kb / ka) == "higher":
        words = f"{a} stays closer to the reference: its mean KL ({ka:.2e} nats) is {verdicts.factor(kb / ka)} smaller than {b}'s ({kb:.2e})"
    else:
        words = f"{a} and {b} stay as close to the reference (mean KL {ka:.2e} and {kb:.2e} nats, within {verdicts.CHANGE_MARGIN:.0%})"
    return verdicts.Verdict(words, "closer", {a: ka, b: kb})


def flips_against(trained: float, random: float, name: str) -> verdicts.Verdict:
    """A scheme's top-1 disagreement (1 − agreement) on a trained model against on a random one."""
    dt, dr = 1 - trained, 1 - random
    head = (f"{name} ranks another token first at {dt:.1%} of the positions on the trained model against {dr:.1%} "
            "on the random one")
    if dt == 0 or dr == 0:                       # no ratio of flips to give
        words = head
    else:
        words = f"{head}: {verdicts.speed(dt, dr, faster='fewer', slower='more', same='as many')} flips"
    return verdicts.Verdict(words, "flips_against", {"trained_disagreement": dt, "random_disagreement": dr})
