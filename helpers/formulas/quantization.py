"""What weight quantization saves, computed from a model's config (no weights, no GPU): the bytes of
its weights under each scheme, the parameters bitsandbytes leaves alone (embedding and output head),
and whether it fits one GPU per scheme — the capacity planner's budget (helpers.capacity.plan).

The rules that put words on these figures (against the rule of thumb "int8 halves, nf4 quarters", what a
mixture-of-experts model keeps at 2 bytes, the checkpoint check) are here too, returning
helpers.formulas.verdicts.Verdict.

Measured against a loaded model in helpers.measure.quant; drawn in helpers.present.quant_figures.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import verdicts
from .memory import kv_cache_bytes, weight_bytes
from .specs import PRESETS, ModelSpec, get_spec, param_breakdown
from .units import DTYPE_BYTES, normalize_dtype

# openai/gpt-oss-120b on the Hub: the safetensors tensors' total (model.safetensors.index.json
# total_size; helpers/presets/SOURCES.md).
GPT_OSS_120B_CHECKPOINT_BYTES = 65_248_815_744


@dataclass(frozen=True)
class SchemeWeights:
    """A model's computed weight bytes under one scheme."""

    model: str
    scheme: str
    bytes: int
    metadata_bytes: int
    quantized_share: float     # of all parameters, the share the scheme quantizes
    vs_first: float            # bytes ÷ the first scheme's

    @property
    def gb(self) -> float:
        return self.bytes / 1e9

    @property
    def gib(self) -> float:
        return self.bytes / 2**30


def preset_footprints(model: str | dict | ModelSpec = "mistral-7b-v0.1", schemes=("bf16", "int8", "nf4", "nf4-dq"),
                      base_dtype: str = "bf16") -> list[SchemeWeights]:
    """Computed weight bytes of a model under each scheme, with the share of parameters quantized."""
    spec = get_spec(model)
    ref = weight_bytes(spec, schemes[0], base_dtype=base_dtype).bytes
    out = []
    for s in schemes:
        w = weight_bytes(spec, s, base_dtype=base_dtype)
        out.append(SchemeWeights(spec.name, s, w.bytes, w.metadata_bytes, round(w.quantized_params / w.params, 4),
                                 round(w.bytes / ref, 4)))
    return out


@dataclass(frozen=True)
class EmbeddingShare:
    """How much of a model bitsandbytes leaves alone: the input embedding and lm_head, of all parameters."""

    params: int
    embedding_and_head: int
    linear: int

    @property
    def share(self) -> float:
        return self.embedding_and_head / self.params


def embedding_share(model: str | dict | ModelSpec) -> EmbeddingShare:
    pb = param_breakdown(model)
    return EmbeddingShare(pb.total, pb.embedding + pb.lm_head, pb.linear)


@dataclass(frozen=True)
class GpuFit:
    """One scheme of a model on one GPU, by the capacity planner's budget."""

    model: str
    scheme: str
    gpu: str
    weight_bytes: int
    memory_bytes: float        # what the GPU reports (its usable_memory_bytes)
    usable_bytes: float        # less the runtime reserve: weights + KV cache
    kv_budget_bytes: float     # left for the KV cache (the plan's kv_budget_bytes_per_gpu)
    fits: bool                 # at least one sequence of `context` tokens beside the weights
    context: int
    max_batch: int             # sequences of `context` tokens that fit
    kv_dtype: str
    longest_sequence: int      # tokens of one sequence whose KV cache fits (capped at the model's context)


def fit_on_gpu(model: str = "gpt-oss-120b", schemes=("bf16", "fp8", "mxfp4"), gpu: Any = "H100 SXM",
               kv_dtype: str = "bf16", context: int = 4096) -> list[GpuFit]:
    """Does the model fit on one GPU under each scheme? The capacity planner's answer (helpers.capacity.plan,
    the one owner of the memory budget): weight bytes from helpers.formulas.memory against the memory the GPU
    reports (its usable_memory_bytes: 79.11 GiB for an H100 SXM, not the 80 GB label) less the runtime
    reserve, and what is left for the KV cache. `fits` is the planner's (max_batch ≥ 1); `longest_sequence`
    honours sliding windows. gpu: a catalogued GPU (helpers.formulas.gpus) or its name; an unknown name raises
    ValueError."""
    from ..capacity import plan
    from .gpus import get_gpu

    g = get_gpu(gpu)
    spec = get_spec(model)
    out = []
    for s in schemes:
        p = plan(spec, g, weight_dtype=s, kv_dtype=kv_dtype, context=context)
        left = p.kv_budget_bytes_per_gpu
        longest = min(max_context_in(left, spec, kv_dtype), spec.max_position_embeddings or 2**24) if left > 0 else 0
        out.append(GpuFit(spec.name, s, g.name, p.weight_bytes, p.memory_bytes_per_gpu,
                          p.budget_bytes_per_gpu - p.overhead_bytes_per_gpu, left, p.max_batch >= 1, context,
                          p.max_batch, kv_dtype, longest))
    return out


def max_context_in(budget_bytes: float, model: str | dict | ModelSpec, kv_dtype: str = "bf16",
                   limit: int = 2**24) -> int:
    """Tokens of one sequence whose KV cache fits in a budget, honouring sliding-window layers
    (helpers.formulas.memory.kv_cache_bytes, searched by bisection); capped at `limit`."""
    spec = get_spec(model)
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


# ----------------------------------------------------------------------------- the rules that word these figures

def rule_of_thumb(scheme: str, base_dtype: str = "bf16") -> float:
    """What a scheme would leave of the base's bytes if it quantized every weight and stored nothing else:
    bytes per weight ÷ the base's (int8 of bf16: 0.5, nf4 of bf16: 0.25, int8 of fp32: 0.25)."""
    key = "nf4" if scheme == "nf4-dq" else normalize_dtype(scheme)
    return DTYPE_BYTES[key] / DTYPE_BYTES[normalize_dtype(base_dtype)]


def against_rule_of_thumb(ratio: float, scheme: str, base_dtype: str = "bf16", name: str = "") -> verdicts.Verdict:
    """A scheme's bytes ÷ its base's (`ratio`), against the rule of thumb (rule_of_thumb): 'as the rule of thumb
    says' when within the change margin of it, else how many times the rule of thumb's figure it is."""
    ideal = rule_of_thumb(scheme, base_dtype)
    way = verdicts.change_verdict(ratio / ideal)
    head = f"{name or scheme} holds {ratio:.3g}× the {base_dtype} bytes"
    words = (f"{head}, as the rule of thumb says ({ideal:g}×; within {verdicts.CHANGE_MARGIN:.0%})" if way == "about equal"
             else f"{head}: {verdicts.factor(ratio / ideal)} the rule of thumb's {ideal:g}×")
    return verdicts.Verdict(words, "against_rule_of_thumb", {"ratio": ratio, "rule_of_thumb": ideal,
                                                             "over_rule": ratio / ideal})


def left_alone(model, scheme: str = "int8") -> verdicts.Verdict:
    """What bitsandbytes leaves at the base dtype in a model (the embedding, the head, fused experts), as a
    share of its parameters (its band), and what the scheme's bytes are against bf16's (computed)."""
    first, w = preset_footprints(model, ("bf16", scheme))
    v = verdicts.share(1 - w.quantized_share, 1, "its parameters")
    return verdicts.Verdict(f"{w.model}: {scheme} holds {w.vs_first:.3g}× the bf16 bytes; bitsandbytes leaves {v.words} "
                            "at 2 bytes", "left_alone", {**v.evidence, "vs_bf16": w.vs_first})


def moe_presets() -> list[str]:
    """The presets with routed experts (mixture-of-experts)."""
    return [m for m in PRESETS if get_spec(m).num_experts]


def checkpoint_check(predicted: int, published: int) -> verdicts.Verdict:
    """The predicted bytes against a published checkpoint's: equal to the byte, or the difference."""
    if predicted == published:
        words = f"equal to the byte ({predicted:,} B both)"
    else:
        words = f"{predicted - published:+,} B apart ({abs(predicted - published) / published:.2%} of the checkpoint)"
    return verdicts.Verdict(words, "checkpoint_check", {"predicted": predicted, "published": published})
