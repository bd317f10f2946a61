"""Capacity and cost: does a model fit a GPU (or N of them in tensor parallel), how large a batch,
how long a decode step and a prefill take at the floor the hardware sets, and what a million output
tokens cost — then every catalogued GPU ranked by that cost once a latency SLO or a minimum batch
is fixed.

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
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from .gpus import GPU, catalog, catalog_label, get_gpu
from .memory import KV_DTYPES, WEIGHT_SCHEMES, cached_tokens, kv_cache_bytes, weight_bytes
from .specs import ModelSpec, get_spec, param_breakdown
from .units import DTYPE_BYTES, normalize_dtype

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


# ----------------------------------------------------------------------------- ranking

def _fits_somewhere(spec, weight_dtype, kv_dtype, context, gpus) -> bool:
    for g in catalog():
        try:
            if plan(spec, g, gpus, weight_dtype, kv_dtype, context, 1).max_batch >= 1:
                return True
        except ValueError:
            return False
    return False


def no_fit_message(spec: ModelSpec, weight_dtype: str, kv_dtype: str, context: int, gpus: int) -> str:
    """Why a model fits no catalogued GPU at this count, and the smallest count that would."""
    biggest = max(catalog(), key=lambda g: g.memory_gb)
    p = plan(spec, biggest, gpus, weight_dtype, kv_dtype, context, 1)
    hint = ""
    for n in GPU_COUNTS:
        if n > gpus:
            try:
                if _fits_somewhere(spec, weight_dtype, kv_dtype, context, n):
                    hint = f"; it fits on {n} GPUs in tensor parallel (--gpus {n})"
                    break
            except ValueError:
                continue
    count = "alone" if gpus == 1 else f"in tensor parallel over {gpus}"
    return (f"{spec.name} ({weight_dtype} weights, {kv_dtype} KV, {context:,} tokens) fits no catalogued GPU "
            f"{count}: even on the largest, {biggest.name} ({biggest.memory_gb:g} GB), {p.reason}{hint}; "
            "or choose a smaller weight dtype (fp8, nf4) or a shorter context")


def rank(model, weight_dtype: str = "bf16", kv_dtype: str = "bf16", context: int = 4096,
         slo_ms: float | None = None, min_batch: int | None = None, gpus: int = 1,
         gpu_names: Iterable[str] | None = None) -> list[dict]:
    """Every catalogued GPU (or `gpu_names`) at the cheapest batch the constraints allow, cheapest first.

    slo_ms: the step must stay within it (latency first: premium chat); min_batch: at least this many
    sequences must fit (throughput first: batch jobs, agents). Each GPU runs at the largest batch that
    fits and meets the SLO — the largest batch gives the lowest cost per token. GPUs that cannot
    meet the constraints follow, with the reason. Raises ValueError when the model fits no
    catalogued GPU at this count, with the count that would work.
    """
    spec = _spec(model)
    context = check_context(spec, context)
    gpus = _whole(gpus, "GPU count")
    sharding(spec, gpus)  # refuses counts that do not divide the heads
    need = 1 if min_batch is None else _whole(min_batch, "minimum batch")
    if slo_ms is not None:
        _positive(slo_ms, "SLO (ms per output token)")
    gs = [get_gpu(n) for n in gpu_names] if gpu_names is not None else list(catalog())
    if not _fits_somewhere(spec, weight_dtype, kv_dtype, context, gpus):
        raise ValueError(no_fit_message(spec, weight_dtype, kv_dtype, context, gpus))
    rows = []
    for g in gs:
        first = plan(spec, g, gpus, weight_dtype, kv_dtype, context, 1)
        if first.max_batch < 1:
            rows.append(_row(first, "does not fit", first.reason))
            continue
        if first.max_batch < need:
            p = plan(spec, g, gpus, weight_dtype, kv_dtype, context, need)
            rows.append(_row(p, "batch too small", f"fits batch {first.max_batch} < minimum {need}"))
            continue
        if slo_ms is not None:
            p, ok = plan_for_slo(spec, g, slo_ms, gpus, weight_dtype, kv_dtype, context, need)
            if not ok:
                rows.append(_row(p, "misses SLO", f"batch {p.batch} already takes {p.step_ms:.2f} ms per token "
                                 f"> SLO {slo_ms:g} ms"))
                continue
            note = f"largest batch within {slo_ms:g} ms (fits {first.max_batch})"
        else:
            p = plan(spec, g, gpus, weight_dtype, kv_dtype, context, first.max_batch)
            note = "largest batch that fits"
        rows.append(_row(p, "ok", note))
    rows.sort(key=lambda r: (r["status"] != "ok", r["usd_per_million_tokens"]
                             if r["status"] == "ok" else math.inf, r["gpu"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = i if r["status"] == "ok" else None
    return rows


def _row(p: Plan, status: str, note: str) -> dict:
    ok = status == "ok"
    return {"rank": None, "gpu": p.gpu, "gpus": p.gpus, "status": status,
            "batch": p.batch if ok else None, "max_batch": p.max_batch,
            "step_ms": p.step_ms if (ok or status == "misses SLO") else None,
            "tokens_per_s": p.tokens_per_s if ok else None,
            "prefill_ms": p.prefill_s * 1e3 if (ok and p.prefill_s is not None) else None,
            "bound": p.bound if ok else None,
            "usd_per_hour": p.usd_per_hour * p.gpus,
            "usd_per_million_tokens": p.usd_per_million_tokens if ok else None,
            "note": note}


RANK_COLUMNS = {"rank": "rank", "gpu": "GPU", "gpus": "GPUs", "status": "status", "batch": "batch",
                "step_ms": "ms per token", "tokens_per_s": "tokens/s", "usd_per_hour": "$ per hour",
                "usd_per_million_tokens": "$ per M output tokens", "max_batch": "max batch",
                "prefill_ms": "prefill ms (1 prompt)", "bound": "bound", "note": "why"}


def rank_table(model, weight_dtype: str = "bf16", kv_dtype: str = "bf16", context: int = 4096,
               slo_ms: float | None = None, min_batch: int | None = None, gpus: int = 1):
    """rank() as a pandas DataFrame with readable headers (units in the names), rounded for reading."""
    import pandas as pd

    df = pd.DataFrame(rank(model, weight_dtype, kv_dtype, context, slo_ms, min_batch, gpus))
    df = df[list(RANK_COLUMNS)].rename(columns=RANK_COLUMNS)
    for col, nd in (("ms per token", 2), ("tokens/s", 0), ("$ per hour", 2), ("$ per M output tokens", 3),
                    ("prefill ms (1 prompt)", 1)):
        df[col] = df[col].astype(float).round(nd)
    df["rank"] = df["rank"].astype("Int64")
    df["batch"] = df["batch"].astype("Int64")
    return df.set_index("rank")


def source_text(model, weight_dtype: str, kv_dtype: str, gpus: int = 1, context: int | None = None) -> str:
    """The stamp of a planner figure or table: what it was computed from."""
    spec = _spec(model)
    bits = [f"computed from {spec.name} config.json", f"weights {weight_dtype}", f"KV {kv_dtype}"]
    if context:
        bits.append(f"{context:,} tokens")
    bits.append(f"{gpus} GPU{'s' if gpus > 1 else ''} each (tensor parallel)" if gpus > 1 else "1 GPU each")
    bits.append(catalog_label())
    return " · ".join(bits)


# ----------------------------------------------------------------------------- curves and the triangle

def batch_points(max_b: int) -> list[int]:
    """1, 2, 4, … up to max_b, and max_b itself."""
    pts, b = [], 1
    while b < max_b:
        pts.append(b)
        b *= 2
    if max_b >= 1:
        pts.append(max_b)
    return pts


def curve(model, gpu_names: Iterable[str], weight_dtype: str = "bf16", kv_dtype: str = "bf16",
          context: int = 4096, gpus: int = 1):
    """Latency (ms per token) and throughput (tokens/s) over batch size, per GPU, up to its max batch."""
    import pandas as pd

    spec = _spec(model)
    rows = []
    for name in gpu_names:
        top = max_batch(spec, name, gpus, weight_dtype, kv_dtype, context)
        for b in batch_points(top):
            p = plan(spec, name, gpus, weight_dtype, kv_dtype, context, b)
            rows.append({"gpu": p.gpu, "batch": b, "step_ms": p.step_ms, "tokens_per_s": p.tokens_per_s,
                         "usd_per_million_tokens": p.usd_per_million_tokens, "bound": p.bound})
    return pd.DataFrame(rows, columns=["gpu", "batch", "step_ms", "tokens_per_s", "usd_per_million_tokens", "bound"])


def plot_curve(df, title: str, stamp_text: str, slo_ms: float | None = None):
    """Two panels: ms per token against batch (with the SLO as a line), tokens/s against batch,
    one line per GPU."""
    from . import plots

    fig, (ax1, ax2) = plots.figure(ncols=2, width=6.0, height=4.0)
    for gpu_name, d in df.groupby("gpu", sort=False):
        ax1.plot(d["batch"], d["step_ms"], marker="o", ms=3, label=gpu_name)
        ax2.plot(d["batch"], d["tokens_per_s"], marker="o", ms=3, label=gpu_name)
    if slo_ms:
        ax1.axhline(slo_ms, color="#b00", ls="--", lw=1)
        ax1.annotate(f"SLO {slo_ms:g} ms", (0.02, slo_ms), xycoords=("axes fraction", "data"), color="#b00",
                     fontsize=8, va="bottom")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch (sequences decoded together)")
    ax1.set_ylabel("decode step = ms per output token")
    ax2.set_ylabel("output tokens/s (all sequences)")
    ax2.set_yscale("log")
    ax1.set_title("latency")
    ax2.set_title("throughput")
    ax2.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return plots.finish(fig, stamp_text)


def triangle(model, gpu: str = "H100 SXM", weight_dtype: str = "bf16", kv_dtype: str = "bf16",
             context: int = 4096, slo_ms: float = 10.0, gpus: int = 1):
    """The quality–latency–throughput triangle on one GPU, in numbers: the same model served for
    latency (batch 1), within an SLO, for throughput (largest batch), and with less precise weights
    and cache (fp8: more batch, less cost, a quality cost to check on a benchmark)."""
    import pandas as pd

    spec = _spec(model)
    rows = []

    def add(corner: str, p: Plan, what: str):
        rows.append({"corner": corner, "weights": p.weight_dtype, "KV": p.kv_dtype, "batch": p.batch,
                     "ms per token": p.step_ms, "tokens/s": p.tokens_per_s,
                     "$ per M output tokens": p.usd_per_million_tokens, "max batch": p.max_batch, "what": what})

    top = max_batch(spec, gpu, gpus, weight_dtype, kv_dtype, context)
    if top < 1:
        raise ValueError(plan(spec, gpu, gpus, weight_dtype, kv_dtype, context, 1).reason)
    add("latency", plan(spec, gpu, gpus, weight_dtype, kv_dtype, context, 1), "one user, fastest tokens")
    p, ok = plan_for_slo(spec, gpu, slo_ms, gpus, weight_dtype, kv_dtype, context)
    add(f"latency ≤ {slo_ms:g} ms", p, "largest batch within the SLO" if ok else "misses the SLO even at batch 1")
    add("throughput", plan(spec, gpu, gpus, weight_dtype, kv_dtype, context, top), "largest batch that fits")
    q = max_batch(spec, gpu, gpus, "fp8", "fp8", context)
    if q >= 1 and (weight_dtype, kv_dtype) != ("fp8", "fp8"):
        add("throughput, less precision", plan(spec, gpu, gpus, "fp8", "fp8", context, q),
            "fp8 weights and cache: quality to check on a benchmark")
    df = pd.DataFrame(rows)
    for col, nd in (("ms per token", 2), ("tokens/s", 0), ("$ per M output tokens", 3)):
        df[col] = df[col].astype(float).round(nd)
    return df.set_index("corner")


# ----------------------------------------------------------------------------- prediction against measurement

def measure_sizes(device: str) -> dict:
    """Prompt, new tokens and batch for the measured step: small on a CPU, realistic on a GPU."""
    if device == "cpu":
        return {"prompt_tokens": 64, "new_tokens": 17, "batch": 1}
    return {"prompt_tokens": 512, "new_tokens": 33, "batch": 1}


def predict_vs_measure(loaded, bandwidth: float | None = None, batch: int | None = None,
                       prompt_tokens: int | None = None, new_tokens: int | None = None,
                       peak_flops: float | None = None, seed: int = 0) -> dict:
    """The planner's decode step for the loaded model on its own device against the measured one.

    Prediction: the same roofline as plan(), with the bytes of the loaded weights
    (helpers.memory.measured_weight_bytes) plus the KV cache read at the mean cached length, over
    the device's measured bandwidth (helpers.roofline.measure_bandwidth, the microbenchmark of
    notebook 03) unless `bandwidth` (bytes/s) is given; the compute term only when `peak_flops` is.
    Measurement: the median inter-token latency of a greedy generation with a real KV cache
    (helpers.timing.timed_generate). ratio = measured ÷ predicted (1 = the floor reached).
    """
    import torch

    from .memory import measured_weight_bytes
    from .timing import timed_generate

    sizes = measure_sizes(loaded.device)
    batch = _whole(batch or sizes["batch"], "batch")
    prompt = _whole(prompt_tokens or sizes["prompt_tokens"], "prompt tokens")
    new = _whole(new_tokens or sizes["new_tokens"], "new tokens")
    if new < 2:
        raise ValueError("new_tokens must be ≥ 2: the first token is the prefill, the rest are decode steps")
    if bandwidth is None:
        from .roofline import measure_bandwidth

        bandwidth = float(measure_bandwidth(loaded.device))
        bw_source = "measured (helpers.roofline.measure_bandwidth)"
    else:
        bandwidth = _positive(bandwidth, "bandwidth (bytes/s)")
        bw_source = "given"
    spec = loaded.spec
    w = measured_weight_bytes(loaded.model)
    mean_cached = prompt + new // 2       # step j of 1…new−1 attends over prompt + j tokens
    kv_dtype = loaded.dtype if loaded.dtype in KV_DTYPES else "bf16"
    kv = kv_cache_bytes(spec, mean_cached, batch, kv_dtype)
    mem_s = (w + kv) / bandwidth
    comp_s = 0.0
    if peak_flops:
        n_params = sum(p.numel() for p in loaded.model.parameters())
        comp_s = (2 * n_params * batch + decode_attention_flops(spec, mean_cached, batch)) / peak_flops
    predicted = max(mem_s, comp_s)

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, spec.vocab_size, (batch, prompt), generator=gen)
    timed_generate(loaded.model, ids[:, : min(prompt, 16)], 3, device=loaded.device)   # warm-up
    t = timed_generate(loaded.model, ids, new, device=loaded.device)
    measured = t.itl_median_s
    return {
        "label": loaded.label, "profile": loaded.profile, "device": loaded.device, "dtype": loaded.dtype,
        "batch": batch, "prompt_tokens": prompt, "new_tokens": new, "mean_cached_tokens": mean_cached,
        "weight_bytes": w, "kv_bytes": kv, "bandwidth": bandwidth, "bandwidth_source": bw_source,
        "predicted_step_s": predicted, "predicted_memory_s": mem_s, "predicted_compute_s": comp_s or None,
        "measured_step_s": measured, "measured_p90_s": sorted(t.step_s)[int(0.9 * (len(t.step_s) - 1))],
        "ratio": measured / predicted,
    }


def comparison_table(result: dict):
    """predict_vs_measure() as a two-column DataFrame for a notebook."""
    import pandas as pd

    from .units import fmt_bytes

    rows = [("model · dtype · device · profile", result["label"]),
            ("batch × prompt, decode steps", f"{result['batch']} × {result['prompt_tokens']}, "
                                            f"{result['new_tokens'] - 1} steps"),
            ("weights read per step", fmt_bytes(result["weight_bytes"])),
            ("KV read per step (mean length)", fmt_bytes(result["kv_bytes"])),
            ("bandwidth", f"{result['bandwidth'] / 1e9:,.1f} GB/s ({result['bandwidth_source']})"),
            ("predicted step (floor)", f"{result['predicted_step_s'] * 1e3:,.3f} ms"),
            ("measured step (median)", f"{result['measured_step_s'] * 1e3:,.3f} ms"),
            ("measured ÷ predicted", f"{result['ratio']:.2f}")]
    return pd.DataFrame(rows, columns=["", "value"]).set_index("")


def bench_capacity() -> dict:
    """For `make bench`: the planner's predicted decode step for the active profile on this device,
    the measured step, and their ratio (measured ÷ predicted)."""
    from .models import load

    loaded = load()
    r = predict_vs_measure(loaded)
    return {"profile": r["profile"], "label": r["label"], "device": r["device"], "dtype": r["dtype"],
            "batch": r["batch"], "prompt_tokens": r["prompt_tokens"],
            "bandwidth_gbs": r["bandwidth"] / 1e9, "bandwidth_source": r["bandwidth_source"],
            "predicted_step_ms": r["predicted_step_s"] * 1e3, "measured_step_ms": r["measured_step_s"] * 1e3,
            "ratio_measured_over_predicted": r["ratio"]}
