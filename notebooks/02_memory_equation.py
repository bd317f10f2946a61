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

    from helpers.formulas import memory, regime
    from helpers.formulas.gpus import get_gpu
    from helpers.measure import models, tensor_bytes, timing
    from helpers.present import expected, learner, notebook, plots
    from helpers.present.glossary import term
    from helpers.formulas.specs import get_spec, param_count
    from helpers.formulas.units import GB, GiB, fmt_bytes
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    _h = get_gpu("H100 SXM")   # five 16 GiB HBM3 stacks (Sources)
    mo.md(f"""
    # 02 · The memory equation

    **What you will learn**

    1. To compute a model's weight bytes exactly from its `config.json`, for every dtype and
       {term("quantization")} scheme.
    2. To compute the {term("KV cache", "kv-cache")} per token, term by term, and check it against a real cache.
    3. To turn the equation around: how many concurrent users fit at each context length.

    {run_times.header("02")}

    While it serves, **GPU memory = weights (fixed) + overhead (about fixed) + KV cache (context × users)**.
    Each term is computed from a `config.json`, checked on the model loaded here, then the equation is turned
    around: how many users fit?

    **Bytes, GB and GiB.** Weights and caches are counted in bytes, shown in GB (10⁹) and GiB (2³⁰)
    ({term("GB and GiB", "gb-and-gib")}). A GPU's memory is binary: an {_h.name}'s "{_h.memory_gb:g} GB" is five
    16 GiB HBM3 stacks, {_h.memory_gb:g} GiB = {_h.memory_gb * 2**30 / 1e9:,.1f}·10⁹ bytes; CUDA reports
    {_h.memory_reported_gib:g} GiB, and the notebooks plan with that.
    """)
    return


@app.cell
def _():
    loaded = models.load()
    spec = loaded.spec
    mistral = get_spec("mistral-7b-v0.1")
    return loaded, mistral, spec


@app.cell(hide_code=True)
def _():
    weights_box = learner.prediction("How many GB (10⁹ bytes) do Mistral 7B v0.1's bf16 weights take?", "GB")
    mo.vstack([mo.md("""
    ## 1 · Weights: parameters × bytes per parameter

    Parameters are counted on the architecture built on the `meta` device (shapes, no storage); each takes its
    dtype's bytes: 4 in fp32, 2 in bf16, 1 in int8, ½ in nf4, plus the scales of quantized schemes.
    """), weights_box])
    return (weights_box,)


@app.cell
def _(mistral):
    _rows = []
    for _scheme in ("fp32", "bf16", "fp16", "int8", "nf4"):
        _w = memory.weight_bytes(mistral, _scheme)
        _rows.append({"scheme": _scheme, "parameters": param_count(mistral), "bytes": _w.bytes,
                      "GB": _w.bytes / GB, "GiB": _w.bytes / GiB, "of which scales / code books (bytes)": _w.metadata_bytes})
    mistral_weights = pd.DataFrame(_rows)
    plots.table(mistral_weights, "computed from mistral-7b-v0.1 config.json (helpers.formulas.memory.weight_bytes)")
    return


@app.cell
def _(mistral, weights_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 10); in marimo, type it in the box above
    _w, _fp32 = memory.weight_bytes(mistral, "bf16"), memory.weight_bytes(mistral, "fp32")
    learner.beside(weights_box, _given, _w.bytes / GB, shown=lambda v: f"{v:,.2f} GB",
        higher=f"The name rounds the count: {_w.params:,} parameters, each 2 bytes in bf16.",
        lower=f"bf16 stores a parameter in 2 bytes; fp32's 4 would make {_fp32.bytes / GB:,.2f} GB.",
        within=f"{_w.params:,} parameters × 2 B = {_w.bytes:,} B.")
    return


@app.cell(hide_code=True)
def _(loaded):
    mo.md(f"""
    **The check on this machine**, on **{loaded.label}**: its weights computed from its config against the
    bytes of the tensors it holds (`helpers.measure.tensor_bytes.measured_weight_bytes`; buffers apart):
    """)
    return


@app.cell
def _(loaded, spec):
    _measured = tensor_bytes.measured_weight_bytes(loaded.model)
    _buffers = tensor_bytes.measured_model_bytes(loaded.model) - _measured
    _rows = []
    for _scheme in ("fp32", "bf16", "fp16"):
        _w = memory.weight_bytes(spec, _scheme)
        _is_loaded = _scheme == loaded.dtype
        _rows.append({"dtype": _scheme, "parameters (exact)": param_count(spec), "computed bytes": _w.bytes,
                      "measured bytes": _measured if _is_loaded else None,
                      "buffers (not weights)": _buffers if _is_loaded else None})
    _frame = pd.DataFrame(_rows).astype({"measured bytes": "Int64", "buffers (not weights)": "Int64"})
    plots.table(regime.ratio_columns(_frame, "measured bytes", "computed bytes", "measured ÷ computed"),
                f"computed from the config; measured: {loaded.label} (only its own dtype is loaded)")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** Bytes counted on the tensors ÷ parameters × bytes.

    - **1**: every parameter counted once in its dtype (buffers, the rotary tables, sit apart).
    - **below 1**: some parameters held in fewer bytes (a quantized layer).
    - **above 1**: parameters the config does not describe, or some in a wider dtype (a norm in fp32).
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 2 · KV cache per token, term by term

    For every token, every layer caches one key and one value vector per **KV head** —
    {term("grouped-query attention", "gqa")} (GQA) lets several query heads share one:

    `KV bytes per token = 2 (K and V) × layers × KV heads × head_dim × bytes per element`
    """)
    return


@app.cell
def _(loaded, mistral, spec):
    def _terms(s, dtype, model):
        t = memory.kv_terms(s, dtype)
        return {"model": model, **t.terms, "bytes per token": t.bytes_per_token, "shown": fmt_bytes(t.bytes_per_token)}

    kv_per_token = pd.DataFrame([
        _terms(mistral, "bf16", "mistral-7b-v0.1, bf16"),
        _terms(spec, loaded.dtype, f"{loaded.model_name}, {loaded.dtype}"),
    ])
    plots.table(kv_per_token, "computed from each config.json (helpers.formulas.memory.kv_terms)")
    return


@app.cell(hide_code=True)
def _(mistral):
    _per = memory.kv_bytes_per_token(mistral, "bf16")
    mo.md(f"""
    Mistral 7B: 2 × 32 × 8 × 128 × 2 B = **{fmt_bytes(_per)}** per token; 4,096 tokens hold
    {fmt_bytes(4096 * _per)}. The map below assumes full attention, as v0.3 does (v0.1 slides a
    {mistral.sliding_window:,}-token window). **The check**: prefill prompts into a real {term("DynamicCache")} here
    and count every layer's key and value bytes.
    """)
    return


@app.cell
def _(loaded, spec):
    _window = spec.sliding_window
    _checks = (100, _window + 500) if _window else (100, 1000)
    _rows = []
    for _n in _checks:
        _, _cache = timing.prefill(loaded.model, timing.prompt_ids(_n, vocab=spec.vocab_size,
                                                                         device=loaded.device))
        _layer0 = _cache.layers[0]
        _formula = memory.kv_cache_bytes(spec, _n, 1, loaded.dtype,
                                         window_slots=_window - 1 if _window else None)
        _measured = tensor_bytes.measured_cache_bytes(_cache)
        _rows.append({"prompt tokens": _n, "layers": len(_cache.layers),
                      "keys per layer (shape)": tuple(_layer0.keys.shape),
                      "values per layer (shape)": tuple(_layer0.values.shape),
                      "measured bytes": _measured, "formula bytes": _formula})
        del _cache
    plots.table(regime.ratio_columns(pd.DataFrame(_rows), "measured bytes", "formula bytes", "measured ÷ formula"),
                f"measured: {loaded.label}; formula: helpers.formulas.memory.kv_cache_bytes")
    return


@app.cell(hide_code=True)
def _(mistral):
    _w = mistral.sliding_window
    mo.md(f"""
    **What you should see.** Keys and values of shape (batch, KV heads, tokens, head_dim) per layer; counted
    bytes ÷ the formula's: **1** exact (past a sliding window `transformers` keeps window − 1 tokens, and so
    does the formula); **below 1** fewer tokens or bytes per number; **above 1** padding or slots reserved ahead.
    *On a GPU*: Mistral 7B v0.1 keeps {_w - 1:,} tokens per layer past its window,
    {fmt_bytes(memory.kv_cache_bytes(mistral, _w + 500, 1, 'bf16', window_slots=_w - 1))} in bf16.
    """)
    return


@app.cell(hide_code=True)
def _():
    _u, _fixed = memory.GPU_MEMORY_UTILIZATION, memory.RUNTIME_OVERHEAD_BYTES
    _h = get_gpu(expected.REFERENCE_GPU)
    mo.md(f"""
    ## 3 · Context × concurrent users

    **max users = (GPU memory − weights − overhead) ÷ (KV bytes per token × context)**, computed here for
    Mistral 7B v0.1 in bf16. *Overhead* is what the runtime keeps for anything but weights and cache:
    **(1 − utilization) × memory + {_fixed / GB:,.1f} GB**. vLLM gives its cache ⌈{term("gpu_memory_utilization")} ×
    memory⌉ less what start-up consumed (weights, CUDA context, libraries) and a profiling pass's peak; its
    default utilization is 0.92 in vLLM 0.32 (0.9 before). The workshop plans with vLLM 0.32's {_u} and
    {_fixed / GB:,.1f} GB, a round figure: on an {_h.name}, **{memory.runtime_reserve_bytes(_h.usable_memory_bytes) / GB:,.2f} GB**.
    """)
    return


@app.cell(hide_code=True)
def _():
    _h = get_gpu(expected.REFERENCE_GPU)
    users_box = learner.prediction(
        f"On an {_h.name} ({_h.memory_reported_gib:g} GiB as CUDA reports it) with that reserve, how many users of "
        "4,096 tokens each fit beside Mistral 7B v0.1's bf16 weights, their cache in bf16 too?", "users")
    users_box
    return (users_box,)


@app.cell(hide_code=True)
def _(mistral):
    _h = get_gpu(expected.REFERENCE_GPU)
    _m = _h.usable_memory_bytes
    _r = memory.runtime_reserve_bytes(_m)
    _w = memory.weight_bytes(mistral, "bf16").bytes
    _kv = memory.kv_bytes_per_token(mistral, "bf16")
    _b = memory.kv_budget_bytes(_m, _w, _r)
    _c = 4096
    users_example = memory.max_users(_m, _w, _r, _kv, _c)
    mo.md(f"""
    **Users that fit, derived.** The cache may use the memory M less the reserve R and the weights W; one user
    of *c* tokens holds *c* × KV bytes per token; a user's cache is whole or useless, so
    **users = ⌊(M − R − W) ÷ (c × KV bytes per token)⌋** (`helpers.formulas.memory.max_users`).
    Mistral 7B v0.1 in bf16 on an {_h.name} at *c* = {_c:,} tokens:

    - M = {_m:,.0f} B ({_h.memory_reported_gib:g} GiB as CUDA reports it)
    - R = {1 - memory.GPU_MEMORY_UTILIZATION:.1f} × M + {memory.RUNTIME_OVERHEAD_BYTES:,.0f} B = {_r:,.0f} B
    - W = {_w:,} B (section 1)
    - budget = M − R − W = {_b:,.0f} B
    - one user: {_c:,} × {_kv:,} B = {_c * _kv:,} B
    - users = ⌊{_b:,.0f} ÷ {_c * _kv:,}⌋ = **{users_example:,}**
    """)
    return (users_example,)


@app.cell
def _(mistral, users_box, users_example):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 50); in marimo, type it in the box above
    _h = get_gpu(expected.REFERENCE_GPU)
    _w = memory.weight_bytes(mistral, "bf16").bytes
    _kv = memory.kv_bytes_per_token(mistral, "bf16")
    _label = _h.memory_gb * GB
    _by_label = memory.max_users(_label, _w, memory.runtime_reserve_bytes(_label), _kv, 4096)
    _whole = memory.max_users(_h.usable_memory_bytes, _w, 0, _kv, 4096)
    learner.beside(users_box, _given, users_example, shown=lambda v: f"{v:,.0f} users",
        higher=f"One user holds {4096 * _kv / GB:,.2f} GB: the cache keeps {mistral.num_kv_heads} KV heads, not "
               f"{mistral.num_heads} query heads. And the memory is what CUDA reports, {_h.memory_reported_gib:g} GiB: "
               f"the label read as {_h.memory_gb:g}·10⁹ bytes would give {_by_label:,} users.",
        lower=f"The reserve ({memory.runtime_reserve_bytes(_h.usable_memory_bytes) / GB:,.2f} GB) and the weights "
              f"({_w / GB:,.2f} GB) come off first: the whole memory, nothing reserved, would hold {_whole:,}.",
        within="⌊(memory − reserve − weights) ÷ (context × KV bytes per token)⌋, term by term.")
    return


@app.cell
def _(mistral):
    _h = get_gpu("A100 40GB")
    _m = _h.usable_memory_bytes
    _r = memory.runtime_reserve_bytes(_m)
    _w = memory.weight_bytes(mistral, "bf16").bytes
    _kv = memory.kv_bytes_per_token(mistral, "bf16")
    _c = 2048
    _b = memory.kv_budget_bytes(_m, _w, _r)
    notebook.exercise(1, f"""The same model on an {_h.name} ({_h.memory_reported_gib:g} GiB as CUDA reports it),
    the same reserve, {_c:,} tokens per user: how many users fit? Work it out with the equation, then check it
    against the planner's max batch:
    `python -m helpers capacity --model mistral-7b-v0.1 --gpu "{_h.name}" --context {_c} --batch 1`.""",
                      f"""
    - M = {_m:,.0f} B; R = {1 - memory.GPU_MEMORY_UTILIZATION:.1f} × M + {memory.RUNTIME_OVERHEAD_BYTES:,.0f} B = {_r:,.0f} B;
      W = {_w:,} B
    - budget = M − R − W = {_b:,.0f} B
    - one user: {_c:,} × {_kv:,} B = {_c * _kv:,} B
    - users = ⌊{_b:,.0f} ÷ {_c * _kv:,}⌋ = **{memory.max_users(_m, _w, _r, _kv, _c):,}**
      (`helpers.formulas.memory.max_users`)""", label="Solution (computed by helpers.formulas.memory)")
    return


@app.cell(hide_code=True)
def _():
    _h = get_gpu(expected.REFERENCE_GPU)
    mo.md(f"""
    ### The map: every context and every number of users

    The same equation for each cell of a map, on the GPU and with the reserve you pick (in Jupyter, the
    defaults: an {_h.name}, utilization {memory.GPU_MEMORY_UTILIZATION}).
    """)
    return


@app.cell
def _():
    _gpus = ["T4", "RTX 4090", "L40S", "A100 40GB", "A100 80GB", "H100 SXM", "H200"]   # each with the memory CUDA reports
    gpu_pick = mo.ui.dropdown(options=_gpus, value=notebook.env_default("WORKSHOP_MEMORY_GPU", "H100 SXM", _gpus),
                              label="GPU (its memory as CUDA reports it)")
    overhead_pct = mo.ui.slider(start=0, stop=30, step=1,
                                value=notebook.env_default("WORKSHOP_OVERHEAD_PCT", round((1 - memory.GPU_MEMORY_UTILIZATION) * 100),
                                           range(0, 31)), show_value=True,
                                label=f"left aside: 1 − utilization (% of memory; + {memory.RUNTIME_OVERHEAD_BYTES / 1e9:,.1f} GB)")
    context_pick = mo.ui.slider(steps=[512, 1024, 2048, 4096, 8192, 16384, 32768], value=notebook.env_default(
        "WORKSHOP_CONTEXT", 4096, [512, 1024, 2048, 4096, 8192, 16384, 32768]), show_value=True,
                                label="context (tokens per user)")
    users_pick = mo.ui.slider(steps=[1, 2, 4, 8, 16, 32, 64, 128, 256], value=notebook.env_default(
        "WORKSHOP_USERS", 64, [1, 2, 4, 8, 16, 32, 64, 128, 256]), show_value=True, label="concurrent users")
    mo.vstack([gpu_pick, overhead_pct, context_pick, users_pick, notebook.static_note({
        "WORKSHOP_MEMORY_GPU": "a GPU whose memory as CUDA reports it is catalogued (helpers/data/gpu_memory.csv)", "WORKSHOP_OVERHEAD_PCT": "1 − utilization, % of memory (0–30)",
        "WORKSHOP_CONTEXT": "context per user (512 … 32768)", "WORKSHOP_USERS": "concurrent users (1 … 256)"})])
    return context_pick, gpu_pick, overhead_pct, users_pick


@app.cell
def _(context_pick, gpu_pick, mistral, overhead_pct, users_pick):
    gpu = get_gpu(gpu_pick.value)
    gpu_bytes = gpu.usable_memory_bytes   # what the device reports to CUDA (the label where no report was found)
    gpu_name = (f"{gpu.name} ({gpu.memory_reported_gib:g} GiB as CUDA reports it, labelled {gpu.memory_gb:g} GB)"
                if gpu.memory_reported_gib else f"{gpu.name} ({gpu.memory_gb:g} GB, its label: no reported figure found)")
    overhead_bytes = memory.runtime_reserve_bytes(gpu_bytes, 1 - overhead_pct.value / 100)
    mistral_weight_bytes = memory.weight_bytes(mistral, "bf16").bytes
    kv_token = memory.kv_bytes_per_token(mistral, "bf16")
    budget = memory.kv_budget_bytes(gpu_bytes, mistral_weight_bytes, overhead_bytes)
    contexts = [512, 1024, 2048, 4096, 8192, 16384, 32768]
    user_counts = [1, 2, 4, 8, 16, 32, 64, 128, 256]     # one progression: powers of two
    chosen_context, chosen_users = int(context_pick.value), int(users_pick.value)
    return (
        budget,
        chosen_context,
        chosen_users,
        contexts,
        gpu_bytes,
        gpu_name,
        kv_token,
        mistral_weight_bytes,
        overhead_bytes,
        user_counts,
    )


@app.cell
def _(
    budget,
    chosen_context,
    chosen_users,
    contexts,
    gpu_name,
    kv_token,
    mistral_weight_bytes,
    overhead_bytes,
    user_counts,
):
    from matplotlib.patches import Rectangle as _Rectangle

    _grid = memory.context_users_grid(kv_token, contexts, user_counts)
    _fig, _ax = plots.figure(width=8, height=5)
    plots.heatmap(_ax, [[b / GB for b in row] for row in _grid], [f"{c // 1024}k" if c >= 1024 else c for c in contexts],
                  user_counts, fmt=lambda v: f"{v:,.1f}" if v < 100 else f"{v:,.0f}",
                  mask=[[b > budget for b in row] for row in _grid], colorbar_label="KV cache, GB")
    _ax.add_patch(_Rectangle((contexts.index(chosen_context) - 0.5, user_counts.index(chosen_users) - 0.5), 1, 1,
                            fill=False, edgecolor="red", lw=2))
    _ax.set_xlabel("context (tokens per user)")
    _ax.set_ylabel("concurrent users")
    _ax.set_title(f"KV cache of Mistral 7B; hatched: more than the {budget / GB:,.1f} GB left on an\n"
                  f"{gpu_name}\n(after {mistral_weight_bytes / GB:,.2f} GB of bf16 weights and {overhead_bytes / GB:,.2f} GB overhead)",
                  fontsize=10)
    plots.finish(_fig, "computed from mistral-7b-v0.1 config.json, bf16 weights and KV cache (helpers.formulas.memory)")
    return


@app.cell
def _(budget, chosen_context, chosen_users, gpu_name, kv_token):
    _point = pd.DataFrame([{"users": chosen_users, "context": chosen_context,
                            "cache needed (bytes)": chosen_users * chosen_context * kv_token,
                            "left for the cache (bytes)": int(budget)}])
    plots.table(regime.ratio_columns(_point, "cache needed (bytes)", "left for the cache (bytes)", "needed ÷ left"),
                f"your point (red square), computed: Mistral 7B v0.1, bf16, on an {gpu_name}")
    return


@app.cell
def _(contexts, gpu_bytes, gpu_name, kv_token, mistral_weight_bytes, overhead_bytes):
    max_users_table = pd.DataFrame([
        {"context": _c, "KV per user (GB)": _c * kv_token / GB, "KV per user (GiB)": _c * kv_token / GiB,
         "max users": memory.max_users(gpu_bytes, mistral_weight_bytes, overhead_bytes, kv_token, _c)}
        for _c in contexts])
    plots.table(max_users_table, f"computed from mistral-7b-v0.1 config.json, bf16; {gpu_name}, "
                f"{overhead_bytes / GB:,.2f} GB overhead")
    return (max_users_table,)


@app.cell(hide_code=True)
def _():
    _kv = memory.kv_bytes_per_token("mistral-7b-v0.1", "bf16")
    mo.md(f"""
    **What you should see.** Everything here is computed, for the GPU and reserve you pick.

    - The hatched edge runs diagonally: users × context share one budget, so half the context, twice the users.
    - Your point's needed ÷ left: **below 1** fits with room, **at** fills the budget (up to 1 still fits),
      **above** does not fit.
    - The talk's "80 users at 4k ≈ 43 GB": 80 × 4,096 × {_kv:,} B = {80 * 4096 * _kv / GB:,.1f} GB
      ({80 * 4096 * _kv / GiB:,.0f} GiB).

    A bigger GPU, smaller weights (05) or fewer bytes per token (06) move the whole curve; notebook 04's
    planner starts from this equation.
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
    _l = memory.kv_cache_bytes("llama-3.1-8b", 131072, 1, "bf16")
    _m = memory.kv_cache_bytes("mistral-7b-v0.3", 32768, 1, "bf16")
    _lw = memory.weight_bytes("llama-3.1-8b", "bf16").bytes
    _s, _v3 = get_spec("llama-3.1-8b"), get_spec("mistral-7b-v0.3")
    notebook.exercise(2, """How big is one full-context conversation's cache for Llama 3.1 8B (128k tokens) and for
    Mistral 7B v0.3 (32k)? `python -m helpers kv --model llama-3.1-8b --tokens 131072`.""", f"""
    Llama 3.1 8B: **{fmt_bytes(_l)}** for one 131,072-token sequence, {_l / _lw:.2f}× its own bf16 weights
    ({fmt_bytes(_lw)}). Mistral 7B v0.3 at 32,768 tokens: **{fmt_bytes(_m)}**. Per token, Llama caches
    2 × {_s.num_kv_heads} KV heads × {_s.head_dim} × {_s.num_layers} layers × 2 B = {memory.kv_bytes_per_token(_s, "bf16"):,} B,
    Mistral v0.3 2 × {_v3.num_kv_heads} × {_v3.head_dim} × {_v3.num_layers} × 2 B = {memory.kv_bytes_per_token(_v3, "bf16"):,} B.""")
    return


@app.cell(hide_code=True)
def _(chosen_context, gpu_bytes, gpu_name, kv_token, loaded, mistral, overhead_bytes, spec):
    _int8 = memory.weight_bytes(mistral, "int8").bytes
    _bf16 = memory.weight_bytes(mistral, "bf16").bytes
    check_questions = [
        learner.Question(f"How many bytes of KV cache per token does the model loaded here hold ({loaded.dtype})?", memory.kv_bytes_per_token(spec, loaded.dtype), "B"),
        learner.Question(f"On the map's GPU and reserve, how many users of {chosen_context:,} tokens fit beside "
                         f"Mistral 7B's int8 weights ({_int8:,} B)?",
                         memory.max_users(gpu_bytes, _int8, overhead_bytes, kv_token, chosen_context), "users"),
        learner.Question(f"The same, bf16 weights, {chosen_context:,} tokens: how many users fit with an fp8 cache "
                         "(1 byte a number)?",
                         memory.max_users(gpu_bytes, _bf16, overhead_bytes, memory.kv_bytes_per_token(mistral, "fp8"),
                                          chosen_context), "users"),
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

    - GPU memory = weights + overhead + KV cache (context × users × bytes per token).
    - Weights and cache are formulas of the config, checked byte for byte on a loaded model and a real cache.
    - A GPU's memory is binary (an "80 GB" H100 holds 80 GiB); plan with what CUDA reports.
    - Users × context is a budget; shrink the weights (05), the bytes per token (06) or buy memory (04).

    *This run took {notebook.elapsed(started)}.*
    """)
    return


@app.cell(hide_code=True)
def _():
    import transformers as _transformers

    expected.sources(more=(
        "NVIDIA, *H100 Tensor Core GPU Architecture* (2022): 80 GB of HBM3 in five stacks — "
        "<https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper>; 16 GB a stack: heise online (2022) — "
        "<https://www.heise.de/news/HBM3-SK-Hynix-liefert-Stapelspeicher-fuer-Nvidias-Hopper-GPUs-7135921.html>",
        "What CUDA reports: `helpers/data/gpu_memory.csv`, each row with its report",
        "vLLM 0.32: `config/cache.py`, `v1/worker/utils.py` (`request_memory`), `utils/mem_utils.py`; "
        "vLLM 0.6.4's default 0.9 — <https://docs.vllm.ai/en/v0.6.4/models/engine_args.html>",
        f"transformers {_transformers.__version__}, `cache_utils.py` (`DynamicSlidingWindowLayer.update`)",
    ))
    return


if __name__ == "__main__":
    app.run()
