"""Tensor, pipeline and expert parallelism with their communication, on top of the capacity planner.

Tensor parallelism over T GPUs (Megatron-LM, arXiv:1909.08053, §3): each layer's attention and MLP end in a
row-parallel matmul whose partial sums the T GPUs add up — **two all-reduces per layer** of the step's
activations, batch × hidden × 2 bytes (bf16). Pipeline parallelism over P stages (GPipe, arXiv:1811.06965,
§2.2): each stage holds L/P layers; a batch cut into m micro-batches flows through them, and the stages idle
while the pipeline fills and drains — the **bubble**, (P−1)/(m+P−1) of the time. A decode step (the floor from
helpers.capacity.planner.plan, the communication from helpers.parallel.collectives)::

    slot       = plan(T GPUs, P stages, batch b/m).step ÷ P          one micro-batch through one stage
               + 2 · L/P · all_reduce(b/m × hidden × 2 B, T, link)     tensor parallel's all-reduces
               + send(b/m × hidden × 2 B, link)                        to the next stage (P > 1)
    step       = (m + P − 1) · slot                                    one batch through the pipeline
    steady     = m · slot                                              the pipeline kept full
    communication share = (all-reduces + send) ÷ slot

The pipeline is full with max(m, P) micro-batches in flight (a micro-batch's next token enters the first
stage once its last one has left the last), whose KV cache must fit, else the "pipeline full" figures are
None. Up to GPUS_PER_SERVER GPUs talk over one server's link, beyond it over the cluster's. The stages are
taken as equal and the communication as not overlapped with compute (the upper side).

Expert parallelism over E GPUs (DeepSeek-V3 report, arXiv:2412.19437, §3.4): each token's hidden state goes
to the GPUs of its k experts and back — **two all-to-alls per MoE layer** of (tokens per GPU) × k × hidden ×
2 bytes; the experts a step reads grow with the batch (helpers.formulas.stepcost.experts_touched).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import asdict, dataclass, replace
from fractions import Fraction

import pandas as pd

from .. import checks
from ..capacity.planner import DEFAULT_EFFICIENCY, plan
from ..formulas.config_schema import MAX_TOKENS
from ..formulas.gpus import get_gpu
from ..formulas.specs import get_spec
from ..formulas.stepcost import expert_bytes, experts_touched
from .collectives import all_reduce_s, all_to_all_s, send_s
from .links import GPUS_PER_SERVER, Link, get_link

ACTIVATION_BYTES = 2          # bf16 activations on the wire
FLATTEN_GAIN = 1.5            # the speed-up "flattens" where doubling the GPUs gains less than 1.5× (¾ of the ideal 2×)


def bubble_share(pp: int, micro_batches: int) -> float:
    """The share of a step each stage idles while the micro-batches fill and drain the pipeline, (P−1)/(m+P−1)."""
    pp, m = checks.count(pp, "pp"), checks.count(micro_batches, "micro-batches")
    return (pp - 1) / (m + pp - 1)


@dataclass(frozen=True)
class ParallelStep:
    """One decode step of `batch` sequences on tp × pp GPUs; seconds unless named otherwise."""

    model: str
    gpu: str
    link: str                             # the tensor-parallel group's link
    tp: int
    pp: int
    micro_batches: int
    batch: int
    context: int
    fits: bool
    reason: str
    max_batch: int
    stage_s: float | None = None          # one micro-batch through one stage, no communication
    all_reduce_s: float | None = None     # tensor parallel's all-reduces of one micro-batch in one stage
    send_s: float | None = None           # one micro-batch's activations to the next stage
    all_reduces_per_step: int = 0
    all_reduce_bytes: int = 0             # one all-reduce's message
    slot_s: float | None = None
    step_s: float | None = None
    steady_step_s: float | None = None
    bubble_share: float | None = None
    communication_share: float | None = None
    tokens_per_s: float | None = None
    steady_tokens_per_s: float | None = None
    efficiency: float = DEFAULT_EFFICIENCY
    weight_bytes_per_gpu: float | None = None   # the planner's, memory does not depend on the links
    usd_per_million_tokens: float | None = None  # decode only, at tokens_per_s (communication counted)
    pp_link: str = ""                     # between stages ("" without pipeline stages)
    in_flight: int = 0                    # sequences in flight to keep the pipeline full: max(m, P) · b/m
    steady_fits: bool | None = None       # whether their KV cache fits (steady_* are None when not)
    steady_reason: str = ""

    def to_dict(self) -> dict:
        return {**asdict(self), "gpus": self.tp * self.pp}


def parallel_step(model, gpu, tp: int = 1, pp: int = 1, micro_batches: int = 1, batch: int = 1,
                  context: int = 4096, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                  link: str | Link | None = None, pp_link: str | Link | None = None,
                  efficiency: float = DEFAULT_EFFICIENCY) -> ParallelStep:
    """The decode step on tp × pp GPUs with its communication (module docstring). link: the tensor-parallel
    group's (a Link, a kind, or None: the fastest that joins tp GPUs); pp_link: between stages (default: the
    same while the tp × pp GPUs fit in one server, else the cluster's)."""
    spec, g = get_spec(model), get_gpu(gpu)
    tp, pp = checks.count(tp, "tp"), checks.count(pp, "pp")
    micro_batches, batch = checks.count(micro_batches, "micro-batches"), checks.count(batch, "batch")
    if pp > spec.num_layers:
        raise ValueError(f"pp={pp} stages exceed {spec.name}'s {spec.num_layers} layers")
    if batch % micro_batches:
        raise ValueError(f"batch {batch} does not split into {micro_batches} equal micro-batches; "
                         "give a batch divisible by the micro-batches")
    whole = plan(spec, g, tp, weight_dtype, kv_dtype, context, batch, efficiency=efficiency, pipeline_stages=pp)
    tp_link = get_link(g, link, tp)
    # the stages span tp × pp GPUs: one server's link while they fit in one, else the cluster's
    stage_link = get_link(g, pp_link if pp_link is not None else link if tp * pp <= GPUS_PER_SERVER else None,
                          tp * pp) if pp > 1 else None
    mb = batch // micro_batches
    in_flight = max(micro_batches, pp) * mb
    out = ParallelStep(spec.name, g.name, tp_link.label, tp, pp, micro_batches, batch, context, whole.fits,
                       whole.reason, whole.max_batch, efficiency=efficiency,
                       weight_bytes_per_gpu=whole.weight_bytes_per_gpu,
                       pp_link=stage_link.label if stage_link else "", in_flight=in_flight)
    if not whole.fits:
        return out
    one = plan(spec, g, tp, weight_dtype, kv_dtype, context, mb, efficiency=efficiency, pipeline_stages=pp)
    message = mb * spec.hidden_size * ACTIVATION_BYTES
    stage = one.step_s / pp
    reduce_s = 2 * spec.num_layers / pp * all_reduce_s(message, tp, tp_link) if tp > 1 else 0.0
    hop_s = send_s(message, stage_link) if pp > 1 else 0.0
    slot = stage + reduce_s + hop_s
    step = (micro_batches + pp - 1) * slot
    steady = in_flight <= whole.max_batch
    return replace(out, stage_s=stage, all_reduce_bytes=message, all_reduces_per_step=2 * spec.num_layers if tp > 1 else 0,
                   all_reduce_s=reduce_s, send_s=hop_s, slot_s=slot, step_s=step,
                   bubble_share=bubble_share(pp, micro_batches), communication_share=(reduce_s + hop_s) / slot,
                   tokens_per_s=batch / step,
                   # the planner's $ per million tokens (its $ per second over all tp × pp GPUs) at this slower step
                   usd_per_million_tokens=whole.usd_per_million_tokens * whole.tokens_per_s * step / batch,
                   steady_fits=steady, steady_step_s=micro_batches * slot if steady else None,
                   steady_tokens_per_s=batch / (micro_batches * slot) if steady else None,
                   steady_reason="" if steady else (f"keeping the {pp} stages full takes {max(micro_batches, pp)} "
                                                    f"micro-batches of {mb} in flight, {in_flight:,} sequences of "
                                                    f"{context:,} tokens; the KV cache holds {whole.max_batch:,}"))


def tp_scaling(model, gpu, batch: int = 1, context: int = 4096, link: str | Link | None = None,
               counts=(1, 2, 4, 8), weight_dtype: str = "bf16", kv_dtype: str = "bf16",
               efficiency: float = DEFAULT_EFFICIENCY) -> list[TPScaling]:
    """The decode step against the tensor-parallel degree, its speed-up over the first that fits (others skipped)."""
    def step(n: int) -> ParallelStep:
        return parallel_step(model, gpu, n, 1, 1, batch, context, weight_dtype, kv_dtype, link, efficiency=efficiency)

    steps = []
    for n in _counts(counts, "counts", "a tensor-parallel degree", "(1, 2, 4, 8)"):
        try:
            s = step(n)
        except ValueError:        # a degree that does not divide the heads
            continue
        if s.fits:
            steps.append(s)
    if not steps:
        raise ValueError(f"no tensor-parallel degree of {tuple(counts)} fits: on one GPU {step(1).reason}")
    rows = [TPScaling(s.tp, s.link, s.stage_s * 1e3, s.all_reduce_s * 1e3, s.step_s * 1e3, s.communication_share,
                      steps[0].step_s / s.step_s) for s in steps]
    return rows[:1] + [replace(row, gain_over_previous=row.speed_up / prev.speed_up) for prev, row in zip(rows, rows[1:])]


@dataclass(frozen=True)
class TPScaling:
    """One degree of tp_scaling() (ms): speed-up over the first degree that fits, gain over the previous."""

    tp: int
    link: str
    work_ms: float
    all_reduce_ms: float
    step_ms: float
    communication_share: float
    speed_up: float
    gain_over_previous: float | None = None


def flattens_at(rows: list[TPScaling], gain: float = FLATTEN_GAIN) -> int | None:
    """The first degree whose step gains less than `gain`× over the previous one."""
    return next((row.tp for row in rows[1:] if row.gain_over_previous < gain), None)


def busiest_gpu_experts(experts: int, k: int, ep: int, tokens: int) -> float:
    """The expected number of routed experts the busiest of `ep` GPUs reads in one MoE layer, exactly: each
    of `tokens` tokens chooses `k` of `experts` uniformly (as stepcost.experts_touched assumes), the experts
    split over the GPUs in equal blocks. A step waits for that GPU.

    With T the set of experts touched, P(T ⊆ S) = (C(|S|, k) ÷ C(E, k))^b for any set S, so by
    inclusion–exclusion P(T = A) = Σᵢ (−1)^(|A|−i) C(|A|, i) (C(i, k) ÷ C(E, k))^b depends on |A| alone;
    the sets with at most j experts on every GPU are counted by the coefficients of ∏_g Σ_{c≤j} C(m_g, c) xᶜ,
    and E[max] = Σ_j P(max > j). In whole numbers (Python's integers), so no rounding cancels.
    Real routers differ: DeepSeek-V3's picks its k experts within 4 of its 8 expert groups (config
    `topk_group`, `n_group`) and balances load with a bias, which this leaves out."""
    E, b = experts, tokens
    sizes = [E // ep + (g < E % ep) for g in range(ep)]
    if E * (1 - k / E) ** b < 1e-12:        # every expert touched but with probability < 1e-12: the largest block
        return float(max(sizes))
    return _busiest(E, k, tuple(sizes), b)


@functools.lru_cache(maxsize=256)
def _busiest(E: int, k: int, sizes: tuple[int, ...], b: int) -> float:
    power = [math.comb(i, k) ** b for i in range(E + 1)]
    exactly = [sum((-1) ** (n - i) * math.comb(n, i) * power[i] for i in range(k, n + 1)) for n in range(E + 1)]
    whole = math.comb(E, k) ** b
    expected = Fraction(0)
    for j in range(max(sizes)):
        counts = [1]
        for m in sizes:
            block = [math.comb(m, c) for c in range(min(j, m) + 1)]
            nxt = [0] * (len(counts) + len(block) - 1)
            for a, ca in enumerate(counts):
                for c, cb in enumerate(block):
                    nxt[a + c] += ca * cb
            counts = nxt
        expected += 1 - Fraction(sum(exactly[n] * counts[n] for n in range(min(len(counts), E + 1))), whole)
    return float(expected)


def moe_rows(model, gpu, batches=(1, 8, 64, 256), ep: int = 8, weight_dtype: str = "bf16",
             link: str | Link | None = None) -> pd.DataFrame:
    """Per decode step of an MoE model, one row per batch: the experts touched, those read on the mean and on the
    busiest of `ep` GPUs (which the step waits for) with their times, the two all-to-alls per MoE layer (dispatch,
    combine) over the link, and their share of (all-to-all + expert reads) on each."""
    spec = get_spec(model)
    if not spec.num_experts or not spec.experts_per_token:
        raise ValueError(f"{spec.name} is not a mixture-of-experts model (no routed experts in its config)")
    ep = checks.count(ep, "ep (GPUs the experts are split over)")
    if ep > spec.num_experts:
        raise ValueError(f"ep={ep} GPUs exceed {spec.name}'s {spec.num_experts} routed experts; allowed: 1 to "
                         f"{spec.num_experts}")
    batches = _counts(batches, "batches", "a batch", "(1, 8, 64)")
    g = get_gpu(gpu)
    lk = get_link(g, link, ep)
    moe_layers = spec.num_layers - (spec.first_k_dense_replace or 0)
    experts = expert_bytes(spec, weight_dtype)
    E, k = spec.num_experts, spec.experts_per_token
    rows = []
    for b in batches:
        touched, busiest = experts_touched(spec, b), busiest_gpu_experts(E, k, ep, b)
        read_s, top_s = experts * touched / ep / g.bandwidth, experts * busiest / E / g.bandwidth
        a2a = 2 * moe_layers * all_to_all_s(math.ceil(b / ep) * k * spec.hidden_size * ACTIVATION_BYTES, ep, lk)
        rows.append((b, touched, E * touched / ep, busiest, read_s * 1e3, top_s * 1e3, a2a * 1e3, a2a / (a2a + read_s),
                     a2a / (a2a + top_s)))
    return pd.DataFrame(rows, columns=["batch", "experts touched", "experts per GPU, mean", "experts on the busiest GPU",
                                       "expert reads ms, mean GPU", "expert reads ms, busiest GPU", "all-to-all ms",
                                       "all-to-all share, mean GPU", "all-to-all share, busiest GPU"])


def _counts(values, name: str, each: str, example: str) -> list[int]:
    if not isinstance(values, (list, tuple, range)) or not len(values):
        raise ValueError(f"{name} must be a non-empty list of whole numbers ≥ 1, e.g. {example}; got {values!r}")
    return [checks.count(v, each) for v in values]


_PARALLEL = re.compile(r"^\s*(tp|pp|mb)\s*=\s*([0-9]+)\s*$", re.ASCII)


def parse_parallel(text: str) -> dict[str, int]:
    """'tp=4,pp=2[,mb=M]' → {'tp': 4, 'pp': 2, 'mb': 1}: each key once, ASCII digits, 1 to MAX_TOKENS."""
    parts, seen, out = [p.strip() for p in str(text).split(",") if p.strip()], {}, {"tp": 1, "pp": 1, "mb": 1}
    if not parts:
        raise ValueError("--parallel needs tp=N and/or pp=N (and optionally mb=M), e.g. tp=4,pp=2")
    for part in parts:
        m = _PARALLEL.match(part)
        if not m:
            raise ValueError(f"--parallel: cannot read {part[:30]!r}; write tp=N,pp=N[,mb=M] with whole "
                             "numbers ≥ 1 in ASCII digits, e.g. tp=4,pp=2")
        key, digits = m.groups()
        if key in seen:
            raise ValueError(f"--parallel: {key} is given twice ({seen[key]}, {part}); give each of tp, pp, mb at most once")
        if not 1 <= (int(digits) if len(digits) <= 10 else 0) <= MAX_TOKENS:
            raise ValueError(f"--parallel: {key} must be a whole number from 1 to {MAX_TOKENS:,}, got {digits[:20]}"
                             + ("…" if len(digits) > 20 else ""))
        seen[key], out[key] = part, int(digits)
    return out
