"""The capacity planner against a measurement: its decode step for the loaded model at this device's measured
bandwidth beside the step measured with a real KV cache; notebook 04's table of one row per model with the
planner's computed row for a named GPU (floor_table), and `make bench`'s capacity section.
"""
from __future__ import annotations

from ..formulas import regime
from ..formulas.gpus import datasheet_gpu
from ..formulas.memory import KV_DTYPES, WEIGHT_SCHEMES
from ..formulas.stepcost import decode_cost


def predict_vs_measure(loaded, bandwidth: float | None = None) -> dict:
    """The planner's decode step for the loaded model on its own device against the measured one. Predicted:
    stepcost.decode_cost at the mean cached length (as plan() and notebook 03) over the device's measured read
    bandwidth (microbench.read_benchmark, notebook 03's floor) unless `bandwidth` (B/s) is given.
    Measured: the median inter-token latency of a greedy generation with a real KV cache (timing.timed_generate).
    ratio = measured ÷ predicted (1: the floor reached). last_level_cache_bytes: on a CPU, the largest data cache
    (a step below its floor reads its bytes from a cache of this size)."""
    import torch

    from ..formulas.stats import percentile
    from ..measure.hardware import device_info
    from ..measure.microbench import last_level_cache_bytes, read_benchmark
    from ..measure.tensor_bytes import measured_weight_bytes
    from ..measure.timing import timed_generate

    cpu = loaded.device == "cpu"
    batch, prompt, new = 1, (64 if cpu else 512), (17 if cpu else 33)   # small on a CPU, realistic on a GPU
    if bandwidth is None:
        bandwidth, bw_source = float(read_benchmark(loaded.device).bandwidth), \
            "measured read rate (helpers.measure.microbench.read_benchmark)"
    else:
        bw_source = "given"
    spec = loaded.spec
    mean_cached = prompt + new // 2       # step j of 1…new−1 attends over prompt + j tokens
    cost = decode_cost(spec, mean_cached, batch, loaded.dtype if loaded.dtype in WEIGHT_SCHEMES else "bf16",
                       loaded.dtype if loaded.dtype in KV_DTYPES else "bf16")
    predicted = cost.bytes / bandwidth
    ids = torch.randint(3, spec.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(0))
    timed_generate(loaded.model, ids[:, : min(prompt, 16)], 3, device=loaded.device)   # warm-up
    t = timed_generate(loaded.model, ids, new, device=loaded.device)
    return {"last_level_cache_bytes": last_level_cache_bytes() if cpu else None,
            "label": loaded.label, "profile": loaded.profile, "device": loaded.device,
            "device_name": device_info(loaded.device).name, "dtype": loaded.dtype,
            "batch": batch, "prompt_tokens": prompt, "new_tokens": new, "mean_cached_tokens": mean_cached,
            "weight_bytes": cost.weight_read_bytes, "kv_bytes": cost.kv_bytes, "step_bytes": cost.bytes,
            "loaded_weight_bytes": measured_weight_bytes(loaded.model), "bandwidth": bandwidth,
            "bandwidth_source": bw_source, "predicted_step_s": predicted, "measured_step_s": t.itl_median_s,
            "measured_p90_s": percentile(t.step_s, 90), "ratio": regime.ratio(t.itl_median_s, predicted)}


LARGER_PROFILE = "small"    # the locally built profile whose decode step reads the most bytes


def larger_profile(loaded) -> str | None:
    """The profile notebook 04's second comparison measures beside the loaded model: LARGER_PROFILE when its
    weights (counted from its config, helpers.formulas.stepcost) are more than the loaded model's, else None
    (the small profile itself, Mistral 7B on a GPU: the loaded model is already the larger one)."""
    from ..formulas.specs import spec_from_config
    from ..measure.local_models import BUILT_PROFILES

    larger = spec_from_config(BUILT_PROFILES[LARGER_PROFILE][0], LARGER_PROFILE)
    reads = decode_cost(larger, 0, 1, "fp32").weight_read_bytes
    return LARGER_PROFILE if reads > decode_cost(loaded.spec, 0, 1, "fp32").weight_read_bytes else None


REFERENCE = ("mistral-7b-v0.1", "H100 SXM", 512)   # the computed row: Mistral 7B at batch 1 on an H100


def _get(result: dict, key: str) -> float:
    """A number of a result as a float: nan where it is missing or not a number."""
    try:
        return float(result.get(key))
    except (TypeError, ValueError):
        return float("nan")


def floor_row(result: dict) -> dict:
    """One measured model (predict_vs_measure's result) as a row of floor_table. Never raises: a missing or
    zero figure gives nan, inf or a label "–" (helpers.formulas.regime)."""
    step, floor = _get(result, "measured_step_s"), _get(result, "predicted_step_s")
    ratio, label = regime.against(step, floor)
    g = datasheet_gpu(str(result.get("device", "")), result.get("device_name"))
    cache = _get(result, "last_level_cache_bytes")
    return {"model": str(result.get("label") or result.get("profile") or "?"),
            "bytes per step (MB)": _get(result, "step_bytes") / 1e6,
            "bandwidth (GB/s)": _get(result, "bandwidth") / 1e9,
            "floor (ms)": floor * 1e3, "measured step (ms)": step * 1e3,
            "measured ÷ floor": ratio, "label": label, "beyond the floor (ms)": (step - floor) * 1e3,
            # the planner's --efficiency: the floor at the datasheet's bandwidth ÷ the step (a catalogued GPU only)
            "datasheet floor ÷ measured": (regime.ratio(_get(result, "step_bytes") / g.bandwidth, step)
                                           if g is not None else float("nan")),
            "last-level cache (MiB)": cache / 2**20}


def computed_row(model: str = REFERENCE[0], gpu: str = REFERENCE[1], context: int = REFERENCE[2]) -> dict:
    """The planner's floor for `model` in bf16 at batch 1 and `context` tokens on one catalogued `gpu`, at its
    datasheet bandwidth (helpers.capacity.planner.plan), as a row of floor_table: nothing measured; its
    "datasheet floor ÷ measured" is the efficiency the planner assumes (DEFAULT_EFFICIENCY)."""
    from .planner import DEFAULT_EFFICIENCY, plan

    p = plan(model, gpu, 1, "bf16", "bf16", context, 1, efficiency=1.0)
    return {**floor_row({"label": f"{p.model} · bf16 · {p.gpu} (computed, {context:,} tokens)",
                         "step_bytes": p.step_bytes_per_gpu, "bandwidth": p.bandwidth, "predicted_step_s": p.step_floor_s}),
            "datasheet floor ÷ measured": DEFAULT_EFFICIENCY}


def floor_table(results, reference: tuple[str, str, int] | None = REFERENCE):
    """Each measured model's step against its floor (bytes ÷ the measured bandwidth), one row per result of
    predict_vs_measure (None skipped), and the planner's computed row for `reference` (model, GPU, context)
    below them: a pandas DataFrame. The time beyond the floor is measured − floor, negative below it."""
    import pandas as pd

    rows = [floor_row(r) for r in results if r is not None]
    if reference is not None:
        rows.append(computed_row(*reference))
    return pd.DataFrame(rows, columns=list(computed_row().keys()) if not rows else None)
