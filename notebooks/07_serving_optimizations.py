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
    from dataclasses import asdict

    import marimo as mo
    import pandas as pd
    import torch

    from helpers import engine
    from helpers.engine import kv as engine_kv
    from helpers.engine import llm, prefix_cache, runner, scheduler
    from helpers.engine import speculative as spec_loop
    from helpers.engine.llm import EngineArgs
    from helpers.formulas import regime, speculation
    from helpers.measure import models, quality
    from helpers.present import expected, learner, notebook, plots, replay, run_times
    from helpers.present.glossary import term
    from helpers.serving import batching, engine_caches, engine_runs, figures, kv_cache, paging, speculative, tables, traces
    from helpers.serving import trained_profile
    from helpers.serving import measured as serving_bench
    from helpers.serving.measured import chat_requests, paged_trace, workload

    notebook.setup()
    started = time.perf_counter()
    GPU_MODEL, GPU = expected.REFERENCE_MODEL, expected.REFERENCE_GPU


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 07 · Serving optimizations, measured

    **What you will learn**

    1. To follow one request through a readable engine — scheduler, paged {term("KV cache")}, prefix cache, runner.
    2. To measure what {term("paged attention")}, {term("continuous batching")} and the rest buy in
       {term("throughput")}, memory or latency, beside transformers' own.
    3. To tell when a mechanism does not pay: {term("prefix caching")} without shared prefixes,
       {term("speculative decoding")} with nothing to copy, a {term("compute-bound")} verify pass.

    {run_times.header("07")}

    Each mechanism is a short file of `helpers/engine/` (after nano-vllm), run live. Each table gives a ratio and
    its label, below, at or above (10 % margin), read in the three regimes: overhead, bandwidth, compute.
    """)
    return


@app.cell
def _():
    loaded = models.load()
    model, tok = loaded.model, loaded.tokenizer
    w = workload(loaded.profile, loaded.device)
    plots.table(pd.DataFrame([asdict(w)]), f"the workload's sizes (helpers.serving.measured.workload): {loaded.label}")
    return loaded, model, tok, w


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 1 · The KV cache, on and off

    Without a cache each new token reruns the whole sequence: n tokens after a prompt of p cost n·p + n(n−1)/2
    token rows. With it only the newest token runs, attending to stored keys and values: p + n − 1. The
    {term("greedy", "greedy-decoding")} tokens are the same.
    """)
    return


@app.cell
def _(loaded, model, tok, w):
    _run = replay.measure("07/cache_on_off", kv_cache.cache_on_off, model, torch.tensor([quality.eval_ids(tok, 64)]),
                          w.decode_tokens, profile=loaded.profile, device=loaded.device)
    on_off, on_off_source = _run.value, _run.source(f"measured: {loaded.label}")
    _gpu = kv_cache.on_gpu(GPU_MODEL, GPU, on_off.prompt_tokens, on_off.new_tokens)
    mo.vstack([_run.note(), plots.table(tables.cache_on_off_frame(on_off), on_off_source),
               plots.table(tables.cache_ratio_frame(on_off, kv_cache.step_fit(on_off)), on_off_source),
               plots.table(_gpu, "computed: helpers.serving.kv_cache.on_gpu, each step at "
                           "its roofline floor")])
    return on_off, on_off_source


@app.cell
def _(on_off, on_off_source):
    figures.cache_on_off_figure(on_off, on_off_source)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** The second table sets the time saved against the work saved.

    - **below**: every step pays a fixed part (the fit's ms per step) the cache does not remove: overhead.
    - **at**: the time follows the tokens.
    - **above**: a no-cache token cost more than a cached one: attention over the whole sequence, or a working
      set that left the caches.

    *On a GPU*: until a no-cache step turns compute-bound, both ways read the weights once in the same time.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md(f"""
    ## 2 · The engine: one request from arrival to its last token

    `Engine.add` (llm.py) queues a `Request`. `Scheduler.schedule` admits it when a slot, the step's
    {term("token budget")} and free KV blocks allow, starting its {term("block table")} with any blocks the prefix
    cache holds for its first tokens. `Runner.forward` computes every scheduled request's rows in one flat batch: a
    prompt in chunks, then one token a step.
    """), plots.table(pd.DataFrame(engine.core_files()), "computed: helpers.engine.core_files (no blanks, comments "
                                                            "or docstrings)"),
        notebook.code(llm.Engine.step, folded_=False), notebook.code(llm, "llm.py")])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 3 · Paged attention: blocks instead of contiguous reservations

    Not knowing an answer's length, a contiguous allocator reserves `prompt + max_tokens` slots per sequence.
    `BlockAllocator` (kv.py) hands out blocks of {batching.PAGE_SIZE} slots (vLLM's GPU default) as a sequence
    writes: a free list, a block table per sequence, reference counts, {term("copy-on-write")} (Kwon et al.). Both
    schemes serve the same {serving_bench.PAGED_REQUESTS} chat requests a {term("decode")} step at a time in the same
    KV memory; the paged side is the engine's scheduler without a model.
    """)
    return


@app.cell
def _(tok, w):
    sims_in, capacity = paged_trace(tok, w)
    sims = [paging.contiguous(sims_in, capacity, w.max_output), paging.paged(sims_in, capacity, batching.PAGE_SIZE)]
    return capacity, sims, sims_in


@app.cell(hide_code=True)
def _(capacity, sims_in, w):
    _n = max(1, len(sims_in))
    paging_box = learner.prediction(
        f"Both schemes get {capacity:,} KV slots; prompts average {sum(len(r.prompt) for r in sims_in) / _n:.0f} "
        f"tokens, answers {sum(r.max_new_tokens for r in sims_in) / _n:.0f}, and max_tokens is {w.max_output}. On "
        "average, how many times as many sequences does paging run at once?", "×")
    paging_box
    return (paging_box,)


@app.cell
def _(capacity, loaded, sims):
    mo.vstack([plots.table(tables.simulation_frame(sims),
                           "simulated: helpers.serving.paging on the chat trace's token counts"),
               figures.paged_figure(sims, f"simulated on the chat trace tokenized by {loaded.model_name}'s tokenizer, "
                                          f"{capacity:,} KV slots, blocks of {batching.PAGE_SIZE}")])
    return


@app.cell
def _(paging_box, sims):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 1.5); in marimo, type it in the box above
    learner.beside(paging_box, _given, regime.ratio(sims[1].mean_running, sims[0].mean_running),
                   higher="A contiguous sequence holds prompt + max_tokens from its first step; a paged one holds what "
                          "it has written, its prompt and on average half its answer.",
                   lower="The mean covers the run's tail, where both schemes run what is left, and paging "
                         "recomputes each sequence it evicts.",
                   within="What a sequence holds against what is set aside for it.")
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md("""
    **What you should see.** "÷ contiguous" compares the sequences running at once.

    - **above**: contiguous memory went to reservations never written and to holes too small for the next
      request; paging wastes at most one partly filled block per sequence.
    - **at**: answers as long as `max_tokens`: a reservation that is used wastes nothing.
    - **below**: preemptions: paging admits optimistically and evicts a sequence to recompute it later.

    These count slots and steps: a GPU makes the same counts.

    **The paged cache is a real tensor** (kv.py), `[layers, blocks, block_size, kv_heads, head_dim]`: token t sits
    in block `table[t // block_size]`, slot `t % block_size`. One layer:
    """), notebook.code(runner.Runner._layer, folded_=False), notebook.code(engine_kv, "kv.py"),
        notebook.code(runner, "runner.py")])
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md(f"""
    ## 4 · The scheduler, step by step

    Each step fills the token budget: running requests first, oldest first — one token for a decoding request,
    the next chunk of a prompt still prefilling ({term("chunked prefill")}) — then waiting requests while a slot,
    the budget and free blocks allow. When blocks run out the newest running request is
    {term("preempted", "preemption")}, to be recomputed, and none is admitted that step, as in vLLM. Press **Serve
    with these sizes** to serve the first chat requests live.
    """), notebook.code(scheduler.Scheduler.schedule, folded_=False), notebook.code(scheduler, "scheduler.py")])
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
        "WORKSHOP_BLOCK_SIZE": "block size", "WORKSHOP_TOKEN_BUDGET": "token budget",
        "WORKSHOP_MAX_SEQS": "requests at once", "WORKSHOP_KV_TOKENS": "KV slots"})])
    return engine_defaults, engine_form


@app.cell
def _(engine_defaults, engine_form, model, tok, w):
    _sizes = engine_form.value or engine_defaults          # the submitted sizes, else the headless run's
    live_reqs = chat_requests(tok, w)[:12]
    _bs = int(_sizes["block"])
    live_args = EngineArgs(block_size=_bs, num_blocks=max(_sizes["kv"] // _bs, engine_runs.blocks_without_preemption(live_reqs, _bs)),
                           max_num_seqs=_sizes["seqs"], max_batch_tokens=_sizes["budget"], prefix_cache="radix")
    live, live_engine = engine_runs.serve(model, live_reqs, live_args)
    return live, live_args, live_engine, live_reqs


@app.cell
def _(live, live_args, live_engine, live_reqs, loaded):
    mo.vstack([figures.timeline_figure(live_engine.log, loaded,
                                       f"{len(live.timings)} chat requests, blocks of {live_args.block_size}, "
                                       f"{live_args.max_batch_tokens} tokens per step, {live_args.max_num_seqs} at once, "
                                       f"{live_args.blocks} blocks"),
               plots.table(engine_runs.log_summary(live_engine, live, live_reqs),
                           f"measured: the readable engine on {loaded.label}")])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **Reading the timeline.** Orange: a prompt chunk; blue: a decode row; grey: waiting; red: preempted. A
    prompt of p tokens takes at least ⌈p ÷ budget⌉ chunks. Preemptions come when the cache has fewer blocks than
    "blocks that prevent preemption". The scheduler reads token counts, never the clock: a GPU makes the same steps.
    """)
    return


@app.cell(hide_code=True)
def _():
    batching_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 5 · Continuous batching, against transformers' own

    The same chat requests four ways: **one after another**; {term("static batches", "static-batching")} of
    `slots` requests, prompts {term("left-padded", "left-padding")}, each batch waiting for its slowest;
    **transformers' continuous-batching manager** (`init_continuous_batching`: decoding requests first, then
    prompts split to fill the budget, Orca's iteration-level scheduling); **the readable engine** at the same
    slots. Each computes in a worker thread.
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
def _(batch_reqs, batching_run, loaded, served, w):
    _panels = []
    for _k, _static in (("static", w.slots), ("continuous", None), ("engine", None)):
        _r = served[_k]
        _segs = batching.slot_segments(_r, w.slots, _static)
        _panels.append((f"{_r.mode}: {plots.cell_text(_r.tokens_per_s)} tokens/s, slots idle "
                        f"{plots.cell_text(batching.idle_share(_segs, _r.wall_s, w.slots))} of the time", _segs, _r.wall_s))
    mo.vstack([batching_run.note(), plots.table(
        batching.batching_frame(served.values(), served["sequential"]),
        batching_run.source(f"measured: {loaded.label}")),
        figures.slots_figure(_panels, w.slots, loaded),
        plots.table(batching.padding_tokens(batch_reqs, w.slots),
                    "computed: helpers.serving.batching.padding_tokens, static batches"),
        plots.table(batching.decode_on_gpu(GPU_MODEL, GPU, 4096, (1, w.slots)),
                    "computed: helpers.serving.batching.decode_on_gpu, each step at its roofline floor")])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** "÷ one after another" is each way's speed-up.

    - **above**: the rows share a step's fixed part (overhead) or its weight reads (bandwidth); continuous
      batching also refills a freed slot at once, where a static batch idles (hatched) and computes padding.
    - **at**: the step's cost grew with its rows (compute).
    - **below**: batching cost more than it shared: padding, or threads contending for cores.

    *On a GPU*: the computed table gives the weights' share of a decode step's bytes and the floor's tokens/s.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ### Chunked prefill

    A long prompt prefilled in one step stalls every other request for the whole prefill. With a budget below its
    length the engine cuts it into chunks that share steps with the others' decode rows (Sarathi-Serve). Below:
    short requests decoding, then a long prompt arriving, at a budget above its length and at a small one.
    """)
    return


@app.cell
def _(loaded, model, tok, w):
    _short = [quality.eval_ids(tok, 24)[i:] for i in range(3)]
    _long = torch.randint(3, model.config.vocab_size, (w.long_prompt,), generator=torch.Generator().manual_seed(0)).tolist()
    _run = replay.measure("07/chunked_prefill", engine_runs.chunked_prefill, model, _short, _long, 24, 3,
                          [w.long_prompt + 8, w.chunk_budget], profile=loaded.profile, device=loaded.device)
    mo.vstack([_run.note(), plots.table(tables.chunked_frame(_run.value),
                                        _run.source(f"measured: the readable engine on {loaded.label}")),
               plots.table(batching.chunks_on_gpu(GPU_MODEL, GPU, 4096, 512),
                           "computed: helpers.serving.batching.chunks_on_gpu, each step at its roofline floor")])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** "÷ no chunking" compares the others' worst gap between tokens: **below**, chunks
    shortened the stall; **at**, a step's fixed part set its time (overhead); **above**, chunking added steps and
    shortened none. The budget trades the long prompt's {term("TTFT")} for the others'
    {term("inter-token latency", "itl")}.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md(f"""
    ## 6 · Prefix caching: a {term("radix tree")} against chained block hashes

    A prompt that starts with tokens an earlier request prefilled reuses their blocks, found two ways:

    - **hash**, as vLLM: each *full* block is named by a hash chained through the blocks before it,
      h_j = H(h_(j−1), tokens of block j); a prompt stops at its first unknown block.
    - **radix**, after SGLang's RadixAttention: a radix tree over token ids (radix.py), so a hit can end inside a
      block, which the request shares and copies on its first write.

    Both evict least recently used idle blocks. Two traces: **chat** (only the chat template shared) and
    **agentic** (a shared system prompt, then review rounds that each read the whole transcript).
    """), notebook.code(prefix_cache, "prefix_cache.py")])
    return


@app.cell
def _(loaded, model, tok):
    def _rounds(trace):
        _ids = traces.token_ids(tok, trace)
        return [[p for p, r in zip(_ids, trace) if r.round == k] for k in sorted({r.round for r in trace})]

    _block = 16
    prefix_hits = {"chat": engine_caches.cache_hits(model, _rounds(traces.chat_trace(16, seed=0)), _block),
                   "agentic": engine_caches.cache_hits(model, _rounds(traces.agentic_trace(agents=4, review_rounds=2, seed=0)),
                                                       _block)}
    _edit = engine_caches.edit_hits(model, traces.token_ids(tok, traces.agentic_trace(agents=1, seed=0))[0], 300, _block)
    _label = f"measured: the readable engine on {loaded.label}, blocks of {_block}"
    mo.vstack([plots.table(tables.cache_hits_frame(prefix_hits), _label),
               figures.hit_rate_figure({f"{t}, {c.cache}": c for t, r in prefix_hits.items() for c in (r.radix, r.hash)},
                                       _label),
               plots.table(_edit, f"{_label}: one token of a prompt served before, changed")])
    return (prefix_hits,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** "÷ hash" compares the tokens each cache reused. **above**: hits ending inside a block,
    which only the tree finds; **at**: hits ending on block boundaries; **below**: only where the two evicted
    different blocks. After an edited token the tree stops at the edit, the hashes at the last whole block before
    it. A GPU reuses the same tokens.

    Does a hit save time? Prefix + suffix **cold** (caching off) and **warm** (only the suffix computed):
    """)
    return


@app.cell
def _(loaded, model, w):
    _g = torch.Generator().manual_seed(0)
    _prefix = torch.randint(3, model.config.vocab_size, (w.prefix_tokens,), generator=_g).tolist()
    _suffixes = [torch.randint(3, model.config.vocab_size, (w.suffix_tokens,), generator=_g).tolist() for _ in range(4)]
    reuse = engine_caches.prefix_ttft(model, _prefix, _suffixes)
    mo.vstack([plots.table(tables.prefix_ttft_frame(reuse), f"measured: the readable engine on {loaded.label}"),
               plots.table(engine_caches.hit_on_gpu(GPU_MODEL, GPU, reuse.prefix_tokens, reuse.suffix_tokens),
                           "computed: helpers.serving.engine_caches.hit_on_gpu, each prefill at its roofline floor"),
               figures.bars_figure(["cold: prefix + suffix", "warm: suffix over cached prefix"],
                                   [reuse.ttft_cold_ms, reuse.ttft_warm_ms], "time to first token (ms)",
                                   f"prefix reuse: {reuse.prefix_tokens:,}-token prefix, {reuse.suffix_tokens}-token suffix",
                                   loaded, colours=[figures.BASELINE, figures.MEASURED])])
    return (reuse,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** "÷ token ratio" sets the TTFT saved against the tokens saved. **below**: the warm step
    still pays a fixed part and attention over the whole prefix (overhead); **at**: the prefill's time follows its
    tokens (compute); **above**: the cold prefill cost more per token, its attention growing with the prompt.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([mo.md(f"""
    ## 7 · Speculative decoding: draft, verify, accept

    A drafter proposes k tokens; the target runs its pending token and the drafts in **one** pass of k + 1 rows,
    keeps the drafts while they equal its greedy choice, then adds its own token: its greedy output, exactly.
    Sampled, draft x is kept with probability min(1, p(x)/q(x)), a rejection draws from norm(max(0, p − q))
    (Leviathan et al., Algorithm 1): every token is still distributed as p. Two drafters: **prompt lookup** copies
    what followed the earliest earlier occurrence of the last n-gram (transformers' rule); an **early-exit
    {term("draft model")}** runs the target's first layers, final norm and head (LayerSkip, untrained).
    """), notebook.code(spec_loop.verify, folded_=False), notebook.code(spec_loop, "speculative.py")])
    return


@app.cell
def _(loaded, w):
    spec_loaded = loaded if trained_profile(loaded.profile) == loaded.profile else \
        models.load(trained_profile(loaded.profile), device=loaded.device)
    spec_k_default = notebook.env_default("WORKSHOP_SPEC_K", w.spec_k, range(1, 9))
    k_form = mo.ui.slider(start=1, stop=8, step=1, show_value=True, label="draft length k",
                          value=spec_k_default).form(submit_button_label="Measure at this k", bordered=False)
    alpha_pick = mo.ui.slider(start=0.1, stop=0.95, step=0.05, show_value=True, label="α, the chance a draft is kept (eq. 1)",
                              value=notebook.env_default("WORKSHOP_SPEC_ALPHA", 0.6, lo=0.1, hi=0.95))
    spec_box = learner.prediction("Each of k drafts is kept with probability α, in order, up to the first rejected; "
                                  "the pass then adds one token of its own. How many tokens does a pass yield on "
                                  "average?", "tokens")
    mo.vstack([k_form, alpha_pick, notebook.static_note({"WORKSHOP_SPEC_K": "k", "WORKSHOP_SPEC_ALPHA": "α"}), spec_box])
    return alpha_pick, k_form, spec_box, spec_k_default, spec_loaded


@app.cell
def _(k_form, spec_k_default):
    spec_k = spec_k_default if k_form.value is None else int(k_form.value)   # the submitted k, else the default
    return (spec_k,)


@app.cell(hide_code=True)
def _(alpha_pick, spec_k):
    spec_parts = speculation.tokens_per_pass_parts(alpha_pick.value, spec_k)
    mo.vstack([mo.md(f"""
    **Tokens per pass.** A pass yields one token of the target's own; draft i counts only if drafts 1 … i are
    all kept, with probability α^i (α the {term("acceptance", "acceptance-rate")}). Summed (eq. 1):

        E = 1 + α + α² + … + α^k = (1 − α^(k+1)) ÷ (1 − α)

    A round costs the verify pass, v decode steps (about 1 while {term("memory-bound")}, up to k + 1 once
    compute-bound), and k draft steps of c decode steps each. It pays when E ÷ (v + k·c) is above 1
    (`speculation.break_even_alpha`). Eq. 1 term by term:
    """), plots.table(tables.tokens_per_pass_frame(spec_parts),
                      f"computed: helpers.formulas.speculation.tokens_per_pass_parts, α = {spec_parts.alpha:.2f}, k = {spec_parts.k}")])
    return (spec_parts,)


@app.cell
def _(spec_box, spec_parts):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 3); in marimo, type it in the box above
    learner.beside(spec_box, _given, spec_parts.total,
                   lower="A draft counts only when every draft before it was kept: the i-th with probability α^i, not α.",
                   higher="The pass adds one token of the target's own on top of the kept drafts.",
                   within="1 + α + α² + … + α^k, as derived.")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    Two prompts alone, then four as one batch: a **copy-edit** of a passage, whose answer may repeat its context,
    and an **open question**, with nothing to copy.
    """)
    return


@app.function
def speculate_three_ways(model, tok, prompts, w, k):
    """Section 7: plain decoding, prompt lookup and the early-exit draft on a copy-edit alone, an open question
    alone, and the four prompts as one batch."""
    run = dict(new_tokens=w.decode_tokens, k=k, draft_layers=w.draft_layers,
               decode=lambda ids: tok.decode(list(ids), skip_special_tokens=True))
    return pd.concat([speculative.speculative_runs(model, p, **run) for p in (prompts[:1], prompts[1:2], prompts)],
                     ignore_index=True)


@app.cell
def _(spec_k, spec_loaded, w):
    spec_prompts = speculative.prompts(spec_loaded.tokenizer)
    # a recording holds the default k; another k is measured live
    spec_run = replay.measure("07/speculative", speculate_three_ways, spec_loaded.model, spec_loaded.tokenizer,
                              spec_prompts, w, spec_k, run=spec_k != w.spec_k, profile=spec_loaded.profile,
                              device=spec_loaded.device)
    spec_rows = spec_run.value
    mo.vstack([spec_run.note(), plots.table(spec_rows, spec_run.source(
        f"measured: the readable engine's loop on {spec_loaded.label}, greedy"))])
    return spec_prompts, spec_rows


@app.cell
def _(alpha_pick, spec_k, spec_loaded, spec_rows):
    figures.expected_tokens_figure(spec_rows[(spec_rows["k"] > 0) & (spec_rows["batch"] == 1)], alpha_pick.value,
                                   max(8, spec_k), spec_loaded)
    return


@app.cell
def _(spec_k, spec_loaded, spec_prompts, w):
    # one accept step enumerated on a 5-token vocabulary: draft x ~ q, kept with min(1, p(x)/q(x)), else the residual
    _p = torch.tensor([0.40, 0.25, 0.20, 0.10, 0.05], dtype=torch.float64)
    _q = torch.tensor([0.10, 0.50, 0.10, 0.25, 0.05], dtype=torch.float64)
    _out = torch.zeros(5, dtype=torch.float64)
    for _x in range(5):
        _a = spec_loop.accept_probability(_p, _q, _x)
        _out[_x] += float(_q[_x]) * _a
        _out += float(_q[_x]) * (1 - _a) * spec_loop.residual(_p, _q)
    _exact = pd.DataFrame({"token": range(5), "target p": _p.tolist(), "draft q": _q.tolist(),
                           "kept with min(1, p/q)": [spec_loop.accept_probability(_p, _q, _x) for _x in range(5)],
                           "residual norm(max(0, p − q))": spec_loop.residual(_p, _q).tolist(),
                           "what comes out": _out.tolist()})
    # what verifying k drafts costs against a decode step: measured here, and computed for Mistral 7B on an H100
    _context = len(spec_prompts[0].ids) + w.decode_tokens // 2
    verify_here = [speculative.verify_cost(spec_loaded.model, spec_k, _context, b) for b in (1, len(spec_prompts))]
    _computed = [speculation.verify_step_ratio(GPU_MODEL, spec_k, c, b, GPU) for c in (512, 4096) for b in (1, 16, 64, 256)]
    mo.vstack([plots.table(_exact, "computed: helpers.engine.speculative.accept_probability and residual, every draft"),
               plots.table(tables.verify_frame(verify_here), f"measured: the engine's runner on {spec_loaded.label}, "
                                                              "fastest of 5"),
               plots.table(tables.verify_frame(_computed), "computed: helpers.formulas.speculation.verify_step_ratio "
                                                           "at the roofline")])
    return (verify_here,)


@app.cell(hide_code=True)
def _():
    _lo, _hi = (expected.published(k).value for k in ("leviathan_t5xxl_speedup_low", "leviathan_t5xxl_speedup_high"))
    mo.md(f"""
    **What you should see.** Read where the kept drafts came from before the speed-up.

    - **From the prompt**: the answer repeats its context (an edit, code being changed): where drafting pays.
    - **From its own output**, a loop: prompt lookup predicts the loop, a degenerate output made fast. Small
      models decoding greedily loop on any prompt.
    - **Neither**: nothing to copy, about one token per pass.

    The speed-up is about tokens per pass ÷ (v + k·c): **above** 1 pays, **at** breaks even, **below** costs. The
    enumerated accept step returns p exactly.

    *On a GPU*: a verify pass costs about one decode step while memory-bound, more once compute-bound (exercise 3).
    Leviathan et al. decode T5-XXL {_lo:g}×–{_hi:g}× faster with identical outputs.
    """)
    return


@app.cell(hide_code=True)
def _():
    # the break-even acceptance of a draft model at a batch whose verify pass stays memory-bound and at one that
    # makes it compute-bound (Mistral 7B on an H100 SXM, helpers.formulas.stepcost at the roofline)
    _k, _c, _ctx = 4, 0.05, 512

    def _at(b):
        _v = speculation.verify_step_ratio(GPU_MODEL, _k, _ctx, b, GPU)
        _cost = speculation.round_cost(_v.verify_over_decode, _k, _c)
        return (f"- batch {b}: a {_v.verify_bound}-bound verify pass, v = {_v.verify_over_decode:.2f}; a round "
                f"costs v + k·c = {_cost:.2f} steps; E reaches it at α = {speculation.break_even_alpha(_k, _cost):.2f}")

    notebook.exercise(3, f"The break-even acceptance. Mistral 7B on an H100 SXM, {_ctx} tokens of context, a draft "
                      f"whose step costs c = {_c:g} of a target step, k = {_k}. At batch 1 and at batch 256, what "
                      "acceptance α must the draft reach for a round to break even? (`speculation.verify_step_ratio` "
                      "gives v.)",
                      "\n".join([_at(1), _at(256)]))
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([
        mo.md("## Exercises\n\nExercise 3, the break-even acceptance, closes section 7."),
        notebook.exercise(1, "Re-run section 1 with a longer prompt (`quality.eval_ids(tok, 512)`). Which line "
                          "moves, and why?", """
        The no-cache line: each step recomputes all p + t tokens; a cached step runs one token whatever the
        prompt."""),
        notebook.exercise(2, "In section 4, set the token budget to 16, then 512 (KV cache 2,048 slots). What happens "
                          "to the prefill chunks, to the longest prompt's first token, and to the others' decode rows "
                          "while it is prefilled?", f"""
        At 16 a 200-token prompt takes at least ⌈200 ÷ 16⌉ = {-(-200 // 16)} chunks, its first token as many steps
        away, and no step computes more than 16 tokens. At 512 one step computes all 200 for everyone in it."""),
    ])
    return


@app.cell(hide_code=True)
def _(live_args, live_reqs, prefix_hits, spec_rows):
    _long = max(live_reqs, key=lambda r: len(r.prompt) + r.max_new_tokens)
    _lookups = spec_rows[(spec_rows["batch"] == 1) & spec_rows["drafter"].str.startswith("prompt lookup")]
    _lookup = _lookups.iloc[0] if len(_lookups) else None      # a run of one row may hold none
    _a = prefix_hits["agentic"]
    check_questions = [
        learner.Question(f"Section 4: the longest request has {len(_long.prompt)} prompt tokens and asks for "
                         f"{_long.max_new_tokens} new ones. How many blocks of {live_args.block_size} do its tokens fill?",
                         -(-(len(_long.prompt) + _long.max_new_tokens) // live_args.block_size), "blocks", tolerance=0),
        *([] if _lookup is None else [learner.Question(
            f"Section 7: prompt lookup's speed-up on the {_lookup['prompt']} prompt, against 1?",
            regime.label(_lookup["speed-up"]), options=regime.LABELS)]),
        learner.Question("Section 6: on the agentic trace, the radix tree's reused tokens against the block hashes'?",
                         regime.label(regime.ratio(_a.radix.reused_tokens, _a.hash.reused_tokens)), options=regime.LABELS),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "new sizes in section 4 or a new k in section 7 change them")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    # checked against this run when the form is submitted (marimo); folded answers elsewhere
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## Takeaways

    - **The KV cache** turns quadratic work into linear, for memory.
    - **Paging** stores what a sequence holds, not what it might.
    - **Continuous batching** refills a freed slot at the next step; chunked prefill bounds a long prompt's stall.
    - **Prefix caching** pays where prompts share prefixes: the tree to the token, hashes to the block.
    - **Speculative decoding** keeps the target's output and pays when drafts are cheap, kept and verified
      memory-bound.
    """)
    return


@app.cell(hide_code=True)
def _():
    expected.sources("leviathan_t5xxl_speedup_low", more=(
        "Kwon et al., PagedAttention (SOSP 2023) — <https://arxiv.org/abs/2309.06180>",
        "Yu et al., Orca (OSDI 2022) — <https://www.usenix.org/conference/osdi22/presentation/yu>",
        "Agrawal et al., Sarathi-Serve (OSDI 2024) — <https://arxiv.org/abs/2403.02310>",
        "Zheng et al., SGLang and RadixAttention (NeurIPS 2024) — <https://arxiv.org/abs/2312.07104>",
        "Saxena, Prompt Lookup Decoding (2023) — <https://github.com/apoorvumang/prompt-lookup-decoding>",
        "Elhoushi et al., LayerSkip (ACL 2024) — <https://arxiv.org/abs/2404.16710>",
        "vLLM 0.32: `v1/core/kv_cache_utils.py` (`hash_block_tokens`), `v1/core/sched/scheduler.py`, "
        "`config/cache.py`; transformers 5.25: `generation/continuous_batching/` (`FIFOScheduler`), "
        "`generation/candidate_generator.py` (`PromptLookupCandidateGenerator`)",
        "Horace He, Making Deep Learning Go Brrrr (2022) — <https://horace.io/brrr_intro.html>"))
    return


@app.cell(hide_code=True)
def _(check_questions, reuse, verify_here):
    mo.md(f"""*This run took {notebook.elapsed(started)}.*""")   # after the last measurement it names
    return


if __name__ == "__main__":
    app.run()
