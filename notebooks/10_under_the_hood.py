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
    import torch

    from helpers.formulas import compute_share, flash, state_space, verdicts
    from helpers.formulas.gpus import get_gpu
    from helpers.measure import attention_kernels, forward_parts, hierarchy, microbench, models, state_space_toys
    from helpers.present import (compute_share_figures, expected, flash_figures, hierarchy_figures, notebook, plots,
                                 replay, state_space_figures)
    from helpers.present.glossary import term
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 10 · Under the hood: where the compute goes, the memory hierarchy, FlashAttention, and attention beyond the KV cache

    The foundations in depth, after notebook 03.

    **What you will learn**

    1. where a forward pass spends its FLOPs and its time — text → tokens → embeddings → layers → head →
       next token — and where the talk's "about 95 % of compute is in the transformer layers" holds and
       where it stops holding;
    2. the memory hierarchy: a GPU's large, slow {term("HBM")} against its small,
       fast on-chip {term("shared memory")}, and the same staircase measured on this machine's CPU caches;
    3. {term("FlashAttention")} as a mechanism: attention in tiles with running softmax statistics, equal to
       standard attention, and the bytes it does not move;
    4. what replaces a growing {term("KV cache")}: {term("sparse attention")},
       {term("linear attention")} and {term("state-space models", "state-space-model")} (Mamba), with the
       bytes each carries per sequence.

    {run_times.header("10")}

    After each measurement, **What you should see** says what this run's numbers show, by a rule from the
    numbers above it, then what a GPU shows, each GPU sentence labelled computed, cited or recorded.
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

    A forward pass turns token ids into vectors (the **embedding**: a table lookup, no arithmetic),
    runs them through the **layers** (attention: four projections plus the products with every cached
    key and value; then the MLP), and multiplies the last vector by the **head** to get one score per
    vocabulary entry. The FLOPs of each part come from `helpers.formulas.compute_share` — 2 per weight a token
    meets, plus attention's context products ([arithmetic intensity](../workshop/glossary.md#arithmetic-intensity)
    needs exactly these counts). Computed for Mistral 7B first, across prompt lengths.
    """)
    return


@app.cell
def _():
    mistral_now = compute_share.share_sweep(["mistral-7b-v0.1"], [512, 4096])
    _table = compute_share_figures.shares_frame(mistral_now)
    plots.table(_table, "computed from mistral-7b-v0.1 config.json (helpers.formulas.stepcost FLOPs)",
                formats={c: "{:.2%}" for c in _table.columns if c not in ("phase", "tokens")})
    return (mistral_now,)


@app.cell
def _(loaded):
    _lengths = [2**k for k in range(6, 19)]
    _models = ["mistral-7b-v0.1", "mistral-7b-v0.3"] + ([loaded.spec] if loaded.profile == "tiny" else [])
    _sweep = compute_share.share_sweep(_models, _lengths)
    compute_share_figures.share_figure(_sweep, "computed (helpers.formulas.stepcost FLOPs): Mistral 7B v0.1 and v0.3 "
                                       "configs, and " + loaded.spec.name)
    return


@app.cell(hide_code=True)
def _(loaded, mistral_now):
    _decode_4k = next(r.terms.layer_share for r in mistral_now if r.phase == "decode" and r.tokens == 4096)
    _terms = compute_share.flop_terms(loaded.spec, 1, 0)
    _x_pre = compute_share.attention_crossover("mistral-7b-v0.3", "prefill")
    _x_dec = compute_share.attention_crossover("mistral-7b-v0.3", "decode")
    _v01 = compute_share.attention_crossover("mistral-7b-v0.1", "prefill")
    _sp = loaded.spec
    mo.md(f"""
    **The talk's 95 %**: {compute_share.against_talk(_decode_4k, "one Mistral 7B decode step at 4,096 tokens")}; the
    head (4,096 × 32,000 weights) is the rest. The same count: {compute_share.against_talk(_terms.layer_share, f"**{_sp.name}** (one decode step)")}:
    a {_sp.hidden_size:,}-wide model with a {_sp.vocab_size:,}-word vocabulary spends
    {verdicts.share(_terms.head, _terms.total, "its arithmetic")} in the head.

    **Long contexts**: attention over the context grows with every token while the linear layers do not.
    Without a window (Mistral 7B v0.3) it costs as much as all linear layers together from a
    **{_x_pre:,}-token prompt** in a prefill and from a **{_x_dec:,}-token context** in one decode step.
    Mistral 7B v0.1's 4,096-token window caps it: {"never, at any length" if _v01 is None else f"from {_v01:,} tokens"}.
    """)
    return


@app.function
def parts_measured(loaded) -> dict:
    """The forward pass timed part by part (forward_parts.measure_parts) for a prefill and one decode step at
    the same context — 2,048 tokens on a GPU, 256 on a CPU — with the evaluation text as input."""
    from pathlib import Path

    import helpers

    text = (Path(helpers.__file__).parent / "data" / "eval_text.txt").read_text()
    tokens = 2048 if loaded.device.startswith("cuda") else 256
    return {"tokens": tokens, **{phase: forward_parts.measure_parts(loaded, text, tokens, phase, repeats=5)
                                 for phase in ("prefill", "decode")}}


@app.function
def staircase_measured() -> dict:
    """This machine's data caches (as the operating system reports them) and the read bandwidth of one core
    against the working set (hierarchy.staircase): a recording carries the caches of the machine it ran on."""
    caches = hierarchy.data_caches()
    stairs = hierarchy.staircase(hierarchy.staircase_sizes(caches), repeats=3, bytes_per_sample=64 * 2**20,
                                 levels=caches)
    return {"caches": caches, "stairs": stairs}


@app.cell(hide_code=True)
def _():
    parts_button = replay.run_button()
    mo.vstack([mo.md("""
    ### Measured on this profile: time per part

    The same pipeline on the loaded model, timed: the tokenizer, then one forward pass with a hook
    around the embedding, every layer's attention and MLP and the head (the device synchronised at each
    boundary), then the greedy pick of the next token. Median of 5 runs after a warm-up, on one thread
    on a CPU (steady when other programs share the machine). Left: a prefill; right: one decode step at
    the same context.
    """), parts_button])
    return (parts_button,)


@app.cell
def _(loaded, parts_button):
    parts_run = replay.measure("10/parts", models.run_on, loaded, parts_measured, run=parts_button.value,
                               profile=loaded.profile, device=loaded.device)
    parts_on, _measured = parts_run.value
    part_tokens = _measured["tokens"]
    parts_source = plots.source_label(parts_run.source(parts_on))
    parts = {_phase: forward_parts.compare_parts(parts_on.spec, _measured[_phase], _phase, part_tokens)
             for _phase in ("prefill", "decode")}
    parts_table = compute_share_figures.parts_frame(list(parts.values()))
    plots.table(parts_table, f"{parts_source}; {part_tokens} tokens; FLOPs computed",
                formats={"FLOP share": "{:.1%}", "time share": "{:.1%}"})
    return part_tokens, parts, parts_on, parts_run, parts_source, parts_table


@app.cell(hide_code=True)
def _(parts_run):
    parts_run.note()
    return


@app.cell
def _(part_tokens, parts_source, parts_table):
    compute_share_figures.parts_figure(parts_table, part_tokens, parts_source)
    return


@app.cell(hide_code=True)
def _(parts, parts_on):
    _here = [v for _phase in ("decode", "prefill") for v in forward_parts.parts_verdicts(parts[_phase])]
    _m = compute_share.flop_terms("mistral-7b-v0.1", 1, 2048)
    _b = compute_share.byte_terms("mistral-7b-v0.1", 2048)
    _gpu = [expected.computed(
        f"one Mistral 7B v0.1 decode step at 2,048 tokens: the layers take {_m.layer_share:.1%} of the FLOPs, the "
        f"head {_m.head / _m.total:.1%}; of the {_b.total / 1e9:,.1f} GB it reads (bf16), attention's weights and KV "
        f"cache are {_b.attention / _b.total:.0%}, the MLP's {_b.mlp / _b.total:.0%}, the head's {_b.head / _b.total:.0%} "
        "— the shares its time would take where reading them bounds it (batch 1: notebook 03)",
        "helpers.formulas.compute_share.flop_terms and byte_terms (helpers.formulas.stepcost)")]
    mo.vstack([mo.md(f"""
    Each operation of a forward pass pays a fixed cost (dispatch, Python) besides its arithmetic and its
    bytes; where the operations are small, that cost is a share of the time the FLOPs do not show.
    This run is on {"a GPU" if parts_on.device.startswith("cuda") else "a CPU"}.
    """), expected.should_see(_here, _gpu)])
    return


@app.cell(hide_code=True)
def _():
    _h = next(g for g in hierarchy.gpu_hierarchy() if g.gpu == "H100 SXM")
    mo.md(f"""
    ## 2 · The memory hierarchy

    Every processor keeps a small memory next to its arithmetic and a large one further away. On a GPU:
    **HBM** (an H100 SXM: {_h.hbm_bytes / 1e9:,.0f} GB on its label, at {_h.hbm_bandwidth / 1e12:,.2f} TB/s) and, in each
    streaming multiprocessor (SM), **shared memory** / L1 (the H100's: {_h.smem_per_sm_bytes // 1024} KiB per SM,
    {_h.onchip_bandwidth / 1e12:,.0f} TB/s for the whole chip). Decode streams the weights and the cache
    from HBM every step, so HBM bandwidth sets its ceiling (notebook 03); a kernel that reuses data from
    shared memory escapes that ceiling. The catalog's GPUs, every figure with its source
    (`helpers/data/gpu_onchip.csv`; empty where no source was found):
    """)
    return


@app.cell
def _():
    gpu_levels = hierarchy.gpu_hierarchy()
    plots.table(hierarchy_figures.gpu_levels_frame(gpu_levels),
                "datasheets, architecture whitepapers and tuning guides, papers (see the sources below)")
    return (gpu_levels,)


@app.cell(hide_code=True)
def _(gpu_levels):
    _h = next(g for g in gpu_levels if g.gpu == "H100 SXM")
    mo.md(f"""
    On an H100 SXM the shared memory of all {_h.sms} SMs together is **{_h.smem_total_bytes / 2**20:.1f} MiB**
    — HBM holds **{verdicts.times_as(_h.hbm_bytes, _h.smem_total_bytes, "that")}** — and it streams at
    **{verdicts.times_as(_h.onchip_bandwidth, _h.hbm_bandwidth, "HBM's bandwidth")}** ({_h.onchip_bandwidth / 1e12:,.0f} TB/s
    against {_h.hbm_bandwidth / 1e12:,.2f} TB/s, FlashAttention-3's Table 1). An algorithm that keeps its working
    set on chip is bounded by the on-chip bandwidth, not by HBM's.

    Sources: {"; ".join(sorted({g.bandwidth_source for g in gpu_levels} - {"none published"}))}.
    """)
    return


@app.cell(hide_code=True)
def _():
    stairs_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ### The same staircase, measured on this machine's CPU

    A CPU has the same structure: L1, L2 and L3 caches on the chip, DRAM off it. The cache sizes come
    from the operating system; the bandwidth is measured by re-reading a buffer of growing size (one
    core, best of repeats), up to {microbench.PAST_LAST_CACHE}× the last-level cache (at most
    {microbench.SHARE_OF_FREE:.0%} of the memory free): while the buffer fits a cache level, every pass reads
    from that level. The levels below are found on the measured curve — a step wherever the bandwidth falls
    by more than {verdicts.CHANGE_MARGIN:.0%} from one size to the next — and
    then held against the sizes the system reports. On a GPU machine this section measures the host CPU; the
    GPU's own levels are the datasheet figures above.
    """), stairs_button])
    return (stairs_button,)


@app.cell
def _(loaded, stairs_button):
    stairs_run = replay.measure("10/staircase", staircase_measured, run=stairs_button.value, profile=loaded.profile,
                                device=loaded.device)
    caches = stairs_run.value["caches"]
    plots.table(hierarchy_figures.caches_frame(caches),
                stairs_run.source("this machine's data caches, as the operating system reports them (/sys/devices/system/cpu)"))
    return caches, stairs_run


@app.cell(hide_code=True)
def _(stairs_run):
    stairs_run.note()
    return


@app.cell
def _(caches, loaded, stairs_run):
    stairs = stairs_run.value["stairs"]
    hierarchy_figures.staircase_figure(stairs, caches, stairs_run.source(
        "measured: read bandwidth, one CPU core, float32 sum, " + loaded.label.split(" · ")[-2] + " host"))
    return (stairs,)


@app.cell
def _(caches, stairs):
    steps, _ = hierarchy.levels_found(stairs, caches)
    plots.table(hierarchy_figures.levels_frame(steps),
                "measured: the levels found on the curve, median read bandwidth, one CPU core")
    return (steps,)


@app.cell(hide_code=True)
def _(caches, stairs):
    mo.vstack([expected.should_see(hierarchy.staircase_verdicts(stairs, caches)), mo.md("""
    The first level's rate over the last one's is why tiling pays: a computation that loads a tile once and
    reuses it from a fast level runs at that level's speed. Timings move when other programs share the
    machine (a shared L3 serves them too).
    """)])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 3 · FlashAttention as a mechanism

    Standard attention writes the N×N score matrix S to HBM, reads it back for the softmax, writes the
    probabilities P, reads them back to multiply by V. FlashAttention never forms S or P: it takes a
    block of queries, streams the keys and values past it block by block, and keeps, per query, the
    running maximum *m* and running sum ℓ of the softmax. When a new block raises the maximum, the
    partial sum and output are rescaled by exp(m_old − m_new) — the **online softmax** — so the result
    is exact. Here it is, short enough to read (`helpers.measure.attention_kernels.tiled_attention`):
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
        _rows.append({"tokens": _n, "causal": _causal, "blocks": "64 × 64",
                      "max |tiled − SDPA|": float((attention_kernels.tiled_attention(_q, _k, _v, _causal) - _ref).abs().max())})
    equal = pd.DataFrame(_rows)
    mo.vstack([plots.table(equal, "measured: fp32 · cpu, 8 heads × 32 dims, random inputs",
                           formats={"max |tiled − SDPA|": "{:.1e}"}),
        mo.md(f"Against PyTorch's `scaled_dot_product_attention`: "
              f"{attention_kernels.equality_verdict(equal['max |tiled − SDPA|'])} (`tests/test_flash.py` checks "
              "more shapes, causal and not, GQA and bf16).")])
    return


@app.cell(hide_code=True)
def _(gpu_levels):
    _gpus = [g.gpu for g in gpu_levels if g.smem_per_sm_bytes]
    hbm_gpu = mo.ui.dropdown(options=_gpus, value=notebook.env_default("WORKSHOP_FLASH_GPU", "H100 SXM", _gpus), label="GPU")
    hbm_head_dim = mo.ui.dropdown(options=["64", "128", "256"], value=str(notebook.env_default(
        "WORKSHOP_FLASH_HEAD_DIM", 128, [64, 128, 256])), label="head size d")
    mo.vstack([mo.md("""
    ### The bytes each moves to and from HBM

    Counted for one layer of Mistral 7B's width (4,096 = heads × head size; bf16, causal), with the block size
    FlashAttention's Algorithm 1 picks for a GPU's shared memory per SM: with **M** the on-chip memory in
    elements (shared memory ÷ bytes per element), B_c = ⌈M / 4d⌉ and B_r = min(B_c, d). Standard: 4·N·d + 4·N²
    elements per head (read Q, K; write S; read S; write P; read P, V; write O). Tiled: Q read once, O written
    once, each K/V block read once per query block that needs it — an **upper bound** on its HBM traffic: it
    assumes every K/V block comes from HBM each time, while a real kernel finds some of them still in the L2
    cache. Pick the GPU and the head size (computed, `helpers.formulas.flash`):
    """), mo.hstack([hbm_gpu, hbm_head_dim], justify="start"),
               notebook.static_note({"WORKSHOP_FLASH_GPU": "the GPU (" + ", ".join(_gpus) + ")",
                                     "WORKSHOP_FLASH_HEAD_DIM": "the head size (64, 128 or 256)"})])
    return hbm_gpu, hbm_head_dim


@app.cell
def _(gpu_levels, hbm_gpu, hbm_head_dim):
    hbm_d = int(hbm_head_dim.value)
    hbm_smem = next(g for g in gpu_levels if g.gpu == hbm_gpu.value).smem_per_sm_bytes
    block_r, block_c = flash.paper_block_sizes(hbm_smem, hbm_d, "bf16")
    hbm_shape = flash.AttentionShape(batch=1, heads=4096 // hbm_d, head_dim=hbm_d, dtype="bf16")
    hbm = flash.hbm_bytes_table(hbm_shape, [2**k for k in range(9, 18)], block_r, block_c, causal=True)
    flash_figures.hbm_figure(hbm, block_r, block_c, f"computed: {hbm_shape.heads} heads × {hbm_d} (Mistral 7B's width), "
                                                    f"bf16, causal; {hbm_gpu.value} block size")
    return block_c, block_r, hbm, hbm_d, hbm_smem


@app.cell(hide_code=True)
def _(block_c, block_r, hbm, hbm_d, hbm_gpu, hbm_smem):
    _last = hbm[-1]
    _limit = flash.traffic_ratio_limit(block_r, hbm_d, causal=True)
    _m = hbm_smem // 2
    mo.md(f"""
    At **{_last.tokens:,} tokens** the standard algorithm moves **{_last.standard_bytes / 1e9:,.0f} GB** per
    layer to and from HBM and must hold an N×N matrix of **{_last.nxn_bytes / 1e9:,.0f} GB**;
    the tiled one moves at most **{_last.tiled_bytes / 1e9:,.1f} GB**
    ({verdicts.speed(_last.tiled_bytes, _last.standard_bytes, "less", "more", "as much")}) and holds
    no N×N matrix at all. Both grow as N²: the standard moves 4·N² elements of S and P per head, the tiled one
    reads K and V once per query block, about d·N²/B_r elements causal (half of 2·d·N²/B_r: each block visits only
    the keys before it). So the ratio tends to **4·B_r/d = 4 × {block_r} / {hbm_d} = {_limit:g}×** — not to the
    block's {block_r} rows (with B_r = M/4d, d·N²/B_r = 4·N²·d²/M). In the paper's terms FlashAttention moves
    Θ(N²d²/M) elements against standard attention's Θ(N·d + N²), with M the on-chip memory in elements — here
    {hbm_smem // 1024} KiB per SM on the {hbm_gpu.value}, M = {_m:,} bf16 elements, hence tiles of {block_r} × {block_c}.
    More on-chip memory means larger tiles and fewer passes over K and V, until B_r reaches d.
    """)
    return


@app.cell(hide_code=True)
def _():
    attention_button = replay.run_button()
    mo.vstack([mo.md("""
    ### Timed here: naive against PyTorch's fused attention

    `naive_attention` materialises S and P; `torch.nn.functional.scaled_dot_product_attention` picks a
    fused kernel (a FlashAttention kernel on recent GPUs, a tiled CPU kernel on a CPU). Median of 3 runs
    (one thread on a CPU);
    the readable `tiled_attention` (Python loops) is timed on the short lengths only — it shows the
    mechanism, not the speed. Running out of memory ends the sweep as a result.
    """), attention_button])
    return (attention_button,)


@app.function
def attention_times(loaded) -> dict:
    """Naive against fused attention timed on the loaded model's device (attention_kernels.time_attention): Mistral's
    32 × 128 heads in bf16 on a GPU; 8 × 32 in the model's dtype on a CPU, the readable tiled version on the
    short lengths there."""
    gpu = loaded.device.startswith("cuda")
    shape = (flash.AttentionShape(batch=1, heads=32, head_dim=128, dtype="bf16") if gpu
             else flash.AttentionShape(1, 8, 32, loaded.dtype))
    lengths = [1024 * 2**k for k in range(6)] if gpu else [256, 512, 1024, 2048]
    frame = attention_kernels.time_attention(lengths, shape, loaded.device, causal=True, repeats=3, tiled_up_to=0 if gpu else 512).frame()
    return {"shape": shape, "times": frame, "gpu": gpu}


@app.cell
def _(attention_button, loaded):
    attn_run = replay.measure("10/attention_times", models.run_on, loaded, attention_times, run=attention_button.value,
                              profile=loaded.profile, device=loaded.device)
    attn_on, _measured = attn_run.value
    attn_times, timing_shape = _measured["times"], _measured["shape"]
    flash_figures.timing_figure(attn_times, attn_run.source(
        f"measured: {timing_shape.heads} heads × {timing_shape.head_dim}, {timing_shape.dtype}, causal · {attn_on.device}"
        f"{'' if _measured['gpu'] else ', one thread'} · profile {attn_on.profile}"))
    return attn_run, attn_times, timing_shape


@app.cell(hide_code=True)
def _(attn_run):
    attn_run.note()
    return


@app.cell
def _(attn_times, timing_shape):
    plots.table(attn_times[~attn_times["oom"]].drop(columns=["oom"]),
                f"measured: {timing_shape.heads} heads × {timing_shape.head_dim}, {timing_shape.dtype}, causal", precision=4)
    return


@app.cell(hide_code=True)
def _(attn_times):
    _mistral = flash.AttentionShape(batch=1, heads=32, head_dim=128, dtype="bf16")
    _h100 = get_gpu("H100 SXM")
    _r, _c = flash.paper_block_sizes(228 * 1024, 128, "bf16")
    _at = flash.hbm_bytes_table(_mistral, [16384, 32768], _r, _c, causal=True)
    _nxn_32k = 2 * _at[1].nxn_bytes
    _gpu = [expected.computed(
        f"Mistral's 32 × 128 heads in bf16 at 16,384 tokens, one layer: standard attention moves "
        f"{_at[0].standard_bytes / 1e9:,.0f} GB to and from HBM, the tiled one at most {_at[0].tiled_bytes / 1e9:,.1f} GB "
        f"({verdicts.speed(_at[0].tiled_bytes, _at[0].standard_bytes, 'less', 'more', 'as much')}, H100 SXM tiles "
        f"{_r} × {_c}); S and P at 32,768 tokens take {_nxn_32k / 1e9:,.0f} GB, "
        f"{verdicts.times_as(_nxn_32k, _h100.usable_memory_bytes, f'the {_h100.usable_memory_bytes / 1e9:,.2f} GB an H100 SXM reports to CUDA')} "
        f"(labelled {_h100.memory_gb:g} GB)", "helpers.formulas.flash.hbm_bytes_table, the GPU catalog")]
    expected.should_see(attention_kernels.timing_verdicts(attn_times), _gpu)
    return


@app.cell(hide_code=True)
def _():
    _keeps = [16, 64, 256, 1024]
    sparse_keep = mo.ui.dropdown(options=[str(k) for k in _keeps], value=str(notebook.env_default(
        "WORKSHOP_SPARSE_KEEP", 256, _keeps)), label="keys kept (k)")
    mo.vstack([mo.md("""
    ## 4 · Beyond the KV cache

    Notebook 06 showed caches that share heads (GQA, MQA), compress (MLA) or forget (sliding window).
    Three more ideas change what attention keeps per sequence.

    ### Sparse attention: attend to chosen tokens

    Each query attends to *k* of the *N* cached keys: the top-*k* scores (dynamic), or a fixed pattern —
    the first few "sink" tokens plus a recent window (StreamingLLM). It **saves** the products with the
    keys left out (and, for a fixed pattern, the cache of the tokens it will never attend to again). It
    **risks** the keys it leaves out. One decode query against 4,096 keys, as many kept as you pick:
    """), sparse_keep, notebook.static_note({"WORKSHOP_SPARSE_KEEP": "keys kept (" + ", ".join(map(str, _keeps)) + ")"})])
    return (sparse_keep,)


@app.cell
def _(sparse_keep):
    sparse = state_space_toys.sparse_attention_demo(context=4096, head_dim=64, keep=int(sparse_keep.value), sinks=4,
                                                    needle_at=1000)
    plots.table(state_space_figures.sparse_frame(sparse), "measured: random keys/values, 64 dims, fp32 · cpu; 32 queries averaged",
                formats={"share of keys": "{:.1%}", "dense softmax mass kept": "{:.1%}", "output error (÷ ‖v‖)": "{:.3f}"})
    return (sparse,)


@app.cell(hide_code=True)
def _(sparse):
    _save = state_space.sparse_decode_saving("mistral-7b-v0.3", 131072, 2048)
    _jamba = state_space.ssm_shape("jamba-1.5-mini")
    _n_jamba = len(_jamba.attention_layers) + len(_jamba.mamba_layers)
    mo.vstack([expected.should_see(state_space_toys.sparse_verdicts(sparse)), mo.md(f"""
    A **needle** is one early key that matches the query (a fact stated once, far back); **diffuse** attention
    spreads over random keys. This demo runs on the CPU on any machine. Top-*k* still has to score every key to
    choose (unless a cheaper index picks them, as DeepSeek's sparse attention does), and keeps the whole cache.

    What it saves at scale: one decode step of Mistral 7B v0.3 at {_save.context:,} tokens spends
    {_save.attention_share:.0%} of its FLOPs on attention over the context; attending to
    {_save.keep:,} chosen keys instead would cut the step's FLOPs by **{_save.flops_saved:.0%}**
    (computed with `helpers.formulas.compute_share`; choosing the keys is not counted).

    ### Linear attention and state-space models: a fixed-size state

    Replace the softmax by a feature map φ and causal attention becomes a recurrence: a state
    S = Σ φ(k)vᵀ of d × d numbers (plus a normaliser) is updated per token, and the output is read from
    it. The parallel form (all tokens at once, for prefill) and the recurrent form (one token at a time,
    for decode) give the same result; the state never grows. Mamba carries a different state — per layer
    a d_inner × d_state SSM state and a short convolution window — fixed in size too. Jamba 1.5 Mini keeps a KV
    cache in {len(_jamba.attention_layers)} of its {_n_jamba} layers and Mamba states in the other
    {len(_jamba.mamba_layers)}.
    """)])
    return


@app.function
def state_checks() -> dict:
    """Toy Mamba and Jamba (random weights) run through transformers, their caches against the formula
    (state_space_toys.measure_toy_states); linear attention's recurrent form against its parallel form, 512 tokens
    (state_space_toys.check_linear_attention)."""
    return {"toy_states": state_space_toys.measure_toy_states("falcon_mamba", (8, 64, 256))
            + state_space_toys.measure_toy_states("jamba", (8, 64, 256)),
            "linear_check": state_space_toys.check_linear_attention(512)}


@app.cell(hide_code=True)
def _():
    states_button = replay.run_button("Run live: the toy state checks")
    states_button
    return (states_button,)


@app.cell
def _(loaded, states_button):
    states_run = replay.measure("10/state_checks", state_checks, run=states_button.value, profile=loaded.profile,
                                device=loaded.device)
    toy_states, linear_check = states_run.value["toy_states"], states_run.value["linear_check"]
    plots.table(state_space_figures.toy_states_frame(toy_states), states_run.source("measured: toy Mamba and Jamba (random weights) · fp32 · cpu") +
                                 f", transformers' cache against the formula; linear attention, {linear_check.tokens} tokens: "
                                 f"max |recurrent − parallel| {linear_check.max_difference:.1e}, state per head "
                                 f"{linear_check.state_elements_per_head:,} elements")
    return linear_check, states_run, toy_states


@app.cell(hide_code=True)
def _(states_run):
    states_run.note()
    return


@app.cell
def _():
    _contexts = [2**k for k in range(8, 19)]
    per_sequence = pd.DataFrame(state_space.state_vs_kv(contexts=_contexts))
    state_space_figures.state_figure(per_sequence.to_dict("records"), state_space.linear_attention_state_bytes(32, 8, 128, 128),
                                     "computed from published config.json files (presets/SOURCES.md), bf16 states and caches")
    return (per_sequence,)


@app.cell(hide_code=True)
def _(linear_check, per_sequence, toy_states):
    _b = per_sequence.pivot(index="tokens", columns="model", values="bytes")
    _n = int(_b.index.max())
    _mamba = state_space.ssm_state_bytes("falcon-mamba-7b")
    _lin = state_space.linear_attention_state_bytes(32, 8, 128, 128)
    _jamba = state_space.ssm_shape("jamba-1.5-mini")
    mo.vstack([mo.md(f"""
    At **{_n:,} tokens** one sequence carries **{_b.loc[_n, 'mistral-7b-v0.3'] / 2**30:,.0f} GiB** of KV cache in
    Mistral 7B v0.3, **{_b.loc[_n, 'mistral-7b-v0.1'] / 2**30:,.1f} GiB** in v0.1 (a 4,096-token window on every
    layer), **{_b.loc[_n, 'jamba-1.5-mini'] / 2**30:,.2f} GiB** in Jamba 1.5 Mini ({len(_jamba.attention_layers)}
    attention layers) and **{_mamba / 1e6:,.1f} MB** in Falcon Mamba 7B: Mistral's cache passes Falcon Mamba's
    state at {state_space.break_even_tokens(_mamba):,.0f} tokens. A Mistral-shaped linear attention would carry
    {_lin / 1e6:,.1f} MB, the KV of {state_space.break_even_tokens(_lin):,.1f} tokens.

    What the fixed state costs: everything the model will ever recall must fit in it — a fact seen once, far
    back, survives only as what the state kept of it. Jamba keeps a KV cache, which holds every token, in
    {len(_jamba.attention_layers)} of its {len(_jamba.attention_layers) + len(_jamba.mamba_layers)} layers.
    """), expected.should_see([*state_space.state_verdicts(per_sequence.to_dict("records")),
                               *state_space_toys.toy_verdicts(toy_states, linear_check)])])
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
    _h100 = flash.paper_block_sizes(228 * 1024, 128, "bf16")
    _kv = lambda b: flash.tiled_hbm_elements(32768, 128, b[0], b[1], True).total  # noqa: E731
    _jamba4k = state_space.sequence_state_bytes("jamba-1.5-mini", 4096)
    _fixed = state_space.ssm_state_bytes("jamba-1.5-mini")
    _jamba_tok = state_space.sequence_state_bytes("jamba-1.5-mini", 2) - state_space.sequence_state_bytes("jamba-1.5-mini", 1)
    _mistral_tok = state_space.sequence_state_bytes("mistral-7b-v0.3", 1)
    _per_tok_gap = _mistral_tok - _jamba_tok
    mo.vstack([
        notebook.exercise(1, """**The head's share.** Llama 3.1 8B has a 128,256-word vocabulary. Predict whether the
        layers take more or less than 95 % of a decode step's FLOPs, then check with
        `helpers.formulas.compute_share.layer_share("llama-3.1-8b", 1, 4096)`.""", f"""Llama's head is 4,096 × 128,256 weights — {128256 / 32000:.2f}× Mistral's 4,096 × 32,000 —
        and {compute_share.against_talk(_llama, "a decode step at 4,096 tokens")}."""),
        notebook.exercise(2, """**Tiles and shared memory.** With `helpers.formulas.flash.paper_block_sizes`, find the block size
        on an A100 (164 KiB per SM) and an RTX 4090 (100 KiB) for head_dim 128 in bf16, and how many times more K/V
        bytes the 4090's tiles move than the H100's at 32k tokens (`tiled_hbm_elements`).""", f"""A100: B_r × B_c = {_a100[0]} × {_a100[1]}; RTX 4090: {_rtx[0]} × {_rtx[1]}; H100: {_h100[0]} × {_h100[1]}.
        B_r = min(⌈M / 4d⌉, d): once the memory allows d query rows, more of it no longer shortens the K/V passes.
        At 32k tokens the 4090's tiles move {_kv(_rtx):,} elements per head against the H100's {_kv(_h100):,}
        ({_kv(_rtx) / _kv(_h100):.2f}×). Real kernels spend the extra memory on pipelining instead (loading the
        next tile while computing this one)."""),
        notebook.exercise(3, f"""**Break-even.** At what context does Jamba 1.5 Mini's whole per-sequence state equal
        Mistral 7B v0.3's KV cache? (`state_space.sequence_state_bytes` for both, or reason with {_mistral_tok:,} B per
        token.)""", f"""Jamba carries a fixed {_fixed:,} B of Mamba state plus {_jamba_tok:,} B per token (4 attention
        layers); Mistral v0.3 carries {_mistral_tok:,} B per token. Equal where {_fixed:,} = ({_mistral_tok:,} − {_jamba_tok:,}) × n:
        **n ≈ {_fixed / _per_tok_gap:,.0f} tokens**. (At 4,096 tokens Jamba carries {_jamba4k / 2**20:,.1f} MiB.)"""),
    ])
    return


@app.cell(hide_code=True)
def _(gpu_levels, loaded, steps):
    _mistral = compute_share.layer_share("mistral-7b-v0.1", 1, 4095)
    _here = compute_share.flop_terms(loaded.spec, 1, 0)
    _h = next(g for g in gpu_levels if g.gpu == "H100 SXM")
    _top, _bottom = steps[0], steps[-1]
    _x_dec = compute_share.attention_crossover("mistral-7b-v0.3", "decode")
    _r, _ = flash.paper_block_sizes(228 * 1024, 128, "bf16")
    mo.md(f"""
    ## Takeaways

    - A forward pass's FLOPs are a formula of the shape: the layers take {_mistral:.1%} of a Mistral 7B decode
      step at 4k tokens, and {verdicts.share(_here.layers, _here.total)} of {loaded.spec.name}'s; without a
      window, attention over the context costs as much as the linear layers from a {_x_dec:,}-token context
      (Mistral 7B v0.3, one decode step).
    - Memory comes in levels: small and fast on chip, large and slow off it. Measured here, the first level found
      read at {verdicts.times_as(_top.median_bandwidth, _bottom.median_bandwidth, "the last")}
      ({_top.median_bandwidth / 1e9:,.0f} against {_bottom.median_bandwidth / 1e9:,.1f} GB/s); on an H100 SXM
      shared memory streams at {verdicts.times_as(_h.onchip_bandwidth, _h.hbm_bandwidth, "HBM's bandwidth")},
      and HBM holds {verdicts.times_as(_h.hbm_bytes, _h.smem_total_bytes, "its bytes")}.
    - FlashAttention computes exact attention tile by tile with the online softmax: the N×N matrix never
      goes to HBM; its traffic is still Θ(N²) but smaller by 4·B_r/d
      ({flash.traffic_ratio_limit(_r, 128, causal=True):g}× for Mistral's heads on an H100, an upper bound that
      ignores L2 reuse), and the memory it holds drops from N² to N.
    - A KV cache grows with the context; a sparse pattern, a linear-attention state or a Mamba state does
      not — at the price of what the model can recall. Hybrids keep some attention layers for that.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
