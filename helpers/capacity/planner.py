"""Capacity and cost: does a model fit a GPU (or N of them in tensor parallel), how large a batch,
how long a decode step and a prefill take at the floor the hardware sets, and what a million output
tokens cost. Every catalogued GPU ranked by that cost once a latency SLO or a minimum batch is fixed:
helpers.capacity.ranking.

The memory of one GPU, as vLLM accounts for it (engine argument ``gpu_memory_utilization``, default
0.9, https://docs.vllm.ai/en/latest/configuration/engine_args.html; the profiling in
vllm/v1/worker/gpu_worker.py ``determine_available_memory``)::

    budget    = gpu_memory_utilization × memory                 (vLLM never plans beyond 90 %)
    KV budget = budget − weights per GPU − runtime overhead
    runtime overhead ≈ 1.5 GB per GPU: the activation peak of vLLM's profiling forward pass plus
                       non-torch memory (CUDA context, cuBLAS workspace, NCCL). vLLM logs for an
                       8 B model report about 1.25 GiB + 0.3 GiB.

Tensor parallelism over N GPUs (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053, §3; as vLLM
shards): weights split evenly (embeddings vocab-parallel; norms replicated and ignored here), query
heads split (N must divide them), KV heads split when N ≤ kv_heads (N must divide them) and
**replicated** when N > kv_heads (each GPU keeps one KV head: N / kv_heads copies of each). MLA's
compressed latent is shared by all heads, so every GPU keeps the **whole** latent cache (vLLM and
SGLang tensor parallel; the reason SGLang added data-parallel attention, LMSYS blog "SGLang v0.4",
2024-12). The all-reduces between GPUs are not counted: the step here is a floor.

The time of one step (a roofline, Williams et al. 2009; for LLM decoding e.g. Pope et al. 2022,
"Efficiently Scaling Transformer Inference", arXiv:2211.05102, §2)::

    decode step = max(bytes moved ÷ bandwidth, FLOPs ÷ peak FLOP/s)
      bytes = weight bytes per GPU (MoE: the experts the batch touches) + KV bytes read for the batch
      FLOPs = 2 × active parameters × batch + attention (4 × head_dim × cached tokens per head, layer)
    prefill (one prompt) = max(2 × active parameters × prompt + causal attention, in FLOPs ÷ peak,
                              weight bytes per GPU ÷ bandwidth)
    tokens/s = batch ÷ decode step
    $ per million output tokens = price per GPU-hour × GPUs ÷ (tokens/s × 3600) × 10^6

The FP8 peak is used when the weights are fp8 and the GPU has FP8, else the BF16 peak. All
figures are floors: engines reach roughly 60–80 % of peak bandwidth in decode.

Built on plan(): the ranking (helpers.capacity.ranking), the planner's tables and figures
(helpers.capacity.views) and its decode step against a measured one (helpers.capacity.measured).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..gpus import GPU, get_gpu
from ..memory import KV_DTYPES, WEIGHT_SCHEMES, cached_tokens, kv_cache_bytes, weight_bytes
from ..specs import ModelSpec, get_spec, param_breakdown
from ..units import DTYPE_BYTES, normalize_dtype

GPU_MEMORY_UTILIZATION = 0.9          # vLLM's default gpu_memory_utilization
RUNTIME_OVERHEAD_BYTES = 1.5e9        # activation peak + CUDA context etc., per GPU (see module doc)
GPU_COUNTS = (1, 2, 4, 8)             # what the notebook and the "fits no GPU" hint offer


# ----------------------------------------------------------------------------- checks

def _whole(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value <= 0:
        raise ValueError(f"{what} must be a positive whole number (≥ 1), got {value!r}")
    return int(value)


def _positive(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a positive number, got {value!r}") from None
    if not x > 0 or math.isinf(x):
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    return x


def _spec(model: str | Path | dict | ModelSpec) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else get_spec(model)


def check_context(spec: ModelSpec, context: int) -> int:
    """The context as a positive int within the model's maximum (max_position_embeddings)."""
    context = _whole(context, "context")
    limit = spec.max_position_embeddings
    if limit and context > limit:
        raise ValueError(f"context {context:,} tokens exceeds {spec.name}'s maximum of {limit:,} "
                         "(max_position_embeddings in its config.json)")
    return context


# ----------------------------------------------------------------------------- tensor parallel

@dataclass(frozen=True)
class Sharding:
    """How a model's weights and KV cache divide over `gpus` GPUs in tensor parallel."""

    gpus: int
    weight_fraction: float      # of the weights each GPU holds
    kv_fraction: float          # of the whole KV cache each GPU holds
    kv_heads_per_gpu: int | None
    note: str


def sharding(spec: ModelSpec, gpus: int) -> Sharding:
    """Weights 1/N each; KV heads split, replicated when N exceeds them; MLA latent replicated.

    Raises ValueError when N does not divide the attention heads, or the KV heads do not divide
    evenly (vLLM's own requirement for tensor parallelism).
    """
    n = _whole(gpus, "GPU count")
    if spec.num_heads % n:
        raise ValueError(f"tensor parallel over {n} GPUs needs {spec.name}'s {spec.num_heads} attention heads "
                         f"divisible by {n}; choose a GPU count that divides {spec.num_heads}")
    if n == 1:
        return Sharding(1, 1.0, 1.0, None if spec.is_mla else spec.num_kv_heads, "one GPU: nothing split")
    if spec.is_mla:
        return Sharding(n, 1 / n, 1.0, None, (
            f"weights split over {n} GPUs; MLA's compressed KV latent is shared by all heads, so every GPU "
            "keeps the whole latent cache (replicated, as in vLLM and SGLang tensor parallel)"))
    kv = spec.num_kv_heads
    if n <= kv:
        if kv % n:
            raise ValueError(f"tensor parallel over {n} GPUs needs {spec.name}'s {kv} KV heads divisible by {n}")
        return Sharding(n, 1 / n, (kv // n) / kv, kv // n,
                        f"weights and the {kv} KV heads split over {n} GPUs: {kv // n} KV heads each")
    if n % kv:
        raise ValueError(f"{n} GPUs exceed {spec.name}'s {kv} KV heads and are not a multiple of them")
    return Sharding(n, 1 / n, 1 / kv, 1, (
        f"{n} GPUs exceed the {kv} KV heads: each GPU keeps one KV head, every head replicated "
        f"{n // kv}×, so the KV cache per GPU is 1/{kv} of the whole, not 1/{n}"))


# ----------------------------------------------------------------------------- bytes and FLOPs

def _expert_bytes(spec: ModelSpec, scheme: str) -> float:
    """Bytes of the routed-expert tensors under a weight scheme (what helpers.memory.weight_bytes
    quantizes: fp8 and mxfp4 quantize experts; bitsandbytes int8/nf4 leave 3-D experts in bf16)."""
    pb = param_breakdown(spec)
    if not pb.experts:
        return 0.0
    w = weight_bytes(spec, scheme)
    if scheme in ("fp32", "bf16", "fp16"):
        return pb.experts * DTYPE_BYTES[scheme]
    if scheme == "mxfp4":
        return float(w.data_bytes + w.metadata_bytes)
    if scheme == "fp8":
        return (w.data_bytes + w.metadata_bytes) * pb.experts / w.quantized_params
    return pb.experts * DTYPE_BYTES["bf16"]


def experts_touched(spec: ModelSpec, tokens: int) -> float:
    """Expected fraction of a layer's routed experts that `tokens` tokens touch, each choosing k of E
    independently and uniformly: 1 − (1 − k/E)^tokens (1 for a dense model)."""
    if not spec.num_experts or not spec.experts_per_token:
        return 1.0
    return 1.0 - (1.0 - spec.experts_per_token / spec.num_experts) ** tokens


def active_params(spec: ModelSpec) -> float:
    """Parameters one token multiplies through: all but the routed experts, plus k/E of them."""
    pb = param_breakdown(spec)
    if pb.experts and spec.num_experts and spec.experts_per_token:
        return pb.total - pb.experts + pb.experts * spec.experts_per_token / spec.num_experts
    return float(pb.total)


def _attn_flops_per_cached_token(spec: ModelSpec) -> float:
    """FLOPs per query head per cached token: QKᵀ and AV, 2 FLOPs per multiply-add each.
    MLA (absorbed form, DeepSeek-V2 §2.1): scores over latent + rope dims, values over the latent."""
    if spec.is_mla:
        return 2 * (spec.kv_lora_rank + (spec.qk_rope_head_dim or 0)) + 2 * spec.kv_lora_rank
    return 4 * spec.head_dim


def decode_attention_flops(spec: ModelSpec, context: int, batch: int) -> float:
    """Attention FLOPs of one decode step: every query head of every layer over its cached tokens."""
    per = _attn_flops_per_cached_token(spec) * spec.num_heads
    return batch * per * sum(cached_tokens(context, t, spec.sliding_window) for t in spec.layer_types)


def prefill_attention_flops(spec: ModelSpec, prompt: int) -> float:
    """Causal attention FLOPs of one prompt: token t attends to min(t, window) tokens."""
    per = _attn_flops_per_cached_token(spec) * spec.num_heads
    total = 0
    for t in spec.layer_types:
        w = spec.sliding_window if t == "sliding_attention" and spec.sliding_window else None
        if w is None or prompt <= w:
            total += prompt * (prompt + 1) // 2
        else:
            total += w * (w + 1) // 2 + (prompt - w) * w
    return per * total


# ----------------------------------------------------------------------------- the plan

@dataclass
class Plan:
    """One configuration: a model on `gpus` × `gpu`, at a context and a batch. Bytes, seconds, USD."""

    model: str
    weight_dtype: str
    kv_dtype: str
    gpu: str
    gpus: int
    context: int
    batch: int
    prompt_tokens: int
    fits: bool
    reason: str
    max_batch: int
    memory_bytes_per_gpu: float
    budget_bytes_per_gpu: float
    overhead_bytes_per_gpu: float
    weight_bytes: int
    weight_bytes_per_gpu: float
    kv_bytes_per_seq_per_gpu: float
    kv_budget_bytes_per_gpu: float
    kv_bytes_per_gpu: float
    bandwidth: float
    peak_flops: float
    peak_kind: str
    step_s: float | None
    step_memory_s: float | None
    step_compute_s: float | None
    bound: str | None
    prefill_s: float | None
    tokens_per_s: float | None
    usd_per_hour: float
    usd_per_million_tokens: float | None
    sharding: str

    @property
    def step_ms(self) -> float | None:
        return None if self.step_s is None else self.step_s * 1e3

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["step_ms"] = self.step_ms
        d["prefill_ms"] = None if self.prefill_s is None else self.prefill_s * 1e3
        d["usd_per_hour_total"] = self.usd_per_hour * self.gpus
        return d


def usable_bytes(gpu_bytes: float, utilization: float = GPU_MEMORY_UTILIZATION,
                 overhead_bytes: float = RUNTIME_OVERHEAD_BYTES) -> float:
    """What one GPU offers weights and KV cache once the runtime's reserve is counted:
    utilization × memory − overhead (vLLM's default 0.9, and the fixed overhead of the module doc)."""
    if not gpu_bytes > 0 or not 0 < utilization <= 1 or overhead_bytes < 0:
        raise ValueError(f"need GPU memory > 0, utilization in (0, 1] and overhead ≥ 0; got "
                         f"{gpu_bytes!r}, {utilization!r}, {overhead_bytes!r}")
    return utilization * gpu_bytes - overhead_bytes


def _memory(spec: ModelSpec, gpu: GPU, gpus: int, weight_dtype: str, kv_dtype: str, context: int,
            utilization: float, overhead: float):
    shard = sharding(spec, gpus)
    w = weight_bytes(spec, weight_dtype).bytes
    w_gpu = w * shard.weight_fraction
    budget = utilization * gpu.memory_bytes
    kv_budget = budget - w_gpu - overhead
    kv_seq = kv_cache_bytes(spec, context, 1, kv_dtype) * shard.kv_fraction
    max_batch = max(0, int(kv_budget // kv_seq)) if kv_budget > 0 else 0
    return shard, w, w_gpu, budget, kv_budget, kv_seq, max_batch


def _gb(x: float) -> str:
    return f"{x / 1e9:,.2f} GB"


def plan(model: str | Path | dict | ModelSpec, gpu: str | GPU, gpus: int = 1, weight_dtype: str = "bf16",
         kv_dtype: str = "bf16", context: int = 4096, batch: int = 1, prompt_tokens: int | None = None,
         utilization: float = GPU_MEMORY_UTILIZATION, overhead_bytes: float = RUNTIME_OVERHEAD_BYTES) -> Plan:
    """Whether `batch` sequences of `context` tokens fit, and if so the decode step, prefill, tokens/s
    and $ per million output tokens (see the module docstring for every formula).

    context: tokens each sequence holds in the cache (the decode step is timed at this length, the
    slowest step of a sequence that grows to it). prompt_tokens: the prompt whose prefill is timed
    (default: the whole context), for one request alone (the TTFT floor).
    Raises ValueError on bad input (unknown GPU or dtype, context beyond the model, zero or negative).
    """
    spec = _spec(model)
    g = get_gpu(gpu)
    weight_dtype = normalize_dtype(weight_dtype, WEIGHT_SCHEMES)
    kv_dtype = normalize_dtype(kv_dtype, KV_DTYPES)
    context = check_context(spec, context)
    batch = _whole(batch, "batch")
    gpus = _whole(gpus, "GPU count")
    prompt = context if prompt_tokens is None else _whole(prompt_tokens, "prompt tokens")
    if prompt > context:
        raise ValueError(f"prompt of {prompt:,} tokens is longer than the context of {context:,}")
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization must be in (0, 1], got {utilization!r}")
    if not overhead_bytes >= 0:
        raise ValueError(f"overhead_bytes must be ≥ 0, got {overhead_bytes!r}")
    shard, w, w_gpu, budget, kv_budget, kv_seq, max_batch = _memory(
        spec, g, gpus, weight_dtype, kv_dtype, context, utilization, overhead_bytes)
    peak, peak_kind = g.peak_flops(weight_dtype)
    if w_gpu + overhead_bytes > budget:
        split = f" (1/{gpus} of {_gb(w)})" if gpus > 1 else ""
        reason = (f"the {weight_dtype} weights need {_gb(w_gpu)} per GPU{split} but one {g.name} offers "
                  f"{_gb(budget)} ({utilization:.0%} of {g.memory_gb:g} GB) less {_gb(overhead_bytes)} "
                  "runtime overhead")
    elif max_batch < 1:
        reason = (f"one sequence of {context:,} tokens needs {_gb(kv_seq)} of KV cache per GPU but only "
                  f"{_gb(kv_budget)} is left after the weights and runtime overhead")
    elif batch > max_batch:
        reason = (f"batch {batch} at {context:,} tokens needs {_gb(batch * kv_seq)} of KV cache per GPU; "
                  f"{_gb(kv_budget)} is left, enough for batch {max_batch}")
    else:
        reason = (f"fits: weights {_gb(w_gpu)} + KV {_gb(batch * kv_seq)} + overhead {_gb(overhead_bytes)} "
                  f"per GPU within {_gb(budget)}")
    fits = batch <= max_batch
    step = mem_s = comp_s = bound = prefill = tps = usd = None
    if fits:
        mem_s, comp_s = _decode_terms(spec, g, shard, weight_dtype, kv_dtype, context, batch)
        step = max(mem_s, comp_s)
        bound = "memory" if mem_s >= comp_s else "compute"
        prefill = _prefill_s(spec, g, shard, weight_dtype, kv_dtype, prompt)
        tps = batch / step
        usd = g.usd_per_hour * gpus / (tps * 3600) * 1e6
    return Plan(spec.name, weight_dtype, kv_dtype, g.name, gpus, context, batch, prompt, fits, reason, max_batch,
                g.memory_bytes, budget, overhead_bytes, w, w_gpu, kv_seq, kv_budget, batch * kv_seq,
                g.bandwidth, peak, peak_kind, step, mem_s, comp_s, bound, prefill, tps, g.usd_per_hour, usd,
                shard.note)


def _decode_terms(spec: ModelSpec, g: GPU, shard: Sharding, weight_dtype: str, kv_dtype: str, context: int,
                  batch: int) -> tuple[float, float]:
    """(memory term, compute term) of one decode step, in seconds."""
    w = weight_bytes(spec, weight_dtype).bytes
    experts = _expert_bytes(spec, weight_dtype)
    read = (w - experts + experts * experts_touched(spec, batch)) * shard.weight_fraction
    kv = kv_cache_bytes(spec, context, batch, kv_dtype) * shard.kv_fraction
    flops = (2 * active_params(spec) * batch + decode_attention_flops(spec, context, batch)) / shard.gpus
    peak, _ = g.peak_flops(weight_dtype)
    return (read + kv) / g.bandwidth, flops / peak


def _prefill_s(spec: ModelSpec, g: GPU, shard: Sharding, weight_dtype: str, kv_dtype: str, prompt: int) -> float:
    """Floor of one prompt's prefill (TTFT without queueing): compute, or reading every weight once
    and writing the prompt's KV, whichever takes longer."""
    peak, _ = g.peak_flops(weight_dtype)
    flops = (2 * active_params(spec) * prompt + prefill_attention_flops(spec, prompt)) / shard.gpus
    moved = weight_bytes(spec, weight_dtype).bytes * shard.weight_fraction \
        + kv_cache_bytes(spec, prompt, 1, kv_dtype) * shard.kv_fraction
    return max(flops / peak, moved / g.bandwidth)


def max_batch(model, gpu, gpus: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
              context: int = 4096) -> int:
    """The largest batch of `context`-token sequences whose KV cache fits beside the weights (0: none)."""
    return plan(model, gpu, gpus, weight_dtype, kv_dtype, context, 1).max_batch


def plan_for_slo(model, gpu, slo_ms: float, gpus: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                 context: int = 4096, min_batch: int = 1, **kw) -> tuple[Plan, bool]:
    """(plan, meets SLO): the largest batch whose decode step stays within `slo_ms` per output token.

    The step grows with the batch, so a bisection over 1…max_batch finds it. When even batch 1 (or
    `min_batch`) misses the SLO, returns that batch's plan and False.
    """
    slo_s = _positive(slo_ms, "SLO (ms per output token)") / 1e3
    min_batch = _whole(min_batch, "minimum batch")
    first = plan(model, gpu, gpus, weight_dtype, kv_dtype, context, 1, **kw)
    if first.max_batch < min_batch:
        return plan(model, gpu, gpus, weight_dtype, kv_dtype, context, min_batch, **kw), False
    base = plan(model, gpu, gpus, weight_dtype, kv_dtype, context, min_batch, **kw)
    if base.step_s > slo_s:
        return base, False
    lo, hi = min_batch, first.max_batch
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if plan(model, gpu, gpus, weight_dtype, kv_dtype, context, mid, **kw).step_s <= slo_s:
            lo = mid
        else:
            hi = mid - 1
    return plan(model, gpu, gpus, weight_dtype, kv_dtype, context, lo, **kw), True
