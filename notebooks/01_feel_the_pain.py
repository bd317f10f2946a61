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

    from helpers.present import expected, learner, notebook, on_gpu, plots, replay, sweep_figures
    from helpers.measure import growth, models, sweeps
    from helpers.serving import naive
    from helpers.formulas import compute_share, verdicts
    from helpers.measure.tensor_bytes import bytes_match
    from helpers.serving import tables as serving_tables
    from helpers.present.glossary import term
    from helpers.measure.hardware import device_info
    from helpers.formulas.memory import kv_bytes_per_token, kv_cache_bytes, kv_terms
    from helpers.formulas.specs import get_spec
    from helpers.formulas.stepcost import decode_cost, forward_cost
    from helpers.measure.tensor_bytes import measured_model_bytes
    from helpers.formulas.units import fmt_bytes, fmt_seconds
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()
    gpu = on_gpu.gpu_expectations(sweeps.sweep_sizes("mistral-7b", "cuda"))


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 01 · Feel the pain

    **What you will learn**

    1. Why memory grows with every {term("token")} a model holds: the {term("KV cache", "kv-cache")}.
    2. Why the {term("time to first token", "ttft")} (TTFT) grows with the prompt, and why attention's
       quadratic cost matters less for a wide model than for a narrow one.
    3. What serving requests together in a {term("batch")} gains in {term("throughput")} and what it
       costs each request in latency.
    4. What sets each {term("decode")} step — the {term("inter-token latency", "itl")} (ITL) — as the
       context grows, and where a GPU runs out of memory.

    {run_times.header("01")}

    Serving a language model hurts in four places, and each one is measured here on the model this
    machine runs. Words in blue link to the glossary (`workshop/glossary.md`). On a GPU a fifth result
    appears: the device **runs out of memory** ({term("OOM")}), and that point is a result.
    "What you should see" after each measurement says what this run's numbers show, then what a GPU
    shows, each GPU sentence labelled by where it comes from: *computed* for Mistral 7B on an {gpu["gpu"]}
    from its datasheet (`helpers.present.expected`, which asks the capacity planner: floors, which a real
    run cannot beat) or *cited* from a publication. No GPU run of this notebook is recorded yet.

    Before each central result you are asked for a **prediction**; the result shows it beside what was
    computed or measured. A self-check at the end asks three questions whose answers are this run's numbers.
    """)
    return


@app.cell
def _():
    loaded = models.load()
    sizes = sweeps.sizes_for(loaded)
    return loaded, sizes


@app.function
def serve_both(loaded, requests):
    """The same requests served one after another and together (helpers.serving.naive.compare_serving)."""
    return naive.compare_serving(loaded.model, requests, loaded.device)


@app.function
def users_measured(loaded, context: int, batches) -> dict:
    """The users sweep (helpers.measure.sweeps.users_sweep) with what its figure needs of the device it ran on:
    on CUDA the device's memory and the model's bytes, so the figure can draw memory − weights."""
    cuda = loaded.device.startswith("cuda")
    return {"users": sweeps.users_sweep(loaded, context, batches), "context": context,
            "total_memory": device_info(loaded.device).total_memory if cuda else None,
            "model_bytes": measured_model_bytes(loaded.model) if cuda else None}


@app.cell(hide_code=True)
def _(loaded, sizes):
    mo.md(f"""
    Running **{loaded.label}** ({loaded.reason}). Sweep sizes are chosen for this profile and device
    by `helpers.measure.sweeps.sweep_sizes`: prompts of {sizes.ttft_tokens[0]:,} to {sizes.ttft_tokens[-1]:,}
    tokens, {sizes.requests} requests. Timings are medians of repeats after a warm-up, with the device
    synchronised (`helpers.measure.timing`).

    Each measurement has a **Run live** button. Headless and in Jupyter every measurement runs here, as
    always; with `WORKSHOP_REPLAY=1` (a room with a slow laptop) a recorded run's values show at once,
    labelled with where and when they were recorded, and the button measures them here instead.
    """)
    return


@app.cell(hide_code=True)
def _():
    memory_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 1 · Memory grows with every token

    To produce each new token, attention compares it with a *key* vector of every earlier token and
    mixes their *value* vectors. Recomputing those for the whole history at every step would be
    wasteful, so the model keeps them: the {term("KV cache", "kv-cache")}. Run the
    {term("prefill")} (one {term("forward pass")} over a prompt of *n* tokens) into a real
    `transformers` {term("DynamicCache")} and count the bytes of the key and value tensors it holds. The
    line is the formula, derived first.
    """), memory_button])
    return (memory_button,)


@app.cell(hide_code=True)
def _(loaded):
    _t = kv_terms(loaded.spec, loaded.dtype)
    _k = _t.terms
    _n = 1000
    mo.md(f"""
    **The formula, derived.** Attention in every layer reads, for each earlier token, one key and one value
    vector per *KV head* (the key/value heads, fewer than the query heads under {term("GQA")}); each vector has
    head_dim numbers, each stored in the cache's dtype.

    1. One token, one layer: 2 (K and V) × kv_heads × head_dim numbers.
    2. Every layer keeps its own: × layers.
    3. Each number takes the dtype's bytes: × bytes.

    `KV bytes per token = 2 · layers · kv_heads · head_dim · bytes`, and *n* tokens hold *n* times that.

    **Worked example** (`helpers.formulas.memory.kv_terms`, over the config `helpers.formulas.specs` reads):
    the model running here, {loaded.label}, has layers = {_k["layers"]}, kv_heads = {_k["kv_heads"]},
    head_dim = {_k["head_dim"]}, and its cache is {loaded.dtype}, bytes = {_k["bytes_per_element"]:g}:

    - per token: 2 × {_k["layers"]} × {_k["kv_heads"]} × {_k["head_dim"]} × {_k["bytes_per_element"]:g} B = **{_t.bytes_per_token:,} B**
    - a prompt of {_n:,} tokens: {_n:,} × {_t.bytes_per_token:,} B = {fmt_bytes(kv_cache_bytes(loaded.spec, _n, 1, loaded.dtype))}
      (`helpers.formulas.memory.kv_cache_bytes`)
    """)
    return


@app.cell(hide_code=True)
def _():
    _m = get_spec("mistral-7b-v0.1")
    kv_box = learner.prediction(
        f"Mistral 7B has {_m.num_layers} layers and {_m.num_heads} query heads that share {_m.num_kv_heads} KV heads, "
        f"head_dim {_m.head_dim}, and caches in bf16 (2 bytes a number). How many bytes of KV cache does it hold "
        "per token?", "bytes")
    kv_box
    return (kv_box,)


@app.cell
def _(loaded, memory_button, sizes):
    memory_run = replay.measure("01/memory", models.run_on, loaded, sweeps.memory_growth, sizes.memory_tokens,
                                run=memory_button.value, profile=loaded.profile, device=loaded.device)
    memory_on, memory = memory_run.value
    memory_said = growth.memory_verdicts(memory, memory_on.spec, memory_on.dtype)
    sweep_figures.memory_figure(memory, memory_run.source(memory_on), memory_on.spec, memory_on.dtype)
    return memory, memory_on, memory_run, memory_said


@app.cell(hide_code=True)
def _(memory_run):
    memory_run.note()
    return


@app.cell(hide_code=True)
def _(memory, memory_on, memory_said):
    _ok = memory[~memory["oom"]]
    _window = memory_on.spec.sliding_window
    _note = (f" This model's layers slide over a {_window:,}-token window, so past {_window - 1:,} tokens "
             "the cache stops growing (the formula honours the window)." if _window else "")
    _peak = (" On CUDA the red crosses are the allocator's peak above the weights: the cache plus the "
             "prefill's activations." if _ok["peak_above_weights_bytes"].notna().any() else "")
    mo.md(f"""
    Per token this model caches **{fmt_bytes(kv_bytes_per_token(memory_on.spec, memory_on.dtype))}**
    ({memory_on.dtype}). The measured bytes are {memory_said[0]}{f", up to {fmt_bytes(int(_ok['cache_bytes'].max()))} at {int(_ok['tokens'].max()):,} tokens" if len(_ok) else ""}.{_note}{_peak}
    """)
    return


@app.cell
def _(kv_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 1 MiB); in marimo, type it in the box above
    _t = kv_terms("mistral-7b-v0.1", "bf16")
    _m = get_spec("mistral-7b-v0.1")
    _k = _t.terms
    _share = _m.num_heads // _m.num_kv_heads
    mo.vstack([learner.beside(kv_box, _given, _t.bytes_per_token, shown=lambda v: f"{v:,.0f} B",
        higher=f"Every one of the {_m.num_layers} layers keeps its own cache, and each keeps both a key and a value "
               "vector per KV head: the factors layers and 2.",
        lower=f"Only the {_m.num_kv_heads} KV heads are cached, not the {_m.num_heads} query heads ({_share} query heads "
              f"share each under GQA), and bf16 stores a number in {_k['bytes_per_element']:g} bytes, not fp32's 4.",
        within="2 · layers · kv_heads · head_dim · bytes, term by term."),
        mo.md(f"""
        Mistral 7B, term by term: 2 × {_k["layers"]} × {_k["kv_heads"]} × {_k["head_dim"]} × {_k["bytes_per_element"]:g} B =
        {fmt_bytes(_t.bytes_per_token)} per token: {_t.bytes_per_token * 4096 / 2**30:.1f} GiB for one 4k-token
        conversation.
        """)])
    return


@app.cell
def _(memory, memory_on, memory_run):
    plots.table(memory, plots.source_label(memory_run.source(memory_on)))
    return


@app.cell(hide_code=True)
def _(memory_said):
    expected.should_see([f"the measured cache is {memory_said[0]}", *memory_said[1:]], [
        expected.computed(f"Mistral 7B in bf16 caches {fmt_bytes(gpu['kv_bytes_per_token'])} per token; v0.1 slides a "
                          f"{gpu['window']:,}-token window, so the formula's line stops growing there and stays at "
                          f"{fmt_bytes(gpu['cache_at_longest'])} up to {gpu['longest']:,} tokens",
                          "helpers.formulas.memory.kv_cache_bytes"),
    ])
    return


@app.cell(hide_code=True)
def _():
    ttft_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 2 · Time to first token grows with the prompt

    {term("TTFT")} (time to first token), for a request served alone, is its prefill: one forward pass
    over the whole prompt that fills the cache and yields the first token. Every prompt token goes
    through every weight matrix (work ∝ *n*), and attention compares every token with every earlier
    one (work ∝ *n²*). Counted in {term("FLOP", "flop")}s (floating-point operations), a forward pass
    costs about 2 per parameter per token plus attention's share.
    """), ttft_button])
    return (ttft_button,)


@app.cell(hide_code=True)
def _(sizes):
    _n0, _n1 = sizes.ttft_tokens[-2:]
    ttft_box = learner.prediction(
        f"The prompt doubles from {_n0:,} to {_n1:,} tokens. How many times the TTFT at {_n0:,} tokens does the model "
        f"running here take at {_n1:,}? (2 if all its work grew with n, 4 if all of it grew with n², 1 if none "
        "grew)", "×")
    ttft_box
    return (ttft_box,)


@app.cell
def _(loaded, sizes, ttft_button):
    ttft_run = replay.measure("01/ttft", models.run_on, loaded, sweeps.ttft_sweep, sizes.ttft_tokens,
                              sizes.ttft_repeats, run=ttft_button.value, profile=loaded.profile,
                              device=loaded.device)
    ttft_on, ttft = ttft_run.value
    ttft_fit = growth.fit_or_none(ttft)
    ttft_doubling = growth.last_doubling(ttft)     # the ratio the prediction asks for (None: no doubling ran)
    ttft_said = [*growth.growth_verdicts(ttft_fit), growth.order_verdict(ttft, "tokens", "ttft_s", "prompt")] if ttft_fit else []
    sweep_figures.ttft_figure(ttft, ttft_fit, ttft_run.source(ttft_on))
    return ttft, ttft_doubling, ttft_fit, ttft_on, ttft_run, ttft_said


@app.cell(hide_code=True)
def _(ttft_run):
    ttft_run.note()
    return


@app.cell
def _(ttft_box, ttft_doubling, ttft_fit):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 3); in marimo, type it in the box above
    _d = ttft_doubling
    if _d is None:
        _out = mo.md("No prompt ran beside half of it (out of memory): there is no measured doubling to set beside "
                     "the prediction.")
    else:
        _quad = (verdicts.share(ttft_fit.c * _d.n1**2, ttft_fit.predict(_d.n1), f"the fitted time at {_d.n1:,} tokens").words
                 if ttft_fit else None)
        _fixed = (verdicts.share(ttft_fit.a, ttft_fit.predict(_d.n0), f"the fitted time at {_d.n0:,} tokens").words
                  if ttft_fit else None)
        _out = learner.beside(ttft_box, _given, _d.ratio, shown=lambda v: f"{v:,.2f}× ({_d.n0:,} → {_d.n1:,} tokens)",
            higher="Attention compares every prompt token with every earlier one, so its work grows 4× when the "
                   "prompt doubles" + (f": by the fitted law the n² term is {_quad}." if _quad else "."),
            lower="Part of a prefill's time does not grow with the prompt: a fixed cost per forward (on a CPU, "
                  "Python and operator dispatch; on a GPU, reading every weight once)"
                  + (f": by the fitted law the constant term is {_fixed}." if _fixed else "."),
            within="The weights' work (∝ n) doubles, attention's (∝ n²) quadruples and a fixed cost stays: "
                   "the ratio is their mix at this length.")
    mo.vstack([_out, mo.md(f"Measured: {_d.reading().words}." if _d else "")])
    return


@app.cell(hide_code=True)
def _(ttft_fit):
    _law = ttft_fit.describe() if ttft_fit else "fewer than three prompt lengths ran, too few to fit a law."
    mo.md(f"""
    **Growth law, fitted** (`helpers.measure.growth.fit_growth`, non-negative least squares on relative error
    over the medians): {_law}

    A constant term is fixed cost per forward (on a CPU with the tiny model: Python and operator
    dispatch); the linear term is the weights' work per token; the quadratic term is attention, whose
    share of a prefill's FLOPs the next cells compute.
    """)
    return


@app.cell
def _(ttft, ttft_on, ttft_run):
    plots.table(ttft, f"{plots.source_label(ttft_run.source(ttft_on))}; times in seconds (median and p90 of the repeats)")
    return


@app.cell(hide_code=True)
def _(ttft, ttft_on, ttft_said):
    _n = int(ttft[~ttft["oom"]]["tokens"].max()) if (~ttft["oom"]).any() else None
    _flops = compute_share.attention_share_verdict

    _here = list(ttft_said) or ["fewer than three prompt lengths ran: no law to read"]
    if _n:
        _here.append(f"by {_n:,} tokens this model's attention is {_flops(ttft_on.spec, _n).words}, computed from its "
                     "config")
    _lo, _hi = gpu["ttft_floor_s"].items()
    _n0, _n1 = list(gpu["ttft_floors_s"])[-2:]
    _law = growth.local_growth_verdict(_n0, gpu["ttft_floors_s"][_n0], _n1, gpu["ttft_floors_s"][_n1], "the floor")
    expected.should_see(_here, [
        expected.computed(f"Mistral 7B on an {gpu['gpu']}: at least {fmt_seconds(_lo[1])} for {_lo[0]:,} tokens (reading "
                          f"{gpu['weight_bytes'] / 1e9:,.1f} GB of weights once) and {fmt_seconds(_hi[1])} for {_hi[0]:,} "
                          "tokens (its FLOPs at the datasheet's peak); a measured prefill takes at least its floor",
                          "helpers.present.on_gpu.gpu_plan, the capacity planner's prefill floor"),
        expected.computed(f"{_law.words}; attention is {_flops('mistral-7b-v0.1', _hi[0]).words} at {_hi[0]:,}",
                          "helpers.measure.growth.local_growth_verdict over the planner's floors; "
                          "helpers.formulas.compute_share.flop_terms"),
    ])
    return


@app.cell(hide_code=True)
def _():
    share_lengths = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    share_prompt = mo.ui.slider(steps=share_lengths, value=notebook.env_default("WORKSHOP_SHARE_PROMPT", 4096, share_lengths),
                                show_value=True, label="prompt length (tokens)")
    mo.vstack([mo.md("""
    ### Attention's share of the prefill falls as the model gets wider

    Per prompt token, the weight matmuls cost 2 FLOPs per parameter — and the parameters of a layer
    grow with the *square* of its width — while attention costs 4 × heads × head_dim per earlier
    token, which grows only *linearly* with the width. So the wider the model, the longer the prompt
    must be before attention's FLOPs catch up with the matmuls'. Computed from each config
    (`helpers.formulas.compute_share.attention_shares`, over the FLOP counts of `helpers.formulas.roofline`) at the prompt
    length you pick (a length beyond a model's context is left empty):
    """), share_prompt, notebook.static_note({"WORKSHOP_SHARE_PROMPT": "the prompt length (512 … 131072 tokens)"})])
    return (share_prompt,)


@app.cell
def _(loaded, share_prompt):
    share_rows = compute_share.attention_shares(tokens=(share_prompt.value,), extra={f"{loaded.profile} (this run)": loaded.spec})
    plots.table(compute_share.attention_share_frame(share_rows), "computed from each config.json: attention's share of one prompt's prefill FLOPs "
                            "(matmuls + attention + output head)")
    return (share_rows,)


@app.cell(hide_code=True)
def _(loaded, share_prompt, share_rows):
    _rows = {r.model: r for r in share_rows}
    _mine = share_rows[0]
    _n = share_prompt.value
    _v1 = compute_share.attention_crossover("mistral-7b-v0.1")
    _v3 = compute_share.attention_crossover("mistral-7b-v0.3")
    _tiny = compute_share.attention_crossover(loaded.spec)
    _ctx3 = _rows["mistral-7b-v0.3"].context
    _w = _rows["mistral-7b-v0.1"].window
    _at = {name: r.share_pct[_n] for name, r in _rows.items()}
    _v1spec, _v3spec = "mistral-7b-v0.1", "mistral-7b-v0.3"
    _share = compute_share.attention_share_verdict

    mo.md(f"""
    At **{_n:,} tokens** attention is {_mine.share_pct[_n]:.1f} % of the prefill's FLOPs for the model running here and
    {_at["mistral-7b-v0.3"]:.1f} % for Mistral 7B v0.3 (v0.1, whose window caps what each token attends to:
    {_at["mistral-7b-v0.1"]:.1f} %). The model running here (hidden size {_mine.hidden_size:,}) reaches
    attention = matmuls at **{f"{_tiny:,} tokens" if _tiny else "no length"}**. Mistral 7B (hidden size 4,096) would need
    **{f"{_v3:,} tokens" if _v3 else "no length up to 2²² tokens"}** without a window (v0.3's shape), which is
    {"beyond" if _v3 and _v3 > _ctx3 else "within"} v0.3's {int(_ctx3):,}-token context; v0.1, whose layers see at most
    {_w:,} earlier tokens, gets there **{"never" if _v1 is None else f"at {_v1:,} tokens"}** — at its window attention
    is {_share(_v1spec, _w).words}. At v0.3's whole context ({int(_ctx3):,} tokens) attention is
    {_share(_v3spec, int(_ctx3)).words}.
    """)
    return


@app.cell(hide_code=True)
def _():
    serving_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 3 · Throughput: one after another, then together

    The same requests, all arriving at time 0, served two ways:

    - **one after another**, as a naive local server does: a request's prefill, its decode steps, then
      the next request;
    - **together in one batch**: prompts {term("left-padded", "left-padding")} to the longest with an attention
      mask, one prefill forward for all of them, then one forward per decode step for all of them, reusing one
      KV cache.

    Both ways pick each next token by {term("greedy decoding")} (the most probable one): the same tokens from
    both ways are the check that the padding, the mask and the positions are right.

    The timeline shows, for each request, the time it waited (grey), its prefill up to the first
    token (brown), its decoding up to its last token (cyan) and, in the batch, the time its row sat
    idle until the longest request was done (hatched).
    """), serving_button])
    return (serving_button,)


@app.cell
def _(loaded, serving_button, sizes):
    requests = naive.make_requests(sizes.requests, sizes.prompt_range, sizes.new_tokens_range,
                                     vocab=loaded.model.config.vocab_size)
    served_run = replay.measure("01/serving", models.run_on, loaded, serve_both, requests, run=serving_button.value,
                                profile=loaded.profile, device=loaded.device)
    served_on, served = served_run.value
    served_source = served_run.source(served_on)
    served_said = naive.batching_verdicts(served)   # None when a mode ran out of memory
    sweep_figures.timeline_figure(served.results, served_source)
    return served, served_on, served_run, served_said, served_source


@app.cell(hide_code=True)
def _(served_run):
    served_run.note()
    return


@app.cell
def _(served, served_source):
    plots.table(serving_tables.serve_summary_frame(served.results), f"{plots.source_label(served_source)}; times in seconds after all requests arrived")
    return


@app.cell(hide_code=True)
def _(served, served_on, served_said):
    _seq, _bat = served.sequential, served.batched
    if _seq is None or _bat is None:
        _out = mo.md(f"**The device ran out of memory** serving these requests ({served.oom_message}); the mode "
                     "that ran is shown above.")
    else:
        _same = sum(a.tokens == b.tokens for a, b in zip(_seq.timings, _bat.timings))
        _check = ("identical in both modes, so the padding, mask and positions are right" if _same == len(_seq.timings)
                  else f"identical for {_same} of {len(_seq.timings)} requests: in {served_on.dtype}, batched kernels round "
                  "differently and random weights leave near-ties between the top two tokens, so greedy paths can part "
                  "(the tests check exact agreement on the tiny model in fp32)")
        _out = mo.md(f"""
        Together, the same {len(_bat.timings)} requests produce **{served_said["throughput"]}**
        ({_seq.tokens_per_s:,.0f} → {_bat.tokens_per_s:,.0f} tokens/s) with
        {_bat.forward_calls} forward calls instead of {_seq.forward_calls}: a decode step reads the
        weights once whether it produces one token or {len(_bat.timings)}. The greedy outputs are {_check}.

        The batch is *static*: a request that has its tokens keeps its row until the longest one is done
        ({served_said["idle"]} here), and a new request would have to wait for the whole
        batch. Continuous batching — admitting a new request into a freed row at the next step — removes
        that waste; it comes with the serving engines later in the workshop.
        """)
    _out
    return


@app.cell
def _(served, served_source):
    plots.table(serving_tables.requests_frame(served.results), f"{plots.source_label(served_source)}; every request, seconds after all arrived")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ### What batching costs each request

    Throughput is the server's view. Each user sees latency: the {term("TTFT")} and the {term("ITL")}
    (here the median decode step of a request). Side by side, per mode
    (`helpers.serving.naive.latency_cost`), and below it each figure of the batch against the same figure one
    after another:
    """)
    return


@app.cell
def _(served, served_source):
    latency = naive.latency_cost(served)
    plots.table(serving_tables.latency_frame(latency), f"{plots.source_label(served_source)}; the time to first token includes waiting, "
                         "the prefill does not")
    return (latency,)


@app.cell
def _(latency):
    # Each figure of the batch ÷ the same figure one after another: the reasoning below reads these.
    batch_cost = (None if len(latency) < 2 else pd.Series({
        "throughput (tokens/s)": latency[1].tokens_per_s / latency[0].tokens_per_s,
        "decode step": latency[1].median_decode_step_ms / latency[0].median_decode_step_ms,
        "prefill": latency[1].median_prefill_ms / latency[0].median_prefill_ms,
        "time to first token": latency[1].median_ttft_ms / latency[0].median_ttft_ms,
    }, name="together ÷ one after another"))
    batch_cost.to_frame().round(2) if batch_cost is not None else mo.md("Only one mode ran (out of memory).")
    return (batch_cost,)


@app.cell(hide_code=True)
def _(served_said):
    if served_said is None:
        _text = "Only one mode ran (out of memory), so there is nothing to set side by side."
    else:
        _v = served_said
        _text = f"""
        Batching gives **{_v["throughput"]}**. Each decode step is **{_v["step"]}** than one sequence's step,
        and the one prefill of the whole padded batch is {_v["prefill"]} than a single prompt's. The median user
        gets the first token **{_v["ttft"]}** together: one after another, {_v["waiting"]}, and {_v["last_first_token"]}.

        This is the {term("quality–latency–throughput triangle", "quality-latency-throughput-triangle")}:
        with a GPU and a model fixed, a bigger batch buys throughput (users, cost per token) with latency;
        a better model (bigger, longer contexts, less compressed) costs both. Premium chat sets a latency
        target ({term("SLO")}) first and batches as much as it allows; agents running in the background
        batch hard and accept slower steps.
        """
    mo.md(_text)
    return


@app.cell(hide_code=True)
def _():
    gpu_batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    gpu_batch = mo.ui.slider(steps=gpu_batches, value=notebook.env_default("WORKSHOP_GPU_BATCH", 64, gpu_batches), show_value=True,
                             label=f"batch on an {gpu['gpu']} (sequences of 1,024 tokens)")
    mo.vstack([mo.md(f"""
    **On a GPU, computed.** The capacity planner's floor for Mistral 7B on
    an {gpu["gpu"]} (`helpers.present.on_gpu.gpu_plan`: the bytes a step reads ÷ the datasheet's bandwidth, or its
    FLOPs ÷ the peak), for the batch you pick, against batch 1:
    """), gpu_batch, notebook.static_note({"WORKSHOP_GPU_BATCH": "the batch (1 … 256)"})])
    return (gpu_batch,)


@app.cell
def _(gpu_batch):
    gpu_one, gpu_many = on_gpu.gpu_plan(context=1024, batch=1), on_gpu.gpu_plan(context=1024, batch=gpu_batch.value)
    _cost = decode_cost(expected.REFERENCE_MODEL, 1024, gpu_batch.value, "bf16")
    _weights = verdicts.share(_cost.weight_read_bytes, _cost.bytes, "the bytes this step reads")
    mo.md(f"""
    **Batch {gpu_batch.value:,}**: {"a step of " + f"{gpu_many.step_floor_s * 1e3:,.2f} ms ({gpu_many.bound}-bound) against "
    f"{gpu_one.step_floor_s * 1e3:,.2f} ms at batch 1 — **{gpu_many.step_floor_s / gpu_one.step_floor_s:,.2f}× the step for "
    f"{gpu_batch.value:,}× the tokens**, {gpu_many.batch / gpu_many.step_floor_s:,.0f} tokens/s against "
    f"{1 / gpu_one.step_floor_s:,.0f}. The weights, read once for the whole batch, are {_weights.words}; each sequence "
    "adds its own cache." if gpu_many.fits else f"does not fit: {gpu_many.reason}."}
    """)
    return


@app.cell(hide_code=True)
def _(served_said):
    _here = (["only one mode ran (out of memory): nothing to set side by side"] if served_said is None else
             [f"together: {served_said['of_batch']}",
              f"each batched decode step {served_said['step']} than one sequence's",
              f"hatched idle rows where the static batch waits for its longest request: {served_said['idle']}"])
    _one, _eight = gpu["batched_step_s"][1], gpu["batched_step_s"][8]
    expected.should_see(_here, [
        expected.computed(f"Mistral 7B on an {gpu['gpu']}, 1,024 tokens each: the planner's floor step for 8 sequences is "
                          f"{verdicts.times_as(_eight, _one, 'the step for one').words}, so 8 sequences give "
                          f"{verdicts.factor(8 * _one / _eight)} the tokens per second of one",
                          "helpers.present.on_gpu.gpu_plan (the capacity planner's floor)"),
    ])
    return


@app.cell(hide_code=True)
def _():
    itl_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 4 · Inter-token latency as the context grows

    After the prefill, each new token is one {term("decode")} step: one token per sequence goes through
    the model and attends to every cached key and value (reused, not recomputed). Its duration is the
    {term("ITL")}. The step reads all the weights plus the whole cache from memory, and does
    {forward_cost(expected.REFERENCE_MODEL, 1, 1023).intensity:,.2f} FLOPs per byte it reads for Mistral 7B at batch 1
    and 1,024 tokens of context (`helpers.formulas.stepcost`), below an {gpu["gpu"]}'s ridge of
    {gpu["peak_flops"] / gpu["bandwidth"]:,.0f} FLOPs per byte, so there the bytes set its floor — it is
    {term("memory-bound")} — and the bytes grow with the context.
    """), itl_button])
    return (itl_button,)


@app.cell
def _(itl_button, loaded, sizes):
    itl_run = replay.measure("01/itl", models.run_on, loaded, sweeps.itl_sweep, sizes.itl_contexts, sizes.itl_steps,
                             run=itl_button.value, profile=loaded.profile, device=loaded.device)
    itl_on, itl = itl_run.value
    itl_said = growth.itl_verdicts(itl, itl_on.spec, itl_on.dtype)
    sweep_figures.itl_figure(itl, itl_run.source(itl_on))
    return itl, itl_on, itl_run, itl_said


@app.cell(hide_code=True)
def _(itl_run):
    itl_run.note()
    return


@app.cell(hide_code=True)
def _(itl, itl_on, itl_said):
    _ok = itl[~itl["oom"]]
    _w = decode_cost(itl_on.spec, 0, 1, itl_on.dtype).weight_read_bytes
    _kv = kv_bytes_per_token(itl_on.spec, itl_on.dtype) * int(_ok.iloc[-1]["context"]) if len(_ok) else 0
    mo.md("No context ran: the device was out of memory at the first point." if _ok.empty else f"""
    Each step reads the weights ({fmt_bytes(_w)}) and the cache ({fmt_bytes(_kv)} at
    {int(_ok.iloc[-1]['context']):,} tokens, before any window). {itl_said[0].words[0].upper() + itl_said[0].words[1:]};
    {itl_said[1]}. Notebook 03 puts these steps against the device's bandwidth.
    """)
    return


@app.cell
def _(itl, itl_on, itl_run):
    plots.table(itl, f"{plots.source_label(itl_run.source(itl_on))}; step times in seconds (median and p90)")
    return


@app.cell(hide_code=True)
def _(itl_said):
    _c0, _c1 = gpu["step_floor_s"]
    _grow, _cache = growth.bytes_growth_verdicts(gpu["model"], "bf16", _c0, _c1)
    expected.should_see(list(itl_said), [
        expected.computed(f"Mistral 7B on an {gpu['gpu']}: a step can be no shorter than reading its bytes at "
                          f"{gpu['bandwidth'] / 1e12:,.2f} TB/s (the memory-bound floor): "
                          f"{gpu['step_floor_s'][_c0] * 1e3:,.2f} ms at {_c0:,} tokens of context, "
                          f"{gpu['step_floor_s'][_c1] * 1e3:,.2f} ms at {_c1:,} (v0.1's window stops the cache at "
                          f"{gpu['window']:,} tokens); {_grow}, and {_cache}",
                          "helpers.present.on_gpu.gpu_plan; helpers.measure.growth.bytes_growth_verdicts"),
        *expected.eager_against_floor(),
    ])
    return


@app.cell(hide_code=True)
def _(loaded, sizes):
    users_button = replay.run_button()
    _c = sizes.users_context
    users_contexts = [c for c in (_c // 4, _c // 2, _c, 2 * _c)      # 2× the sweep's at most: it re-measures live
                      if c >= 16 and c + 2 <= loaded.model.config.max_position_embeddings]
    users_context_pick = mo.ui.slider(steps=users_contexts, value=notebook.env_default(
        "WORKSHOP_USERS_CONTEXT", _c, users_contexts), show_value=True, debounce=True,
        label="tokens per sequence (the sweep measures again when it changes)")
    _budget_names = ["1 MiB", "2 MiB", "4 MiB", "8 MiB", "16 MiB", "32 MiB", "64 MiB", "128 MiB", "256 MiB", "512 MiB",
                     "1 GiB", "2 GiB", "4 GiB", "8 GiB", "16 GiB", "32 GiB", "64 GiB", "128 GiB", "256 GiB"]
    budgets = {_name: 2**(20 + _k) for _k, _name in enumerate(_budget_names)}   # powers of two, one progression
    _room = (device_info(loaded.device).total_memory - measured_model_bytes(loaded.model)
             if loaded.device.startswith("cuda") else
             kv_cache_bytes(loaded.spec, _c + 1, max(sizes.users_batches), loaded.dtype))
    _default = max((k for k, v in budgets.items() if v <= _room), key=budgets.get, default="1 MiB")
    budget_pick = mo.ui.dropdown(options=_budget_names, value=notebook.env_default(
        "WORKSHOP_USERS_BUDGET", _default, _budget_names), label="your budget for the KV cache")
    mo.vstack([mo.md("""
    ## 5 · How many users fit — until the device runs out

    Concurrent sequences of a fixed context, prefilled together into one cache, then one decode step.
    On a GPU the batch doubles until the device runs out of memory: the sweep stops there and marks
    the point. On a CPU the sweep stays small: host memory is not something to exhaust on purpose, so
    **set a budget for the cache yourself**: the figure draws it against the measured cache and counts the
    sequences that fit in it. Change the tokens per sequence and the sweep measures again, here (on a GPU,
    each change runs it again up to the out-of-memory point).
    """), users_button, users_context_pick, budget_pick, notebook.static_note({
        "WORKSHOP_USERS_CONTEXT": f"tokens per sequence ({', '.join(f'{c:,}' for c in users_contexts)})",
        "WORKSHOP_USERS_BUDGET": "the budget for the cache (1 MiB, 2 MiB, 4 MiB … 256 GiB)"})])
    return budget_pick, budgets, users_button, users_context_pick


@app.cell
def _(loaded, sizes, users_button, users_context_pick):
    # a context other than the sweep's own is measured here, also in replay mode (no recording has it)
    users_run = replay.measure("01/users", models.run_on, loaded, users_measured, users_context_pick.value,
                               sizes.users_batches, run=users_button.value or users_context_pick.value != sizes.users_context,
                               profile=loaded.profile, device=loaded.device)
    users_on, users_result = users_run.value
    users = users_result["users"]
    return users, users_on, users_result, users_run


@app.cell
def _(budget_pick, budgets, users, users_on, users_result, users_run):
    users_budget = growth.users_in_budget(users, budgets[budget_pick.value], users_result["context"])
    sweep_figures.users_figure(users, users_run.source(users_on), users_result["total_memory"],
                               users_result["model_bytes"], budget=users_budget)
    return (users_budget,)


@app.cell(hide_code=True)
def _(users_run):
    users_run.note()
    return


@app.cell(hide_code=True)
def _(users, users_budget, users_result):
    _ok = users[~users["oom"]]
    _oom = users.attrs.get("oom_at")
    _ctx = users_result["context"]
    if _oom is not None and _ok.empty:
        _text = (f"The device **ran out of memory at the first batch** ({_oom:,} sequences of "
                 f"{_ctx:,} tokens): nothing is left beside the weights.")
    elif _oom is not None:
        _text = (f"The device **ran out of memory at {_oom:,} sequences** of {_ctx:,} tokens; the "
                 f"largest batch that ran was {int(_ok['batch'].max()):,}, with a cache of "
                 f"{fmt_bytes(int(_ok['cache_bytes'].max()))}. The sweep ended there and the memory was given back.")
    else:
        _text = (f"All {len(_ok)} batches ran (up to {int(_ok['batch'].max()):,} sequences × {_ctx:,} "
                 f"tokens, a cache of {fmt_bytes(int(_ok['cache_bytes'].max()))}); no out-of-memory point on this "
                 "device with these sizes.")
    _fit = f" **Your budget**: {users_budget.reading().words}." if users_budget else ""
    mo.md(_text + _fit + " Notebook 02 turns this into an equation: memory − weights − overhead, divided by the "
          "cache per sequence.")
    return


@app.cell
def _(users, users_on, users_run):
    plots.table(users, plots.source_label(users_run.source(users_on)))
    return


@app.cell(hide_code=True)
def _(users):
    _oom, _fit = gpu["users_oom_at"], gpu["users_fit"]
    expected.should_see(growth.users_verdicts(users), [
        expected.gpu_memory_on_gpu(gpu["gpu"]),
        expected.computed(f"Mistral 7B on an {gpu['gpu']}: beside {gpu['weight_bytes'] / 1e9:,.2f} GB of weights those "
                          f"{gpu['memory_bytes'] / 1e9:,.2f}·10⁹ B hold the cache of {_fit:,} sequences of "
                          f"{gpu['users_context']:,} tokens, no overhead counted; the doubling sweep's first batch past "
                          f"that is {gpu['users_cache_oom_at']:,}",
                          "helpers.present.on_gpu.gpu_users (helpers.formulas.memory.max_users)"),
        expected.computed(f"the prefill of {_oom:,} sequences also holds, at least, one MLP activation of "
                          f"{gpu['activation_at_oom'] / 1e9:,.1f} GB: weights + cache + that activation come to "
                          f"{gpu['needs_at_oom'] / 1e9:,.1f} GB, more than the memory: by this count the sweep runs out of "
                          f"memory at {_oom:,} sequences" if _oom else
                          "every batch of the sweep fits weights + cache + its prefill's largest activation",
                          "helpers.formulas.memory.prefill_activation_bytes, kv_cache_bytes"),
    ])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Exercises
    """)
    return


@app.cell
def _():
    _b = kv_cache_bytes("mistral-7b-v0.1", 4096, 8, "bf16")
    _b16 = kv_cache_bytes("mistral-7b-v0.3", 16384, 8, "bf16")
    _b1 = kv_cache_bytes("mistral-7b-v0.1", 16384, 8, "bf16")
    notebook.exercise(1, """How much KV cache do 8 users with 4,096 tokens each need on Mistral 7B v0.1 in bf16?
    And with 16,384 tokens each, on v0.1 and on v0.3? Use the command line:
    `python -m helpers kv --model mistral-7b-v0.1 --tokens 4096 --batch 8`.""", f"""
    4,096 tokens × 8 users: **{fmt_bytes(_b)}** (131,072 B per token). At 16,384 tokens v0.3 needs
    **{fmt_bytes(_b16)}** — four times as much — but v0.1 stays at **{fmt_bytes(_b1)}**: its sliding window keeps at
    most 4,096 tokens per layer (`--model mistral-7b-v0.3 --tokens 16384 --batch 8` against
    `--model mistral-7b-v0.1 …`).""")
    return


@app.cell
def _():
    from helpers.formulas.specs import get_spec as _get_spec

    _l = compute_share.attention_crossover("llama-3.1-8b")
    _q = compute_share.attention_crossover("qwen2.5-7b")
    _qs, _ls = _get_spec("qwen2.5-7b"), _get_spec("llama-3.1-8b")
    # the crossing by hand: prefill attention 4·L·H·hd·n(n+1)/2 ≥ matmuls 2·P·n  ⇔  n + 1 ≥ P / (L·H·hd)
    _p = {m: compute_share.flop_terms(m, 1).linear // 2 for m in ("llama-3.1-8b", "qwen2.5-7b")}
    _lhd = {m: sp.num_layers * sp.num_heads * sp.head_dim for m, sp in (("llama-3.1-8b", _ls), ("qwen2.5-7b", _qs))}
    notebook.exercise(2, """Llama 3.1 8B reads up to 128k tokens. From what prompt length does its prefill spend more
    FLOPs in attention than in the weight matmuls? Call `helpers.formulas.compute_share.attention_crossover("llama-3.1-8b")`,
    then try `"qwen2.5-7b"` (a smaller hidden size, a wider MLP). What decides it?""", f"""
    Llama 3.1 8B: **{_l:,} tokens**; Qwen 2.5 7B: **{_q:,} tokens**, {"later" if _q > _l else "sooner"} with a hidden
    size of {_qs.hidden_size:,} against Llama's {_ls.hidden_size:,}. What decides it is the ratio of the matmuls'
    parameters P (2 FLOPs each per token) to layers × heads × head_dim (attention's 4 FLOPs per earlier token
    for each): prefill attention 4·L·H·hd·n(n+1)/2 reaches the matmuls' 2·P·n at n + 1 = P ÷ (L·H·hd).
    Llama: {_p["llama-3.1-8b"]:,} ÷ {_lhd["llama-3.1-8b"]:,}; Qwen: {_p["qwen2.5-7b"]:,} ÷ {_lhd["qwen2.5-7b"]:,}
    (its MLP is {_qs.intermediate_size:,} wide against {_ls.intermediate_size:,}) — the values above, rounded up, less one.""")
    return


@app.cell
def _(served, served_said):
    notebook.exercise(3, """Ask the capacity planner what batching does on a GPU:
    `python -m helpers capacity --model mistral-7b-v0.1 --gpu "H100 SXM" --context 1024 --batch 1`, then
    `--batch 64`. How much longer is a decode step of 64 sequences than a step of one, and how many more
    tokens per second does it give?""", f"""
    The planner's floors on an {gpu["gpu"]}: {gpu["batched_step_s"][1] * 1e3:,.2f} ms for one sequence,
    {gpu["batched_step_s"][64] * 1e3:,.2f} ms for 64 — {gpu["batched_step_s"][64] / gpu["batched_step_s"][1]:,.2f}× the
    time for 64× the tokens, so about {64 * gpu["batched_step_s"][1] / gpu["batched_step_s"][64]:,.0f}× the throughput.
    Each user's ITL rises by the same {gpu["batched_step_s"][64] / gpu["batched_step_s"][1]:,.2f}×: that is the
    latency side of the triangle. {"Here, in section 3, a batch of " + str(len(served.batched.timings)) + " made each measured step "
    + served_said["step"].words + " than one sequence's." if served_said else ""}""")
    return


@app.cell(hide_code=True)
def _(budget_pick, budgets, memory_on, ttft_doubling, ttft_fit, users_result):
    _spec, _dtype = memory_on.spec, memory_on.dtype
    _slots = _spec.sliding_window - 1 if _spec.sliding_window else None   # as the DynamicCache keeps a window
    _n, _b = 4000, 3
    _c2 = 2 * users_result["context"]
    _per2 = kv_cache_bytes(_spec, _c2 + 1, 1, _dtype, window_slots=_slots)
    _laws = ("slower than linear", "linear", "between linear and quadratic", "quadratic")
    if ttft_fit is not None:
        _growth = learner.Question(f"In section 2, how did the TTFT grow at {ttft_fit.n_max:,} tokens, by the fitted "
                                   "law's exponent?", growth.growth_law(ttft_fit.exponent), options=_laws)
    elif ttft_doubling is not None:
        _growth = learner.Question(f"In section 2, how many times the TTFT at {ttft_doubling.n0:,} tokens did "
                                   f"{ttft_doubling.n1:,} tokens take?", ttft_doubling.ratio, "×")
    else:
        _growth = learner.Question("How many bytes of KV cache does Mistral 7B hold per token in bf16?",
                                   kv_bytes_per_token("mistral-7b-v0.1", "bf16"), "B")
    check_questions = [
        learner.Question(f"By section 1's formula, how many bytes of KV cache do {_b} sequences of {_n:,} tokens take "
                         f"on the model running here ({_dtype})?",
                         kv_cache_bytes(_spec, _n, _b, _dtype, window_slots=_slots), "B"),
        _growth,
        learner.Question(f"With your budget of {budget_pick.value} (section 5), how many sequences of "
                         f"{_c2:,} tokens (twice section 5's) fit in it?", budgets[budget_pick.value] // _per2, "users"),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "change a control above and they change with it")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _(loaded, memory_said, served_said, ttft_said):
    _v3, _mine = compute_share.attention_crossover("mistral-7b-v0.3"), compute_share.attention_crossover(loaded.spec)
    _law = (f"this run's TTFT grew like n^{ttft_said[0].evidence['exponent']:,.2f} at {ttft_said[0].evidence['n']:,} tokens: "
            f"{growth.growth_law(ttft_said[0].evidence['exponent'])}" if ttft_said else "this run fitted no law")
    _batch = (f"here {served_said['throughput'].words} together, each step {served_said['step'].words} and the "
              f"padded prefill {served_said['prefill'].words} than alone, while one after another "
              f"{served_said['waiting'].words}" if served_said else "here only one mode ran (out of memory)")
    mo.md(f"""
    ## Takeaways

    - The KV cache grows by a fixed number of bytes per token ({fmt_bytes(gpu["kv_bytes_per_token"])} for Mistral 7B in
      bf16); here the counted cache is {memory_said[0]}.
    - TTFT is the prefill. Attention's FLOPs reach the matmuls' at {f"{_v3:,}" if _v3 else "no"} tokens for Mistral 7B's
      shape (v0.3) and at {f"{_mine:,}" if _mine else "no length"} for the model running here; {_law}.
    - Batching shares one read of the weights among the batch's rows: {_batch}.
    - Each decode step reads the weights and the cache: on a GPU its floor is bytes ÷ bandwidth
      ({gpu["step_floor_s"][min(gpu["step_floor_s"])] * 1e3:,.2f} ms for Mistral 7B on an {gpu["gpu"]}).
    - How many users fit is a memory budget: notebook 02 turns it into an equation,
      notebook 03 puts prefill and decode on the roofline.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
