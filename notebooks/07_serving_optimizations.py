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
    from helpers.formulas import speculation, verdicts
    from helpers.present import expected, learner, notebook, plots, replay
    from helpers.capacity import planner
    from helpers.present.glossary import term
    from helpers import engine
    from helpers.serving import batching, figures, paging, kv_cache, kv_quant, speculative, tables, traces
    from helpers.serving import engine_caches, engine_runs
    from helpers.serving import measured as serving_bench
    from helpers.serving.measured import chat_requests, paged_fit, paged_trace, workload
    from helpers.engine import kv as engine_kv
    from helpers.engine import llm, prefix_cache, runner, scheduler
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

    1. To follow one request through a serving engine you can read — scheduler, paged {term("KV cache")}, prefix
       cache, model runner — and say what each part decides, step by step.
    2. To say what each mechanism buys — {term("throughput")}, memory or latency — by measuring it here, beside
       transformers' own implementation of the same idea.
    3. To tell when a mechanism does not pay: {term("prefix caching")} without shared prefixes,
       {term("KV-cache quantization")} without fused kernels, {term("speculative decoding")} with a costly or
       often-wrong draft, or at a batch that makes the verify pass {term("compute-bound")}.

    {run_times.header("07")}

    After each measurement, **What you should see** says what this run's numbers show, by a rule from the
    numbers above it, then what a GPU shows, each GPU sentence labelled computed, cited or recorded.

    Before the central results you are asked for a **prediction**; the result shows it beside what was
    computed or measured. A self-check at the end asks three questions whose answers are this run's numbers.

    A server makes one device serve many users with a handful of mechanisms. Here they are **code you can
    read** — `helpers/engine/`, a small engine modelled on nano-vllm and gpt-fast, each file a
    sitting long — and each is **run live** on this notebook's model, with controls, and measured beside
    transformers' version:

    - the **KV cache** on and off — why every server keeps one;
    - {term("paged attention")} — a block allocator against contiguous reservation, then the engine's real
      paged cache;
    - {term("continuous batching")} with a {term("token budget")}, {term("chunked prefill")} and {term("preemption")} —
      the engine's scheduler, step by step, against transformers' continuous-batching manager;
    - **prefix caching** — a {term("radix tree")} against vLLM's chained block hashes, on one trace;
    - **KV-cache quantization** — {term("fp8")}, 4 and 2 bits: bytes, speed, quality;
    - **speculative decoding** — the engine's draft → verify → accept loop, {term("greedy", "greedy-decoding")} and sampled.
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
def _(on_off):
    mo.vstack([mo.md(f"""
    **Measured:** the work without the cache matches the formula n·p + n(n−1)/2 = {on_off.predicted_tokens_without_cache:,}
    tokens ({"exactly" if on_off.predicted_tokens_without_cache == on_off.tokens_without_cache else "NOT"}).
    Greedy tokens identical: **{on_off.identical_tokens}**. A step's time has a part that grows with the tokens it
    runs and a part it pays whatever they are; the no-cache steps run different numbers of tokens, so a line
    through their times separates the two.
    """), expected.should_see(kv_cache.reading(on_off), [expected.computed(
        str(kv_cache.no_cache_on_gpu(expected.REFERENCE_MODEL, expected.REFERENCE_GPU, on_off.prompt_tokens,
                                     on_off.new_tokens)),
        "helpers.serving.kv_cache.no_cache_on_gpu: helpers.formulas.stepcost at the datasheet's roofline")])])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 2 · The engine: one request from arrival to its last token

    Every mechanism below is a file of `helpers/engine/` that reads in one sitting. A request:

    1. **arrives** (`Engine.add`, llm.py) as a `Request` (request.py) — its prompt's token ids and how it
       samples — and waits in the scheduler's queue;
    2. is **admitted** (`Scheduler.schedule`, scheduler.py) the moment a slot, the step's token budget and
       free KV blocks allow; the prefix cache (prefix_cache.py) hands it any blocks an earlier request left
       with the same leading tokens, and its {term("block table")} (kv.py, on `helpers.engine.blocks.BlockAllocator`)
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
    longest possible (`prompt + max_tokens`) for every sequence. `helpers.engine.blocks.BlockAllocator`
    does what vLLM does instead: fixed blocks of {batching.PAGE_SIZE} token slots, a free list, a block table per
    sequence, reference counts and {term("copy-on-write")} for shared blocks. First as bookkeeping alone: both
    schemes serve the same {serving_bench.PAGED_REQUESTS} chat requests (seeded `traces.chat_trace`, real token counts)
    one {term("decode")} step at a time in the same KV memory; a request is admitted as soon as memory allows. The
    paged side is the engine's own scheduler of section 2 with no model behind it (`paging.simulate`).
    """)
    return


@app.cell
def _(tok, w):
    sims_in, capacity = paged_trace(tok, w)      # the bench's paged_over_contiguous_sequences uses the same
    sims = [paging.simulate(sims_in, capacity, w.max_output, scheme, batching.PAGE_SIZE) for scheme in ("contiguous", "paged")]
    fit = paged_fit(tok, w)
    return capacity, fit, sims, sims_in


@app.cell(hide_code=True)
def _(capacity, sims_in, w):
    _prompt = sum(len(r.prompt) for r in sims_in) / len(sims_in)
    _answer = sum(r.max_new_tokens for r in sims_in) / len(sims_in)
    paging_box = learner.prediction(
        f"Both schemes get {capacity:,} KV slots. Contiguous reservation holds prompt + max_tokens = prompt + "
        f"{w.max_output} slots for a sequence from its admission to its end; a paged sequence holds the tokens it "
        f"has written, in blocks of {batching.PAGE_SIZE}. The trace's prompts average {_prompt:.0f} tokens and its "
        f"answers {_answer:.0f}. Over the whole run, how many times as many sequences will paging run at once as "
        "contiguous reservation, on average?", "×")
    paging_box
    return (paging_box,)


@app.cell
def _(sims):
    plots.table(tables.simulation_frame([s.summary() for s in sims]), "simulated: helpers.serving.paging, chat trace token counts")
    return


@app.cell
def _(capacity, loaded, sims):
    figures.paged_figure(sims, f"simulated on the chat trace tokenized by {loaded.model_name}'s tokenizer, "
                         f"{capacity:,} KV slots, blocks of {batching.PAGE_SIZE}")
    return


@app.cell
def _(paging_box, sims, sims_in, w):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 1.5); in marimo, type it in the box above
    _c, _p = sims[0].summary(), sims[1].summary()
    _held = sum(len(r.prompt) + r.max_new_tokens / 2 for r in sims_in) / len(sims_in)
    _reserved = sum(len(r.prompt) for r in sims_in) / len(sims_in) + w.max_output
    learner.beside(paging_box, _given, _p.mean_running / _c.mean_running,
                   shown=lambda v: f"{v:.2f}× ({_p.mean_running:.1f} against {_c.mean_running:.1f} sequences at once)",
                   higher=f"A contiguous sequence holds its whole reservation, {_reserved:.0f} slots on "
                          f"average, from its first step; a paged one holds what it has written, its prompt "
                          f"and on average half its answer, {_held:.0f} slots, plus a partly filled block.",
                   lower=f"The mean covers the whole run: at its end the queue is empty and both schemes run "
                         f"what is left; and paging preempted {_p.preemptions} times when blocks ran out.",
                   within="What a sequence holds, its prompt and the tokens written so far, against "
                          "prompt + max_tokens reserved.")
    return


@app.cell(hide_code=True)
def _(fit, sims):
    _c, _p = sims[0].summary(), sims[1].summary()
    mo.vstack([mo.md(f"""
    **Measured in the simulation:** what contiguous reservation reserved but no token filled is internal waste:
    room for tokens an answer has not generated yet, or never will (answers shorter than `max_tokens`, by
    `max_tokens` − the answer's length each); besides, {_c.mean_external_fragmentation:,.0f} free slots on average
    sat stranded in holes too small for the next request. Paging wastes at most one partly filled block per
    sequence. It made {_p.preemptions} preemptions: paging admits optimistically and, when blocks run out, evicts
    the newest sequence to recompute it later — the simulation counts steps, not that recomputation's cost.
    """), expected.should_see(paging.reading(_c, _p, fit), [expected.computed(
        "the simulation counts token slots and steps, nothing of a device: a GPU serving this trace in the same KV "
        "memory has these counts", "helpers.serving.paging.simulate")])])
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
    below and press **Serve with these sizes**: it serves the first chat requests live on this model (the
    headless run's sizes until you do), and every step's log is drawn as a timeline.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([notebook.code(scheduler.Scheduler.schedule, folded_=False),
               notebook.code(scheduler, "the whole of scheduler.py (booking a step, finishing, preempting)")])
    return


@app.cell
def _():
    engine_defaults = {"block": str(notebook.env_default("WORKSHOP_BLOCK_SIZE", 16, (4, 8, 16, 32, 64))),
                       "budget": notebook.env_default("WORKSHOP_TOKEN_BUDGET", 64, (16, 32, 64, 128, 256, 512)),
                       "seqs": notebook.env_default("WORKSHOP_MAX_SEQS", 4, range(1, 13)),
                       "kv": notebook.env_default("WORKSHOP_KV_TOKENS", 512, (256, 384, 512, 768, 1024, 2048))}
    engine_form = mo.md("{block} {budget}\n\n{seqs} {kv}").batch(
        block=mo.ui.dropdown(options=["4", "8", "16", "32", "64"], label="block size (tokens)",
                             value=engine_defaults["block"]),
        budget=mo.ui.slider(steps=[16, 32, 64, 128, 256, 512], show_value=True, label="token budget per step",
                            value=engine_defaults["budget"]),
        seqs=mo.ui.slider(start=1, stop=12, step=1, show_value=True, label="requests running at once",
                          value=engine_defaults["seqs"]),
        kv=mo.ui.slider(steps=[256, 384, 512, 768, 1024, 2048], show_value=True, label="KV cache (token slots)",
                        value=engine_defaults["kv"]),
    ).form(submit_button_label="Serve with these sizes", bordered=False)
    mo.vstack([engine_form, notebook.static_note({
        "WORKSHOP_BLOCK_SIZE": "block size (4, 8, 16, 32, 64)", "WORKSHOP_TOKEN_BUDGET": "token budget per step",
        "WORKSHOP_MAX_SEQS": "requests running at once (1–12)", "WORKSHOP_KV_TOKENS": "KV cache in token slots"})])
    return engine_defaults, engine_form


@app.cell
def _(engine_defaults, engine_form, model, tok, w):
    _sizes = engine_form.value or engine_defaults          # the submitted sizes, else the headless run's
    live_reqs = chat_requests(tok, w)[:12]
    _bs = int(_sizes["block"])
    live_args = EngineArgs(block_size=_bs, num_blocks=max(_sizes["kv"] // _bs, engine_runs.blocks_needed(live_reqs, _bs)),
                           max_num_seqs=_sizes["seqs"], max_batch_tokens=_sizes["budget"], prefix_cache="radix")
    live, live_engine = engine_runs.serve(model, live_reqs, live_args)
    return live, live_args, live_engine, live_reqs


@app.cell
def _(live, live_args, live_engine, loaded):
    figures.timeline_figure(engine_runs.timeline(live_engine.log), live_engine.log, loaded,
                            f"{len(live.timings)} chat requests, blocks of {live_args.block_size}, "
                            f"{live_args.max_batch_tokens} tokens per step, {live_args.max_num_seqs} at once, "
                            f"{live_args.blocks} blocks ({live_args.blocks * live_args.block_size:,} slots)")
    return


@app.cell
def _(live, live_args, live_engine, loaded):
    live_summary = engine_runs.log_summary(live_engine, live)
    plots.table(tables.log_summary_frame(live_summary), f"measured: the readable engine on {loaded.label}, "
                f"{live_args.blocks} blocks of {live_args.block_size}")
    return (live_summary,)


@app.cell(hide_code=True)
def _(live_args, live_reqs, live_summary):
    _s = live_summary
    mo.vstack([mo.md(f"""
    **Measured:** {_s.requests} requests in {_s.steps} steps; {_s.prefill_chunks} prefill chunks,
    {_s.mixed_steps} steps that mixed prefill chunks with decode rows; **{_s.preemptions} preemptions** with
    {live_args.blocks} blocks ({_s.recomputed_tokens:,} tokens computed again because of them); at most
    {_s.peak_blocks} of {live_args.blocks} blocks in use, holding {_s.tokens_at_peak:,} tokens in
    {_s.peak_blocks * live_args.block_size:,} slots; {_s.copy_on_write_copies} blocks copied on write.

    **Reading the timeline.** Orange: a chunk of a prompt; blue: a decode row; grey: waiting for a slot (at most
    the cap runs at once; a slot frees the step after a request finishes); red: a preemption — the newest
    request loses its blocks and is prefilled again later. Then move the controls: a prompt of p tokens needs at
    least ⌈p ÷ budget⌉ chunks, and a request's last block holds between 1 and block-size tokens.
    """), expected.should_see(engine_runs.log_reading(_s, live_args, live_reqs), [expected.computed(
        "the scheduler reads token counts, token ids (the prefix cache) and free blocks, never the clock: on a GPU "
        "the same requests and sizes make the same steps, chunks and preemptions; only each step's time differs",
        "helpers.engine.scheduler")])])
    return


@app.cell(hide_code=True)
def _():
    batching_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 5 · Continuous batching, against transformers' own

    The same chat requests (mixed prompt and output lengths), four ways:

    - **one after another** — a naive local server;
    - {term("static batches", "static-batching")} — `slots` requests at a time, prompts {term("left-padded", "left-padding")}; a batch ends when its slowest
      request does, and the next batch only starts then;
    - **transformers' continuous-batching manager** (`model.init_continuous_batching`) — *the library's
      version*: a scheduler that, at every step, puts a waiting request into any slot that freed up;
    - **the readable engine** — the same idea in the code above, at the same number of slots, token budget
      and block size.

    All four compute in a thread of their own, as transformers' manager always does: PyTorch's CPU operators
    run on OpenMP thread teams, one per calling thread, and a thread that computes while the notebook's own
    team exists pays for the extra team (`helpers.serving.batching.in_worker_thread` says why, with what it
    measured) — the comparison holds only under the same conditions (in marimo it waits for **Run live** when a
    recording is there to show).
    """), batching_button])
    return (batching_button,)


@app.function
def serve_four_ways(model, tok, w):
    """Section 5: the chat requests one after another, in static batches, through transformers'
    continuous-batching manager and through the readable engine, each in a worker thread."""
    requests = chat_requests(tok, w)
    served = batching.compare_batching(model, requests, w.slots)
    served["engine"] = batching.in_worker_thread(engine_runs.serve, model, requests, EngineArgs(
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
    _s = decode_intensity.summary(decode_intensity.intensity_table(expected.REFERENCE_MODEL, contexts=(4096,)))[0]
    _same = batching.same_tokens(served["engine"], served["sequential"]) == 1
    mo.vstack([mo.md(f"""
    **Measured:** the readable engine made {"the same" if _same else "NOT the same"} greedy tokens as one after
    another. Static batching computed {_pad.padding_tokens:,} padding tokens and {_pad.finished_rows_steps:,} decode
    rows for requests already done ({_pad.wasted_share:.0%} of its work), and its hatched slots sat idle waiting for
    each batch's slowest request. A batched step runs every row's matrix products at once: it reads the weights
    once for all its rows and does the arithmetic of each.
    """), expected.should_see(batching.reading(served), [
        expected.computed(str(batching.decode_bytes_on_gpu(expected.REFERENCE_MODEL, expected.REFERENCE_GPU, 4096)),
                          "helpers.serving.batching.decode_bytes_on_gpu: helpers.formulas.stepcost, helpers.capacity.plan"),
        expected.computed(decode_intensity.verdict(_s) + "; continuous batching keeps the batch full",
                          "helpers.formulas.decode_intensity")]),
        plots.table(tables.padding_frame(_pad), "computed: helpers.serving.batching.padding_tokens")])
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
    chunk_runs = engine_runs.chunked_prefill(model, _short, _long, 24, 3, [w.long_prompt + 8, w.chunk_budget])
    return (chunk_runs,)


@app.cell
def _(chunk_runs, loaded):
    plots.table(tables.chunked_frame(chunk_runs), f"measured: the readable engine on {loaded.label}")
    return


@app.cell(hide_code=True)
def _(chunk_runs):
    expected.should_see(engine_runs.chunked_reading(chunk_runs[0], chunk_runs[1]), [expected.computed(
        str(batching.chunks_on_gpu(expected.REFERENCE_MODEL, expected.REFERENCE_GPU, 4096, 512)),
        "helpers.serving.batching.chunks_on_gpu: helpers.formulas.stepcost at the datasheet's roofline")])
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
    - **radix** (SGLang's RadixAttention): a {term("radix tree")} over token ids (`helpers.engine.radix`) whose
      values are each token's block; a hit can end inside a block, which the request then shares and copies
      on its first write ({term("copy-on-write")}).

    Either keeps blocks while the allocator has room and drops the least recently used idle ones when the
    scheduler runs short. Two seeded workloads from `helpers.serving.traces`, each round served after the last:
    **chat** (independent conversations: nothing shared but the chat template's tokens) and **agentic** (one
    shared system prompt, a proposal round, then review rounds in which every reviewer reads the whole
    transcript so far).
    """), notebook.code(prefix_cache, "the whole of prefix_cache.py")])
    return


@app.cell
def _(model, tok):
    def _rounds(trace):
        _ids = traces.token_ids(tok, trace)
        return [[p for p, r in zip(_ids, trace) if r.round == k] for k in sorted({r.round for r in trace})]

    hit_block = 16
    prefix_hits = {"chat": engine_caches.cache_hits(model, _rounds(traces.chat_trace(16, seed=0)), hit_block),
                   "agentic": engine_caches.cache_hits(model, _rounds(traces.agentic_trace(agents=4, review_rounds=2, seed=0)),
                                                 hit_block)}
    edit = engine_caches.edit_hits(model, traces.token_ids(tok, traces.agentic_trace(agents=1, seed=0))[0], 300, hit_block)
    return edit, hit_block, prefix_hits


@app.cell
def _(hit_block, loaded, prefix_hits):
    plots.table(tables.cache_hits_frame(prefix_hits), f"measured: the readable engine on {loaded.label}, blocks of {hit_block}")
    return


@app.cell
def _(hit_block, loaded, prefix_hits):
    figures.hit_rate_figure({f"{t}, {c.cache}": c for t, r in prefix_hits.items() for c in (r.radix, r.hash)},
                            f"measured: the readable engine's prefix caches, {loaded.model_name}'s tokenizer, blocks of {hit_block}")
    return


@app.cell(hide_code=True)
def _(edit, hit_block, prefix_hits):
    _a = prefix_hits["agentic"]
    mo.vstack([mo.md(f"""
    **Measured:** the hits the tree finds beyond the hashes are tails that end inside a block, each paid for with a
    block copy on the agentic trace ({_a.radix.copy_on_write_copies} copies). An **edit** at token
    {edit.edited_position} of a {edit.prompt_tokens:,}-token prompt served before: every later block's hash, and
    every later node of the tree, depends on the edited token, so neither cache can reuse past it.
    """), expected.should_see(engine_caches.hits_reading(prefix_hits, hit_block) + [engine_caches.edit_reading(edit)],
                              [expected.computed(
        "the caches read token ids and block counts, nothing of a device: with the same tokenizer and trace a GPU "
        "run reuses the same tokens", "helpers.engine.prefix_cache")])])
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
    reuse = engine_caches.prefix_ttft(model, _prefix, _suffixes)
    plots.table(tables.prefix_ttft_frame(reuse), f"measured: the readable engine on {loaded.label}")
    return (reuse,)


@app.cell
def _(loaded, reuse):
    figures.bars_figure(["cold: prefix + suffix", "warm: suffix over cached prefix"],
                        [reuse.ttft_cold_ms, reuse.ttft_warm_ms], "time to first token (ms)",
                        f"prefix reuse: {reuse.prefix_tokens:,}-token prefix, {reuse.suffix_tokens}-token suffix, "
                        f"warm {verdicts.speed(reuse.ttft_warm_ms, reuse.ttft_cold_ms).words}", loaded,
                        colours=[figures.BASELINE, figures.MEASURED])
    return


@app.cell(hide_code=True)
def _(reuse):
    mo.vstack([mo.md(f"""
    **Measured:** the same first token cold and warm: **{reuse.same_first_token}**. Prefilling p + s tokens against s
    over a cached prefix is a token ratio of (p + s) ÷ s; the time ratio departs from it by what a step costs
    besides its tokens' matrix products (attention over the whole prefix, a fixed part per step).
    """), expected.should_see(engine_caches.ttft_reading(reuse), [expected.computed(
        str(engine_caches.hit_on_gpu(expected.REFERENCE_MODEL, expected.REFERENCE_GPU, reuse.prefix_tokens,
                                     reuse.suffix_tokens)),
        "helpers.serving.engine_caches.hit_on_gpu: helpers.formulas.stepcost at the datasheet's roofline")])])
    return


@app.cell(hide_code=True)
def _(loaded):
    quality_profile, trained = kv_quant.quality_profile(loaded.profile)
    mo.md(f"""
    ## 7 · KV-cache quantization

    transformers' `QuantizedCache` stores keys and values in **fp8** (one scale per tensor), or in **4 and 2
    bits** (optimum-quanto: a scale and a zero point per group of 64 values; the newest 128 tokens stay in full
    precision until they are quantized, as in KIVI). Bytes of the real cache are measured
    (`helpers.measure.tensor_bytes.measured_cache_bytes`) against `helpers.formulas.memory.kv_cache_bytes`; quality is {term("KL divergence")}
    and {term("top-1 agreement")} against the full-precision cache (`helpers.measure.quality`), on the evaluation text, with the
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
def _(kvq_bytes, kvq_quality, kvq_speed, loaded, trained):
    _missing = [s for s in kv_quant.SCHEMES if kv_quant.available(s)]
    if _missing:
        _out = mo.md(f"**Not measured here:** {', '.join(_missing)} — {kv_quant.available(_missing[0])}.")
    else:
        _b = {r.scheme: r for r in kvq_bytes}
        _proj_tokens = 4096
        _proj = kv_quant.projected_shares(expected.REFERENCE_MODEL, _proj_tokens, "bf16")
        _out = mo.vstack([mo.md(f"""
        **Measured:** besides the values, fp8 keeps {_b["fp8"].metadata_bytes:,} bytes of scales; 4 and 2 bits
        {_b["4-bit"].metadata_bytes:,} bytes of scales and zero points plus {_b["4-bit"].residual_bytes:,} bytes of
        not-yet-quantized tokens (the formula is `kv_quant.cache_bytes`: values, scales, residual; the shares are of this
        run's {loaded.dtype} cache).{"" if trained else " Random weights: the top token flips at near-ties, so the quality figures say nothing about a trained model."}
        This path dequantizes the cache before attention reads it, an extra pass every step; kernels that read the
        quantized cache inside attention (vLLM's fp8 KV cache) skip that pass.
        """), expected.should_see([kv_quant.bytes_reading(kvq_bytes), kv_quant.speed_reading(kvq_speed),
                                   kv_quant.quality_reading(kvq_quality)], [expected.computed(
            f"{expected.REFERENCE_MODEL}'s bf16 cache ({memory.kv_bytes_per_token(expected.REFERENCE_MODEL, 'bf16') / 1e3:.0f} kB "
            f"per token) at {_proj_tokens:,} tokens would be {_proj['fp8']:.0%} (fp8), {_proj['4-bit']:.0%} (4-bit) and "
            f"{_proj['2-bit']:.0%} (2-bit) of its size — {1 / _proj['fp8']:.1f}×, {1 / _proj['4-bit']:.1f}× and "
            f"{1 / _proj['2-bit']:.1f}× the users or context",
            "helpers.serving.kv_quant.projected_shares: the formula checked against the cache above, with the scales as "
            "wide as a bf16 cache keeps them and half the residual window in full precision")])])
    _out
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md(f"""
    ## 8 · Speculative decoding: draft, verify, accept

    A drafter proposes k tokens; the target runs its pending token and all k drafts in **one** forward pass
    (a chunk of k + 1 rows, like a short prefill), which gives its distribution p at every drafted position and
    one past them. Greedy: keep drafts while they equal the target's argmax, then the target's own token —
    exactly the target's greedy output. Sampled: Leviathan et al. (ICML 2023), Algorithm 1 — keep draft x with
    probability min(1, p(x)/q(x)); at the first rejection draw from the residual norm(max(0, p − q)); if all k
    are kept, one more from p. Every emitted token is then distributed exactly as p: lossless for sampling too.
    Two drafters (speculative.py): **prompt lookup** (copy what followed the latest n-gram's first earlier
    occurrence; transformers' rule) and an **early-exit draft** — the target's own first layers, its final norm
    and head (a {term("draft model")} sharing the target's weights, LayerSkip-style; no separately trained small model of
    this vocabulary is available offline). How often the target keeps a draft, the per-token
    {term("acceptance", "acceptance-rate")} α, decides how many tokens a verify pass yields. The whole accept step:
    """), notebook.code(spec_loop.verify, folded_=False),
        notebook.code(spec_loop, "the whole of speculative.py (the drafters and the loop)")])
    return


@app.cell
def _(w):
    spec_k_default = notebook.env_default("WORKSHOP_SPEC_K", w.spec_k, range(1, 9))
    k_form = mo.ui.slider(start=1, stop=8, step=1, show_value=True, label="draft length k",
                          value=spec_k_default).form(submit_button_label="Measure at this k", bordered=False)
    alpha_pick = mo.ui.slider(start=0.1, stop=0.95, step=0.05, show_value=True, label="per-token acceptance α (model)",
                              value=notebook.env_default("WORKSHOP_SPEC_ALPHA", 0.6, lo=0.1, hi=0.95))
    spec_box = learner.prediction(
        "Each of the k drafted tokens is kept with probability α (the two controls above), in order, up to the first "
        "the target rejects; the verify pass then adds one token of its own. How many tokens does one verify pass "
        "yield on average?", "tokens")
    mo.vstack([mo.md(f"""
    The draft length k is the size of every measurement below: a new k re-measures them all (the runs at batch 1
    and 8, transformers' version, the verify passes) when you press **Measure at this k**; until then they stay at
    k = {spec_k_default}, the headless run's. α moves only the worked example and the curve, computed at once.
    """), k_form, alpha_pick, notebook.static_note({
        "WORKSHOP_SPEC_K": "draft length k (1–8)", "WORKSHOP_SPEC_ALPHA": "α of the worked example and the expected-tokens "
                                                                         "curve (0.1–0.95)"}), spec_box])
    return alpha_pick, k_form, spec_box, spec_k_default


@app.cell
def _(k_form, spec_k_default):
    spec_k = spec_k_default if k_form.value is None else int(k_form.value)   # the submitted k, else the default
    return (spec_k,)


@app.cell(hide_code=True)
def _(alpha_pick, spec_k):
    spec_parts = speculation.tokens_per_pass_parts(alpha_pick.value, spec_k)
    _p = spec_parts
    mo.md(f"""
    **Tokens per verify pass, derived.** The target checks the drafts in order and stops at the first it rejects.
    Whatever happens, the pass yields **one token of the target's own**: the correction at the rejection or, when
    all k drafts are kept, the token past them. On top of it, draft i counts only if drafts 1 … i are all kept.
    With each checked draft kept independently with probability α (the per-token acceptance), that
    happens with probability α^i. Adding the terms (Leviathan et al., eq. 1; the geometric series):

        E = 1 + α + α² + … + α^k = (1 − α^(k+1)) ÷ (1 − α)        (k + 1 at α = 1)

    E is what a round is measured against. Plain decoding yields one token per decode step; a round yields E tokens
    for one verify pass (v decode steps: about 1 while the pass stays {term("memory-bound")}, up to k + 1 once it is
    compute-bound) and k draft steps of c decode steps each. It **pays** when E beats that cost,
    v + k·c (`speculation.round_cost`), by more than the {verdicts.CHANGE_MARGIN:.0%} margin
    (`speculation.pays`); it **breaks even** at the α where E = v + k·c (`speculation.break_even_alpha`).

    **Worked example** (`helpers.formulas.speculation.tokens_per_pass_parts`), α = {_p.alpha:.2f}, k = {_p.k}:

    - the target's own token: 1
    - the drafts, α¹ … α^{_p.k}: {" + ".join(f"{_a:.3f}" for _a in _p.kept)} = {_p.total - 1:.3f}
    - E = **{_p.total:.3f}** tokens per pass; the closed form, (1 − {_p.alpha:.2f}^{_p.k + 1}) ÷ (1 − {_p.alpha:.2f}),
      gives {_p.closed_form:.3f}
    - the whole draft is kept in {_p.whole_draft_kept:.1%} of passes; {_p.kept_share_of_drafted:.1%} of the drafted
      tokens are kept, not α = {_p.alpha:.0%}, since a draft after a rejection is never checked; the k-th draft adds
      α^k = {_p.last_gain:.3f} tokens to E.
    """)
    return (spec_parts,)


@app.cell
def _(spec_box, spec_parts):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 3); in marimo, type it in the box above
    _p = spec_parts
    learner.beside(spec_box, _given, _p.total, shown=lambda v: f"{v:.2f} tokens (k = {_p.k}, α = {_p.alpha:.2f})",
        lower=f"A draft counts only when every draft before it was kept: the i-th with probability α^i, not α, so "
              f"the {_p.k} drafts add {_p.total - 1:.2f} tokens, not k·α = {_p.k * _p.alpha:.2f}.",
        higher="The pass always yields one token of the target's own, the correction or the token past a fully kept "
               "draft, on top of the kept drafts.",
        within="1 + α + α² + … + α^k, as derived.")
    return


@app.cell
def _(qloaded, spec_k, w):
    spec_text = quality.eval_ids(qloaded.tokenizer, 160, profile=qloaded.profile)
    spec_context = len(spec_text) + w.decode_tokens // 2       # cached tokens at a typical step
    spec_rows = speculative.speculative_runs(qloaded.model, spec_text, w.decode_tokens, k=spec_k,
                                            draft_layers=w.draft_layers)
    spec_batch = speculative.speculative_runs(qloaded.model, spec_text, w.decode_tokens, k=spec_k,
                                             draft_layers=w.draft_layers, batch=8)
    library = speculative.speculate(qloaded.model, spec_text, w.decode_tokens, k=spec_k)
    plots.table(tables.speculative_frame(spec_rows + spec_batch), f"measured: the readable engine's loop on {qloaded.label}, "
                f"greedy, k = {spec_k}")
    return library, spec_batch, spec_context, spec_rows, spec_text


@app.cell
def _(alpha_pick, qloaded, spec_k, spec_rows):
    figures.expected_tokens_figure([r for r in spec_rows if r.k], alpha_pick.value, max(8, spec_k), qloaded)
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
def _(qloaded, spec_context, spec_k):
    # what verifying k drafts costs against a decode step: measured here, and computed for Mistral 7B on an H100
    verify_here = [speculative.verify_cost(qloaded.model, spec_k, spec_context, b) for b in (1, 8)]
    verify_cost = [speculation.verify_step_ratio("mistral-7b-v0.1", spec_k, c, b)
                   for c in (512, 4096) for b in (1, 16, 64, 256)]
    mo.vstack([plots.table(tables.verify_frame(verify_here), f"measured: the engine's runner on {qloaded.label}, fastest of 5"),
               plots.table(tables.verify_frame(verify_cost), "computed: helpers.formulas.speculation.verify_step_ratio "
                                        "(helpers.formulas.stepcost at the H100's roofline)")])
    return verify_cost, verify_here


@app.cell(hide_code=True)
def _(exact, library, qloaded, spec_batch, spec_context, spec_rows, trained, verify_cost, verify_here, w):
    _plain, _pl, _dm = spec_rows
    _same = all(r.identical_to_plain for r in spec_rows + spec_batch)
    _exact = bool((exact["what comes out"] - exact["target p"]).abs().max() < 1e-12)
    spec_share = speculation.draft_step_share(qloaded.spec, w.draft_layers, spec_context, qloaded.dtype)
    _share = spec_share
    mo.vstack([mo.md(f"""
    **Measured:** prompt lookup made its {w.decode_tokens} tokens in {_pl.target_passes} target passes; transformers'
    assisted generation with the same rule, *the library's version*, in {library.target_passes}
    ({"the same" if library.target_passes == _pl.target_passes else "NOT the same"}). The early-exit draft uses
    {w.draft_layers} of {qloaded.model.config.num_hidden_layers} layers, each draft step reading {_share:.0%} of what a
    target step reads (`speculation.draft_step_share`). Output identical to plain decoding in every run: **{_same}**.
    The enumeration above: what comes out of one accept step equals the target's p
    **{"exactly" if _exact else "NOT exactly"}** — rejection sampling loses nothing (the tests repeat it on a model with a
    seeded goodness-of-fit test).{"" if trained else " (Random weights: the draft's tokens are kept by chance only.)"}

    A round costs one verify pass — k + 1 rows per request, measured above against a one-row decode step — and, for a
    draft model, its k draft steps; it yields the tokens per pass. A single row runs as a matrix–vector product,
    several rows as a matrix product, so what k + 1 rows cost against one is this machine's, and it moves with the
    load.
    """), expected.should_see(speculative.speculative_reading(spec_rows + spec_batch, verify_here, _share)
                              + [speculation.head_share(qloaded.spec, qloaded.dtype)],
                              [expected.computed(str(v), "helpers.formulas.speculation.verify_step_ratio: "
                                                 "helpers.formulas.stepcost at the datasheet's roofline")
                               for v in speculation.verify_on_gpu(verify_cost)]
                              + [expected.cited(
                                  f"with smaller T5 models as drafts, Leviathan et al. decode T5-XXL "
                                  f"{expected.published('leviathan_t5xxl_speedup_low').value:g}×–"
                                  f"{expected.published('leviathan_t5xxl_speedup_high').value:g}× faster than the "
                                  "standard T5X implementation, with identical outputs",
                                  "leviathan_t5xxl_speedup_low", "leviathan_t5xxl_speedup_high")])])
    return (spec_share,)


@app.cell(hide_code=True)
def _():
    # the problem: the break-even acceptance of a draft model, at a batch whose verify pass stays memory-bound and at
    # one that makes it compute-bound (Mistral 7B on an H100 SXM, helpers.formulas.stepcost at the roofline)
    _k, _c, _ctx, _batches = 4, 0.05, 512, (1, 256)
    _v = {_b: speculation.verify_step_ratio("mistral-7b-v0.1", _k, _ctx, _b) for _b in _batches}
    _cost = {_b: speculation.round_cost(_v[_b].verify_over_decode, _k, _c) for _b in _batches}
    _even = {_b: speculation.break_even_alpha(_k, _cost[_b]) for _b in _batches}
    _pay = {_b: speculation.break_even_alpha(_k, _cost[_b] * (1 + verdicts.CHANGE_MARGIN)) for _b in _batches}

    def _at(b):
        return (f"- batch {b}: the verify pass is {_v[b].verify_bound}-bound, v = {_v[b].verify_over_decode:.2f}; a round "
                f"costs v + k·c = {_v[b].verify_over_decode:.2f} + {_k} × {_c:g} = **{_cost[b]:.2f}** decode steps; "
                f"E = {_cost[b]:.2f} at **α = {_even[b]:.2f}** (`break_even_alpha`), and E > {_cost[b]:.2f} × "
                f"{1 + verdicts.CHANGE_MARGIN:g} = {_cost[b] * (1 + verdicts.CHANGE_MARGIN):.2f} above α = {_pay[b]:.2f}")

    notebook.exercise(3, f"The break-even acceptance. Mistral 7B on an H100 SXM, {_ctx} tokens of context, a draft "
                      f"model whose step costs c = {_c:g} of a target step, k = {_k}. At batch {_batches[0]} and at batch "
                      f"{_batches[1]}, what per-token acceptance α must the draft reach for a round to break even, and to "
                      f"pay by the {verdicts.CHANGE_MARGIN:.0%} margin? (`speculation.verify_step_ratio` gives the verify "
                      "pass v in decode steps.)",
                      "\n".join([_at(_b) for _b in _batches] + [
                          "", f"The same draft needs α ≥ {_even[_batches[1]]:.2f} at batch {_batches[1]} where "
                          f"{_even[_batches[0]]:.2f} was enough at batch {_batches[0]}: once the batch makes the verify "
                          f"pass compute-bound, its k + 1 rows cost up to k + 1 decode steps, and only a draft the target "
                          f"keeps more often pays for them."]),
                      "Solution (computed by helpers.formulas.speculation: verify_step_ratio, round_cost, break_even_alpha)")
    return


@app.cell(hide_code=True)
def _():
    _chunks = -(-200 // 16)
    mo.vstack([
        mo.md("## Exercises\n\nExercise 3, the break-even acceptance, closes section 8."),
        notebook.exercise(1, "Re-run section 1 with a longer prompt (`quality.eval_ids(tok, 512)`). Which line "
                          "moves, and why?", """
        The no-cache line: each step recomputes all p + t tokens, so its work grows with the prompt; the cached
        step computes one token whatever the prompt, and only its reads of the cache grow with p + t. The cache
        always saves compute; what it costs is memory (section 3), which is why servers page it."""),
        notebook.exercise(2, "In section 4, set the token budget to 16 and then 512 (KV cache 2,048 slots). What "
                          "happens to the number of prefill chunks, to the longest prompt's first token, and to "
                          "the others' decode rows while it is prefilled?", f"""
        At 16 a 200-token prompt needs at least ⌈200 ÷ 16⌉ = {_chunks} chunks, so its first token waits at least
        {_chunks} steps, and no step computes more than 16 tokens, so the decoding requests' steps stay short. At 512
        the whole prompt fits one step: its first token comes after that one step, and the step computes all 200
        tokens for everyone in it. The budget trades the long prompt's {term("TTFT")} for the others' {term("inter-token latency", "itl")}."""),
    ])
    return


@app.cell(hide_code=True)
def _(live_args, live_reqs, prefix_hits, spec_k, spec_share, verify_here):
    _long = max(live_reqs, key=lambda r: len(r.prompt) + r.max_new_tokens)
    _v1 = next(v for v in verify_here if v.batch == 1)
    _a = prefix_hits["agentic"]
    check_questions = [
        learner.Question(f"Section 4: the longest of its requests has {len(_long.prompt)} prompt tokens and asks for "
                         f"{_long.max_new_tokens} new ones. In blocks of {live_args.block_size} tokens, how many blocks "
                         "do its tokens fill (the last one partly)?",
                         -(-(len(_long.prompt) + _long.max_new_tokens) // live_args.block_size), "blocks", tolerance=0),
        learner.Question(f"Section 8: a verify pass of k + 1 = {spec_k + 1} rows measured {_v1.verify_over_decode:.2f} "
                         f"decode steps at batch 1 here, and each early-exit draft step reads {spec_share:.2f} of a "
                         f"target step. How many tokens must a round of k = {spec_k} drafts yield to break even?",
                         speculation.round_cost(_v1.verify_over_decode, spec_k, spec_share), "tokens"),
        learner.Question("Section 6: on the agentic trace, which prefix cache reused more prompt tokens?",
                         "the radix tree" if _a.radix.reused_tokens > _a.hash.reused_tokens else
                         "the block hashes" if _a.hash.reused_tokens > _a.radix.reused_tokens else "the same",
                         options=("the radix tree", "the block hashes", "the same")),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "on sections 4, 6 and 8; submit new sizes in section 4 or a new k in section 8 and they follow")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    # checked against this run when the form is submitted (marimo); folded answers elsewhere
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _(chunk_runs, fit, kvq_bytes, kvq_speed, on_off, prefix_hits, reuse, served, spec_rows):
    _plain = spec_rows[0]
    _best = max(spec_rows[1:], key=lambda r: r.speedup)
    _lossless = all(r.identical_to_plain for r in spec_rows)
    _wall = verdicts.speed(_best.seconds, _plain.seconds, than="plain decoding")
    mo.md(f"""
    ## Takeaways

    - **The KV cache** turns quadratic work into linear: {on_off.tokens_without_cache:,} tokens run
      through the model without it, {on_off.tokens_with_cache:,} with;
      {"the same tokens out" if on_off.identical_tokens else "**different tokens out**"}; {kv_cache.reading(on_off)[1]}.
    - **Paging** stores what sequences hold, not what they might: {fit.paged} sequences fit paged in the memory
      where {fit.contiguous} fit contiguously; the engine's cache is a tensor of blocks read through each request's table.
    - **Continuous batching** fills freed slots at once: {batching.reading(served)[0]}. With a token budget,
      {engine_runs.chunked_reading(chunk_runs[0], chunk_runs[1])[1]}; preemption trades recomputation for memory.
    - **Prefix caching** pays where prompts share prefixes — the radix tree reused
      {", ".join(f"{verdicts.share(r.radix.reused_tokens, r.radix.prompt_tokens).words} of the {t} trace's prompt tokens" for t, r in prefix_hits.items())};
      {engine_caches.ttft_reading(reuse)[0]}.
    - **KV-cache quantization** buys memory: the cache is {", ".join(f"{r.share_of_full:.0%} ({r.scheme})" for r in kvq_bytes[1:])}
      of full precision; its speed here, {kv_quant.speed_reading(kvq_speed)}; its quality cost is measured, not assumed.
    - **Speculative decoding** {"kept the target's output exactly" if _lossless else "**changed the output**"}; it pays
      when a round's tokens beat what the round costs in decode steps (cheap drafts, kept drafts, a verify pass
      that stays memory-bound). Here the best, {_best.drafter}: {_best.tokens_per_pass:.2f} tokens per target pass,
      {_wall.words} on the wall clock.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
