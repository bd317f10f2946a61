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

    from helpers.present import expected, notebook, plots, replay, sweep_figures
    from helpers.measure import models, sweeps
    from helpers import serving
    from helpers.serving import tables as serving_tables
    from helpers.present.glossary import term
    from helpers.measure.hardware import device_info
    from helpers.formulas.memory import kv_bytes_per_token, kv_cache_bytes
    from helpers.formulas.stepcost import decode_cost
    from helpers.measure.tensor_bytes import measured_model_bytes
    from helpers.formulas.units import fmt_bytes, fmt_seconds
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()
    gpu = expected.gpu_expectations()


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
    4. Why each {term("decode")} step — the {term("inter-token latency", "itl")} (ITL) — grows with the
       context, and where a GPU runs out of memory.

    {run_times.header("01")}

    Serving a language model hurts in four places, and each one is measured here on the model this
    machine runs. Words in blue link to the glossary (`workshop/glossary.md`). On a GPU a fifth result
    appears: the device **runs out of memory** ({term("OOM")}), and that point is a result.
    "What you should see" after each measurement gives the figures for the tiny model on a CPU and
    for Mistral 7B on a GPU — the GPU figures computed for an {gpu["gpu"]} from its datasheet
    (`helpers.present.expected`, which asks the capacity planner): floors a real run comes near, never beats.
    """)
    return


@app.cell
def _():
    loaded = models.load()
    sizes = sweeps.sizes_for(loaded)
    return loaded, sizes


@app.function
def serve_both(loaded, requests):
    """The same requests served one after another and together (helpers.serving.compare_serving)."""
    return serving.compare_serving(loaded.model, requests, loaded.device)


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
    `transformers` `DynamicCache` and count the bytes of the key and value tensors it holds. The
    line is the formula, `tokens × 2 (K and V) × layers × KV heads × head_dim × bytes per element`
    ("KV heads": the key/value heads, fewer than the query heads under {term("GQA")}).
    """), memory_button])
    return (memory_button,)


@app.cell
def _(loaded, memory_button, sizes):
    memory_run = replay.measure("01/memory", models.run_on, loaded, sweeps.memory_growth, sizes.memory_tokens,
                                run=memory_button.value, profile=loaded.profile, device=loaded.device)
    memory_on, memory = memory_run.value
    sweep_figures.memory_figure(memory, memory_run.source(memory_on), memory_on.spec, memory_on.dtype)
    return memory, memory_on, memory_run


@app.cell(hide_code=True)
def _(memory_run):
    memory_run.note()
    return


@app.cell(hide_code=True)
def _(memory, memory_on):
    _ok = memory[~memory["oom"]]
    _match = bool((_ok["cache_bytes"] == _ok["formula_bytes"]).all()) and not _ok.empty
    _window = memory_on.spec.sliding_window
    _note = (f" This model's layers slide over a {_window:,}-token window, so past {_window - 1:,} tokens "
             "the cache stops growing (the formula honours the window)." if _window else "")
    _peak = (" On CUDA the red crosses are the allocator's peak above the weights: the cache plus the "
             "prefill's activations." if _ok["peak_above_weights_bytes"].notna().any() else "")
    mo.md(f"""
    Per token this model caches **{fmt_bytes(kv_bytes_per_token(memory_on.spec, memory_on.dtype))}**
    ({memory_on.dtype}). The measured bytes {'equal the formula at every point' if _match else '**differ from the formula**'}
    ({len(_ok)} points{f", up to {fmt_bytes(int(_ok['cache_bytes'].max()))} at {int(_ok['tokens'].max()):,} tokens" if len(_ok) else ""}).{_note}{_peak}
    For Mistral 7B in bf16 the same formula gives {fmt_bytes(kv_bytes_per_token("mistral-7b-v0.1", "bf16"))} per
    token: {kv_bytes_per_token("mistral-7b-v0.1", "bf16") * 4096 / 2**30:.1f} GiB for one 4k-token conversation.
    """)
    return


@app.cell
def _(memory, memory_on, memory_run):
    plots.table(memory, plots.source_label(memory_run.source(memory_on)))
    return


@app.cell(hide_code=True)
def _(memory, memory_on):
    _tiny = kv_bytes_per_token(memory_on.spec, memory_on.dtype)
    _n = int(memory["tokens"].max())
    mo.md(f"""
    **What you should see.** Every blue point (measured) on the orange line (computed), and
    `cache_bytes` equal to `formula_bytes` in every row: the formula is exact, not an estimate.
    *Tiny model on a CPU* (fp32): {fmt_bytes(_tiny)} per token, so {fmt_bytes(kv_cache_bytes(memory_on.spec, _n, 1, memory_on.dtype))}
    at {_n:,} tokens — a straight line. *Mistral 7B on a GPU* (bf16): {fmt_bytes(gpu["kv_bytes_per_token"])}
    per token; v0.1 slides a {gpu["window"]:,}-token window, so the line bends flat there and stays at
    {fmt_bytes(gpu["cache_at_longest"])} up to {gpu["longest"]:,} tokens. On CUDA the crosses (the allocator's
    peak) sit above the points: the prefill's activations come on top of the cache.
    """)
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


@app.cell
def _(loaded, sizes, ttft_button):
    ttft_run = replay.measure("01/ttft", models.run_on, loaded, sweeps.ttft_sweep, sizes.ttft_tokens,
                              sizes.ttft_repeats, run=ttft_button.value, profile=loaded.profile,
                              device=loaded.device)
    ttft_on, ttft = ttft_run.value
    ttft_fit = sweeps.fit_or_none(ttft)
    sweep_figures.ttft_figure(ttft, ttft_fit, ttft_run.source(ttft_on))
    return ttft, ttft_fit, ttft_on, ttft_run


@app.cell(hide_code=True)
def _(ttft_run):
    ttft_run.note()
    return


@app.cell(hide_code=True)
def _(ttft_fit):
    _law = ttft_fit.describe() if ttft_fit else "fewer than three prompt lengths ran, too few to fit a law."
    mo.md(f"""
    **Growth law, fitted** (`helpers.measure.sweeps.fit_growth`, non-negative least squares on relative error
    over the medians): {_law}

    A constant term is fixed cost per forward (on a CPU with the tiny model: Python and operator
    dispatch); the linear term is the weights' work per token; the quadratic term is attention, which
    takes over at long prompts on a large model.
    """)
    return


@app.cell
def _(ttft, ttft_on, ttft_run):
    plots.table(ttft, f"{plots.source_label(ttft_run.source(ttft_on))}; times in seconds (median and p90 of the repeats)")
    return


@app.cell(hide_code=True)
def _(ttft, ttft_on):
    _n = int(ttft["tokens"].max())
    _lo, _hi = gpu["ttft_floor_s"].items()
    mo.md(f"""
    **What you should see.** *Tiny model on a CPU*: short prompts take about the same time (a fixed cost
    per forward: Python and operator dispatch), then the time rises with the prompt; by {_n:,} tokens
    attention is {expected.attention_share(ttft_on.spec, _n):.0%} of this model's prefill FLOPs — on a
    CPU, though, the fixed cost and a busy machine's noise can hide that, so the fit may or may not
    keep an n² term. *Mistral 7B on an {gpu["gpu"]}*: at least {fmt_seconds(_lo[1])} for
    {_lo[0]:,} tokens (reading {gpu["weight_bytes"] / 1e9:,.1f} GB of weights once) and {fmt_seconds(_hi[1])} for {_hi[0]:,} tokens
    (compute at the datasheet's peak) — real kernels reach a fraction of the peak, so expect a few
    times more; there attention is only {expected.attention_share("mistral-7b-v0.1", _hi[0]):.0%} of the
    FLOPs and the curve stays close to linear. The next section says why.
    """)
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
    (`helpers.present.expected.attention_shares`, over the FLOP counts of `helpers.formulas.roofline`) at the prompt
    length you pick (a length beyond a model's context is left empty):
    """), share_prompt, notebook.static_note({"WORKSHOP_SHARE_PROMPT": "the prompt length (512 … 131072 tokens)"})])
    return (share_prompt,)


@app.cell
def _(loaded, share_prompt):
    share_rows = expected.attention_shares(tokens=(share_prompt.value,), extra={f"{loaded.profile} (this run)": loaded.spec})
    plots.table(expected.attention_share_frame(share_rows), "computed from each config.json: attention's share of one prompt's prefill FLOPs "
                            "(matmuls + attention + output head)")
    return (share_rows,)


@app.cell(hide_code=True)
def _(loaded, share_prompt, share_rows):
    _rows = {r.model: r for r in share_rows}
    _mine = share_rows[0]
    _n = share_prompt.value
    _v1 = expected.attention_parity_tokens("mistral-7b-v0.1")
    _v3 = expected.attention_parity_tokens("mistral-7b-v0.3")
    _tiny = expected.attention_parity_tokens(loaded.spec)
    _ctx3 = _rows["mistral-7b-v0.3"].context
    _w = _rows["mistral-7b-v0.1"].window
    _at = {name: r.share_pct[_n] for name, r in _rows.items()}
    mo.md(f"""
    At **{_n:,} tokens** attention is {_mine.share_pct[_n]:.1f} % of the prefill's FLOPs for the model running here and
    {_at["mistral-7b-v0.3"]:.1f} % for Mistral 7B v0.3 (v0.1, whose window caps what each token attends to:
    {_at["mistral-7b-v0.1"]:.1f} %). The model running here (hidden size {_mine.hidden_size:,}) reaches
    attention = matmuls at **{f"{_tiny:,} tokens" if _tiny else "no length"}**. Mistral 7B (hidden size 4,096) would need
    **{f"{_v3:,} tokens" if _v3 else "more than a million tokens"}** without a window (v0.3's shape), which is
    {"beyond" if _v3 and _v3 > _ctx3 else "within"} v0.3's {int(_ctx3):,}-token context; v0.1, whose layers see at most
    {_w:,} earlier tokens, gets there **{"never" if _v1 is None else f"at {_v1:,} tokens"}** — at its window attention
    is {expected.attention_share("mistral-7b-v0.1", _w):.0%} of the prefill. On a large model the TTFT curve is
    dominated by the linear term over every prompt a chat sees; quadratic attention is the tiny model's story,
    and the long-context story of wide ones.
    """)
    return


@app.cell(hide_code=True)
def _():
    serving_button = replay.run_button()
    mo.vstack([mo.md("""
    ## 3 · Throughput: one after another, then together

    The same requests, all arriving at time 0, served two ways:

    - **one after another**, as a naive local server does: a request's prefill, its decode steps, then
      the next request;
    - **together in one batch**: prompts left-padded to the longest with an attention mask, one prefill
      forward for all of them, then one forward per decode step for all of them, reusing one KV cache.

    The timeline shows, for each request, the time it waited (grey), its prefill up to the first
    token (orange), its decoding up to its last token (blue) and, in the batch, the time its row sat
    idle until the longest request was done (hatched).
    """), serving_button])
    return (serving_button,)


@app.cell
def _(loaded, serving_button, sizes):
    requests = serving.make_requests(sizes.requests, sizes.prompt_range, sizes.new_tokens_range,
                                     vocab=loaded.model.config.vocab_size)
    served_run = replay.measure("01/serving", models.run_on, loaded, serve_both, requests, run=serving_button.value,
                                profile=loaded.profile, device=loaded.device)
    served_on, served = served_run.value
    served_source = served_run.source(served_on)
    sweep_figures.timeline_figure(served.results, served_source)
    return served, served_on, served_run, served_source


@app.cell(hide_code=True)
def _(served_run):
    served_run.note()
    return


@app.cell
def _(served, served_source):
    plots.table(serving_tables.serve_summary_frame(served.results), f"{plots.source_label(served_source)}; times in seconds after all requests arrived")
    return


@app.cell(hide_code=True)
def _(served, served_on):
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
        _wasted = sum(max(t.new_tokens for t in _bat.timings) - t.new_tokens for t in _bat.timings)
        _out = mo.md(f"""
        Together, the same {len(_bat.timings)} requests produce **{_bat.tokens_per_s / _seq.tokens_per_s:,.1f}×
        the tokens per second** ({_seq.tokens_per_s:,.0f} → {_bat.tokens_per_s:,.0f} tokens/s) with
        {_bat.forward_calls} forward calls instead of {_seq.forward_calls}: a decode step reads the
        weights once whether it produces one token or {len(_bat.timings)}. The greedy outputs are {_check}.

        The batch is *static*: a request that has its tokens keeps its row until the longest one is done
        ({_wasted} row-steps computed for nothing here), and a new request would have to wait for the whole
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
    (`helpers.serving.latency_cost`), and below it each figure of the batch against the same figure one
    after another:
    """)
    return


@app.cell
def _(served, served_source):
    latency = serving.latency_cost(served)
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
def _(batch_cost):
    if batch_cost is None:
        _text = "Only one mode ran (out of memory), so there is nothing to set side by side."
    else:
        _step, _pre, _ttft = batch_cost["decode step"], batch_cost["prefill"], batch_cost["time to first token"]
        _text = f"""
        Batching multiplies throughput by **{batch_cost["throughput (tokens/s)"]:,.1f}×**. Its price: each decode step
        takes **{_step:,.1f}×** {"as long as" if _step >= 1 else "the time of"} one sequence's step, and the one prefill
        of the whole padded batch takes {_pre:,.1f}× a single prompt's. The median user still gets the first
        token {1 / _ttft:,.1f}× {"sooner" if _ttft <= 1 else "later"}, because one after another most requests *wait* for
        the ones ahead — the worst latency of all comes from a queue, not from a batch.

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
    **On a GPU the step grows much less than the batch.** The capacity planner's floor for Mistral 7B on
    an {gpu["gpu"]} (`helpers.present.expected.gpu_plan`: the bytes a step reads ÷ the datasheet's bandwidth, or its
    FLOPs ÷ the peak), for the batch you pick, against batch 1:
    """), gpu_batch, notebook.static_note({"WORKSHOP_GPU_BATCH": "the batch (1 … 256)"})])
    return (gpu_batch,)


@app.cell
def _(gpu_batch):
    gpu_one, gpu_many = expected.gpu_plan(context=1024, batch=1), expected.gpu_plan(context=1024, batch=gpu_batch.value)
    mo.md(f"""
    **Batch {gpu_batch.value:,}**: {"a step of " + f"{gpu_many.step_floor_s * 1e3:,.2f} ms ({gpu_many.bound}-bound) against "
    f"{gpu_one.step_floor_s * 1e3:,.2f} ms at batch 1 — **{gpu_many.step_floor_s / gpu_one.step_floor_s:,.2f}× the step for "
    f"{gpu_batch.value:,}× the tokens**, {gpu_many.batch / gpu_many.step_floor_s:,.0f} tokens/s against "
    f"{1 / gpu_one.step_floor_s:,.0f}. A decode step mostly reads the weights, once for the whole batch; each sequence "
    "adds only its own cache." if gpu_many.fits else f"does not fit: {gpu_many.reason}."}
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** *Tiny model on a CPU*: more tokens per second together than one after
    another, but batched steps that take longer than single ones — a CPU has little spare compute to
    share, so the gain stays far below the batch size — and hatched idle rows where the static batch
    waits for its longest request. *Mistral 7B on a GPU*: a
    larger gain, and batched steps barely longer than single ones — the figures above.
    """)
    return


@app.cell(hide_code=True)
def _():
    itl_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 4 · Inter-token latency as the context grows

    After the prefill, each new token is one {term("decode")} step: one token per sequence goes through
    the model and attends to every cached key and value (reused, not recomputed). Its duration is the
    {term("ITL")}. The step reads all the weights plus the whole cache from memory and does little
    arithmetic with each byte — it is {term("memory-bound")} — so it grows with the context.
    """), itl_button])
    return (itl_button,)


@app.cell
def _(itl_button, loaded, sizes):
    itl_run = replay.measure("01/itl", models.run_on, loaded, sweeps.itl_sweep, sizes.itl_contexts, sizes.itl_steps,
                             run=itl_button.value, profile=loaded.profile, device=loaded.device)
    itl_on, itl = itl_run.value
    sweep_figures.itl_figure(itl, itl_run.source(itl_on))
    return itl, itl_on, itl_run


@app.cell(hide_code=True)
def _(itl_run):
    itl_run.note()
    return


@app.cell(hide_code=True)
def _(itl, itl_on):
    _ok = itl[~itl["oom"]]
    _lo, _hi = (_ok.iloc[0], _ok.iloc[-1]) if len(_ok) else (None, None)
    _w = decode_cost(itl_on.spec, 0, 1, itl_on.dtype).weight_read_bytes
    _kv = kv_bytes_per_token(itl_on.spec, itl_on.dtype) * int(_hi["context"]) if len(_ok) else 0
    mo.md("No context ran: the device was out of memory at the first point." if _hi is None else f"""
    From {int(_lo['context']):,} to {int(_hi['context']):,} tokens of context the median step goes from
    {_lo['itl_s'] * 1e3:,.2f} ms to {_hi['itl_s'] * 1e3:,.2f} ms. Each step reads the weights
    ({fmt_bytes(_w)}) and the cache ({fmt_bytes(_kv)} at {int(_hi['context']):,} tokens, before any
    window): while the weights dominate, the context barely shows; as the cache grows toward the size of
    the weights, it does. Notebook 03 puts these steps against the device's bandwidth.
    """)
    return


@app.cell
def _(itl, itl_on, itl_run):
    plots.table(itl, f"{plots.source_label(itl_run.source(itl_on))}; step times in seconds (median and p90)")
    return


@app.cell(hide_code=True)
def _(itl, itl_on):
    _c0, _c1 = gpu["step_floor_s"]
    _lw = decode_cost(itl_on.spec, 0, 1, itl_on.dtype).weight_read_bytes
    _kv = [kv_cache_bytes(itl_on.spec, int(c), 1, itl_on.dtype) for c in (itl["context"].min(), itl["context"].max())]
    _tiny_growth = (_lw + _kv[1]) / (_lw + _kv[0]) - 1
    mo.md(f"""
    **What you should see.** *Tiny model on a CPU*: the bytes a step reads grow by only
    {_tiny_growth:.0%} from the shortest to the longest context here (the cache beside
    {_lw / 1e6:,.0f} MB of weights), so a steeper rise is the CPU's attention arithmetic, fixed cost
    per operation and a busy machine's noise. *Mistral 7B on an
    {gpu["gpu"]}*: a step can be no shorter than reading its bytes at {gpu["bandwidth"] / 1e12:,.2f} TB/s
    (the {term("memory-bound floor")}): {gpu["step_floor_s"][_c0] * 1e3:,.2f} ms at {_c0:,} tokens of context,
    {gpu["step_floor_s"][_c1] * 1e3:,.2f} ms at {_c1:,} (v0.1's window stops the cache at {gpu["window"]:,} tokens).
    Expect measured steps somewhat above these — no kernel reaches the datasheet bandwidth — and
    nearly flat, because {gpu["weight_bytes"] / 1e9:,.1f} GB of weights dwarf a cache of at most
    {gpu["kv_bytes_per_token"] * gpu["window"] / 1e9:,.2f} GB.
    """)
    return


@app.cell(hide_code=True)
def _():
    users_button = replay.run_button()
    mo.vstack([mo.md("""
    ## 5 · How many users fit — until the device runs out

    Concurrent sequences of a fixed context, prefilled together into one cache, then one decode step.
    On a GPU the batch doubles until the device runs out of memory: the sweep stops there and marks
    the point. On a CPU the sweep stays small: host memory is not something to exhaust on purpose.
    """), users_button])
    return (users_button,)


@app.cell
def _(loaded, sizes, users_button):
    users_run = replay.measure("01/users", models.run_on, loaded, users_measured, sizes.users_context,
                               sizes.users_batches, run=users_button.value, profile=loaded.profile, device=loaded.device)
    users_on, users_result = users_run.value
    users = users_result["users"]
    sweep_figures.users_figure(users, users_run.source(users_on), users_result["total_memory"],
                                  users_result["model_bytes"])
    return users, users_on, users_result, users_run


@app.cell(hide_code=True)
def _(users_run):
    users_run.note()
    return


@app.cell(hide_code=True)
def _(users, users_result):
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
    mo.md(_text + " Notebook 02 turns this into an equation: memory − weights − overhead, divided by the "
          "cache per sequence.")
    return


@app.cell
def _(users, users_on, users_run):
    plots.table(users, plots.source_label(users_run.source(users_on)))
    return


@app.cell(hide_code=True)
def _(users):
    mo.md(f"""
    **What you should see.** *Tiny model on a CPU*: all {len(users)} batches run, the cache on the
    formula's line. *Mistral 7B on an {gpu["gpu"]}* ({gpu["memory_bytes"] / 1e9:,.0f} GB): beside
    {gpu["weight_bytes"] / 1e9:,.2f} GB of weights the whole memory holds about {gpu["users_fit"]:,} sequences of
    {gpu["users_context"]:,} tokens (`helpers.formulas.memory.max_users`, no overhead), so the doubling sweep should run out
    of memory at {gpu["users_oom_at"]:,} sequences, or one step earlier once activations and the allocator take
    their share.
    """)
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

    _l = expected.attention_parity_tokens("llama-3.1-8b")
    _q = expected.attention_parity_tokens("qwen2.5-7b")
    _qs, _ls = _get_spec("qwen2.5-7b"), _get_spec("llama-3.1-8b")
    notebook.exercise(2, """Llama 3.1 8B reads up to 128k tokens. From what prompt length does its prefill spend more
    FLOPs in attention than in the weight matmuls? Call `helpers.present.expected.attention_parity_tokens("llama-3.1-8b")`,
    then try `"qwen2.5-7b"` (a smaller hidden size, a wider MLP). What decides it?""", f"""
    Llama 3.1 8B: **{_l:,} tokens**; Qwen 2.5 7B: **{_q:,} tokens**, later although its hidden size is smaller.
    What decides it is the ratio of parameters per layer (the matmuls' cost per token) to
    heads × head_dim (attention's cost per earlier token): Qwen's hidden size is {_qs.hidden_size:,} against
    Llama's {_ls.hidden_size:,}, but its MLP is {_qs.intermediate_size:,} wide against {_ls.intermediate_size:,} —
    parameters, not attention. Roughly, the crossing sits at parameters ÷ (layers × heads × head_dim) tokens.""")
    return


@app.cell
def _():
    notebook.exercise(3, """Ask the capacity planner what batching does on a GPU:
    `python -m helpers capacity --model mistral-7b-v0.1 --gpu "H100 SXM" --context 1024 --batch 1`, then
    `--batch 64`. How much longer is a decode step of 64 sequences than a step of one, and how many more
    tokens per second does it give?""", f"""
    The planner's floors on an {gpu["gpu"]}: {gpu["batched_step_s"][1] * 1e3:,.2f} ms for one sequence,
    {gpu["batched_step_s"][64] * 1e3:,.2f} ms for 64 — {gpu["batched_step_s"][64] / gpu["batched_step_s"][1]:,.2f}× the
    time for 64× the tokens, so about {64 * gpu["batched_step_s"][1] / gpu["batched_step_s"][64]:,.0f}× the throughput.
    Each user's ITL rises by the same {gpu["batched_step_s"][64] / gpu["batched_step_s"][1]:,.2f}×: that is the
    latency side of the triangle. On a CPU the measured step grows much faster with the batch.""")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## Takeaways

    - The KV cache grows by a fixed number of bytes per token ({fmt_bytes(gpu["kv_bytes_per_token"])} for Mistral 7B in
      bf16), and the formula matches the real cache to the byte.
    - TTFT is the prefill: linear in the prompt for a wide model over everyday lengths; attention's
      quadratic term takes over only past tens of thousands of tokens — sooner on a narrow model.
    - Batching multiplies throughput because a decode step reads the weights once for everyone; it
      costs each request a slower step and a padded prefill. A queue costs far more.
    - Each decode step reads the weights and the cache: on a GPU its floor is bytes ÷ bandwidth
      ({gpu["step_floor_s"][min(gpu["step_floor_s"])] * 1e3:,.2f} ms for Mistral 7B on an {gpu["gpu"]}).
    - Memory, not compute, decides how many users fit: notebook 02 turns that into an equation,
      notebook 03 puts prefill and decode on the roofline.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
