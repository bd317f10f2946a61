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

    from helpers.formulas import attention, compute_share, memory, regime, specs
    from helpers import capacity
    from helpers.measure import kv_caches, mla
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
       {term("sliding windows", "sliding-window-attention")} — caches per token, for every preset up to 128k tokens.
    2. To check each formula against a real cache, byte for byte.
    3. To state a saving against a named baseline, and to tell a fair ratio from an unfair one.
    4. What the papers report each variant costs in quality.

    {run_times.header("06")}

    Every generated token (a {term("decode")} step) reads the keys and values of every earlier token, so the
    {term("KV cache", "kv-cache")} grows with context × users and, beside the weights, decides how many requests
    fit on a GPU. The variants differ in **what they cache per token per layer**:

    | variant | cached per token per layer | used by |
    | --- | --- | --- |
    | MHA — multi-head | K and V for every query head: 2 × heads × head_dim | GPT-2, Llama 1 |
    | MQA — multi-query | one K/V head shared by all query heads: 2 × head_dim | PaLM, Falcon 7B |
    | GQA — grouped-query | one K/V head per group of query heads: 2 × groups × head_dim | Mistral, Llama 3, Qwen 2.5 |
    | MLA — multi-head latent | one compressed latent + a small decoupled {term("RoPE")} key, shared by all heads | DeepSeek V2/V3 |
    | sliding window | any of the above, but a layer keeps only the last *W* tokens | Mistral 7B v0.1, GPT-OSS (every other layer) |
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

    From each model's `config.json` (`helpers.formulas.memory`, bf16). The per-sequence columns honour sliding
    windows: a sliding layer stops growing at its window.
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
        lower=f"GQA caches its {_g.num_kv_heads} K/V heads, not its {_g.num_heads} query heads: {_count}.",
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
    mo.md(f"""
    Reading the plots: the GQA models grow linearly all the way; **Mistral 7B v0.1 flattens at
    {_m1.sliding_window:,} tokens** (its window is on every layer; v0.3 dropped it); **GPT-OSS-120B** grows at
    {_full}/{_go.num_layers} of its short-context rate past {_go.sliding_window:,} tokens, where its
    {_go.sliding_layers} sliding layers stop; MLA caches a {memory.kv_elements_per_token_layer(_v3)}-wide latent
    per layer, so **DeepSeek V3**, {specs.param_count(_v3) / 1e9:,.0f} B parameters, caches
    {memory.kv_bytes_per_token(_v3, "bf16"):,} B per token against Llama 3.1 8B's
    {memory.kv_bytes_per_token("llama-3.1-8b", "bf16"):,} B.
    """)
    return


@app.cell(hide_code=True)
def _():
    _contexts = [1024, 4096, 8192, 16384, 32768, 65536, 131072]
    kv_context = mo.ui.slider(steps=_contexts, value=notebook.env_default("WORKSHOP_KV_CONTEXT", 32768, _contexts),
                              show_value=True, label="context (tokens, one sequence)")
    mo.vstack([mo.md("""
    **Pick a context.** One sequence's cache for every preset, smallest first, against Mistral 7B v0.3's, and
    how many such sequences fit on one H100 SXM beside the model's bf16 weights (notebook 04's planner; 0: the
    weights alone do not fit, whatever the cache).
    """), kv_context, notebook.static_note({"WORKSHOP_KV_CONTEXT": "the context (1024 … 131072 tokens)"})])
    return (kv_context,)


@app.cell
def _(kv_context):
    _n = int(kv_context.value)
    _ref = memory.kv_cache_bytes("mistral-7b-v0.3", _n, 1, "bf16")
    kv_at_context = pd.DataFrame([{
        "model": name, "attention": specs.get_spec(name).attention,
        f"KV of one {_n:,}-token sequence (GB)": memory.kv_cache_bytes(name, _n, 1, "bf16") / 1e9,
        "÷ Mistral 7B v0.3": regime.ratio(memory.kv_cache_bytes(name, _n, 1, "bf16"), _ref),
        "within its context": _n <= (specs.get_spec(name).max_position_embeddings or _n),
        "sequences on one H100 SXM": (capacity.max_batch(name, "H100 SXM", context=_n)
                                      if _n <= (specs.get_spec(name).max_position_embeddings or _n) else None)}
        for name in specs.PRESETS]).sort_values(f"KV of one {_n:,}-token sequence (GB)", kind="stable")
    plots.table(kv_at_context, "computed from each config.json, bf16 weights and KV (helpers.formulas.memory, helpers.capacity); "
                               "past a model's context the formula still counts, the planner does not")
    return


@app.cell(hide_code=True)
def _():
    kv_heads_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## Measured: MHA, GQA, MQA on real caches

    Three tiny Mistral models that differ **only** in their K/V heads — 8 (MHA), 2 (GQA, the tiny profile's
    own), 1 (MQA) — built with random weights, loaded through `from_pretrained`, run forward with transformers'
    {term("DynamicCache")} on the CPU. The measured bytes are those of the cache's tensors; the formula is
    `helpers.formulas.memory.kv_cache_bytes` at {term("fp32", "bf16")}.
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
def _():
    mo.md("""
    **What you should see.** The same bytes on every machine, a GPU included. *measured ÷ formula* 1.00
    (*equal*) where the formula counts what the library keeps; any other ratio is something it leaves out
    (padding, a preallocated buffer). *÷ 1 K/V head* equals the K/V heads: the cache is proportional to them.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Measured: a sliding window caps the cache

    A tiny Mistral with `sliding_window = 16`, decoding one token at a time. transformers' sliding layer
    (`DynamicSlidingWindowLayer`) keeps **window − 1 = 15** tokens between steps: the next token's own K and
    V are computed in its forward pass and joined to those 15, so each query still attends to 16 tokens.
    Mistral's paper describes a rolling buffer of W slots; the formula takes either (`window_slots`).
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
    mo.vstack([_fig, mo.md("""
    **What you should see.** The measured points on the thick line: the cache grows one token's bytes per step,
    then stays flat from window − 1 tokens on, while the dashed line (no window) keeps growing;
    from there *measured ÷ no window* is 15 ÷ tokens seen.
    """)])
    return


@app.cell(hide_code=True)
def _():
    _c = mla.TINY_MLA_CONFIG
    mo.md(f"""
    ## Measured: MLA caches a latent, not heads

    MLA (DeepSeek-V2 §2.1) caches per token a latent **c** of `kv_lora_rank` numbers and one small
    **decoupled RoPE key** k_R shared by all heads. Up-projections W^UK and W^UV would rebuild every head's key
    and value from c; at inference the paper absorbs both — W^UK into the query's projection, W^UV into the
    output's — so attention runs on the latent and per-head K and V never exist (vLLM does so in decode and
    expands K and V for a {term("prefill")}, where that costs fewer {term("FLOPs", "flop")}). A rotation that depends on the position
    cannot be absorbed: hence k_R beside c. `helpers.measure.mla.MLAttention`
    ({_c['num_hidden_layers']} layers, {_c['num_attention_heads']} heads, latent {_c['kv_lora_rank']} + rope key
    {_c['qk_rope_head_dim']}) does exactly that, checked against a reference that expands K and V per head.
    """)
    return


@app.cell
def _():
    mla_checks = mla.measure_mla()
    plots.table(attention_figures.mla_checks_frame(mla_checks), "measured: helpers.measure.mla.TinyMLA (random weights) · fp32 · cpu")
    return (mla_checks,)


@app.cell
def _():
    hf_mla_checks = mla.measure_hf_mla()
    plots.table(attention_figures.cache_checks_frame(hf_mla_checks),
                "measured: transformers DeepseekV3ForCausalLM, toy config (random weights) · fp32 · cpu: "
                "its cache, too, holds the latent and the rope key")
    return (hf_mla_checks,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** *equal* true in both tables: the latent cache is the formula's bytes, in our MLA
    and in transformers'. *expanded ÷ latent* is what MHA-sized K and V would take. The absorbed path and the
    expanded reference compute the same function in another order, so their outputs differ by float rounding:
    an *error* in single or double digits of fp32 ε at the output's scale is rounding; thousands would be a bug.
    """)
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

    1. **MHA of the same model**, {_s.num_heads} heads × {_s.v_head_dim} — the paper's Table 1 (2 n_h d_h l
       against (d_c + d_h^R) l);
    2. the same with DeepSeek's {_k}-wide keys ({_s.qk_rope_head_dim} of them MLA's rope part);
    3. **GQA of the same model**, 8 K/V heads × {_s.v_head_dim}, what most models use;
    4. other models: a 7B-class MHA ({_m.num_heads} heads × {_m.head_dim}), Mistral 7B's whole cache;
    5. mixed counts: a whole model against one layer.
    """)
    return


@app.cell(hide_code=True)
def _():
    _s = specs.get_spec("deepseek-v3")
    mla_box = learner.prediction(
        f"Per token and layer, DeepSeek V3 caches {_s.kv_lora_rank} + {_s.qk_rope_head_dim} elements. How many times "
        f"less than MHA of the same model ({_s.num_heads} heads × {_s.v_head_dim}, K and V)?", "×")
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
    _latent = _s.kv_lora_rank + _s.qk_rope_head_dim
    learner.beside(mla_box, _given, _mha.baseline_over_mla, shown=lambda v: f"{v:,.1f}×",
        higher=f"MHA caches a key and a value for each of {_s.num_heads} heads: 2 × {_s.num_heads} × {_s.v_head_dim} = "
               f"{2 * _s.num_heads * _s.v_head_dim:,} elements per layer, against MLA's {_latent}.",
        lower=f"The latent is shared by every head: {_s.kv_lora_rank} + {_s.qk_rope_head_dim} = {_latent} elements, "
              f"against MHA's 2 × {_s.num_heads} × {_s.v_head_dim}.",
        within="2 × heads × head_dim ÷ (latent + rope key).")
    return


@app.cell
def _(baselines):
    plots.table(attention_figures.quoted_frame(attention.TALK_MLA_RATIOS, baselines),
                "the savings the talk quoted, each beside the computed baseline nearest it (helpers.formulas.attention)")
    return


@app.cell(hide_code=True)
def _():
    _b = {r.baseline.split(":")[0]: r for r in attention.mla_baselines("deepseek-v3")}
    _mha, _gqa = _b["MHA of the same model"], _b["GQA of the same model"]
    _groups = attention.mla_equivalent_gqa_groups("deepseek-v3")
    mo.md(f"""
    **What you should see.** A quoted ratio *within {attention.MATCH_TOLERANCE:.0%}* of a baseline is that
    baseline; read its *fair* column before repeating it. Two rows of the table above are fair — the same
    model, counted the same way, with the heads it would have — and they answer two questions: against the MHA
    DeepSeek would otherwise have trained, MLA caches **{_mha.baseline_over_mla:,.1f}×** less (the paper's
    baseline); against the GQA most models use, **{_gqa.baseline_over_mla:,.2f}×** less — the paper's own
    summary, MLA's cache equals GQA with {_groups:g} groups, gives 8 ÷ {_groups:g} = {8 / _groups:,.2f}. Ratios
    in the hundreds come only from a whole model on one side and one layer on the other. The same figures for
    any preset or `config.json`: `python -m helpers kv --model deepseek-v3 --tokens 131072`.
    """)
    return


@app.cell(hide_code=True)
def _():
    _m = specs.get_spec("mistral-7b-v0.3")
    _d, _p = compute_share.parity_parts(_m, "decode"), compute_share.parity_parts(_m, "prefill")
    mo.md(f"""
    ## Attention's arithmetic: what sharing K/V heads does not cut

    Every **query** head still meets every cached key: QKᵀ and softmax·V cost f = 4 × heads × head_dim
    FLOPs per key per layer, the linear layers 2 × P_linear per token. The
    **{term("attention-parity length")}**, from which attention costs as much: **c = ⌈2 × P_linear ÷ (L × f)⌉ − 1**
    in decode, **n = ⌈4 × P_linear ÷ (L × f)⌉ − 1** for a prefill. K/V heads enter only P_linear.
    Mistral 7B v0.3 (`compute_share.parity_parts`): f = {_d.flops_per_key:,}, 2 × P_linear = {_d.linear_flops:,};
    c = **{_d.tokens:,}**, within its {_d.context:,}-token context; n = **{_p.tokens:,}**, beyond it.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Quality: what the papers report

    Cache size is half the story; the other half is what the model loses. Published comparisons, each with its
    source (`helpers/data/attention_scorecard.csv`); rows are not comparable with each other (different
    models, data, benchmarks), each row's two scores are.
    """)
    return


@app.cell
def _():
    plots.table(attention_figures.scorecard_frame(attention.scorecard()),
                "published results, each row with its source (helpers/data/attention_scorecard.csv)")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What the rows say** (*variant − baseline*, in points). Uptrained GQA-8 stays within 0.1 point of MHA in
    0.28 s per sample (MQA 0.24 s, MHA 1.51 s). Trained from scratch at 7B, MHA beat GQA and MQA on all three
    benchmarks, by 1.4 to 12.9 points; MLA beat MHA in 5 of 6, with 4–14 % of its cache. Mistral's window
    cuts the cache 8× at 32k tokens "without impacting the model quality", with no side-by-side score.
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
    notebook.exercise(1, """Compare one 128k-token sequence's cache across three models:
    `python -m helpers kv --model deepseek-v3 --tokens 131072`, then `--model llama-3.1-8b` and
    `--model gpt-oss-120b`. Which caches least, and why?""", f"""
    DeepSeek V3 ({_pc("deepseek-v3") / 1e9:,.0f} B parameters, MLA): **{fmt_bytes(_d)}**; Llama 3.1 8B:
    **{fmt_bytes(_l)}**; GPT-OSS-120B ({_gs("gpt-oss-120b").sliding_layers} of {_gs("gpt-oss-120b").num_layers}
    layers sliding over {_gs("gpt-oss-120b").sliding_window} tokens): **{fmt_bytes(_g)}**, the least: only its
    full-attention layers pay for the context. MLA's latent makes the largest model cache {_l / _d:,.2f}× less
    than the 8B one.""")
    return


@app.cell
def _():
    _v2, _v3 = specs.get_spec("deepseek-v2-lite"), specs.get_spec("deepseek-v3")
    _b = {r.baseline.split(":")[0]: r.baseline_over_mla for r in attention.mla_baselines("deepseek-v2-lite")}
    _b3 = {r.baseline.split(":")[0]: r.baseline_over_mla for r in attention.mla_baselines("deepseek-v3")}
    _same, _same3 = _b["MHA of the same model"], _b3["MHA of the same model"]
    notebook.exercise(2, """DeepSeek V2 Lite uses MLA with fewer heads than V3. Compute its fair ratios with
    `helpers.formulas.attention.mla_baselines("deepseek-v2-lite")`. Is MLA's saving against MHA of the same
    model larger or smaller than V3's, and why?""", f"""
    Against MHA of the same model: **{_same:,.1f}×** (V3: {_same3:,.1f}×); against GQA-8 of the same model:
    **{_b["GQA of the same model"]:,.1f}×**. Smaller: the saving against MHA is 2 × heads × head_dim ÷ (latent +
    rope key), the latent is {_v2.kv_lora_rank} + {_v2.qk_rope_head_dim} in both, and V2 Lite has
    {_v2.num_heads} heads to replace where V3 has {_v3.num_heads}: {_v3.num_heads} ÷ {_v2.num_heads} =
    {_v3.num_heads / _v2.num_heads:g} = {_same3:,.1f} ÷ {_same:,.1f}.""")
    return


@app.cell(hide_code=True)
def _(kv_context, kv_heads):
    _n = int(kv_context.value)
    _mqa = next((r for r in kv_heads if r.kv_heads == 1 and r.tokens == 100 and r.batch == 1), None)
    _llama = compute_share.parity_parts("llama-3.1-8b", "prefill")
    check_questions = [
        learner.Question(f"One {_n:,}-token sequence of Llama 3.1 8B in bf16: how many GB of cache?", memory.kv_cache_bytes("llama-3.1-8b", _n, 1, "bf16") / 1e9, "GB"),
        learner.Question("This run's measured MQA cache at 100 tokens, batch 1: how many bytes?", _mqa.measured_bytes if _mqa else float("nan"), "B"),
        learner.Question("Llama 3.1 8B's attention-parity length in a prefill?", _llama.tokens, "tokens"),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "change the context above and the first changes with it")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Takeaways

    - The KV cache per token is a formula of the config, checkable against a real cache byte for byte.
    - GQA and MQA share heads (MQA at a cost in quality), MLA compresses (each head's query then meets the
      whole latent), a window forgets what lies beyond it.
    - A ratio is only as honest as its baseline: the same model, counted the same way.
    - Sharing K/V heads shrinks the cache, not attention's FLOPs.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.vstack([expected.sources(more=(
        "DeepSeek-AI, \"DeepSeek-V2\" (2024), arXiv:2405.04434: §2.1 (MLA, its absorption and decoupled RoPE), "
        "Table 1, Appendix D (Tables 8, 9) — <https://arxiv.org/abs/2405.04434>",
        "Ainslie et al., \"GQA\" (2023), arXiv:2305.13245, Table 1 — <https://arxiv.org/abs/2305.13245>",
        "Jiang et al., \"Mistral 7B\" (2023), arXiv:2310.06825, §2 — <https://arxiv.org/abs/2310.06825>",
        "transformers' `DynamicSlidingWindowLayer` (`transformers/cache_utils.py`) and vLLM's MLA paths "
        "(`vllm/model_executor/layers/attention/mla_attention.py`), the installed versions")),
        mo.md(f"*This run took {notebook.elapsed(started)}.*")])
    return


if __name__ == "__main__":
    app.run()
