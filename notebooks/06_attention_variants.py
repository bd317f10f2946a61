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

    from helpers.formulas import attention, compute_share, memory, specs
    from helpers import capacity
    from helpers.measure import kv_caches, mla
    from helpers.formulas import verdicts
    from helpers.present import attention_figures, expected, learner, notebook, plots, replay
    from helpers.present.glossary import term
    from helpers.formulas.units import fmt_bytes
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 06 · Attention variants and the KV cache

    **What you will learn**

    1. What each attention variant — {term("MHA")}, {term("MQA")}, {term("GQA")}, {term("MLA")},
       {term("sliding windows", "sliding-window-attention")} — caches per token, and how much that is for
       every preset model up to 128k tokens.
    2. To check each formula against a real cache, byte for byte.
    3. To state a saving against a named baseline, and to tell a fair ratio from an unfair one.
    4. What the papers report each variant costs in quality.

    {run_times.header("06")}

    After each measurement, **What you should see** says what this run's numbers show, by a rule from the
    numbers above it, then what a GPU shows, each GPU sentence labelled computed, cited or recorded.

    Every generated token (a {term("decode")} step) reads the keys and values of every earlier token, so the
    {term("KV cache", "kv-cache")} grows
    with context × users and, beside the weights, decides how many requests fit on a GPU. The
    attention variants differ in **what they cache per token per layer**:

    | variant | cached per token per layer | used by |
    | --- | --- | --- |
    | MHA — multi-head | K and V for every query head: 2 × heads × head_dim | GPT-2, Llama 1 |
    | MQA — multi-query | one K/V head shared by all query heads: 2 × head_dim | PaLM, Falcon 7B |
    | GQA — grouped-query | one K/V head per group of query heads: 2 × groups × head_dim | Mistral, Llama 3, Qwen 2.5 |
    | MLA — multi-head latent | one compressed latent + a small decoupled {term("RoPE")} key, shared by all heads | DeepSeek V2/V3 |
    | sliding window | any of the above, but a layer keeps only the last *W* tokens | Mistral 7B v0.1, GPT-OSS (every other layer) |

    First the formula for every preset, then each variant **measured** on a real cache.
    """)
    return


@app.cell(hide_code=True)
def _():
    _g = specs.get_spec("mistral-7b-v0.3")
    kv_box = learner.prediction(
        f"Mistral 7B v0.3 (GQA) has {_g.num_layers} layers, {_g.num_heads} query heads and {_g.num_kv_heads} K/V heads "
        f"of {_g.head_dim} dimensions. How many bytes does one token's cache take in {term('bf16')}?", "B")
    mo.vstack([mo.md("""
    ## KV bytes per token, every preset

    From each model's `config.json` with `helpers.formulas.memory` (bf16 cache). "Per token" is at short
    context; the per-sequence columns honour sliding windows — a sliding layer stops growing at its
    window.
    """), kv_box])
    return (kv_box,)


@app.cell
def _():
    kv = attention_figures.kv_table_frame(attention.kv_table())
    plots.table(kv, "computed from each config.json, bf16 KV (helpers.formulas.attention.kv_table)")
    return


@app.cell
def _(kv_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 131072); in marimo, type it in the box above
    _g = specs.get_spec("mistral-7b-v0.3")
    _per = memory.kv_bytes_per_token(_g, "bf16")
    _count = f"2 × {_g.num_layers} × {_g.num_kv_heads} × {_g.head_dim} × 2 B"
    learner.beside(kv_box, _given, _per, shown=lambda v: f"{v:,.0f} B",
        higher=f"Every layer caches a key *and* a value for each of its {_g.num_kv_heads} K/V heads, in 2-byte "
               f"elements: {_count}.",
        lower=f"GQA caches its {_g.num_kv_heads} K/V heads, not its {_g.num_heads} query heads: {_count} "
              f"(MHA would cache {_g.num_heads // _g.num_kv_heads}× that).",
        within=f"K and V, per layer, per K/V head, per dimension, per byte: {_count}.")
    return


@app.cell
def _():
    _rows = pd.DataFrame(attention.kv_vs_context(max_tokens=131072))
    _fig, (_log, _lin) = plots.figure(ncols=2, width=6.0, height=4.5)
    _styles = {"mistral-7b-v0.3": ":", "deepseek-v2-lite": "--"}
    for _name, _g in _rows.groupby("model", sort=False):
        _label = f"{_name} ({_g['attention'].iloc[0]})"
        for _ax in (_log, _lin):
            _ax.plot(_g["tokens"], _g["bytes"] / 1e9, _styles.get(_name, "-"), marker="." if _ax is _log else None,
                     label=_label, lw=2.5 if _name == "mistral-7b-v0.3" else 1.5)
    _ticks = [64, 1024, 4096, 32768, 131072]
    plots.log_axis(_log, "x", ticks=_ticks, base=2)
    plots.log_axis(_log, "y")
    _log.set_title("log–log: every preset", fontsize=10)
    _lin.set_xticks(_ticks[2:], ["4k", "32k", "128k"])
    _lin.set_title("linear: caps and slopes", fontsize=10)
    for _ax in (_log, _lin):
        _ax.set_xlabel("context length (tokens, one sequence)")
        _ax.set_ylabel(plots.byte_label("GB", "KV cache of one sequence (bf16)"))
    _lin.legend(fontsize=7, title="Llama 3.1 8B and Mistral v0.3 coincide", title_fontsize=7)
    plots.finish(_fig, "computed from each preset's config.json with helpers.formulas.memory.kv_cache_bytes, bf16",
                 title="KV cache of one sequence against context, every preset")
    _fig
    return


@app.cell(hide_code=True)
def _():
    _m1, _go, _v3 = specs.get_spec("mistral-7b-v0.1"), specs.get_spec("gpt-oss-120b"), specs.get_spec("deepseek-v3")
    _full = _go.num_layers - _go.sliding_layers
    _v3_vs_llama = attention.cache_against(memory.kv_bytes_per_token(_v3, "bf16"),
                                           memory.kv_bytes_per_token("llama-3.1-8b", "bf16"), "Llama 3.1 8B")
    mo.md(f"""
    Reading the plots: the GQA models grow linearly all the way; **Mistral 7B v0.1 flattens at
    {_m1.sliding_window:,} tokens** (its window is on every layer — v0.3 dropped it); **GPT-OSS-120B** grows at
    {_full}/{_go.num_layers} of its short-context rate past {_go.sliding_window:,} tokens, when its
    {_go.sliding_layers} sliding layers stop growing and only its {_full} full-attention layers keep going (on
    the log–log plot, a line shifted down {_go.num_layers / _full:g}×); MLA caches a
    {memory.kv_elements_per_token_layer(_v3)}-wide latent per layer instead of per-head K and V, so
    **DeepSeek V3**, at {specs.param_count(_v3) / 1e9:,.0f} B parameters, caches {_v3_vs_llama} per token.
    """)
    return


@app.cell(hide_code=True)
def _():
    _contexts = [1024, 4096, 8192, 16384, 32768, 65536, 131072]
    kv_context = mo.ui.slider(steps=_contexts, value=notebook.env_default("WORKSHOP_KV_CONTEXT", 32768, _contexts),
                              show_value=True, label="context (tokens, one sequence)")
    mo.vstack([mo.md("""
    **Pick a context.** One sequence's cache for every preset there (bf16, windows honoured), against Mistral
    7B v0.3's (full attention, GQA-8), and how many such sequences fit on one H100 SXM beside the model's own
    bf16 weights (the capacity planner's budget, notebook 04; 0: the weights alone do not fit):
    """), kv_context, notebook.static_note({"WORKSHOP_KV_CONTEXT": "the context (1024 … 131072 tokens)"})])
    return (kv_context,)


@app.cell
def _(kv_context):
    _n = int(kv_context.value)
    _ref = memory.kv_cache_bytes("mistral-7b-v0.3", _n, 1, "bf16")
    kv_at_context = pd.DataFrame([{
        "model": name, "attention": specs.get_spec(name).attention,
        f"KV of one {_n:,}-token sequence (GB)": memory.kv_cache_bytes(name, _n, 1, "bf16") / 1e9,
        "÷ Mistral 7B v0.3": memory.kv_cache_bytes(name, _n, 1, "bf16") / _ref,
        "within its context": _n <= (specs.get_spec(name).max_position_embeddings or _n),
        "sequences on one H100 SXM": (capacity.max_batch(name, "H100 SXM", context=_n)
                                      if _n <= (specs.get_spec(name).max_position_embeddings or _n) else None)}
        for name in specs.PRESETS])
    plots.table(kv_at_context, "computed from each config.json, bf16 weights and KV (helpers.formulas.memory, helpers.capacity); "
                               "past a model's context the formula still counts, the planner does not")
    return (kv_at_context,)


@app.cell(hide_code=True)
def _(kv_at_context, kv_context):
    _col = f"KV of one {int(kv_context.value):,}-token sequence (GB)"
    _least = kv_at_context.loc[kv_at_context[_col].idxmin()]
    _most = kv_at_context.loc[kv_at_context[_col].idxmax()]
    mo.md(f"""
    At {int(kv_context.value):,} tokens **{_least['model']}** ({_least['attention']}) caches least,
    {_least[_col]:,.3f} GB; **{_most['model']}** ({_most['attention']}) most, {_most[_col]:,.2f} GB —
    {_most[_col] / _least[_col]:,.0f}× as much for one sequence. The memory left beside the weights holds
    that memory ÷ the cache per sequence; a model too big for one GPU holds none, whatever its cache.
    """)
    return


@app.cell(hide_code=True)
def _():
    kv_heads_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## Measured: MHA, GQA, MQA on real caches

    Three tiny Mistral models that differ **only** in their number of K/V heads — all 8 (MHA), 2 (GQA,
    the tiny profile's own), 1 (MQA) — built with random weights, loaded through `from_pretrained`,
    and run forward with transformers' {term("DynamicCache")}, on the CPU on any machine (a GPU would hold the same
    bytes). The measured bytes are those of the cache's
    tensors; the formula is `helpers.formulas.memory.kv_cache_bytes` at {term("fp32", "bf16")}.
    """), kv_heads_button])
    return (kv_heads_button,)


@app.cell
def _(kv_heads_button):
    kv_heads_run = replay.measure("06/kv_heads", kv_caches.measure_kv_heads, run=kv_heads_button.value,
                                  profile="tiny", device="cpu")
    kv_heads = kv_heads_run.value
    plots.table(attention_figures.cache_checks_frame(kv_heads),
                kv_heads_run.source("measured: tiny Mistral variants (random weights) · fp32 · cpu") +
                "; formula: helpers.formulas.memory")
    return kv_heads, kv_heads_run


@app.cell(hide_code=True)
def _(kv_heads_run):
    kv_heads_run.note()
    return


@app.cell(hide_code=True)
def _(kv_heads):
    # these toy models run on the CPU on any machine: a GPU shows the same bytes
    expected.should_see(kv_caches.heads_verdicts(kv_heads))
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Measured: a sliding window caps the cache

    A tiny Mistral with `sliding_window = 16`, decoding one token at a time. transformers' sliding
    layer (`DynamicSlidingWindowLayer`) keeps **window − 1 = 15** tokens between steps: the next
    token's own K and V are computed afresh in its forward pass and joined to those 15, so each
    query still attends to 16 tokens — the window is the attention span, and the cache between steps
    is one slot smaller. Mistral's paper describes a rolling buffer of W slots; the formula takes
    either (`window_slots`).
    """)
    return


@app.cell
def _():
    sliding = kv_caches.measure_sliding(window=16, prompt=4, total=48)
    _shown = (0, 10, 11, 12, 13, 20, len(sliding) - 1)
    plots.table(attention_figures.sliding_frame([sliding[i] for i in _shown]),
                f"measured: tiny Mistral, sliding_window=16 (random weights) · fp32 · cpu; {len(_shown)} of its "
                f"{len(sliding)} steps")
    return (sliding,)


@app.cell
def _(sliding):
    _fig = attention_figures.sliding_figure(sliding, "measured: tiny Mistral, sliding_window=16 (random weights) · fp32 · cpu")
    mo.vstack([_fig, expected.should_see(kv_caches.sliding_verdicts(sliding))])
    return


@app.cell(hide_code=True)
def _():
    _c = mla.TINY_MLA_CONFIG
    mo.md(f"""
    ## Measured: MLA caches a latent, not heads

    MLA (DeepSeek-V2, arXiv:2405.04434, §2.1) projects each token down to a latent
    **c** of `kv_lora_rank` numbers and caches it, together with one small **decoupled RoPE key**
    k_R of `qk_rope_head_dim` numbers shared by all heads (position information cannot pass through
    the compression, so it travels beside it). At attention time up-projections rebuild every head's
    key and value from c. `helpers.measure.mla.MLAttention` is a small, readable MLA in torch
    ({_c['num_hidden_layers']} layers, {_c['num_attention_heads']} heads, latent {_c['kv_lora_rank']}
    + rope key {_c['qk_rope_head_dim']}); its cache holds only `[c | k_R]` per token per layer.
    It attends straight from the cache with the key up-projection *absorbed* into the query — the
    paper's inference trick — and is checked against a reference that expands K and V to every head,
    as MHA would. The prompt goes in at once (the {term("prefill")}), then one token per step.
    """)
    return


@app.cell
def _():
    mla_checks = mla.measure_mla()
    plots.table(attention_figures.mla_checks_frame(mla_checks), "measured: helpers.measure.mla.TinyMLA (random weights) · fp32 · cpu")
    return (mla_checks,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    The same check on transformers' own DeepSeek-V3 implementation at toy size: its cache, too,
    holds the latent and the rope key per token per layer.
    """)
    return


@app.cell
def _():
    hf_mla_checks = mla.measure_hf_mla()
    plots.table(attention_figures.cache_checks_frame(hf_mla_checks), "measured: transformers DeepseekV3ForCausalLM, toy config (random weights) · fp32 · cpu")
    return (hf_mla_checks,)


@app.cell(hide_code=True)
def _(hf_mla_checks, mla_checks):
    # these toys run on the CPU on any machine: a GPU shows the same bytes
    expected.should_see(mla.mla_verdicts(mla_checks, hf_mla_checks))
    return


@app.cell(hide_code=True)
def _():
    _s = specs.get_spec("deepseek-v3")
    _m = specs.get_spec("mistral-7b-v0.1")
    _k = (_s.qk_nope_head_dim or 0) + (_s.qk_rope_head_dim or 0)
    mo.md(f"""
    ## MLA's saving, stated honestly

    "MLA saves N×" means nothing without the baseline. DeepSeek V3 caches {_s.num_layers} layers ×
    ({_s.kv_lora_rank} + {_s.qk_rope_head_dim}) elements per token. Against:

    1. **MHA of the same model**, with its {_s.num_heads} heads × {_s.v_head_dim} dims, K and V per layer — the
       comparison in the DeepSeek-V2 paper's Table 1 (MHA caches 2 n_h d_h l elements per token, MLA (d_c + d_h^R) l);
    2. the same, with the head sizes DeepSeek's attention actually computes — keys of {_k} dims
       ({_s.qk_nope_head_dim} + {_s.qk_rope_head_dim} rope), values of {_s.v_head_dim};
    3. **GQA of the same model**, 8 K/V heads × {_s.v_head_dim} — what most models use today;
    4. other models: an MHA model of the 7B class ({_m.num_heads} heads × {_m.head_dim} per layer), Mistral 7B's
       GQA cache;
    5. mixed counts: a whole model's MHA cache against one layer's latent.
    """)
    return


@app.cell(hide_code=True)
def _():
    _s = specs.get_spec("deepseek-v3")
    mla_box = learner.prediction(
        f"Per token and layer, DeepSeek V3 caches {_s.kv_lora_rank} + {_s.qk_rope_head_dim} elements. How many times "
        f"smaller is that than the cache of MHA of the same model ({_s.num_heads} heads × {_s.v_head_dim} dims, K and V)?",
        "×")
    mla_box
    return (mla_box,)


@app.cell
def _():
    baselines = attention.mla_baselines("deepseek-v3", "mistral-7b-v0.1")
    plots.table(attention_figures.mla_baselines_frame(baselines), "computed from deepseek-v3 and mistral-7b-v0.1 config.json, bf16 "
                           "(helpers.formulas.attention.mla_baselines); fair = same model, counted the same way")
    return (baselines,)


@app.cell
def _(baselines, mla_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 50); in marimo, type it in the box above
    _s = specs.get_spec("deepseek-v3")
    _mha = next(r for r in baselines if r.fair and r.baseline.startswith("MHA of the same model"))
    _gqa = next(r for r in baselines if r.fair and r.baseline.startswith("GQA of the same model"))
    _latent = _s.kv_lora_rank + _s.qk_rope_head_dim
    learner.beside(mla_box, _given, _mha.baseline_over_mla, shown=lambda v: f"{v:,.1f}×",
        higher=f"MHA caches a key and a value for each of {_s.num_heads} heads: 2 × {_s.num_heads} × {_s.v_head_dim} = "
               f"{2 * _s.num_heads * _s.v_head_dim:,} elements per layer, against MLA's {_latent}.",
        lower=f"The latent is shared by every head, and the rope key rides beside it: {_s.kv_lora_rank} + "
              f"{_s.qk_rope_head_dim} = {_latent} elements, against MHA's 2 × {_s.num_heads} × {_s.v_head_dim}.",
        within=f"2 × heads × head_dim ÷ (latent + rope key); against GQA-8 of the same model it is "
               f"{_gqa.baseline_over_mla:,.2f}×, the other fair row.")
    return


@app.cell
def _(baselines):
    _lines = []
    for _q in attention.TALK_MLA_RATIOS:
        _m = attention.match_quoted(_q, baselines)
        if _m is None:
            _near = attention.nearest_baseline(_q, baselines)
            _lines.append(f"- **{_q}×** — no baseline computed from the configs gives it (within "
                          f"{attention.MATCH_TOLERANCE:.0%}); the nearest is {_near.baseline_over_mla:,.0f}× "
                          f"({_near.baseline}, counted {_near.counted}, {'fair' if _near.fair else 'not fair'}): "
                          "do not quote it.")
        else:
            _lines.append(f"- **{_q}×** is {_m.baseline_over_mla:,.1f}×: against *{_m.baseline}*, counted {_m.counted} — "
                          + ("**fair**: the same model, only the attention differs." if _m.fair else
                             "**not a fair comparison**: " + "; ".join(
                                 (["a different model"] if not _m.same_model else [])
                                 + (["counted differently on each side"] if not _m.same_count else [])
                                 + (["heads the model would not have"] if _m.same_model and _m.same_count else []))
                             + "."))
    _fair = [r for r in baselines if r.fair]
    _v3h = specs.get_spec("deepseek-v3")
    _hi = max(_fair, key=lambda r: r.baseline_over_mla)
    _lo = min(_fair, key=lambda r: r.baseline_over_mla)
    _groups = attention.mla_equivalent_gqa_groups("deepseek-v3")
    _gqa8 = 8 / _groups          # GQA-8's cache ÷ MLA's, from the paper's equivalence
    _agrees = ("agrees with the second" if abs(_gqa8 - _lo.baseline_over_mla) <= 1e-9 * _gqa8 else
               f"gives {_gqa8:,.2f}× against GQA-8, not the {_lo.baseline_over_mla:,.2f}× above")
    _newline = chr(10)
    mo.md(f"""
    The talk quoted three savings. Each one, matched by rule to the baseline that gives it:

    {_newline.join(_lines)}

    **Which to quote.** {len(_fair)} rows are fair — the same model, counted the same way, with the heads it
    would have — and they answer two questions: against the MHA DeepSeek would otherwise have trained,
    **{attention.mla_saving(_hi)}** (the DeepSeek-V2 paper's baseline); against the GQA most models use
    today, **{attention.mla_saving(_lo)}**. The paper's own summary {_agrees}: MLA's cache equals GQA with
    {_groups:g} groups of {_v3h.v_head_dim or _v3h.qk_nope_head_dim}-dim heads, and 8 ÷ {_groups:g} =
    {_gqa8:,.2f}. Every other row compares
    different models, one layer with a whole model, or widens MHA's keys with MLA's own rope part.

    The same figures from the command line, for any preset or `config.json`, any context — MLA and
    hybrid sliding/full layers included:

    ```bash
    .venv/bin/python -m helpers kv --model deepseek-v3 --tokens 131072
    .venv/bin/python -m helpers kv --model gpt-oss-120b --tokens 131072 --json
    ```
    """)
    return


@app.cell(hide_code=True)
def _():
    _m = specs.get_spec("mistral-7b-v0.3")
    _d, _p = compute_share.parity_parts(_m, "decode"), compute_share.parity_parts(_m, "prefill")
    _w = compute_share.parity_parts("mistral-7b-v0.1", "decode")
    mo.md(f"""
    ## Attention's arithmetic: what sharing K/V heads does not cut

    GQA, MQA and MLA shrink what a token leaves in the cache. The arithmetic attention does with the cache is
    another count: every **query** head still meets every cached key. Per key, per layer, a query head computes
    QKᵀ (head_dim multiply-adds, 2 × head_dim {term("FLOPs", "flop")}) and softmax·V (2 × head_dim more), so one
    token against one key costs f = 4 × heads × head_dim FLOPs in each of the L layers. The linear layers (the
    q/k/v/o projections and the MLP) cost 2 FLOPs per weight per token, 2 × P_linear, whatever the context. Attention's
    cost grows with the context and the linear layers' does not: the **{term("attention-parity length")}** is the context
    from which attention costs as many FLOPs as all the linear layers together.

    - A decode step at context c attends to c + 1 keys per layer (the new token sees itself too):
      L × f × (c + 1) = 2 × P_linear, so **c = ⌈2 × P_linear ÷ (L × f)⌉ − 1**.
    - A prefill of n tokens: the queries see 1, 2, …, n keys, n(n + 1)/2 in all, against n × 2 × P_linear:
      **n = ⌈4 × P_linear ÷ (L × f)⌉ − 1**.
    - The K/V heads enter only through P_linear (the k and v projections' weights); f counts the query heads.

    **Worked example** (`helpers.formulas.compute_share.parity_parts`): Mistral 7B v0.3, GQA-{_m.num_kv_heads}, no window.

    - f = 4 × {_m.num_heads} × {_m.head_dim} = {_d.flops_per_key:,} FLOPs per key per layer; L × f = {_d.layers} ×
      {_d.flops_per_key:,} = {_d.layers * _d.flops_per_key:,}
    - 2 × P_linear = {_d.linear_flops:,} FLOPs per token (`helpers.formulas.stepcost.matmul_params`: {_d.linear_flops // 2:,} weights)
    - {_d.linear_flops:,} ÷ {_d.layers * _d.flops_per_key:,} = {_d.keys_needed:,.1f} keys per layer, so
      c = **{_d.tokens:,} tokens**: {_d.reading()}
    - a prefill needs twice the keys per query: {_p.reading()}
    - Mistral 7B v0.1 has the same layers and a {specs.get_spec("mistral-7b-v0.1").sliding_window:,}-token
      window on every one: {_w.reading()}.

    Notebook 10 finds the same lengths by search (`compute_share.attention_crossover`) and measures the parts of a forward pass.
    """)
    return


@app.cell
def _():
    _name, _cfg = specs.load_config("qwen2.5-7b")
    _q = specs.get_spec("qwen2.5-7b")
    _half = _q.num_kv_heads // 2
    _qp = compute_share.parity_parts(_q)
    _hp = compute_share.parity_parts(specs.spec_from_config({**_cfg, "num_key_value_heads": _half},
                                                            f"qwen2.5-7b with {_half} K/V heads"))
    _kv = memory.kv_bytes_per_token(_q, "bf16")
    _m = memory.kv_bytes_per_token("mistral-7b-v0.3", "bf16")
    notebook.exercise(1, f"""Qwen 2.5 7B has {_q.num_layers} layers, {_q.num_heads} query heads of {_q.head_dim} dims and
    {_q.num_kv_heads} K/V heads: {_kv:,} B of cache per token in bf16, {verdicts.times_as(_kv, _m, "Mistral 7B v0.3's")}. At
    what decode context does its attention cost as many FLOPs as its linear layers? With {_half} K/V heads its cache
    would halve: what would the parity length be? (`helpers.formulas.stepcost.matmul_params("qwen2.5-7b")` counts the
    weights a token is multiplied by.)""", f"""
    - f = 4 × {_q.num_heads} × {_q.head_dim} = {_qp.flops_per_key:,}; L × f = {_qp.layers} × {_qp.flops_per_key:,} =
      {_qp.layers * _qp.flops_per_key:,}
    - 2 × P_linear = 2 × {_qp.linear_flops // 2:,} = {_qp.linear_flops:,}
    - {_qp.linear_flops:,} ÷ {_qp.layers * _qp.flops_per_key:,} = {_qp.keys_needed:,.1f} keys per layer: c = **{_qp.tokens:,}
      tokens** ({_qp.reading()})
    - with {_half} K/V heads f is the same, {_hp.flops_per_key:,}: only the k and v projections shrink, P_linear =
      {_hp.linear_flops // 2:,}, and c = **{_hp.tokens:,} tokens**, {verdicts.times_as(_hp.tokens, _qp.tokens, f"the length with {_q.num_kv_heads} K/V heads")}.
      Sharing K/V heads halves the cache and leaves attention's FLOPs per key as they were.""")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Quality: what the papers report

    Cache size is half the story; the other half is what the model loses. Published comparisons,
    each with its source (`helpers/data/attention_scorecard.csv`). They are not comparable across
    rows: different models, data and benchmarks. Within a row the comparison is controlled.
    """)
    return


@app.cell
def _():
    scorecard = pd.DataFrame(attention.scorecard())
    plots.table(scorecard, "published results, each row with its source (helpers/data/attention_scorecard.csv)")
    return (scorecard,)


@app.cell(hide_code=True)
def _(scorecard):
    _s = attention.scorecard_summary(scorecard.to_dict("records"))
    _w = specs.get_spec("mistral-7b-v0.1").sliding_window
    _lo, _hi = _s.mla_cache_share
    _lost = "; ".join(f"behind on {m} at the {where}" for m, where in _s.mla_lost) or "behind on none"
    _v = attention.scorecard_verdicts(scorecard.to_dict("records"))
    mo.md(f"""
    What the rows say, from their own numbers: {"; ".join(map(str, _v))}; and MLA scored above MHA in
    {_s.mla_won} of the {_s.mla_comparisons} comparisons listed ({_lost}) with {100 * _lo:.0f}–{100 * _hi:.0f} % of
    its cache. Mistral reports that its {_w:,}-token window cuts the cache {_s.window_cache_smaller:g}× at
    {_s.window_at_tokens // 1024}k tokens "without impacting the model quality", and gives no side-by-side score.
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
    _kv, _gs, _pc = memory.kv_cache_bytes, specs.get_spec, specs.param_count
    _d, _l = _kv("deepseek-v3", 131072, 1, "bf16"), _kv("llama-3.1-8b", 131072, 1, "bf16")
    _g = _kv("gpt-oss-120b", 131072, 1, "bf16")
    notebook.exercise(2, """Compare one 128k-token sequence's cache across three very different models:
    `python -m helpers kv --model deepseek-v3 --tokens 131072`, then `--model llama-3.1-8b` and
    `--model gpt-oss-120b`. Which caches least, and why?""", f"""
    DeepSeek V3 ({_pc("deepseek-v3") / 1e9:,.0f} B parameters, MLA): **{fmt_bytes(_d)}**; Llama 3.1 8B (GQA): **{fmt_bytes(_l)}**;
    GPT-OSS-120B (GQA, {_gs("gpt-oss-120b").sliding_layers} of {_gs("gpt-oss-120b").num_layers} layers sliding over
    {_gs("gpt-oss-120b").sliding_window} tokens): **{fmt_bytes(_g)}**. The largest model caches
    {attention.cache_against(_d, _l, "the 8B one")}: MLA's latent replaces per-head keys and values, and GPT-OSS's sliding
    layers stop growing at their window, so only its full-attention layers pay for the context.""")
    return


@app.cell
def _():
    _v2, _v3 = specs.get_spec("deepseek-v2-lite"), specs.get_spec("deepseek-v3")
    _b = {r.baseline: r.baseline_over_mla for r in attention.mla_baselines("deepseek-v2-lite", "mistral-7b-v0.1")}
    _same = next(v for k, v in _b.items() if k.startswith("MHA of the same model:"))
    _b3 = {r.baseline: r.baseline_over_mla for r in attention.mla_baselines("deepseek-v3", "mistral-7b-v0.1")}
    _same3 = next(v for k, v in _b3.items() if k.startswith("MHA of the same model:"))
    _gqa = next(v for k, v in _b.items() if k.startswith("GQA of the same model"))
    notebook.exercise(3, """DeepSeek V2 Lite uses MLA with fewer heads than V3. Compute its fair ratios with
    `helpers.formulas.attention.mla_baselines("deepseek-v2-lite")`. Is MLA's saving against MHA of the same
    model larger or smaller than V3's, and why?""", f"""
    Against MHA of the same model: **{_same:,.1f}×** (V3: {_same3:,.1f}×); against GQA-8 of the same model:
    **{_gqa:,.1f}×**: V2 Lite's saving is {verdicts.times_as(_same, _same3, "V3's")}, because the saving against MHA
    is 2 × heads × head_dim ÷ (latent + rope key): the latent is
    {_v2.kv_lora_rank} + {_v2.qk_rope_head_dim} in V2 Lite and {_v3.kv_lora_rank} + {_v3.qk_rope_head_dim} in V3, and
    V2 Lite has {_v2.num_heads} heads to replace where V3 has {_v3.num_heads}: with the same latent, the
    saving scales with the heads ({_v3.num_heads} ÷ {_v2.num_heads} = {_v3.num_heads / _v2.num_heads:g}, and
    {_same3:,.1f} ÷ {_same:,.1f} = {_same3 / _same:,.2f}).""")
    return


@app.cell(hide_code=True)
def _(kv_context, kv_heads):
    _n = int(kv_context.value)
    _mqa = next(r for r in kv_heads if r.kv_heads == 1 and r.tokens == 100 and r.batch == 1)
    _llama = compute_share.parity_parts("llama-3.1-8b", "prefill")
    check_questions = [
        learner.Question(f"At the context you picked ({_n:,} tokens), how many GB does one sequence of Llama 3.1 8B cache "
                         "in bf16?", memory.kv_cache_bytes("llama-3.1-8b", _n, 1, "bf16") / 1e9, "GB"),
        learner.Question("In this run's measured caches, how many bytes does the MQA model (one K/V head) hold for "
                         f"{_mqa.tokens} tokens, batch {_mqa.batch}, in fp32?", _mqa.measured_bytes, "B"),
        learner.Question("Llama 3.1 8B has Mistral 7B v0.3's layers and no window. From what prompt length does a "
                         "prefill's attention cost as many FLOPs as its linear layers?", _llama.tokens, "tokens"),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "change the context above and the first changes with it")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _(hf_mla_checks, kv_heads, mla_checks, sliding):
    _all = verdicts.byte_for_byte([r.equal for r in [*kv_heads, *sliding, *mla_checks, *hf_mla_checks]],
                                  "the formula", "measured cache")
    mo.md(f"""
    ## Takeaways

    - The KV cache per token is a formula of the config — layers, K/V heads, head size, bytes. Against
      this run's real caches (MHA, GQA, MQA, a sliding window, MLA twice) it is {_all}.
    - GQA and MQA cut the cache by sharing heads; MLA by compressing; a sliding window by forgetting.
      Each trades something: quality (MQA), compute at attention time (MLA's up-projections; the key's is
      absorbed into the query), or long-range recall within a layer (sliding windows).
    - A ratio is only as honest as its baseline: name it, and compare the same model counted the same
      way on both sides.
    - Attention's FLOPs per key count the query heads, so sharing K/V heads shrinks the cache and not the
      arithmetic; it costs as many FLOPs as the linear layers from the attention-parity length on
      ({compute_share.parity_parts("mistral-7b-v0.3").reading()}).

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
