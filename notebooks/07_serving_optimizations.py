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
    import torch

    from helpers.formulas import decode_intensity, memory
    from helpers.measure import models, quality
    from helpers.present import decode_intensity_figures, notebook, plots, replay
    from helpers.capacity import planner
    from helpers.present.glossary import term
    from helpers import engine
    from helpers.serving import batching, blocks, figures, kv_cache, kv_quant, speculative, tables, traces
    from helpers.serving import measured as serving_bench
    from helpers.serving.measured import chat_requests, paged_fit, paged_trace, workload
    from helpers.engine import kv as engine_kv
    from helpers.engine import llm, measure, prefix_cache, runner, scheduler
    from helpers.engine import speculative as spec_loop
    from helpers.engine.llm import EngineArgs
    from helpers.formulas.stepcost import forward_cost
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 07 · Serving optimizations, measured

    **What you will learn**

    1. To follow one request through a serving engine you can read — scheduler, paged KV cache, prefix
       cache, model runner — and say what each part decides, step by step.
    2. To say what each mechanism buys — throughput, memory or latency — by measuring it here, beside
       transformers' own implementation of the same idea.
    3. To tell when a mechanism does not pay: {term("prefix caching")} without shared prefixes,
       {term("KV-cache quantization")} without fused kernels, {term("speculative decoding")} with a costly or
       often-wrong draft, or at a batch that makes the verify pass compute-bound.

    {run_times.header("07")}

    A server makes one device serve many users with a handful of mechanisms. Here they are **code you can
    read** — `helpers/engine/`, a small engine modelled on nano-vllm and gpt-fast, each file a
    sitting long — and each is **run live** on this notebook's model, with controls, and measured beside
    transformers' version:

    - the **KV cache** on and off — why every server keeps one;
    - {term("paged attention")} — a block allocator against contiguous reservation, then the engine's real
      paged cache;
    - {term("continuous batching")} with a token budget, {term("chunked prefill")} and {term("preemption")} —
      the engine's scheduler, step by step, against transformers' continuous-batching manager;
    - **prefix caching** — a {term("radix tree")} against vLLM's chained block hashes, on one trace;
    - **KV-cache quantization** — fp8, 4 and 2 bits: bytes, speed, quality;
    - **speculative decoding** — the engine's draft → verify → accept loop, greedy and sampled.
    """)
    return


@app.cell
def _():
    loaded = models.load()
    model, tok = loaded.model, loaded.tokenizer
    w = workload(loaded.profile)
    return loaded, model, tok, w


@app.cell(hide_code=True)
def _(loaded, w):
    mo.md(f"""
    **Model:** {loaded.label}. Sizes for this profile (`helpers.serving.measured.workload`): {w.requests}
    chat requests on {w.slots} batch slots, a {w.prefix_tokens:,}-token shared prefix, {w.decode_tokens}
    generated tokens for the decoding experiments.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 1 · The KV cache, on and off

    Without a cache, generating each token runs the **whole sequence so far** through the model again;
    with it, only the newest token, attending to keys and values stored from earlier steps. Same greedy
    tokens either way — the cache is lossless.
    """)
    return


@app.cell
def _(model, tok, w):
    on_off = kv_cache.cache_on_off(model, torch.tensor([quality.eval_ids(tok, 64)]), w.decode_tokens)
    return (on_off,)


@app.cell
def _(loaded, on_off):
    plots.table(tables.cache_on_off_frame(on_off), f"measured: {loaded.label}")
    return


@app.cell
def _(loaded, on_off):
    figures.cache_on_off_figure(on_off, loaded)
    return


@app.cell(hide_code=True)
def _(model, on_off):
    _ratio = on_off.total_s_without_cache / on_off.total_s_with_cache
    _work = on_off.tokens_without_cache / on_off.tokens_with_cache
    mo.md(f"""
    **Measured:** the cache did {_work:.0f}× less work and was {notebook.speedup_phrase(_ratio)} here; the work without
    it matches the formula n·p + n(n−1)/2 = {on_off.predicted_tokens_without_cache:,} tokens
    ({"exactly" if on_off.predicted_tokens_without_cache == on_off.tokens_without_cache else "NOT"}).
    Greedy tokens identical: **{on_off.identical_tokens}**.

    **What you should see.** *CPU, tiny:* the no-cache step time climbs with position while the cached step
    stays flat; the speed-up is smaller than the work ratio because a tiny model's step is dominated by fixed
    overhead (the {model.config.vocab_size:,}-word output head, Python). *GPU, Mistral 7B:* both are flat at first (a short
    sequence is one weight read either way), then the no-cache line climbs once the recomputed tokens make
    the step compute-bound.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 2 · The engine: one request from arrival to its last token

    Every mechanism below is a file of `helpers/engine/` that reads in one sitting. A request:

    1. **arrives** (`Engine.add`, llm.py) as a `Request` (request.py) — its prompt's token ids and how it
       samples — and waits in the scheduler's queue;
    2. is **admitted** (`Scheduler.schedule`, scheduler.py) the moment a slot, the step's token budget and
       free KV blocks allow; the prefix cache (prefix_cache.py) hands it any blocks an earlier request left
       with the same leading tokens, and its block table (kv.py, on `helpers.serving.blocks.BlockAllocator`)
       starts with them;
    3. is **computed** (`Runner.forward`, runner.py) in steps shared with other requests: its prompt in
       chunks of at most the budget, then one token per step — every request's rows in one flat batch
       through the model's own weights, attention reading each request's keys and values through its
       block table;
    4. **finishes** at its token limit or end-of-sequence; its blocks stay in the prefix cache until
       evicted, and its slot goes to the next request in line. If blocks run out before, the newest
       request is **preempted**: its blocks freed, its tokens recomputed when it is readmitted.

    The files, counted here (lines of code: no blanks, comments or docstrings):
    """)
    return


@app.cell
def _():
    plots.table(pd.DataFrame(engine.core_files()), "computed: helpers.engine.code_lines on the files")
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md("One step of the engine — the whole loop, schedule → forward → sample → book:"),
               notebook.code(llm.Engine.step, folded_=False),
               notebook.code(llm, "the whole of llm.py (the engine, its settings, generate)")])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 3 · Paged attention: blocks instead of contiguous reservations

    A server that does not know how long an answer will be must, with contiguous memory, reserve the
    longest possible (`prompt + max_tokens`) for every sequence. `helpers.serving.blocks.BlockAllocator`
    does what vLLM does instead: fixed blocks of {batching.PAGE_SIZE} token slots, a free list, a block table per
    sequence, reference counts and {term("copy-on-write")} for shared blocks. First as bookkeeping alone: both
    schemes serve the same {serving_bench.PAGED_REQUESTS} chat requests (seeded `traces.chat_trace`, real token counts)
    one decode step at a time in the same KV memory; a request is admitted as soon as memory allows.
    """)
    return


@app.cell
def _(tok, w):
    sims_in, capacity = paged_trace(tok, w)      # the bench's paged_over_contiguous_sequences uses the same
    sims = [blocks.simulate(sims_in, capacity, scheme, batching.PAGE_SIZE) for scheme in ("contiguous", "paged")]
    fit = paged_fit(tok, w)
    return capacity, fit, sims


@app.cell
def _(sims):
    plots.table(tables.simulation_frame([s.summary() for s in sims]), "simulated: helpers.serving.blocks, chat trace token counts")
    return


@app.cell
def _(capacity, loaded, sims):
    figures.paged_figure(sims, f"simulated on the chat trace tokenized by {loaded.model_name}'s tokenizer, "
                         f"{capacity:,} KV slots, blocks of {batching.PAGE_SIZE}")
    return


@app.cell(hide_code=True)
def _(fit, sims):
    _c, _p = sims[0].summary(), sims[1].summary()
    mo.md(f"""
    **Measured in the simulation:** contiguous reservation used {_c.used_share_of_reserved:.0%} of what it
    reserved — the rest is internal waste: room for tokens an answer has not generated yet, or never will
    (answers shorter than `max_tokens`); besides, {_c.mean_external_fragmentation:,.0f} free slots on
    average sat stranded in holes too small for the next request. Paging used {_p.used_share_of_reserved:.0%}
    of what it held (at most one partly filled block per sequence).
    Paged ran {_p.mean_running:.1f} sequences at once on average against {_c.mean_running:.1f}
    and finished in {_p.steps} steps against {_c.steps}
    ({_p.preemptions} preemptions: paging admits optimistically and, when blocks run out, evicts the newest
    sequence to recompute it later — the simulation counts steps, not that recomputation's cost). At their full
    lengths, **{fit.paged} sequences fit paged against {fit.contiguous} contiguous ({fit.ratio:.1f}×).**

    **What you should see.** The same on any device: this is bookkeeping, not compute. The gap grows with
    how much `max_tokens` overstates real answers.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md("""
    **The engine's paged cache is a real tensor.** `PagedKVCache` (kv.py) holds keys and values as
    `[layers, blocks, block_size, kv_heads, head_dim]`; token t of a request sits in block `table[t // block_size]`,
    slot `t % block_size`. The runner writes each new token's K/V to its slot, then attention gathers a
    request's keys through its block table — any free block fits any request, and a block two requests share
    (a prefix-cache hit) is read by both. The attention of one layer, as the runner computes it:
    """), notebook.code(runner.Runner._layer, folded_=False),
        notebook.code(engine_kv, "the whole of kv.py (the paged cache)"),
        notebook.code(runner, "the whole of runner.py (one forward over the mixed batch)")])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 4 · The scheduler, step by step

    Each step the scheduler (scheduler.py) fills a **token budget**: running requests first, oldest first — a
    decoding request needs one token, a request still prefilling gets its next chunk ({term("chunked prefill")}) —
    then the waiting queue, in order, as long as a slot, the budget and free blocks allow. When blocks run out,
    the newest running request is {term("preempted", "preemption")} and recomputed later. Set the engine's sizes
    below: it serves the first chat requests live on this model, and every step's log is drawn as a timeline.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([notebook.code(scheduler.Scheduler.schedule, folded_=False),
               notebook.code(scheduler, "the whole of scheduler.py (booking a step, finishing, preempting)")])
    return


@app.cell
def _():
    block_pick = mo.ui.dropdown(options=["4", "8", "16", "32", "64"], label="block size (tokens)",
                                value=str(notebook.env_default("WORKSHOP_BLOCK_SIZE", 16, (4, 8, 16, 32, 64))))
    budget_pick = mo.ui.slider(steps=[16, 32, 64, 128, 256, 512], show_value=True, label="token budget per step",
                               value=notebook.env_default("WORKSHOP_TOKEN_BUDGET", 64, (16, 32, 64, 128, 256, 512)))
    seqs_pick = mo.ui.slider(start=1, stop=12, step=1, show_value=True, label="requests running at once",
                             value=notebook.env_default("WORKSHOP_MAX_SEQS", 4, range(1, 13)))
    kv_pick = mo.ui.slider(steps=[256, 384, 512, 768, 1024, 2048], show_value=True, label="KV cache (token slots)",
                           value=notebook.env_default("WORKSHOP_KV_TOKENS", 512, (256, 384, 512, 768, 1024, 2048)))
    mo.vstack([mo.hstack([block_pick, budget_pick]), mo.hstack([seqs_pick, kv_pick]), notebook.static_note({
        "WORKSHOP_BLOCK_SIZE": "block size (4, 8, 16, 32, 64)", "WORKSHOP_TOKEN_BUDGET": "token budget per step",
        "WORKSHOP_MAX_SEQS": "requests running at once (1–12)", "WORKSHOP_KV_TOKENS": "KV cache in token slots"})])
    return block_pick, budget_pick, kv_pick, seqs_pick


@app.cell
def _(block_pick, budget_pick, kv_pick, model, seqs_pick, tok, w):
    live_reqs = chat_requests(tok, w)[:12]
    _bs = int(block_pick.value)
    live_args = EngineArgs(block_size=_bs, num_blocks=max(kv_pick.value // _bs, measure.blocks_needed(live_reqs, _bs)),
                           max_num_seqs=seqs_pick.value, max_batch_tokens=budget_pick.value, prefix_cache="radix")
    live, live_engine = measure.serve(model, live_reqs, live_args)
    return live, live_args, live_engine, live_reqs


@app.cell
def _(live, live_args, live_engine, loaded):
    figures.timeline_figure(measure.timeline(live_engine.log), live_engine.log, loaded,
                            f"{len(live.timings)} chat requests, blocks of {live_args.block_size}, "
                            f"{live_args.max_batch_tokens} tokens per step, {live_args.max_num_seqs} at once, "
                            f"{live_args.blocks} blocks ({live_args.blocks * live_args.block_size:,} slots)")
    return


@app.cell
def _(live, live_args, live_engine, loaded):
    live_summary = measure.log_summary(live_engine, live)
    plots.table(tables.log_summary_frame(live_summary), f"measured: the readable engine on {loaded.label}, "
                f"{live_args.blocks} blocks of {live_args.block_size}")
    return (live_summary,)


@app.cell(hide_code=True)
def _(live_args, live_summary):
    _s = live_summary
    mo.md(f"""
    **Measured:** {_s.requests} requests in {_s.steps} steps; {_s.prefill_chunks} prefill chunks (a
    prompt longer than the {live_args.max_batch_tokens}-token budget is cut), {_s.mixed_steps} steps
    that mixed prefill chunks with decode rows; **{_s.preemptions} preemptions** with
    {live_args.blocks} blocks ({_s.recomputed_tokens:,} tokens computed again because of them); at most
    {_s.peak_blocks} of {live_args.blocks} blocks in use, holding {_s.tokens_at_peak:,} tokens in
    {_s.peak_blocks * live_args.block_size:,} slots; {_s.copy_on_write_copies} blocks copied on write.

    **What you should see.** Orange chunks of each prompt, then blue decode rows; grey lanes wait for a slot
    (at most the cap runs at once) and start the step after a request finishes. With a small KV cache red
    marks a preemption: the newest request loses its blocks and is prefilled again (a longer orange chunk
    later). Raise the KV cache and the preemptions go; lower the token budget and prompts take more, smaller
    chunks; a larger block size wastes more of each request's last block (the blocks in use rise) and preempts
    sooner. The same on a GPU, at a larger scale.
    """)
    return


@app.cell(hide_code=True)
def _():
    batching_button = replay.run_button()
    mo.vstack([mo.md("""
    ## 5 · Continuous batching, against transformers' own

    The same chat requests (mixed prompt and output lengths), four ways:

    - **one after another** — a naive local server;
    - **static batches** — `slots` requests at a time, prompts left-padded; a batch ends when its slowest
      request does, and the next batch only starts then;
    - **transformers' continuous-batching manager** (`model.init_continuous_batching`) — *the library's
      version*: a scheduler that, at every step, puts a waiting request into any slot that freed up;
    - **the readable engine** — the same idea in the code above, at the same number of slots, token budget
      and block size.

    All four compute in a thread of their own, as transformers' manager always does: PyTorch's CPU operators
    run on OpenMP thread teams, one per calling thread, and a thread that computes while the notebook's own
    team exists runs slower than one that computes alone (`helpers.serving.batching.in_worker_thread` says
    why) — the comparison holds only under the same conditions (about half a minute on a laptop's CPU:
    in marimo it waits for **Run live** when a recording is there to show).
    """), batching_button])
    return (batching_button,)


@app.function
def serve_four_ways(model, tok, w):
    """Section 5: the chat requests one after another, in static batches, through transformers'
    continuous-batching manager and through the readable engine, each in a worker thread."""
    requests = chat_requests(tok, w)
    served = batching.compare_batching(model, requests, w.slots)
    served["engine"] = batching.in_worker_thread(measure.serve, model, requests, EngineArgs(
        max_num_seqs=w.slots, max_batch_tokens=512, prefix_cache=None))[0]
    return requests, served


@app.cell
def _(batching_button, loaded, model, tok, w):
    batching_run = replay.measure("07/batching", serve_four_ways, model, tok, w, run=batching_button.value,
                                  long=True, profile=loaded.profile, device=loaded.device)
    batch_reqs, served = batching_run.value
    return batch_reqs, batching_run, served


@app.cell
def _(batching_run, loaded, served):
    mo.vstack([batching_run.note(), plots.table(
        tables.batching_frame([batching.summarize(r, served["sequential"]) for r in served.values()]),
        batching_run.source(f"measured: {loaded.label}"))])
    return


@app.cell
def _(loaded, served, w):
    _panels = []
    for _k, _static in (("static", w.slots), ("continuous", None), ("engine", None)):
        _r = served[_k]
        _segs = batching.slot_segments(_r, w.slots, _static)
        _panels.append((f"{_r.mode}: {_r.tokens_per_s:,.0f} tokens/s, slots idle "
                        f"{batching.idle_share(_segs, _r.wall_s, w.slots):.0%} of the time", _segs, _r.wall_s))
    figures.slots_figure(_panels, w.slots, loaded)
    return


@app.cell(hide_code=True)
def _(batch_reqs, served, w):
    _pad = batching.padding_tokens(batch_reqs, w.slots)
    _seq = served["sequential"].tokens_per_s
    _cb, _st, _en = (served[k].tokens_per_s / _seq for k in ("continuous", "static", "engine"))
    _ratio = served["engine"].tokens_per_s / served["continuous"].tokens_per_s
    _s = decode_intensity.summary(decode_intensity.intensity_table("mistral-7b-v0.1", contexts=(4096,)))[0]
    _c = served["continuous"]
    mo.vstack([mo.md(f"""
    **Measured:** transformers' continuous batching served {_cb:.1f}× the tokens/s of one after another, static
    batching {_st:.1f}×, the readable engine {_en:.1f}× — **{_ratio:.2f}× transformers' manager** on the same
    requests ({"the same" if batching.same_tokens(served["engine"], served["sequential"]) == 1 else "NOT the same"}
    greedy tokens as one after another). Static batching computed {_pad.padding_tokens:,} padding tokens
    and {_pad.finished_rows_steps:,} decode rows for requests already done ({_pad.wasted_share:.0%} of its
    work), and its hatched slots sat idle waiting for each batch's slowest request.

    One step of the continuous-batching manager took **{1e3 * _c.mean_step_s:,.1f} ms** on average and made
    {_c.tokens_per_step:.1f} tokens (its mean batch, of at most {w.slots}; prefills included) against
    **{1e3 * served["sequential"].mean_step_s:,.1f} ms** for one request's step:
    {_c.tokens_per_step:.1f} tokens for {_c.mean_step_s / served["sequential"].mean_step_s:,.1f}× the time of one.

    **What you should see.** *CPU, tiny:* several times the sequential throughput for both continuous
    batchers, less for static batches (their idle slots); the engine near transformers' manager (the same
    steps, one forward each). A batched step costs more than a single row's, so batching is cheap but not free —
    the tiny model's fp32 arithmetic on two cores is no longer negligible at {w.slots} rows; a busy machine
    shrinks every figure. *GPU, Mistral 7B:* a decode step reads all
    {memory.weight_bytes('mistral-7b-v0.1', 'bf16').bytes / 1e9:.1f} GB of weights whatever the batch, plus each
    sequence's cached keys and values, so throughput grows with the batch while the weights dominate the bytes —
    then the cache reads take over: {decode_intensity_figures.verdict(_s)} (`helpers.formulas.decode_intensity`), so at that
    context decode never becomes compute-bound; continuous batching keeps the batch full.
    """), plots.table(tables.padding_frame(_pad), "computed: helpers.serving.batching.padding_tokens")])
    return


@app.cell(hide_code=True)
def _():
    _p = planner.plan("mistral-7b-v0.1", "H100 SXM", context=4096, batch=1)
    mo.md(f"""
    ### Chunked prefill

    A long prompt arriving while others are decoding: prefilled in one step, it stalls everyone's next token
    for the whole prefill. The engine cuts a prompt longer than its token budget into chunks, each in a step
    with the others' decode rows. Below: short requests decoding, then a long prompt arriving, with a budget
    larger than the prompt (no chunking) and a small one. How long is a long prefill on a GPU? Mistral 7B's
    4,096-token prefill does {forward_cost("mistral-7b-v0.1", 4096).flops / 1e12:,.0f} TFLOP: **{1e3 * _p.prefill_floor_s:.0f} ms** at an
    H100's datasheet peak, {1e3 * _p.prefill_s:.0f} ms at the planner's efficiency of {_p.efficiency:.0%}
    (`helpers.capacity.plan`, {_p.prefill_bound}-bound) — a stall of that size for every other user, without chunks.
    """)
    return


@app.cell
def _(model, tok, w):
    _short = [quality.eval_ids(tok, 24)[i:] for i in range(3)]
    _g = torch.Generator().manual_seed(0)
    _long = torch.randint(3, model.config.vocab_size, (w.long_prompt,), generator=_g).tolist()
    chunk_runs = measure.chunked_prefill(model, _short, _long, 24, 3, [w.long_prompt + 8, w.chunk_budget])
    return (chunk_runs,)


@app.cell
def _(chunk_runs, loaded):
    plots.table(tables.chunked_frame(chunk_runs), f"measured: the readable engine on {loaded.label}")
    return


@app.cell(hide_code=True)
def _(chunk_runs):
    _one, _chunked = chunk_runs[0], chunk_runs[1]
    _seen = _one.worst_gap_ms is not None and _chunked.worst_gap_ms is not None
    _better = _seen and _chunked.worst_gap_ms < _one.worst_gap_ms
    _later = _chunked.long_prompt_ttft_ms > _one.long_prompt_ttft_ms
    _gaps = (f"the others' worst gap between tokens while the long prompt was prefilled was {_one.worst_gap_ms:,.0f} ms in one "
             f"step and {_chunked.worst_gap_ms:,.0f} ms in {_chunked.prefill_steps} chunks — chunking "
             f"**{'lowered' if _better else 'did not lower'}** it" if _seen else
             "no other request made a token while the long prompt was prefilled, so there is no gap to compare")
    mo.md(f"""
    **Measured:** the longest step the decoding requests waited on computed {_one.largest_step_tokens:,} tokens without chunks
    and {_chunked.largest_step_tokens:,} with them (the schedule, the same on any machine); {_gaps}; the long prompt's own TTFT
    went from {_one.long_prompt_ttft_ms:,.0f} to {_chunked.long_prompt_ttft_ms:,.0f} ms{" (chunks trade its TTFT for everyone else's smoothness)" if _later else ""}.

    **What you should see.** *CPU, tiny:* the unchunked step holds every other request for the whole
    {_one.long_prompt_tokens}-token prefill; chunks cap the stall near one chunk's time, and the long
    prompt's own first token comes a little later (more steps, each also carrying decode rows). Timings jitter
    with load. *GPU, Mistral 7B:* the same shape with the figures above: chunks of 512 tokens hold the others
    for about an eighth of the 4,096-token prefill each.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md(f"""
    ## 6 · Prefix caching: a radix tree against chained block hashes

    Every prompt the engine has prefilled leaves its blocks behind; a later prompt that starts with the same
    tokens reuses them and prefills only the rest. Two ways to find them (prefix_cache.py), switchable:

    - **hash** (vLLM's automatic prefix caching): each *full* block is named by a hash chained through the
      blocks before it, h_j = H(h_(j−1), tokens of block j); a prompt hashes its full blocks in order and stops
      at the first unknown one. Only whole blocks hit.
    - **radix** (SGLang's RadixAttention): a {term("radix tree")} over token ids (`helpers.serving.radix`) whose
      values are each token's block; a hit can end inside a block, which the request then shares and copies
      on its first write ({term("copy-on-write")}).

    Either keeps blocks while the allocator has room and drops the least recently used idle ones when the
    scheduler runs short. Two seeded workloads from `helpers.serving.traces`, each round served after the last:
    **chat** (independent conversations: nothing shared but a few tokens of chat template) and **agentic** (one
    long shared system prompt, a proposal round, then review rounds in which every reviewer reads the whole
    transcript so far).
    """), notebook.code(prefix_cache, "the whole of prefix_cache.py")])
    return


@app.cell
def _(model, tok):
    def _rounds(trace):
        _ids = traces.token_ids(tok, trace)
        return [[p for p, r in zip(_ids, trace) if r.round == k] for k in sorted({r.round for r in trace})]

    prefix_hits = {"chat": measure.cache_hits(model, _rounds(traces.chat_trace(16, seed=0))),
                   "agentic": measure.cache_hits(model, _rounds(traces.agentic_trace(agents=4, review_rounds=2, seed=0)))}
    edit = measure.edit_hits(model, traces.token_ids(tok, traces.agentic_trace(agents=1, seed=0))[0], 300)
    return edit, prefix_hits


@app.cell
def _(loaded, prefix_hits):
    plots.table(tables.cache_hits_frame(prefix_hits), f"measured: the readable engine on {loaded.label}, blocks of 16")
    return


@app.cell
def _(loaded, prefix_hits):
    figures.hit_rate_figure({f"{t}, {c.cache}": c for t, r in prefix_hits.items() for c in (r.radix, r.hash)},
                            f"measured: the readable engine's prefix caches, {loaded.model_name}'s tokenizer, blocks of 16")
    return


@app.cell(hide_code=True)
def _(edit, prefix_hits):
    _a = prefix_hits["agentic"]
    mo.md(f"""
    **Measured:** the agentic trace reused {_a.radix.hit_rate:.0%} of its prompt tokens with the radix
    tree and {_a.hash.hit_rate:.0%} with block hashes; the chat trace {prefix_hits["chat"].radix.hit_rate:.0%}
    and {prefix_hits["chat"].hash.hit_rate:.0%}. The tree's extra hits are the tails that end inside a block — each
    paid for with a block copy ({_a.radix.copy_on_write_copies} copies). An **edit** at token {edit.edited_position}
    of a {edit.prompt_tokens:,}-token prompt served before: the tree reused {edit.radix_reused_tokens} tokens, the
    hashes {edit.hash_reused_tokens} — both stop at the edit (every later block's hash, every later node, depends on
    it); the tree only gets the edited block's first tokens back.

    **What you should see.** The same on any device (this is bookkeeping): agentic prompts share most of
    their tokens, chat prompts almost none; the two caches differ by at most a block per request.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    A hit is only worth something if the stored keys and values are reused for real. Below, a prompt of a
    long shared prefix plus a short suffix, through the engine: **cold**, prefix caching off, the whole prompt
    prefilled; **warm**, the prefix left in the cache by an earlier request with another suffix, so only the
    suffix is computed — attending to the cached prefix through the shared blocks.
    """)
    return


@app.cell
def _(loaded, model, w):
    _g = torch.Generator().manual_seed(0)
    _prefix = torch.randint(3, model.config.vocab_size, (w.prefix_tokens,), generator=_g).tolist()
    _suffixes = [torch.randint(3, model.config.vocab_size, (w.suffix_tokens,), generator=_g).tolist() for _ in range(4)]
    reuse = measure.prefix_ttft(model, _prefix, _suffixes)
    plots.table(tables.prefix_ttft_frame(reuse), f"measured: the readable engine on {loaded.label}")
    return (reuse,)


@app.cell
def _(loaded, reuse):
    figures.bars_figure(["cold: prefix + suffix", "warm: suffix over cached prefix"],
                        [reuse.ttft_cold_ms, reuse.ttft_warm_ms], "time to first token (ms)",
                        f"prefix reuse: {reuse.prefix_tokens:,}-token prefix, {reuse.suffix_tokens}-token suffix, "
                        f"{notebook.speedup_phrase(reuse.ttft_ratio)}", loaded, colours=[figures.BASELINE, figures.MEASURED])
    return


@app.cell(hide_code=True)
def _(reuse):
    _tokens = (reuse.prefix_tokens + reuse.suffix_tokens) / reuse.suffix_tokens
    mo.md(f"""
    **Measured:** with the {reuse.prefix_tokens:,}-token prefix in the cache, the time to first token was
    {notebook.speedup_phrase(reuse.ttft_ratio)} than prefilling everything ({reuse.ttft_ratio:.1f}× against a token ratio
    of {_tokens:.1f}×), with the **same first token: {reuse.same_first_token}**.

    **What you should see.** *CPU and GPU:* at most the token ratio (prefix + suffix) ÷ suffix — and less,
    because the suffix still attends to the whole prefix and a short step pays fixed costs; on a GPU a short
    suffix is latency-bound, so the ratio falls further below the token ratio.
    """)
    return


@app.cell(hide_code=True)
def _(loaded):
    quality_profile, trained = kv_quant.quality_profile(loaded.profile)
    mo.md(f"""
    ## 7 · KV-cache quantization

    transformers' `QuantizedCache` stores keys and values in **fp8** (one scale per tensor), or in **4 and 2
    bits** (optimum-quanto: a scale and a zero point per group of 64 values; the newest 128 tokens stay in full
    precision until they are quantized, as in KIVI). Bytes of the real cache are measured
    (`helpers.measure.tensor_bytes.measured_cache_bytes`) against `helpers.formulas.memory.kv_cache_bytes`; quality is KL divergence
    and top-1 agreement against the full-precision cache (`helpers.measure.quality`), on the evaluation text, with the
    profile **{quality_profile}**{"" if trained else " — **random weights: quality figures meaningless**"}.
    """)
    return quality_profile, trained


@app.cell
def _(loaded, model, tok):
    _ids = quality.eval_ids(tok, 300)
    kvq_bytes = kv_quant.bytes_by_scheme(model, loaded.spec, _ids, loaded.dtype)
    kvq_speed = kv_quant.speed_by_scheme(model, _ids)
    plots.table(tables.kv_bytes_frame(kvq_bytes), f"measured: {loaded.label}")
    return kvq_bytes, kvq_speed


@app.cell
def _(kvq_speed, loaded):
    plots.table(tables.kv_speed_frame(kvq_speed), f"measured: {loaded.label}")
    return


@app.cell
def _(loaded, quality_profile):
    # the model the quality figures need (a trained one when helpers.measure.models offers it), loaded once
    qloaded = loaded if quality_profile == loaded.profile else models.load(quality_profile, device=loaded.device)
    return (qloaded,)


@app.cell
def _(qloaded):
    kvq_quality = kv_quant.quality_by_scheme(qloaded.model, quality.eval_ids(qloaded.tokenizer, 400, profile=qloaded.profile))
    plots.table(tables.kv_quality_frame(kvq_quality), f"measured: {qloaded.label}")
    return (kvq_quality,)


@app.cell
def _(kvq_bytes, loaded):
    figures.bars_figure([r.scheme for r in kvq_bytes], [r.measured_bytes / 1e3 for r in kvq_bytes], "KV cache (kB, 10³ bytes)",
                        f"KV cache of {kvq_bytes[0].tokens} tokens by scheme (measured)", loaded)
    return


@app.cell(hide_code=True)
def _(kvq_bytes, kvq_quality, trained):
    _missing = [s for s in kv_quant.SCHEMES if kv_quant.available(s)]
    if _missing:
        _out = mo.md(f"**Not measured here:** {', '.join(_missing)} — {kv_quant.available(_missing[0])}.")
    else:
        _b = {r.scheme: r for r in kvq_bytes}
        _exact = all(r.measured_bytes == r.formula_bytes for r in kvq_bytes)
        _proj_tokens = 4096
        _proj = kv_quant.projected_shares("mistral-7b-v0.1", _proj_tokens, "bf16")
        _q = {r.scheme: r for r in kvq_quality}
        _out = mo.md(f"""
        **Measured:** every scheme's cache matches the formula (`kv_quant.cache_bytes`: values, scales, residual)
        **{"to the byte" if _exact else "NOT exactly"}**. Besides the values: fp8 {_b["fp8"].metadata_bytes:,} bytes of scales; 4 and 2 bits
        {_b["4-bit"].metadata_bytes:,} bytes of scales and zero points plus
        {_b["4-bit"].residual_bytes:,} bytes of not-yet-quantized tokens. The whole cache is
        {_b["fp8"].share_of_full:.0%}, {_b["4-bit"].share_of_full:.0%} and
        {_b["2-bit"].share_of_full:.0%} of full precision. Top-1 agreement with the full-precision
        cache: fp8 {_q["fp8"].top1_agreement:.0%}, 4-bit {_q["4-bit"].top1_agreement:.0%}, 2-bit
        {_q["2-bit"].top1_agreement:.0%}{"" if trained else " (random weights: near-ties flip the top token, so these mean little)"}.

        **What you should see.** *CPU, tiny:* bytes shrink as computed; speed barely moves (or worsens: the
        (de)quantization is not fused into attention); quality falls with the bits, 2-bit most. The shares
        above are of an fp32 cache. *GPU, Mistral 7B:* its bf16 cache ({memory.kv_bytes_per_token('mistral-7b-v0.1', 'bf16') / 1e3:.0f} kB per
        token) at {_proj_tokens:,} tokens would shrink to {_proj["fp8"]:.0%} (fp8), {_proj["4-bit"]:.0%} (4-bit) and
        {_proj["2-bit"]:.0%} (2-bit) — {1 / _proj["fp8"]:.1f}×, {1 / _proj["4-bit"]:.1f}× and {1 / _proj["2-bit"]:.1f}× the users or
        context (`kv_quant.projected_shares`: the same formula that matches the cache above to the byte, with
        the scales as wide as a bf16 cache keeps them, half the residual window in full precision); speed gains need fused kernels (vLLM's
        fp8 KV cache), not this reference path.
        """)
    _out
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md("""
    ## 8 · Speculative decoding: draft, verify, accept

    A drafter proposes k tokens; the target runs its pending token and all k drafts in **one** forward pass
    (a chunk of k + 1 rows, like a short prefill), which gives its distribution p at every drafted position and
    one past them. Greedy: keep drafts while they equal the target's argmax, then the target's own token —
    exactly the target's greedy output. Sampled: Leviathan et al. (ICML 2023), Algorithm 1 — keep draft x with
    probability min(1, p(x)/q(x)); at the first rejection draw from the residual norm(max(0, p − q)); if all k
    are kept, one more from p. Every emitted token is then distributed exactly as p: lossless for sampling too.
    Two drafters (speculative.py): **prompt lookup** (copy what followed the latest n-gram's first earlier
    occurrence; transformers' rule) and an **early-exit draft** — the target's own first layers, its final norm
    and head (a draft model sharing the target's weights, LayerSkip-style; no separately trained small model of
    this vocabulary is available offline). The whole accept step:
    """), notebook.code(spec_loop.verify, folded_=False),
        notebook.code(spec_loop, "the whole of speculative.py (the drafters and the loop)")])
    return


@app.cell
def _(w):
    k_pick = mo.ui.slider(start=1, stop=8, step=1, show_value=True, label="draft length k",
                          value=notebook.env_default("WORKSHOP_SPEC_K", w.spec_k, range(1, 9)))
    alpha_pick = mo.ui.slider(start=0.1, stop=0.95, step=0.05, show_value=True, label="per-token acceptance α (model)",
                              value=notebook.env_default("WORKSHOP_SPEC_ALPHA", 0.6, lo=0.1, hi=0.95))
    mo.vstack([mo.hstack([k_pick, alpha_pick]), notebook.static_note({
        "WORKSHOP_SPEC_K": "draft length k (1–8)", "WORKSHOP_SPEC_ALPHA": "α of the expected-tokens curve (0.1–0.95)"})])
    return alpha_pick, k_pick


@app.cell
def _(k_pick, qloaded, w):
    spec_text = quality.eval_ids(qloaded.tokenizer, 160, profile=qloaded.profile)
    spec_context = len(spec_text) + w.decode_tokens // 2       # cached tokens at a typical step
    spec_rows = measure.speculative_runs(qloaded.model, spec_text, w.decode_tokens, k=k_pick.value,
                                            draft_layers=w.draft_layers)
    spec_batch = measure.speculative_runs(qloaded.model, spec_text, w.decode_tokens, k=k_pick.value,
                                             draft_layers=w.draft_layers, batch=8)
    library = speculative.speculate(qloaded.model, spec_text, w.decode_tokens, k=k_pick.value, prompt_lookup=True)
    plots.table(tables.speculative_frame(spec_rows + spec_batch), f"measured: the readable engine's loop on {qloaded.label}, greedy")
    return library, spec_batch, spec_context, spec_rows, spec_text


@app.cell
def _(alpha_pick, k_pick, qloaded, spec_rows):
    figures.expected_tokens_figure([r for r in spec_rows if r.k], alpha_pick.value, max(8, k_pick.value), qloaded)
    return


@app.cell
def _():
    # one accept step enumerated on a 5-token vocabulary: draft x ~ q, kept with min(1, p(x)/q(x)), else the residual
    _p = torch.tensor([0.40, 0.25, 0.20, 0.10, 0.05], dtype=torch.float64)
    _q = torch.tensor([0.10, 0.50, 0.10, 0.25, 0.05], dtype=torch.float64)
    _out = torch.zeros(5, dtype=torch.float64)
    for _x in range(5):
        _a = spec_loop.accept_probability(_p, _q, _x)
        _out[_x] += float(_q[_x]) * _a
        _out += float(_q[_x]) * (1 - _a) * spec_loop.residual(_p, _q)
    exact = pd.DataFrame({"token": range(5), "target p": _p.tolist(), "draft q": _q.tolist(),
                          "kept with min(1, p/q)": [spec_loop.accept_probability(_p, _q, _x) for _x in range(5)],
                          "residual norm(max(0, p − q))": spec_loop.residual(_p, _q).tolist(),
                          "what comes out": _out.tolist()})
    plots.table(exact, "computed: helpers.engine.speculative.accept_probability and residual, every draft enumerated")
    return (exact,)


@app.cell
def _(k_pick, qloaded, spec_context):
    # what verifying k drafts costs against a decode step: measured here, and computed for Mistral 7B on an H100
    verify_here = [measure.verify_cost(qloaded.model, k_pick.value, spec_context, b) for b in (1, 8)]
    verify_cost = [speculative.verify_step_ratio("mistral-7b-v0.1", k_pick.value, c, b)
                   for c in (512, 4096) for b in (1, 16, 64, 256)]
    mo.vstack([plots.table(tables.verify_frame(verify_here), f"measured: the engine's runner on {qloaded.label}, fastest of 5"),
               plots.table(tables.verify_frame(verify_cost), "computed: helpers.serving.speculative.verify_step_ratio "
                                        "(helpers.formulas.stepcost at the H100's roofline)")])
    return verify_cost, verify_here


@app.cell(hide_code=True)
def _(exact, library, qloaded, spec_batch, spec_context, spec_rows, trained, verify_cost, verify_here, w):
    _plain, _pl, _dm = spec_rows
    _pl8 = spec_batch[1]
    _same = all(r.identical_to_plain for r in spec_rows + spec_batch)
    _exact = bool((exact["what comes out"] - exact["target p"]).abs().max() < 1e-12)
    _v = {(c.context, c.batch): c.verify_over_decode for c in verify_cost}
    _here = {c.batch: c.verify_over_decode for c in verify_here}
    _share = speculative.draft_step_share(qloaded.spec, w.draft_layers, spec_context, qloaded.dtype)
    _first_compute = [c for c in verify_cost if c.verify_bound == "compute"]
    _turn = (f"at {_first_compute[0].context:,} tokens of context it turns compute-bound by batch "
             f"{_first_compute[0].batch} (verify {_first_compute[0].verify_over_decode:.2f}× a decode step)"
             if _first_compute else "it stays memory-bound in every row")

    def _pays(tokens, ratio):
        return "can pay" if tokens > ratio else "cannot pay"

    mo.md(f"""
    **Measured:** prompt lookup made **{_pl.tokens_per_pass:.2f} tokens per target pass**
    ({_pl.target_passes} passes for {w.decode_tokens} tokens; transformers' assisted generation with the same rule,
    *the library's version*: {library.target_passes} passes{", the same" if library.target_passes == _pl.target_passes else ""}),
    {notebook.speedup_phrase(_pl.speedup)} on the wall clock alone and
    {notebook.speedup_phrase(_pl8.speedup)} at batch 8; the early-exit draft ({w.draft_layers} of
    {qloaded.model.config.num_hidden_layers} layers) {_dm.tokens_per_pass:.2f} tokens per pass,
    {notebook.speedup_phrase(_dm.speedup)} alone. Output identical to plain decoding in every run:
    **{_same}**. The enumeration above: what comes out of one accept step equals the target's p
    **{"exactly" if _exact else "NOT exactly"}** — rejection sampling loses nothing (the tests repeat it on a model with a
    seeded goodness-of-fit test).{"" if trained else " (Random weights: the draft agrees almost never.)"}

    Why the wall clock says what it says: a round costs one verify pass, and here a pass of k + 1 rows per request
    cost **{_here[1]:.2f}×** a one-row decode step alone and {_here[8]:.2f}× at batch 8 (measured above). Prompt
    lookup drafts for free, so at {_pl.tokens_per_pass:.2f} tokens per pass it {_pays(_pl.tokens_per_pass, _here[1])}
    alone and {_pays(_pl.tokens_per_pass, _here[8])} at batch 8 on this machine; the early exit also pays
    its k draft steps, each reading {_share:.0%} of what a target step reads (`speculative.draft_step_share`: the
    {qloaded.model.config.vocab_size:,}-word output head is most of the tiny model).

    **What you should see.** *CPU, tiny:* both drafters above 1 token per pass — the trained model repeats the
    novel's phrases and its first layers often agree — and identical output. The wall clock depends on what
    k + 1 rows cost against one on this machine: a single row runs as a matrix–vector product, several rows as a
    matrix product, and on a busy machine the two differ by more than the rows (the measured ratio changes from
    run to run), so the speed-up can flip. *GPU, Mistral 7B:* a decode step is bound by reading the weights and the
    cache, so a verify pass of k + 1 tokens costs about one decode step — at batch 1 each accepted token is nearly
    free (verify ÷ decode {_v[(512, 1)]:.2f} at 512 tokens, computed). Batching spends the same spare arithmetic:
    {_turn}, and past that point every rejected draft costs real compute; at 4,096 tokens the cache reads keep even
    large batches memory-bound. With a separately trained small draft, Leviathan et al. (ICML 2023) report 2–3× at
    batch 1.
    """)
    return


@app.cell(hide_code=True)
def _():
    _alpha, _ks = 0.6, (2, 4, 8)
    _e = [speculative.expected_tokens_per_pass(_alpha, _k) for _k in _ks]
    mo.vstack([
        mo.md("## Exercises"),
        notebook.exercise(1, "Re-run section 1 with a longer prompt (`quality.eval_ids(tok, 512)`). Which line "
                          "moves, and why?", """
        The no-cache line: each step recomputes all p + t tokens, so its time grows with the prompt; the cached
        step computes one token and reads p + t cached ones, and stays almost flat. The cache always saves
        compute; what it costs is memory (section 3), which is why servers page it."""),
        notebook.exercise(2, "In section 4, set the token budget to 16 and then 512 (KV cache 2,048 slots). What "
                          "happens to the number of prefill chunks, to the longest prompt's first token, and to "
                          "the others' decode rows while it is prefilled?", """
        At 16 a 200-token prompt takes 13 or more chunks, its first token comes many steps later, and each step
        stays short, so the decoding requests keep their pace. At 512 a whole prompt fits one step: its first token
        comes soonest, but that step is long for everyone in it. The budget trades the long prompt's TTFT for the
        others' inter-token latency."""),
        notebook.exercise(3, f"Acceptance and k. With `speculative.expected_tokens_per_pass(alpha, k)` (or the α "
                          f"slider in section 8), compare α = {_alpha} at k = {', '.join(map(str, _ks))}. What limits a "
                          f"long draft?", f"""
        {", ".join(f"{_x:.2f}" for _x in _e)} tokens per pass: the chance that all k are accepted is α^k, so extra
        drafted tokens are mostly rejected, while each costs a draft step (and, at a large batch, verify compute)."""),
    ])
    return


@app.cell(hide_code=True)
def _(fit, on_off, prefix_hits, reuse, served, spec_rows):
    _seq = served["sequential"].tokens_per_s
    _best = max(spec_rows[1:], key=lambda r: r.speedup)
    _lossless = all(r.identical_to_plain for r in spec_rows)
    _won = (f"best here {_best.drafter}, {_best.tokens_per_pass:.2f} tokens per target pass, "
            f"{notebook.speedup_phrase(_best.speedup)} on the wall clock" if _best.speedup > 1
            else f"neither drafter beat plain decoding on the wall clock here (the closer: {_best.drafter}, "
                 f"{notebook.speedup_phrase(_best.speedup)}, at {_best.tokens_per_pass:.2f} tokens per pass)")
    mo.md(f"""
    ## Takeaways

    - **The KV cache** turns quadratic work into linear: {on_off.tokens_without_cache:,} tokens run
      through the model without it, {on_off.tokens_with_cache:,} with;
      {"the same tokens out" if on_off.identical_tokens else "**different tokens out** (near-ties)"}.
    - **Paging** stores what sequences hold, not what they might: {fit.ratio:.1f}× as many sequences fit in
      the same memory here; the engine's cache is a tensor of blocks read through each request's table.
    - **Continuous batching** fills freed slots at once: {served["continuous"].tokens_per_s / _seq:.1f}× (transformers)
      and {served["engine"].tokens_per_s / _seq:.1f}× (the readable engine) the throughput of serving one after
      another, against {served["static"].tokens_per_s / _seq:.1f}× for static batches. A token budget with chunked
      prefill keeps a long prompt from stalling the others; preemption trades recomputation for memory.
    - **Prefix caching** pays where prompts share prefixes — {prefix_hits["agentic"].radix.hit_rate:.0%} of the
      agentic trace's prompt tokens (radix tree; {prefix_hits["agentic"].hash.hit_rate:.0%} with block hashes),
      {prefix_hits["chat"].radix.hit_rate:.0%} of the chat trace's — and a hit made the time to first token
      {notebook.speedup_phrase(reuse.ttft_ratio)} here.
    - **KV-cache quantization** buys memory (users, context) at a quality cost to measure; speed needs fused kernels.
    - **Speculative decoding** {"kept the target's output exactly" if _lossless else "changed the output here (near-ties)"}
      and pays only when drafts are cheap, often right, and the verify pass stays memory-bound: {_won}.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
