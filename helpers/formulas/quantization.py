"""What weight quantization saves, computed from a config (no weights, no GPU): the weight bytes per scheme, the
rule of thumb's figure, one matrix's bytes in each stored format (bitsandbytes, AWQ as AutoAWQ packs it, MXFP4,
fp8), whether a model fits one GPU per scheme (the planner's budget). Measured in helpers.measure.quant.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from .memory import MX_BLOCK, _nf4_bytes, kv_cache_bytes, weight_bytes
from .specs import ModelSpec, get_spec
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


def preset_footprints(model: str | dict | ModelSpec = "mistral-7b-v0.1", schemes=("bf16", "int8", "nf4", "nf4-dq"),
                      base_dtype: str = "bf16") -> list[SchemeWeights]:
    """Computed weight bytes of a model under each scheme, with the share of parameters quantized."""
    spec = get_spec(model)
    ws = [weight_bytes(spec, s, base_dtype=base_dtype) for s in schemes]
    return [SchemeWeights(spec.name, s, w.bytes, w.metadata_bytes, round(w.quantized_params / w.params, 4),
                          round(w.bytes / ws[0].bytes, 4)) for s, w in zip(schemes, ws)]


def fit_on_gpu(model: str = "gpt-oss-120b", schemes=("bf16", "fp8", "mxfp4"), gpu: Any = "H100 SXM",
               kv_dtype: str = "bf16", context: int = 4096) -> list[dict]:
    """Does the model fit on one GPU under each scheme? The capacity planner's answer (helpers.capacity.plan, the
    one owner of the memory budget), a row per scheme: memory_bytes the GPU reports, usable_bytes less the runtime
    reserve, kv_budget_bytes left for the KV cache, fits (one sequence of `context` tokens), max_batch of them,
    longest_sequence whose cache fits (windows honoured, capped at the model's context)."""
    from ..capacity import plan
    from .gpus import get_gpu

    g = get_gpu(gpu)
    spec = get_spec(model)
    out = []
    for s in schemes:
        p = plan(spec, g, weight_dtype=s, kv_dtype=kv_dtype, context=context)
        left = p.kv_budget_bytes_per_gpu
        longest = min(max_context_in(left, spec, kv_dtype), spec.max_position_embeddings or 2**24) if left > 0 else 0
        out.append({"model": spec.name, "scheme": s, "gpu": g.name, "weight_bytes": p.weight_bytes,
                    "memory_bytes": p.memory_bytes_per_gpu, "usable_bytes": p.budget_bytes_per_gpu - p.overhead_bytes_per_gpu,
                    "kv_budget_bytes": left, "fits": p.max_batch >= 1, "context": context, "max_batch": p.max_batch,
                    "kv_dtype": kv_dtype, "longest_sequence": longest})
    return out


def max_context_in(budget_bytes: float, model: str | dict | ModelSpec, kv_dtype: str = "bf16",
                   limit: int = 2**24) -> int:
    """Tokens of one sequence whose KV cache (kv_cache_bytes, windows honoured) fits a budget, by bisection;
    at most `limit`."""
    spec = get_spec(model)
    return bisect_left(range(1, limit + 1), True, key=lambda n: kv_cache_bytes(spec, n, 1, kv_dtype) > budget_bytes)


def rule_of_thumb(scheme: str, base_dtype: str = "bf16") -> float:
    """What a scheme would leave of the base's bytes if it quantized every weight and stored nothing else:
    bytes per weight ÷ the base's (int8 of bf16: 0.5, nf4 of bf16: 0.25, int8 of fp32: 0.25)."""
    key = "nf4" if scheme == "nf4-dq" else normalize_dtype(scheme)
    return DTYPE_BYTES[key] / DTYPE_BYTES[normalize_dtype(base_dtype)]


# AWQ as AutoAWQ stores a 4-bit layer (awq/modules/linear/gemm.py, WQLinear_GEMM; the layout vLLM's AWQ and
# AWQ-Marlin loaders read): `qweight` int32 (in_features, out_features / 8) — eight 4-bit codes per int32;
# `qzeros` int32 (in_features / group_size, out_features / 8) — the zero points are 4-bit integers packed
# eight to an int32, not fp16; `scales` fp16 (in_features / group_size, out_features). AWQ (Lin et al.,
# MLSys 2024) quantizes with group size 128.
AWQ_GROUP = 128
FORMATS = ("bf16", "fp8", "int8", "nf4", "nf4-dq", "awq", "mxfp4")


def matrix_bytes(scheme: str, in_features: int = 4096, out_features: int = 4096, group_size: int = AWQ_GROUP) -> int:
    """Bytes of one weight matrix (out_features × in_features), metadata included, as each format stores it:
    bf16 2 B a weight; fp8 1 B + one fp32 scale (per tensor); int8 (LLM.int8) 1 B + one fp32 scale per
    output row; nf4 / nf4-dq as helpers.formulas.memory counts a bitsandbytes Linear4bit; awq ½ B + one fp16
    scale and one 4-bit zero point per group of `group_size` inputs of an output (AutoAWQ's packing, above);
    mxfp4 ½ B + one E8M0 byte per 32."""
    n = in_features * out_features
    if scheme == "bf16":
        return 2 * n
    if scheme == "fp8":
        return n + 4
    if scheme == "int8":
        return n + 4 * out_features
    if scheme in ("nf4", "nf4-dq"):
        return sum(_nf4_bytes(n, scheme == "nf4-dq"))
    if scheme == "awq":
        if in_features % group_size or out_features % 8:
            raise ValueError(f"AWQ packs in_features in groups of {group_size} and out_features by 8, got "
                             f"{in_features} × {out_features}")
        groups = in_features // group_size
        return 4 * in_features * (out_features // 8) + 4 * groups * (out_features // 8) + 2 * groups * out_features
    if scheme == "mxfp4":
        return math.ceil(n / 2) + math.ceil(n / MX_BLOCK)
    raise ValueError(f"unknown format {scheme!r}; allowed: {', '.join(FORMATS)}")


def bits_per_weight(scheme: str, in_features: int = 4096, out_features: int = 4096) -> float:
    """matrix_bytes ÷ the weights, in bits: what a format costs per weight, its metadata included."""
    return 8 * matrix_bytes(scheme, in_features, out_features) / (in_features * out_features)


def checkpoint_rows(predicted: int, published: int) -> list[dict[str, Any]]:
    """The predicted bytes beside a published checkpoint's, their difference and ratio (a table's row)."""
    from .regime import ratio

    return [{"predicted (B)": predicted, "checkpoint (B)": published, "predicted − checkpoint (B)": predicted - published,
             "predicted ÷ checkpoint": ratio(predicted, published)}]
