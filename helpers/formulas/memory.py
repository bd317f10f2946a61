"""Bytes of the weights per dtype and quantization scheme, of the KV cache for every attention kind, and one GPU's
memory budget. Each is checked by tests against real tensors or published sizes:
- KV bytes per token = Σ_layers 2 (K and V) × kv_heads × head_dim × bytes (PagedAttention, Kwon et al. 2023, §2);
- MLA caches one latent per token per layer, kv_lora_rank + qk_rope_head_dim (DeepSeek-V2, §2.1.2–2.1.3);
- a sliding layer holds at most `window` tokens (Mistral 7B, arXiv:2310.06825, §2); transformers'
  DynamicSlidingWindowLayer keeps window − 1 between steps (``cache_window_slots``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from .. import checks
from .specs import ModelSpec, get_spec, param_breakdown
from .units import DTYPE_BYTES, normalize_dtype

WEIGHT_SCHEMES = ("fp32", "bf16", "fp16", "fp8", "int8", "nf4", "nf4-dq", "mxfp4")
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "int2")

# bitsandbytes (bitsandbytes/functional.py, nn/modules.py): 4-bit blocks of 64 weights with an fp32 absmax each
# and a 16-entry fp32 code book; double quantization stores the absmax as uint8 in blocks of 256 with an fp32
# scale each, a 256-entry fp32 nested code book and one fp32 offset. LLM.int8 keeps one fp32 scale per row.
BNB_4BIT_BLOCK = 64
BNB_NESTED_BLOCK = 256
MX_BLOCK = 32   # OCP Microscaling MXFP4 (as gpt-oss ships its experts): 32 fp4 elements share one E8M0 byte


def kv_elements_per_token_layer(spec: ModelSpec) -> int:
    """2 × kv_heads × head_dim, or MLA's latent + rope key."""
    return spec.kv_lora_rank + (spec.qk_rope_head_dim or 0) if spec.is_mla else 2 * spec.num_kv_heads * spec.head_dim


def kv_bytes_per_token(model, dtype: str = "bf16") -> int:
    """KV bytes of one token over all layers, no window binding: Mistral 7B 2 × 32 × 8 × 128 × 2 B = 131,072."""
    spec = get_spec(model)
    return math.ceil(spec.num_layers * kv_elements_per_token_layer(spec) * DTYPE_BYTES[normalize_dtype(dtype, KV_DTYPES)])


@dataclass(frozen=True)
class KVTerms:
    formula: str                 # in words: "2 × layers × kv_heads × head_dim × bytes"
    terms: dict[str, float]      # each factor of the formula by its name in `formula`
    bytes_per_token: int


def kv_terms(model, dtype: str = "bf16") -> KVTerms:
    """The KV-per-token formula term by term, for showing it."""
    spec = get_spec(model)
    if spec.is_mla:
        terms = {"layers": spec.num_layers, "kv_lora_rank": spec.kv_lora_rank, "qk_rope_head_dim": spec.qk_rope_head_dim}
        formula = "layers × (kv_lora_rank + qk_rope_head_dim) × bytes"
    else:
        terms = {"K and V": 2, "layers": spec.num_layers, "kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim}
        formula = "2 × layers × kv_heads × head_dim × bytes"
    size = DTYPE_BYTES[normalize_dtype(dtype, KV_DTYPES)]
    return KVTerms(formula, {**terms, "bytes_per_element": size}, kv_bytes_per_token(spec, dtype))


def cache_window_slots(spec) -> int | None:
    """Tokens transformers' DynamicCache keeps on a sliding layer: window − 1 (the current token's K/V is
    computed afresh); None without a window."""
    return spec.sliding_window - 1 if spec.sliding_window else None


def cached_tokens(tokens: int, layer_type: str, window: int | None, window_slots: int | None = None) -> int:
    if layer_type == "sliding_attention" and window:
        return min(tokens, window_slots if window_slots is not None else window)
    return tokens


def kv_cache_bytes(model, tokens: int, batch: int = 1, dtype: str = "bf16", window_slots: int | None = None) -> int:
    """KV bytes of `batch` sequences of `tokens` tokens, a sliding layer keeping `window_slots` (default the window)."""
    spec = get_spec(model)
    tokens, batch = checks.count(tokens, "tokens"), checks.count(batch, "batch")
    elems = sum(cached_tokens(tokens, t, spec.sliding_window, window_slots) for t in spec.layer_types)
    return math.ceil(batch * elems * kv_elements_per_token_layer(spec) * DTYPE_BYTES[normalize_dtype(dtype, KV_DTYPES)])


@dataclass(frozen=True)
class WeightBytes:
    scheme: str
    params: int
    bytes: int
    quantized_params: int
    unquantized_params: int
    data_bytes: int          # quantized values themselves
    metadata_bytes: int      # scales, code books, offsets
    unquantized_bytes: int   # embeddings, lm_head, norms, biases (and what the scheme leaves alone)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _nf4_bytes(n: int, double_quant: bool) -> tuple[int, int]:
    """(data, metadata) bytes of one bitsandbytes Linear4bit weight of n elements."""
    blocks = math.ceil(n / BNB_4BIT_BLOCK)
    meta = blocks + 4 * math.ceil(blocks / BNB_NESTED_BLOCK) + 4 * 256 + 4 if double_quant else 4 * blocks
    return math.ceil(n / 2), meta + 4 * 16


def weight_bytes(model, scheme: str = "bf16", base_dtype: str = "bf16") -> WeightBytes:
    """A model's weight bytes under a dtype or scheme, metadata included; what a scheme leaves stays base_dtype.
    int8 (LLM.int8): the blocks' nn.Linear weights at 1 B + an fp32 scale per row. nf4 / nf4-dq (bitsandbytes
    4-bit): ½ B + absmax per 64 + code books, nn.Linear only (embeddings, norms, biases, 3-D experts stay). fp8 (per
    tensor, as vLLM's dynamic fp8): linear and expert matrices at 1 B + an fp32 scale each. mxfp4 (OCP MX, as
    gpt-oss ships): experts at ½ B + one byte per 32."""
    spec = get_spec(model)
    scheme = normalize_dtype(scheme, WEIGHT_SCHEMES)
    pb = param_breakdown(spec)
    if scheme in ("fp32", "bf16", "fp16"):
        b = int(pb.total * DTYPE_BYTES[scheme])
        return WeightBytes(scheme, pb.total, b, 0, pb.total, 0, 0, b)
    if scheme == "int8":
        q, data, meta = pb.linear, pb.linear, 4 * pb.linear_rows
    elif scheme in ("nf4", "nf4-dq"):
        parts = [_nf4_bytes(n, scheme == "nf4-dq") for n in pb.linear_sizes]
        q, data, meta = pb.linear, sum(d for d, _ in parts), sum(m for _, m in parts)
    elif scheme == "fp8":
        q = data = pb.linear + pb.experts
        meta = 4 * (pb.linear_layers + pb.expert_matrices)
    else:  # mxfp4
        if not pb.experts:
            raise ValueError(f"{spec.name} has no fused expert tensors; mxfp4 here quantizes experts only")
        q, data, meta = pb.experts, math.ceil(pb.experts / 2), math.ceil(pb.experts / MX_BLOCK)
    unq_bytes = int((pb.total - q) * DTYPE_BYTES[normalize_dtype(base_dtype, ("fp32", "bf16", "fp16"))])
    return WeightBytes(scheme, pb.total, data + meta + unq_bytes, q, pb.total - q, data, meta, unq_bytes)


# The runtime's reserve on one GPU, as vLLM accounts for it: it plans with gpu_memory_utilization of what the
# device reports (0.92 in vLLM 0.32, vllm/config/cache.py; 0.9 before), and of that the activation peak of its
# profiling pass plus non-torch memory (CUDA context, cuBLAS, NCCL; vllm/v1/worker/gpu_worker.py
# determine_available_memory) are not KV cache: about 1.25 GiB + 0.3 GiB in its logs for an 8 B model.
GPU_MEMORY_UTILIZATION = 0.92
RUNTIME_OVERHEAD_BYTES = 1.5e9


def runtime_reserve_bytes(gpu_memory: float, utilization: float = GPU_MEMORY_UTILIZATION,
                          overhead_bytes: float = RUNTIME_OVERHEAD_BYTES) -> float:
    """(1 − utilization) × memory + overhead: 80·10⁹ B at vLLM's defaults gives 6.4 + 1.5 = 7.9 GB."""
    gpu_memory = checks.number(gpu_memory, "GPU memory", unit="bytes")
    overhead_bytes = checks.number(overhead_bytes, "overhead_bytes", unit="bytes")
    return (1 - checks.fraction(utilization, "utilization", open_low=True)) * gpu_memory + overhead_bytes


def kv_budget_bytes(gpu_memory: float, weight_bytes: float, overhead_bytes: float) -> float:
    """GPU memory − weights − reserve (never below 0): the one memory budget of notebook 02 and the planner."""
    return max(0.0, checks.number(gpu_memory, "GPU memory", unit="bytes") - weight_bytes - overhead_bytes)


def max_users(gpu_memory: float, weight_bytes: float, overhead_bytes: float, kv_per_token: float,
              context: int) -> int:
    """⌊kv_budget_bytes ÷ (KV per token × context)⌋: Mistral 7B v0.1, bf16, H100 SXM (79.11 GiB reported), 4,096
    tokens: ⌊(84.94·10⁹ − 14,483,464,192 − 8.30·10⁹) ÷ (131,072 × 4,096)⌋ = 115."""
    context = checks.count(context, "context")
    kv_per_token = checks.number(kv_per_token, "KV bytes per token", positive=True, unit="bytes")
    return int(kv_budget_bytes(gpu_memory, weight_bytes, overhead_bytes) // (kv_per_token * context))


def prefill_activation_bytes(model, tokens: int, batch: int = 1, dtype: str = "bf16") -> int:
    """A prefill's largest activation, the MLP intermediate, batch × tokens × intermediate_size × bytes: a lower
    bound on what it holds beside weights and cache (Mistral 7B, bf16, 512 × 1,024 tokens: 15.0·10⁹ B)."""
    spec = get_spec(model)
    tokens, batch = checks.count(tokens, "tokens"), checks.count(batch, "batch")
    width = spec.intermediate_size or spec.moe_intermediate_size or spec.hidden_size
    return int(batch * tokens * width * DTYPE_BYTES[normalize_dtype(dtype, KV_DTYPES)])


def context_users_grid(kv_per_token: float, contexts: Iterable[int], users: Iterable[int]) -> list[list[int]]:
    """users × context × KV bytes per token for every pair: rows follow `users`, columns `contexts`."""
    contexts = [checks.count(c, "context") for c in contexts]
    return [[int(checks.count(u, "users") * c * kv_per_token) for c in contexts] for u in users]
