"""Both decode regimes measured: each implementation against its memory floor, the step's breakdown,
and the capacity planner's predicted step against the measured one.

On a CPU the tiny model (20 M parameters, 46 MB streamed per step) is bound by per-step fixed costs and
the small model (175 M, 567 MB per step, helpers.measure.local_models.SMALL_CONFIG) by memory; on a GPU the active
profile (Mistral 7B) is measured. Every figure is measured here or computed by the owners of its
formula: the floor by helpers.formulas.roofline (streamed weight bytes + KV bytes ÷ the copy bandwidth), the
planner's step by helpers.capacity.plan (planner_prediction, the one place that asks the planner).
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

from .. import env
from .impls import IMPLEMENTATIONS, decode

PLANNER_BAND = (0.8, 1.25)   # the target: measured ÷ predicted step within it


def compile_allowed(device: str) -> bool:
    """torch.compile runs on a CUDA GPU (with CUDA graphs); on a CPU its compile time — inductor writes
    and builds C++ for every kernel; `make bench` records it as decode_implementations_small[…].compile_s —
    exceeds the one-minute budget of notebook 03 on 2 cores, so it runs only when WORKSHOP_COMPILE=1."""
    if str(device).startswith("cuda"):
        return True
    return env.flag("WORKSHOP_COMPILE")


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
    """The implementations measured on a device: every one that skip_reason does not rule out."""
    return tuple(i for i in IMPLEMENTATIONS if skip_reason(i, device, dtype) is None)


def regime_profiles(loaded) -> tuple[str, ...]:
    """The profiles measured side by side: tiny (the loaded one when it is tiny-trained: the same sizes
    and timings, no second load) and small on a CPU (or MPS), the active one on a CUDA GPU."""
    from ..measure.local_models import TINY_PROFILES

    if loaded.device.startswith("cuda"):
        return (loaded.profile,)
    return (loaded.profile if loaded.profile in TINY_PROFILES else "tiny", "small")


def decode_sizes(device: str) -> dict[str, int]:
    """Prompt, new tokens per run and rounds: short on a CPU (the small model's step is tens of ms),
    realistic on a GPU."""
    if str(device).startswith("cuda"):
        return {"prompt": 512, "new_tokens": 40, "rounds": 2}
    return {"prompt": 32, "new_tokens": 10, "rounds": 2}


# ----------------------------------------------------------------------------- the planner's step

@dataclass(frozen=True)
class PlannerPrediction:
    """The capacity planner's decode step on this device."""

    predicted_step_s: float
    predicted_bytes: float
    predicted_bound: str
    source: str = "helpers.capacity.plan at the measured bandwidth and peak"


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
                       batch: int = 1) -> PlannerPrediction:
    """The capacity planner's decode step for this device and model: helpers.capacity.plan with the
    device described by its measured bandwidth and peak FLOP/s (its memory: the device's own; no
    runtime reserve, every byte usable). The one function that asks the planner — repoint it when the
    planner's cost model moves. Returns the predicted step and the bytes the planner counts."""
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
    return PlannerPrediction(p.step_floor_s, p.step_bytes_per_gpu, p.bound)


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


# ----------------------------------------------------------------------------- implementations

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
        """(the copy's buffer, the kernel probe's stack) in bytes: as measured, or the fixed 256 MiB of older records."""
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
    """Every implementation on the same prompt, `rounds` times interleaved (a slow phase of a shared
    machine then weighs on all alike); the median of all timed steps; tokens checked against eager.

    The floor's bandwidth: `bandwidth` if given; if None, the copy benchmark run alongside the steps —
    before each round and after the last — and its best sample taken, so that the floor and the steps
    see the same memory (a host whose other tenants take bandwidth slows both alike; measured here, the
    copy of this shared machine ranged 33–71 GB/s within an hour). Returns (results, bandwidth used)."""
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
    """What a decode step's matrix–vector kernels read at here (helpers.measure.microbench.kernel_bandwidths);
    empty for a dtype the microbenchmark does not cover (a quantized model's)."""
    from ..measure.microbench import MATMUL_DTYPES, kernel_bandwidths

    return kernel_bandwidths(device, dtype) if dtype in MATMUL_DTYPES else {}


def measure_regime(loaded, bandwidth: float | None, peak_flops: float, impls: Sequence[str] | None = None,
                   sizes: dict | None = None, with_breakdown: bool = True,
                   kernel_bandwidth: dict | None = None) -> Regime:
    """One loaded model (helpers.measure.models.Loaded): implementations, breakdown of the fastest loop (eager,
    or packed where measured), the planner, and the kernels' own bandwidth (measured unless given).
    `bandwidth`: the floor's roof; None (what the notebooks and the bench pass) measures it alongside the
    steps (measure_implementations), and every figure of the regime — floor, breakdown, planner, kernel
    ceiling — uses that one value (Regime.bandwidth)."""
    from ..formulas import roofline
    from ..formulas.memory import kv_cache_bytes
    from ..formulas.stepcost import decode_cost
    from .breakdown import step_breakdown

    dev, dtype, spec = loaded.device, loaded.dtype, loaded.spec
    sizes = sizes or decode_sizes(dev)
    impls = tuple(impls or implementations_for(dev, dtype))
    skipped = [i for i in IMPLEMENTATIONS if i not in impls]
    kernel_bandwidth = dict(kernel_roofs(dev, dtype) if kernel_bandwidth is None else kernel_bandwidth)
    results, bandwidth = measure_implementations(loaded.model, spec, dtype, dev, bandwidth, impls, sizes["prompt"],
                                                 sizes["new_tokens"], sizes["rounds"])
    weights = decode_cost(spec, 0, 1, dtype).weight_read_bytes
    from ..measure.microbench import default_copy_bytes

    buffer = default_copy_bytes(dev)
    reg = Regime(loaded.profile, loaded.label, dtype, dev, spec, weights, results, skipped=skipped,
                 kernel_bandwidth=kernel_bandwidth, bandwidth=bandwidth, copy_bytes=buffer,
                 kernel_bytes=buffer if kernel_bandwidth else None)
    context = results[0].context
    if with_breakdown:
        floor = roofline.decode_floor_s(weights, kv_cache_bytes(spec, context, 1, dtype), bandwidth)
        loops = [r for r in results if r.impl in ("eager", "packed")]
        fastest = min(loops, key=lambda r: r.step_s).impl if loops else "eager"
        reg.breakdown = step_breakdown(loaded.model, context, steps=sizes["new_tokens"], device=dev, floor_s=floor,
                                       packed=fastest == "packed", weight_bytes=weights)
    from .packed import release

    release(loaded.model)   # the packed copies of the weights: not held beyond the measurement
    best = reg.best
    pred = planner_prediction(spec, dtype, dev, bandwidth, peak_flops, context)
    ratio = best.step_s / pred.predicted_step_s
    floor_bytes = weights + kv_cache_bytes(spec, context, 1, dtype)
    reg.planner = PlannerCheck(pred.predicted_step_s, pred.predicted_bytes, pred.predicted_bound, pred.source,
                               best.step_s, best.impl, context, ratio, floor_bytes,
                               PLANNER_BAND[0] <= ratio <= PLANNER_BAND[1],
                               planner_sentence(ratio, pred.predicted_bytes, floor_bytes, reg.breakdown, loaded.profile,
                                                reg.kernel_ceiling()))
    return reg


def measure_regimes(loaded, bandwidth: float | None, peak_flops: float, profiles: Sequence[str] | None = None,
                    impls: Sequence[str] | None = None, with_breakdown: bool = True) -> list[Regime]:
    """Every profile of regime_profiles (the loaded one reused, the others loaded and released)."""
    from ..measure import models
    from ..measure.hardware import free_memory

    out = []
    kernels: dict[str, dict] = {}     # measured once per dtype, shared by the models of that dtype
    for name in profiles or regime_profiles(loaded):
        other = loaded if name == loaded.profile else models.load(name, device=loaded.device)
        if other.dtype not in kernels:
            kernels[other.dtype] = kernel_roofs(other.device, other.dtype)
        out.append(measure_regime(other, bandwidth, peak_flops, impls, with_breakdown=with_breakdown,
                                  kernel_bandwidth=kernels[other.dtype]))
        if other is not loaded:
            del other
            free_memory(loaded.device)
    return out


def figures_for_bench(reg: Regime, suffix: str) -> dict[str, Any]:
    """A regime as plain numbers (JSON) for `make bench`, keys ending in `suffix` (e.g. "_small")."""
    best = reg.best
    out: dict[str, Any] = {
        f"decode_efficiency{suffix}": best.efficiency,
        f"decode_best_impl{suffix}": best.impl,
        f"decode_best_step_s{suffix}": best.step_s,
        f"decode_floor_s{suffix}": best.floor_s,
        f"decode_floor_bandwidth_bytes_per_s{suffix}": reg.bandwidth,
        f"planner_ratio{suffix}": reg.planner.ratio,
        f"planner_step_s{suffix}": reg.planner.predicted_step_s,
        f"decode_implementations{suffix}": [
            {"impl": r.impl, "step_s": r.step_s, "floor_s": r.floor_s, "efficiency": r.efficiency,
             "same_tokens_as_eager": r.same_tokens, "kv_slots_read": r.kv_slots, "context": r.context,
             "compile_s": r.compile_s, "steps_timed": r.steps} for r in reg.results],
        f"decode_skipped{suffix}": reg.skipped,
        f"decode_label{suffix}": reg.label,
    }
    if reg.kernel_bandwidth:
        out[f"gemv_bandwidth_bytes_per_s{suffix}"] = dict(reg.kernel_bandwidth)
        name, share = reg.kernel_ceiling()
        out[f"gemv_over_copy{suffix}"] = share
        out[f"decode_efficiency_vs_kernel{suffix}"] = best.efficiency / share
    if reg.breakdown is not None:
        out[f"decode_breakdown_impl{suffix}"] = reg.breakdown.impl
        out[f"decode_breakdown_matmul_bandwidth{suffix}"] = reg.breakdown.matmul_bandwidth
        out[f"decode_breakdown{suffix}"] = asdict(reg.breakdown.parts)
        out[f"decode_breakdown_sum_over_measured{suffix}"] = reg.breakdown.sum_over_measured
    return out


def bench_figures(loaded, bandwidth: float | None, peak_flops: float) -> dict[str, Any]:
    """For `make bench` (the roofline section): the small profile's decode efficiency with the best
    implementation and the planner's ratio (keys ending in _small), every implementation of the
    active profile (keys ending in _active). On a CPU the small model is also compiled, to record
    what torch.compile costs there (decode_implementations_small[…].compile_s), unless
    WORKSHOP_BENCH_COMPILE=0, which also leaves static+compile out of the active profile's on a GPU."""
    from ..measure import models
    from ..measure.hardware import free_memory

    dev = loaded.device
    out: dict[str, Any] = {}
    no_compile = not env.flag("WORKSHOP_BENCH_COMPILE", default=True)
    if loaded.profile != "small":
        # WORKSHOP_BENCH_COMPILE=0 on a GPU too: gpu_record.sh's bench, after notebook 03 measured the compile
        impls = tuple(i for i in implementations_for(dev, loaded.dtype) if not (no_compile and i == "static+compile"))
        active = measure_regime(loaded, bandwidth, peak_flops, impls)
        out.update(figures_for_bench(active, "_active"))
        del active
    small = loaded if loaded.profile == "small" else models.load("small", device=dev)
    if dev.startswith("cuda"):
        impls = ("eager", "generate", "static")      # the GPU story is the active model's; small stays quick
    elif no_compile:
        impls = implementations_for(dev, small.dtype)    # e.g. gpu_record.sh's dry run: no CPU compile
    else:   # record what torch.compile costs on this CPU too
        impls = (*implementations_for(dev, small.dtype), "static+compile")
        impls = tuple(i for i in IMPLEMENTATIONS if i in impls)
    reg = measure_regime(small, bandwidth, peak_flops, impls)
    out.update(figures_for_bench(reg, "_small"))
    if loaded.profile == "small":
        out.update({k.replace("_small", "_active"): v for k, v in figures_for_bench(reg, "_small").items()})
    del small, reg
    free_memory(dev)
    out["definitions_decoding"] = {
        "decode_efficiency_small": "floor / median step of the fastest implementation, small profile, batch 1; "
                                   "the floor at the copy bandwidth measured alongside the steps "
                                   "(decode_floor_bandwidth_bytes_per_s_small)",
        "planner_ratio_small": "measured step (fastest implementation) / helpers.capacity.plan's step at the "
                               "measured bandwidth and peak, small profile, batch 1",
        "decode_implementations_*": "helpers.decoding.impls: eager loop, generate, packed (oneDNN-prepacked weights, "
                                    "CPU), static cache, static + torch.compile",
        "decode_breakdown_*": "helpers.decoding.breakdown: the fastest loop (eager or packed) profiled, parts in s per step "
                              "(weight_matmuls_s, attention_s, other_operators_s, outside_operators_s)",
        "gemv_bandwidth_bytes_per_s_*": "helpers.measure.microbench.gemv_benchmark: one row times a stack of weights bigger "
                                        "than the caches, bytes read / best time, per kernel (linear, packed)",
        "gemv_over_copy_*": "fastest kernel's bandwidth / the copy's: the efficiency a step could reach with it at best",
        "decode_efficiency_vs_kernel_*": "decode_efficiency / gemv_over_copy: how close the loop gets to its kernel",
    }
    return out
