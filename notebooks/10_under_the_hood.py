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
    import inspect
    import time

    import marimo as mo
    import pandas as pd

    from helpers.formulas import compute_share, flash, regime, state_space
    from helpers.measure import attention_kernels, hierarchy, microbench, models
    from helpers.present import expected, hood_figures, notebook, plots, replay
    from helpers.present.glossary import term
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()
    #: computed once, the same on every machine (tests/test_under_the_hood_10.py pins each)
    layers_4k = compute_share.layer_share("mistral-7b-v0.1", 1, 4095)             # one decode step at 4k tokens
    prefill_parity = compute_share.attention_crossover("mistral-7b-v0.3", "prefill")
    decode_parity = compute_share.attention_crossover("mistral-7b-v0.3", "decode")
    h100_tile = flash.paper_block_sizes(228 * 1024, 128, "bf16")                 # H100: 228 KiB per SM
    mamba_bytes = state_space.ssm_state_bytes("falcon-mamba-7b")
    linear_bytes = state_space.linear_attention_state_bytes(32, 8, 128, 128)     # a Mistral-shaped linear attention
    _h100 = next(g for g in hierarchy.gpu_hierarchy() if g.gpu == "H100 SXM")
    h100_onchip = _h100.onchip_over_hbm_bandwidth                                  # FlashAttention-3, Table 1


@app.function
def staircase_measured() -> dict:
    """This machine's data caches (as the operating system reports them) and the read bandwidth of one core
    against the working set (hierarchy.staircase): a recording carries the caches of the machine it ran on."""
    caches = hierarchy.data_caches()
    stairs = hierarchy.staircase(hierarchy.staircase_sizes(caches), repeats=3, bytes_per_sample=64 * 2**20,
                                 levels=caches)
    return {"caches": caches, "stairs": stairs}


@app.function
def attention_times(loaded) -> dict:
    """Naive against fused attention timed on the loaded model's device (attention_kernels.time_attention): Mistral's
    32 × 128 heads in bf16 on a GPU; 8 × 32 in the model's dtype on a CPU, the readable tiled version on the
    short lengths there."""
    gpu = loaded.device.startswith("cuda")
    shape = (flash.AttentionShape(batch=1, heads=32, head_dim=128, dtype="bf16") if gpu
             else flash.AttentionShape(1, 8, 32, loaded.dtype))
    lengths = [1024 * 2**k for k in range(6)] if gpu else [256, 512, 1024, 2048]
    frame = attention_kernels.time_attention(lengths, shape, loaded.device, causal=True, repeats=3, tiled_up_to=0 if gpu else 512)
    return {"shape": shape, "times": frame, "gpu": gpu}


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 10 · Under the hood: where the compute goes, the memory hierarchy, FlashAttention, and attention beyond the KV cache

    The foundations in depth, after notebook 03.

    **What you will learn**

    1. where a forward pass spends its FLOPs — embedding, layers, head;
    2. the memory hierarchy: a GPU's large, slow {term("HBM")} against its small, fast on-chip
       {term("shared memory")}, and this machine's CPU caches measured;
    3. {term("FlashAttention")}: exact attention in tiles with running softmax statistics, and the bytes it
       does not move;
    4. what replaces a growing {term("KV cache")}: {term("sparse attention")}, {term("linear attention")} and
       {term("state-space models", "state-space-model")} (Mamba).

    {run_times.header("10")}
    """)
    return


@app.cell
def _():
    loaded = models.load()
    return (loaded,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 1 · Where the compute goes

    A forward pass turns token ids into vectors (the **embedding**: a table lookup, no arithmetic), runs them
    through the **layers** (attention: four projections plus the products with every cached key and value;
    then the MLP), and multiplies the last vector by the **head** to get one score per vocabulary entry. The
    FLOPs of each part come from `helpers.formulas.compute_share`: 2 per weight a token meets, plus attention's
    context products. Computed for Mistral 7B first, across prompt lengths.
    """)
    return


@app.cell
def _():
    _table = hood_figures.shares_frame(compute_share.share_sweep(["mistral-7b-v0.1"], [512, 4096]))
    plots.table(_table, "computed from mistral-7b-v0.1 config.json (helpers.formulas.stepcost FLOPs)",
                formats={c: "{:.2%}" for c in _table.columns if c not in ("phase", "tokens")})
    return


@app.cell
def _(loaded):
    _lengths = [2**k for k in range(6, 19)]
    _models = ["mistral-7b-v0.1", "mistral-7b-v0.3"] + ([loaded.spec] if loaded.profile.startswith("tiny") else [])
    _sweep = compute_share.share_sweep(_models, _lengths)
    hood_figures.share_figure(_sweep, "computed (helpers.formulas.stepcost FLOPs): Mistral 7B v0.1 and v0.3 "
                              "configs" + (", and " + loaded.spec.name if len(_models) > 2 else ""))
    return


@app.cell
def _(loaded):
    # One decode step at 4,096 tokens: the layers' and the head's share of the FLOPs, and of the bytes it reads
    # (bf16), for the workshop's models and the loaded one.
    _rows = []
    for _m in ("mistral-7b-v0.1", "llama-3.1-8b", loaded.spec):
        _f, _b = compute_share.flop_terms(_m, 1, 4096), compute_share.byte_terms(_m, 4096)
        _rows.append({"model": getattr(_m, "name", _m), "layers ÷ FLOPs": _f.layer_share,
                      "head ÷ FLOPs": _f.head / _f.total, "layers' share ÷ the talk's 95 %": _f.layer_share / compute_share.TALK_LAYER_SHARE,
                      "attention ÷ bytes": _b.attention / _b.total, "MLP ÷ bytes": _b.mlp / _b.total,
                      "head ÷ bytes": _b.head / _b.total})
    plots.table(pd.DataFrame(_rows), "computed from each config.json: one decode step at 4,096 tokens, batch 1, bf16 "
                "(helpers.formulas.compute_share.flop_terms and byte_terms)", precision=3)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **How to read it.** One Mistral 7B decode step at 4,096 tokens puts **{layers_4k:.1%}** of its FLOPs in the
    layers, the head (4,096 × 32,000 weights) the rest. A larger vocabulary or a narrower model moves FLOPs into
    the head. At batch 1 a step's time splits as the byte columns do (notebook 03).

    **Long contexts**: attention over the context grows with every token while the linear layers do not.
    Without a window (Mistral 7B v0.3) it costs as much as all linear layers together from a
    **{prefill_parity:,}-token prompt** in a prefill and from a **{decode_parity:,}-token context** in one decode
    step. Mistral 7B v0.1's 4,096-token window caps it: it never gets there.
    """)
    return


@app.cell(hide_code=True)
def _():
    _h = next(g for g in hierarchy.gpu_hierarchy() if g.gpu == "H100 SXM")
    mo.md(f"""
    ## 2 · The memory hierarchy

    Every processor keeps a small memory next to its arithmetic and a large one further away. On a GPU:
    **HBM** (an H100 SXM: {_h.hbm_bandwidth / 1e12:,.2f} TB/s) and, in each streaming multiprocessor (SM),
    **shared memory** ({_h.smem_per_sm_bytes // 1024} KiB per SM, {_h.onchip_bandwidth / 1e12:,.0f} TB/s for the chip).
    Decode streams weights and cache from HBM every step (notebook 03); a kernel that reuses data from shared
    memory escapes that floor. Each figure's source is in `helpers/data/gpu_onchip.csv`:
    """)
    return


@app.cell
def _():
    gpu_levels = hierarchy.gpu_hierarchy()
    plots.table(hood_figures.gpu_levels_frame(gpu_levels),
                "datasheets, architecture whitepapers and tuning guides, papers (the Sources cell lists them)")
    return (gpu_levels,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **How to read it.** *on-chip ÷ HBM bandwidth* is what an algorithm gains by keeping its working set on
    chip; *HBM ÷ on-chip size* is why it must work in tiles: the shared memory of all SMs together holds that
    fraction of HBM's bytes.
    """)
    return


@app.cell(hide_code=True)
def _():
    stairs_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ### The same staircase, measured on this machine's CPU

    A CPU has the same structure: L1, L2 and L3 caches on the chip, DRAM off it. The cache sizes come from the
    operating system; the bandwidth is measured by re-reading a buffer of growing size (one core, best of
    repeats), up to {microbench.PAST_LAST_CACHE}× the last-level cache (at most {microbench.SHARE_OF_FREE:.0%} of the
    memory free). The levels are found on the measured curve — a step wherever the bandwidth falls **below**
    the previous size's by the 10 % margin — then held against the sizes the system reports. On a GPU machine
    this measures the host CPU.
    """), stairs_button])
    return (stairs_button,)


@app.cell
def _(loaded, stairs_button):
    stairs_run = replay.measure("10/staircase", staircase_measured, run=stairs_button.value, profile=loaded.profile,
                                device=loaded.device)
    caches = stairs_run.value["caches"]
    plots.table(hood_figures.caches_frame(caches),
                stairs_run.source("this machine's data caches, as the operating system reports them (/sys/devices/system/cpu)"))
    return caches, stairs_run


@app.cell(hide_code=True)
def _(stairs_run):
    stairs_run.note()
    return


@app.cell
def _(caches, loaded, stairs_run):
    stairs = stairs_run.value["stairs"]
    hood_figures.staircase_figure(stairs, caches, stairs_run.source(
        "measured: read bandwidth, one CPU core, float32 sum, " + loaded.label.split(" · ")[-2] + " host"))
    return (stairs,)


@app.cell
def _(caches, stairs, stairs_run):
    _levels = hierarchy.levels_found(stairs, caches)
    plots.table(hood_figures.levels_frame(_levels),
                stairs_run.source("measured: the levels found on the curve, median read bandwidth, one CPU core"))
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** A curve that falls in steps as the working set outgrows each cache.
    - **A step where a reported cache ends**: the next level serves the working set.
    - **A step no reported size explains, or none at a reported cache**: a shared cache, a prefetcher, or
      other work on the machine.
    - **The first level ÷ the last**: what tiling can gain here — a tile reused from a fast level runs at its speed.
    - **One level only**: every size read at one rate; too few sizes, or a busy machine.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 3 · FlashAttention as a mechanism

    Standard attention writes the N×N score matrix S to HBM, reads it back for the softmax, writes the
    probabilities P, reads them back to multiply by V. FlashAttention never forms S or P: it takes a block of
    queries, streams the keys and values past it block by block, and keeps, per query, the running maximum *m*
    and running sum ℓ of the softmax. When a new block raises the maximum, the partial sum and output are
    rescaled by exp(m_old − m_new) — the **online softmax** — so the result is exact. Here it is
    (`helpers.measure.attention_kernels.tiled_attention`):
    """)
    return


@app.cell(hide_code=True)
def _():
    _src = inspect.getsource(attention_kernels.tiled_attention)
    mo.md(f"```python\n{_src}```")
    return


@app.cell
def _():
    import torch.nn.functional as _F

    _rows = []
    for _n, _causal in ((100, False), (257, True), (1000, True)):
        _q, _k, _v = attention_kernels.attention_inputs(_n, flash.AttentionShape(1, 8, 32, "fp32"), seed=_n)
        _ref = _F.scaled_dot_product_attention(_q, _k, _v, is_causal=_causal)
        _err = float((attention_kernels.tiled_attention(_q, _k, _v, _causal) - _ref).abs().max())
        _rows.append({"tokens": _n, "causal": _causal, "blocks": "64 × 64", "max |tiled − SDPA|": _err,
                      "in fp32 epsilons": regime.epsilons(_err, 1.0, "fp32")})
    plots.table(pd.DataFrame(_rows), "measured: fp32 · cpu, 8 heads × 32 dims, random unit-variance inputs; "
                "against torch.nn.functional.scaled_dot_product_attention", formats={"max |tiled − SDPA|": "{:.1e}"})
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **How to read it.** The tiled result equals PyTorch's to rounding when *in fp32 epsilons* (units of
    2⁻²³ ≈ 1.2·10⁻⁷ at the values' scale) is under 100: the two sum the same products in a different order.
    10⁴ or more would mean a bug in the rescaling. (`tests/test_flash.py` checks more
    shapes, causal and not, GQA and bf16.)
    """)
    return


@app.cell(hide_code=True)
def _(gpu_levels):
    _gpus = [g.gpu for g in gpu_levels if g.smem_per_sm_bytes]
    hbm_gpu = mo.ui.dropdown(options=_gpus, value=notebook.env_default("WORKSHOP_FLASH_GPU", "H100 SXM", _gpus), label="GPU")
    hbm_head_dim = mo.ui.dropdown(options=["64", "128", "256"], value=str(notebook.env_default(
        "WORKSHOP_FLASH_HEAD_DIM", 128, [64, 128, 256])), label="head size d")
    mo.vstack([mo.md("""
    ### The bytes each moves to and from HBM

    One layer of Mistral 7B's width (4,096 = heads × head size; bf16, causal), with FlashAttention's
    Algorithm 1 block size for the GPU's shared memory per SM (**M** elements): B_c = ⌈M / 4d⌉, B_r = min(B_c, d).
    Standard: 4·N·d + 4·N² elements per head. Tiled: Q read once, O written once, each K/V block read once
    per query block — an **upper bound**, since L2 keeps some K/V blocks. Computed (`helpers.formulas.flash`):
    """), mo.hstack([hbm_gpu, hbm_head_dim], justify="start"),
               notebook.static_note({"WORKSHOP_FLASH_GPU": "the GPU (" + ", ".join(_gpus) + ")",
                                     "WORKSHOP_FLASH_HEAD_DIM": "the head size (64, 128 or 256)"})])
    return hbm_gpu, hbm_head_dim


@app.cell
def _(gpu_levels, hbm_gpu, hbm_head_dim):
    _d = int(hbm_head_dim.value)
    _smem = next(g for g in gpu_levels if g.gpu == hbm_gpu.value).smem_per_sm_bytes
    _r, _c = flash.paper_block_sizes(_smem, _d, "bf16")
    _shape = flash.AttentionShape(batch=1, heads=4096 // _d, head_dim=_d, dtype="bf16")
    _hbm = flash.hbm_bytes_table(_shape, [2**k for k in range(9, 18)], _r, _c, causal=True)
    _caption = f"computed: {_shape.heads} heads × {_d} (Mistral 7B's width), bf16, causal; {hbm_gpu.value} blocks {_r} × {_c}"
    _table = pd.DataFrame([{"tokens": h.tokens, "standard (GB)": h.standard_bytes / 1e9, "tiled, at most (GB)": h.tiled_bytes / 1e9,
                            "one N×N matrix (GB)": h.nxn_bytes / 1e9, "standard ÷ tiled": regime.ratio(h.standard_bytes, h.tiled_bytes),
                            "limit 4·B_r ÷ d": flash.traffic_ratio_limit(_r, _d, causal=True)} for h in _hbm])
    mo.vstack([hood_figures.hbm_figure(_hbm, _r, _c, _caption), plots.table(_table, _caption)])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **How to read it.** Both grow as N²: the standard algorithm moves 4·N² elements of S and P per head; the
    tiled one reads K and V once per query block, about d·N²/B_r elements causal. So *standard ÷ tiled* tends
    to **4·B_r/d** — with B_r = M/4d, FlashAttention moves Θ(N²d²/M) elements against standard attention's
    Θ(N·d + N²) (the paper's Theorem 2). More on-chip memory means larger tiles and fewer passes over K and V,
    until B_r reaches d. On an H100 SXM (228 KiB per SM) with d = 128 the tiles are
    {h100_tile[0]} × {h100_tile[1]}. The standard algorithm must also hold an N×N matrix; the tiled one holds none.
    """)
    return


@app.cell(hide_code=True)
def _():
    attention_button = replay.run_button()
    mo.vstack([mo.md("""
    ### Timed here: naive against PyTorch's fused attention

    `naive_attention` materialises S and P; `torch.nn.functional.scaled_dot_product_attention` picks a fused
    kernel (a FlashAttention kernel on recent GPUs, a tiled CPU kernel on a CPU). Median of 3 runs (one thread
    on a CPU); the readable `tiled_attention` (Python loops) is timed on the short lengths only — it shows the
    mechanism, not the speed. Running out of memory ends the sweep as a result.
    """), attention_button])
    return (attention_button,)


@app.cell
def _(attention_button, loaded):
    attn_run = replay.measure("10/attention_times", models.run_on, loaded, attention_times, run=attention_button.value,
                              profile=loaded.profile, device=loaded.device)
    attn_on, _measured = attn_run.value
    attn_times, timing_shape = _measured["times"], _measured["shape"]
    attn_source = attn_run.source(f"measured: {timing_shape.heads} heads × {timing_shape.head_dim}, {timing_shape.dtype}, "
                                  f"causal · {attn_on.device}{'' if _measured['gpu'] else ', one thread'} · profile {attn_on.profile}")
    hood_figures.timing_figure(attn_times, attn_source)
    return attn_run, attn_source, attn_times


@app.cell(hide_code=True)
def _(attn_run):
    attn_run.note()
    return


@app.cell
def _(attn_source, attn_times):
    plots.table(hood_figures.timing_frame(attn_times), f"{plots.source_label(attn_source)}; seconds", precision=4)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** *naive ÷ fused* per length:
    - **above** 1: the naive version's N×N matrices no longer fit the caches and travel to memory and back
      (bandwidth).
    - **at**: both are small enough that fixed costs — the calls, the threads — set the time (overhead).
    - **below**: the naive version's few large matrix products beat a fused kernel not tuned for this device.

    On a GPU the fused kernel is a FlashAttention kernel.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 4 · Beyond the KV cache

    Notebook 06 showed caches that share heads (GQA, MQA), compress (MLA) or forget (sliding window). Three
    more ideas change what attention keeps per sequence.

    **Sparse attention** attends each query to *k* of the *N* cached keys: the top-*k* scores, or a fixed
    pattern — the first "sink" tokens plus a recent window (StreamingLLM). It saves the products with the keys
    left out and risks what they held. Top-*k* still scores every key to choose, and keeps the whole cache.

    **Linear attention** replaces the softmax by a feature map φ: causal attention becomes a recurrence over a
    state S = Σ φ(k)vᵀ of d × d numbers that never grows. **Mamba** carries a fixed d_inner × d_state state and
    a short convolution window per layer. **Jamba** keeps a KV cache in 4 of its 32 layers, Mamba states in
    the rest.
    """)
    return


@app.cell
def _():
    _s = [state_space.sparse_decode_saving("mistral-7b-v0.3", _n, _k) for _n in (32768, 131072) for _k in (256, 2048)]
    plots.table(pd.DataFrame([{"context": s["context"], "keys kept": s["keep"], "attention ÷ dense step's FLOPs": s["attention_share"],
                               "sparse ÷ dense FLOPs": regime.ratio(s["sparse_flops"], s["dense_flops"])} for s in _s]),
                "computed: one Mistral 7B v0.3 decode step, batch 1 (helpers.formulas.state_space.sparse_decode_saving; "
                "choosing the keys not counted)", precision=3)
    return


@app.cell
def _():
    _contexts = [1024, 4096, 32768, 131072, 262144]
    _rows = pd.DataFrame(state_space.state_vs_kv(contexts=_contexts)).pivot(index="model", columns="tokens", values="bytes")
    _rows.loc["linear attention, Mistral-shaped"] = linear_bytes
    _rows = (_rows / 2**20).round(1)
    _rows.columns = [f"{c:,} tokens (MiB)" for c in _rows.columns]
    plots.table(_rows.reset_index(), "computed from published config.json files (presets/SOURCES.md): bytes one "
                "sequence carries, bf16 states and caches (helpers.formulas.state_space)")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **How to read it.** A KV cache grows with every token (v0.3), or until its window (v0.1); a state does not.
    Falcon Mamba 7B's state is {mamba_bytes / 2**20:,.0f} MiB at any length: Mistral 7B v0.3's cache passes it at
    {state_space.break_even_tokens(mamba_bytes):,.0f} tokens. A Mistral-shaped linear attention would carry
    {linear_bytes / 2**20:,.1f} MiB, the KV of {state_space.break_even_tokens(linear_bytes):,.1f} tokens. What the fixed
    state costs: everything the model will ever recall must fit in it. A hybrid keeps some attention layers,
    whose cache holds every token, for that.
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
    _llama = compute_share.layer_share("llama-3.1-8b", 1, 4096)
    _a100 = flash.paper_block_sizes(164 * 1024, 128, "bf16")
    _rtx = flash.paper_block_sizes(100 * 1024, 128, "bf16")
    _kv = lambda b: flash.tiled_hbm_elements(32768, 128, b[0], b[1], True).total  # noqa: E731
    _jamba4k = state_space.sequence_state_bytes("jamba-1.5-mini", 4096)
    _fixed = state_space.ssm_state_bytes("jamba-1.5-mini")
    _jamba_tok = state_space.sequence_state_bytes("jamba-1.5-mini", 2) - state_space.sequence_state_bytes("jamba-1.5-mini", 1)
    _mistral_tok = state_space.sequence_state_bytes("mistral-7b-v0.3", 1)
    mo.vstack([
        notebook.exercise(1, """**The head's share.** Llama 3.1 8B has a 128,256-word vocabulary. Predict the
        layers' share of a decode step's FLOPs against the talk's 95 %, then check with
        `helpers.formulas.compute_share.layer_share("llama-3.1-8b", 1, 4096)`.""", f"""Llama's head is 4,096 × 128,256
        weights, {128256 / 32000:.2f}× Mistral's 4,096 × 32,000: the layers take **{_llama:.1%}** of a decode step at
        4,096 tokens, against Mistral 7B's {layers_4k:.1%}."""),
        notebook.exercise(2, """**Tiles and shared memory.** With `helpers.formulas.flash.paper_block_sizes`, find the block size
        on an A100 (164 KiB per SM) and an RTX 4090 (100 KiB) for head_dim 128 in bf16, and how many times more K/V
        elements the 4090's tiles move than the H100's at 32k tokens (`tiled_hbm_elements`).""", f"""A100: B_r × B_c =
        {_a100[0]} × {_a100[1]}; RTX 4090: {_rtx[0]} × {_rtx[1]}; H100: {h100_tile[0]} × {h100_tile[1]}. B_r = min(⌈M / 4d⌉, d):
        once the memory allows d query rows, more of it no longer shortens the K/V passes. At 32k tokens the 4090's
        tiles move {_kv(_rtx):,} elements per head against the H100's {_kv(h100_tile):,}
        ({_kv(_rtx) / _kv(h100_tile):.2f}×). Real kernels spend the extra memory on pipelining (loading the next tile
        while computing this one)."""),
        notebook.exercise(3, f"""**Break-even.** At what context does Jamba 1.5 Mini's whole per-sequence state equal
        Mistral 7B v0.3's KV cache? (`state_space.sequence_state_bytes` for both, or reason with {_mistral_tok:,} B per
        token.)""", f"""Jamba carries a fixed {_fixed:,} B of Mamba state plus {_jamba_tok:,} B per token (its attention
        layers); Mistral v0.3 carries {_mistral_tok:,} B per token. Equal where {_fixed:,} = ({_mistral_tok:,} − {_jamba_tok:,}) × n:
        **n ≈ {_fixed / (_mistral_tok - _jamba_tok):,.0f} tokens**. (At 4,096 tokens Jamba carries {_jamba4k / 2**20:,.1f} MiB.)"""),
    ])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## Takeaways

    - A forward pass's FLOPs are a formula of the shape; without a window, attention costs as much as the
      linear layers from a {decode_parity:,}-token context.
    - Memory comes in levels: small and fast on chip, large and slow off it; an H100 SXM's shared memory
      streams at {h100_onchip:.1f}× its HBM's bandwidth.
    - FlashAttention computes exact attention tile by tile with the online softmax: no N×N matrix in HBM;
      traffic still Θ(N²), smaller by about 4·B_r/d.
    - A KV cache grows with the context; a sparse pattern, a linear-attention state or a Mamba state does not —
      at the price of what the model can recall. Hybrids keep some attention layers for that.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


@app.cell(hide_code=True)
def _():
    expected.sources(more=(
        "Dao et al., FlashAttention (2022), arXiv:2205.14135 — Algorithm 1, Theorem 2; Dao, FlashAttention-2 (2023), "
        "arXiv:2307.08691; Milakov & Gimelshein, Online normalizer calculation for softmax (2018), arXiv:1805.02867",
        "Katharopoulos et al., Transformers are RNNs (2020), arXiv:2006.16236; Gu & Dao, Mamba (2023), arXiv:2312.00752; "
        "Lieber et al., Jamba (2024), arXiv:2403.19887; Xiao et al., StreamingLLM (2023), arXiv:2309.17453",
        "GPU on-chip figures: NVIDIA's architecture whitepapers and tuning guides, and Shah et al., FlashAttention-3 "
        "(2024), arXiv:2407.08608, Table 1 — each row's own source in helpers/data/gpu_onchip.csv"))
    return


if __name__ == "__main__":
    app.run()
