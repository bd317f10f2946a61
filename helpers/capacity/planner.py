"""Capacity and cost: does a model fit a GPU (or N in tensor parallel), how large a batch, how long a decode step
and a prefill take at the floor the hardware sets, what a million tokens cost.

Memory is what the device reports (helpers.formulas.gpus: an H100 labelled "80 GB" reports 79.11 GiB); the KV
cache gets memory.kv_budget_bytes = memory − weights per GPU − memory.runtime_reserve_bytes, as vLLM accounts.
Tensor parallelism (Megatron-LM, arXiv:1909.08053, §3; as vLLM shards): weights split evenly, query heads split,
KV heads split when N ≤ kv_heads and **replicated** beyond (one per GPU); MLA's latent is shared by all heads, so
every GPU keeps the **whole** latent cache (why SGLang added data-parallel attention, LMSYS blog "SGLang v0.4",
2024-12). All-reduces are not counted: the step here is a floor (a roofline, Williams et al. 2009; Pope et al.
2022, arXiv:2211.05102, §2), bytes and FLOPs from helpers.formulas.stepcost::

    step floor = max(bytes per GPU ÷ datasheet bandwidth, FLOPs per GPU ÷ peak)   (MLA absorbed in decode)
    step = step floor ÷ efficiency;  prefill = the same max for one prompt ÷ efficiency;  tokens/s = batch ÷ step

A request of P prompt and O output tokens is priced apart, as API providers do: its prefill (the GPU busy with it
alone) for the input, its share of O decode steps at the mean context P + O/2 for the output. The FP8 peak is
used when the weights are fp8 and the GPU has FP8, else the BF16 peak.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .. import checks
from ..formulas.gpus import GPU, get_gpu
from ..formulas.memory import (GPU_MEMORY_UTILIZATION, KV_DTYPES, RUNTIME_OVERHEAD_BYTES, WEIGHT_SCHEMES,
                               kv_budget_bytes, kv_cache_bytes, runtime_reserve_bytes, weight_bytes)
from ..formulas.specs import ModelSpec, get_spec
from ..formulas.stepcost import (DEFAULT_EFFICIENCY, EFFICIENCY_SOURCE, decode_cost,  # noqa: F401  (re-exported)
                                 experts_touched, forward_cost)
from ..formulas.units import normalize_dtype

GPU_COUNTS = (1, 2, 4, 8)             # what the notebook and the "fits no GPU" hint offer


def check_context(spec: ModelSpec, context: int) -> int:
    """The context as a positive int within the model's maximum (max_position_embeddings)."""
    context = checks.count(context, "context")
    limit = spec.max_position_embeddings
    if limit and context > limit:
        raise ValueError(f"context {context:,} tokens exceeds {spec.name}'s maximum of {limit:,} "
                         "(max_position_embeddings in its config.json)")
    return context


@dataclass(frozen=True)
class Sharding:
    """How a model's weights and KV cache divide over `gpus` GPUs in tensor parallel."""

    gpus: int
    weight_fraction: float      # of the weights each GPU holds
    kv_fraction: float          # of the whole KV cache each GPU holds
    kv_heads_per_gpu: int | None
    note: str


def sharding(spec: ModelSpec, gpus: int) -> Sharding:
    """ValueError when N does not divide the attention heads or the KV heads (vLLM's own requirement)."""
    n = checks.count(gpus, "GPU count")
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


@dataclass(frozen=True)
class Plan:
    """One configuration: a model on `gpus` × `gpu`, at a context and a batch. Bytes, seconds, USD. step_s is at
    `efficiency` of the datasheet, step_floor_s at 100 % (the larger of step_memory_s, step_compute_s); the
    figures of a step are None where the batch does not fit, those of a request without output_tokens."""

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
    memory_bytes_per_gpu: float           # what the device reports (helpers.formulas.gpus)
    budget_bytes_per_gpu: float           # utilization × memory
    overhead_bytes_per_gpu: float
    weight_bytes: int
    weight_bytes_per_gpu: float
    kv_bytes_per_seq_per_gpu: float
    kv_budget_bytes_per_gpu: float
    bandwidth: float
    peak_flops: float
    peak_kind: str
    usd_per_hour: float
    sharding: str
    provider: str
    memory_label_gb: float
    memory_source: str
    efficiency: float
    efficiency_source: str
    pipeline_stages: int                  # helpers.parallel: layers split over this many stages of `gpus` each
    output_tokens: int | None
    step_s: float | None = None
    step_floor_s: float | None = None
    step_memory_s: float | None = None
    step_compute_s: float | None = None
    step_bytes_per_gpu: float | None = None
    bound: str | None = None
    prefill_s: float | None = None
    prefill_floor_s: float | None = None
    prefill_memory_s: float | None = None
    prefill_compute_s: float | None = None
    prefill_bound: str | None = None
    tokens_per_s: float | None = None
    usd_per_million_tokens: float | None = None
    request_prefill_s: float | None = None
    request_decode_s: float | None = None
    usd_per_request: float | None = None
    usd_per_million_input_tokens: float | None = None
    usd_per_million_output_tokens: float | None = None

    @property
    def step_ms(self) -> float | None:
        return None if self.step_s is None else self.step_s * 1e3

    @property
    def step_floor_ms(self) -> float | None:
        return None if self.step_floor_s is None else self.step_floor_s * 1e3

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "step_ms": self.step_ms, "step_floor_ms": self.step_floor_ms,
                "prefill_ms": None if self.prefill_s is None else self.prefill_s * 1e3,
                "usd_per_hour_total": self.usd_per_hour * self.gpus * self.pipeline_stages}


def _gb(x: float) -> str:
    return f"{x / 1e9:,.2f} GB"


def _terms(cost, shard: Sharding, g: GPU, peak: float) -> tuple[float, float, float]:
    """(bytes per GPU, bytes ÷ bandwidth, FLOPs ÷ peak) of a stepcost.StepCost: weights and FLOPs split 1/N,
    the KV cache by the sharding's fraction."""
    moved = cost.weight_read_bytes * shard.weight_fraction + cost.kv_bytes * shard.kv_fraction
    return moved, moved / g.bandwidth, cost.flops / shard.gpus / peak


def plan(model, gpu: str | GPU, gpus: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
         context: int = 4096, batch: int = 1, prompt_tokens: int | None = None,
         utilization: float = GPU_MEMORY_UTILIZATION, overhead_bytes: float = RUNTIME_OVERHEAD_BYTES,
         efficiency: float = DEFAULT_EFFICIENCY, output_tokens: int | None = None,
         pipeline_stages: int = 1) -> Plan:
    """Whether `batch` sequences of `context` tokens fit, and if so the decode step (timed at `context`, a growing
    sequence's slowest), one `prompt_tokens` prefill (default: the context; the TTFT floor), tokens/s and $ per
    million tokens; with `output_tokens` one request's cost. Pipeline stages split the layers (memory per GPU ÷
    stages; helpers.parallel.plan adds their communication)."""
    spec, g = get_spec(model), get_gpu(gpu)
    weight_dtype, kv_dtype = normalize_dtype(weight_dtype, WEIGHT_SCHEMES), normalize_dtype(kv_dtype, KV_DTYPES)
    context = check_context(spec, context)
    batch = checks.count(batch, "batch")
    eff = checks.fraction(efficiency, "efficiency (the share of the datasheet reached)", open_low=True)
    stages = checks.count(pipeline_stages, "pipeline stages")
    if stages > spec.num_layers:
        raise ValueError(f"{stages} pipeline stages exceed {spec.name}'s {spec.num_layers} layers; allowed: 1 to "
                         f"{spec.num_layers}")
    prompt = context if prompt_tokens is None else checks.count(prompt_tokens, "prompt tokens")
    if prompt > context:
        raise ValueError(f"prompt of {prompt:,} tokens is longer than the context of {context:,}")
    output = None if output_tokens is None else checks.count(output_tokens, "output tokens")
    if output is not None and prompt + output > context:
        raise ValueError(f"prompt {prompt:,} + output {output:,} tokens exceed the context of {context:,}; "
                         "raise the context or shorten the request")
    shard = sharding(spec, gpus)
    gpus = shard.gpus
    w = weight_bytes(spec, weight_dtype).bytes
    w_gpu = w * shard.weight_fraction / stages
    memory = g.usable_memory_bytes
    reserve = runtime_reserve_bytes(memory, utilization, overhead_bytes)   # checks both
    budget, kv_budget = memory - reserve + overhead_bytes, kv_budget_bytes(memory, w_gpu, reserve)
    kv_seq = kv_cache_bytes(spec, context, 1, kv_dtype) * shard.kv_fraction / stages
    top = int(kv_budget // kv_seq)
    if w_gpu + overhead_bytes > budget:
        split = f" (1/{gpus} of {_gb(w)})" if gpus > 1 else ""
        reason = (f"the {weight_dtype} weights need {_gb(w_gpu)} per GPU{split} but one {g.name} offers "
                  f"{_gb(budget)} ({utilization:.0%} of the {_gb(memory)} it reports) less {_gb(overhead_bytes)} "
                  "runtime overhead")
    elif top < 1:
        reason = (f"one sequence of {context:,} tokens needs {_gb(kv_seq)} of KV cache per GPU but only "
                  f"{_gb(kv_budget)} is left after the weights and runtime overhead")
    elif batch > top:
        reason = (f"batch {batch} at {context:,} tokens needs {_gb(batch * kv_seq)} of KV cache per GPU; "
                  f"{_gb(kv_budget)} is left, enough for batch {top}")
    else:
        reason = (f"fits: weights {_gb(w_gpu)} + KV {_gb(batch * kv_seq)} + overhead {_gb(overhead_bytes)} "
                  f"per GPU within {_gb(budget)}")
    peak, peak_kind = g.peak_flops(weight_dtype)
    p = dict(model=spec.name, weight_dtype=weight_dtype, kv_dtype=kv_dtype, gpu=g.name, gpus=gpus, context=context,
             batch=batch, prompt_tokens=prompt, fits=batch <= top, reason=reason, max_batch=top,
             memory_bytes_per_gpu=memory, budget_bytes_per_gpu=budget, overhead_bytes_per_gpu=overhead_bytes,
             weight_bytes=w, weight_bytes_per_gpu=w_gpu, kv_bytes_per_seq_per_gpu=kv_seq,
             kv_budget_bytes_per_gpu=kv_budget, bandwidth=g.bandwidth, peak_flops=peak, peak_kind=peak_kind,
             usd_per_hour=g.usd_per_hour, sharding=shard.note, provider=g.price_provider,
             memory_label_gb=g.memory_gb, memory_source=g.usable_memory_note, efficiency=eff,
             efficiency_source=EFFICIENCY_SOURCE if eff == DEFAULT_EFFICIENCY else "given", pipeline_stages=stages,
             output_tokens=output)
    if batch > top:
        return Plan(**p)
    moved, mem_s, comp_s = _terms(decode_cost(spec, context, batch, weight_dtype, kv_dtype, mla_absorbed=True),
                                  shard, g, peak)
    _, pre_mem_s, pre_comp_s = _terms(forward_cost(spec, prompt, 0, 1, weight_dtype, kv_dtype), shard, g, peak)
    usd_per_s = g.usd_per_hour * gpus * stages / 3600
    p.update(step_bytes_per_gpu=moved, step_memory_s=mem_s, step_compute_s=comp_s, step_floor_s=max(mem_s, comp_s),
             bound="memory" if mem_s >= comp_s else "compute", step_s=max(mem_s, comp_s) / eff,
             prefill_memory_s=pre_mem_s, prefill_compute_s=pre_comp_s, prefill_floor_s=max(pre_mem_s, pre_comp_s),
             prefill_bound="memory" if pre_mem_s >= pre_comp_s else "compute", prefill_s=max(pre_mem_s, pre_comp_s) / eff)
    p["tokens_per_s"] = batch / p["step_s"]
    p["usd_per_million_tokens"] = usd_per_s / p["tokens_per_s"] * 1e6
    if output is not None:
        mean = prompt + output // 2             # decode steps run at contexts prompt … prompt + output − 1
        _, m_s, c_s = _terms(decode_cost(spec, mean, batch, weight_dtype, kv_dtype, mla_absorbed=True), shard, g, peak)
        decode_s = output * max(m_s, c_s) / eff / batch
        p.update(request_prefill_s=p["prefill_s"], request_decode_s=decode_s,
                 usd_per_request=usd_per_s * (p["prefill_s"] + decode_s),
                 usd_per_million_input_tokens=usd_per_s * p["prefill_s"] / prompt * 1e6,
                 usd_per_million_output_tokens=usd_per_s * decode_s / output * 1e6)
    return Plan(**p)


def max_batch(model, gpu, gpus: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
              context: int = 4096) -> int:
    """The largest batch of `context`-token sequences whose KV cache fits beside the weights (0: none)."""
    return plan(model, gpu, gpus, weight_dtype, kv_dtype, context, 1).max_batch
