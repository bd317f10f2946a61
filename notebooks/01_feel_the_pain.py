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

    from helpers import models, notebook, serving, workload_figures, workloads
    from helpers.hardware import device_info
    from helpers.memory import kv_bytes_per_token, measured_model_bytes
    from helpers.roofline import streamed_weight_bytes
    from helpers.units import fmt_bytes

    notebook.setup()
    return (device_info, fmt_bytes, kv_bytes_per_token, measured_model_bytes, mo, models, pd, serving,
            streamed_weight_bytes, workload_figures, workloads)


@app.cell
def _(mo):
    mo.md("""
    # 01 · Feel the pain

    Serving a language model hurts in four places, and each one is measured here on the model this
    machine runs:

    1. **memory grows with every token** — the KV cache keeps a key and a value vector per token, layer
       and KV head;
    2. **time to first token (TTFT) grows with the prompt** — the prefill reads every prompt token;
    3. **throughput** — a naive server handles requests one after another; serving them *together*
       in one batch produces far more tokens per second from the same hardware;
    4. **inter-token latency (ITL)** — each decode step reads the weights and the whole cache, so it
       grows with the context.

    On a GPU a fifth result appears: the device **runs out of memory**, and that point is a result.
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
def _(mo):
    mo.md("""
    ## 1 · Memory grows with every token

    Prefill a prompt of *n* tokens into a real `transformers` `DynamicCache` and count the bytes of
    the key and value tensors it holds. The line is the formula,
    `tokens × 2 (K and V) × layers × KV heads × head_dim × bytes per element`.
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
    Measured on {label}.
    """)
    return


@app.cell
def _(label, memory):
    memory_table = memory.assign(**{"measured on": label})
    memory_table
    return


@app.cell
def _(mo):
    mo.md("""
    ## 2 · Time to first token grows with the prompt

    TTFT is the prefill: one forward pass over the whole prompt that fills the cache and yields the
    first token. Every prompt token goes through every weight matrix (work ∝ *n*), and attention
    compares every token with every earlier one (work ∝ *n²*).
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
def _(label, ttft):
    ttft_table = ttft.assign(**{"measured on": label})
    ttft_table
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
def _(label, pd, served):
    throughput = pd.DataFrame([r.summary() for r in served.results]).assign(**{"measured on": label})
    throughput
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
def _(pd, served):
    timeline = pd.concat([r.frame() for r in served.results], ignore_index=True)
    timeline
    return


@app.cell
def _(mo):
    mo.md("""
    ## 4 · Inter-token latency as the context grows

    After the prefill, each new token is one decode step: one token per sequence goes through the
    model and attends to every cached key and value (reused, not recomputed). The step reads all the
    weights plus the whole cache, so it grows with the context.
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
def _(itl, label):
    itl_table = itl.assign(**{"measured on": label})
    itl_table
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
def _(label, users):
    users_table = users.assign(**{"measured on": label})
    users_table
    return


if __name__ == "__main__":
    app.run()
