"""The capacity planner against a measurement: its decode step for the loaded model on its own device
(helpers.capacity's roofline, with the loaded weights' bytes and the measured bandwidth) beside the
step measured with a real KV cache, as a table for notebook 04 and as the capacity section of
`make bench`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import checks
from ..formulas import verdicts
from ..formulas.gpus import GPU, datasheet_gpu
from ..formulas.memory import KV_DTYPES, WEIGHT_SCHEMES
from ..formulas.stepcost import decode_cost


def measure_sizes(device: str) -> dict:
    """Prompt, new tokens and batch for the measured step: small on a CPU, realistic on a GPU."""
    if device == "cpu":
        return {"prompt_tokens": 64, "new_tokens": 17, "batch": 1}
    return {"prompt_tokens": 512, "new_tokens": 33, "batch": 1}


def predict_vs_measure(loaded, bandwidth: float | None = None, batch: int | None = None,
                       prompt_tokens: int | None = None, new_tokens: int | None = None,
                       peak_flops: float | None = None, seed: int = 0) -> dict:
    """The planner's decode step for the loaded model on its own device against the measured one.

    Prediction: the same decode step as plan() and notebook 03 (helpers.formulas.stepcost.decode_cost: the
    weights streamed once, the embedding by rows, the KV cache at the mean cached length read and the
    new token's written), over the device's measured read bandwidth (helpers.measure.microbench.read_benchmark, the
    floor's bandwidth in notebook 03) unless `bandwidth` (bytes/s) is given; the compute term only when `peak_flops` is.
    Measurement: the median inter-token latency of a greedy generation with a real KV cache
    (helpers.measure.timing.timed_generate). ratio = measured ÷ predicted (1 = the floor reached).
    last_level_cache_bytes: on a CPU, the largest data cache the system reports (None where unknown, and on
    a GPU), which against_floor reads when a step beats its floor.
    """
    import torch

    from ..measure.tensor_bytes import measured_weight_bytes
    from ..measure.timing import timed_generate

    sizes = measure_sizes(loaded.device)
    batch = checks.count(batch or sizes["batch"], "batch")
    prompt = checks.count(prompt_tokens or sizes["prompt_tokens"], "prompt tokens")
    new = checks.count(new_tokens or sizes["new_tokens"], "new tokens")
    if new < 2:
        raise ValueError("new_tokens must be ≥ 2: the first token is the prefill, the rest are decode steps")
    if bandwidth is None:
        from ..measure.microbench import read_benchmark

        bandwidth = float(read_benchmark(loaded.device).bandwidth)
        bw_source = "measured read rate (helpers.measure.microbench.read_benchmark)"
    else:
        bandwidth = checks.number(bandwidth, "bandwidth", positive=True, unit="bytes/s")
        bw_source = "given"
    spec = loaded.spec
    mean_cached = prompt + new // 2       # step j of 1…new−1 attends over prompt + j tokens
    kv_dtype = loaded.dtype if loaded.dtype in KV_DTYPES else "bf16"
    weights = loaded.dtype if loaded.dtype in WEIGHT_SCHEMES else "bf16"
    cost = decode_cost(spec, mean_cached, batch, weights, kv_dtype)
    mem_s = cost.bytes / bandwidth
    comp_s = cost.flops / peak_flops if peak_flops else 0.0
    predicted = max(mem_s, comp_s)

    from ..measure.hardware import device_info

    device_name = device_info(loaded.device).name
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, spec.vocab_size, (batch, prompt), generator=gen)
    timed_generate(loaded.model, ids[:, : min(prompt, 16)], 3, device=loaded.device)   # warm-up
    t = timed_generate(loaded.model, ids, new, device=loaded.device)
    measured = t.itl_median_s
    return {"last_level_cache_bytes": last_level_cache_bytes(loaded.device),
        "label": loaded.label, "profile": loaded.profile, "device": loaded.device, "device_name": device_name,
        "dtype": loaded.dtype,
        "batch": batch, "prompt_tokens": prompt, "new_tokens": new, "mean_cached_tokens": mean_cached,
        "weight_bytes": cost.weight_read_bytes, "kv_bytes": cost.kv_bytes, "step_bytes": cost.bytes,
        "loaded_weight_bytes": measured_weight_bytes(loaded.model), "bandwidth": bandwidth, "bandwidth_source": bw_source,
        "predicted_step_s": predicted, "predicted_memory_s": mem_s, "predicted_compute_s": comp_s or None,
        "measured_step_s": measured, "measured_p90_s": sorted(t.step_s)[int(0.9 * (len(t.step_s) - 1))],
        "ratio": measured / predicted,
    }


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


def last_level_cache_bytes(device: str) -> int | None:
    """The largest data cache this CPU reports (helpers.measure.microbench), None on a GPU or where unknown."""
    from ..measure.microbench import last_level_cache_bytes as largest

    return largest() if str(device) == "cpu" else None


def against_floor(result: dict) -> verdicts.Verdict:
    """The measured decode step against the planner's floor (predict_vs_measure's result), by the change
    margin: at the floor (within 10 %); above it, the floor's share of the step (helpers.formulas.verdicts.share)
    and what that share says — reading the bytes sets the step, about half of it, or something other than
    reading the bytes (what the floor leaves out: costs per step, slow kernels) sets most of it; below it,
    the rate the step's bytes were read at against the measured bandwidth, and why: weights that fit the
    last-level cache (result['last_level_cache_bytes']) stay there between steps.
    evidence: measured_s, floor_s, ratio (measured ÷ floor), fraction (floor ÷ measured), beyond_s (measured − floor)."""
    step, floor = result["measured_step_s"], result["predicted_step_s"]
    ratio, beyond = step / floor, step - floor
    evidence = {"measured_s": step, "floor_s": floor, "ratio": ratio, "fraction": floor / step, "beyond_s": beyond}
    times = verdicts.times_as(step, floor, "the planner's floor")
    head = (f"the measured step, {step * 1e3:,.3f} ms, is {times} "
            f"({floor * 1e3:,.3f} ms: {result['step_bytes'] / 1e6:,.1f} MB at the {result['bandwidth'] / 1e9:,.1f} GB/s "
            "measured)")
    way = verdicts.change_verdict(ratio)
    if way == "about equal":
        words = f"{head}: at the floor (within {verdicts.CHANGE_MARGIN:.0%}) — reading the step's bytes is the step"
    elif way == "higher":
        share = verdicts.share(floor, step, "the step")
        band = verdicts.share_band(floor / step)
        why = ("reading the bytes is the step" if band == "nearly all" else
               "reading the bytes sets most of the step" if band == "most" else
               "reading the bytes sets about half of it" if band == "about half" else
               "something other than reading the bytes sets most of the step: what the floor leaves out, costs paid "
               "per step (Python, operator dispatch, kernel launches; notebook 03, section 5) or weights read below "
               "the copy's bandwidth (the kernels' own rate, section 6)")
        words = f"{head}: the floor is {share.words} — {why}; {beyond * 1e3:,.3f} ms per step are beyond it"
    else:
        cache = result.get("last_level_cache_bytes")
        weights = result["weight_bytes"]
        why = (f"its weights ({weights / 1e6:,.1f} MB) fit the last-level cache ({cache / 2**20:,.0f} MiB) and "
               "stay there between steps, read faster than the copy's bandwidth" if cache and weights <= cache else
               "the measured copy bandwidth was not what bounded it")
        words = (f"{head}: shorter than the floor — its bytes were read at "
                 f"{verdicts.factor(ratio ** -1)} the measured bandwidth: {why}")
    return verdicts.Verdict(words, "against_floor", evidence)


def against_floor_way(result: dict) -> str:
    """'above the floor', 'at the floor' or 'below the floor': against_floor's reading in three words (the
    self-check's answer)."""
    return {"higher": "above the floor", "about equal": "at the floor",
            "lower": "below the floor"}[verdicts.change_verdict(result["measured_step_s"] / result["predicted_step_s"])]


def floor_shares(small: dict, large: dict) -> verdicts.Verdict:
    """How much of each model's measured step its floor is: the profile's model against a larger one (both
    predict_vs_measure's results). A cost paid per step whatever the bytes is a larger part of the step that
    reads fewer bytes; the rule says whether this run shows that (the larger model's floor a larger share of
    its step, by the change margin), and the time beyond each floor says whether that cost is all there is
    (_beyond_words) — and it says nothing of either when the smaller model's step beat its floor (its weights
    read from a cache, not from memory)."""
    f_small = small["predicted_step_s"] / small["measured_step_s"]
    f_large = large["predicted_step_s"] / large["measured_step_s"]
    ev = {"small_fraction": f_small, "large_fraction": f_large,
          "small_beyond_s": small["measured_step_s"] - small["predicted_step_s"],
          "large_beyond_s": large["measured_step_s"] - large["predicted_step_s"]}
    name = small["profile"]
    each = (f"the floor is {100 * f_small:,.0f} % of {name}'s step ({small['step_bytes'] / 1e6:,.1f} MB read) and "
            f"{100 * f_large:,.0f} % of {large['profile']}'s ({large['step_bytes'] / 1e6:,.0f} MB)")
    if verdicts.change_verdict(f_small) == "higher":
        return verdicts.Verdict(f"{each}: {name}'s step beat its floor, so its bytes did not come from memory and "
                                "the two shares do not compare a cost per step", "floor_shares", ev)
    way = verdicts.change_verdict(f_large / f_small)
    words = {"higher": f"{each}: the larger model's step is more of its floor ({verdicts.factor(f_large / f_small)} the share)",
             "about equal": f"{each}: the same share within {verdicts.CHANGE_MARGIN:.0%}, whatever the bytes",
             "lower": f"{each}: the larger model's step is less of its floor (its share {verdicts.factor(f_small / f_large)} "
                      "smaller)"}[way]
    return verdicts.Verdict(f"{words}; {_beyond_words(ev['small_beyond_s'], ev['large_beyond_s'])}", "floor_shares", ev)


def _beyond_words(small_s: float, large_s: float) -> str:
    """What the time beyond each floor says, by the change margin: the same whatever the bytes is a cost paid
    per step; more for the larger model is time that grows with the bytes — read below the copy's rate."""
    times = f"{small_s * 1e3:,.2f} ms and {large_s * 1e3:,.2f} ms beyond the floors"
    way = verdicts.change_verdict(large_s / small_s) if small_s > 0 else "higher"
    if way == "higher":
        more = f"{verdicts.factor(large_s / small_s)} the smaller's" if small_s > 0 else "more than the smaller's"
        return (f"{times}: the larger model's is {more}, so more than a cost per step — time that grows with "
                "the bytes, read below the copy's bandwidth (the kernels' own rate: notebook 03, section 6)")
    if way == "about equal":
        return f"{times}, the same within {verdicts.CHANGE_MARGIN:.0%}: a cost paid per step, whatever the bytes"
    return f"{times}: the larger model's is less than the smaller's — not a cost every step pays alike"


@dataclass(frozen=True)
class Efficiency:
    """A measured decode step as a share of its floor: at the bandwidth measured on this device, and at
    the catalogued GPU's datasheet bandwidth (gpu, datasheet_* None where the device is not catalogued)."""

    vs_measured_bandwidth: float
    gpu: GPU | None
    datasheet_bandwidth: float | None
    datasheet_efficiency: float | None


def efficiency(result: dict, gpu: GPU | str | None = None) -> Efficiency:
    """The measured step as an efficiency, two ways: against the floor at the bandwidth measured on this
    device (predicted ÷ measured), and — where the device is a catalogued GPU (`gpu`, else found from
    result['device_name']) — against the floor at its datasheet bandwidth, the share the planner's
    --efficiency means: measured-bandwidth efficiency × measured bandwidth ÷ datasheet bandwidth.
    datasheet_efficiency is None without a datasheet (a CPU has none: nothing to pass as --efficiency)."""
    from ..formulas.gpus import get_gpu

    vs_measured = result["predicted_step_s"] / result["measured_step_s"]
    g = get_gpu(gpu) if gpu is not None else datasheet_gpu(result["device"], result.get("device_name"))
    # the floor at the datasheet's bandwidth ÷ the measured step; for the memory-bound floor predicted here
    # (bytes ÷ measured bandwidth) this is vs_measured × measured bandwidth ÷ datasheet bandwidth
    vs_datasheet = None if g is None else result["step_bytes"] / g.bandwidth / result["measured_step_s"]
    return Efficiency(vs_measured, g, None if g is None else g.bandwidth, vs_datasheet)


def comparison_table(result: dict):
    """predict_vs_measure() as a two-column DataFrame for a notebook."""
    import pandas as pd

    from ..formulas.units import fmt_bytes

    rows = [("model · dtype · device · profile", result["label"]),
            ("batch × prompt, decode steps", f"{result['batch']} × {result['prompt_tokens']}, "
                                            f"{result['new_tokens'] - 1} steps"),
            ("weights read per step", fmt_bytes(result["weight_bytes"])),
            ("KV read and written per step (mean length)", fmt_bytes(result["kv_bytes"])),
            ("bandwidth", f"{result['bandwidth'] / 1e9:,.1f} GB/s ({result['bandwidth_source']})"),
            ("predicted step (floor)", f"{result['predicted_step_s'] * 1e3:,.3f} ms"),
            ("measured step (median)", f"{result['measured_step_s'] * 1e3:,.3f} ms"),
            ("measured ÷ predicted", f"{result['ratio']:.2f}")]
    return pd.DataFrame(rows, columns=["", "value"]).set_index("")
