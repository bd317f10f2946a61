"""Decode measured against its memory floor (helpers.formulas.roofline): one model's implementations; the eager step
of models of several sizes and an overhead probe (efficiency_table)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from .. import env
from ..formulas.regime import ratio
from ..formulas.specs import param_breakdown, spec_from_config
from ..formulas.stepcost import decode_cost
from ..measure.hardware import free_memory
from ..measure.local_models import SMALL_OVERRIDES, TINY_CONFIG, TINY_PROFILES, tiny_model
from ..measure.sweeps import decode_steps
from .impls import IMPLEMENTATIONS, decode


COMPILE_SKIPPED = "torch.compile skipped on a CPU: its compile time exceeds notebook 03's budget (WORKSHOP_COMPILE=1 runs it)"


def compile_allowed(device: str) -> bool:
    """torch.compile on a CUDA GPU; on a CPU only with WORKSHOP_COMPILE=1 (inductor's C++ build exceeds 03's budget)."""
    return str(device).startswith("cuda") or env.flag("WORKSHOP_COMPILE")


def implementations_for(device: str) -> tuple[str, ...]:
    return tuple(i for i in IMPLEMENTATIONS if i != "static+compile" or compile_allowed(device))


@dataclass(frozen=True)
class ImplResult:
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
    name: str
    label: str
    dtype: str
    device: str
    spec: Any
    weight_bytes: int
    results: list[ImplResult]
    skipped: list[str] = field(default_factory=list)
    bandwidth: float | None = None      # the floor's roof, measured alongside the steps
    bandwidth_kind: str = "read"        # "read", or "copy" in the records made before the floor read a read rate

    @property
    def best(self) -> ImplResult:
        return min(self.results, key=lambda r: r.step_s)


def measure_regime(loaded, bandwidth: float | None, impls: Sequence[str] | None = None,
                   sizes: dict | None = None) -> Regime:
    """A loaded model's implementations on one prompt, `rounds` times interleaved (a slow phase of a shared machine
    weighs on all alike): the median step against the floor at `bandwidth`, else at the best read benchmark run
    around each round (this machine's ranged 33–71 GB/s); tokens checked against eager."""
    from ..formulas import regime, roofline
    from ..formulas.memory import kv_cache_bytes
    from ..measure.microbench import read_benchmark
    from ..measure.timing import prompt_ids

    model, dev, dtype, spec = loaded.model, loaded.device, loaded.dtype, loaded.spec
    sizes = sizes or ({"prompt": 512, "new_tokens": 40, "rounds": 2} if dev.startswith("cuda")
                      else {"prompt": 32, "new_tokens": 10, "rounds": 2})   # short on a CPU, realistic on a GPU
    impls = tuple(impls or implementations_for(dev))   # eager among them: the tokens are checked against it
    ids = prompt_ids(sizes["prompt"], vocab=spec.vocab_size, device=dev)
    decode(model, "eager", ids[:, :8], 3, dev)    # warm-up: first touch of every weight
    rates = []
    runs: dict[str, list] = {i: [] for i in impls}
    for k in range(sizes["rounds"] + 1):
        if bandwidth is None:
            rates.append(read_benchmark(dev, repeats=3).bandwidth)
        for impl in impls if k < sizes["rounds"] else ():
            runs[impl].append(decode(model, impl, ids, sizes["new_tokens"], dev))
    bandwidth = bandwidth if bandwidth is not None else max(rates)
    weights = decode_cost(spec, 0, 1, dtype).weight_read_bytes
    results = []
    for impl, rs in runs.items():
        samples = [s for r in rs for s in r.step_s]
        step, context = statistics.median(samples), rs[0].mean_context
        floor = roofline.decode_floor_s(weights, kv_cache_bytes(spec, context, 1, dtype), bandwidth)
        compiles = [r.compile_s for r in rs if r.compile_s is not None]
        results.append(ImplResult(impl, step, len(samples), rs[0].kv_slots, context, floor,
                                  regime.ratio(floor, step),
                                  all(r.tokens == runs["eager"][0].tokens for r in rs), compiles[0] if compiles else None,
                                  replace(roofline.decode_point(spec, rs[0].kv_slots, step, dtype), label=impl)))
    return Regime(loaded.profile, loaded.label, dtype, dev, spec, weights, results,
                  skipped=[i for i in IMPLEMENTATIONS if i not in impls], bandwidth=bandwidth)


def regime_profiles(loaded) -> tuple[str, ...]:
    """Tiny (the loaded one when tiny-trained: the same sizes) and small off CUDA; else the loaded one."""
    if loaded.device.startswith("cuda"):
        return (loaded.profile,)
    return (loaded.profile if loaded.profile in TINY_PROFILES else "tiny", "small")


def measure_regimes(loaded) -> list[Regime]:
    """measure_regime of each profile of regime_profiles (the others loaded and released in turn)."""
    from ..measure import models
    out = []
    for name in regime_profiles(loaded):
        other = loaded if name == loaded.profile else models.load(name, device=loaded.device)
        out.append(measure_regime(other, None))
        del other
        free_memory(loaded.device)
    return out


# The sizes of the decode-efficiency comparison, as overrides of the tiny config. "probe" keeps the tiny model's
# operations with negligible widths (its step is the fixed toll of Python, dispatch, launches); efficiency_table
# gives it the loaded model's layer count, since that toll is paid per layer.
SIZE_OVERRIDES: dict[str, dict[str, Any]] = {
    "probe": {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
              "head_dim": 8, "vocab_size": 256},
    "tiny": {},
    "small": SMALL_OVERRIDES,  # the small profile's own widths
}


def size_config(name: str) -> dict[str, Any]:
    return {**TINY_CONFIG, **SIZE_OVERRIDES[name]}


def efficiency_row(name: str, model, config: dict, dtype: str, device: str, bandwidth: float, context: int,
                   steps: int = 16) -> dict[str, Any]:
    """One model's decode step (batch 1) against its floor, in B and s: the step's bytes (weights streamed once,
    the new token's embedding row included; KV read and written), floor = bytes ÷ bandwidth, efficiency = floor ÷ step."""
    spec = spec_from_config(config, name)
    decode_steps(model, device, 8, steps=2)   # warm-up
    stats = decode_steps(model, device, context, steps=steps)[0]
    cost = decode_cost(spec, context, 1, dtype)
    floor = cost.bytes / bandwidth                  # roofline.decode_floor_s: weights and KV once
    return {"model": name, "params": param_breakdown(spec).total, "dtype": dtype, "device": device, "context": context,
            "weight_bytes_read": cost.weight_read_bytes, "kv_bytes_read": cost.kv_read_bytes, "step_bytes": cost.bytes,
            "floor_s": floor, "step_s": stats.median, "step_p90_s": stats.p90, "efficiency": ratio(floor, stats.median)}


def efficiency_table(sizes: Sequence[str], device: str, dtype: str, bandwidth: float, context: int,
                     steps: int = 16, extra: Sequence[Any] = ()):
    """efficiency_row of named sizes (the probe with `extra`'s first layer count), then of `extra`'s loaded models."""
    import pandas as pd

    rows = []
    layers = {"num_hidden_layers": extra[0].config["num_hidden_layers"]} if extra else {}
    for name in sizes:
        cfg = size_config(name) | (layers if name == "probe" else {})
        rows.append(efficiency_row(name, tiny_model(cfg, device, dtype), cfg, dtype, device, bandwidth, context, steps))
        free_memory(device)
    rows += [efficiency_row(f"{m.profile} (loaded)", m.model, m.config, m.dtype, m.device, bandwidth, context, steps)
             for m in extra]
    return pd.DataFrame(rows).sort_values("weight_bytes_read", ignore_index=True)
