"""`make bench`'s roofline section (scripts/bench.py): this device's two roofs, prefill and decode on the
active profile (WORKSHOP_PROFILE), the decode floor and the efficiency against it — plain dicts, ready for
JSON, with the definitions of the derived figures under "definitions". Where they were measured is
scripts/bench.py's measured_on (helpers.measure.hardware).
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from helpers.formulas import regime, roofline
from helpers.formulas.stepcost import decode_cost, forward_cost
from helpers.formulas.units import dtype_bytes
from helpers.measure.timing import Stats


def prefill_lengths(profile: str, device: str) -> tuple[int, ...]:
    """Prompt lengths for the prefill tokens/s figure: short, middle and long for the profile."""
    from helpers.measure.local_models import TINY_PROFILES  # tiny and tiny-trained: the same config and sizes

    if profile in TINY_PROFILES:
        return (128, 512, 2048)
    if device.startswith("cuda"):
        return (512, 2048, 8192)
    return (64, 256)


def decode_floor_figures(spec, dtype: str, context: int, bandwidth: float) -> dict[str, Any]:
    """The decode floor at `context` (batch 1) that `make bench` reports: helpers.formulas.stepcost's bytes,
    the same that notebook 03's floor and the capacity planner use."""
    cost = decode_cost(spec, context, 1, dtype)
    return {"decode_weight_bytes": cost.weight_read_bytes, "decode_kv_bytes": cost.kv_bytes,
            "decode_step_bytes": cost.bytes,
            "decode_floor_s": roofline.decode_floor_s(cost.weight_read_bytes, cost.kv_bytes, bandwidth)}


def roofline_figures(loaded=None, repeats: int = 5, with_sizes: bool = True,
                     with_decoding: bool = True) -> dict[str, Any]:
    """The roofline figures of notebook 03 for the active profile on this device:

    bandwidth_bytes_per_s   read microbenchmark (sum), bytes read, best of `repeats`: the floor's
    copy_bandwidth_bytes_per_s  copy microbenchmark, read + write bytes, for comparison
    peak_flops              square matmul in the model's dtype, 2·n³ FLOPs, best of `repeats`
    prefill_tokens_per_s    prompt tokens per second of a prefill, by prompt length (median of repeats)
    decode_step_s           median decode step (batch 1, one token, reusing the DynamicCache) at decode_context
    decode_floor_s          (streamed weight bytes + KV bytes at decode_context) ÷ bandwidth
    decode_efficiency       decode_floor_s ÷ decode_step_s, a fraction in 0..1 (1 = at the memory floor)
    decode_efficiency_by_model  the same for other model sizes (random weights) and the overhead probe
    decode_efficiency_small, planner_ratio_small, decode_implementations_*  decoding_figures below
    """
    from helpers.decoding import regimes
    from helpers.measure import microbench, models, sweeps

    loaded = loaded or models.load()
    dev, dtype, spec = loaded.device, loaded.dtype, loaded.spec
    sizes = sweeps.sizes_for(loaded)
    copy = microbench.copy_benchmark(dev, repeats=repeats)
    read = microbench.read_benchmark(dev, repeats=repeats)
    matmul = microbench.matmul_benchmark(dev, dtype, repeats=repeats)
    bandwidth, peak = read.bandwidth, matmul.flops_per_s

    prefill = sweeps.ttft_sweep(loaded, prefill_lengths(loaded.profile, dev), repeats=3)
    prefill_ok = prefill[~prefill["oom"]]
    context = sizes.efficiency_context
    sweeps.decode_steps(loaded.model, dev, 8, steps=2)   # warm-up
    steps = sweeps.decode_steps(loaded.model, dev, context)[0]
    floor_fig = decode_floor_figures(spec, dtype, context, bandwidth)
    floor = floor_fig["decode_floor_s"]
    out: dict[str, Any] = {
        "profile": loaded.profile,
        "model": loaded.model_name,
        "label": loaded.label,
        "dtype": dtype,
        "device": dev,
        "bandwidth_bytes_per_s": bandwidth,
        "bandwidth_benchmark": read.to_dict(),
        "copy_bandwidth_bytes_per_s": copy.bandwidth,
        "peak_flops": {"flops_per_s": peak, "dtype": dtype, "n": matmul.n, **matmul.to_dict()},
        "ridge_flop_per_byte": roofline.ridge_point(peak, bandwidth),
        "crossover_batch": roofline.crossover_batch(peak, bandwidth, dtype_bytes(dtype)),
        "prefill_tokens_per_s": {str(int(r.tokens)): float(r.tokens_per_s) for r in prefill_ok.itertuples()},
        "prefill": [{"tokens": int(r.tokens), "ttft_s": float(r.ttft_s), "ttft_p90_s": float(r.ttft_p90_s),
                     "tokens_per_s": float(r.tokens_per_s),
                     "achieved_flops_per_s": forward_cost(spec, int(r.tokens)).flops / float(r.ttft_s)}
                    for r in prefill_ok.itertuples()],
        "prefill_oom_at": prefill.attrs.get("oom_at"),
        "decode_context": context,
        "decode_step_s": steps.median,
        "decode_step": Stats(steps.samples).to_dict(),
        **floor_fig,
        "decode_efficiency": regime.ratio(floor, steps.median),
        "definitions": {
            "bandwidth_bytes_per_s": "sum of an fp32 buffer, bytes read / best time: the floor's bandwidth",
            "copy_bandwidth_bytes_per_s": "device-to-device copy, (bytes read + bytes written) / best time (for comparison)",
            "peak_flops": "square matmul in the model's dtype, 2*n^3 FLOPs / best time",
            "decode_floor_s": "decode_step_bytes / bandwidth_bytes_per_s: weights streamed once per step (embedding "
                              "by rows) + KV read at decode_context and written (helpers.formulas.stepcost)",
            "decode_efficiency": "decode_floor_s / decode_step_s, a fraction in 0..1 (1 = at the memory floor)",
            "crossover_batch": "ridge (peak / bandwidth) * bytes per parameter / 2",
        },
    }
    if with_decoding:  # helpers.decoding: both regimes, every implementation
        out.update(decoding_figures(loaded, None))   # the floor's bandwidth measured alongside its steps
    if with_sizes:
        table = regimes.efficiency_table(sizes.efficiency_sizes, dev, dtype, bandwidth, context, extra=[loaded])
        out["decode_efficiency_by_model"] = [
            {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in table.to_dict("records")]
    return out


def figures_for_bench(reg, suffix: str) -> dict[str, Any]:
    """A regime as plain numbers (JSON) for `make bench`, keys ending in `suffix` (e.g. "_small")."""
    from helpers.formulas.stepcost import decode_cost

    best = reg.best
    # the planner's step at efficiency 1 on the measured bandwidth: the step's bytes (stepcost) ÷ that bandwidth
    planner_step_s = decode_cost(reg.spec, best.context, 1, reg.dtype).bytes / reg.bandwidth
    out: dict[str, Any] = {
        f"decode_efficiency{suffix}": best.efficiency,
        f"decode_best_impl{suffix}": best.impl,
        f"decode_best_step_s{suffix}": best.step_s,
        f"decode_floor_s{suffix}": best.floor_s,
        f"decode_floor_bandwidth_bytes_per_s{suffix}": reg.bandwidth,
        f"planner_ratio{suffix}": best.step_s / planner_step_s,
        f"planner_step_s{suffix}": planner_step_s,
        f"decode_implementations{suffix}": [
            {"impl": r.impl, "step_s": r.step_s, "floor_s": r.floor_s, "efficiency": r.efficiency,
             "same_tokens_as_eager": r.same_tokens, "kv_slots_read": r.kv_slots, "context": r.context,
             "compile_s": r.compile_s, "steps_timed": r.steps} for r in reg.results],
        f"decode_skipped{suffix}": reg.skipped,
        f"decode_label{suffix}": reg.label,
    }
    return out


def decoding_figures(loaded, bandwidth: float | None) -> dict[str, Any]:
    """For `make bench` (the roofline section): the small profile's decode efficiency with the best
    implementation and the planner's ratio (keys ending in _small), every implementation of the
    active profile (keys ending in _active). On a CPU the small model is also compiled, to record
    what torch.compile costs there (decode_implementations_small[…].compile_s), unless
    WORKSHOP_BENCH_COMPILE=0, which also leaves static+compile out of the active profile's on a GPU."""
    from helpers import env
    from helpers.decoding import regimes
    from helpers.decoding.impls import IMPLEMENTATIONS
    from helpers.measure import models
    from helpers.measure.hardware import free_memory

    def measure(model, impls):
        return regimes.measure_regime(model, bandwidth, impls)

    dev = loaded.device
    out: dict[str, Any] = {}
    no_compile = not env.flag("WORKSHOP_BENCH_COMPILE", default=True)
    if loaded.profile != "small":
        # WORKSHOP_BENCH_COMPILE=0 on a GPU too: gpu_record.sh's bench, after notebook 03 measured the compile
        impls = tuple(i for i in regimes.implementations_for(dev) if not (no_compile and i == "static+compile"))
        active = measure(loaded, impls)
        out.update(figures_for_bench(active, "_active"))
        del active
    small = loaded if loaded.profile == "small" else models.load("small", device=dev)
    if dev.startswith("cuda"):
        impls = ("eager", "generate", "static")      # the GPU story is the active model's; small stays quick
    elif no_compile:
        impls = regimes.implementations_for(dev)    # e.g. gpu_record.sh's dry run: no CPU compile
    else:   # record what torch.compile costs on this CPU too
        impls = (*regimes.implementations_for(dev), "static+compile")
        impls = tuple(i for i in IMPLEMENTATIONS if i in impls)
    reg = measure(small, impls)
    out.update(figures_for_bench(reg, "_small"))
    if loaded.profile == "small":
        out.update({k.replace("_small", "_active"): v for k, v in figures_for_bench(reg, "_small").items()})
    del small, reg
    free_memory(dev)
    out["definitions_decoding"] = {
        "decode_efficiency_small": "floor / median step of the fastest implementation, small profile, batch 1; "
                                   "the floor at the read bandwidth measured alongside the steps "
                                   "(decode_floor_bandwidth_bytes_per_s_small)",
        "planner_ratio_small": "measured step (fastest implementation) / the planner's step at efficiency 1 on the "
                               "measured bandwidth (helpers.formulas.stepcost.decode_cost bytes / that bandwidth), "
                               "small profile, batch 1",
        "decode_implementations_*": "helpers.decoding.impls: eager loop, generate, static cache, static + torch.compile",
    }
    return out
