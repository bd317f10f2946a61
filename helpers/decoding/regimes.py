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
    if impl == "static+compile" and not compile_allowed(device):
        return ("torch.compile skipped on a CPU: its compile time exceeds notebook 03's budget "
                "(WORKSHOP_COMPILE=1 runs it)")
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
    """One model measured: its implementations, each against the floor at `bandwidth`."""

    name: str
    label: str
    dtype: str
    device: str
    spec: Any
    weight_bytes: int
    results: list[ImplResult]
    skipped: list[str] = field(default_factory=list)
    bandwidth: float | None = None      # the floor's roof, measured alongside the steps
    bandwidth_kind: str = "read"        # which benchmark gave it: "read" (the floor of a step that reads) or
                                        # "copy" (read + write: the records made before the floor read a read rate)

    @property
    def best(self) -> ImplResult:
        return min(self.results, key=lambda r: r.step_s)

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
    from ..formulas import regime, roofline
    from ..formulas.memory import kv_cache_bytes
    from ..formulas.stepcost import decode_cost
    from ..measure.microbench import read_benchmark
    from ..measure.timing import prompt_ids

    if "eager" not in impls:
        impls = ("eager", *impls)
    ids = prompt_ids(prompt, vocab=spec.vocab_size, device=device)
    decode(model, "eager", ids[:, :8], 3, device)    # warm-up: first touch of every weight
    window: list[float] = []

    def copy_now() -> None:
        if bandwidth is None:
            window.append(read_benchmark(device, repeats=3).bandwidth)

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
                              regime.ratio(floor, step), all(r.tokens == reference for r in rs),
                              compiles[0] if compiles else None, point))
    return out, bandwidth


def measure_regime(loaded, bandwidth: float | None, impls: Sequence[str] | None = None,
                   sizes: dict | None = None) -> Regime:
    """One loaded model (helpers.measure.models.Loaded): its implementations against the floor.
    `bandwidth`: the floor's roof, None to measure it (read rate) alongside the steps."""
    from ..formulas.stepcost import decode_cost

    dev, dtype, spec = loaded.device, loaded.dtype, loaded.spec
    sizes = sizes or decode_sizes(dev)
    impls = tuple(impls or implementations_for(dev, dtype))
    skipped = [i for i in IMPLEMENTATIONS if i not in impls]
    results, bandwidth = measure_implementations(loaded.model, spec, dtype, dev, bandwidth, impls, sizes["prompt"],
                                                 sizes["new_tokens"], sizes["rounds"])
    weights = decode_cost(spec, 0, 1, dtype).weight_read_bytes
    return Regime(loaded.profile, loaded.label, dtype, dev, spec, weights, results, skipped=skipped,
                  bandwidth=bandwidth)


def regime_profiles(loaded) -> tuple[str, ...]:
    """The profiles measured side by side: tiny (the loaded one when it is tiny-trained: the same sizes
    and timings, no second load) and small on a CPU (or MPS), the active one on a CUDA GPU."""
    from ..measure.local_models import TINY_PROFILES

    if loaded.device.startswith("cuda"):
        return (loaded.profile,)
    return (loaded.profile if loaded.profile in TINY_PROFILES else "tiny", "small")


def measure_regimes(loaded, bandwidth: float | None = None, profiles=None, impls=None) -> list[Regime]:
    """Every profile of regime_profiles (the loaded one reused, the others loaded and released), each
    measured by measure_regime."""
    from ..measure import models
    from ..measure.hardware import free_memory

    out = []
    for name in profiles or regime_profiles(loaded):
        other = loaded if name == loaded.profile else models.load(name, device=loaded.device)
        out.append(measure_regime(other, bandwidth, impls))
        if other is not loaded:
            del other
            free_memory(loaded.device)
    return out
