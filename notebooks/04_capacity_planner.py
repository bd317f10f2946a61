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

    from helpers import capacity
    from helpers.present import expected, learner, notebook, plots, replay
    from helpers.formulas import gpus, regime
    from helpers.present.glossary import term
    from helpers.capacity import measured as capacity_measured, ranking as capacity_ranking, slo as capacity_slo, views as capacity_views
    from helpers.capacity.slo import triangle
    from helpers.formulas.memory import KV_DTYPES, WEIGHT_SCHEMES
    from helpers.formulas.specs import PRESETS, get_spec
    from helpers.capacity.inputs import LastGood
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()
    planner_inputs = LastGood()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 04 · Capacity and cost planner

    **What you will learn**

    1. How much of a GPU's memory the {term("KV cache")} gets, and so how many sequences fit.
    2. The decode step's floor at the datasheet, the step at the {term("efficiency")} an engine reaches
       ({term("MBU")}), and from them the largest batch an {term("SLO")} allows and its cost.
    3. To rank GPUs by dollars per million tokens under a {term("latency SLO", "tpot")} or a minimum batch,
       on one GPU or several ({term("tensor parallelism")}), and to price a request's {term("prefill")} and output.
    4. To read a decode step measured here against the planner's floor.

    {run_times.header("04")}

    Fix a **latency SLO** per output token (premium chat: about 10 ms) or a **minimum batch** (batch jobs,
    agents); the planner fits the model on every catalogued GPU, picks the largest batch that meets the
    constraint, and ranks the GPUs by **dollars per million output tokens**. Everything before the last
    section is computed, the same on every machine and on the command line:
    `python -m helpers capacity --model mistral-7b-v0.1 --gpu all --context 4096 --slo-ms 10`.
    """)
    return


@app.cell
def _():
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
    efficiency_choice = mo.ui.slider(start=0.2, stop=1.0, step=0.05, value=capacity.DEFAULT_EFFICIENCY,
                                     show_value=True, label="efficiency (share of the datasheet)")
    provider_choice = mo.ui.dropdown(options=["all (mixed)", *gpus.providers()], value="all (mixed)",
                                     label="prices from")
    return (
        config_path,
        context_choice,
        efficiency_choice,
        gpus_choice,
        kv_choice,
        min_batch_choice,
        model_choice,
        provider_choice,
        slo_choice,
        weight_choice,
    )


@app.cell
def _(
    config_path,
    context_choice,
    efficiency_choice,
    gpus_choice,
    kv_choice,
    min_batch_choice,
    model_choice,
    provider_choice,
    slo_choice,
    weight_choice,
):
    mo.vstack([
        mo.hstack([model_choice, config_path], justify="start"),
        mo.hstack([weight_choice, kv_choice, gpus_choice], justify="start"),
        context_choice,
        mo.hstack([slo_choice, min_batch_choice], justify="start"),
        mo.hstack([efficiency_choice, provider_choice], justify="start"),
    ])
    return


@app.cell
def _(
    config_path,
    context_choice,
    efficiency_choice,
    gpus_choice,
    kv_choice,
    min_batch_choice,
    model_choice,
    provider_choice,
    slo_choice,
    weight_choice,
):
    # Every control checked together (helpers.capacity.inputs): a bad value gives the note below the
    # controls, and the cells that follow keep the last good inputs.
    _inputs, _note = planner_inputs.resolve(config_path.value, model_choice.value, weight_choice.value,
                                            kv_choice.value, context_choice.value, slo_choice.value,
                                            min_batch_choice.value, gpus_choice.value)
    model, weights, kv, context, slo_ms, min_batch, n_gpus = _inputs.astuple()
    efficiency = float(efficiency_choice.value)
    provider = None if provider_choice.value.startswith("all") else provider_choice.value
    mo.md(_note) if _note else None
    return (
        context,
        efficiency,
        kv,
        min_batch,
        model,
        n_gpus,
        provider,
        slo_ms,
        weights,
    )


@app.cell
def _(context, efficiency, kv, min_batch, model, n_gpus, slo_ms, weights):
    try:
        caption = capacity_views.source_text(model, weights, kv, n_gpus, context)
        fixed = f"SLO {slo_ms:g} ms per output token" if slo_ms else "no latency SLO"
        _src = "Databricks' worked example, see Sources" if efficiency == capacity.DEFAULT_EFFICIENCY else "your choice"
        caption_md = mo.md(f"""
        ## GPUs ranked by $ per million output tokens

        {fixed}, at least {min_batch} sequence{'s' if min_batch > 1 else ''}; each GPU runs the
        largest batch that fits and meets the SLO, with the step at **{efficiency:.0%} of the datasheet**
        ({_src}). *{caption}*
        """)
    except ValueError as _exc:
        caption_md = mo.md(f"## GPUs ranked by $ per million output tokens\n\n⚠️ **Cannot plan this:** {_exc}")
    caption_md
    return


@app.cell
def _(
    context,
    efficiency,
    kv,
    min_batch,
    model,
    n_gpus,
    provider,
    slo_ms,
    weights,
):
    try:
        ranked = capacity_ranking.rank(model, weights, kv, context, slo_ms=slo_ms, min_batch=min_batch, gpus=n_gpus,
                                       efficiency=efficiency, provider=provider)
        ranked_view = capacity_views.rank_frame(ranked)
    except ValueError as _exc:
        ranked = None
        ranked_view = mo.md(f"⚠️ **No ranking:** {_exc}")
    ranked_view
    return (ranked,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** A sorted table: rank 1 is the cheapest GPU that meets the constraints; the
    others follow with the reason.
    - *ms per token (at efficiency)* = *datasheet floor* ÷ efficiency; the SLO, batch and cost use it. At
      100 % the plan is made at the floor, a promise no engine keeps.
    - *batch* equal to *max batch*: the memory sets it; smaller: the SLO does.
    - *price from*: rank within the provider you buy from; across providers a discount meets a list price.
    """)
    return


@app.cell(hide_code=True)
def _():
    _h = gpus.get_gpu("H100 SXM")
    mo.md(f"""
    **What the planner counts.** GPU memory comes in binary sizes: an {_h.name}'s "{_h.memory_gb:g} GB" is
    {_h.stacks} {_h.memory_type} stacks of {_h.stack_gib:g} GiB, and it reports {_h.memory_reported_gib:g} GiB to
    CUDA (`helpers/data/gpu_memory.csv`). The runtime plans with {capacity.GPU_MEMORY_UTILIZATION:g} of it
    (vLLM's `gpu_memory_utilization`) less {capacity.RUNTIME_OVERHEAD_BYTES / 1e9:.1f}·10⁹ B (notebook 02's
    budget); the weights take their share and the rest holds the KV cache: `max batch` = KV budget ÷ one
    sequence's cache. In tensor parallelism weights and K/V heads split over the GPUs, communication not
    counted (notebook 09). The floor is `max(bytes ÷ bandwidth, FLOPs ÷ peak)` (notebook 03's).
    """)
    return


@app.cell(hide_code=True)
def _():
    # the derivation's one case, whatever the controls above say
    slo_case = {"model": "mistral-7b-v0.1", "gpu": "H100 SXM", "slo_ms": 10.0, "context": 4096,
                "efficiency": capacity.DEFAULT_EFFICIENCY}
    _g = gpus.get_gpu(slo_case["gpu"])
    batch_box = learner.prediction(
        f"Mistral 7B v0.1 in bf16 on one {_g.name} ({_g.bandwidth / 1e12:g} TB/s), {slo_case['context']:,} tokens per "
        f"sequence, the step at {slo_case['efficiency']:.0%} of the datasheet: what is the largest batch whose decode "
        f"step stays within {slo_case['slo_ms']:g} ms per output token?", "sequences")
    mo.vstack([mo.md("""
    ## The batch an SLO allows, derived

    The ranking picks, on each GPU, the largest batch whose step meets the SLO. Predict it for one fixed case.
    """), batch_box])
    return batch_box, slo_case


@app.cell(hide_code=True)
def _(slo_case):
    slo_derived = capacity_slo.slo_batch(slo_case["model"], slo_case["gpu"], slo_case["slo_ms"], slo_case["context"],
                                     slo_case["efficiency"])
    _d = slo_derived
    mo.md(f"""
    **The SLO's batch, derived.** A {term("memory-bound")} decode step of b sequences moves

    1. the weights, once for the whole batch: **W** bytes;
    2. each sequence's cache, read, and its new token's keys and values, written: **k** bytes per sequence.

    At an efficiency e of the datasheet's bandwidth B the step takes (W + b·k) ÷ (e·B). It meets an SLO of
    *t* seconds while W + b·k ≤ t·e·B, so

        b_SLO = ⌊(t·e·B − W) ÷ k⌋,   batch = min(b_SLO, max batch)

    Where the FLOPs outgrow the bytes the step is {term("compute-bound")} and the planner bisects (`plan_for_slo`).

    **Worked example** (`helpers.capacity.slo.slo_batch`): {_d.plan.model} on one {_d.gpu}, {_d.plan.context:,} tokens.

    - W = {_d.weight_bytes:,.0f} B (every weight once, the embedding by rows); k = {_d.seq_bytes:,.0f} B
      ({_d.plan.context:,} tokens' cache read, one token's written)
    - t·e·B = {_d.slo_s * 1e3:g} ms × {_d.efficiency:.2f} × {_d.bandwidth / 1e12:g} TB/s = **{_d.step_budget_bytes:,.0f} B**
      a step may move within the SLO
    - b_SLO = ⌊({_d.step_budget_bytes:,.0f} − {_d.weight_bytes:,.0f}) ÷ {_d.seq_bytes:,.0f}⌋ = **{_d.slo_batch:,}**;
      the KV budget holds {_d.max_batch:,}, so the batch is **{_d.derived:,}**: the SLO sets it
      (`plan_for_slo` finds {_d.batch:,})
    - its step: {_d.plan.step_ms:.2f} ms, the weights alone {1e3 * _d.weight_bytes / (_d.efficiency * _d.bandwidth):.2f} ms of it.
    """)
    return (slo_derived,)


@app.cell
def _(batch_box, slo_derived):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 30); in marimo, type it in the box above
    _d = slo_derived
    learner.beside(batch_box, _given, _d.batch, shown=lambda v: f"{v:,.0f} sequences",
        higher=f"Each sequence adds only its cache to a step, k = {_d.seq_bytes / 1e6:,.0f} MB; the weights' "
               f"{_d.weight_bytes / 1e9:,.1f} GB are read once for the whole batch.",
        lower=f"The weights alone take {1e3 * _d.weight_bytes / (_d.efficiency * _d.bandwidth):.2f} ms of the "
              f"{_d.slo_s * 1e3:g} ms at {_d.efficiency:.0%} of the datasheet; only what is left holds caches, "
              f"{_d.seq_bytes / 1e6:,.0f} MB each.",
        within="W, k and the bytes a step may move, term by term as derived.")
    return


@app.cell(hide_code=True)
def _(slo_derived):
    cost_box = learner.prediction(
        f"At that batch ({slo_derived.batch:,}) on the {slo_derived.gpu} at "
        f"\\${gpus.get_gpu(slo_derived.gpu).usd_per_hour:.2f} an hour, what does a million output tokens cost?", "dollars")
    cost_box
    return (cost_box,)


@app.cell
def _(cost_box, slo_derived):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 1.5); in marimo, type it in the box above
    _p = slo_derived.plan
    _g = gpus.get_gpu(_p.gpu)
    mo.vstack([mo.md(f"""
    **The cost, derived.** The batch makes b tokens per step, so tokens/s = b ÷ step and

        $ per million output tokens = ($ per hour ÷ 3,600) ÷ (tokens/s) × 10⁶

    Here: {_p.batch:,} ÷ {_p.step_ms:.2f} ms = {_p.tokens_per_s:,.0f} tokens/s;
    \\${_p.usd_per_hour:.2f} ÷ 3,600 = \\${_p.usd_per_hour / 3600:.6f} per second ({_g.price_provider},
    read {_g.price_read}); ÷ {_p.tokens_per_s:,.0f} × 10⁶ = **\\${_p.usd_per_million_tokens:.3f}**.
    """), learner.beside(cost_box, _given, _p.usd_per_million_tokens, shown=lambda v: f"\\${v:,.3f}",
        higher=f"Every token pays for the GPU's whole second: at batch {_p.batch:,} a second serves "
               f"{_p.tokens_per_s:,.0f} tokens, and the price per hour is divided by those alone.",
        lower=f"The GPU's \\${_p.usd_per_hour:.2f} an hour is shared by {_p.tokens_per_s:,.0f} tokens a second, "
              "3,600 seconds an hour: check the tokens per second first (batch ÷ step).",
        within="Price per second ÷ tokens per second, as derived.")])
    return


@app.cell
def _(slo_case):
    _p = capacity_slo.slo_batch(slo_case["model"], slo_case["gpu"], 50.0, slo_case["context"], slo_case["efficiency"])
    notebook.exercise(1, f"Which limit binds? The same model on the same {_p.gpu} at {_p.plan.context:,} tokens and "
                         f"{_p.efficiency:.0%} of the datasheet, with an SLO of 50 ms: what is b_SLO, what is the "
                         "batch, which limit sets it (the SLO or the memory), and what does a million output tokens "
                         "cost?", f"""
    - t·e·B = 50 ms × {_p.efficiency:.2f} × {_p.bandwidth / 1e12:g} TB/s = {_p.step_budget_bytes:,.0f} B
    - b_SLO = ⌊({_p.step_budget_bytes:,.0f} − {_p.weight_bytes:,.0f}) ÷ {_p.seq_bytes:,.0f}⌋ = {_p.slo_batch:,};
      the KV budget holds {_p.max_batch:,}
    - the batch: **{_p.derived:,}** — the memory sets it: the SLO would allow more sequences than the cache
      holds (`plan_for_slo`: {_p.batch:,})
    - its step {_p.plan.step_ms:.2f} ms, {_p.plan.tokens_per_s:,.0f} tokens/s, **\\${_p.plan.usd_per_million_tokens:.3f}**
      per million output tokens
    """, label="Solution (computed by helpers.capacity.slo.slo_batch)")
    return


@app.cell(hide_code=True)
def _(slo_derived):
    _d = slo_derived
    mo.md(f"""
    ## Latency against throughput: the batch decides

    A step moves W + b·k bytes: the tokens per second, b ÷ step, grow with b, the step by k per sequence, and
    the caches' reads pass the weights' at b = W ÷ k — {_d.parity_batch:,.1f} sequences for {_d.plan.model} at
    {_d.plan.context:,} tokens (one cache is {100 * _d.seq_bytes / (_d.weight_bytes + _d.seq_bytes):,.1f} % of a
    batch-1 step's bytes). Past the {term("ridge point")} the FLOPs set the step. Each line ends at the largest
    batch that fits.
    """)
    return


@app.cell
def _(context, efficiency, kv, model, n_gpus, slo_ms, weights):
    curve_gpus = ["L4", "L40S", "A100 80GB", "H100 SXM", "H200", "MI300X"]
    try:
        curve = capacity_views.curve(model, curve_gpus, weights, kv, context, n_gpus, efficiency)
        curve_view = (capacity_views.plot_curve(curve, f"decode step at {efficiency:.0%} of the datasheet and "
                                                f"throughput over batch, {context:,} tokens",
                                                capacity_views.source_text(model, weights, kv, n_gpus, context), slo_ms)
                      if not curve.empty else mo.md("⚠️ The model fits none of " + ", ".join(curve_gpus) + " here."))
    except ValueError as _exc:
        curve_view = mo.md(f"⚠️ **No curve:** {_exc}")
    curve_view
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## The quality–latency–throughput triangle

    The same model on one H100 SXM, planned four ways: batch 1 (**latency**); the largest batch within the SLO
    (10 ms when none is set); the largest the memory holds (**throughput**); and that with fp8 weights and cache
    (**less precision**, at a quality cost: notebook 05). Read *ms per token* against *$ per M output tokens*.
    """)
    return


@app.cell
def _(context, efficiency, kv, model, n_gpus, slo_ms, weights):
    try:
        _tri = triangle(model, "H100 SXM", weights, kv, context, slo_ms or 10.0, n_gpus, efficiency)
        _view = capacity_views.triangle_frame(_tri)
    except ValueError as _exc:
        _view = mo.md(f"⚠️ **Not on H100 SXM:** {_exc}")
    _view
    return


@app.cell
def _():
    prompt_choice = mo.ui.number(start=1, stop=100_000, step=1, value=1000, label="prompt tokens")
    output_choice = mo.ui.number(start=1, stop=100_000, step=1, value=200, label="output tokens")
    mo.vstack([mo.md("""
    ## What a request costs, prefill counted

    API providers price input and output tokens apart. A request of *P* prompt and *O* output tokens takes its
    prefill plus its share of *O* decode steps (*O* × step ÷ batch): input tokens price the first, output
    tokens the second.
    """), mo.hstack([prompt_choice, output_choice], justify="start")])
    return output_choice, prompt_choice


@app.cell
def _(
    efficiency,
    kv,
    min_batch,
    model,
    n_gpus,
    output_choice,
    prompt_choice,
    provider,
    slo_ms,
    weights,
):
    _p, _o = int(prompt_choice.value or 1000), int(output_choice.value or 200)
    try:
        requests = capacity_ranking.rank_requests(model, _p, _o, weights, kv, slo_ms=slo_ms, min_batch=min_batch,
                                                  gpus=n_gpus, efficiency=efficiency, provider=provider)
        request_view = capacity_views.request_frame(requests)
    except ValueError as _exc:
        requests, request_view = None, mo.md(f"⚠️ **No request costs:** {_exc}")
    request_view
    return (requests,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see** (computed). A prefill serves all *P* prompt tokens in one pass over the weights
    (*prefill bound*: its FLOPs or its bytes set it); a decode step reads them again for one token per sequence.
    - *output ÷ input price* **above** 1: an output token costs more GPU time than an input one, as API price
      lists charge it.
    - **at** or **below** 1: a batch large enough that a sequence's share of a step costs less than a prompt
      token's share of the prefill, or a prompt long enough that attention makes its prefill dear.
    """)
    return


@app.function
def larger_check(active) -> dict:
    """The same prediction against measurement (helpers.capacity.measured.predict_vs_measure) on a model that
    reads more bytes per step (capacity_measured.larger_profile), loaded on the active model's device."""
    from helpers.measure import models

    return capacity_measured.predict_vs_measure(models.load(capacity_measured.LARGER_PROFILE, device=active.device))


@app.cell(hide_code=True)
def _():
    measured_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## Prediction against measurement: the planner's floor and this machine's step

    The planner's floor on this device — a decode step's bytes ÷ the bandwidth measured here — against the
    median step of a real generation, for the profile's model and for one that reads more bytes (`small`).
    """), measured_button])
    return (measured_button,)


@app.cell
def _(measured_button):
    from helpers.measure.hardware import is_out_of_memory
    from helpers.measure.models import load
    from helpers.measure.local_models import ProfileUnavailable

    loaded, measured, measured_run, measured_error = None, None, None, ""   # None when the model cannot run here
    try:
        loaded = load()
        measured_run = replay.measure("04/predict_vs_measure", capacity_measured.predict_vs_measure, loaded,
                                      run=measured_button.value, profile=loaded.profile, device=loaded.device)
        measured = measured_run.value
    except ImportError as _exc:
        measured_error = f"⚠️ The bandwidth microbenchmark is not available here: {_exc}"
    except (ProfileUnavailable, ValueError) as _exc:
        measured_error = f"⚠️ **The profile's model cannot run here:** {_exc}"
    except (RuntimeError, MemoryError) as _exc:
        if not is_out_of_memory(_exc):
            raise
        measured_error = f"⚠️ **The device ran out of memory measuring the step** — a result, not a crash. ({_exc})"
    mo.vstack([mo.md(measured_error), measured_run.note() if measured_run is not None else mo.md("")])
    return loaded, measured


@app.cell
def _(loaded, measured_button):
    from helpers.measure.local_models import ProfileUnavailable as _Unavailable

    larger, _run, _note = None, None, ""
    try:
        if loaded is None:
            raise ValueError("the profile's model did not load (said above)")
        if capacity_measured.larger_profile(loaded) is None:
            _note = (f"The profile's model ({loaded.profile}) reads at least as many bytes per step as the "
                     f"{capacity_measured.LARGER_PROFILE} profile: one measured row.")
        else:
            _run = replay.measure("04/larger", larger_check, loaded, run=measured_button.value, long=True,
                                  profile=loaded.profile, device=loaded.device)
            larger = _run.value
    except (_Unavailable, ValueError) as _exc:
        _note = f"⚠️ **The larger model was not measured:** {_exc}"
    mo.vstack([mo.md(_note), _run.note() if _run is not None else mo.md("")])
    return (larger,)


@app.cell
def _(larger, measured):
    _measured = [r for r in (measured, larger) if r is not None]
    _model, _gpu, _ctx = capacity_measured.REFERENCE
    plots.table(capacity_measured.floor_table(_measured),
                "measured: " + ("; ".join(r.get("label", "?") for r in _measured) or "nothing on this machine")
                + f" · floor = bytes ÷ the bandwidth measured · computed: {_model}, bf16, batch 1, {_ctx} tokens, "
                  f"on one {_gpu} at its datasheet bandwidth (helpers.capacity.plan)", precision=3)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** Each model's step beside its floor, their ratio and its label ({regime.MARGIN:.0%}
    margin).
    - **above**: the step pays for more than its bytes (overhead). Compare *beyond the floor* across the
      models: a time that does not grow with the bytes is a cost per step; one that grows with them is
      reading below the measured bandwidth.
    - **at**: reading the bytes is the step (the bandwidth regime, {term("memory-bound")}).
    - **below**: the bytes came from a cache, faster than memory: compare *bytes per step* with the
      {term("last-level cache")}.

    *On a GPU*: the computed row is the planner's floor for Mistral 7B on an H100 SXM; a measured row's
    *datasheet floor ÷ measured* is the `--efficiency` to plan that GPU with. gpt-fast's eager and compiled
    Llama-2-7B (notebook 03) read the same bytes with less overhead.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Exercises

    Exercise 1 sits with the SLO's derivation.
    """)
    return


@app.cell
def _():
    _all = capacity_ranking.rank("mistral-7b-v0.1", context=4096, slo_ms=20)
    _rp = capacity_ranking.rank("mistral-7b-v0.1", context=4096, slo_ms=20, provider="RunPod")
    _a, _b = [r for r in _all if r["rank"] == 1][0], [r for r in _rp if r["rank"] == 1][0]
    notebook.exercise(2, "Comparable prices. Run `python -m helpers capacity --model mistral-7b-v0.1 --gpu all "
                    "--context 4096 --slo-ms 20`, then add `--provider RunPod`. Does the winner change, and why "
                    "should you care?", f"""
    Across every provider the cheapest is **{_a['gpu']}** ({_a['provider']}, \\${_a['usd_per_million_tokens']:.3f} per
    million output tokens); within RunPod it is **{_b['gpu']}** (\\${_b['usd_per_million_tokens']:.3f}). The winner
    changes: a mixed ranking compares one provider's discount with another's list price — rank within the
    provider you would actually buy from.
    """)
    return


@app.cell
def _():
    _r = capacity.plan("mistral-7b-v0.1", "H100 SXM", context=8192, batch=16, prompt_tokens=6000, output_tokens=500)
    notebook.exercise(3, "A long prompt. Price a request of 6,000 prompt and 500 output tokens on one H100 SXM at "
                    "batch 16 (`--context 8192 --batch 16 --prompt-tokens 6000 --output-tokens 500`). Which part "
                    "of the request costs more?", f"""
    Prefill {1e3 * _r.request_prefill_s:,.1f} ms of GPU time ({_r.prefill_bound}-bound), decode
    {1e3 * _r.request_decode_s:,.1f} ms (its share of batch 16): \\${_r.usd_per_request:.6f} per request; an output
    token costs {_r.usd_per_million_output_tokens / _r.usd_per_million_input_tokens:,.1f}× an input token. The
    decode still costs more: 500 steps, even shared with 15 other requests, take more GPU time than one
    6,000-token prefill.
    """)
    return


@app.cell(hide_code=True)
def _(measured, ranked, slo_case, slo_derived):
    _at20 = capacity_slo.slo_batch(slo_case["model"], slo_case["gpu"], 20.0, slo_case["context"], slo_case["efficiency"])
    _ok = [r for r in ranked or () if r["status"] == "ok"]
    check_questions = [
        learner.Question("The derivation's case with an SLO of 20 ms: what batch does it allow?", _at20.batch,
                         "sequences"),
        learner.Question("How many GPUs meet the constraints in the ranking, with your settings?", len(_ok), "GPUs"),
        (learner.Question("This run's measured step of the profile's model against its floor?",
                          regime.label(regime.ratio(measured.get("measured_step_s"), measured.get("predicted_step_s"))),
                          options=regime.LABELS)
         if measured is not None else
         learner.Question("In the derivation, at what batch do the caches' reads equal the weights' (W ÷ k)?",
                          slo_derived.parity_batch, "sequences")),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "the second follows your controls")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Takeaways

    - The KV cache gets what the GPU reports less the reserve and the weights; ÷ one sequence's cache, that
      is the largest batch.
    - A floor (bytes ÷ bandwidth, FLOPs ÷ peak) is what the datasheet allows: plan at an efficiency measured
      on your engine.
    - The batch an SLO allows is ⌊(t·e·B − W) ÷ k⌋, capped by the memory; the cost per token falls as it grows.
    - Compare prices within one provider; prefill and decode price differently.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([expected.sources("gpt_fast_eager_tokens_per_s", "gpt_fast_compiled_tokens_per_s", more=(
        "Databricks, \"LLM Inference Performance Engineering: Best Practices\" (2023): the 50 % MBU worked "
        "example — <https://www.databricks.com/blog/llm-inference-performance-engineering-best-practices>",
        "Horace He, \"Making Deep Learning Go Brrrr From First Principles\" (2022) — <https://horace.io/brrr_intro.html>",
        "GPUs: `helpers/data/gpus.csv` and `helpers/data/gpu_memory.csv`, each row with its source")),
        mo.md(f"*This run took {notebook.elapsed(started)}.*")])
    return


if __name__ == "__main__":
    app.run()
