"""Where one decode step's time goes, measured with torch.profiler.

The eager step (helpers.measure.timing's loop; ``packed=True``: on oneDNN-prepacked weights) runs under the
profiler, each step in a ``record_function`` range; every operator's *self* time (device time on a GPU) is
summed by what the operator does:

    weight matmuls      aten::mm / addmm / bmm / linear kernels: reading the weights (and multiplying)
    attention           scaled_dot_product_attention and its kernels: reading the KV cache
    other operators     norms, rotary embedding, SiLU, residual adds, cache appends, argmax, copies
    outside operators   the step's time in no operator: Python, module calls, transformers' mask and
                        cache bookkeeping, operator dispatch — on a GPU, the device idle between kernels

The parts add up to the profiled step by construction, and to the step measured *without* the profiler
within 10 % (tests/test_decoding.py). The memory floor (helpers.formulas.roofline.decode_floor_s) ÷ the step
is how much of it waits for memory at best.
"""
from __future__ import annotations

import os
import statistics
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, fields, replace


STEP_RANGE = "workshop decode step"
PARTS = ("weight_matmuls", "attention", "other_operators", "outside_operators")   # StepParts' fields, less _s
_MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul", "aten::_mkl_linear",
           "aten::mkldnn_linear", "aten::_addmm_activation", "mkldnn::_linear_pointwise")
_ATTENTION = ("attention",)   # aten::scaled_dot_product_attention, _scaled_dot_product_*_attention*


def category(op_name: str) -> str:
    """The part of PARTS an operator's time belongs to, by its name."""
    name = op_name.lower()
    if op_name in _MATMUL or "gemm" in name or "gemv" in name:
        return "weight_matmuls"
    if any(k in name for k in _ATTENTION):
        return "attention"
    return "other_operators"


@dataclass(frozen=True)
class StepParts:
    """One decode step's time by part (seconds per step)."""

    weight_matmuls_s: float
    attention_s: float
    other_operators_s: float
    outside_operators_s: float

    @classmethod
    def of(cls, seconds: dict[str, float]) -> "StepParts":
        return cls(*(seconds[p] for p in PARTS))

    def items(self) -> list[tuple[str, float]]:
        return [(p, getattr(self, f"{p}_s")) for p in PARTS]

    @property
    def total_s(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))


@dataclass(frozen=True)
class StepBreakdown:
    """One decode step split into PARTS (seconds per step, medians over the profiled steps)."""

    device: str
    context: int
    parts: StepParts                   # seconds per step, by part
    profiled_step_s: float             # median step under the profiler
    measured_step_s: float             # median step without the profiler (the step the notebook reports)
    floor_s: float | None              # memory floor of the step (weights + KV) ÷ bandwidth
    steps: int
    impl: str = "eager"                # the loop profiled: "eager" or "packed"
    weight_bytes: int | None = None    # streamed weight bytes the matmuls read per step

    @property
    def matmul_bandwidth(self) -> float | None:
        """Bytes/s the step's weight matmuls read at: streamed weight bytes ÷ their profiled time."""
        t = self.parts.weight_matmuls_s
        return None if not self.weight_bytes or t <= 0 else self.weight_bytes / t

    @property
    def parts_sum_s(self) -> float:
        return self.parts.total_s

    @property
    def sum_over_measured(self) -> float:
        """Σ parts ÷ the step measured without the profiler (1 = the parts explain the step exactly)."""
        return self.parts_sum_s / self.measured_step_s

    @property
    def memory_share(self) -> float | None:
        """Share of the measured step that is, at best, waiting for memory: floor ÷ step."""
        return None if self.floor_s is None else self.floor_s / self.measured_step_s

    @property
    def fixed_share(self) -> float:
        """Share of the parts spent outside the weight and attention reads: other operators and the
        time outside any operator — the per-step fixed cost."""
        return (self.parts.other_operators_s + self.parts.outside_operators_s) / self.parts_sum_s

    def beyond_floor(self) -> StepParts:
        """Each part's time beyond what the memory floor accounts for (seconds per step): the floor is
        taken from the weight matmuls first, then from attention (which reads the KV cache)."""
        left = self.floor_s or 0.0
        out = {}
        for part, secs in self.parts.items():
            take = min(left, secs) if part in ("weight_matmuls", "attention") else 0.0
            left -= take
            out[part] = secs - take
        return StepParts.of(out)


def _step_times(events, cuda: bool) -> tuple[list[float], list[dict[str, float]]]:
    """(each step's wall time, each step's parts) from the profiler's events, in seconds."""
    def on_device(e) -> bool:   # kernels, and the GPU's copy of a record_function range
        return str(getattr(e, "device_type", "")).endswith("CUDA")

    steps = sorted((e for e in events if e.name == STEP_RANGE and not on_device(e)), key=lambda e: e.time_range.start)
    walls = [e.time_range.elapsed_us() / 1e6 for e in steps]
    parts = [dict.fromkeys(PARTS, 0.0) for _ in steps]
    starts = [e.time_range.start for e in steps]
    ends = [e.time_range.end for e in steps]
    import bisect

    for e in events:
        if e.name == STEP_RANGE or getattr(e, "is_user_annotation", False):
            continue
        if on_device(e):
            continue   # kernels themselves: counted through the operator that launched them
        i = bisect.bisect_right(starts, e.time_range.start) - 1
        if i < 0 or e.time_range.start >= ends[i]:
            continue
        us = e.self_device_time_total if cuda else e.self_cpu_time_total
        parts[i][category(e.name)] += us / 1e6
    for wall, p in zip(walls, parts):
        p["outside_operators"] = max(0.0, wall - sum(p.values()))
    return walls, parts


@contextmanager
def _quiet_native_stderr():
    """Silence file descriptor 2 for a block: the profiler's native library prints a line to it at each
    start and stop ("profiler_start"/"profiler_stop"), which would land in a notebook's output."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def step_breakdown(model, context: int = 128, steps: int = 12, device: str | None = None,
                   floor_s: float | None = None, warmup: int = 3, rounds: int = 2, packed: bool = False,
                   weight_bytes: int | None = None) -> StepBreakdown:
    """Profile `steps` eager decode steps at `context` cached tokens (batch 1) and split each into PARTS.

    The measured step is the median of steps timed without the profiler in blocks that alternate with
    the `rounds` profiled blocks (the same loop, each block from the same prefilled context), so that a
    slow phase of the machine weighs on both alike. `packed`: the loop with oneDNN-prepacked weights.
    ValueError for a context that, with the steps after it, exceeds the model's positions."""
    from ..measure.timing import check_ids, prompt_ids

    ids = check_ids(model, prompt_ids(context, vocab=model.config.vocab_size), max(steps, warmup))
    if packed:
        from ..measure.dtypes import torch_dtype_name
        from .packed import packed_weights

        dev = device or str(next(model.parameters()).device)
        with packed_weights(model, dev, torch_dtype_name(next(model.parameters()).dtype)):
            b = step_breakdown(model, context, steps, dev, floor_s, warmup, rounds, False, weight_bytes)
        return replace(b, impl="packed")
    import time

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from ..measure.hardware import synchronize
    from ..measure.timing import prefill

    device = device or str(next(model.parameters()).device)
    cuda = device.startswith("cuda")
    ids = ids.to(device)

    def run(n: int, annotate: bool) -> list[float]:
        nxt, cache = prefill(model, ids)   # each block from the same prefilled context: steps see context … context+n
        times = []
        with torch.inference_mode():
            for _ in range(n):
                synchronize(device)
                t0 = time.perf_counter()
                with record_function(STEP_RANGE) if annotate else nullcontext():
                    out = model(input_ids=nxt, cache=cache, use_cache=True)
                    nxt = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
                    synchronize(device)
                times.append(time.perf_counter() - t0)
        return times

    run(warmup, False)
    # unprofiled and profiled blocks alternate (U P U P U): a slow phase of a shared machine lands on both
    plain: list[float] = []
    walls: list[float] = []
    parts: list[dict[str, float]] = []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for block in range(2 * rounds + 1):
        if block % 2 == 0:
            plain += run(steps, False)
            continue
        with _quiet_native_stderr(), profile(activities=activities, record_shapes=False, with_stack=False,
                                           profile_memory=False) as prof:
            run(steps, True)
        # each profile's clock starts at its own start: its events are matched to its own steps only
        w, p = _step_times(list(prof.events()), cuda)
        walls += w
        parts += p
    if not walls:
        raise RuntimeError("the profiler recorded no decode step; is torch.profiler available here?")
    med = StepParts.of({k: statistics.median(p[k] for p in parts) for k in PARTS})
    return StepBreakdown(device, context, med, statistics.median(walls), statistics.median(plain),
                         floor_s, len(walls), "eager", weight_bytes)


def regime_breakdown(model, reg, steps: int) -> StepBreakdown:
    """The fastest loop (eager, or packed where measured) of a measured regime (helpers.decoding.regimes.Regime)
    profiled at the context and floor of its first result."""
    first = reg.results[0]
    loops = [r for r in reg.results if r.impl in ("eager", "packed")]
    fastest = min(loops, key=lambda r: r.step_s).impl
    return step_breakdown(model, first.context, steps=steps, device=reg.device, floor_s=first.floor_s,
                          packed=fastest == "packed", weight_bytes=reg.weight_bytes)


def regime_profiles(loaded) -> tuple[str, ...]:
    """The profiles measured side by side: tiny (the loaded one when it is tiny-trained: the same sizes
    and timings, no second load) and small on a CPU (or MPS), the active one on a CUDA GPU."""
    from ..measure.local_models import TINY_PROFILES

    if loaded.device.startswith("cuda"):
        return (loaded.profile,)
    return (loaded.profile if loaded.profile in TINY_PROFILES else "tiny", "small")


def measure_regimes(loaded, bandwidth: float | None, profiles=None, impls=None) -> list:
    """Every profile of regime_profiles (the loaded one reused, the others loaded and released), each
    measured by helpers.decoding.regimes.measure_regime with its step breakdown."""
    from ..measure import models
    from ..measure.hardware import free_memory
    from .regimes import kernel_roofs, measure_regime

    out = []
    kernels: dict[str, dict] = {}     # measured once per dtype, shared by the models of that dtype
    for name in profiles or regime_profiles(loaded):
        other = loaded if name == loaded.profile else models.load(name, device=loaded.device)
        if other.dtype not in kernels:
            kernels[other.dtype] = kernel_roofs(other.device, other.dtype)
        out.append(measure_regime(other, bandwidth, impls, kernel_bandwidth=kernels[other.dtype],
                                  breakdown=regime_breakdown))
        if other is not loaded:
            del other
            free_memory(loaded.device)
    return out
