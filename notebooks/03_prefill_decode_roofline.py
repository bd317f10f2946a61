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

    from helpers.formulas import decode_intensity, gpus, roofline, stepcost
    from helpers.present import (decode_intensity_figures, expected, notebook, plots, recorded, replay,
                                 roofline_figures, sweep_figures)
    from helpers.measure import decode_efficiency, microbench, models, sweeps
    from helpers.decoding import regimes as decoding_regimes
    from helpers.decoding import views as decoding_views
    from helpers.present.glossary import term
    from helpers.formulas.units import dtype_bytes, fmt_seconds
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()
    h100 = expected.on_gpu("H100 SXM")


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
    for the planner's check."""
    peak = microbench.matmul_benchmark(loaded.device, loaded.dtype).flops_per_s
    return {"regimes": decoding_regimes.measure_regimes(loaded, None, peak), "peak": peak}


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 03 · Prefill against decode, on the roofline of your own hardware

    **What you will learn**

    1. To measure this device's two roofs — memory bandwidth and peak matmul FLOP/s — and the
       {term("ridge point")} where they meet.
    2. To place measured prefill and decode steps on the {term("roofline")} by their
       {term("arithmetic intensity")}, and to read which roof binds.
    3. Why batching lifts decode's intensity — and why, once every sequence's
       {term("KV cache")} is counted, decode at a 4k-token context never reaches an H100's ridge, whatever the batch.
    4. To compare a decode step with its memory-bound floor, and tell the floor from a step's fixed overhead.

    {run_times.header("03")}

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

    - **Bandwidth**: a device-to-device copy of a buffer far larger than the caches; bytes read +
      bytes written, divided by the time (`helpers.measure.microbench.measure_bandwidth`).
    - **Peak FLOP/s**: a square matmul in the model's dtype, 2·n³ FLOPs (`microbench.measure_peak_flops`).

    A roof is the best the device sustains, so each is the best of its repeats (as the STREAM benchmark
    reports); the workloads below are medians. **Run live** measures sections 1 to 4 together — the roofs
    and the prefill and decode steps placed under them come from one run on one machine.
    """), roofline_button])
    return (roofline_button,)


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
    return (
        bandwidth,
        crossover,
        dtype,
        measured_on,
        peak,
        ridge,
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
def _(bandwidth, crossover, dtype, peak, ridge, source, measured_sweeps):
    _copy, _read, _matmul = measured_sweeps["copy"], measured_sweeps["read"], measured_sweeps["matmul"]
    roofs = pd.DataFrame([
        {"what": "memory bandwidth", "measured": f"{bandwidth / 1e9:,.1f} GB/s",
         "how": f"copy of {_copy.nbytes / 2**20:,.0f} MiB, read + write, best of {len(_copy.stats.samples)}"},
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


@app.cell(hide_code=True)
def _(bandwidth, measured_on, peak, ridge):
    mo.md(f"""
    **What you should see.** On a CPU (tiny profile) a ridge of a few FLOP per byte: this run measured
    {bandwidth / 1e9:,.1f} GB/s and {peak / 1e12:,.3f} TFLOP/s, a ridge of {ridge:,.1f} FLOP/B ({measured_on.label}); a CPU
    shared with other work measures less. On a GPU with Mistral 7B: an {h100['gpu']}'s datasheet gives
    {h100['bandwidth'] / 1e12:,.2f} TB/s and {h100['peak_flops'] / 1e12:,.1f} TFLOP/s (dense bf16), a ridge of
    {h100['ridge']:,.0f} FLOP/B; expect the measured roofs below the datasheet's, and the measured ridge with them.
    """)
    return


@app.cell(hide_code=True)
def _(crossover, dtype, ridge):
    mo.md(f"""
    Below **{ridge:,.1f} FLOP per byte** a computation on this device waits for memory; above it, for the
    arithmetic units. A decode step of batch *B* does 2 FLOPs per parameter per sequence and reads each
    parameter's {dtype} bytes once for the whole batch, so **if the weights were all it read** its
    intensity would be about 2·*B* ÷ bytes per parameter, reaching the ridge at **batch ≈ {crossover:,.0f}**
    here — and at batch ≈ {h100['crossover_batch']:,.0f} on an {h100['gpu']} (ridge
    {h100['ridge']:,.0f} FLOP/B, from the GPU catalog). But every sequence also reads its own
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
    _lines = "\n".join(f"- {decode_intensity_figures.verdict(s)}." for s in intensity_summary)
    _cross = round(h100["crossover_batch"])
    _at = decode_intensity.point("mistral-7b-v0.1", "H100 SXM", context=4096, batch=_cross)
    _never = [s.context for s in intensity_summary if s.limit_with_kv < s.ridge]
    mo.md(f"""
    {_lines}

    Without a cache the weights-only line reaches the ridge at batch {_cross:,}. With it, the intensity levels
    off near FLOPs ÷ KV bytes per sequence, whatever the batch{f": at {' and '.join(f'{c:,}' for c in _never)} tokens that limit is under the ridge, so **no batch reaches it**" if _never else ""}.
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
    mo.md("""
    ## 2 · Prefill time against prompt length

    A prefill into a fresh `DynamicCache`, logits for the last position only (as `generate` does);
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
    _ok = prefill[~prefill["oom"]]
    _share = [stepcost.forward_cost(spec, int(r.tokens)).flops / r.ttft_s / peak for r in _ok.itertuples()]
    _best = max(_share) if _share else float("nan")
    _a, _z = _ok.iloc[0], _ok.iloc[-1]
    _nt, _tt = _z["tokens"] / _a["tokens"], _z["ttft_s"] / _a["ttft_s"]
    mo.md(f"""
    **What you should see.** Prefill time grows with the prompt: here from {fmt_seconds(_a['ttft_s'])} for
    {int(_a['tokens']):,} tokens to {fmt_seconds(_z['ttft_s'])} for {int(_z['tokens']):,} — {_nt:,.0f}× the tokens,
    {_tt:,.0f}× the time, {"less than in proportion: longer prompts keep the arithmetic units busier" if _tt < _nt else "more than in proportion: attention's cost grows with the square of the prompt"}.
    The best prefill reaches **{100 * _best:,.0f} %** of the measured matmul peak. On a GPU with Mistral 7B, a {h100['prompt']:,}-token
    prompt does {h100['prefill_intensity']:,.0f} FLOP per byte — past the {h100['gpu']}'s ridge of
    {h100['ridge']:,.0f} — so its floor is the arithmetic: {1e3 * h100['prefill_floor_s']:,.1f} ms at the datasheet's peak.
    """)
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
    _ok = decode[~decode["oom"]]
    _ratio = [r.itl_s / decode_floor(int(r.context)) for r in _ok.itertuples()]
    _lo, _hi = (min(_ratio), max(_ratio)) if _ratio else (float("nan"), float("nan"))
    _c = sorted(h100["decode_floor_s"])
    _a, _z = _ok.iloc[0], _ok.iloc[-1]
    mo.md(f"""
    **What you should see.** A decode step grows with the context only through the cache it reads: here
    from {1e3 * _a['itl_s']:,.2f} ms at {int(_a['context']):,} tokens to {1e3 * _z['itl_s']:,.2f} ms at
    {int(_z['context']):,}, each step **{_lo:,.1f}–{_hi:,.1f}×** its floor (section 5 measures what the rest is). On a GPU with
    Mistral 7B the floor is {1e3 * h100['decode_floor_s'][_c[0]]:,.2f} ms at {_c[0]:,} tokens and
    {1e3 * h100['decode_floor_s'][_c[-1]]:,.2f} ms at {_c[-1]:,} on an {h100['gpu']} (datasheet bandwidth); at the
    efficiency of {h100['efficiency']:g} that notebook 04 assumes by default (a step takes floor ÷ 0.5: half the
    datasheet's bandwidth is reached), {1e3 * h100['decode_at_efficiency_s'][_c[0]]:,.1f} and
    {1e3 * h100['decode_at_efficiency_s'][_c[-1]]:,.1f} ms.
    """)
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
def _(points, ridge):
    _pre = [p for p in points if p.kind == "prefill"]
    _dec = [p for p in points if p.kind == "decode"]
    _bat = [p for p in points if p.kind == "decode, batched"]
    _bat_text = (f" At batch {_bat[-1].label.split('batch ')[-1]} decode's intensity is {_bat[-1].intensity:,.1f} FLOP/B: "
                 "batching is how decode climbs toward the ridge — on a model whose cache is small beside its "
                 "weights, as here (section 1b: a long context stops the climb)." if _bat else "")
    mo.md("Too few points ran (out of memory) to compare prefill and decode here." if not (_pre and _dec) else f"""
    Prefill's intensity grows with the prompt, from {_pre[0].intensity:,.0f} to {_pre[-1].intensity:,.0f} FLOP/B
    (every weight byte serves every prompt token); decode at batch 1 stays near
    {_dec[0].intensity:,.2f}–{_dec[-1].intensity:,.2f} FLOP/B, {ridge / _dec[-1].intensity:,.0f}× left of the ridge at
    {ridge:,.1f} FLOP/B: each step reads all the weights to produce one token per sequence.{_bat_text} A point
    under its roof is losing time to something neither roof counts — the next section measures what.

    **What you should see.** Prefill points right of decode's, climbing with the prompt; decode at batch 1
    near 2 FLOPs per parameter ÷ its bytes — 1 FLOP/B in bf16, 0.5 in fp32 — on any device (the ratio
    of FLOPs to bytes depends on the model and its dtype, not the hardware); batched decode further right. On a GPU with Mistral 7B: decode at batch 1 does
    {min(h100['decode_intensity'].values()):,.2f}–{max(h100['decode_intensity'].values()):,.2f} FLOP/B, a
    {h100['prompt']:,}-token prefill {h100['prefill_intensity']:,.0f} FLOP/B, against an {h100['gpu']} ridge of
    {h100['ridge']:,.0f}.
    """)
    return


@app.cell(hide_code=True)
def _():
    efficiency_button = replay.run_button()
    mo.vstack([mo.md("""
    ## 5 · Decode efficiency: the measured step against its floor

    No decode step can be faster than reading what it must read: **floor = (weight bytes + KV bytes) ÷
    bandwidth**. *Efficiency* = floor ÷ measured step (100 % = at the floor; notebook 04's planner assumes 50 %
    of the datasheet's bandwidth by default). Measured here for models of different sizes, all with random
    weights (timing does not depend on the values), batch 1, and a **probe**: the loaded model's layer count
    and operations with every width shrunk until its bytes are negligible — its step time is the fixed cost
    of a step (Python, operator dispatch, kernel launches) and nothing else. Each floor uses the copy bandwidth
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
def _(efficiency, efficiency_result, explained, probe_s):
    _real = efficiency[efficiency["model"] != "probe"].sort_values("weight_bytes_read")
    _small, _big = _real.iloc[0], _real.iloc[-1]
    _s, _b = explained[_small["model"]], explained[_big["model"]]
    _closer = _big["efficiency"] > _small["efficiency"]
    _bw, _read = efficiency_result["bandwidth"], efficiency_result["read_bandwidth"]
    _probe_text = (f" The probe's step alone takes **{fmt_seconds(probe_s)}**: a fixed toll per step, paid whatever "
                   "the model's size." if probe_s else "")
    mo.md(f"""
    **{_small['model']}** reads {_small['weight_bytes_read'] / 1e6:,.1f} MB per step: its floor is
    **{fmt_seconds(_small['floor_s'])}** but a step takes **{fmt_seconds(_small['step_s'])}** —
    {100 * _small['efficiency']:,.1f} % efficiency: {roofline_figures.step_words(_s)}.
    **{_big['model']}** reads {_big['weight_bytes_read'] / 1e6:,.0f} MB per step: floor
    {fmt_seconds(_big['floor_s'])}, step {fmt_seconds(_big['step_s'])}, **{100 * _big['efficiency']:,.1f} %** —
    {roofline_figures.step_words(_b)}.{_probe_text}

    **What the floor and the probe explain, and what they don't.** The floor counts bytes at the copy's
    bandwidth; the probe counts the fixed cost of a step's few dozen small operations per layer —
    matrix–vector products, norms, rotary embeddings, attention over the cache — each dispatched from
    Python (the interpreter, operator dispatch, waking threads on a CPU, launching a kernel on a GPU).
    Neither counts kernels that stream memory below the copy's speed: a matrix–vector product on a
    matrix of a few hundred rows is over before it reaches full bandwidth. Here the larger model is
    {"closer to" if _closer else "no closer to"} its floor than the smaller one
    ({100 * _big['efficiency']:,.1f} % against {100 * _small['efficiency']:,.1f} %){": the bytes take over as the matrices grow" if _closer else ""}.
    (The floor uses the copy's bandwidth, bytes read + written; a decode step mostly reads, and reading
    alone this device streams {_read / 1e9:,.1f} GB/s against the copy's {_bw / 1e9:,.1f} GB/s — a floor
    {_bw / _read:,.2f}× as long, if read-only were the roof.) This is why serving engines
    batch, fuse kernels and capture CUDA graphs — and why the tiny model's timings say little about a
    7B model's.
    """)
    return


@app.cell(hide_code=True)
def _(efficiency):
    from helpers.measure.local_models import TINY_CONFIG as _TINY

    _tiny_floor = stepcost.decode_cost(_TINY, 128, 1, "bf16").bytes / h100["bandwidth"]
    _mistral = stepcost.decode_cost("mistral-7b-v0.1", 128, 1, "bf16").bytes / h100["bandwidth"]
    _c = sorted(h100["decode_floor_s"])[0]
    _real = efficiency[efficiency["model"] != "probe"]
    mo.md(f"""
    **What you should see.** On a CPU (tiny profile): efficiencies well under 100 % — here
    {", ".join(f"{r.model} {100 * r.efficiency:,.1f} %" for r in _real.itertuples())}. On a GPU with Mistral
    7B: the tiny model's floor on an {h100['gpu']} would be {fmt_seconds(_tiny_floor)}, so there it measures
    the fixed cost of a step and little else, while Mistral 7B reads {_mistral / _tiny_floor:,.0f}× the bytes
    (floor {fmt_seconds(h100['decode_floor_s'][_c])} at {_c:,} tokens) and the same fixed cost weighs
    {_mistral / _tiny_floor:,.0f}× less against it; notebook 04's planner assumes an efficiency of
    {h100['efficiency']:g} of the datasheet by default.
    """)
    return


@app.cell(hide_code=True)
def _():
    regimes_button = replay.run_button()
    mo.vstack([mo.md("""
    ## 6 · Decode at the roof: two regimes, five implementations, the planner's check

    Section 5 showed that a small model's step is mostly fixed cost. Here the same question is asked
    of two models side by side on a CPU — **tiny** (46 MB read per step) and **small** (the `small`
    profile: 175 M parameters, 567 MB read per step in fp32) — and on a GPU of the active model:

    - **five ways to decode** the same greedy tokens (`helpers.decoding.impls`): the bare loop over a
      `DynamicCache`; Hugging Face's `generate`; the bare loop with every weight **prepacked for oneDNN**
      (CPU only: `nn.Linear` on a CPU calls MKL, whose fp32 matrix–vector product uses one core;
      oneDNN reads a weight it reordered once with every core — what CPU inference stacks do); a
      **static cache** (K/V buffers preallocated, shapes fixed); the static cache with the step compiled
      by **`torch.compile`** (on a CUDA GPU with CUDA graphs, `mode="reduce-overhead"`: the whole step
      replayed by one launch; on a CPU over the packed weights, the operators between the products
      fused and the Python around them gone). Each is placed on the roofline and against its floor; their tokens are
      checked to be identical;
    - **the kernels' own roof**: the matrix–vector product alone, over a stack of weights bigger than
      the caches (`helpers.measure.microbench.gemv_benchmark`), for each kernel — how much of the memory's
      bandwidth the kernel itself can use, before any loop is built on it;
    - **where one step's time goes**: the fastest loop's step under `torch.profiler`, split into weight
      matmuls, attention, other operators and the time in no operator at all (Python, dispatch);
    - **the planner's check**: `helpers.capacity.plan` for this device (its measured bandwidth and
      peak) against the fastest measured step.

    Each model's floor uses the copy bandwidth measured **alongside its own steps** (before each round of
    implementations and after the last, the best sample), not section 1's: a machine shared with other
    work can change its bandwidth by half within minutes, and floor and steps must see the same memory.

    On a CPU, `torch.compile` takes longer to compile than this notebook's one-minute budget; it is
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
    decoding_views.roofline_figure(regimes, regimes_run.value["peak"], dtype=regimes[0].dtype)
    return regimes, regimes_run


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
def _(regimes):
    mo.md("\n".join(decoding_views.implementations_summary(r) for r in regimes) + """

    **What you should see.** On a CPU (tiny and small, fp32): the tiny model far below its floor and the
    small one much closer to it; **packed** much faster than the bare loop on the small model (the
    table gives this run's factor), because the kernel roofs differ — on a 2-core machine `nn.Linear`'s
    kernel reads at well under the copy's bandwidth, oneDNN's close to it (the sentences above give this
    run's fractions); `generate` a few milliseconds behind the bare loop; the static cache no faster
    than the dynamic one (it reads a whole preallocated buffer, and without compilation nothing else
    changes). A goal of 85 % of the floor sits at or above the fastest kernel's own ceiling there,
    which leaves no room for the step's other operators. A machine shared with other work
    shows lower, noisier figures. On a GPU (Mistral 7B, bf16): no packed loop (cuBLAS reads the weights
    as they are); the eager loop and the static cache far below the floor — hundreds of kernel launches
    per step, each waiting on Python — and the compiled static cache with CUDA graphs much closer
    (gpt-fast reports 69 % of an A100's datasheet bandwidth; not yet measured here).
    """)
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
def _(regimes, without_python):
    _py = ("" if without_python is None else
           f"\n\n**If Python cost nothing** (the table above): {without_python['model']} would reach at best "
           f"{100 * without_python['floor ÷ step, without Python']:,.0f} % of its floor instead of "
           f"{100 * without_python['floor ÷ step, measured']:,.0f} %. What is left beyond the floor sits inside operators: "
           "matmuls short of the copy bandwidth, the small operators between them. Compilation fuses those; CUDA graphs "
           "remove the launches (try `WORKSHOP_COMPILE=1` on a CPU).")
    mo.md("**Where the step goes.**\n\n" + "\n".join(decoding_views.breakdown_summary(r) for r in regimes) + _py + """

    **What you should see.** On a CPU: the tiny model's step dominated by the parts that do not read
    weights — operators on vectors of a few hundred numbers and the Python around them — the small
    model's by its weight matmuls, with the memory floor most of their length, and those matmuls
    reading at close to the packed kernel's roof (the last sentence of each bullet gives the rate). On a GPU (eager loop):
    the device idle for most of the step (*outside operators*: it waits for Python to launch the next
    kernel) — which is what CUDA graphs remove.
    """)
    return


@app.cell
def _(regimes, regimes_run):
    plots.table(decoding_views.planner_frame(regimes),
                regimes_run.source("measured: " + "; ".join(r.label for r in regimes)))
    return


@app.cell(hide_code=True)
def _(regimes):
    mo.md("**The planner against this device.** " + " ".join(r.planner.sentence for r in regimes) + """

    **What you should see.** On a CPU: the small model above the band but far closer to it than the
    tiny one (the sentence above says which part of the step is beyond the floor, and when the kernel's
    own roof alone rules the band out); the tiny one well above it — the
    planner counts bytes, the tiny step is mostly fixed cost. On a GPU:
    the eager loop several times the planner's step, the compiled one within the band.
    """)
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
    _rows = "\n".join(
        f"| {name} | {g.bandwidth / 1e12:,.2f} TB/s | {g.peak_flops('bf16')[0] / 1e12:,.0f} TFLOP/s | "
        f"{roofline.ridge_point(g.peak_flops('bf16')[0], g.bandwidth):,.0f} FLOP/B | "
        f"{roofline.crossover_batch(g.peak_flops('bf16')[0], g.bandwidth, 2):,.0f} |"
        for name, g in ((n, gpus.get_gpu(n)) for n in ("L4", "A100 80GB", "H100 SXM", "H200", "B200")))
    _low = min(gpus.catalog(), key=lambda g: roofline.ridge_point(g.peak_flops("bf16")[0], g.bandwidth))
    notebook.exercise(1, "The ridge of other GPUs. Which catalogued GPU has the lowest ridge, and what does "
                    "that mean for decode? (`python -m helpers gpus`; then pick it in the control of section 1b)", f"""
    The ridge is peak ÷ bandwidth, from `helpers/data/gpus.csv` (dense bf16):

    | GPU | bandwidth | peak | ridge | weights-only crossover batch (bf16) |
    | --- | --- | --- | --- | --- |
    {_rows}

    Lowest of the whole catalog: **{_low.name}**, {roofline.ridge_point(_low.peak_flops('bf16')[0], _low.bandwidth):,.0f}
    FLOP/B. A lower ridge means decode turns compute-bound at a smaller batch — if the cache did not
    hold the intensity down (section 1b). The {h100['gpu']} is the reference used above.
    """)
    return


@app.cell
def _():
    _d = decode_intensity.intensity_table("llama-3.1-8b", "H100 SXM", contexts=(1024, 8192, 32768))
    _lines = "\n".join(f"- {decode_intensity_figures.verdict(s)}" for s in decode_intensity.summary(_d))
    notebook.exercise(2, "A model without a sliding window. Does Llama 3.1 8B (128k context, no window) reach "
                    "the ridge at long contexts? Pick it in section 1b's control, or use "
                    "`helpers.formulas.decode_intensity.intensity_table`.", f"""
    ```python
    from helpers.formulas import decode_intensity
    from helpers.present import decode_intensity_figures
    d = decode_intensity.intensity_table("llama-3.1-8b", "H100 SXM", contexts=(1024, 8192, 32768))
    [decode_intensity_figures.verdict(s) for s in decode_intensity.summary(d)]
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
def _(efficiency, intensity_summary):
    _s = intensity_summary[-1]
    _eff = ", ".join(f"{100 * r.efficiency:,.1f} % for {r.model}" for r in efficiency[efficiency["model"] != "probe"].itertuples())
    mo.md(f"""
    ## Takeaways

    - Prefill is compute-bound: every weight read serves every prompt token. Decode at batch 1 does
      about one FLOP per byte in bf16, on any device: it is memory-bound, and its floor is bytes ÷ bandwidth.
    - Batching shares the weights, not the caches. Without a cache decode would cross an {h100['gpu']}'s
      ridge near batch {h100['crossover_batch']:,.0f}; with Mistral 7B's cache at {_s.context:,} tokens the
      largest batch that fits reaches {_s.intensity_at_max_batch:,.1f} FLOP/B, {100 * _s.share_of_ridge:,.0f} % of the
      ridge, and no batch gets past {_s.limit_with_kv:,.1f}.
    - A decode step has two costs: the bytes it must read (weights + KV cache, ÷ bandwidth) and a fixed cost
      per step (operators, Python, launches) — here the floor explains {_eff} of the step. Small models live in
      the second regime, large ones in the first.
    - The implementation decides which regime a large model ends up in: the same greedy tokens come out of
      each, at very different distances from the floor. On a GPU it takes a static cache *and* CUDA graphs
      to get near the roof; the profiler turns "overhead" into named parts that add up to the measured step.
    - One model of a step's bytes (`helpers.formulas.stepcost`) gives this notebook's floor, notebook 04's planner
      and `make bench` the same numbers — a floor, not a forecast: it holds where the step waits for
      memory, and says nothing about the fixed cost.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
