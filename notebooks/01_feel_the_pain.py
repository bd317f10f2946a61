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
    import time

    import marimo as mo
    import pandas as pd

    from helpers import expected, models, notebook, plots, serving, workload_figures, workloads
    from helpers.glossary import term
    from helpers.hardware import device_info
    from helpers.memory import kv_bytes_per_token, kv_cache_bytes, measured_model_bytes
    from helpers.roofline import streamed_weight_bytes
    from helpers.units import fmt_bytes, fmt_seconds

    notebook.setup()
    started = time.perf_counter()
    gpu = expected.gpu_expectations()
    return (device_info, expected, fmt_bytes, fmt_seconds, gpu, kv_bytes_per_token, kv_cache_bytes,
            measured_model_bytes, mo, models, notebook, pd, plots, serving, started, streamed_weight_bytes, term,
            workload_figures, workloads)


@app.cell
def _(gpu, mo, term):
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

    **Run time**: a few minutes on two CPU cores with the tiny profile; on a GPU with Mistral 7B a few
    minutes, most of it loading the weights and the out-of-memory hunt of section 5. The last cell
    says how long this run took.

    Serving a language model hurts in four places, and each one is measured here on the model this
    machine runs. Words in blue link to the glossary (`workshop/glossary.md`). On a GPU a fifth result
    appears: the device **runs out of memory** ({term("OOM")}), and that point is a result.
    "What you should see" after each measurement gives the figures for the tiny model on a CPU and
    for Mistral 7B on a GPU — the GPU figures computed for an {gpu["gpu"]} from its datasheet
    (`helpers.expected`, which asks the capacity planner): floors a real run comes near, never beats.
    """)
    return


@app.cell
def _(models, workloads):
    loaded = models.load()
    sizes = workloads.sizes_for(loaded)
    label = loaded.label
    return label, loaded, sizes


@app.cell
def _(loaded, mo, sizes):
    mo.md(f"""
    Running **{loaded.label}** ({loaded.reason}). Sweep sizes are chosen for this profile and device
    by `helpers.workloads.sweep_sizes`: prompts of {sizes.ttft_tokens[0]:,} to {sizes.ttft_tokens[-1]:,}
    tokens, {sizes.requests} requests. Timings are medians of repeats after a warm-up, with the device
    synchronised (`helpers.timing`).
    """)
    return


@app.cell
def _(mo, term):
    mo.md(f"""
    ## 1 · Memory grows with every token

    To produce each new token, attention compares it with a *key* vector of every earlier token and
    mixes their *value* vectors. Recomputing those for the whole history at every step would be
    wasteful, so the model keeps them: the {term("KV cache", "kv-cache")}. Run the
    {term("prefill")} (one {term("forward pass")} over a prompt of *n* tokens) into a real
    `transformers` `DynamicCache` and count the bytes of the key and value tensors it holds. The
    line is the formula, `tokens × 2 (K and V) × layers × KV heads × head_dim × bytes per element`
    ("KV heads": the key/value heads, fewer than the query heads under {term("GQA")}).
    """)
    return


@app.cell
def _(loaded, sizes, workload_figures, workloads):
    memory = workloads.memory_growth(loaded, sizes.memory_tokens)
    workload_figures.memory_figure(memory, loaded)
    return (memory,)


@app.cell
def _(fmt_bytes, kv_bytes_per_token, label, loaded, memory, mo):
    _ok = memory[~memory["oom"]]
    _match = bool((_ok["cache_bytes"] == _ok["formula_bytes"]).all()) and not _ok.empty
    _window = loaded.spec.sliding_window
    _note = (f" This model's layers slide over a {_window:,}-token window, so past {_window - 1:,} tokens "
             "the cache stops growing (the formula honours the window)." if _window else "")
    _peak = (" On CUDA the red crosses are the allocator's peak above the weights: the cache plus the "
             "prefill's activations." if _ok["peak_above_weights_bytes"].notna().any() else "")
    mo.md(f"""
    Per token this model caches **{fmt_bytes(kv_bytes_per_token(loaded.spec, loaded.dtype))}**
    ({loaded.dtype}). The measured bytes {'equal the formula at every point' if _match else '**differ from the formula**'}
    ({len(_ok)} points{f", up to {fmt_bytes(int(_ok['cache_bytes'].max()))} at {int(_ok['tokens'].max()):,} tokens" if len(_ok) else ""}).{_note}{_peak}
    For Mistral 7B in bf16 the same formula gives {fmt_bytes(kv_bytes_per_token("mistral-7b-v0.1", "bf16"))} per
    token: {kv_bytes_per_token("mistral-7b-v0.1", "bf16") * 4096 / 2**30:.1f} GiB for one 4k-token conversation.
    """)
    return


@app.cell
def _(label, memory, plots):
    plots.table(memory, f"measured: {label}")
    return


@app.cell
def _(fmt_bytes, gpu, kv_bytes_per_token, kv_cache_bytes, loaded, mo, sizes):
    _tiny = kv_bytes_per_token(loaded.spec, loaded.dtype)
    _n = sizes.memory_tokens[-1]
    mo.md(f"""
    **What you should see.** Every blue point (measured) on the orange line (computed), and
    `cache_bytes` equal to `formula_bytes` in every row: the formula is exact, not an estimate.
    *Tiny model on a CPU* (fp32): {fmt_bytes(_tiny)} per token, so {fmt_bytes(kv_cache_bytes(loaded.spec, _n, 1, loaded.dtype))}
    at {_n:,} tokens — a straight line. *Mistral 7B on a GPU* (bf16): {fmt_bytes(gpu["kv_bytes_per_token"])}
    per token; v0.1 slides a {gpu["window"]:,}-token window, so the line bends flat there and stays at
    {fmt_bytes(gpu["cache_at_longest"])} up to {gpu["longest"]:,} tokens. On CUDA the crosses (the allocator's
    peak) sit above the points: the prefill's activations come on top of the cache.
    """)
    return


@app.cell
def _(mo, term):
    mo.md(f"""
    ## 2 · Time to first token grows with the prompt

    {term("TTFT")} (time to first token), for a request served alone, is its prefill: one forward pass
    over the whole prompt that fills the cache and yields the first token. Every prompt token goes
    through every weight matrix (work ∝ *n*), and attention compares every token with every earlier
    one (work ∝ *n²*). Counted in {term("FLOP", "flop")}s (floating-point operations), a forward pass
    costs about 2 per parameter per token plus attention's share.
    """)
    return


@app.cell
def _(loaded, sizes, workload_figures, workloads):
    ttft = workloads.ttft_sweep(loaded, sizes.ttft_tokens, sizes.ttft_repeats)
    ttft_fit = workloads.fit_or_none(ttft)
    workload_figures.ttft_figure(ttft, ttft_fit, loaded)
    return ttft, ttft_fit


@app.cell
def _(mo, ttft_fit):
    _law = ttft_fit.describe() if ttft_fit else "fewer than three prompt lengths ran, too few to fit a law."
    mo.md(f"""
    **Growth law, fitted** (`helpers.workloads.fit_growth`, non-negative least squares on relative error
    over the medians): {_law}

    A constant term is fixed cost per forward (on a CPU with the tiny model: Python and operator
    dispatch); the linear term is the weights' work per token; the quadratic term is attention, which
    takes over at long prompts on a large model.
    """)
    return


@app.cell
def _(label, plots, ttft):
    plots.table(ttft, f"measured: {label}; times in seconds (median and p90 of the repeats)")
    return


@app.cell
def _(expected, fmt_seconds, gpu, loaded, mo, sizes):
    _n = sizes.ttft_tokens[-1]
    _lo, _hi = gpu["ttft_floor_s"].items()
    mo.md(f"""
    **What you should see.** *Tiny model on a CPU*: short prompts take about the same time (a fixed cost
    per forward: Python and operator dispatch), then the time rises with the prompt; by {_n:,} tokens
    attention is {expected.attention_share(loaded.spec, _n):.0%} of this model's prefill FLOPs — on a
    CPU, though, the fixed cost and a busy machine's noise can hide that, so the fit may or may not
    keep an n² term. *Mistral 7B on an {gpu["gpu"]}*: at least {fmt_seconds(_lo[1])} for
    {_lo[0]:,} tokens (reading {gpu["weight_bytes"] / 1e9:,.1f} GB of weights once) and {fmt_seconds(_hi[1])} for {_hi[0]:,} tokens
    (compute at the datasheet's peak) — real kernels reach a fraction of the peak, so expect a few
    times more; there attention is only {expected.attention_share("mistral-7b-v0.1", _hi[0]):.0%} of the
    FLOPs and the curve stays close to linear. The next section says why.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ### Attention's share of the prefill falls as the model gets wider

    Per prompt token, the weight matmuls cost 2 FLOPs per parameter — and the parameters of a layer
    grow with the *square* of its width — while attention costs 4 × heads × head_dim per earlier
    token, which grows only *linearly* with the width. So the wider the model, the longer the prompt
    must be before attention's FLOPs catch up with the matmuls'. Computed from each config
    (`helpers.expected.attention_share_rows`, over the FLOP counts of `helpers.roofline`):
    """)
    return


@app.cell
def _(expected, loaded, pd, plots):
    share_rows = pd.DataFrame(expected.attention_share_rows(extra={f"{loaded.profile} (this run)": loaded.spec}))
    plots.table(share_rows, "computed from each config.json: attention's share of one prompt's prefill FLOPs "
                            "(matmuls + attention + output head)")
    return (share_rows,)


@app.cell
def _(expected, loaded, mo, share_rows):
    _rows = share_rows.set_index("model")
    _mine = _rows.iloc[0]
    _v1 = expected.attention_parity_tokens("mistral-7b-v0.1")
    _v3 = expected.attention_parity_tokens("mistral-7b-v0.3")
    _tiny = expected.attention_parity_tokens(loaded.spec)
    _ctx3 = _rows.loc["mistral-7b-v0.3", "context (tokens)"]
    _w = int(_rows.loc["mistral-7b-v0.1", "window"])
    mo.md(f"""
    The model running here (hidden size {int(_mine["hidden size"]):,}) reaches attention = matmuls at
    **{f"{_tiny:,} tokens" if _tiny else "no length"}**. Mistral 7B (hidden size 4,096) would need
    **{f"{_v3:,} tokens" if _v3 else "more than a million tokens"}** without a window (v0.3's shape), which is
    {"beyond" if _v3 and _v3 > _ctx3 else "within"} v0.3's {int(_ctx3):,}-token context; v0.1, whose layers see at most
    {_w:,} earlier tokens, gets there **{"never" if _v1 is None else f"at {_v1:,} tokens"}** — at its window attention
    is {expected.attention_share("mistral-7b-v0.1", _w):.0%} of the prefill. On a large model the TTFT curve is
    dominated by the linear term over every prompt a chat sees; quadratic attention is the tiny model's story,
    and the long-context story of wide ones.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 3 · Throughput: one after another, then together

    The same requests, all arriving at time 0, served two ways:

    - **one after another**, as a naive local server does: a request's prefill, its decode steps, then
      the next request;
    - **together in one batch**: prompts left-padded to the longest with an attention mask, one prefill
      forward for all of them, then one forward per decode step for all of them, reusing one KV cache.

    The timeline shows, for each request, the time it waited (grey), its prefill up to the first
    token (orange), its decoding up to its last token (blue) and, in the batch, the time its row sat
    idle until the longest request was done (hatched).
    """)
    return


@app.cell
def _(loaded, serving, sizes, workload_figures):
    requests = serving.make_requests(sizes.requests, sizes.prompt_range, sizes.new_tokens_range,
                                     vocab=loaded.model.config.vocab_size)
    served = serving.compare_serving(loaded.model, requests, loaded.device)
    workload_figures.timeline_figure(served.results, loaded)
    return (served,)


@app.cell
def _(label, pd, plots, served):
    throughput = pd.DataFrame([r.summary() for r in served.results])
    plots.table(throughput, f"measured: {label}; times in seconds after all requests arrived")
    return


@app.cell
def _(loaded, mo, served):
    _seq, _bat = served.sequential, served.batched
    if _seq is None or _bat is None:
        _out = mo.md(f"**The device ran out of memory** serving these requests ({served.oom_message}); the mode "
                     "that ran is shown above.")
    else:
        _same = sum(a.tokens == b.tokens for a, b in zip(_seq.timings, _bat.timings))
        _check = ("identical in both modes, so the padding, mask and positions are right" if _same == len(_seq.timings)
                  else f"identical for {_same} of {len(_seq.timings)} requests: in {loaded.dtype}, batched kernels round "
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
def _(label, pd, plots, served):
    timeline = pd.concat([r.frame() for r in served.results], ignore_index=True)
    plots.table(timeline, f"measured: {label}; every request, seconds after all arrived")
    return


@app.cell
def _(mo, term):
    mo.md(f"""
    ### What batching costs each request

    Throughput is the server's view. Each user sees latency: the {term("TTFT")} and the {term("ITL")}
    (here the median decode step of a request). Side by side, per mode
    (`helpers.serving.latency_cost`):
    """)
    return


@app.cell
def _(label, pd, plots, served, serving):
    latency = pd.DataFrame(serving.latency_cost(served))
    plots.table(latency, f"measured: {label}; the time to first token includes waiting, the prefill does not")
    return (latency,)


@app.cell
def _(gpu, latency, mo, term):
    _m = latency.set_index("mode")
    if len(_m) < 2:
        _text = "Only one mode ran (out of memory), so there is nothing to set side by side."
    else:
        _s, _b = _m.iloc[0], _m.iloc[1]
        _step = _b["median decode step (ms)"] / _s["median decode step (ms)"]
        _pre = _b["median prefill (ms)"] / _s["median prefill (ms)"]
        _wait = _s["median time to first token (ms)"] / _b["median time to first token (ms)"]
        _gain = _b["tokens/s"] / _s["tokens/s"]
        _text = f"""
        Batching multiplies throughput by **{_gain:,.1f}×**. Its price: each decode step takes
        **{_step:,.1f}×** {"as long as" if _step >= 1 else "the time of"} one sequence's step, and the one prefill of the
        whole padded batch takes {_pre:,.1f}× a single prompt's. The median user still gets the first
        token {_wait:,.1f}× {"sooner" if _wait >= 1 else "later"}, because one after another most requests *wait* for the ones
        ahead — the worst latency of all comes from a queue, not from a batch.

        On a GPU the step grows much less than the batch: for Mistral 7B on an {gpu["gpu"]} the planner's
        floor is {gpu["batched_step_s"][1] * 1e3:,.2f} ms at batch 1, {gpu["batched_step_s"][8] * 1e3:,.2f} ms at batch 8 and
        {gpu["batched_step_s"][64] * 1e3:,.2f} ms at batch 64 (1,024 tokens cached each): 64 users for
        {gpu["batched_step_s"][64] / gpu["batched_step_s"][1]:,.1f}× the step time, because a decode step mostly
        reads the weights, once for the whole batch.

        This is the {term("quality–latency–throughput triangle", "quality-latency-throughput-triangle")}:
        with a GPU and a model fixed, a bigger batch buys throughput (users, cost per token) with latency;
        a better model (bigger, longer contexts, less compressed) costs both. Premium chat sets a latency
        target ({term("SLO")}) first and batches as much as it allows; agents running in the background
        batch hard and accept slower steps.
        """
    mo.md(_text)
    return


@app.cell
def _(mo):
    mo.md("""
    **What you should see.** *Tiny model on a CPU*: more tokens per second together than one after
    another, but batched steps that take longer than single ones — a CPU has little spare compute to
    share, so the gain stays far below the batch size — and hatched idle rows where the static batch
    waits for its longest request. *Mistral 7B on a GPU*: a
    larger gain, and batched steps barely longer than single ones — the figures above.
    """)
    return


@app.cell
def _(mo, term):
    mo.md(f"""
    ## 4 · Inter-token latency as the context grows

    After the prefill, each new token is one {term("decode")} step: one token per sequence goes through
    the model and attends to every cached key and value (reused, not recomputed). Its duration is the
    {term("ITL")}. The step reads all the weights plus the whole cache from memory and does little
    arithmetic with each byte — it is {term("memory-bound")} — so it grows with the context.
    """)
    return


@app.cell
def _(loaded, sizes, workload_figures, workloads):
    itl = workloads.itl_sweep(loaded, sizes.itl_contexts, sizes.itl_steps)
    workload_figures.itl_figure(itl, loaded)
    return (itl,)


@app.cell
def _(fmt_bytes, itl, kv_bytes_per_token, loaded, mo, streamed_weight_bytes):
    _ok = itl[~itl["oom"]]
    _lo, _hi = (_ok.iloc[0], _ok.iloc[-1]) if len(_ok) else (None, None)
    _w = streamed_weight_bytes(loaded.spec, loaded.dtype)
    _kv = kv_bytes_per_token(loaded.spec, loaded.dtype) * int(_hi["context"]) if len(_ok) else 0
    mo.md("No context ran: the device was out of memory at the first point." if _hi is None else f"""
    From {int(_lo['context']):,} to {int(_hi['context']):,} tokens of context the median step goes from
    {_lo['itl_s'] * 1e3:,.2f} ms to {_hi['itl_s'] * 1e3:,.2f} ms. Each step reads the weights
    ({fmt_bytes(_w)}) and the cache ({fmt_bytes(_kv)} at {int(_hi['context']):,} tokens, before any
    window): while the weights dominate, the context barely shows; as the cache grows toward the size of
    the weights, it does. Notebook 03 puts these steps against the device's bandwidth.
    """)
    return


@app.cell
def _(itl, label, plots):
    plots.table(itl, f"measured: {label}; step times in seconds (median and p90)")
    return


@app.cell
def _(gpu, kv_cache_bytes, loaded, mo, sizes, streamed_weight_bytes, term):
    _c0, _c1 = gpu["step_floor_s"]
    _lw = streamed_weight_bytes(loaded.spec, loaded.dtype)
    _kv = [kv_cache_bytes(loaded.spec, c, 1, loaded.dtype) for c in (sizes.itl_contexts[0], sizes.itl_contexts[-1])]
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


@app.cell
def _(mo):
    mo.md("""
    ## 5 · How many users fit — until the device runs out

    Concurrent sequences of a fixed context, prefilled together into one cache, then one decode step.
    On a GPU the batch doubles until the device runs out of memory: the sweep stops there and marks
    the point. On a CPU the sweep stays small: host memory is not something to exhaust on purpose.
    """)
    return


@app.cell
def _(device_info, loaded, measured_model_bytes, sizes, workload_figures, workloads):
    users = workloads.users_sweep(loaded, sizes.users_context, sizes.users_batches)
    _cuda = loaded.device.startswith("cuda")
    workload_figures.users_figure(users, loaded, device_info(loaded.device).total_memory if _cuda else None,
                                  measured_model_bytes(loaded.model) if _cuda else None)
    return (users,)


@app.cell
def _(fmt_bytes, mo, sizes, users):
    _ok = users[~users["oom"]]
    _oom = users.attrs.get("oom_at")
    if _oom is not None and _ok.empty:
        _text = (f"The device **ran out of memory at the first batch** ({_oom:,} sequences of "
                 f"{sizes.users_context:,} tokens): nothing is left beside the weights.")
    elif _oom is not None:
        _text = (f"The device **ran out of memory at {_oom:,} sequences** of {sizes.users_context:,} tokens; the "
                 f"largest batch that ran was {int(_ok['batch'].max()):,}, with a cache of "
                 f"{fmt_bytes(int(_ok['cache_bytes'].max()))}. The sweep ended there and the memory was given back.")
    else:
        _text = (f"All {len(_ok)} batches ran (up to {int(_ok['batch'].max()):,} sequences × {sizes.users_context:,} "
                 f"tokens, a cache of {fmt_bytes(int(_ok['cache_bytes'].max()))}); no out-of-memory point on this "
                 "device with these sizes.")
    mo.md(_text + " Notebook 02 turns this into an equation: memory − weights − overhead, divided by the "
          "cache per sequence.")
    return


@app.cell
def _(label, plots, users):
    plots.table(users, f"measured: {label}")
    return


@app.cell
def _(gpu, mo, sizes):
    mo.md(f"""
    **What you should see.** *Tiny model on a CPU*: all {len(sizes.users_batches)} batches run, the cache on the
    formula's line. *Mistral 7B on an {gpu["gpu"]}* ({gpu["memory_bytes"] / 1e9:,.0f} GB): beside
    {gpu["weight_bytes"] / 1e9:,.2f} GB of weights the whole memory holds about {gpu["users_fit"]:,} sequences of
    {gpu["users_context"]:,} tokens (`helpers.memory.max_users`, no overhead), so the doubling sweep should run out
    of memory at {gpu["users_oom_at"]:,} sequences, or one step earlier once activations and the allocator take
    their share.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## Exercises
    """)
    return


@app.cell
def _(fmt_bytes, kv_cache_bytes, notebook):
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
def _(expected, notebook):
    from helpers.specs import get_spec as _get_spec

    _l = expected.attention_parity_tokens("llama-3.1-8b")
    _q = expected.attention_parity_tokens("qwen2.5-7b")
    _qs, _ls = _get_spec("qwen2.5-7b"), _get_spec("llama-3.1-8b")
    notebook.exercise(2, """Llama 3.1 8B reads up to 128k tokens. From what prompt length does its prefill spend more
    FLOPs in attention than in the weight matmuls? Call `helpers.expected.attention_parity_tokens("llama-3.1-8b")`,
    then try `"qwen2.5-7b"` (a smaller hidden size, a wider MLP). What decides it?""", f"""
    Llama 3.1 8B: **{_l:,} tokens**; Qwen 2.5 7B: **{_q:,} tokens**, later although its hidden size is smaller.
    What decides it is the ratio of parameters per layer (the matmuls' cost per token) to
    heads × head_dim (attention's cost per earlier token): Qwen's hidden size is {_qs.hidden_size:,} against
    Llama's {_ls.hidden_size:,}, but its MLP is {_qs.intermediate_size:,} wide against {_ls.intermediate_size:,} —
    parameters, not attention. Roughly, the crossing sits at parameters ÷ (layers × heads × head_dim) tokens.""")
    return


@app.cell
def _(gpu, notebook):
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


@app.cell
def _(fmt_bytes, gpu, mo, notebook, started):
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
