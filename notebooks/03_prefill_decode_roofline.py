# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "llm-inference-workshop-helpers @ git+https://github.com/YOUR-GITHUB-OWNER/llm-inference-at-scale@main",
#     "torch",
# ]
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo
    import pandas as pd

    from helpers import microbench, models, notebook, roofline, workload_figures, workloads
    from helpers.memory import kv_cache_bytes
    from helpers.units import dtype_bytes, fmt_bytes, fmt_seconds

    notebook.setup()
    return (dtype_bytes, fmt_bytes, fmt_seconds, kv_cache_bytes, microbench, mo, models, pd, roofline,
            workload_figures, workloads)


@app.cell
def _(mo):
    mo.md("""
    # 03 · Prefill against decode, on the roofline of your own hardware

    Generation has two phases. **Prefill** runs the whole prompt through the model in one forward
    pass: every weight is read once and used for every prompt token — lots of arithmetic per byte,
    *compute-bound*; its duration is the time to first token. **Decode** then produces one token per
    step, reusing the cached keys and values: every weight (and the cache) is read to produce one
    token per sequence — little arithmetic per byte, *memory-bound*; its duration is the inter-token
    latency.

    The roofline makes that precise. This notebook measures this device's two roofs — memory
    bandwidth and peak matmul FLOP/s — places measured prefill and decode steps under them, and
    compares each decode step with the fastest it could possibly be.
    """)
    return


@app.cell
def _(models, workloads):
    loaded = models.load()
    sizes = workloads.sizes_for(loaded)
    spec = loaded.spec
    label = loaded.label
    return label, loaded, sizes, spec


@app.cell
def _(mo):
    mo.md("""
    ## 1 · This device's two roofs, measured

    - **Bandwidth**: a device-to-device copy of a buffer far larger than the caches; bytes read +
      bytes written, divided by the time (`helpers.microbench.measure_bandwidth`).
    - **Peak FLOP/s**: a square matmul in the model's dtype, 2·n³ FLOPs (`measure_peak_flops`).

    A roof is the best the device sustains, so each is the best of its repeats (as the STREAM benchmark
    reports); the workloads below are medians.
    """)
    return


@app.cell
def _(dtype_bytes, label, loaded, microbench, pd, roofline):
    copy = microbench.copy_benchmark(loaded.device)
    read = microbench.read_benchmark(loaded.device)
    matmul = microbench.matmul_benchmark(loaded.device, loaded.dtype)
    bandwidth, peak = copy.bandwidth, matmul.flops_per_s
    ridge = roofline.ridge_point(peak, bandwidth)
    crossover = roofline.crossover_batch(peak, bandwidth, dtype_bytes(loaded.dtype))
    roofs = pd.DataFrame([
        {"what": "memory bandwidth", "measured": f"{bandwidth / 1e9:,.1f} GB/s",
         "how": f"copy of {copy.nbytes / 2**20:,.0f} MiB, read + write, best of {len(copy.stats.samples)}"},
        {"what": "read-only bandwidth (for comparison)", "measured": f"{read.bandwidth / 1e9:,.1f} GB/s",
         "how": f"sum of a {read.nbytes / 2**20:,.0f} MiB fp32 buffer, bytes read, best of {len(read.stats.samples)}"},
        {"what": f"peak matmul ({loaded.dtype})", "measured": f"{peak / 1e12:,.3f} TFLOP/s",
         "how": f"{matmul.n} × {matmul.n} matmul, 2·n³ FLOPs, best of {len(matmul.stats.samples)}"},
        {"what": "ridge point (peak ÷ bandwidth)", "measured": f"{ridge:,.1f} FLOP/B", "how": "computed"},
        {"what": f"crossover decode batch ({loaded.dtype})", "measured": f"{crossover:,.0f}",
         "how": f"ridge × {dtype_bytes(loaded.dtype):g} B per parameter ÷ 2"},
    ]).assign(**{"measured on": label})
    roofs
    return bandwidth, crossover, peak, read, ridge


@app.cell
def _(crossover, loaded, mo, ridge):
    mo.md(f"""
    Below **{ridge:,.1f} FLOP per byte** a computation on this device waits for memory; above it, for the
    arithmetic units. A decode step of batch *B* does 2 FLOPs per parameter per sequence and reads each
    parameter's {loaded.dtype} bytes once for the whole batch, so its intensity is about
    2·*B* ÷ bytes per parameter: it reaches the ridge at **batch ≈ {crossover:,.0f}** here. For comparison, an
    H100 SXM's datasheet gives 989 TFLOP/s (dense bf16) ÷ 3.35 TB/s ≈ 295 FLOP/B: in bf16 (2 B per
    parameter) decode stays memory-bound up to a batch of about 295.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 2 · Prefill time against prompt length

    A prefill into a fresh `DynamicCache`, logits for the last position only (as `generate` does);
    median of repeats after a warm-up. Right: the FLOP/s it keeps busy, from the model's FLOPs
    (2 per parameter per token, plus attention) ÷ the measured time.
    """)
    return


@app.cell
def _(loaded, peak, roofline, sizes, spec, workloads):
    prefill = workloads.ttft_sweep(loaded, sizes.ttft_tokens, sizes.ttft_repeats)
    roofline.prefill_figure(prefill, spec, loaded.dtype, peak, loaded)
    return (prefill,)


@app.cell
def _(label, prefill):
    prefill_table = prefill.assign(**{"measured on": label})
    prefill_table
    return


@app.cell
def _(mo):
    mo.md("""
    ## 3 · Decode step time against context

    A prefill of *c* tokens, then one token per step through the model, each step reusing the cache
    (`helpers.timing.timed_generate`); the median step. The dashed line is the memory-bound floor of a
    step: (weight bytes + KV bytes) ÷ the measured bandwidth.
    """)
    return


@app.cell
def _(bandwidth, kv_cache_bytes, loaded, roofline, sizes, spec, workload_figures, workloads):
    decode = workloads.itl_sweep(loaded, sizes.itl_contexts, sizes.itl_steps)
    weights_read = roofline.streamed_weight_bytes(spec, loaded.dtype)

    def decode_floor(context):
        return roofline.decode_floor_s(weights_read, kv_cache_bytes(spec, context, 1, loaded.dtype), bandwidth)

    workload_figures.itl_figure(decode, loaded, decode_floor)
    return decode, decode_floor, weights_read


@app.cell
def _(decode, decode_floor, label):
    decode_table = decode.assign(floor_s=[decode_floor(int(c)) for c in decode["context"]],
                                 **{"measured on": label})
    decode_table
    return


@app.cell
def _(mo):
    mo.md("""
    ## 4 · Both on the roofline

    Each measured forward pass becomes a point: its FLOPs and bytes from the model's shape
    (`helpers.roofline.forward_flops`, `forward_bytes`; weights read once per pass, the cache read and
    written), its time measured. x = FLOPs ÷ bytes (arithmetic intensity), y = FLOPs ÷ seconds. Decode is
    also measured at growing batch: more sequences share each read of the weights.
    """)
    return


@app.cell
def _(loaded, sizes, workloads):
    decode_batches = workloads.decode_batch_sweep(loaded, sizes.efficiency_context, sizes.decode_batches)
    return (decode_batches,)


@app.cell
def _(bandwidth, decode, decode_batches, loaded, peak, prefill, roofline, sizes, spec):
    points = [roofline.prefill_point(spec, int(r.tokens), r.ttft_s, loaded.dtype)
              for r in prefill[~prefill["oom"]].itertuples()]
    points += [roofline.decode_point(spec, int(r.context), r.itl_s, loaded.dtype)
               for r in decode[~decode["oom"]].itertuples()]
    points += [roofline.decode_point(spec, sizes.efficiency_context, r.step_s, loaded.dtype, batch=int(r.batch))
               for r in decode_batches[~decode_batches["oom"]].itertuples() if r.batch > 1]
    roofline.roofline_figure(peak, bandwidth, points, loaded, loaded.dtype)
    return (points,)


@app.cell
def _(bandwidth, label, peak, points, roofline):
    roofline_table = roofline.points_frame(points, peak, bandwidth).assign(**{"measured on": label})
    roofline_table
    return


@app.cell
def _(mo, points, ridge):
    _pre = [p for p in points if p.kind == "prefill"]
    _dec = [p for p in points if p.kind == "decode"]
    _bat = [p for p in points if p.kind == "decode, batched"]
    _bat_text = (f" At batch {_bat[-1].label.split('batch ')[-1]} decode's intensity is {_bat[-1].intensity:,.1f} FLOP/B: "
                 "batching is how decode climbs toward the ridge." if _bat else "")
    mo.md("Too few points ran (out of memory) to compare prefill and decode here." if not (_pre and _dec) else f"""
    Prefill's intensity grows with the prompt, from {_pre[0].intensity:,.0f} to {_pre[-1].intensity:,.0f} FLOP/B
    (every weight byte serves every prompt token); decode at batch 1 stays near
    {_dec[0].intensity:,.2f}–{_dec[-1].intensity:,.2f} FLOP/B, {ridge / _dec[-1].intensity:,.0f}× left of the ridge at
    {ridge:,.1f} FLOP/B: each step reads all the weights to produce one token per sequence.{_bat_text} A point
    well under its roof is losing time to something neither roof counts — the next section measures what.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 5 · Decode efficiency: the measured step against its floor

    No decode step can be faster than reading what it must read: **floor = (weight bytes + KV bytes) ÷
    bandwidth**. *Efficiency* = floor ÷ measured step (100 % = at the floor). Measured here for models of
    different sizes, all with random weights (timing does not depend on the values), batch 1, and a
    **probe**: the tiny model's layers and operations with every width shrunk until its bytes are
    negligible — its step time is the fixed cost of a step (Python, operator dispatch, kernel launches)
    and nothing else.
    """)
    return


@app.cell
def _(bandwidth, loaded, roofline, sizes):
    efficiency = roofline.efficiency_table(sizes.efficiency_sizes, loaded.device, loaded.dtype, bandwidth,
                                           sizes.efficiency_context, extra=[loaded])
    efficiency_source = (f"measured: {', '.join(efficiency['model'])} · {loaded.dtype} · {loaded.device} · "
                         f"profile {loaded.profile}")
    roofline.efficiency_figure(efficiency, efficiency_source)
    return efficiency, efficiency_source


@app.cell
def _(efficiency, efficiency_source):
    efficiency_table = efficiency.assign(**{"measured on": efficiency_source})
    efficiency_table
    return


@app.cell
def _(bandwidth, efficiency, fmt_seconds, mo, read):
    _real = efficiency[efficiency["model"] != "probe"].sort_values("weight_bytes_read")
    _small, _big = _real.iloc[0], _real.iloc[-1]
    _probe = efficiency[efficiency["model"] == "probe"]
    _over = float(_probe["step_s"].iloc[0]) if len(_probe) else None

    def _verdict(r):
        if r["efficiency"] >= 0.5:
            return "close to its memory floor"
        return "overhead-bound: most of its step is not spent moving bytes"

    _probe_text = (f" The probe's step alone takes **{fmt_seconds(_over)}** — "
                   f"{100 * _over / _small['step_s']:,.0f} % of {_small['model']}'s step and "
                   f"{100 * _over / _big['step_s']:,.1f} % of {_big['model']}'s: a fixed toll per step, paid whatever the "
                   "model's size." if _over else "")
    mo.md(f"""
    **{_small['model']}** reads {_small['weight_bytes_read'] / 1e6:,.1f} MB per step: its floor is
    **{fmt_seconds(_small['floor_s'])}** but a step takes **{fmt_seconds(_small['step_s'])}** —
    {100 * _small['efficiency']:,.1f} % efficiency, {_verdict(_small)}.
    **{_big['model']}** reads {_big['weight_bytes_read'] / 1e6:,.0f} MB per step: floor
    {fmt_seconds(_big['floor_s'])}, step {fmt_seconds(_big['step_s'])}, **{100 * _big['efficiency']:,.1f} %** —
    {_verdict(_big)}.{_probe_text}

    Why: a decode step is a few dozen small operations per layer — matrix–vector products, norms, rotary
    embeddings, attention over the cache — each dispatched from Python. Each pays a fixed cost (the
    interpreter, operator dispatch, waking threads on a CPU, launching a kernel on a GPU), and a
    matrix–vector product on a matrix of a few hundred rows is over before it streams memory at full
    speed. For the smallest model those costs are most of the step; as the matrices grow, the bytes take
    over and the step closes in on the floor. (The floor uses the copy's bandwidth, bytes read + written;
    a decode step mostly reads, and reading alone this device streams {read.bandwidth / 1e9:,.1f} GB/s against
    the copy's {bandwidth / 1e9:,.1f} GB/s — a floor {bandwidth / read.bandwidth:,.2f}× as long, if read-only
    were the roof.) On a GPU the gap is starker:
    with terabytes per second the tiny model's floor is microseconds while its step still costs
    milliseconds of launches. This is why serving engines batch, fuse kernels and capture CUDA graphs —
    and why the tiny model's timings say little about a 7B model's: they measure mostly overhead.
    """)
    return


@app.cell
def _(bandwidth, crossover, efficiency, loaded, peak, ridge):
    # Recorded run beside this one (helpers.recorded): the key figures side by side, then the record's figures.
    from helpers import recorded as _recorded

    _own = efficiency[efficiency["model"].str.endswith("(loaded)")]
    _live = {"profile": loaded.profile, "device": loaded.device, "bandwidth (GB/s)": bandwidth / 1e9,
             "peak matmul (TFLOP/s)": peak / 1e12, "ridge (FLOP/B)": ridge, "crossover batch": crossover,
             "decode efficiency (loaded model)": float(_own["efficiency"].iloc[0]) if len(_own) else None}
    _recorded.note_figures("03_prefill_decode_roofline", _live)
    _recorded.beside_live("03_prefill_decode_roofline", _live)
    return


if __name__ == "__main__":
    app.run()
