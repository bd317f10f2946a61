"""One model's decode measured: each implementation against its memory floor (helpers.formulas.roofline).
The capacity planner's step against a measured one is notebook 04's (helpers.capacity.measured).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from .. import env
from .impls import IMPLEMENTATIONS, decode


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
    """One model measured: its implementations and its step breakdown."""

    name: str
    label: str
    dtype: str
    device: str
    spec: Any
    weight_bytes: int
    results: list[ImplResult]
    breakdown: Any = None                                  # helpers.decoding.breakdown.StepBreakdown
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


def measure_regime(loaded, bandwidth: float | None, impls: Sequence[str] | None = None,
                   sizes: dict | None = None, kernel_bandwidth: dict | None = None, breakdown=None) -> Regime:
    """One loaded model (helpers.measure.models.Loaded): its implementations, the kernels' own bandwidth
    (measured unless given); `breakdown` (helpers.decoding.breakdown.regime_breakdown, or None) profiles
    the fastest loop. `bandwidth`: the floor's roof, None to measure it alongside the steps."""
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
    return reg
