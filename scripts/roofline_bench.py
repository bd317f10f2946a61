"""`make bench`'s roofline section (scripts/bench.py): this device's two roofs, prefill and decode on the
active profile (WORKSHOP_PROFILE), the decode floor and the efficiency against it — plain dicts, ready for
JSON, with the definitions of the derived figures under "definitions". The machine they ran on is
scripts/machine.py.
"""
from __future__ import annotations

from typing import Any

from helpers.formulas import roofline
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

    bandwidth_bytes_per_s   copy microbenchmark, read + write bytes, best of `repeats`
    read_bandwidth_bytes_per_s  read-only microbenchmark (sum), for comparison
    peak_flops              square matmul in the model's dtype, 2·n³ FLOPs, best of `repeats`
    prefill_tokens_per_s    prompt tokens per second of a prefill, by prompt length (median of repeats)
    decode_step_s           median decode step (batch 1, one token, reusing the DynamicCache) at decode_context
    decode_floor_s          (streamed weight bytes + KV bytes at decode_context) ÷ bandwidth
    decode_efficiency       decode_floor_s ÷ decode_step_s, a fraction in 0..1 (1 = at the memory floor)
    decode_efficiency_by_model  the same for other model sizes (random weights) and the overhead probe
    decode_efficiency_small, planner_ratio_small, decode_implementations_*  helpers.decoding.regimes.bench_figures
    """
    from helpers.measure import decode_efficiency, microbench, models, sweeps

    loaded = loaded or models.load()
    dev, dtype, spec = loaded.device, loaded.dtype, loaded.spec
    sizes = sweeps.sizes_for(loaded)
    copy = microbench.copy_benchmark(dev, repeats=repeats)
    read = microbench.read_benchmark(dev, repeats=repeats)
    matmul = microbench.matmul_benchmark(dev, dtype, repeats=repeats)
    bandwidth, peak = copy.bandwidth, matmul.flops_per_s

    prefill = sweeps.ttft_sweep(loaded, prefill_lengths(loaded.profile, dev), repeats=3)
    prefill_ok = prefill[~prefill["oom"]]
    context = sizes.efficiency_context
    steps = decode_efficiency.decode_step_stats(loaded.model, context, dev, steps=16)
    floor_fig = decode_floor_figures(spec, dtype, context, bandwidth)
    floor = floor_fig["decode_floor_s"]
    out: dict[str, Any] = {
        "profile": loaded.profile,
        "model": loaded.model_name,
        "label": loaded.label,
        "dtype": dtype,
        "device": dev,
        "bandwidth_bytes_per_s": bandwidth,
        "bandwidth_benchmark": copy.to_dict(),
        "read_bandwidth_bytes_per_s": read.bandwidth,
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
        "decode_efficiency": roofline.decode_efficiency(floor, steps.median),
        "definitions": {
            "bandwidth_bytes_per_s": "device-to-device copy, (bytes read + bytes written) / best time",
            "read_bandwidth_bytes_per_s": "sum of an fp32 buffer, bytes read / best time (for comparison)",
            "peak_flops": "square matmul in the model's dtype, 2*n^3 FLOPs / best time",
            "decode_floor_s": "decode_step_bytes / bandwidth_bytes_per_s: weights streamed once per step (embedding "
                              "by rows) + KV read at decode_context and written (helpers.formulas.stepcost)",
            "decode_efficiency": "decode_floor_s / decode_step_s, a fraction in 0..1 (1 = at the memory floor)",
            "crossover_batch": "ridge (peak / bandwidth) * bytes per parameter / 2",
        },
    }
    if with_decoding:  # helpers.decoding: both regimes, every implementation, the planner's check
        from helpers.decoding.regimes import bench_figures

        out.update(bench_figures(loaded, None, peak))   # the floor's bandwidth measured alongside its steps
    if with_sizes:
        table = decode_efficiency.efficiency_table(sizes.efficiency_sizes, dev, dtype, bandwidth, context, extra=[loaded])
        out["decode_efficiency_by_model"] = [
            {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in table.to_dict("records")]
    return out
