"""The capacity planner against a measurement: its decode step for the loaded model on its own device
(helpers.capacity's roofline, with the loaded weights' bytes and the measured bandwidth) beside the
step measured with a real KV cache, as a table for notebook 04 and as the capacity section of
`make bench`.
"""
from __future__ import annotations

from .planner import _positive, _whole
from ..memory import KV_DTYPES, WEIGHT_SCHEMES
from ..stepcost import decode_cost


def measure_sizes(device: str) -> dict:
    """Prompt, new tokens and batch for the measured step: small on a CPU, realistic on a GPU."""
    if device == "cpu":
        return {"prompt_tokens": 64, "new_tokens": 17, "batch": 1}
    return {"prompt_tokens": 512, "new_tokens": 33, "batch": 1}


def predict_vs_measure(loaded, bandwidth: float | None = None, batch: int | None = None,
                       prompt_tokens: int | None = None, new_tokens: int | None = None,
                       peak_flops: float | None = None, seed: int = 0) -> dict:
    """The planner's decode step for the loaded model on its own device against the measured one.

    Prediction: the same decode step as plan() and notebook 03 (helpers.stepcost.decode_cost: the
    weights streamed once, the embedding by rows, the KV cache at the mean cached length read and the
    new token's written), over the device's measured bandwidth (helpers.microbench.measure_bandwidth, the microbenchmark of
    notebook 03) unless `bandwidth` (bytes/s) is given; the compute term only when `peak_flops` is.
    Measurement: the median inter-token latency of a greedy generation with a real KV cache
    (helpers.timing.timed_generate). ratio = measured ÷ predicted (1 = the floor reached).
    """
    import torch

    from ..memory import measured_weight_bytes
    from ..timing import timed_generate

    sizes = measure_sizes(loaded.device)
    batch = _whole(batch or sizes["batch"], "batch")
    prompt = _whole(prompt_tokens or sizes["prompt_tokens"], "prompt tokens")
    new = _whole(new_tokens or sizes["new_tokens"], "new tokens")
    if new < 2:
        raise ValueError("new_tokens must be ≥ 2: the first token is the prefill, the rest are decode steps")
    if bandwidth is None:
        from ..microbench import measure_bandwidth

        bandwidth = float(measure_bandwidth(loaded.device))
        bw_source = "measured (helpers.roofline.measure_bandwidth)"
    else:
        bandwidth = _positive(bandwidth, "bandwidth (bytes/s)")
        bw_source = "given"
    spec = loaded.spec
    mean_cached = prompt + new // 2       # step j of 1…new−1 attends over prompt + j tokens
    kv_dtype = loaded.dtype if loaded.dtype in KV_DTYPES else "bf16"
    weights = loaded.dtype if loaded.dtype in WEIGHT_SCHEMES else "bf16"
    cost = decode_cost(spec, mean_cached, batch, weights, kv_dtype)
    mem_s = cost.bytes / bandwidth
    comp_s = cost.flops / peak_flops if peak_flops else 0.0
    predicted = max(mem_s, comp_s)

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, spec.vocab_size, (batch, prompt), generator=gen)
    timed_generate(loaded.model, ids[:, : min(prompt, 16)], 3, device=loaded.device)   # warm-up
    t = timed_generate(loaded.model, ids, new, device=loaded.device)
    measured = t.itl_median_s
    return {
        "label": loaded.label, "profile": loaded.profile, "device": loaded.device, "dtype": loaded.dtype,
        "batch": batch, "prompt_tokens": prompt, "new_tokens": new, "mean_cached_tokens": mean_cached,
        "weight_bytes": cost.weight_read_bytes, "kv_bytes": cost.kv_bytes, "step_bytes": cost.bytes,
        "loaded_weight_bytes": measured_weight_bytes(loaded.model), "bandwidth": bandwidth, "bandwidth_source": bw_source,
        "predicted_step_s": predicted, "predicted_memory_s": mem_s, "predicted_compute_s": comp_s or None,
        "measured_step_s": measured, "measured_p90_s": sorted(t.step_s)[int(0.9 * (len(t.step_s) - 1))],
        "ratio": measured / predicted,
    }


def comparison_table(result: dict):
    """predict_vs_measure() as a two-column DataFrame for a notebook."""
    import pandas as pd

    from ..units import fmt_bytes

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


def bench_capacity() -> dict:
    """For `make bench`: the planner's predicted decode step for the active profile on this device,
    the measured step, and their ratio (measured ÷ predicted)."""
    from ..models import load

    loaded = load()
    r = predict_vs_measure(loaded)
    return {"profile": r["profile"], "label": r["label"], "device": r["device"], "dtype": r["dtype"],
            "batch": r["batch"], "prompt_tokens": r["prompt_tokens"],
            "bandwidth_gbs": r["bandwidth"] / 1e9, "bandwidth_source": r["bandwidth_source"],
            "predicted_step_ms": r["predicted_step_s"] * 1e3, "predicted_step_bytes": r["step_bytes"],
            "mean_cached_tokens": r["mean_cached_tokens"], "measured_step_ms": r["measured_step_s"] * 1e3,
            "ratio_measured_over_predicted": r["ratio"]}
