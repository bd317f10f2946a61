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
    from helpers.formulas import gpus, roofline, verdicts
    from helpers.present.glossary import term
    from helpers.capacity import measured as capacity_measured, ranking as capacity_ranking, slo as capacity_slo, views as capacity_views
    from helpers.capacity.triangle import triangle
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

    1. How much of a GPU's memory the {term("KV cache")} gets — the memory the device reports, less the
       runtime's reserve and the weights — and so how many sequences fit.
    2. The decode step's floor at the datasheet's bandwidth, and the step at an {term("efficiency")} an engine
       reaches (a share of the datasheet, measured as {term("MBU")}); why the {term("SLO")} search and the cost
       must use the second; to derive from it the largest batch an SLO allows and its cost per million tokens.
    3. To rank GPUs by dollars per million tokens under a {term("latency SLO", "tpot")} or a minimum batch,
       on one GPU or on several in {term("tensor parallelism")} (notebook 09), within one provider or across
       several, and to price a request ({term("prefill")} and output) as API providers do.
    4. To check the planner against a decode step measured on this machine.

    {run_times.header("04")}

    Which GPU serves a model most cheaply? First fix what you care about most: a **latency SLO**
    per output token (premium chat: about 10 ms) or a **minimum batch** (batch jobs, agents).
    Then the planner fits the model on every catalogued GPU — weights, the runtime's reserve and
    the KV cache for that context — picks the largest batch that meets the constraint, and ranks
    the GPUs by **dollars per million output tokens**.

    Every number is computed by `helpers.capacity` from the model's `config.json` and the GPU catalog
    in `helpers/data/gpus.csv` (memory, bandwidth, dense FLOP/s and a dated price, each with its
    source). A decode step cannot be faster than reading the weights and the cache once,
    `bytes ÷ bandwidth`, nor than its arithmetic, `FLOPs ÷ peak`: that is its **floor** at the
    datasheet's figures. An engine reaches a share of the datasheet, so the planner also reports the step
    at an **efficiency** — that share — and plans with that one. The same numbers come from the
    command line: `python -m helpers capacity --model mistral-7b-v0.1 --gpu all --context 4096 --slo-ms 10`.
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
        _src = capacity.EFFICIENCY_SOURCE if efficiency == capacity.DEFAULT_EFFICIENCY else "your choice"
        caption_md = mo.md(f"""
        ## GPUs ranked by $ per million output tokens

        {fixed}, at least {min_batch} sequence{'s' if min_batch > 1 else ''}; each GPU runs the
        largest batch that fits and meets the SLO, with the step at **{efficiency:.0%} of the datasheet**
        (efficiency from: {_src}). *{caption}*
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


@app.cell
def _(context, efficiency, kv, min_batch, model, n_gpus, provider, ranked, slo_ms, weights):
    if ranked is None:
        _md = mo.md("")
    else:
        _at_floor = capacity_ranking.rank(model, weights, kv, context, slo_ms=slo_ms, min_batch=min_batch, gpus=n_gpus,
                                          efficiency=1.0, provider=provider)
        _ok = [r for r in ranked if r.status == "ok"]
        _note = capacity_ranking.providers_note(ranked)
        _first = (f"**{_ok[0].gpu}** ({_ok[0].provider}) at "
                  f"\\${_ok[0].usd_per_million_tokens:.3f} per million output tokens, batch {_ok[0].batch:,}"
                  if _ok else "no GPU meets these constraints")
        _md = mo.md(f"""
        The cheapest here: {_first}. {_note[0].upper() + _note[1:]}.

        **What you should see.** The same table on a CPU and on a GPU: it is computed, not measured. Here
        {len(_ok)} of {len(ranked)} GPUs meet the constraints ({", ".join(r.gpu for r in _ok) or "none"}); the others
        follow with the reason. The efficiency divides every step by the same factor; at 100 % the steps
        are the column "ms per token (datasheet floor)": {capacity_ranking.against_datasheet(ranked, _at_floor)} —
        what a plan at the datasheet's floor promises beyond the step an engine at {efficiency:.0%} runs.
        """)
    _md
    return


@app.cell
def _(model, n_gpus):
    try:
        split_note = capacity.sharding(get_spec(model), n_gpus).note
    except ValueError as _exc:
        split_note = f"⚠️ {_exc}"
    _h = gpus.get_gpu("H100 SXM")
    mo.md(f"""
    **What the planner counts.** A GPU's memory is what the device reports to CUDA, not the label: an
    {_h.name} labelled {_h.memory_gb:g} GB reports {_h.memory_reported_gib:g} GiB =
    {_h.usable_memory_bytes / 1e9:,.2f}·10⁹ B (sources in `helpers/data/gpu_memory.csv`; GPUs without a
    reported figure use the label). Of it the runtime plans with {capacity.GPU_MEMORY_UTILIZATION:.0%}
    (vLLM's default `gpu_memory_utilization`), less about {capacity.RUNTIME_OVERHEAD_BYTES / 1e9:.1f} GB
    for activations and the CUDA context — the same budget notebook 02 counts
    (`helpers.formulas.memory.runtime_reserve_bytes`); the weights come next, and what is left holds the
    KV cache — so `max batch` = KV budget ÷ one sequence's cache.
    Tensor parallelism here: {split_note}. The step's floor is `max(bytes ÷ bandwidth, FLOPs ÷ peak)`
    with the bytes and FLOPs of `helpers.formulas.stepcost` (the same as notebook 03's floor), the FP8 peak only
    for fp8 weights on GPUs that have it; communication between GPUs is not counted. The step the
    ranking uses is that floor ÷ the efficiency.
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

    The ranking above picks, on each GPU, the largest batch whose step meets the SLO. That batch follows from
    the step's bytes, term by term; predict it first for one case (the same whatever the controls above say).
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

    where max batch = KV budget ÷ one sequence's cache (the section above). Where the FLOPs outgrow the bytes
    the step is {term("compute-bound")} and the planner's bisection (`plan_for_slo`) takes over from this formula.

    **Worked example** (`helpers.capacity.slo.slo_batch`): {_d.plan.model} on one {_d.gpu}, {_d.plan.context:,} tokens.

    - W = {_d.weight_bytes:,.0f} B (every weight once, the embedding by rows); k = {_d.seq_bytes:,.0f} B
      ({_d.plan.context:,} tokens' cache read, one token's written)
    - t·e·B = {_d.slo_s * 1e3:g} ms × {_d.efficiency:.2f} × {_d.bandwidth / 1e12:g} TB/s = **{_d.step_budget_bytes:,.0f} B**
      a step may move within the SLO
    - b_SLO = ⌊({_d.step_budget_bytes:,.0f} − {_d.weight_bytes:,.0f}) ÷ {_d.seq_bytes:,.0f}⌋ = **{_d.slo_batch:,}**;
      the KV budget holds {_d.max_batch:,}, so the batch is **{_d.derived:,}**
      ({"the SLO sets it" if _d.slo_batch < _d.max_batch else "the memory sets it"}; `plan_for_slo` finds
      {_d.batch:,})
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
    - the batch: **{_p.derived:,}** — {"the memory sets it: the SLO would allow more sequences than the cache holds"
      if _p.slo_batch >= _p.max_batch else "the SLO sets it: the cache would hold more sequences"}
      (`plan_for_slo`: {_p.batch:,})
    - its step {_p.plan.step_ms:.2f} ms, {_p.plan.tokens_per_s:,.0f} tokens/s, **\\${_p.plan.usd_per_million_tokens:.3f}**
      per million output tokens
    """, label="Solution (computed by helpers.capacity.slo.slo_batch)")
    return


@app.cell(hide_code=True)
def _(slo_derived):
    _d = slo_derived
    _one = verdicts.share(_d.seq_bytes, _d.weight_bytes + _d.seq_bytes, "its bytes")
    mo.md(f"""
    ## Latency against throughput: the batch decides

    A decode step reads all the weights once, however many sequences share it, plus each sequence's cache:
    W + b·k bytes (derived above). The tokens per second, b ÷ step, grow with b; the step grows by k per
    sequence, and the caches' reads pass the weights' at b = W ÷ k. For {_d.plan.model} at
    {_d.plan.context:,} tokens that is {_d.parity_batch:,.1f} sequences (one sequence's cache is
    {_one} at batch 1); past the {term("ridge point")} the arithmetic, not the bytes, sets the step. The last
    point of each line is the largest batch that fits.
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


@app.cell
def _(context, efficiency, kv, model, n_gpus, slo_ms, weights):
    tri_slo = slo_ms or 10.0          # with no SLO chosen above, 10 ms stands in for one
    try:
        tri = {c.corner: c for c in triangle(model, "H100 SXM", weights, kv, context, tri_slo, n_gpus, efficiency)}
        tri_error = None
    except ValueError as _exc:
        tri, tri_error = None, str(_exc)
    if tri is None:
        tri_md = mo.md(f"## The quality–latency–throughput triangle\n\n⚠️ **Not on H100 SXM:** {tri_error}")
    else:
        lat, slo_row, thr = list(tri.values())[:3]
        low = tri.get("throughput, less precision")
        low_text = (f"Giving up precision — fp8 weights and cache — fits **batch {low.batch:,}** and brings "
                    f"the cost to **\\${low.usd_per_million_tokens:.3f}**; whether the answers stay as good is "
                    "a benchmark question (notebook 05)." if low is not None else "")
        _slo_name = (f"Your SLO of {tri_slo:g} ms" if slo_ms else
                     f"A latency SLO ({tri_slo:g} ms here, a stand-in: no SLO is set above)")
        _slo_text = (f"{_slo_name} sits in between: batch **{slo_row.batch:,}** at {slo_row.step_ms:.2f} ms."
                     if slo_row.meets_slo else
                     f"{_slo_name} is out of reach: even batch 1 takes {lat.step_ms:.2f} ms per token "
                     f"at this efficiency.")
        tri_md = mo.md(f"""
        ## The quality–latency–throughput triangle, in numbers

        On one H100 SXM with these settings ({context:,} tokens, the step at {efficiency:.0%} of the
        datasheet, as the ranking): serving **one user** gives the
        fastest tokens, **{lat.step_ms:.2f} ms** each, but costs
        **\\${lat.usd_per_million_tokens:.2f}** per million. Filling the memory with
        **{thr.batch:,} sequences** makes each token {verdicts.speed(thr.step_ms, lat.step_ms, "faster", "slower")} (**{thr.step_ms:.2f} ms**)
        and the million tokens {verdicts.speed(thr.usd_per_million_tokens, lat.usd_per_million_tokens, "cheaper",
        "dearer", "as costly")} (**\\${thr.usd_per_million_tokens:.3f}**). {_slo_text} {low_text}
        Premium chat buys the latency corner; agents and batch jobs the throughput corner; both can
        trade quality for either.
        """)
    tri_md
    return (tri,)


@app.cell
def _(tri):
    capacity_views.triangle_frame(tri.values()) if tri is not None else mo.md("")
    return


@app.cell
def _():
    prompt_choice = mo.ui.number(start=1, stop=100_000, step=1, value=1000, label="prompt tokens")
    output_choice = mo.ui.number(start=1, stop=100_000, step=1, value=200, label="output tokens")
    mo.vstack([mo.md("""
    ## What a request costs, prefill counted

    API providers price input and output tokens apart. For requests of *P* prompt and *O* output
    tokens (the context is their sum), each GPU's GPU-time per request is its prefill (the GPU busy
    with it alone) plus its share of *O* decode steps at the request's mean context (*O* × step ÷
    batch): $ per million input tokens prices the first, $ per million output tokens the second, next
    to the decode-only figure of the ranking above (`--prompt-tokens`, `--output-tokens` on the command line).
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


@app.cell
def _(
    efficiency,
    kv,
    model,
    n_gpus,
    output_choice,
    prompt_choice,
    requests,
    weights,
):
    _ok = [r for r in requests or () if r.status == "ok"]
    if not _ok:
        _md = mo.md("")
    else:
        _r = _ok[0]
        _p, _o = int(prompt_choice.value or 1000), int(output_choice.value or 200)
        _plan = capacity.plan(model, _r.gpu, n_gpus, weights, kv, context=_p + _o, batch=_r.batch,
                              prompt_tokens=_p, efficiency=efficiency)
        _ratio = _r.usd_per_million_output_tokens / _r.usd_per_million_input_tokens
        _word = verdicts.change_words(_ratio, higher="more", lower="less",
                                      within=f"as much, within {verdicts.CHANGE_MARGIN:.0%}")
        _dec_word = verdicts.change_words(_r.usd_per_million_tokens / _r.usd_per_million_output_tokens,
                                          higher="higher than", lower="lower than",
                                          within=f"within {verdicts.CHANGE_MARGIN:.0%} of")
        _why = (f"The {_p:,}-token prefill is **{_plan.prefill_bound}-bound** here (floor: "
                f"{1e3 * _plan.prefill_memory_s:,.2f} ms to move the weights and the prompt's cache, "
                f"{1e3 * _plan.prefill_compute_s:,.2f} ms of arithmetic): one pass serves all {_p:,} prompt tokens, "
                f"while each decode step reads the weights again for {_r.batch:,} token"
                f"{'s' if _r.batch > 1 else ''}, one per sequence.")
        _md = mo.md(f"""
        **What you should see** (computed, the same on any machine): on the cheapest GPU here,
        {_r.gpu}, an output token costs **{_ratio:,.1f}×** what an input token does
        ({_word}). {_why} The decode-only column is {_dec_word} the request's output price (\\${_r.usd_per_million_tokens:.3f}
        against \\${_r.usd_per_million_output_tokens:.3f}): the column times every step at the full context, the
        request at its mean.
        """)
    _md
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
    ## Prediction against measurement, on this machine

    The planner's floor for the model this notebook's profile loads (`WORKSHOP_PROFILE`), on the
    device in use, with the bandwidth measured here (notebook 03's microbenchmark), against the
    median decode step measured with a real KV cache. A ratio above 1 is what the floor leaves
    out: kernel launches, Python, the attention kernels' own traffic, caches that are not perfect. A cost
    paid per step, whatever the bytes, is a larger share of a step that reads fewer bytes; whether this run
    shows that is said in the next section, which measures a larger model. A ratio below 1 means the
    step's bytes came faster than the measured bandwidth: weights that fit the {term("last-level cache")}
    stay there between steps. `make bench` reports the same ratio for the active profile.
    """), measured_button])
    return (measured_button,)


@app.cell
def _(measured_button):
    from helpers.measure.hardware import is_out_of_memory
    from helpers.measure.models import load
    from helpers.measure.local_models import ProfileUnavailable

    loaded, measured, measured_run = None, None, None   # None when the profile's model cannot load here
    try:
        loaded = load()
        measured_run = replay.measure("04/predict_vs_measure", capacity_measured.predict_vs_measure, loaded,
                                      run=measured_button.value, profile=loaded.profile, device=loaded.device)
        measured = measured_run.value
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
    return loaded, measured, measured_run


@app.cell(hide_code=True)
def _(measured_run):
    measured_run.note() if measured_run is not None else mo.md("")
    return


@app.cell(hide_code=True)
def _(measured, measured_run):
    _h = roofline.gpu_roofline("H100 SXM", expected.REFERENCE_MODEL, contexts=(512,))
    _gpu = [expected.computed(f"the planner's floor for {_h['model']} at 512 tokens on an {_h['gpu']} is "
                              f"{1e3 * _h['decode_floor_s'][512]:,.2f} ms at the datasheet's "
                              f"{_h['bandwidth'] / 1e12:g} TB/s, {1e3 * _h['decode_at_efficiency_s'][512]:,.2f} ms at "
                              f"the planner's {_h['efficiency']:.0%}",
                              "helpers.formulas.roofline.gpu_roofline (helpers.formulas.stepcost, the GPU catalog)"),
            *expected.eager_against_floor()]
    if measured is None:
        _md = mo.md("")
    else:
        _e = capacity_measured.efficiency(measured)
        _where = "in the recorded run" if measured_run.replayed else "here"
        if _e.gpu is not None:
            _ds = (f"Against the {_e.gpu.name} datasheet's {_e.datasheet_bandwidth / 1e12:,.2f} TB/s (the "
                   f"share the planner's `--efficiency` means) that is **{100 * _e.datasheet_efficiency:,.1f} %** "
                   f"(× {measured['bandwidth'] / 1e9:,.0f} GB/s measured ÷ {_e.datasheet_bandwidth / 1e9:,.0f} GB/s): "
                   + (f"pass `--efficiency {_e.datasheet_efficiency:.2f}` to plan with this engine"
                      if _e.datasheet_efficiency <= 1 else "above 1, so the datasheet figure is not a bound here"))
        else:
            _ds = (f"This device ({measured.get('device_name') or measured['device']}) has no datasheet in the GPU "
                   "catalog, and the planner's `--efficiency` is a share of a catalogued GPU's datasheet, so this "
                   "figure is not a value to pass there; measure on the GPU you plan for")
        _md = mo.md(f"""
        **Measured efficiency {_where}: {100 * _e.vs_measured_bandwidth:,.1f} %** of the floor at the device's
        measured bandwidth (predicted ÷ measured). {_ds} (the planner's default is
        {100 * _h['efficiency']:,.0f} %, from a published worked example).
        """)
        _md = mo.vstack([_md, expected.should_see(capacity_measured.against_floor(measured), _gpu)])
    _md
    return


@app.cell(hide_code=True)
def _():
    larger_button = replay.run_button()
    mo.vstack([mo.md("""
    ### The same prediction on a larger model

    The same floor, the same measurement and the same rule on the `small` profile, beside the profile's
    model above (the table gives each one's bytes per step). Where the profile's model already reads as many
    (Mistral 7B on a GPU, the small profile itself), this section has nothing to add.
    """), larger_button])
    return (larger_button,)


@app.cell
def _(larger_button, loaded):
    from helpers.measure.local_models import ProfileUnavailable as _Unavailable

    larger, larger_run = None, None
    try:
        if loaded is None:
            raise ValueError("the profile's model did not load (the section above says why)")
        if capacity_measured.larger_profile(loaded) is None:
            larger_view = mo.md(f"The model above ({loaded.profile}) reads at least as many bytes per step as the "
                                f"{capacity_measured.LARGER_PROFILE} profile: nothing more to measure.")
        else:
            larger_run = replay.measure("04/larger", larger_check, loaded, run=larger_button.value, long=True,
                                        profile=loaded.profile, device=loaded.device)
            larger = larger_run.value
            larger_view = capacity_measured.comparison_table(larger)
    except (_Unavailable, ValueError) as _exc:
        larger_view = mo.md(f"⚠️ **Not measured:** {_exc}")
    larger_view
    return larger, larger_run


@app.cell(hide_code=True)
def _(larger_run):
    larger_run.note() if larger_run is not None else mo.md("")
    return


@app.cell(hide_code=True)
def _(larger, measured):
    if measured is None or larger is None:
        _md = mo.md("")
    else:
        _md = expected.should_see([capacity_measured.against_floor(larger),
                                   capacity_measured.floor_shares(measured, larger)], ())
    _md
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Exercises

    Try each before opening its solution (exercise 1 sits with the SLO's derivation above). The command line
    gives the same numbers as this notebook.
    """)
    return


@app.cell
def _():
    _all = capacity_ranking.rank("mistral-7b-v0.1", context=4096, slo_ms=20)
    _rp = capacity_ranking.rank("mistral-7b-v0.1", context=4096, slo_ms=20, provider="RunPod")
    _a, _b = [r for r in _all if r.rank == 1][0], [r for r in _rp if r.rank == 1][0]
    notebook.exercise(2, "Comparable prices. Run `python -m helpers capacity --model mistral-7b-v0.1 --gpu all "
                    "--context 4096 --slo-ms 20`, then add `--provider RunPod`. Does the winner change, and why "
                    "should you care?", f"""
    Across every provider the cheapest is **{_a.gpu}** ({_a.provider}, \\${_a.usd_per_million_tokens:.3f} per
    million output tokens); within RunPod it is **{_b.gpu}** (\\${_b.usd_per_million_tokens:.3f}).
    {"The winner changes: " if _a.gpu != _b.gpu else "The same GPU wins, but "}a mixed ranking compares one
    provider's discount with another's list price — rank within the provider you would actually buy from.
    """)
    return


@app.cell
def _():
    _r = capacity.plan("mistral-7b-v0.1", "H100 SXM", context=8192, batch=16, prompt_tokens=6000, output_tokens=500)
    notebook.exercise(3, "A long prompt. Price a request of 6,000 prompt and 500 output tokens on one H100 SXM at "
                    "batch 16 (`--context 8192 --batch 16 --prompt-tokens 6000 --output-tokens 500`). Which part "
                    "of the request costs more?", f"""
    Prefill {1e3 * _r.request_prefill_s:,.1f} ms of GPU time, decode {1e3 * _r.request_decode_s:,.1f} ms (its share of
    batch 16): \\${_r.usd_per_request:.6f} per request, \\${_r.usd_per_million_input_tokens:.3f} per million input and
    \\${_r.usd_per_million_output_tokens:.3f} per million output tokens. {
        "The prefill costs more: a long prompt makes it the larger part of the bill" if _r.request_prefill_s >
        _r.request_decode_s else
        "The decode still costs more: 500 output tokens, even sharing each step with 15 other requests, take "
        "more GPU time than one 6,000-token prefill"}; each output token costs
    {_r.usd_per_million_output_tokens / _r.usd_per_million_input_tokens:,.1f}× an input token ({
        verdicts.change_verdict(_r.usd_per_million_output_tokens / _r.usd_per_million_input_tokens)} by the
    {verdicts.CHANGE_MARGIN:.0%} rule), the prefill
    being {_r.prefill_bound}-bound at 6,000 tokens.
    """)
    return


@app.cell(hide_code=True)
def _(measured, ranked, slo_case, slo_derived):
    _at20 = capacity_slo.slo_batch(slo_case["model"], slo_case["gpu"], 20.0, slo_case["context"], slo_case["efficiency"])
    _ok = [r for r in ranked or () if r.status == "ok"]
    check_questions = [
        learner.Question(f"The derivation's case ({slo_derived.plan.model} on one {slo_derived.gpu}, "
                         f"{slo_derived.plan.context:,} tokens, {slo_derived.efficiency:.0%} of the datasheet) with an "
                         "SLO of 20 ms instead of 10: what batch does the SLO allow?", _at20.batch, "sequences"),
        learner.Question("In the ranking of section 1, with your settings: how many GPUs meet the constraints?",
                         len(_ok), "GPUs"),
        (learner.Question("This run's measured decode step (section 'Prediction against measurement'): above, at or "
                          f"below the planner's floor, by the {verdicts.CHANGE_MARGIN:.0%} rule?",
                          capacity_measured.against_floor_way(measured),
                          options=("above the floor", "at the floor", "below the floor"))
         if measured is not None else
         learner.Question("In the derivation, at what batch do the caches' reads equal the weights' read (W ÷ k)?",
                          slo_derived.parity_batch, "sequences")),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "the derivation at another SLO, the ranking with your settings — change a control and its answer changes — and this machine's measured step")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## Takeaways

    - The KV cache gets what is left of the memory the GPU reports after the runtime's reserve and the
      weights; that, divided by one sequence's cache, is the largest batch.
    - A step's floor (bytes ÷ bandwidth, FLOPs ÷ peak) is what the datasheet allows, not what an engine runs:
      plan with the step at an efficiency, measured on your engine where you can.
    - A step reads the weights once for the whole batch and each sequence's cache: the batch an SLO allows
      is ⌊(t·e·B − W) ÷ k⌋, capped by the memory, and the cost per token falls as the batch grows.
    - Compare prices within one provider, and price requests as input and output tokens: prefill and
      decode cost differently.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
