"""One model's decode measured: each implementation against its memory floor (helpers.formulas.roofline),
and the capacity planner's predicted step (helpers.capacity.plan) against the fastest one.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from .. import env
from .impls import IMPLEMENTATIONS, decode

PLANNER_BAND = (0.8, 1.25)   # the target: measured ÷ predicted step within it


def compile_allowed(device: str) -> bool:
    """torch.compile on a CUDA GPU; on a CPU only when WORKSHOP_COMPILE=1 (inductor's C++ build of every kernel
    exceeds notebook 03's one-minute budget on 2 cores)."""
    return str(device).startswith("cuda") or env.flag("WORKSHOP_COMPILE")


def skip_reason(impl: str, device: str, dtype: str = "fp32") -> str | None:
    """Why an implementation is not measured on this device and dtype (None: it is)."""
    from .packed import available

    if impl == "static+compile" and not compile_allowed(device):
        return ("torch.compile skipped on a CPU: its compile time exceeds notebook 03's budget "
                "(WORKSHOP_COMPILE=1 runs it)")
    if impl == "packed":
        ok, why = available(device, dtype)
        return None if ok else why
    return None


def implementations_for(device: str, dtype: str = "fp32") -> tuple[str, ...]:
    return tuple(i for i in IMPLEMENTATIONS if skip_reason(i, device, dtype) is None)


def decode_sizes(device: str) -> dict[str, int]:
    """Prompt, new tokens per run and rounds: short on a CPU, realistic on a GPU."""
    if str(device).startswith("cuda"):
        return {"prompt": 512, "new_tokens": 40, "rounds": 2}
    return {"prompt": 32, "new_tokens": 10, "rounds": 2}


@dataclass(frozen=True)
class PlannerCheck:
    """The planner's predicted step against the measured one (the fastest implementation)."""

    predicted_step_s: float
    predicted_bytes: float
    predicted_bound: str
    source: str
    measured_step_s: float
    measured_impl: str
    context: int
    ratio: float                  # measured ÷ predicted step
    floor_bytes: float            # what the step must read: streamed weights + KV cache
    within_band: bool             # ratio within PLANNER_BAND
    sentence: str                 # what the ratio says (planner_sentence)


def planner_prediction(spec, dtype: str, device: str, bandwidth: float, peak_flops: float, context: int,
                       batch: int = 1):
    """helpers.capacity.plan's plan on this device, described by its measured bandwidth and peak FLOP/s (its own
    memory, every byte usable, efficiency 1): its step_floor_s, step_bytes_per_gpu and bound are the prediction."""
    from ..capacity import plan
    from ..formulas.gpus import GPU
    from ..measure.hardware import device_info

    info = device_info(device)
    here = GPU(name=f"this {info.kind}", aliases=(), memory_gb=(info.total_memory or 1e12) / 1e9,
               bandwidth_tbs=bandwidth / 1e12, bf16_tflops=peak_flops / 1e12, fp8_tflops=None,
               spec_source="measured (helpers.measure.microbench)", spec_note="", usd_per_hour=0.0, price_provider="",
               price_product="", price_read="", price_source="", price_note="")
    kv_dtype = dtype if dtype in ("fp32", "bf16", "fp16") else "bf16"
    p = plan(spec, here, weight_dtype=dtype, kv_dtype=kv_dtype, context=context, batch=batch,
             utilization=1.0, overhead_bytes=0, efficiency=1.0)  # the measured bandwidth is this device's roof
    if p.step_s is None:
        raise ValueError(f"the planner says {spec.name} does not fit this {info.kind}: {p.reason}")
    return p


def planner_sentence(ratio: float, predicted_bytes: float, floor_bytes: float, breakdown, model: str,
                     kernel_ceiling: tuple[str, float] | None = None) -> str:
    """What the planner's ratio (measured ÷ predicted step) says, by a rule on the numbers: within the
    band, the planner holds; above it, the largest part of the profiled step beyond the memory floor is
    named (helpers.decoding.breakdown); below it, the bytes the planner counts beyond what a step reads."""
    lo, hi = PLANNER_BAND
    if lo <= ratio <= hi:
        return (f"For {model} the planner is within {lo:.2f}–{hi:.2f} of the device (measured ÷ predicted "
                f"{ratio:.2f}): bytes ÷ bandwidth is the step.")
    if ratio > hi:
        why = ""
        if breakdown is not None:
            extra = breakdown.beyond_floor()
            part, secs = max(extra.items(), key=lambda kv: kv[1])
            part = part.replace("_", " ")
            why = (f" The largest part of the step beyond the memory floor is **{part}**: {secs * 1e3:,.2f} ms of a "
                   f"{breakdown.parts_sum_s * 1e3:,.2f} ms profiled step ({100 * secs / breakdown.parts_sum_s:.0f} %).")
        if kernel_ceiling is not None and kernel_ceiling[1] < 1 / hi:
            why += (f" Even its fastest matrix–vector kernel ({kernel_ceiling[0]}) reads at only "
                    f"{100 * kernel_ceiling[1]:,.0f} % of the copy's bandwidth, so the band is out of reach of any "
                    f"loop built on it: {1 / kernel_ceiling[1]:.2f}× is the least the ratio could be here.")
        return (f"For {model} the measured step is {ratio:.2f}× the planner's: the planner counts bytes ÷ bandwidth "
                f"only, and this step is not waiting for bytes alone.{why}")
    over = predicted_bytes / floor_bytes if floor_bytes else float("nan")
    return (f"For {model} the measured step is only {ratio:.2f}× the planner's: the planner counts "
            f"{predicted_bytes / 1e6:,.0f} MB per step, {over:.2f}× the {floor_bytes / 1e6:,.0f} MB the step must read "
            "(it counts every weight, the embedding table included, of which a step reads one row), "
            "or caches hold part of the weights between steps.")


@dataclass(frozen=True)
class ImplResult:
    """One implementation's decode steps against its memory floor."""

    impl: str
    step_s: float                 # median over every timed step of every round
    steps: int
    kv_slots: int                 # K/V positions each step's attention reads
    context: int                  # mean tokens in the cache (what the floor counts)
    floor_s: float
    efficiency: float             # floor ÷ step
    same_tokens: bool             # identical greedy tokens to the eager loop
    compile_s: float | None
    point: Any                    # helpers.formulas.roofline.RooflinePoint


@dataclass
class Regime:
    """One model measured: its implementations, its step breakdown, the planner's check."""

    name: str
    label: str
    dtype: str
    device: str
    spec: Any
    weight_bytes: int
    results: list[ImplResult]
    breakdown: Any = None                                  # helpers.decoding.breakdown.StepBreakdown
    planner: PlannerCheck | None = None
    skipped: list[str] = field(default_factory=list)
    kernel_bandwidth: dict = field(default_factory=dict)   # helpers.measure.microbench.kernel_bandwidths
    bandwidth: float | None = None                         # the copy's: the floor's roof
    copy_bytes: int | None = None                          # the copy's buffer (None: a record from before it was kept)
    kernel_bytes: int | None = None                        # the kernel probe's stack of weights (likewise)

    # records made before the buffers were sized from the last-level cache copied and read 256 MiB
    LEGACY_BUFFER_BYTES = 256 * 2**20

    def buffer_bytes(self) -> tuple[int, int]:
        """(the copy's buffer, the kernel probe's stack) in bytes."""
        return (self.copy_bytes or self.LEGACY_BUFFER_BYTES, self.kernel_bytes or self.LEGACY_BUFFER_BYTES)

    @property
    def best(self) -> ImplResult:
        return min(self.results, key=lambda r: r.step_s)

    def kernel_ceiling(self) -> tuple[str, float] | None:
        """(kernel, its bandwidth ÷ the copy's) for the fastest matrix–vector kernel measured: the highest
        efficiency a step whose bytes are all weights could reach with it, with nothing else to do."""
        if not self.kernel_bandwidth or not self.bandwidth:
            return None
        name, bw = max(self.kernel_bandwidth.items(), key=lambda kv: kv[1])
        return name, bw / self.bandwidth

    def result(self, impl: str) -> ImplResult | None:
        return next((r for r in self.results if r.impl == impl), None)


def measure_implementations(model, spec, dtype: str, device: str, bandwidth: float | None,
                            impls: Sequence[str], prompt: int, new_tokens: int,
                            rounds: int = 2) -> tuple[list[ImplResult], float]:
    """Every implementation on the same prompt, `rounds` times interleaved (a slow phase of a shared machine
    weighs on all alike); the median of all timed steps; tokens checked against eager. The floor's bandwidth:
    `bandwidth`, or if None the best copy benchmark run before each round and after the last, so that floor
    and steps see the same memory (this shared machine's copy ranged 33–71 GB/s within an hour).
    Returns (results, bandwidth used)."""
    from ..formulas import roofline
    from ..formulas.memory import kv_cache_bytes
    from ..formulas.stepcost import decode_cost
    from ..measure.microbench import copy_benchmark
    from ..measure.timing import prompt_ids

    if "eager" not in impls:
        impls = ("eager", *impls)
    ids = prompt_ids(prompt, vocab=spec.vocab_size, device=device)
    decode(model, "eager", ids[:, :8], 3, device)    # warm-up: first touch of every weight
    window: list[float] = []

    def copy_now() -> None:
        if bandwidth is None:
            window.append(copy_benchmark(device, repeats=3).bandwidth)

    runs: dict[str, list] = {i: [] for i in impls}
    for _ in range(rounds):
        copy_now()
        for impl in impls:
            runs[impl].append(decode(model, impl, ids, new_tokens, device))
    copy_now()
    bandwidth = bandwidth if bandwidth is not None else max(window)
    reference = runs["eager"][0].tokens
    weights = decode_cost(spec, 0, 1, dtype).weight_read_bytes
    out = []
    for impl in impls:
        rs = runs[impl]
        samples = [s for r in rs for s in r.step_s]
        step = statistics.median(samples)
        context = rs[0].mean_context
        floor = roofline.decode_floor_s(weights, kv_cache_bytes(spec, context, 1, dtype), bandwidth)
        point = replace(roofline.decode_point(spec, rs[0].kv_slots, step, dtype), label=impl)
        compiles = [r.compile_s for r in rs if r.compile_s is not None]
        out.append(ImplResult(impl, step, len(samples), rs[0].kv_slots, context, floor,
                              roofline.decode_efficiency(floor, step), all(r.tokens == reference for r in rs),
                              compiles[0] if compiles else None, point))
    return out, bandwidth


def kernel_roofs(device: str, dtype: str) -> dict[str, float]:
    """helpers.measure.microbench.kernel_bandwidths; empty for a dtype it does not cover (a quantized model's)."""
    from ..measure.microbench import MATMUL_DTYPES, kernel_bandwidths

    return kernel_bandwidths(device, dtype) if dtype in MATMUL_DTYPES else {}


def measure_regime(loaded, bandwidth: float | None, peak_flops: float, impls: Sequence[str] | None = None,
                   sizes: dict | None = None, kernel_bandwidth: dict | None = None, breakdown=None) -> Regime:
    """One loaded model (helpers.measure.models.Loaded): its implementations, the kernels' own bandwidth
    (measured unless given), the planner's check; `breakdown` (helpers.decoding.breakdown.regime_breakdown, or
    None) profiles the fastest loop. `bandwidth`: the floor's roof, None to measure it alongside the steps."""
    from ..formulas.memory import kv_cache_bytes
    from ..formulas.stepcost import decode_cost
    from ..measure.microbench import default_copy_bytes
    from .packed import release

    dev, dtype, spec = loaded.device, loaded.dtype, loaded.spec
    sizes = sizes or decode_sizes(dev)
    impls = tuple(impls or implementations_for(dev, dtype))
    skipped = [i for i in IMPLEMENTATIONS if i not in impls]
    kernel_bandwidth = dict(kernel_roofs(dev, dtype) if kernel_bandwidth is None else kernel_bandwidth)
    results, bandwidth = measure_implementations(loaded.model, spec, dtype, dev, bandwidth, impls, sizes["prompt"],
                                                 sizes["new_tokens"], sizes["rounds"])
    weights = decode_cost(spec, 0, 1, dtype).weight_read_bytes
    buffer = default_copy_bytes(dev)
    reg = Regime(loaded.profile, loaded.label, dtype, dev, spec, weights, results, skipped=skipped,
                 kernel_bandwidth=kernel_bandwidth, bandwidth=bandwidth, copy_bytes=buffer,
                 kernel_bytes=buffer if kernel_bandwidth else None)
    if breakdown is not None:
        reg.breakdown = breakdown(loaded.model, reg, sizes["new_tokens"])
    release(loaded.model)   # the packed copies of the weights: not held beyond the measurement
    context = results[0].context
    best = reg.best
    pred = planner_prediction(spec, dtype, dev, bandwidth, peak_flops, context)
    ratio = best.step_s / pred.step_floor_s
    floor_bytes = weights + kv_cache_bytes(spec, context, 1, dtype)
    reg.planner = PlannerCheck(pred.step_floor_s, pred.step_bytes_per_gpu, pred.bound,
                               "helpers.capacity.plan at the measured bandwidth and peak", best.step_s, best.impl,
                               context, ratio, floor_bytes,
                               PLANNER_BAND[0] <= ratio <= PLANNER_BAND[1],
                               planner_sentence(ratio, pred.step_bytes_per_gpu, floor_bytes, reg.breakdown, loaded.profile,
                                                reg.kernel_ceiling()))
    return reg


def planner_frame(regimes: Sequence[Regime]):
    """The planner's predicted step against the measured one, per model."""
    import pandas as pd

    rows = [{"model": reg.name, "planner_step_ms": reg.planner.predicted_step_s * 1e3,
             "measured_step_ms": reg.planner.measured_step_s * 1e3, "measured_with": reg.planner.measured_impl,
             "measured_over_predicted": reg.planner.ratio,
             f"within {PLANNER_BAND[0]}–{PLANNER_BAND[1]}": reg.planner.within_band,
             "planner_counts_MB": reg.planner.predicted_bytes / 1e6, "step_must_read_MB": reg.planner.floor_bytes / 1e6,
             "context": reg.planner.context, "measured on": reg.label} for reg in regimes]
    return pd.DataFrame(rows)
