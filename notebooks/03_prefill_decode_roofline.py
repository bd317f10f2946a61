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

with app.setup:
    import time

    import marimo as mo
    import pandas as pd

    from helpers.formulas import decode_intensity, gpus, roofline, stepcost, verdicts
    from helpers.present import (decode_intensity_figures, expected, learner, notebook, plots, recorded,
                                 replay, roofline_figures, sweep_figures)
    from helpers.measure import decode_efficiency, microbench, models, sweeps
    from helpers.decoding import breakdown as decoding_breakdown
    from helpers.decoding import views as decoding_views
    from helpers.present.glossary import term
    from helpers.formulas.units import dtype_bytes, fmt_seconds
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()
    h100 = roofline.gpu_roofline("H100 SXM", expected.REFERENCE_MODEL)


@app.function
def roofline_sweeps(loaded, sizes) -> dict:
    """Sections 1–4 measured in one run, so the roofs and the steps placed under them come from the same
    machine at the same time: the copy, read and matmul benchmarks (helpers.measure.microbench), prefill against
    prompt length, decode against context and decode against batch (helpers.measure.sweeps)."""
    return {"copy": microbench.copy_benchmark(loaded.device), "read": microbench.read_benchmark(loaded.device),
            "matmul": microbench.matmul_benchmark(loaded.device, loaded.dtype),
            "prefill": sweeps.ttft_sweep(loaded, sizes.ttft_tokens, sizes.ttft_repeats),
            "decode": sweeps.itl_sweep(loaded, sizes.itl_contexts, sizes.itl_steps),
            "decode_batches": sweeps.decode_batch_sweep(loaded, sizes.efficiency_context, sizes.decode_batches),
            "batch_context": sizes.efficiency_context}


@app.function
def efficiency_measured(loaded, sizes) -> dict:
    """Section 5: decode efficiency of models of several sizes and of the probe (decode_efficiency.efficiency_table),
    each floor at the copy bandwidth measured just before — not section 1's: a shared machine's bandwidth
    drifts, and floor and steps must see the same memory."""
    copy, read = microbench.copy_benchmark(loaded.device), microbench.read_benchmark(loaded.device)
    table = decode_efficiency.efficiency_table(sizes.efficiency_sizes, loaded.device, loaded.dtype, copy.bandwidth,
                                               sizes.efficiency_context, extra=[loaded])
    return {"table": table, "bandwidth": copy.bandwidth, "read_bandwidth": read.bandwidth}


@app.function
def regimes_measured(loaded) -> dict:
    """Section 6: each regime's model (helpers.decoding.regimes: tiny and small on a CPU, the active model on
    a GPU), its floor at the copy bandwidth measured alongside its own steps; the matmul peak measured here
    for the roofline's compute roof."""
    peak = microbench.matmul_benchmark(loaded.device, loaded.dtype).flops_per_s
    return {"regimes": decoding_breakdown.measure_regimes(loaded, None), "peak": peak}


@app.cell(hide_code=True)
def _():
    _g = gpus.get_gpu("H100 SXM")
    _ridge = roofline.ridge_point(_g.peak_flops("bf16")[0], _g.bandwidth)
    _cap = decode_intensity.limit_intensity("mistral-7b-v0.1", 4096)
    _reach = ("stays below" if _cap < _ridge else "reaches")
    mo.md(f"""
    # 03 · Prefill against decode, on the roofline of your own hardware

    **What you will learn**

    1. To measure this device's two roofs — memory bandwidth and peak matmul FLOP/s — and the
       {term("ridge point")} where they meet.
    2. To place measured prefill and decode steps on the {term("roofline")} by their
       {term("arithmetic intensity")}, and to read which roof binds.
    3. Why batching lifts decode's intensity — and why, once every sequence's
       {term("KV cache")} is counted, Mistral 7B's decode at a 4k-token context {_reach} an H100's ridge whatever the
       batch (computed: at most {_cap:,.0f} FLOP/B against {_ridge:,.0f}).
    4. To compare a decode step with its memory-bound floor, and tell the floor from a step's fixed overhead.

    {run_times.header("03")}

    After each measurement, **What you should see** says what this run's numbers show, by a rule from the
    numbers above it, then what a GPU shows, each GPU sentence labelled computed, cited or recorded.

    Generation has two phases. **{term("Prefill")}** runs the whole prompt through the model in one forward
    pass: every weight is read once and used for every prompt token — lots of arithmetic per byte,
    *compute-bound*; its duration is the {term("time to first token", "ttft")}. **{term("Decode")}** then produces one token per
    step, reusing the cached keys and values: every weight (and the cache) is read to produce one
    token per sequence — little arithmetic per byte, *memory-bound*; its duration is the
    {term("inter-token latency", "itl")}.

    The roofline makes that precise. This notebook measures this device's two roofs — memory
    bandwidth and peak matmul FLOP/s — places measured prefill and decode steps under them, and
    compares each decode step with the fastest it could possibly be.
    """)
    return


@app.cell
def _():
    loaded = models.load()
    sizes = sweeps.sizes_for(loaded)
    return loaded, sizes


@app.cell(hide_code=True)
def _():
    roofline_button = replay.run_button()
    mo.vstack([mo.md("""
    ## 1 · This device's two roofs, measured

    - **Bandwidth**: a device-to-device copy of a buffer sized past this machine's own last-level cache
      (`helpers.measure.microbench.default_copy_bytes`: 4× the largest cache the system reports, at least
      256 MiB, the two buffers within a quarter of the free memory; a cache that held the buffer would be
      measured instead of the memory); bytes read + bytes written, divided by the time
      (`helpers.measure.microbench.copy_benchmark`).
    - **Peak FLOP/s**: a square matmul in the model's dtype, 2·n³ FLOPs (`microbench.matmul_benchmark`).

    A roof is the best the device sustains, so each is the best of its repeats (as the STREAM benchmark
    reports); the workloads below are medians. **Run live** measures sections 1 to 4 together — the roofs
    and the prefill and decode steps placed under them come from one run on one machine.
    """), roofline_button])
    return (roofline_button,)


@app.cell(hide_code=True)
def _(loaded):
    _bpp = dtype_bytes(loaded.dtype)
    mo.md(f"""
    **The ridge and the crossover batch, derived.** A computation of F FLOPs that moves B bytes takes at least
    F ÷ peak (the arithmetic) and at least B ÷ bandwidth (the memory); it waits for memory when B ÷ bandwidth is
    the longer, that is when its intensity F ÷ B is below

        ridge = peak FLOP/s ÷ bandwidth (bytes/s)

    A decode step at batch *b* does 2 FLOPs per parameter per sequence and, if the weights were all it read,
    reads each parameter's bytes (*p* of them) once for the whole batch: its intensity is 2·*b* ÷ *p*. It reaches
    the ridge at

        b* = ridge × p ÷ 2

    **Worked example** ({h100['gpu']}, bf16, from the GPU catalog): ridge = {h100['peak_flops'] / 1e12:,.1f}·10¹² ÷
    {h100['bandwidth'] / 1e12:,.2f}·10¹² = **{h100['ridge']:,.0f} FLOP/B**; with p = 2 B, b* = {h100['ridge']:,.0f} × 2 ÷ 2
    = **{h100['crossover_batch']:,.0f}** sequences. This run's model is in {loaded.dtype}: p = {_bpp:g} B.
    """)
    return


@app.cell(hide_code=True)
def _():
    ridge_box = learner.prediction("What ridge will this device measure: its peak matmul FLOP/s ÷ its copy "
                                   "bandwidth?", "FLOP/B")
    ridge_box
    return (ridge_box,)


@app.cell(hide_code=True)
def _(loaded):
    crossover_box = learner.prediction(f"At which batch would a decode step in {loaded.dtype} reach this device's "
                                       "ridge, if the weights were all it read?", "sequences")
    crossover_box
    return (crossover_box,)


@app.cell
def _(loaded, roofline_button, sizes):
    roofline_run = replay.measure("03/roofline", models.run_on, loaded, roofline_sweeps, sizes,
                                  run=roofline_button.value, profile=loaded.profile, device=loaded.device)
    measured_on, measured_sweeps = roofline_run.value
    source = roofline_run.source(measured_on)
    spec, dtype = measured_on.spec, measured_on.dtype
    bandwidth, peak = measured_sweeps["copy"].bandwidth, measured_sweeps["matmul"].flops_per_s
    ridge = roofline.ridge_point(peak, bandwidth)
    crossover = roofline.crossover_batch(peak, bandwidth, dtype_bytes(dtype))
    # the caches of the machine that measured (this one, or the record's): the copy's buffer is held against them
    roofline_cache = roofline_figures.last_cache_of(roofline_run)
    return (
        bandwidth,
        crossover,
        dtype,
        measured_on,
        peak,
        ridge,
        roofline_cache,
        roofline_run,
        source,
        spec,
        measured_sweeps,
    )


@app.cell(hide_code=True)
def _(roofline_run):
    roofline_run.note()
    return


@app.cell
def _(bandwidth, crossover, dtype, peak, ridge, roofline_cache, source, measured_sweeps):
    _copy, _read, _matmul = measured_sweeps["copy"], measured_sweeps["read"], measured_sweeps["matmul"]
    roofs = pd.DataFrame([
        {"what": "memory bandwidth", "measured": f"{bandwidth / 1e9:,.1f} GB/s",
         "how": f"copy of {microbench.copy_size_note(_copy.nbytes, _copy.device, roofline_cache)}, read + write, "
                f"best of {len(_copy.stats.samples)}"},
        {"what": "read-only bandwidth (for comparison)", "measured": f"{_read.bandwidth / 1e9:,.1f} GB/s",
         "how": f"sum of a {_read.nbytes / 2**20:,.0f} MiB fp32 buffer, bytes read, best of {len(_read.stats.samples)}"},
        {"what": f"peak matmul ({dtype})", "measured": f"{peak / 1e12:,.3f} TFLOP/s",
         "how": f"{_matmul.n} × {_matmul.n} matmul, 2·n³ FLOPs, best of {len(_matmul.stats.samples)}"},
        {"what": "ridge point (peak ÷ bandwidth)", "measured": f"{ridge:,.1f} FLOP/B", "how": "computed"},
        {"what": f"crossover decode batch ({dtype})", "measured": f"{crossover:,.0f}",
         "how": f"ridge × {dtype_bytes(dtype):g} B per parameter ÷ 2"},
    ])
    plots.table(roofs, plots.source_label(source))
    return


@app.cell
def _(ridge, ridge_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 10); in marimo, type it in the box above
    learner.beside(ridge_box, _given, ridge, shown=lambda v: f"{v:,.1f} FLOP/B",
        higher="This device's arithmetic is faster beside its memory than you assumed: more FLOPs per byte "
               "before the arithmetic units become the bound.",
        lower="This device's memory keeps up with its arithmetic better than you assumed: fewer FLOPs per "
              "byte already make a computation compute-bound.",
        within="Peak ÷ bandwidth, as derived.")
    return


@app.cell
def _(crossover, crossover_box, dtype):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 20); in marimo, type it in the box above
    learner.beside(crossover_box, _given, crossover, shown=lambda v: f"batch {v:,.1f}",
        higher=f"b* = ridge × {dtype_bytes(dtype):g} B ÷ 2: in {dtype} each parameter's bytes serve more "
               "sequences before the step turns compute-bound.",
        lower=f"b* = ridge × {dtype_bytes(dtype):g} B ÷ 2, with the ridge this device measured above.",
        within="Ridge × bytes per parameter ÷ 2, as derived.")
    return


@app.cell(hide_code=True)
def _(bandwidth, measured_on, measured_sweeps, peak, roofline_cache):
    expected.should_see(
        roofline_figures.roofs_verdicts(bandwidth, measured_sweeps["read"].bandwidth, peak,
                                        measured_sweeps["copy"].nbytes, roofline_cache, h100) + [f"measured on {measured_on.label}"],
        [expected.computed(f"an {h100['gpu']}'s datasheet gives {h100['bandwidth'] / 1e12:,.2f} TB/s and "
                           f"{h100['peak_flops'] / 1e12:,.1f} TFLOP/s (dense bf16): a ridge of {h100['ridge']:,.0f} FLOP/B",
                           "helpers.formulas.roofline.ridge_point on the GPU catalog")])
    return


@app.cell(hide_code=True)
def _(crossover, dtype, ridge):
    mo.md(f"""
    Below **{ridge:,.1f} FLOP per byte** a computation on this device waits for memory; above it, for the
    arithmetic units. **If the weights were all it read**, a decode step in {dtype} (intensity 2·*b* ÷
    {dtype_bytes(dtype):g}) would reach the ridge at **batch {crossover:,.1f}** here — and at batch
    {h100['crossover_batch']:,.0f} on an {h100['gpu']} (ridge {h100['ridge']:,.0f} FLOP/B, from the GPU catalog). But every sequence also reads its own
    KV cache, which the batch does not share. The next section counts it.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 1b · Batching against the KV cache (computed for Mistral 7B on an H100 SXM)

    Decode's intensity against the batch, from the model's config and the GPU catalog
    (`helpers.formulas.decode_intensity`, bytes and FLOPs from `helpers.formulas.stepcost`): dashed, the weights alone;
    solid, with each sequence's cache read at three contexts. Filled markers fit the H100's memory
    (the capacity planner's budget, notebook 04); hollow ones do not.
    """)
    return


@app.cell
def _():
    intensity = decode_intensity.intensity_table("mistral-7b-v0.1", "H100 SXM", contexts=(256, 1024, 4096))
    intensity_summary = decode_intensity.summary(intensity)
    decode_intensity_figures.intensity_figure(intensity, "mistral-7b-v0.1", "bf16")
    return (intensity_summary,)


@app.cell
def _(intensity_summary):
    # Per context: the largest batch that fits, its intensity with the cache, and the cache's limit — the
    # intensity an unlimited batch would tend to (decode_intensity.limit_intensity). The sentences read these.
    plots.table(decode_intensity_figures.summary_frame(intensity_summary),
                "computed from mistral-7b-v0.1 config.json, bf16 · H100 SXM from the GPU catalog")
    return


@app.cell(hide_code=True)
def _(intensity_summary):
    _lines = "\n".join(f"- {decode_intensity.verdict(s)}." for s in intensity_summary)
    _cross = round(h100["crossover_batch"])
    _at = decode_intensity.point("mistral-7b-v0.1", "H100 SXM", context=4096, batch=_cross)
    _never = [s.context for s in intensity_summary if s.limit_with_kv < s.ridge]
    mo.md(f"""
    {_lines}

    Without a cache the weights-only line reaches the ridge at batch {_cross:,}. With it, the intensity levels
    toward FLOPs ÷ KV bytes per sequence as the batch grows{f": at {' and '.join(f'{c:,}' for c in _never)} tokens that limit is under the ridge, so **no batch reaches it**" if _never else ""}.
    At **4,096 tokens** batch {_cross:,} would do {_at.intensity_with_kv:,.1f} FLOP/B — and does not fit
    ({_at.max_batch:,} sequences do, at {intensity_summary[-1].intensity_at_max_batch:,.1f} FLOP/B): decode at an
    everyday context stays memory-bound on an {h100['gpu']}. (Mistral 7B v0.1 slides a 4,096-token window: longer
    contexts read no more cache.) Try your own batch and context below.
    """)
    return


@app.cell(hide_code=True)
def _():
    _contexts = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
    _models = ["mistral-7b-v0.1", "mistral-7b-v0.3", "llama-3.1-8b", "qwen2.5-7b"]
    _gpus = ["L4", "A100 80GB", "H100 SXM", "H200", "B200"]
    roof_model = mo.ui.dropdown(options=_models, value=notebook.env_default("WORKSHOP_ROOF_MODEL", "mistral-7b-v0.1", _models),
                                label="model")
    roof_gpu = mo.ui.dropdown(options=_gpus, value=notebook.env_default("WORKSHOP_ROOF_GPU", "H100 SXM", _gpus), label="GPU")
    roof_context = mo.ui.slider(steps=_contexts, value=notebook.env_default("WORKSHOP_ROOF_CONTEXT", 4096, _contexts),
                                show_value=True, label="context (tokens per sequence)")
    roof_batch = mo.ui.number(start=1, stop=4096, step=1, value=notebook.env_default("WORKSHOP_ROOF_BATCH", 295, range(1, 4097)),
                              label="batch (sequences)")
    mo.vstack([mo.md("**Batch × context on the roofline.** Pick a step; the point sits on the GPU's roof at its "
                     "intensity (computed, `helpers.formulas.decode_intensity.point`):"),
               mo.hstack([roof_model, roof_gpu, roof_batch], justify="start"), roof_context,
               notebook.static_note({"WORKSHOP_ROOF_MODEL": "the model (" + ", ".join(_models) + ")",
                                     "WORKSHOP_ROOF_GPU": "the GPU (" + ", ".join(_gpus) + ")",
                                     "WORKSHOP_ROOF_BATCH": "the batch (1 … 4096)",
                                     "WORKSHOP_ROOF_CONTEXT": "the context (256 … 32768 tokens)"})])
    return roof_batch, roof_context, roof_gpu, roof_model


@app.cell
def _(roof_batch, roof_context, roof_gpu, roof_model):
    roof_point = decode_intensity.point(roof_model.value, roof_gpu.value, context=int(roof_context.value),
                                        batch=int(roof_batch.value or 1))
    decode_intensity_figures.point_figure(roof_point)
    return (roof_point,)


@app.cell(hide_code=True)
def _(roof_point):
    _p = roof_point
    _fit = "fits" if _p.fits else f"does **not** fit (at most {_p.max_batch:,} sequences of {_p.context:,} tokens)"
    _limit = ("above the ridge: a large enough batch turns compute-bound" if _p.limit_with_kv >= _p.ridge else
              "under the ridge: **no batch** turns this step compute-bound")
    mo.md(f"""
    {_p.model}, batch {_p.batch:,} × {_p.context:,} tokens on an {_p.gpu}: **{_p.intensity_with_kv:,.1f} FLOP/B**
    with the cache ({_p.intensity_weights_only:,.1f} if the weights were all it read) against a ridge of
    {_p.ridge:,.0f} — **{_p.bound}-bound**; the batch {_fit}. The cache's limit at this context is
    {_p.limit_with_kv:,.1f} FLOP/B, {_limit}.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 2 · Prefill time against prompt length

    A prefill into a fresh {term("DynamicCache")}, logits for the last position only (as `generate` does);
    median of repeats after a warm-up. Right: the FLOP/s it keeps busy, from the model's FLOPs
    (2 per parameter per token, plus attention) ÷ the measured time.
    """)
    return


@app.cell
def _(dtype, peak, source, spec, measured_sweeps):
    prefill = measured_sweeps["prefill"]
    roofline_figures.prefill_figure(prefill, spec, dtype, peak, source)
    return (prefill,)


@app.cell
def _(prefill, source):
    plots.table(prefill, f"{plots.source_label(source)}; times in seconds")
    return


@app.cell(hide_code=True)
def _(peak, prefill, spec):
    expected.should_see(roofline_figures.prefill_verdicts(prefill, spec, peak), [expected.computed(
        f"with Mistral 7B a {h100['prompt']:,}-token prompt does {h100['prefill_intensity']:,.0f} FLOP per byte, "
        f"{verdicts.factor(h100['prefill_intensity'] / h100['ridge'])} the {h100['gpu']}'s ridge of {h100['ridge']:,.0f}: "
        f"its floor is the arithmetic, {1e3 * h100['prefill_floor_s']:,.1f} ms at the datasheet's peak",
        "helpers.formulas.stepcost.forward_cost on the GPU catalog")])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 3 · Decode step time against context

    A prefill of *c* tokens, then one token per step through the model, each step reusing the cache
    (`helpers.measure.timing.timed_generate`); the median step. The dashed line is the memory-bound floor of a
    step: the bytes it must move ÷ the measured bandwidth — the weights once (of the input embedding only
    the new token's row), the cache read and the new token's K/V written (`helpers.formulas.stepcost`, the same
    bytes notebook 04's planner and `make bench` count).
    """)
    return


@app.cell
def _(bandwidth, dtype, source, spec, measured_sweeps):
    decode = measured_sweeps["decode"]

    def decode_floor(context):
        return stepcost.decode_cost(spec, context, 1, dtype).bytes / bandwidth

    sweep_figures.itl_figure(decode, source, decode_floor)
    return decode, decode_floor


@app.cell
def _(decode, decode_floor, source):
    decode_table = decode.assign(floor_s=[decode_floor(int(c)) for c in decode["context"]])
    plots.table(decode_table, f"{plots.source_label(source)}; step times and floor in seconds")
    return


@app.cell(hide_code=True)
def _(decode, decode_floor):
    _c = sorted(h100["decode_floor_s"])
    expected.should_see(roofline_figures.decode_verdicts(decode, decode_floor) + [
        "a step grows with the context only through the cache it reads (section 5 measures what else it spends)"],
        [expected.computed(
            f"with Mistral 7B the floor is {1e3 * h100['decode_floor_s'][_c[0]]:,.2f} ms at {_c[0]:,} tokens and "
            f"{1e3 * h100['decode_floor_s'][_c[-1]]:,.2f} ms at {_c[-1]:,} on an {h100['gpu']} (datasheet bandwidth); at "
            f"the efficiency of {h100['efficiency']:g} that notebook 04 assumes by default (a step takes floor ÷ "
            f"{h100['efficiency']:g}), {1e3 * h100['decode_at_efficiency_s'][_c[0]]:,.1f} and "
            f"{1e3 * h100['decode_at_efficiency_s'][_c[-1]]:,.1f} ms",
            "helpers.formulas.stepcost.decode_cost on the GPU catalog")])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 4 · Both on the roofline

    Each measured forward pass becomes a point: its FLOPs and bytes from the model's shape
    (`helpers.formulas.stepcost.forward_cost`, its `flops` and `bytes`; weights read once per
    pass, the cache read and written), its time measured. x = FLOPs ÷ bytes (arithmetic intensity), y = FLOPs ÷ seconds. Decode is
    also measured at growing batch: more sequences share each read of the weights.
    """)
    return


@app.cell
def _(bandwidth, decode, dtype, peak, prefill, source, spec, measured_sweeps):
    _batches = measured_sweeps["decode_batches"]
    points = [roofline.prefill_point(spec, int(r.tokens), r.ttft_s, dtype) for r in prefill[~prefill["oom"]].itertuples()]
    points += [roofline.decode_point(spec, int(r.context), r.itl_s, dtype) for r in decode[~decode["oom"]].itertuples()]
    points += [roofline.decode_point(spec, measured_sweeps["batch_context"], r.step_s, dtype, batch=int(r.batch))
               for r in _batches[~_batches["oom"]].itertuples() if r.batch > 1]
    roofline_figures.roofline_figure(peak, bandwidth, points, source, dtype)
    return (points,)


@app.cell
def _(bandwidth, peak, points, source):
    plots.table(roofline_figures.points_frame(points, peak, bandwidth), plots.source_label(source))
    return


@app.cell(hide_code=True)
def _(dtype, points, ridge):
    mo.vstack([mo.md("""
    Each step of decode reads all the weights to produce one token per sequence, while every weight byte a
    prefill reads serves every prompt token; batching shares each read of the weights among the sequences —
    on a model whose cache is small beside its weights, as here (section 1b: a long context stops the climb).
    A point under its roof is losing time to something neither roof counts — the next section measures what.
    """), expected.should_see(roofline_figures.points_verdicts(points, ridge, dtype), [expected.computed(
        f"with Mistral 7B decode at batch 1 does {min(h100['decode_intensity'].values()):,.2f}–"
        f"{max(h100['decode_intensity'].values()):,.2f} FLOP/B and a {h100['prompt']:,}-token prefill "
        f"{h100['prefill_intensity']:,.0f} FLOP/B, against an {h100['gpu']} ridge of {h100['ridge']:,.0f}: the ratio "
        "of FLOPs to bytes depends on the model and its dtype, not the hardware",
        "helpers.formulas.stepcost.forward_cost on the GPU catalog")])])
    return


@app.cell(hide_code=True)
def _():
    _batches = [1, 2, 4, 8, 16, 32, 64, 128]
    live_batch = mo.ui.slider(steps=_batches, value=notebook.env_default("WORKSHOP_LIVE_BATCH", 32, _batches),
                              show_value=True, label="decode batch (sequences)")
    mo.vstack([mo.md("""
    **Try a batch, measured here.** Pick a batch: the loaded model decodes that many sequences of section 4's
    context at once, live (`helpers.measure.sweeps.decode_batch_sweep`: a prefill and nine steps), and the
    step is placed against this device's ridge and roof. The default is the batch the headless run measures.
    """), live_batch, notebook.static_note({"WORKSHOP_LIVE_BATCH": "the batch (1, 2, 4, … 128)"})])
    return (live_batch,)


@app.cell
def _(bandwidth, live_batch, loaded, peak, roofline_run, sizes):
    _b = int(live_batch.value)
    _run = sweeps.decode_batch_sweep(loaded, sizes.efficiency_context, [_b])
    live_point = (None if bool(_run["oom"].iloc[0]) else
                  roofline.decode_point(loaded.spec, sizes.efficiency_context, float(_run["step_s"].iloc[0]),
                                        loaded.dtype, batch=_b))
    mo.md(f"Batch {_b:,} did not fit this device's memory." if live_point is None else
          f"**Measured live**: {roofline_figures.live_batch_verdict(live_point, peak, bandwidth)} "
          f"(against the roofs of section 1{'' if not roofline_run.replayed else ': ' + roofline_run.label + ', not this machine'}).")
    return (live_point,)


@app.cell(hide_code=True)
def _():
    efficiency_button = replay.run_button()
    mo.vstack([mo.md("""
    ## 5 · Decode efficiency: the measured step against its floor

    A decode step that reads its bytes from memory can be no faster than reading them: **floor = (weight bytes +
    KV bytes) ÷ bandwidth** (bytes that stay in a cache between steps can beat it; section 1 held the copy's buffer
    against this machine's cache). *Efficiency* = floor ÷ measured step (100 % = at the floor; notebook 04's planner assumes 50 %
    of the datasheet's bandwidth by default). Measured here for models of different sizes, all with random
    weights (timing does not depend on the values), batch 1, and a **probe**: the loaded model's layer count
    and operations with every width shrunk to 16 numbers (its bytes are the table's first row) — its step time
    is the fixed cost of a step (Python, operator dispatch, kernel launches). Each floor uses the copy bandwidth
    measured just before these steps.
    """), efficiency_button])
    return (efficiency_button,)


@app.cell
def _(efficiency_button, loaded, sizes):
    efficiency_run = replay.measure("03/efficiency", models.run_on, loaded, efficiency_measured, sizes,
                                    run=efficiency_button.value, profile=loaded.profile, device=loaded.device)
    efficiency_on, efficiency_result = efficiency_run.value
    efficiency = efficiency_result["table"]
    efficiency_source = (f"measured: {', '.join(efficiency['model'])} · {efficiency_on.dtype} · {efficiency_on.device} · "
                         f"profile {efficiency_on.profile}" if not efficiency_run.replayed else
                         efficiency_run.source(efficiency_on))
    roofline_figures.efficiency_figure(efficiency, efficiency_source)
    return efficiency, efficiency_result, efficiency_run, efficiency_source


@app.cell(hide_code=True)
def _(efficiency_run):
    efficiency_run.note()
    return


@app.cell
def _(efficiency, efficiency_source):
    plots.table(efficiency, plots.source_label(efficiency_source))
    return


@app.cell
def _(efficiency):
    # What the floor and the probe explain of the smallest and the largest model's step (roofline.step_shares):
    # the shares the sentences below read.
    _real = efficiency[efficiency["model"] != "probe"].sort_values("weight_bytes_read")
    _probe = efficiency[efficiency["model"] == "probe"]
    probe_s = float(_probe["step_s"].iloc[0]) if len(_probe) else None
    explained = {r["model"]: roofline.step_shares(r["step_s"], r["floor_s"], probe_s) for r in (_real.iloc[0], _real.iloc[-1])}
    roofline_figures.explained_frame(explained)
    return explained, probe_s


@app.cell(hide_code=True)
def _(efficiency, efficiency_on, efficiency_result, explained, probe_s):
    _real = efficiency[efficiency["model"] != "probe"].sort_values("weight_bytes_read")
    _small, _big = _real.iloc[0], _real.iloc[-1]
    _s, _b = explained[_small["model"]], explained[_big["model"]]
    _bw, _read = efficiency_result["bandwidth"], efficiency_result["read_bandwidth"]
    _cost = stepcost.decode_cost(efficiency_on.spec, 128, 1, efficiency_on.dtype)
    _probe_text = (f" The probe's step alone takes **{fmt_seconds(probe_s)}**: a fixed toll per step, paid whatever "
                   "the model's size." if probe_s else "")
    mo.md(f"""
    **{_small['model']}** reads {_small['weight_bytes_read'] / 1e6:,.1f} MB per step: its floor is
    **{fmt_seconds(_small['floor_s'])}** and a step takes **{fmt_seconds(_small['step_s'])}** —
    {100 * _small['efficiency']:,.1f} % efficiency: {roofline_figures.step_words(_s)}.
    **{_big['model']}** reads {_big['weight_bytes_read'] / 1e6:,.0f} MB per step: floor
    {fmt_seconds(_big['floor_s'])}, step {fmt_seconds(_big['step_s'])}, **{100 * _big['efficiency']:,.1f} %** —
    {roofline_figures.step_words(_b)}.{_probe_text}

    **What the floor and the probe explain, and what they don't.** The floor counts bytes at the copy's
    bandwidth; the probe counts the fixed cost of a step's small operations per layer —
    matrix–vector products, norms, rotary embeddings, attention over the cache — each dispatched from
    Python (the interpreter, operator dispatch, waking threads on a CPU, launching a kernel on a GPU).
    Neither counts kernels that stream memory below the copy's speed: a matrix–vector product over the
    {efficiency_on.spec.hidden_size}-wide rows of the loaded model can end before it reaches full bandwidth.
    Here {roofline_figures.closer_verdict(_small['model'], _small['efficiency'], _big['model'], _big['efficiency'])}.
    (The floor uses the copy's bandwidth, bytes read + written; {roofline_figures.read_share_verdict(_cost)} (the
    loaded model at 128 tokens), and reading alone this device streams {_read / 1e9:,.1f} GB/s against the copy's
    {_bw / 1e9:,.1f} GB/s — a floor {_bw / _read:,.2f}× as long, if read-only were the roof.) This is why serving
    engines batch, fuse kernels and capture {term("CUDA graphs")} — and why the tiny model's timings are no guide to a 7B model's.
    """)
    return


@app.cell(hide_code=True)
def _(efficiency, efficiency_run):
    from helpers.measure.local_models import TINY_CONFIG as _TINY

    _tiny_floor = stepcost.decode_cost(_TINY, 128, 1, "bf16").bytes / h100["bandwidth"]
    _mistral = stepcost.decode_cost("mistral-7b-v0.1", 128, 1, "bf16").bytes / h100["bandwidth"]
    expected.should_see(roofline_figures.efficiency_verdicts(efficiency, roofline_figures.last_cache_of(efficiency_run)), [
        expected.computed(f"the tiny model's floor on an {h100['gpu']} would be {fmt_seconds(_tiny_floor)} and Mistral "
                          f"7B's {fmt_seconds(_mistral)} at 128 tokens ({verdicts.factor(_mistral / _tiny_floor)} the "
                          "bytes): the same fixed cost per step weighs that many times less against the larger floor",
                          "helpers.formulas.stepcost.decode_cost on the GPU catalog"),
        *expected.eager_against_floor(),
        expected.computed(f"notebook 04's planner assumes an efficiency of {h100['efficiency']:g} of the datasheet by default",
                          "helpers.capacity.planner.DEFAULT_EFFICIENCY")])
    return


@app.cell(hide_code=True)
def _():
    regimes_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 6 · Decode at the roof: two regimes, five implementations

    Section 5 split a step into its memory floor and its fixed cost (the sentence below says which was the
    larger here). The same question is asked of two models side by side on a CPU — **tiny** (46 MB read per step) and **small** (the `small`
    profile: 175 M parameters, 567 MB read per step in fp32) — and on a GPU of the active model:

    - **five ways to decode** the same {term("greedy", "greedy-decoding")} tokens (`helpers.decoding.impls`): the bare
      loop over a {term("DynamicCache")}; Hugging Face's `generate`; the bare loop with every weight **prepacked for
      {term("oneDNN")}** (CPU only: `nn.Linear` on a CPU calls {term("MKL")}, whose fp32 matrix–vector product uses one
      core; oneDNN reads a weight it reordered once with every core — what CPU inference stacks do); a
      **{term("static cache")}** (K/V buffers preallocated, shapes fixed); the static cache with the step compiled
      by **{term("torch.compile", "torchcompile")}** (on a CUDA GPU with CUDA graphs, `mode="reduce-overhead"`: the whole step
      replayed by one launch; on a CPU over the packed weights, the operators between the products
      fused and the Python around them gone). Each is placed on the roofline and against its floor; their tokens are
      checked to be identical;
    - **the kernels' own roof**: the matrix–vector product alone, over a stack of weights the size of the
      copy's buffer (`helpers.measure.microbench.gemv_benchmark`), for each kernel — how much of the memory's
      bandwidth the kernel itself can use, before any loop is built on it;
    - **where one step's time goes**: the fastest loop's step under {term("torch.profiler", "torchprofiler")}, split into weight
      matmuls, attention, other operators and the time in no operator at all (Python, dispatch).

    The capacity planner's step against a measured one is notebook 04's (its section "Prediction against
    measurement").

    Each model's floor uses the copy bandwidth measured **alongside its own steps** (before each round of
    implementations and after the last, the best sample), not section 1's: a machine shared with other
    work changes its bandwidth from minute to minute, and floor and steps must see the same memory.

    On a CPU, `torch.compile` takes longer to compile than this notebook's budget on two cores; it is
    skipped unless `WORKSHOP_COMPILE=1` (`make bench` measures it and records its compile time, with
    the step it gives). The static cache alone changes only where K/V live — the same operators run,
    launched the same way, and attention reads the empty slots too (masked); what it buys is fixed shapes
    and addresses from step to step, the condition for compiling the step once and, on a GPU, recording it
    as a CUDA graph.
    """), regimes_button])
    return (regimes_button,)


@app.cell
def _(loaded, regimes_button):
    regimes_run = replay.measure("03/regimes", regimes_measured, loaded, run=regimes_button.value, long=True,
                                 profile=loaded.profile, device=loaded.device)
    regimes = regimes_run.value["regimes"]
    regimes_cache = roofline_figures.last_cache_of(regimes_run)
    decoding_views.roofline_figure(regimes, regimes_run.value["peak"], dtype=regimes[0].dtype)
    return regimes, regimes_cache, regimes_run


@app.cell(hide_code=True)
def _(explained):
    mo.md("Section 5 measured: " + "; ".join(str(roofline_figures.fixed_cost_verdict(_m, _e)) for _m, _e in explained.items())
          + ".")
    return


@app.cell(hide_code=True)
def _(regimes_run):
    regimes_run.note()
    return


@app.cell
def _(regimes, regimes_run):
    plots.table(decoding_views.implementations_frame(regimes),
                regimes_run.source("measured: " + "; ".join(r.label for r in regimes)))
    return


@app.cell(hide_code=True)
def _(regimes, regimes_cache):
    _here = [decoding_views.regimes_verdict(regimes)] if len(regimes) > 1 else []
    _here += [v for r in regimes for v in decoding_views.implementation_verdicts(r, regimes_cache)]
    mo.vstack([mo.md("\n".join(decoding_views.implementations_summary(r, regimes_cache) for r in regimes) + """

    The static cache alone reads a whole preallocated buffer and, without compilation, runs the same operators
    as the dynamic one; packing changes the matrix–vector kernel, so the kernels' own roofs decide what it buys.
    A machine shared with other work shows noisier figures.
    """), expected.should_see(_here, [*expected.eager_against_floor(), expected.computed(
        "no packed loop on a GPU: prepacking for oneDNN is a CPU path (cuBLAS reads the weights as they are)",
        "helpers.decoding.packed.available")])])
    return


@app.cell
def _(regimes):
    decoding_views.breakdown_figure(regimes)
    return


@app.cell
def _(regimes, regimes_run):
    plots.table(decoding_views.breakdown_frame(regimes),
                regimes_run.source("measured: " + "; ".join(r.label for r in regimes)))
    return


@app.cell
def _(regimes):
    # If Python cost nothing: the last model's step without the time outside operators, against its floor.
    _b = regimes[-1].breakdown
    without_python = None if _b is None else {
        "model": regimes[-1].name, "parts without 'outside operators' (ms)": 1e3 * (_b.parts_sum_s - _b.parts.outside_operators_s),
        "floor (ms)": 1e3 * _b.floor_s, "floor ÷ step, measured": _b.memory_share,
        "floor ÷ step, without Python": _b.floor_s / (_b.parts_sum_s - _b.parts.outside_operators_s)}
    pd.DataFrame([without_python]).round(3) if without_python else mo.md("No breakdown was measured.")
    return (without_python,)


@app.cell(hide_code=True)
def _(regimes, regimes_cache, without_python):
    _py = ("" if without_python is None else
           f"\n\n**If Python cost nothing** (the table above): {without_python['model']} would reach at best "
           f"{100 * without_python['floor ÷ step, without Python']:,.0f} % of its floor instead of "
           f"{100 * without_python['floor ÷ step, measured']:,.0f} %. What is left beyond the floor sits inside operators: "
           "matmuls short of the copy bandwidth, the small operators between them. Compilation fuses those; CUDA graphs "
           "remove the launches (try `WORKSHOP_COMPILE=1` on a CPU).")
    _here = [v for r in regimes for v in decoding_views.breakdown_verdicts(r, regimes_cache)]
    mo.vstack([mo.md("**Where the step goes.**\n\n" + "\n".join(decoding_views.breakdown_summary(r, regimes_cache)
                                                                for r in regimes) + _py),
               expected.should_see(_here, expected.eager_against_floor()[1:])])
    return


@app.cell(hide_code=True)
def _(
    bandwidth,
    crossover,
    efficiency,
    efficiency_run,
    loaded,
    peak,
    ridge,
    roofline_run,
):
    # This run beside a recorded one (helpers.present.recorded): the key figures side by side, then the record's figures.
    # Only figures measured here are noted for the run's report; replayed ones are the record's, not this run's.
    _own = efficiency[efficiency["model"].str.endswith("(loaded)")]
    _live = {"profile": loaded.profile, "device": loaded.device, "bandwidth (GB/s)": bandwidth / 1e9,
             "peak matmul (TFLOP/s)": peak / 1e12, "ridge (FLOP/B)": ridge, "crossover batch": crossover,
             "decode efficiency (loaded model)": float(_own["efficiency"].iloc[0]) if len(_own) else None}
    _here = not (roofline_run.replayed or efficiency_run.replayed)
    if _here:
        recorded.note_figures("03_prefill_decode_roofline", _live)
    recorded.beside_live("03_prefill_decode_roofline", _live if _here else None)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Exercises

    Try each before opening its solution.
    """)
    return


@app.cell
def _():
    _g = gpus.get_gpu("A100 80GB")
    _peak = _g.peak_flops("bf16")[0]
    _ridge, _b = roofline.ridge_point(_peak, _g.bandwidth), roofline.crossover_batch(_peak, _g.bandwidth, 2)
    _b8 = roofline.crossover_batch(_peak, _g.bandwidth, 1)
    _rows = "\n".join(
        f"| {name} | {g.bandwidth / 1e12:,.2f} TB/s | {g.peak_flops('bf16')[0] / 1e12:,.0f} TFLOP/s | "
        f"{roofline.ridge_point(g.peak_flops('bf16')[0], g.bandwidth):,.0f} FLOP/B | "
        f"{roofline.crossover_batch(g.peak_flops('bf16')[0], g.bandwidth, 2):,.0f} |"
        for name, g in ((n, gpus.get_gpu(n)) for n in ("L4", "A100 80GB", "H100 SXM", "H200", "B200")))
    _low = min(gpus.catalog(), key=lambda g: roofline.ridge_point(g.peak_flops("bf16")[0], g.bandwidth))
    _p = decode_intensity.point("llama-3.1-8b", _g.name, context=1024, batch=round(_b))
    notebook.exercise(1, f"The crossover batch, by hand. An {_g.name} reads {_g.bandwidth / 1e12:,.2f} TB/s and does "
                      f"{_peak / 1e12:,.0f} TFLOP/s in dense bf16 (the GPU catalog). (a) Its ridge? (b) The batch at which "
                      "a bf16 decode step of Llama 3.1 8B reaches it if the weights were all it read — and with int8 "
                      "weights (1 B each)? (c) With a 1,024-token KV cache per sequence, is that batch compute-bound?", f"""
    (a) ridge = {_peak / 1e12:,.0f}·10¹² ÷ {_g.bandwidth / 1e12:,.2f}·10¹² = **{_ridge:,.0f} FLOP/B**
    (`helpers.formulas.roofline.ridge_point`).

    (b) b* = ridge × p ÷ 2: bf16 (p = 2 B) **{_b:,.0f}** sequences; int8 (p = 1 B) **{_b8:,.0f}**
    (`roofline.crossover_batch`): fewer bytes per weight, fewer sequences to share them.

    (c) `decode_intensity.point("llama-3.1-8b", "{_g.name}", context=1024, batch={round(_b)})`: **{_p.intensity_with_kv:,.1f}
    FLOP/B** with the cache ({_p.intensity_weights_only:,.1f} with the weights alone) against the ridge of
    {_p.ridge:,.0f} — **{_p.bound}-bound**, and the batch {"fits" if _p.fits else f"does not fit (at most {_p.max_batch:,})"}.
    Each sequence's own cache is read whatever the batch, so the intensity with it stays below the weights-only line.

    The same for other GPUs of `helpers/data/gpus.csv` (dense bf16; `python -m helpers gpus`, or pick one in
    section 1b's control):

    | GPU | bandwidth | peak | ridge | weights-only crossover batch (bf16) |
    | --- | --- | --- | --- | --- |
    {_rows}

    Lowest ridge of the whole catalog: **{_low.name}**, {roofline.ridge_point(_low.peak_flops('bf16')[0], _low.bandwidth):,.0f}
    FLOP/B: decode there turns compute-bound at the smallest batch — if the cache did not hold the intensity down.
    """)
    return


@app.cell
def _():
    _d = decode_intensity.intensity_table("llama-3.1-8b", "H100 SXM", contexts=(1024, 8192, 32768))
    _lines = "\n".join(f"- {decode_intensity.verdict(s)}" for s in decode_intensity.summary(_d))
    notebook.exercise(2, "A model without a sliding window. Does Llama 3.1 8B (128k context, no window) reach "
                    "the ridge at long contexts? Pick it in section 1b's control, or use "
                    "`helpers.formulas.decode_intensity.intensity_table`.", f"""
    ```python
    from helpers.formulas import decode_intensity
    d = decode_intensity.intensity_table("llama-3.1-8b", "H100 SXM", contexts=(1024, 8192, 32768))
    [decode_intensity.verdict(s) for s in decode_intensity.summary(d)]
    ```

    {_lines}

    The longer the context, the more each sequence reads of its own cache and the fewer sequences fit:
    the intensity falls, and decode moves further from the ridge.
    """)
    return


@app.cell
def _():
    _c = stepcost.decode_cost("mistral-7b-v0.1", 4096, 1, "bf16")
    notebook.exercise(3, "One floor everywhere. Run `python -m helpers capacity --model mistral-7b-v0.1 --gpu \"H100 SXM\" "
                    "--context 4096 --batch 1 --efficiency 1 --json` and compare `step_bytes_per_gpu` with the "
                    "bytes this notebook's floor counts. Why do they agree?", f"""
    Both come from `helpers.formulas.stepcost.decode_cost`: {_c.weight_bytes:,} B of weights (every weight but the
    input embedding table) + {_c.embedding_bytes:,} B (the new token's row of it) + {_c.kv_read_bytes:,} B of
    cache read + {_c.kv_write_bytes:,} B written = **{_c.bytes:,} B**. At {h100['bandwidth'] / 1e12:,.2f} TB/s that is
    {1e3 * _c.bytes / h100['bandwidth']:,.3f} ms — the planner's `step_floor_ms`. The planner's `step_ms` divides it by
    the efficiency (`--efficiency`, 0.5 by default: half the datasheet's bandwidth), the share of the datasheet an
    engine reaches.
    """)
    return


@app.cell(hide_code=True)
def _(crossover, dtype, regimes, ridge):
    from helpers.decoding.impls import IMPLEMENTATIONS as _IMPLS

    check_questions = [
        learner.Question("What ridge did this run measure for this device (peak matmul ÷ copy bandwidth)?", ridge, "FLOP/B"),
        learner.Question(f"At which batch would a decode step in {dtype} reach that ridge, if the weights were all it "
                         "read?", crossover, "sequences"),
        learner.Question(f"Which implementation decoded {regimes[-1].name} fastest in section 6?", regimes[-1].best.impl,
                         options=tuple(_IMPLS)),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "a replayed section gives its record's")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _(explained, intensity_summary, regimes):
    _s = intensity_summary[-1]
    _fixed = "; ".join(str(roofline_figures.fixed_cost_verdict(_m, _e)) for _m, _e in explained.items())
    _spread = [f"{r.name} from {100 * min(i.efficiency for i in r.results):,.1f} % ({min(r.results, key=lambda i: i.efficiency).impl}) "
               f"to {100 * r.best.efficiency:,.1f} % ({r.best.impl})" for r in regimes]
    _fast = expected.eager_against_floor()
    mo.md(f"""
    ## Takeaways

    - Prefill is compute-bound: every weight read serves every prompt token. Decode at batch 1 does 2 FLOPs per
      parameter per byte of it — 1 FLOP/B in bf16 — on any device: memory-bound, and its floor is bytes ÷ bandwidth.
    - Batching shares the weights, not the caches. Without a cache decode would reach an {h100['gpu']}'s ridge at
      batch {h100['crossover_batch']:,.0f}; with Mistral 7B's cache at {_s.context:,} tokens the largest batch that fits
      reaches {_s.intensity_at_max_batch:,.1f} FLOP/B, {100 * _s.share_of_ridge:,.0f} % of the ridge, and no batch gets
      past {_s.limit_with_kv:,.1f}.
    - A decode step has two costs: the bytes it must read (weights + KV cache, ÷ bandwidth) and a fixed cost per step
      (operators, Python, launches). Here: {_fixed}.
    - The implementation sets how close a model gets to its floor; the same greedy tokens came out of each, here
      {"; ".join(_spread)}. On a GPU, {_fast[0].text} ({_fast[0].source}: {_fast[0].where}).
    - One model of a step's bytes (`helpers.formulas.stepcost`) gives this notebook's floor, notebook 04's planner and
      `make bench` the same numbers — a floor, not a forecast: it holds where the step waits for memory, and says
      nothing about the fixed cost.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
