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

    from helpers import capacity, notebook
    from helpers.capacity import measured as capacity_measured, views as capacity_views
    from helpers.memory import KV_DTYPES, WEIGHT_SCHEMES
    from helpers.specs import PRESETS, get_spec

    notebook.setup()
    return KV_DTYPES, PRESETS, WEIGHT_SCHEMES, capacity, capacity_measured, capacity_views, get_spec, mo


@app.cell
def _(mo):
    mo.md("""
    # 04 · Capacity and cost planner

    Which GPU serves a model most cheaply? First fix what you care about most: a **latency SLO**
    per output token (premium chat: about 10 ms) or a **minimum batch** (batch jobs, agents).
    Then the planner fits the model on every catalogued GPU — weights, the runtime's reserve and
    the KV cache for that context — picks the largest batch that meets the constraint, and ranks
    the GPUs by **dollars per million output tokens**.

    Every number is a floor computed by `helpers.capacity` from the model's `config.json` and the
    GPU catalog in `helpers/data/gpus.csv` (memory, bandwidth, dense FLOP/s and a dated price, each
    with its source): a decode step cannot be faster than reading the weights and the cache once,
    `bytes ÷ bandwidth`, nor than its arithmetic, `FLOPs ÷ peak`. The same numbers come from the
    command line: `python -m helpers capacity --model mistral-7b-v0.1 --gpu all --context 4096 --slo-ms 10`.
    """)
    return


@app.cell
def _(KV_DTYPES, PRESETS, WEIGHT_SCHEMES, mo):
    model_choice = mo.ui.dropdown(options=list(PRESETS), value="mistral-7b-v0.1", label="model")
    config_path = mo.ui.text(value="", placeholder="path/to/config.json", label="or a config.json")
    weight_choice = mo.ui.dropdown(options=list(WEIGHT_SCHEMES), value="bf16", label="weights")
    kv_choice = mo.ui.dropdown(options=list(KV_DTYPES), value="bf16", label="KV cache")
    context_choice = mo.ui.slider(steps=[512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072], value=4096,
                                  show_value=True, label="context (tokens per sequence)")
    slo_choice = mo.ui.slider(steps=[0, 5, 10, 15, 20, 30, 50, 100, 200], value=10, show_value=True,
                              label="latency SLO, ms per output token (0: none)")
    min_batch_choice = mo.ui.number(start=1, stop=4096, step=1, value=1, label="minimum batch")
    gpus_choice = mo.ui.dropdown(options=["1", "2", "4", "8"], value="1", label="GPUs (tensor parallel)")
    return (config_path, context_choice, gpus_choice, kv_choice, min_batch_choice, model_choice, slo_choice,
            weight_choice)


@app.cell
def _(config_path, context_choice, gpus_choice, kv_choice, min_batch_choice, mo, model_choice, slo_choice,
      weight_choice):
    mo.vstack([
        mo.hstack([model_choice, config_path], justify="start"),
        mo.hstack([weight_choice, kv_choice, gpus_choice], justify="start"),
        context_choice,
        mo.hstack([slo_choice, min_batch_choice], justify="start"),
    ])
    return


@app.cell
def _(config_path, context_choice, gpus_choice, kv_choice, min_batch_choice, model_choice, slo_choice,
      weight_choice):
    model = config_path.value.strip() or model_choice.value
    weights, kv = weight_choice.value, kv_choice.value
    context = int(context_choice.value)
    slo_ms = float(slo_choice.value) or None
    min_batch = int(min_batch_choice.value or 1)
    n_gpus = int(gpus_choice.value)
    return context, kv, min_batch, model, n_gpus, slo_ms, weights


@app.cell
def _(capacity_views, context, kv, min_batch, mo, model, n_gpus, slo_ms, weights):
    try:
        caption = capacity_views.source_text(model, weights, kv, n_gpus, context)
        fixed = f"SLO {slo_ms:g} ms per output token" if slo_ms else "no latency SLO"
        caption_md = mo.md(f"""
        ## GPUs ranked by $ per million output tokens

        {fixed}, at least {min_batch} sequence{'s' if min_batch > 1 else ''}; each GPU runs the
        largest batch that fits and meets the SLO. *{caption}*
        """)
    except ValueError as _exc:
        caption_md = mo.md(f"## GPUs ranked by $ per million output tokens\n\n⚠️ **Cannot plan this:** {_exc}")
    caption_md
    return


@app.cell
def _(capacity_views, context, kv, min_batch, mo, model, n_gpus, slo_ms, weights):
    try:
        ranked = capacity_views.rank_table(model, weights, kv, context, slo_ms=slo_ms, min_batch=min_batch, gpus=n_gpus)
        ranked_view = ranked
    except ValueError as _exc:
        ranked = None
        ranked_view = mo.md(f"⚠️ **No ranking:** {_exc}")
    ranked_view
    return


@app.cell
def _(capacity, get_spec, mo, model, n_gpus):
    try:
        split_note = capacity.sharding(get_spec(model), n_gpus).note
    except ValueError as _exc:
        split_note = f"⚠️ {_exc}"
    mo.md(f"""
    **What the planner counts.** Of each GPU's memory the runtime plans with
    {capacity.GPU_MEMORY_UTILIZATION:.0%} (vLLM's default `gpu_memory_utilization`), less about
    {capacity.RUNTIME_OVERHEAD_BYTES / 1e9:.1f} GB for activations and the CUDA context; the weights
    come next, and what is left holds the KV cache — so `max batch` = KV budget ÷ one sequence's
    cache. Tensor parallel here: {split_note}. The step is a floor: `max(bytes ÷ bandwidth,
    FLOPs ÷ peak)`, the FP8 peak only for fp8 weights on GPUs that have it; communication
    between GPUs is not counted.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## Latency against throughput: the batch decides

    A decode step reads all the weights once, however many sequences share it, plus each
    sequence's cache. So a larger batch costs little extra time per step at first — the tokens
    per second grow almost in proportion — until the cache reads (or the arithmetic) take over and
    every step gets slower. The last point of each line is the largest batch that fits.
    """)
    return


@app.cell
def _(capacity_views, context, kv, mo, model, n_gpus, slo_ms, weights):
    curve_gpus = ["L4", "L40S", "A100 80GB", "H100 SXM", "H200", "MI300X"]
    try:
        curve = capacity_views.curve(model, curve_gpus, weights, kv, context, n_gpus)
        curve_view = (capacity_views.plot_curve(curve, f"decode step and throughput over batch, {context:,} tokens",
                                                capacity_views.source_text(model, weights, kv, n_gpus, context), slo_ms)
                      if not curve.empty else mo.md("⚠️ The model fits none of " + ", ".join(curve_gpus) + " here."))
    except ValueError as _exc:
        curve_view = mo.md(f"⚠️ **No curve:** {_exc}")
    curve_view
    return


@app.cell
def _(capacity_views, context, kv, mo, model, n_gpus, slo_ms, weights):
    try:
        tri = capacity_views.triangle(model, "H100 SXM", weights, kv, context, slo_ms or 10.0, n_gpus)
        tri_error = None
    except ValueError as _exc:
        tri, tri_error = None, str(_exc)
    if tri is None:
        tri_md = mo.md(f"## The quality–latency–throughput triangle\n\n⚠️ **Not on H100 SXM:** {tri_error}")
    else:
        lat, thr = tri.loc["latency"], tri.loc["throughput"]
        slo_row = tri.iloc[1]
        low = tri.loc["throughput, less precision"] if "throughput, less precision" in tri.index else None
        low_text = (f"Giving up precision — fp8 weights and cache — fits **batch {low['batch']:,}** and brings "
                    f"the cost to **${low['$ per M output tokens']:.3f}**; whether the answers stay as good is "
                    "a benchmark question (notebook 05)." if low is not None else "")
        tri_md = mo.md(f"""
        ## The quality–latency–throughput triangle, in numbers

        On one H100 SXM with these settings ({context:,} tokens): serving **one user** gives the
        fastest tokens, **{lat['ms per token']:.2f} ms** each, but costs
        **${lat['$ per M output tokens']:.2f}** per million. Filling the memory with
        **{thr['batch']:,} sequences** makes each token slower (**{thr['ms per token']:.2f} ms**) and
        the million tokens **{lat['$ per M output tokens'] / thr['$ per M output tokens']:.0f}× cheaper**
        (**${thr['$ per M output tokens']:.3f}**). A latency SLO sits in between: batch
        **{slo_row['batch']:,}** at {slo_row['ms per token']:.2f} ms. {low_text}
        Premium chat buys the latency corner; agents and batch jobs the throughput corner; both can
        trade quality for either.
        """)
    tri_md
    return (tri,)


@app.cell
def _(mo, tri):
    tri if tri is not None else mo.md("")
    return


@app.cell
def _(mo):
    mo.md("""
    ## Prediction against measurement, on this machine

    The planner's floor for the model this notebook's profile loads (`WORKSHOP_PROFILE`), on the
    device in use, with the bandwidth measured here (notebook 03's microbenchmark), against the
    median decode step measured with a real KV cache. A ratio above 1 is what the floor leaves
    out: kernel launches, Python, the attention kernels' own traffic, caches that are not perfect.
    That overhead is about fixed per step, so it weighs most on the tiny model (a few MB of weights
    per layer); the bigger the model, the larger the share of each step the floor explains.
    `make bench` reports the same ratio for the active profile.
    """)
    return


@app.cell
def _(capacity_measured, mo):
    from helpers.hardware import is_out_of_memory
    from helpers.models import ProfileUnavailable, load

    try:
        loaded = load()
        measured = capacity_measured.predict_vs_measure(loaded)
        measured_view = capacity_measured.comparison_table(measured)
    except ImportError as _exc:
        measured_view = mo.md(f"⚠️ The bandwidth microbenchmark is not available here: {_exc}")
    except (ProfileUnavailable, ValueError) as _exc:
        measured_view = mo.md(f"⚠️ **The profile's model cannot run here:** {_exc}")
    except (RuntimeError, MemoryError) as _exc:
        if not is_out_of_memory(_exc):
            raise
        measured_view = mo.md(f"⚠️ **The device ran out of memory measuring the step** — a result, not a "
                              f"crash: this GPU cannot also hold the measurement's batch. ({_exc})")
    measured_view
    return


if __name__ == "__main__":
    app.run()
