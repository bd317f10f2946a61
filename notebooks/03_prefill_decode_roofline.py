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

    from helpers.formulas import decode_intensity, gpus, regime, roofline, stepcost
    from helpers.present import (expected, learner, notebook, plots, recorded, replay, roofline_figures,
                                 sweep_figures)
    from helpers.measure import microbench, models, sweeps
    from helpers.measure.local_models import TINY_CONFIG
    from helpers.decoding import regimes as decoding_regimes
    from helpers.decoding import views as decoding_views
    from helpers.present.glossary import term
    from helpers.formulas.units import dtype_bytes
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()
    #: computed once, the same on every machine (tests/test_roofline_03.py pins each)
    h100 = roofline.gpu_roofline("H100 SXM", expected.REFERENCE_MODEL)      # ridge, crossover batch, floors
    prefill_ridge = roofline.prefill_ridge_tokens(expected.REFERENCE_MODEL, "H100 SXM")   # prompt at the ridge
    fixed_weight = roofline.fixed_cost_weight(TINY_CONFIG, expected.REFERENCE_MODEL)      # bytes ÷ layers ratio


@app.function
def roofline_sweeps(loaded, sizes) -> dict:
    """Sections 1–4 measured in one run, so the roofs and the steps placed under them come from the same
    machine at the same time: the read (the floor's), copy (for comparison) and matmul benchmarks
    (helpers.measure.microbench), prefill against prompt length, decode against context and decode against
    batch (helpers.measure.sweeps)."""
    return {"copy": microbench.copy_benchmark(loaded.device), "read": microbench.read_benchmark(loaded.device),
            "matmul": microbench.matmul_benchmark(loaded.device, loaded.dtype),
            "prefill": sweeps.ttft_sweep(loaded, sizes.ttft_tokens, sizes.ttft_repeats),
            "decode": sweeps.itl_sweep(loaded, sizes.itl_contexts, sizes.itl_steps),
            "decode_batches": sweeps.decode_batch_sweep(loaded, sizes.efficiency_context, sizes.decode_batches),
            "batch_context": sizes.efficiency_context}


@app.function
def efficiency_measured(loaded, sizes) -> dict:
    """Section 5: the decode step of models of several sizes and of the fixed-cost probe
    (decoding_regimes.efficiency_table), and the read bandwidth measured just before them: a shared machine's
    bandwidth drifts, and floor and steps must see the same memory."""
    read = microbench.read_benchmark(loaded.device)
    table = decoding_regimes.efficiency_table(sizes.efficiency_sizes, loaded.device, loaded.dtype, read.bandwidth,
                                             sizes.efficiency_context, extra=[loaded])
    return {"table": table, "read_bandwidth": read.bandwidth}


@app.function
def regimes_measured(loaded) -> dict:
    """Section 6: each model (tiny and small on a CPU, the active model on a GPU) decoded every way
    (helpers.decoding.regimes), its floor at the read bandwidth measured alongside its own steps; the matmul
    peak for the roofline's compute roof."""
    peak = microbench.matmul_benchmark(loaded.device, loaded.dtype).flops_per_s
    return {"regimes": decoding_regimes.measure_regimes(loaded), "peak": peak}


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 03 · Prefill against decode, on the roofline of your own hardware

    **What you will learn**

    1. To measure this device's two roofs — read bandwidth and peak matmul FLOP/s — and their {term("ridge point")}.
    2. To place prefill and decode steps on the {term("roofline")} by their {term("arithmetic intensity")}.
    3. Why batching lifts decode's intensity, and why each sequence's {term("KV cache")} holds it down.
    4. To tell a decode step's memory floor from its fixed cost.

    {run_times.header("03")}

    **Three regimes** ("Making Deep Learning Go Brrrr") bound every step:

    - **overhead**: Python, dispatch, kernel launches — a fixed cost per step. The tiny model on a CPU.
    - **bandwidth**: bytes read ÷ the memory's read rate. Mistral 7B decoding one sequence on a GPU.
    - **compute**: FLOPs ÷ peak FLOP/s. A long prefill.

    The roofline draws the last two as roofs; overhead shows as a point under both.
    {term("Prefill")} makes the first token ({term("time to first token", "ttft")}); {term("decode")} one token
    per step ({term("inter-token latency", "itl")}).
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

    - **Read bandwidth**: the sum of a buffer past the last-level cache, bytes read ÷ time. A decode step's
      floor is bytes read ÷ this rate.
    - **Copy bandwidth**, for comparison: bytes read + written ÷ time (STREAM's convention).
    - **Peak FLOP/s**: a square matmul in the model's dtype, 2·n³ FLOPs.

    Each roof is the best of its repeats. **Run live** measures sections 1 to 4.
    """), roofline_button])
    return (roofline_button,)


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **The ridge and the crossover batch.** F FLOPs reading B bytes take at least F ÷ peak and at least
    B ÷ bandwidth; they wait for memory when the intensity F ÷ B is below

        ridge = peak FLOP/s ÷ read bandwidth (bytes/s)

    A decode step at batch *b* does 2 FLOPs per parameter per sequence and, counting the weights alone, reads
    each parameter's *p* bytes once: intensity 2·*b* ÷ *p*, at the ridge when b* = ridge × *p* ÷ 2.

    **Worked example** ({h100['gpu']}, dense bf16, GPU catalog): ridge = {h100['peak_flops'] / 1e12:,.1f}·10¹² ÷
    {h100['bandwidth'] / 1e12:,.2f}·10¹² = **{h100['ridge']:,.0f} FLOP/B**; with p = 2 B, b* = **{h100['crossover_batch']:,.0f}**.
    """)
    return


@app.cell(hide_code=True)
def _():
    ridge_box = learner.prediction("What ridge will this device measure: its peak matmul FLOP/s ÷ its read "
                                   "bandwidth?", "FLOP/B")
    ridge_box
    return (ridge_box,)


@app.cell(hide_code=True)
def _():
    crossover_box = learner.prediction("At which batch would a decode step in this run's dtype reach this "
                                       "device's ridge, if the weights were all it read?", "sequences")
    crossover_box
    return (crossover_box,)


@app.cell
def _(loaded, roofline_button, sizes):
    roofline_run = replay.measure("03/roofline", models.run_on, loaded, roofline_sweeps, sizes,
                                  run=roofline_button.value, profile=loaded.profile, device=loaded.device)
    measured_on, measured_sweeps = roofline_run.value
    source = roofline_run.source(measured_on)
    spec, dtype = measured_on.spec, measured_on.dtype
    bandwidth, peak = measured_sweeps["read"].bandwidth, measured_sweeps["matmul"].flops_per_s
    ridge = roofline.ridge_point(peak, bandwidth)
    crossover = roofline.crossover_batch(peak, bandwidth, dtype_bytes(dtype))
    return (bandwidth, crossover, dtype, measured_on, measured_sweeps, peak, ridge, roofline_run, source, spec)


@app.cell(hide_code=True)
def _(roofline_run):
    roofline_run.note()
    return


@app.cell
def _(measured_sweeps, roofline_run, source):
    plots.table(roofline_figures.roofs_frame(measured_sweeps["read"], measured_sweeps["copy"], measured_sweeps["matmul"],
                                             h100, roofline_figures.last_cache_of(roofline_run)),
                f"{plots.source_label(source)}; {h100['gpu']}: computed from the GPU catalog (datasheet)")
    return


@app.cell
def _(ridge, ridge_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 10); in marimo, type it in the box above
    learner.beside(ridge_box, _given, ridge, shown=lambda v: f"{v:,.1f} FLOP/B",
        higher="This device's arithmetic is faster beside its memory than you assumed: more FLOPs per byte "
               "before the arithmetic units bound a step.",
        lower="This device's memory keeps up with its arithmetic better than you assumed: fewer FLOPs per "
              "byte already make a step compute-bound.",
        within="Peak ÷ read bandwidth, as derived.")
    return


@app.cell
def _(crossover, crossover_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 20); in marimo, type it in the box above
    learner.beside(crossover_box, _given, crossover, shown=lambda v: f"batch {v:,.1f}",
        higher="b* = ridge × bytes per parameter ÷ 2: the more bytes each parameter takes, the more sequences "
               "share them before the step turns compute-bound.",
        lower="b* = ridge × bytes per parameter ÷ 2, with the ridge measured above.",
        within="Ridge × bytes per parameter ÷ 2, as derived.")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** This device's roofs beside an {h100['gpu']}'s.
    - **Read against copy**: different traffic; only the read rate bounds a step that reads.
    - **Buffer ÷ last-level cache above 1**: the benchmark read memory. **At** or **below**: partly the cache,
      and a model that stays in that cache can beat the floor.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 1b · Batching against the KV cache (computed for Mistral 7B on an H100 SXM)

    Decode's intensity against the batch: dashed, the weights alone; solid, with each sequence's cache at three
    contexts. Filled markers fit the H100's memory; hollow ones do not.
    """)
    return


@app.cell
def _():
    intensity = decode_intensity.intensity_table("mistral-7b-v0.1", "H100 SXM", contexts=(256, 1024, 4096))
    intensity_summary = decode_intensity.summary(intensity)
    roofline_figures.intensity_figure(intensity, "mistral-7b-v0.1", "bf16")
    return (intensity_summary,)


@app.cell
def _(intensity_summary):
    plots.table(roofline_figures.summary_frame(intensity_summary),
                "computed from mistral-7b-v0.1 config.json, bf16 · H100 SXM from the GPU catalog")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **How to read it.** The weights are read once per step whatever the batch; each sequence's cache for that
    sequence alone. So the intensity levels off toward FLOPs ÷ KV bytes per sequence (the *cache's limit*).
    **limit ÷ ridge below 1**: no batch makes this decode compute-bound at that context. **Above 1**: a large
    enough batch crosses the ridge, if it fits. (Mistral 7B v0.1 slides a 4,096-token window.)
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
    mo.vstack([roofline_figures.point_figure(roof_point),
               plots.table(roofline_figures.point_frame(roof_point),
                           f"computed from {roof_point.model} config.json, bf16 · {roof_point.gpu} from the GPU catalog")])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 2 · Prefill time against prompt length

    A prefill into a fresh {term("DynamicCache")}, logits for the last position only (as `generate` does); the
    median of repeats. Right: the model's FLOPs ÷ the measured time.
    """)
    return


@app.cell
def _(dtype, peak, source, spec, measured_sweeps):
    prefill = measured_sweeps["prefill"]
    roofline_figures.prefill_figure(prefill, spec, dtype, peak, source)
    return (prefill,)


@app.cell
def _(bandwidth, dtype, peak, prefill, source, spec):
    plots.table(roofline_figures.prefill_frame(prefill, spec, dtype, peak, bandwidth),
                f"{plots.source_label(source)}; times in seconds; ridge = peak ÷ read bandwidth of section 1")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** A prefill of *n* tokens reads each weight once for 2·*n* FLOPs: its intensity
    grows with *n*.
    - **intensity ÷ ridge below 1** (short prompts): memory-bound too; added tokens hide under the weights' read.
    - **above 1**: compute-bound; time grows with *n*, and **achieved ÷ peak** is the share of the matmul
      peak the whole model keeps busy.
    - **achieved ÷ peak below 1 at every length, intensity above the ridge**: the overhead regime.

    *On a GPU* (computed): Mistral 7B in bf16 reaches the {h100['gpu']}'s ridge at a **{prefill_ridge:,}-token**
    prompt (activations not counted).
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 3 · Decode step time against context

    A prefill of *c* tokens, then one token per step; the median step. Dashed: the step's memory floor, bytes
    read ÷ read bandwidth — the weights once, the cache and the new token's K/V (`helpers.formulas.stepcost`,
    the bytes notebook 04's planner counts).
    """)
    return


@app.cell
def _(bandwidth, dtype, source, spec, measured_sweeps):
    decode = measured_sweeps["decode"]

    def decode_floor(context):
        return regime.ratio(stepcost.decode_cost(spec, context, 1, dtype).bytes, bandwidth)

    sweep_figures.itl_figure(decode, source, decode_floor)
    return decode, decode_floor


@app.cell
def _(decode, decode_floor, source):
    plots.table(roofline_figures.decode_frame(decode, decode_floor),
                f"{plots.source_label(source)}; step and floor in seconds")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** **step ÷ floor** per context:
    - **above** (> 1.1): the step pays for more than its bytes — overhead; a flat line over a rising floor.
    - **at**: reading the bytes is all the step does — bandwidth.
    - **below**: the bytes came from a cache. Compare the model's size with section 1's last-level cache.

    *On a GPU* (computed): Mistral 7B's floor on an {h100['gpu']} is {1e3 * h100['decode_floor_s'][512]:,.2f} ms at
    512 tokens and {1e3 * h100['decode_floor_s'][4096]:,.2f} ms at 4,096.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 4 · Both on the roofline

    Each measured forward pass becomes a point: x = FLOPs ÷ bytes (from the model's shape), y = FLOPs ÷
    seconds. Decode is also measured at growing batch.
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
def _():
    mo.md("""
    **What you should see.** Each region is one regime:
    - **left of the ridge, on the slanted roof** (achieved ÷ roof at 1): bandwidth — decode, short prefills.
    - **right of the ridge, at the flat roof**: compute — long prefills; batching moves decode right.
    - **under the roof** (achieved ÷ roof below 1): overhead — time neither roof counts (sections 5, 6).
    - **above the roof**: the bytes came from a cache, faster than the read rate.

    Decode at batch 1 does 2 FLOPs per parameter: 1 FLOP/B in bf16, 0.5 in fp32, on any device.
    """)
    return


@app.cell(hide_code=True)
def _():
    _batches = [1, 2, 4, 8, 16, 32, 64, 128]
    live_batch = mo.ui.slider(steps=_batches, value=notebook.env_default("WORKSHOP_LIVE_BATCH", 32, _batches),
                              show_value=True, label="decode batch (sequences)")
    mo.vstack([mo.md("""
    **Try a batch, measured here.** The loaded model decodes that many sequences at once, live, against the
    roofs of section 1.
    """), live_batch, notebook.static_note({"WORKSHOP_LIVE_BATCH": "the batch (1, 2, 4, … 128)"})])
    return (live_batch,)


@app.cell
def _(bandwidth, live_batch, loaded, peak, roofline_run, sizes):
    _b = int(live_batch.value)
    _run = sweeps.decode_batch_sweep(loaded, sizes.efficiency_context, [_b])
    _oom = bool(_run["oom"].iloc[0])
    _point = [] if _oom else [roofline.decode_point(loaded.spec, sizes.efficiency_context, float(_run["step_s"].iloc[0]),
                                                    loaded.dtype, batch=_b)]
    mo.md(f"Batch {_b:,} did not fit this device's memory.") if _oom else plots.table(
        roofline_figures.points_frame(_point, peak, bandwidth),
        f"measured live: {loaded.label}; roofs of section 1" + (f" ({roofline_run.label})" if roofline_run.replayed else ""))
    return


@app.cell(hide_code=True)
def _():
    efficiency_button = replay.run_button()
    mo.vstack([mo.md("""
    ## 5 · Decode efficiency: the measured step against its floor

    Models of different sizes with random weights, batch 1, and a **probe**: the loaded model's layers and
    operations with every width shrunk to 16 numbers, so its step is the fixed cost of a step.
    """), efficiency_button])
    return (efficiency_button,)


@app.cell
def _(efficiency_button, loaded, sizes):
    efficiency_run = replay.measure("03/efficiency", models.run_on, loaded, efficiency_measured, sizes,
                                    run=efficiency_button.value, profile=loaded.profile, device=loaded.device)
    efficiency_on, _result = efficiency_run.value
    efficiency = roofline_figures.efficiency_frame(_result["table"], _result["read_bandwidth"])
    efficiency_source = efficiency_run.source(f"measured: {efficiency_on.dtype} · {efficiency_on.device} · "
                                              f"profile {efficiency_on.profile}")
    roofline_figures.efficiency_figure(efficiency, efficiency_source)
    return efficiency, efficiency_run, efficiency_source


@app.cell(hide_code=True)
def _(efficiency_run):
    efficiency_run.note()
    return


@app.cell
def _(efficiency, efficiency_source):
    plots.table(efficiency, f"{plots.source_label(efficiency_source)}; bytes, seconds; floor at the read bandwidth")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** A step costs its bytes (the floor) plus a fixed cost (the probe).
    - **above, probe ÷ step at 1**: the overhead regime — the fixed cost is the step.
    - **above, probe ÷ step under ½**: kernels read below the benchmark's rate (narrow matrices, attention).
    - **at**: the bandwidth regime, where a 7B model on a GPU belongs.
    - **below**: the weights stayed in a cache between steps (compare `step_bytes` with the last-level cache).

    The fixed cost grows with the layer count, not the bytes. *Computed*: Mistral 7B reads
    {fixed_weight['bytes_ratio']:,.0f}× the tiny model's bytes with {fixed_weight['layers_ratio']:g}× its layers: the same
    cost per layer weighs **{fixed_weight['per_byte_ratio']:,.0f}×** less against its floor. Engines fuse kernels and capture {term("CUDA graphs")} to remove it.
    """)
    return


@app.cell(hide_code=True)
def _():
    regimes_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 6 · Decode against its floor, four ways

    The same {term("greedy", "greedy-decoding")} tokens four ways: the loop over a {term("DynamicCache")}
    (**eager**); **generate**; a **{term("static cache")}** (K/V preallocated, shapes fixed); and the static cache
    compiled by **{term("torch.compile", "torchcompile")}** (on a GPU with CUDA graphs; on a CPU only with
    `WORKSHOP_COMPILE=1`).
    """), regimes_button])
    return (regimes_button,)


@app.cell
def _(loaded, regimes_button):
    regimes_run = replay.measure("03/regimes", regimes_measured, loaded, run=regimes_button.value, long=True,
                                 profile=loaded.profile, device=loaded.device)
    regimes = regimes_run.value["regimes"]
    decoding_views.roofline_figure(regimes, regimes_run.value["peak"], dtype=regimes[0].dtype if regimes else "")
    return regimes, regimes_run


@app.cell(hide_code=True)
def _(regimes_run):
    regimes_run.note()
    return


@app.cell
def _(regimes, regimes_run):
    plots.table(decoding_views.implementations_frame(regimes), regimes_run.source(decoding_views.source(regimes)))
    return


@app.cell(hide_code=True)
def _():
    _eager = expected.published("gpt_fast_eager_tokens_per_s").value
    _fast = expected.published("gpt_fast_compiled_tokens_per_s").value
    _bw = expected.published("gpt_fast_compiled_bandwidth_bytes_per_s").value
    _a100 = gpus.get_gpu("A100 80GB").bandwidth
    mo.md(f"""
    **What you should see.** **step ÷ floor** down each model's rows.
    - **eager and generate above**: the overhead regime; `generate` adds a general loop's bookkeeping.
    - **static as eager**: the same operators run; it buys fixed shapes, the condition for a CUDA graph.
    - **static+compile lower**: the launches and the Python between them are gone.

    *On a GPU* (cited, gpt-fast): Llama-2-7B, batch 1, A100-80GB: the eager loop decodes {_eager:g} tokens/s;
    static cache + torch.compile with CUDA graphs {_fast:g} tokens/s at {_bw / 1e9:,.0f} GB/s, {_bw / _a100:.0%} of the
    datasheet's {_a100 / 1e9:,.0f} GB/s — from the overhead regime to the bandwidth one.
    """)
    return


@app.cell(hide_code=True)
def _(bandwidth, crossover, efficiency, efficiency_run, loaded, peak, ridge, roofline_run):
    # This run beside a recorded one (helpers.present.recorded): the key figures side by side, then the record's
    # figures. Only figures measured here are noted for the run's report; replayed ones are the record's.
    _own = efficiency[efficiency["model"].str.endswith("(loaded)")]
    _live = {"profile": loaded.profile, "device": loaded.device, "bandwidth (GB/s)": bandwidth / 1e9,
             "peak matmul (TFLOP/s)": peak / 1e12, "ridge (FLOP/B)": ridge, "crossover batch": crossover,
             "decode efficiency (loaded model)": regime.ratio(1, float(_own["step ÷ floor"].iloc[0])) if len(_own) else None}
    _here = not (roofline_run.replayed or efficiency_run.replayed)
    if _here:
        recorded.note_figures("03_prefill_decode_roofline", _live)
    mo.Html(recorded.beside_live_html("03_prefill_decode_roofline", _live if _here else None))
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Exercises
    """)
    return


@app.cell
def _():
    _g = gpus.get_gpu("A100 80GB")
    _peak = _g.peak_flops("bf16")[0]
    _ridge, _b = roofline.ridge_point(_peak, _g.bandwidth), roofline.crossover_batch(_peak, _g.bandwidth, 2)
    _b8 = roofline.crossover_batch(_peak, _g.bandwidth, 1)
    _p = decode_intensity.point("llama-3.1-8b", _g.name, context=1024, batch=round(_b))
    _rows = pd.DataFrame([{"GPU": n, "bandwidth (TB/s)": g.bandwidth / 1e12, "dense bf16 (TFLOP/s)": g.peak_flops("bf16")[0] / 1e12,
                           "ridge (FLOP/B)": roofline.ridge_point(g.peak_flops("bf16")[0], g.bandwidth),
                           "crossover batch (bf16)": roofline.crossover_batch(g.peak_flops("bf16")[0], g.bandwidth, 2)}
                          for n, g in ((n, gpus.get_gpu(n)) for n in ("L4", "A100 80GB", "H100 SXM", "H200", "B200"))])
    notebook.exercise(1, f"The crossover batch, by hand. An {_g.name} reads {_g.bandwidth / 1e12:,.2f} TB/s and does "
                      f"{_peak / 1e12:,.0f} TFLOP/s in dense bf16 (the GPU catalog). (a) Its ridge? (b) The batch at which "
                      "a bf16 decode step of Llama 3.1 8B reaches it if the weights were all it read — and with int8 "
                      "weights (1 B each)? (c) With a 1,024-token KV cache per sequence, where is that batch against the ridge?", f"""
    (a) ridge = {_peak / 1e12:,.0f}·10¹² ÷ {_g.bandwidth / 1e12:,.2f}·10¹² = **{_ridge:,.0f} FLOP/B**.

    (b) b* = ridge × p ÷ 2: bf16 (p = 2 B) **{_b:,.0f}** sequences; int8 (p = 1 B) **{_b8:,.0f}**
    (`roofline.crossover_batch`): fewer bytes per weight, fewer sequences to share them.

    (c) `decode_intensity.point("llama-3.1-8b", "{_g.name}", context=1024, batch={round(_b)})`: **{_p.intensity_with_kv:,.1f}
    FLOP/B** with the cache ({_p.intensity_weights_only:,.1f} with the weights alone) against {_p.ridge:,.0f}; at most
    {_p.max_batch:,} sequences fit. Each sequence's cache is read whatever the batch.

    {_rows.round(1).to_html(index=False, border=0).replace(chr(10), "")}
    """)
    return


@app.cell
def _():
    _d = decode_intensity.intensity_table("llama-3.1-8b", "H100 SXM", contexts=(1024, 8192, 32768))
    _t = roofline_figures.summary_frame(decode_intensity.summary(_d))
    notebook.exercise(2, "A model without a sliding window. Does Llama 3.1 8B (128k context, no window) reach "
                    "the ridge at long contexts? Pick it in section 1b's control, or use "
                    "`helpers.formulas.decode_intensity.intensity_table`.", f"""
    ```python
    from helpers.formulas import decode_intensity
    from helpers.present import roofline_figures
    d = decode_intensity.intensity_table("llama-3.1-8b", "H100 SXM", contexts=(1024, 8192, 32768))
    roofline_figures.summary_frame(decode_intensity.summary(d))
    ```

    {_t.round(2).to_html(index=False, border=0).replace(chr(10), "")}

    The longer the context, the more each sequence reads of its own cache and the fewer sequences fit: the
    cache's limit falls, and decode moves further from the ridge.
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
    {1e3 * _c.bytes / h100['bandwidth']:,.3f} ms — the planner's `step_floor_ms`. Its `step_ms` divides it by the
    efficiency (`--efficiency`, 0.5 by default), the share of the datasheet's bandwidth an engine reaches.
    """)
    return


@app.cell(hide_code=True)
def _(crossover, dtype, regimes, ridge):
    _eager = next((r for r in regimes[0].results if r.impl == "eager"), None) if regimes else None
    _label = regime.against(_eager.step_s, _eager.floor_s)[1] if _eager else regime.NONE
    check_questions = [
        learner.Question("What ridge did this run measure for this device (peak matmul ÷ read bandwidth)?", ridge, "FLOP/B"),
        learner.Question(f"At which batch would a decode step in {dtype} reach that ridge, if the weights were all it "
                         "read?", crossover, "sequences"),
        learner.Question("Section 6: is the first model's eager step below, at or above its floor?", _label,
                         options=regime.LABELS),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "a replayed section gives its record's")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## Takeaways

    - Three regimes bound a step: overhead, bandwidth (bytes ÷ read rate), compute (FLOPs ÷ peak).
    - Prefill is compute-bound only past the ridge: Mistral 7B in bf16 on an {h100['gpu']} from about
      {prefill_ridge:,} tokens. Decode at batch 1 does 1 FLOP/B in bf16: memory-bound on any device.
    - Batching shares the weights, not the caches: each sequence's cache caps how far it lifts decode.
    - A fixed cost grows with the layers, the floor with the bytes; compilation and CUDA graphs remove it.
    - One byte count (`helpers.formulas.stepcost`) gives this floor and notebook 04's planner.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


@app.cell(hide_code=True)
def _():
    expected.sources("gpt_fast_eager_tokens_per_s", "gpt_fast_compiled_tokens_per_s",
                     more=("Horace He, Making Deep Learning Go Brrrr From First Principles (2022) — "
                           "<https://horace.io/brrr_intro.html>",
                           "Williams, Waterman & Patterson, Roofline: an insightful visual performance model "
                           "(CACM 52(4), 2009)",
                           "NVIDIA H100 Tensor Core GPU datasheet (SXM: 3.35 TB/s, 989.5 TFLOP/s dense bf16), "
                           "via helpers/data/gpus.csv",
                           "J. McCalpin, STREAM: sustainable memory bandwidth (1995) — <https://www.cs.virginia.edu/stream/>"))
    return


if __name__ == "__main__":
    app.run()
