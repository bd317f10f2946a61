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

    from helpers.formulas import memory, verdicts
    from helpers.formulas.gpus import get_gpu
    from helpers.measure import models, tensor_bytes, timing
    from helpers.present import expected, learner, notebook, on_gpu, plots
    from helpers.present.glossary import term
    from helpers.formulas.specs import get_spec, param_count
    from helpers.formulas.units import GB, GiB, fmt_bytes
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 02 · The memory equation

    **What you will learn**

    1. To compute a model's weight bytes exactly from its `config.json`, for every dtype and
       {term("quantization")} scheme.
    2. To compute the {term("KV cache", "kv-cache")} per token, term by term, and check it against a real cache.
    3. To turn the equation around: how many concurrent users fit at each context length.

    {run_times.header("02")}

    After each measurement, **What you should see** says what this run's numbers show, by a rule from the
    numbers above it, then what a GPU shows, each GPU sentence labelled computed, cited or recorded.

    A GPU's memory holds three things while it serves:

    **GPU memory = weights (fixed) + overhead (about fixed) + KV cache (grows with context × users)**

    This notebook computes each term from a model's `config.json`, checks the computation against the
    bytes of the model loaded here and of a real `transformers` cache, then turns the equation around:
    for a given GPU, how many users fit at each context length? Sizes are in bytes with their unit
    said: GB = 10⁹ bytes, as GPU memory is labelled; GiB = 2³⁰ bytes ({term("GB and GiB", "gb-and-gib")}).
    A GPU's memory here is what the device reports to CUDA, its label beside it: {expected.gpu_memory_on_gpu().text}
    (`helpers.formulas.gpus`, sources in `helpers/data/gpu_memory.csv`).

    Before each central result you are asked for a **prediction**; the result shows it beside what was
    computed. A self-check at the end asks three questions whose answers are this run's numbers.
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
    weights_box = learner.prediction("Mistral 7B v0.1 in bf16, 2 bytes per parameter: how many GB (10⁹ bytes) do its "
                                     "weights take?", "GB")
    mo.vstack([mo.md("""
    ## 1 · Weights: parameters × bytes per parameter

    The parameter count is exact, counted from the architecture itself (built by `transformers` on
    the `meta` device: shapes, no storage), and each parameter takes its dtype's bytes: 4 in fp32, 2 in bf16
    and fp16, 1 in int8, half a byte in nf4. Quantized schemes add their scales and code books
    (`helpers.formulas.memory.weight_bytes`; notebook 05 measures them).
    """), weights_box])
    return (weights_box,)


@app.cell
def _(mistral):
    _rows = []
    for _scheme in ("fp32", "bf16", "fp16", "int8", "nf4"):
        _w = memory.weight_bytes(mistral, _scheme)
        _rows.append({"scheme": _scheme, "parameters": param_count(mistral), "bytes": _w.bytes,
                      "GB": round(_w.bytes / GB, 2), "of which scales / code books (bytes)": _w.metadata_bytes})
    mistral_weights = pd.DataFrame(_rows)
    plots.table(mistral_weights, "computed from mistral-7b-v0.1 config.json (helpers.formulas.memory.weight_bytes)")
    return


@app.cell
def _(mistral, weights_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 10); in marimo, type it in the box above
    _w, _fp32 = memory.weight_bytes(mistral, "bf16"), memory.weight_bytes(mistral, "fp32")
    mo.vstack([learner.beside(weights_box, _given, _w.bytes / GB, shown=lambda v: f"{v:,.2f} GB",
        higher=f"The name rounds the count: {_w.params:,} parameters, each 2 bytes in bf16.",
        lower=f"bf16 stores a parameter in 2 bytes; fp32's 4 would make {_fp32.bytes / GB:,.2f} GB.",
        within="Parameters × bytes per parameter."),
        mo.md(f"""
        Mistral 7B v0.1 has {_w.params:,} parameters: {_w.params:,} × 2 B = {_w.bytes / 1e9:.2f} GB
        ({_w.bytes / 2**30:.2f} GiB) in bf16 — not "14.6 GB".
        """)])
    return


@app.cell(hide_code=True)
def _(loaded):
    mo.md(f"""
    **The check on this machine**: the model loaded here is **{loaded.label}**. Its weights computed from
    its config, per dtype, against the bytes of the tensors it actually holds
    (`helpers.measure.tensor_bytes.measured_weight_bytes`; buffers such as the rotary tables counted separately):
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
                      "equal": (_w.bytes == _measured) if _is_loaded else None,
                      "buffers (not weights)": _buffers if _is_loaded else None})
    profile_weights = pd.DataFrame(_rows).astype({"measured bytes": "Int64", "buffers (not weights)": "Int64"})
    plots.table(profile_weights, f"computed from the config; measured: {loaded.label} (only its own dtype is loaded)")
    return (profile_weights,)


@app.cell(hide_code=True)
def _(loaded, mistral, profile_weights):
    _row = profile_weights[profile_weights["measured bytes"].notna()].iloc[0]
    weights_said = tensor_bytes.bytes_match([_row["measured bytes"]], [_row["computed bytes"]],
                                            "the parameter count × bytes per parameter")
    _w = memory.weight_bytes(mistral, "bf16")
    expected.should_see([
        f"{loaded.dtype}: {int(_row['measured bytes']):,} bytes measured, {weights_said} "
        f"({_row['parameters (exact)']:,} × {int(_row['computed bytes']) // _row['parameters (exact)']} B), and "
        f"{int(_row['buffers (not weights)']):,} bytes of buffers (the rotary tables) beside them"], [
        expected.computed(f"Mistral 7B in bf16: {_w.params:,} × 2 B = {fmt_bytes(_w.bytes)}",
                          "helpers.formulas.memory.weight_bytes"),
    ])
    return (weights_said,)


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
    Mistral 7B: 2 × 32 × 8 × 128 × 2 B = **{fmt_bytes(_per)}** per token — "128 KB" and "131 KB" are the same
    number, in KiB and in kB. Per user: 4,096 tokens × {_per:,} B = {fmt_bytes(4096 * _per)};
    16,384 tokens: {fmt_bytes(16384 * _per)}; 80 users at 4,096 tokens: {fmt_bytes(80 * 4096 * _per)}.
    (Mistral 7B v0.1 also slides a {mistral.sliding_window:,}-token window, so an engine that honours it never
    holds more than {mistral.sliding_window:,} tokens per layer; the map below assumes full attention, as
    v0.3 and most models do.)

    **The check**: prefill prompts into a real {term("DynamicCache")} on the model loaded here and count the bytes
    of the key and value tensors of every layer.
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
                      "measured bytes": _measured, "formula bytes": _formula, "equal": _measured == _formula})
        del _cache
    cache_check = pd.DataFrame(_rows)
    plots.table(cache_check, f"measured: {loaded.label}; formula: helpers.formulas.memory.kv_cache_bytes")
    return (cache_check,)


@app.cell(hide_code=True)
def _(cache_check, loaded, mistral):
    _w = mistral.sliding_window
    cache_said = tensor_bytes.bytes_match(cache_check["measured bytes"], cache_check["formula bytes"])
    _shape = cache_check["keys per layer (shape)"].iloc[-1]
    expected.should_see([
        f"the counted cache is {cache_said}",
        f"keys and values of shape {_shape} per layer — (batch, KV heads, tokens, head_dim) — in {loaded.dtype}"], [
        expected.computed(f"Mistral 7B v0.1, the window case: a prompt of {_w + 500:,} tokens leaves {_w - 1:,} tokens "
                          f"per layer (transformers keeps window − 1 between steps), "
                          f"{fmt_bytes(memory.kv_cache_bytes(mistral, _w + 500, 1, 'bf16', window_slots=_w - 1))} in bf16",
                          "helpers.formulas.memory.kv_cache_bytes"),
    ])
    return (cache_said,)


@app.cell(hide_code=True)
def _():
    _u, _fixed = memory.GPU_MEMORY_UTILIZATION, memory.RUNTIME_OVERHEAD_BYTES
    _h = get_gpu(expected.REFERENCE_GPU)
    mo.md(f"""
    ## 3 · Context × concurrent users

    What is left after the weights and the overhead holds the cache, and every user needs
    `context × KV bytes per token`:

    **max users = (GPU memory − weights − overhead) ÷ (KV bytes per token × context)**

    Everything in this section is **computed** for Mistral 7B v0.1 (bf16 weights and cache) whatever model
    runs here. *Overhead* is what the serving runtime keeps for anything but weights and cache
    (`helpers.formulas.memory.runtime_reserve_bytes`): **(1 − utilization) × GPU memory + {_fixed / GB:,.1f} GB**.
    vLLM plans with {term("gpu_memory_utilization")} = {_u} of the memory by default, so it leaves {1 - _u:.0%}
    aside; of what it plans with, the activations of its profiling forward pass and the memory outside torch (CUDA
    context, cuBLAS workspace) are not cache either — about {_fixed / GB:,.1f} GB. On an {_h.name}
    ({_h.usable_memory_bytes / GB:,.2f} GB as CUDA reports it, labelled {_h.memory_gb:g} GB):
    {memory.runtime_reserve_bytes(_h.usable_memory_bytes, overhead_bytes=0) / GB:,.2f} + {_fixed / GB:,.1f} = **{memory.runtime_reserve_bytes(_h.usable_memory_bytes) / GB:,.2f} GB**.
    """)
    return


@app.cell(hide_code=True)
def _():
    _h = get_gpu(expected.REFERENCE_GPU)
    users_box = learner.prediction(
        f"On an {_h.name} ({_h.usable_memory_bytes / GB:,.2f} GB as CUDA reports it) with vLLM's reserve, how many "
        "users of 4,096 tokens each fit beside Mistral 7B v0.1's bf16 weights, their cache in bf16 too?", "users")
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
    **Users that fit, derived.**

    1. The cache may use what is left of the memory M after the runtime's reserve R and the weights W:
       budget = M − R − W (`helpers.formulas.memory.kv_budget_bytes`).
    2. One user of *c* tokens holds *c* × KV bytes per token (section 2).
    3. A user's cache is whole or useless, so the users that fit are the whole number of them in the budget:
       **users = ⌊(M − R − W) ÷ (c × KV bytes per token)⌋** (`helpers.formulas.memory.max_users`).

    **Worked example**: Mistral 7B v0.1 in bf16 on an {_h.name} at *c* = {_c:,} tokens.

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
               f"{mistral.num_heads} query heads. And the memory is what CUDA reports, {_h.usable_memory_bytes / GB:,.2f} GB: "
               f"the label's {_h.memory_gb:g} GB would give {_by_label:,} users.",
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
    notebook.exercise(1, f"""The same model on an {_h.name} ({_h.memory_reported_gib:g} GiB as CUDA reports it,
    labelled {_h.memory_gb:g} GB), vLLM's reserve, {_c:,} tokens per user: how many users fit? Work it out with the
    equation, then check it against the planner's max batch:
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

    The same equation for each cell of a map, on the GPU and with the reserve you pick. Move the controls in
    marimo; in Jupyter the defaults (an {_h.name}, vLLM's utilization) are used.
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
    gpu_name = (f"{gpu.name} ({gpu_bytes / GB:,.2f} GB as CUDA reports it, labelled {gpu.memory_gb:g} GB)"
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


@app.cell(hide_code=True)
def _(
    budget,
    chosen_context,
    chosen_users,
    gpu_bytes,
    kv_token,
    max_users_table,
    mistral_weight_bytes,
    overhead_bytes,
):
    _need = chosen_users * chosen_context * kv_token
    _max = int(max_users_table.set_index("context").loc[chosen_context, "max users"])
    mo.md(f"""
    **Your point** (red square): {chosen_users} users × {chosen_context:,} tokens need
    {fmt_bytes(_need)} of cache; {fmt_bytes(int(budget))} is left, so it **{'fits' if _need <= budget else 'does not fit'}**.
    At {chosen_context:,} tokens this GPU holds at most **{_max:,} users**
    (({gpu_bytes / GB:,.2f} − {mistral_weight_bytes / GB:,.2f} − {overhead_bytes / GB:,.2f}) GB ÷
    ({kv_token:,} B × {chosen_context:,})).
    """)
    return


@app.cell
def _(contexts, gpu_bytes, gpu_name, kv_token, mistral_weight_bytes, overhead_bytes):
    max_users_table = pd.DataFrame([
        {"context": _c, "KV per user (GiB)": round(_c * kv_token / GiB, 3),
         "max users": memory.max_users(gpu_bytes, mistral_weight_bytes, overhead_bytes, kv_token, _c),
         "source": f"computed from mistral-7b-v0.1 config.json, bf16; {gpu_name}, "
                   f"{overhead_bytes / 1e9:,.2f} GB overhead"}
        for _c in contexts])
    return (max_users_table,)


@app.cell
def _(kv_token, max_users_table):
    _shown = max_users_table.drop(columns=["source", "KV per user (GiB)"])
    _shown.insert(1, "KV per user (GB)", _shown["context"] * kv_token / GB)
    plots.table(_shown, max_users_table["source"].iloc[0])
    return


@app.cell(hide_code=True)
def _(budget, gpu_name, kv_token, max_users_table, overhead_bytes):
    _u = max_users_table.set_index("context")["max users"]
    _tokens = int(budget // kv_token)
    expected.should_see([
        f"for the {gpu_name} with {overhead_bytes / GB:,.2f} GB overhead, a ceiling of {_u[4096]:,} users at 4,096 "
        f"tokens and {_u[16384]:,} at 16,384 (computed: this section measures nothing)",
        f"the {fmt_bytes(int(budget))} left hold {_tokens:,} tokens of cache in all, shared out: users × context stays within "
        "them, so the hatched region's edge runs diagonally",
        f"the talk's \"80 users at 4k ≈ 43 GB\": 80 × 4,096 × {kv_token:,} B = {80 * 4096 * kv_token / GB:,.1f} GB, "
        f"between the map's cells at 64 and 128 users × 4k ({64 * 4096 * kv_token / GB:,.1f} and "
        f"{128 * 4096 * kv_token / GB:,.1f} GB)"], [
        expected.gpu_memory_on_gpu(),
        expected.computed(f"with vLLM's default reserve, Mistral 7B v0.1 in bf16 on an {expected.REFERENCE_GPU} at 4,096 tokens: "
                          f"{on_gpu.gpu_users(context=4096, overhead_bytes=memory.runtime_reserve_bytes(get_gpu(expected.REFERENCE_GPU).usable_memory_bytes)):,} users "
                          f"by this equation; the capacity planner's max batch there (notebook 04): "
                          f"{on_gpu.gpu_plan(context=4096).max_batch:,}",
                          "helpers.present.on_gpu.gpu_users; helpers.present.on_gpu.gpu_plan (helpers.capacity.plan)"),
    ])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    Context and users trade against each other one for one: halve the context, double the users.
    Only three things move the whole curve: a bigger GPU, smaller weights (notebook 05: quantization) or
    fewer bytes per token (notebook 06: GQA, MLA, sliding windows, a quantized cache). Notebook 01 ran this
    experiment on the model loaded here; on a GPU its sweep doubles the batch until the device runs out.
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
    _same = memory.kv_bytes_per_token(_s, "bf16") == memory.kv_bytes_per_token(_v3, "bf16")
    notebook.exercise(2, """How big is one full-context conversation's cache for Llama 3.1 8B (128k tokens) and for
    Mistral 7B v0.3 (32k)? `python -m helpers kv --model llama-3.1-8b --tokens 131072`.""", f"""
    Llama 3.1 8B: **{fmt_bytes(_l)}** for one 131,072-token sequence — {_l / _lw:.2f}× its own bf16 weights
    ({fmt_bytes(_lw)}). Mistral 7B v0.3 at 32,768 tokens: **{fmt_bytes(_m)}**. Llama caches {_s.num_kv_heads} KV heads ×
    {_s.head_dim} × {_s.num_layers} layers, Mistral v0.3 {_v3.num_kv_heads} × {_v3.head_dim} × {_v3.num_layers}:
    {f"the same {fmt_bytes(memory.kv_bytes_per_token(_s, 'bf16'))} per token, so only the context differs" if _same else
     f"different bytes per token ({fmt_bytes(memory.kv_bytes_per_token(_s, 'bf16'))} and {fmt_bytes(memory.kv_bytes_per_token(_v3, 'bf16'))})"}.""")
    return


@app.cell
def _(mistral):
    _kv = memory.kv_bytes_per_token(mistral, "bf16")
    _rows = {s: memory.weight_bytes(mistral, s).bytes for s in ("bf16", "int8", "nf4")}
    _h = get_gpu(expected.REFERENCE_GPU)
    _mem = _h.usable_memory_bytes
    _reserve = memory.runtime_reserve_bytes(_mem)
    _users = {s: memory.max_users(_mem, w, _reserve, _kv, 8192) for s, w in _rows.items()}
    _cache = verdicts.share(_users["bf16"] * 8192 * _kv, _mem, "the memory")
    _weights = verdicts.share(_rows["bf16"], _mem, "the memory")
    notebook.exercise(3, f"""On an {_h.name} ({_mem / GB:,.2f} GB as CUDA reports it, labelled {_h.memory_gb:g} GB) with vLLM's
    default reserve ({_reserve / GB:,.2f} GB, as above), how many
    users of 8,192 tokens fit beside Mistral 7B's weights in bf16, in int8 and in nf4? Get the weight bytes with
    `python -m helpers weights --model mistral-7b-v0.1 --dtype int8`, then apply the equation.""", f"""
    bf16: {_rows["bf16"] / GB:,.2f} GB of weights, **{_users["bf16"]:,} users**; int8: {_rows["int8"] / GB:,.2f} GB,
    **{_users["int8"]:,} users**; nf4: {_rows["nf4"] / GB:,.2f} GB, **{_users["nf4"]:,} users**
    (`helpers.formulas.memory.max_users`). Quantizing the weights frees memory for the cache, but the cache per
    user does not shrink: at 8,192 tokens the bf16 users' cache takes {_cache.words}, the bf16 weights
    {_weights.words} — notebook 06 shrinks the cache per token.""")
    return


@app.cell(hide_code=True)
def _(chosen_context, gpu_bytes, gpu_name, kv_token, loaded, mistral, overhead_bytes, spec):
    _int8 = memory.weight_bytes(mistral, "int8").bytes
    _bf16 = memory.weight_bytes(mistral, "bf16").bytes
    check_questions = [
        learner.Question(f"How many bytes of KV cache per token does the model loaded here ({loaded.model_name}, "
                         f"{loaded.dtype}) hold?", memory.kv_bytes_per_token(spec, loaded.dtype), "B"),
        learner.Question(f"On the {gpu_name} you picked, with {overhead_bytes / GB:,.2f} GB of overhead, how many users "
                         f"of {chosen_context:,} tokens fit beside Mistral 7B's weights in int8 ({_int8:,} B)?",
                         memory.max_users(gpu_bytes, _int8, overhead_bytes, kv_token, chosen_context), "users"),
        learner.Question(f"The same GPU and overhead, bf16 weights, {chosen_context:,} tokens: how many users fit if the "
                         "cache stored each number in fp8 (1 byte) instead of bf16?",
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
def _(cache_said, weights_said):
    mo.md(f"""
    ## Takeaways

    - GPU memory = weights (fixed) + overhead (about fixed) + KV cache (context × users × bytes per token).
    - Weights and cache are formulas of the config. Here the loaded model's weights are {weights_said.words},
      and a real cache is {cache_said.words}; formulas that pass such a check can be used for models you have
      not loaded.
    - Users × context is a budget: halve one, double the other. To move the whole budget, shrink the
      weights (05), the bytes per token (06) or buy memory (04).

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
