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

    from helpers.formulas import compute_share
    from helpers.formulas.memory import kv_bytes_per_token, kv_cache_bytes, kv_terms
    from helpers.formulas.specs import get_spec
    from helpers.formulas.stepcost import forward_cost
    from helpers.formulas.units import fmt_bytes
    from helpers.measure import growth, models, sweeps
    from helpers.measure.hardware import device_info
    from helpers.measure.tensor_bytes import measured_model_bytes
    from helpers.formulas import regime
    from helpers.present import expected, learner, notebook, on_gpu, plots, replay, run_times, sweep_figures
    from helpers.present.glossary import term
    from helpers.serving import naive
    from helpers.serving import tables as serving_tables

    notebook.setup()
    started = time.perf_counter()
    gpu = on_gpu.gpu_expectations(sweeps.sweep_sizes("mistral-7b", "cuda"))   # Mistral 7B on an H100 SXM, computed
    GPU_LABEL = f"Mistral 7B on an {gpu['gpu']}"


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 01 · Feel the pain

    **What you will learn**

    1. Why memory grows with every {term("token")} a model holds: the {term("KV cache", "kv-cache")}.
    2. Why the {term("time to first token", "ttft")} (TTFT) grows with the prompt, and what its growth
       exponent says.
    3. What serving requests together in a {term("batch")} gains in {term("throughput")} and costs in latency.
    4. What sets each {term("decode")} step — the {term("inter-token latency", "itl")} (ITL) — and how many
       users fit before the device runs out of memory ({term("OOM")}).

    {run_times.header("01")}

    Each result comes with its ratio, labelled **below**, **at** or **above** 1 (10 % margin). A step's time is
    set by **overhead** (Python, dispatch, kernel launches: the tiny model on a CPU), **bandwidth** (Mistral 7B
    decoding on a GPU) or **compute** (a long {term("prefill")}). *Computed* rows give {GPU_LABEL}.
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
    Running **{loaded.label}**; timings are medians after a warm-up. **Run live** measures here.
    """)
    return


@app.cell(hide_code=True)
def _():
    memory_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 1 · Memory grows with every token

    Each new token's attention compares it with a *key* vector of every earlier token and mixes their *value*
    vectors; the model keeps them: the {term("KV cache", "kv-cache")}. Run the {term("prefill")} (one
    {term("forward pass")} over *n* tokens) into a `transformers` {term("DynamicCache")} and count its bytes:
    """), memory_button])
    return (memory_button,)


@app.cell(hide_code=True)
def _(loaded):
    _t = kv_terms(loaded.spec, loaded.dtype)
    _k = _t.terms
    mo.md(f"""
    **The formula.** Every layer keeps, per token, one key and one value vector per *KV head* (fewer than the
    query heads under {term("GQA")}), each of head_dim numbers in the cache's dtype:
    `KV bytes per token = 2 · layers · kv_heads · head_dim · bytes`; *n* tokens hold *n* times that.
    For the model running here: 2 × {_k["layers"]} × {_k["kv_heads"]} ×
    {_k["head_dim"]} × {_k["bytes_per_element"]:g} B = **{_t.bytes_per_token:,} B** per token.
    """)
    return


@app.cell(hide_code=True)
def _():
    _m = get_spec("mistral-7b-v0.1")
    kv_box = learner.prediction(
        f"Mistral 7B: {_m.num_layers} layers, {_m.num_kv_heads} KV heads (for {_m.num_heads} query heads), head_dim "
        f"{_m.head_dim}, a bf16 cache. How many bytes does it cache per token?", "bytes")
    kv_box
    return (kv_box,)


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


@app.cell
def _(kv_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 1 MiB); in marimo, type it in the box above
    _t = kv_terms("mistral-7b-v0.1", "bf16")
    _m = get_spec("mistral-7b-v0.1")
    _k = _t.terms
    learner.beside(kv_box, _given, _t.bytes_per_token, shown=lambda v: f"{v:,.0f} B",
        higher=f"Every one of the {_m.num_layers} layers keeps its own cache, and each keeps both a key and a value "
               "vector per KV head: the factors layers and 2.",
        lower=f"Only the {_m.num_kv_heads} KV heads are cached, not the {_m.num_heads} query heads ({_m.num_heads // _m.num_kv_heads} "
              f"query heads share each under GQA), and bf16 stores a number in {_k['bytes_per_element']:g} bytes, not fp32's 4.",
        within=f"2 × {_k['layers']} × {_k['kv_heads']} × {_k['head_dim']} × {_k['bytes_per_element']:g} B, term by term.")
    return


@app.cell
def _(memory, memory_on, memory_run):
    plots.table(regime.ratio_columns(memory, "cache_bytes", "formula_bytes", "measured ÷ formula"),
                plots.source_label(memory_run.source(memory_on)))
    return


@app.cell(hide_code=True)
def _():
    _per = kv_bytes_per_token("mistral-7b-v0.1", "bf16")
    _w = get_spec("mistral-7b-v0.1").sliding_window
    mo.md(f"""
    **What you should see.** Counted bytes ÷ the formula's.

    - **1**: the formula is exact; the points lie on a straight line through zero.
    - **below 1**: fewer tokens held (a sliding window keeps window − 1) or fewer bytes per number.
    - **above 1**: what the formula leaves out: padding, slots reserved ahead (a static cache).

    *On a GPU*: Mistral 7B caches {_per:,} B per token; v0.1's {_w:,}-token window caps a sequence at {kv_cache_bytes("mistral-7b-v0.1", 16384, 1, "bf16", window_slots=_w - 1):,} B.
    """)
    return


@app.cell(hide_code=True)
def _():
    ttft_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 2 · Time to first token grows with the prompt

    A request's {term("TTFT")}, served alone, is its prefill. Every prompt token goes through every weight matrix
    (2 {term("FLOP", "flop")}s per parameter per token: work ∝ *n*), and attention compares every token with every
    earlier one (work ∝ *n²*).
    """), ttft_button])
    return (ttft_button,)


@app.cell(hide_code=True)
def _(sizes):
    _n0, _n1 = sizes.ttft_tokens[-2:]
    ttft_box = learner.prediction(
        f"From {_n0:,} to {_n1:,} prompt tokens, how many times longer is the TTFT here? (2: work ∝ n; 4: ∝ n²; "
        "1: none grew)", "×")
    ttft_box
    return (ttft_box,)


@app.cell
def _(loaded, sizes, ttft_button):
    ttft_run = replay.measure("01/ttft", models.run_on, loaded, sweeps.ttft_sweep, sizes.ttft_tokens,
                              sizes.ttft_repeats, run=ttft_button.value, profile=loaded.profile,
                              device=loaded.device)
    ttft_on, ttft = ttft_run.value
    ttft_fit = growth.fit_or_none(ttft)            # None: fewer than two prompt lengths with a positive time
    ttft_doubling = growth.last_doubling(ttft)     # the ratio the prediction asks for (None: no doubling ran)
    sweep_figures.ttft_figure(ttft, ttft_fit, ttft_run.source(ttft_on))
    return ttft, ttft_doubling, ttft_fit, ttft_on, ttft_run


@app.cell(hide_code=True)
def _(ttft_run):
    ttft_run.note()
    return


@app.cell
def _(ttft_box, ttft_doubling):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 3); in marimo, type it in the box above
    (mo.md("No prompt ran beside its half in a positive time: no measured doubling to set beside the prediction.")
     if ttft_doubling is None else
     learner.beside(ttft_box, _given, ttft_doubling.ratio,
                    shown=lambda v: f"{v:,.2f}× ({ttft_doubling.n0:,} → {ttft_doubling.n1:,} tokens)",
                    higher="Attention compares every prompt token with every earlier one: its work grows 4× when the "
                           "prompt doubles. The table's n² column says how much of the time it has become.",
                    lower="Part of a prefill's time does not grow with the prompt: a fixed cost per forward (on a CPU, "
                          "Python and operator dispatch; on a GPU, reading every weight once).",
                    within="The weights' work (∝ n) doubles, attention's (∝ n²) quadruples and a fixed cost stays: "
                           "the ratio is their mix at this length."))
    return


@app.cell
def _(ttft, ttft_doubling, ttft_fit, ttft_on, ttft_run):
    growth_rows = sweep_figures.growth_table(ttft_fit, ttft_doubling, ttft_on.spec, gpu["ttft_floors_s"],
                                             gpu["model"], gpu["gpu"])
    mo.vstack([plots.table(growth_rows, f"{plots.source_label(ttft_run.source(ttft_on))}; the last row computed "
                           "(helpers.present.on_gpu, the capacity planner's prefill floor); fit: "
                           "helpers.measure.growth.fit_growth, non-negative least squares on relative error"),
               plots.table(ttft, f"{plots.source_label(ttft_run.source(ttft_on))}; seconds (median and p90 of the repeats)")])
    return (growth_rows,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** The exponent *p* of t ∝ nᵖ (a doubling costs 2ᵖ×), fitted, over the last doubling,
    and of the GPU floor; the dotted guides have slopes 1 and 2.

    - **p at 1**: the weights' work sets the time.
    - **p between 1 and 2**: attention's work has become a share of the time (compare the n² column).
    - **p below 1**: a fixed cost per forward outweighs what a short prompt adds (overhead); on a GPU, the
      weights read once whatever the prompt (bandwidth).
    - **–**: fewer than two positive times.

    *On a GPU* the floor is the larger of bytes ÷ bandwidth and FLOPs ÷ peak.
    """)
    return


@app.cell(hide_code=True)
def _():
    share_lengths = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    share_prompt = mo.ui.slider(steps=share_lengths, value=notebook.env_default("WORKSHOP_SHARE_PROMPT", 4096, share_lengths),
                                show_value=True, label="prompt length (tokens)")
    mo.vstack([mo.md("""
    ### Attention's share of the prefill falls as the model gets wider

    A layer's parameters grow with the *square* of its width, attention's FLOPs per earlier token only
    *linearly*: the wider the model, the later attention catches up with the matmuls.
    """), share_prompt, notebook.static_note({"WORKSHOP_SHARE_PROMPT": "the prompt length (512 … 131072 tokens)"})])
    return (share_prompt,)


@app.cell
def _(loaded, share_prompt):
    plots.table(compute_share.attention_share_frame(
        tokens=(share_prompt.value,), extra={f"{loaded.profile} (this run)": loaded.spec}),
        "computed from each config.json: attention's share of one prompt's prefill FLOPs (matmuls + attention + output head)")
    return


@app.cell(hide_code=True)
def _():
    serving_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 3 · Throughput: one after another, then together

    The same requests, all arriving at time 0, served **one after another** and **together in one batch**
    (prompts {term("left-padded", "left-padding")} under an attention mask, one forward per step for all).
    Both use {term("greedy decoding")}, so the same tokens both ways check the padding, mask and positions.
    Timeline: waiting (grey), prefill (brown), decoding (cyan), a finished row held idle (hatched).
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
    sweep_figures.timeline_figure(served.results, served_source)
    return served, served_source, served_run


@app.cell(hide_code=True)
def _(served_run):
    served_run.note()
    return


@app.cell
def _(served, served_source):
    latency = naive.latency_cost(served)
    mo.vstack([
        plots.table(serving_tables.serve_summary_frame(served.results),
                    f"{plots.source_label(served_source)}; seconds after all requests arrived"),
        plots.table(serving_tables.latency_frame(latency), "the same run, per mode: the time to first token "
                    "includes waiting, the prefill does not; the decode step (its ITL) is each request's time per token after "
                    "the first, median over requests"),
        plots.table(sweep_figures.batching_table(latency), "the same run: each figure together ÷ one after another"),
        plots.table(sweep_figures.same_tokens(served), "the same run: requests whose greedy tokens agree both ways"),
        mo.md(f"*{served.oom_message}*") if served.oom_message else mo.md(""),
    ])
    return


@app.cell
def _(served, served_source):
    plots.table(serving_tables.requests_frame(served.results), f"{plots.source_label(served_source)}; every request, seconds after all arrived")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** Each figure together ÷ one after another.

    - **Throughput**: equal to the number of requests, a step costs the same whatever its rows (overhead or
      bandwidth); at 1, each row costs a whole step (compute).
    - **Decode step**, **prefill** above 1: a batched step, a padded prefill, cost more than one sequence's.
    - **Time to first token** below 1: one after another, each request waits for those ahead.
    - **Same greedy tokens** short of every request: in bf16 batched kernels round differently.

    Continuous batching (notebook 07) refills the idle rows. The
    {term("quality–latency–throughput triangle", "quality-latency-throughput-triangle")}: a bigger batch buys
    throughput with latency; chat sets a latency target ({term("SLO")}) first.
    """)
    return


@app.cell(hide_code=True)
def _():
    gpu_batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    gpu_batch = mo.ui.slider(steps=gpu_batches, value=notebook.env_default("WORKSHOP_GPU_BATCH", 64, gpu_batches), show_value=True,
                             label=f"batch on an {gpu['gpu']} (sequences of 1,024 tokens)")
    mo.vstack([mo.md(f"""
    **On a GPU, computed**: the planner's step floor for {GPU_LABEL} at the batch you pick, against batch 1.
    More rows add only their caches; past the {term("ridge point")} the step is {term("compute-bound")}.
    """), gpu_batch, notebook.static_note({"WORKSHOP_GPU_BATCH": "the batch (1 … 256)"})])
    return (gpu_batch,)


@app.cell
def _(gpu_batch):
    plots.table(on_gpu.gpu_batch_table(gpu_batch.value), f"computed: {GPU_LABEL}, bf16, 1,024 tokens of "
                "context per sequence (helpers.present.on_gpu.gpu_plan, the capacity planner's floor)")
    return


@app.cell(hide_code=True)
def _():
    itl_button = replay.run_button()
    _cost = forward_cost(expected.REFERENCE_MODEL, 1, 1023)
    mo.vstack([mo.md(f"""
    ## 4 · Inter-token latency as the context grows

    Each new token is one {term("decode")} step; its duration is the {term("ITL")}. It reads all the weights and
    the cache: {_cost.intensity:,.2f} FLOPs per byte for Mistral 7B at
    1,024 tokens, under an {gpu["gpu"]}'s ridge point of {gpu["peak_flops"] / gpu["bandwidth"]:,.0f}, so there it is
    {term("memory-bound")}.
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


@app.cell
def _(itl, itl_on, itl_run):
    _floor = f"{GPU_LABEL}: floor (ms, computed)"
    plots.table(sweep_figures.itl_table(itl, itl_on.spec, itl_on.dtype,
                                        lambda c: on_gpu.gpu_plan(context=c).step_floor_s, _floor),
                f"{plots.source_label(itl_run.source(itl_on))}; bytes read per step computed from the config "
                "(helpers.formulas.stepcost.decode_cost); the last column: the capacity planner's floor")
    return


@app.cell(hide_code=True)
def _():
    _eager, _fast = expected.published("gpt_fast_eager_tokens_per_s"), expected.published("gpt_fast_compiled_tokens_per_s")
    mo.md(f"""
    **What you should see.** The step's growth ÷ its bytes' growth, from the shortest context.

    - **at**: reading its bytes sets the step (bandwidth).
    - **below**: a fixed cost per step outweighs the reading (overhead).
    - **above**: attention's arithmetic costs more than its reading (compute), or the machine's load changed.

    *On a GPU*: the last column is the planner's floor. Overhead is there too: gpt-fast
    decodes Llama-2-7B on an A100 at {_eager.value:g} tokens/s with an eager PyTorch loop and {_fast.value:g}
    compiled (CUDA graphs), the same bytes {_fast.value / _eager.value:,.1f}× apart.
    """)
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

    Sequences of a fixed context, prefilled together. On a GPU the batch doubles until the device runs out of
    memory; on a CPU, **set a budget for the cache** and the figure counts the sequences that fit.
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


@app.cell
def _(users, users_budget, users_on, users_run):
    mo.vstack([
        plots.table(regime.ratio_columns(users, "cache_bytes", "formula_bytes", "measured ÷ formula"),
                    plots.source_label(users_run.source(users_on))),
        plots.table(sweep_figures.budget_table(users_budget), "the same sweep against your budget: the cache per "
                    "sequence measured at the largest batch that ran (helpers.measure.growth.users_in_budget)"),
        plots.table(on_gpu.gpu_users_table(gpu), f"computed: {GPU_LABEL}, bf16 weights and cache, the "
                    "sweep's GPU sizes (helpers.present.on_gpu.gpu_expectations)"),
    ])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** The counted cache ÷ the formula per batch, and the users that fit your budget.

    - **users ÷ largest batch above 1**: the measured bytes per sequence carried past the sweep (dotted).
    - **an out-of-memory row** (a GPU): it comes before the cache alone fills the memory: activations and the
      allocator take their share.

    *On a GPU*, computed: (memory − weights) ÷ one sequence's cache.
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
    4,096 tokens × 8 users: **{fmt_bytes(_b)}**. At 16,384 tokens v0.3 needs **{fmt_bytes(_b16)}**; v0.1 stays
    at **{fmt_bytes(_b1)}**: its sliding window keeps at most 4,096 tokens per layer.""")
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
    notebook.exercise(2, """From what prompt length does Llama 3.1 8B's prefill spend more FLOPs in attention than in
    the weight matmuls? Call `helpers.formulas.compute_share.attention_crossover("llama-3.1-8b")`, then
    `"qwen2.5-7b"`. What decides it?""", f"""
    Llama 3.1 8B: **{_l:,} tokens**; Qwen 2.5 7B: **{_q:,} tokens**. Prefill attention 4·L·H·hd·n(n+1)/2 reaches
    the matmuls' 2·P·n at n + 1 = P ÷ (L·H·hd): Llama {_p["llama-3.1-8b"]:,} ÷ {_lhd["llama-3.1-8b"]:,}, Qwen
    {_p["qwen2.5-7b"]:,} ÷ {_lhd["qwen2.5-7b"]:,} (its MLP {_qs.intermediate_size:,} wide against
    {_ls.intermediate_size:,}), rounded up, less one.""")
    return


@app.cell(hide_code=True)
def _(budget_pick, budgets, growth_rows, memory_on, ttft_doubling, users_result):
    _spec, _dtype = memory_on.spec, memory_on.dtype
    _slots = _spec.sliding_window - 1 if _spec.sliding_window else None   # as the DynamicCache keeps a window
    _n, _b = 4000, 3
    _c2 = 2 * users_result["context"]
    _per2 = kv_cache_bytes(_spec, _c2 + 1, 1, _dtype, window_slots=_slots)
    _fit = growth_rows.iloc[0]
    if pd.notna(_fit["exponent"]):
        _growth = learner.Question(f"In section 2's table, what exponent p did the fitted law give at "
                                   f"{int(_fit['to (tokens)']):,} tokens?", float(_fit["exponent"]))
    elif ttft_doubling is not None and pd.notna(ttft_doubling.ratio):
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
def _():
    mo.md(f"""
    ## Takeaways

    - The KV cache grows by 2 · layers · kv_heads · head_dim · bytes per token.
    - TTFT's exponent names the work: 1 the weights', towards 2 attention's, below 1 a fixed cost.
    - Batching reads the weights once per step for every row; each request pays in step time.
    - A decode step reads the weights and the cache: on a GPU its floor is bytes ÷ bandwidth.
    - Users are a memory budget: notebook 02 writes the equation.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


@app.cell(hide_code=True)
def _():
    import transformers as _transformers

    expected.sources("gpt_fast_eager_tokens_per_s", "gpt_fast_compiled_tokens_per_s", more=(
        "Horace He, *Making Deep Learning Go Brrrr From First Principles* (2022), the three regimes — "
        "<https://horace.io/brrr_intro.html>",
        f"transformers {_transformers.__version__}, `cache_utils.py`: each layer's keys and values, (batch, KV heads, "
        "tokens, head_dim); a sliding-window layer keeps window − 1 tokens",
        "NVIDIA H100 datasheet (SXM), as in `helpers/data/gpus.csv` — "
        "<https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet>",
    ))
    return


if __name__ == "__main__":
    app.run()
