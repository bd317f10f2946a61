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


@app.cell
def _():
    import inspect
    import time

    import marimo as mo
    import pandas as pd
    import torch

    from helpers import compute_share, flash, hierarchy, models, notebook, plots, state_space
    from helpers.glossary import term

    notebook.setup()
    started = time.perf_counter()
    return (compute_share, flash, hierarchy, inspect, mo, models, notebook, pd, plots, started, state_space, term,
            torch)


@app.cell
def _(mo, term):
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

    **Run time**: about 40 s on a laptop CPU (tiny profile); about 1–2 min on a GPU with Mistral 7B.
    """)
    return


@app.cell
def _(models):
    loaded = models.load()
    label = loaded.label
    on_gpu = loaded.device.startswith("cuda")
    return label, loaded, on_gpu


@app.cell
def _(mo):
    mo.md("""
    ## 1 · Where the compute goes

    A forward pass turns token ids into vectors (the **embedding**: a table lookup, no arithmetic),
    runs them through the **layers** (attention: four projections plus the products with every cached
    key and value; then the MLP), and multiplies the last vector by the **head** to get one score per
    vocabulary entry. The FLOPs of each part come from `helpers.roofline` — 2 per weight a token
    meets, plus attention's context products ([arithmetic intensity](../workshop/glossary.md#arithmetic-intensity)
    needs exactly these counts). Computed for Mistral 7B first, across prompt lengths.
    """)
    return


@app.cell
def _(compute_share, pd):
    mistral_now = pd.DataFrame(
        [{"phase": p, "tokens": n, **{r["part"]: r["share"] for r in compute_share.compute_shares("mistral-7b-v0.1", *compute_share.phase_args(p, n))}}
         for p, n in (("prefill", 512), ("prefill", 4096), ("decode", 512), ("decode", 4096))])
    mistral_now.attrs["source"] = "computed from mistral-7b-v0.1 config.json (helpers.roofline FLOPs)"
    mistral_now.style.format({c: "{:.2%}" for c in mistral_now.columns if c not in ("phase", "tokens")}).set_caption(
        mistral_now.attrs["source"])
    return (mistral_now,)


@app.cell
def _(compute_share, loaded, pd):
    _lengths = [2**k for k in range(6, 19)]
    _models = ["mistral-7b-v0.1", "mistral-7b-v0.3"] + ([loaded.spec] if loaded.profile == "tiny" else [])
    sweep = pd.DataFrame(compute_share.share_sweep(_models, _lengths))
    compute_share.share_figure(sweep, "computed (helpers.roofline FLOPs): Mistral 7B v0.1 and v0.3 configs, and "
                               + loaded.spec.name)
    return (sweep,)


@app.cell
def _(compute_share, loaded, mistral_now, mo):
    _decode_4k = float(mistral_now.query("phase == 'decode' and tokens == 4096")[
        [c for c in mistral_now.columns if c.startswith("layers")]].sum(axis=1).iloc[0])
    _tiny = compute_share.layer_share(loaded.spec, 1, 0)
    _x_pre = compute_share.attention_crossover("mistral-7b-v0.3", "prefill")
    _x_dec = compute_share.attention_crossover("mistral-7b-v0.3", "decode")
    _v01 = compute_share.attention_crossover("mistral-7b-v0.1", "prefill")
    _holds = lambda s: "holds" if s >= compute_share.TALK_LAYER_SHARE else "does not hold"  # noqa: E731
    mo.md(f"""
    **The talk's 95 %**: for one Mistral 7B decode step at 4,096 tokens the layers take
    **{_decode_4k:.1%}** of the FLOPs — the claim {_holds(_decode_4k)}; the head (4,096 × 32,000 weights) is the rest.
    For **{loaded.spec.name}** (one decode step) the layers take **{_tiny:.1%}** — the claim {_holds(_tiny)}:
    a 256-wide model with a 32,000-word vocabulary spends most of its arithmetic in the head.

    **Long contexts**: attention over the context grows with every token while the linear layers do not.
    Without a window (Mistral 7B v0.3) it costs as much as all linear layers together from a
    **{_x_pre:,}-token prompt** in a prefill and from a **{_x_dec:,}-token context** in one decode step.
    Mistral 7B v0.1's 4,096-token window caps it: {"never, at any length" if _v01 is None else f"from {_v01:,} tokens"}.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ### Measured on this profile: time per part

    The same pipeline on the loaded model, timed: the tokenizer, then one forward pass with a hook
    around the embedding, every layer's attention and MLP and the head (the device synchronised at each
    boundary), then the greedy pick of the next token. Median of 5 runs after a warm-up, on one thread
    on a CPU (steady when other programs share the machine). Left: a prefill; right: one decode step at
    the same context.
    """)
    return


@app.cell
def _(compute_share, loaded, on_gpu, pd):
    from pathlib import Path as _Path

    import helpers as _helpers

    text = (_Path(_helpers.__file__).parent / "data" / "eval_text.txt").read_text()
    part_tokens = 2048 if on_gpu else 256
    parts = {}
    for _phase in ("prefill", "decode"):
        _time = compute_share.measure_parts(loaded, text, part_tokens, _phase, repeats=5)
        _flops = compute_share.compute_shares(loaded.spec, *compute_share.phase_args(_phase, part_tokens))
        parts[_phase] = pd.DataFrame(compute_share.side_by_side(_flops, _time)).assign(phase=_phase)
        parts[_phase + " detail"] = pd.DataFrame(_time)
    parts_table = pd.concat([parts["prefill"], parts["decode"]], ignore_index=True)
    parts_table.style.format({"FLOP share": "{:.1%}", "time share": "{:.1%}"}).set_caption(
        f"measured: {loaded.label}; {part_tokens} tokens; FLOPs computed")
    return part_tokens, parts, parts_table, text


@app.cell
def _(compute_share, label, part_tokens, parts_table):
    compute_share.parts_figure(parts_table, part_tokens, "measured: " + label)
    return


@app.cell
def _(mo, on_gpu, parts_table):
    _t = parts_table.set_index(["phase", "part"])["time share"]
    _f = parts_table.set_index(["phase", "part"])["FLOP share"]
    _gap = _t[("decode", "everything else")]
    mo.md(f"""
    **Here** (measured): the head took {_t[('decode', 'head')]:.0%} of a decode step's time against
    {_f[('decode', 'head')]:.0%} of its FLOPs, and everything that is not a matmul — tokenizer, norms,
    rotary embeddings, masks, Python between kernels — took **{_gap:.0%}** of the step.

    **What you should see.** *On a CPU with the tiny model:* the head dominates the FLOPs of a decode
    step (about 70 %), and "everything else" is a large share of the time — each operation is tiny, so
    the fixed cost per operation (dispatch, Python) weighs as much as the arithmetic. *On a GPU with
    Mistral 7B:* the layers take about 98 % of the FLOPs and most of the time; the head about 2 %; at
    batch 1 a decode step's time follows bytes read rather than FLOPs (notebook 03), so the attention and
    MLP time shares track their weight bytes. {"(This run is on a GPU.)" if on_gpu else "(This run is on a CPU.)"}
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 2 · The memory hierarchy

    Every processor keeps a little memory very close to its arithmetic and a lot of memory far away. On
    a GPU: **HBM** (tens of GB, a few TB/s) and, in each streaming multiprocessor (SM), **shared memory**
    / L1 (a few hundred KiB, tens of TB/s for the whole chip). Decode streams the weights and the cache
    from HBM every step, so HBM bandwidth sets its ceiling (notebook 03); a kernel that reuses data from
    shared memory escapes that ceiling. The catalog's GPUs, every figure with its source
    (`helpers/data/gpu_onchip.csv`; empty where no source was found):
    """)
    return


@app.cell
def _(hierarchy, pd):
    gpu_levels = pd.DataFrame(hierarchy.gpu_hierarchy())
    gpu_levels.drop(columns=["source (sizes)", "source (on-chip bandwidth)"]).style.format(
        precision=2, na_rep="—").set_caption("datasheets, architecture whitepapers and tuning guides, papers (see the sources below)")
    return (gpu_levels,)


@app.cell
def _(gpu_levels, mo):
    _h = gpu_levels.set_index("GPU").loc["H100 SXM"]
    mo.md(f"""
    On an H100 SXM the shared memory of all {int(_h['SMs'])} SMs together is **{_h['shared memory, all SMs (MiB)']:.1f} MiB**
    — HBM is **{_h['HBM ÷ on-chip size']:,.0f}×** larger — and it streams **{_h['on-chip ÷ HBM bandwidth']:.1f}×** faster
    (31 TB/s against 3.35 TB/s, FlashAttention-3's Table 1). Small and fast against large and slow: an
    algorithm that keeps its working set on chip can run far above the HBM roof.

    Sources: {"; ".join(sorted(set(gpu_levels["source (on-chip bandwidth)"]) - {"none published"}))}.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ### The same staircase, measured on this machine's CPU

    A CPU has the same structure: L1, L2 and L3 caches on the chip, DRAM off it. The cache sizes come
    from the operating system; the bandwidth is measured by re-reading a buffer of growing size (one
    core, best of repeats): while the buffer fits a cache level, every pass reads from that level.
    """)
    return


@app.cell
def _(hierarchy, pd):
    caches = hierarchy.data_caches()
    pd.DataFrame([{"level": c.name, "kind": c.kind, "size (bytes)": f"{c.size_bytes:,}",
                   "size": f"{c.size_bytes / 2**10:,.0f} KiB" if c.size_bytes < 2**20 else f"{c.size_bytes / 2**20:,.0f} MiB",
                   "shared by CPUs": c.shared_by} for c in caches]).style.set_caption(
        "this machine's data caches, as the operating system reports them (/sys/devices/system/cpu)")
    return (caches,)


@app.cell
def _(caches, hierarchy, label, pd):
    stairs = pd.DataFrame(hierarchy.staircase(hierarchy.working_set_sizes(per_octave=1), repeats=3,
                                              bytes_per_sample=64 * 2**20, levels=caches))
    hierarchy.staircase_figure(stairs.to_dict("records"), caches, "measured: read bandwidth, one CPU core, float32 sum, "
                               + label.split(" · ")[-2] + " host")
    return (stairs,)


@app.cell
def _(hierarchy, pd, stairs):
    steps = pd.DataFrame(hierarchy.plateaus(stairs.to_dict("records")))
    steps.style.format(precision=1).set_caption("measured: median read bandwidth per level, one CPU core")
    return (steps,)


@app.cell
def _(mo, steps):
    _fast = steps.iloc[0]
    _dram = steps[steps["level"] == "DRAM"]
    mo.md(f"""
    Data re-read from **{_fast['level']}** came back at **{_fast['median read bandwidth (GB/s)']:,.0f} GB/s**
    {f"— {_fast['× DRAM']:.0f}× the DRAM rate of {_dram.iloc[0]['median read bandwidth (GB/s)']:,.1f} GB/s" if len(_dram) else ""}.
    That ratio is why tiling pays: a computation that loads a tile once and reuses it from the fast
    level runs at the fast level's speed.

    **What you should see.** *On any CPU:* a staircase — highest while the buffer fits L1, a step down at
    each cache size, lowest in DRAM; several times between the top and the bottom. Timings are noisy when
    other programs share the machine (a shared L3 looks smaller). *On a GPU machine:* this section still
    measures the host CPU; the GPU's own levels are in the table above (datasheet figures).
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 3 · FlashAttention as a mechanism

    Standard attention writes the N×N score matrix S to HBM, reads it back for the softmax, writes the
    probabilities P, reads them back to multiply by V. FlashAttention never forms S or P: it takes a
    block of queries, streams the keys and values past it block by block, and keeps, per query, the
    running maximum *m* and running sum ℓ of the softmax. When a new block raises the maximum, the
    partial sum and output are rescaled by exp(m_old − m_new) — the **online softmax** — so the result
    is exact. Here it is, short enough to read (`helpers.flash.tiled_attention`):
    """)
    return


@app.cell
def _(flash, inspect, mo):
    _src = inspect.getsource(flash.tiled_attention)
    mo.md(f"```python\n{_src}```")
    return


@app.cell
def _(flash, pd):
    import torch.nn.functional as _F

    _rows = []
    for _n, _causal in ((100, False), (257, True), (1000, True)):
        _q, _k, _v = flash.attention_inputs(_n, flash.AttentionShape(1, 8, 32, "fp32"), seed=_n)
        _ref = _F.scaled_dot_product_attention(_q, _k, _v, is_causal=_causal)
        _rows.append({"tokens": _n, "causal": _causal, "blocks": "64 × 64",
                      "max |tiled − SDPA|": float((flash.tiled_attention(_q, _k, _v, _causal) - _ref).abs().max())})
    equal = pd.DataFrame(_rows)
    equal.style.format({"max |tiled − SDPA|": "{:.1e}"}).set_caption("measured: fp32 · cpu, 8 heads × 32 dims, random inputs")
    return (equal,)


@app.cell
def _(mo):
    mo.md("""
    Equal to PyTorch's `scaled_dot_product_attention` to float rounding (about 10⁻⁷ in fp32;
    `tests/test_flash.py` checks several shapes, causal and not, GQA and bf16).

    ### The bytes each moves to and from HBM

    Counted for one layer of Mistral 7B (32 heads × 128 dims, bf16, causal), with the block size
    FlashAttention's Algorithm 1 picks for an H100's 228 KiB of shared memory per SM. Standard: 4·N·d + 4·N²
    elements per head (read Q, K; write S; read S; write P; read P, V; write O). Tiled: Q read once, O written
    once, each K/V block read once per query block that needs it.
    """)
    return


@app.cell
def _(flash, gpu_levels, pd):
    _smem = int(gpu_levels.set_index("GPU").loc["H100 SXM", "shared memory per SM (KiB)"]) * 1024
    block_r, block_c = flash.paper_block_sizes(_smem, 128, "bf16")
    mistral_attn = flash.AttentionShape(batch=1, heads=32, head_dim=128, dtype="bf16")
    hbm = pd.DataFrame(flash.hbm_bytes_table(mistral_attn, [2**k for k in range(9, 18)], block_r, block_c, causal=True))
    flash.hbm_figure(hbm, block_r, block_c,
                     "computed: Mistral 7B attention shape (32 heads × 128), bf16, causal; H100 SXM block size")
    return block_c, block_r, hbm, mistral_attn


@app.cell
def _(block_c, block_r, hbm, mo):
    _last = hbm.iloc[-1]
    mo.md(f"""
    At **{int(_last['tokens']):,} tokens** the standard algorithm moves **{_last['standard bytes'] / 1e9:,.0f} GB** per
    layer to and from HBM and must hold an N×N matrix of **{_last['N×N matrix, all heads (bytes)'] / 1e9:,.0f} GB**;
    the tiled one moves **{_last['tiled bytes'] / 1e9:,.1f} GB** ({_last['standard ÷ tiled']:.1f}× less) and holds no
    N×N matrix at all. Both grow as N², but the tiled count is divided by the query block ({block_r} rows):
    FlashAttention's Θ(N²d²/M) against Θ(N²). The tile size itself ({block_r} × {block_c}) is set by the
    shared memory per SM: more on-chip memory, fewer passes over K and V.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ### Timed here: naive against PyTorch's fused attention

    `naive_attention` materialises S and P; `torch.nn.functional.scaled_dot_product_attention` picks a
    fused kernel (a FlashAttention kernel on recent GPUs, a tiled CPU kernel on a CPU). Median of 3 runs
    (one thread on a CPU);
    the readable `tiled_attention` (Python loops) is timed on the short lengths only — it shows the
    mechanism, not the speed. Running out of memory ends the sweep as a result.
    """)
    return


@app.cell
def _(flash, loaded, mistral_attn, on_gpu):
    timing_shape = mistral_attn if on_gpu else flash.AttentionShape(1, 8, 32, loaded.dtype)
    _lengths = [1024 * 2**k for k in range(6)] if on_gpu else [256, 512, 1024, 2048]
    attn_times = flash.time_attention(_lengths, timing_shape, loaded.device, causal=True, repeats=3,
                                      tiled_up_to=0 if on_gpu else 512).frame()
    flash.timing_figure(attn_times, f"measured: {timing_shape.heads} heads × {timing_shape.head_dim}, "
                        f"{timing_shape.dtype}, causal · {loaded.device}{'' if on_gpu else ', one thread'} · profile {loaded.profile}")
    return attn_times, timing_shape


@app.cell
def _(attn_times, timing_shape):
    attn_times[~attn_times["oom"]].drop(columns=["oom"]).style.format(precision=4, na_rep="—").set_caption(
        f"measured: {timing_shape.heads} heads × {timing_shape.head_dim}, {timing_shape.dtype}, causal")
    return


@app.cell
def _(attn_times, flash, mistral_attn, mo):
    _ok = attn_times[~attn_times["oom"]]
    _oom = attn_times.attrs.get("oom_at")
    _first, _last = _ok.iloc[0], _ok.iloc[-1]
    _trend = ("grew" if _last["naive ÷ sdpa"] > _first["naive ÷ sdpa"] else "did not grow")
    _nxn_32k = 2 * flash.hbm_bytes_table(mistral_attn, [32768], 128, 128)[0]["N×N matrix, all heads (bytes)"]
    mo.md(f"""
    At {int(_last['tokens']):,} tokens the fused kernel took **{_last['sdpa_s'] * 1e3:,.2f} ms** against
    **{_last['naive_s'] * 1e3:,.2f} ms** for the naive one ({_last['naive ÷ sdpa']:.1f}×; at {int(_first['tokens']):,} tokens
    {_first['naive ÷ sdpa']:.1f}×: the advantage {_trend} with length).
    {f"The naive version ran out of memory at {_oom:,} tokens — its N×N matrices no longer fit." if _oom else ""}

    **What you should see.** *On a CPU (tiny shapes, one thread):* the fused kernel ahead of the naive one at
    every length, several times at 2,048 tokens (its tiles stay in the caches measured above); the Python-loop
    tiled version no faster than the naive one — it shows the mechanism, not the speed. *On a GPU (Mistral's 32 × 128 heads, bf16):* the fused kernel
    several times faster at long lengths, and the naive one running out of memory once 2 × N² × 32 × 2 bytes
    no longer fit (S and P at N = 32k: {_nxn_32k / 1e9:,.0f} GB in bf16).
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 4 · Beyond the KV cache

    Notebook 06 showed caches that share heads (GQA, MQA), compress (MLA) or forget (sliding window).
    Three more ideas change what attention keeps per sequence.

    ### Sparse attention: attend to chosen tokens

    Each query attends to *k* of the *N* cached keys: the top-*k* scores (dynamic), or a fixed pattern —
    the first few "sink" tokens plus a recent window (StreamingLLM). It **saves** the products with the
    keys left out (and, for a fixed pattern, the cache of the tokens it will never attend to again). It
    **risks** the keys it leaves out. One decode query against 4,096 keys, 256 kept:
    """)
    return


@app.cell
def _(pd, state_space):
    sparse = pd.DataFrame(state_space.sparse_attention_demo(context=4096, head_dim=64, keep=256, sinks=4, needle_at=1000))
    sparse.style.format({"share of keys": "{:.1%}", "dense softmax mass kept": "{:.1%}", "output error (÷ ‖v‖)": "{:.3f}"},
                        na_rep="—").set_caption("measured: random keys/values, 64 dims, fp32 · cpu; 32 queries averaged")
    return (sparse,)


@app.cell
def _(mo, sparse, state_space):
    _save = state_space.sparse_decode_saving("mistral-7b-v0.3", 131072, 2048)
    _s = sparse.set_index(["query", "pattern"])
    _win = _s.loc[("needle", "4 sinks + window")]
    _top = _s.loc[("needle", "top-256")]
    _dif = _s.loc[("diffuse", "top-256")]
    mo.md(f"""
    With a **needle** (one early key that matches the query), top-256 keeps it and the output barely moves
    (error {_top['output error (÷ ‖v‖)']:.3f} of a value's length); the fixed sinks + window pattern
    {"keeps" if _win['needle kept'] else "drops"} it and the output is wrong by {_win['output error (÷ ‖v‖)']:.2f} of a value's length.
    With **diffuse** attention, top-256 keeps only {_dif['dense softmax mass kept']:.0%} of the softmax mass: when attention is spread
    thin there is no small set of keys that carries it. Top-*k* still has to score every key to choose
    (unless a cheaper index picks them, as DeepSeek's sparse attention does), and keeps the whole cache.

    What it saves at scale: one decode step of Mistral 7B v0.3 at {_save['context']:,} tokens spends
    {_save['attention share (dense)']:.0%} of its FLOPs on attention over the context; attending to
    {_save['keep']:,} chosen keys instead would cut the step's FLOPs by **{_save['FLOPs saved']:.0%}**
    (computed with `helpers.compute_share`; choosing the keys is not counted).

    **What you should see** (CPU and GPU alike; this is computed on the CPU): the needle kept by top-*k* and
    lost by the window; diffuse attention poorly served by any small set of keys.

    ### Linear attention and state-space models: a fixed-size state

    Replace the softmax by a feature map φ and causal attention becomes a recurrence: a state
    S = Σ φ(k)vᵀ of d × d numbers (plus a normaliser) is updated per token, and the output is read from
    it. The parallel form (all tokens at once, for prefill) and the recurrent form (one token at a time,
    for decode) give the same result; the state never grows. Mamba carries a different state — per layer
    a d_inner × d_state SSM state and a short convolution window — fixed in size too. Jamba keeps a KV
    cache in 4 of its 32 layers and Mamba states in the other 28.
    """)
    return


@app.cell
def _(pd, state_space, torch):
    _g = torch.Generator().manual_seed(0)
    _q, _k, _v = torch.randn(3, 1, 8, 512, 32, generator=_g).unbind(0)
    _out, _s, _z = state_space.linear_attention_recurrent(_q, _k, _v)
    toy_states = pd.DataFrame(state_space.measure_toy_states("falcon_mamba", (8, 64, 256))
                              + state_space.measure_toy_states("jamba", (8, 64, 256)))
    linear_check = {"max |recurrent − parallel|": float((_out - state_space.linear_attention_parallel(_q, _k, _v)).abs().max()),
                    "state per head (elements)": _s[0, 0].numel() + _z[0, 0].numel()}
    toy_states.style.set_caption("measured: toy Mamba and Jamba (random weights) · fp32 · cpu, transformers' cache "
                                 f"against the formula; linear attention, 512 tokens: {linear_check}")
    return linear_check, toy_states


@app.cell
def _(pd, state_space):
    _contexts = [2**k for k in range(8, 19)]
    per_sequence = pd.DataFrame(state_space.state_vs_kv(contexts=_contexts))
    state_space.state_figure(per_sequence.to_dict("records"), state_space.linear_attention_state_bytes(32, 8, 128, 128),
                             "computed from published config.json files (presets/SOURCES.md), bf16 states and caches")
    return (per_sequence,)


@app.cell
def _(linear_check, mo, per_sequence, state_space, toy_states):
    _b = per_sequence.pivot(index="tokens", columns="model", values="bytes")
    _n = int(_b.index.max())
    _mamba = state_space.ssm_state_bytes("falcon-mamba-7b")
    _lin = state_space.linear_attention_state_bytes(32, 8, 128, 128)
    mo.md(f"""
    At **{_n:,} tokens** one sequence carries **{_b.loc[_n, 'mistral-7b-v0.3'] / 2**30:,.0f} GiB** of KV cache in
    Mistral 7B v0.3, **{_b.loc[_n, 'mistral-7b-v0.1'] / 2**30:,.1f} GiB** in v0.1 (its 4,096-token window stops the
    growth), **{_b.loc[_n, 'jamba-1.5-mini'] / 2**30:,.2f} GiB** in Jamba 1.5 Mini (4 attention layers) and
    **{_mamba / 1e6:,.1f} MB** in Falcon Mamba 7B — the same at every length: Mistral's cache passes it at
    {state_space.break_even_tokens(_mamba):,.0f} tokens. A Mistral-shaped linear attention would carry
    {_lin / 1e6:,.1f} MB, the KV of {state_space.break_even_tokens(_lin):,.1f} tokens.
    The formula matched transformers' real cache in {int(toy_states['equal'].sum())} of {len(toy_states)} toy runs; the
    recurrent and parallel linear attention agreed to {linear_check['max |recurrent − parallel|']:.1e}.

    What the fixed state costs: everything the model will ever recall must fit in it. Recall of a fact seen
    once, far back, is where pure SSMs trail attention — which is why hybrids keep a few attention layers.

    **What you should see** (computed, any machine): the transformer lines rising linearly (v0.1 flat past
    4,096), Jamba far below them, Falcon Mamba and linear attention flat; every toy cache equal to the formula.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## Exercises
    """)
    return


@app.cell
def _(compute_share, flash, mo, notebook, state_space):
    _llama = compute_share.layer_share("llama-3.1-8b", 1, 4096)
    _a100 = flash.paper_block_sizes(164 * 1024, 128, "bf16")
    _rtx = flash.paper_block_sizes(100 * 1024, 128, "bf16")
    _h100 = flash.paper_block_sizes(228 * 1024, 128, "bf16")
    _kv = lambda b: flash.tiled_hbm_elements(32768, 128, b[0], b[1], True)["total"]  # noqa: E731
    _jamba4k = state_space.sequence_state_bytes("jamba-1.5-mini", 4096)
    _fixed = state_space.ssm_state_bytes("jamba-1.5-mini")
    _jamba_tok = state_space.sequence_state_bytes("jamba-1.5-mini", 2) - state_space.sequence_state_bytes("jamba-1.5-mini", 1)
    _mistral_tok = state_space.sequence_state_bytes("mistral-7b-v0.3", 1)
    _per_tok_gap = _mistral_tok - _jamba_tok
    mo.vstack([
        notebook.exercise(1, """**The head's share.** Llama 3.1 8B has a 128,256-word vocabulary. Predict whether the
        layers take more or less than 95 % of a decode step's FLOPs, then check with
        `helpers.compute_share.layer_share("llama-3.1-8b", 1, 4096)`.""", f"""Llama's head is 4,096 × 128,256 weights — four times Mistral's — and its layers
        take **{_llama:.1%}** of a decode step at 4,096 tokens: the 95 % {"still holds" if _llama >= compute_share.TALK_LAYER_SHARE else "no longer holds"}."""),
        notebook.exercise(2, """**Tiles and shared memory.** With `helpers.flash.paper_block_sizes`, find the block size
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


@app.cell
def _(compute_share, gpu_levels, mo, notebook, started, steps):
    _mistral = compute_share.layer_share("mistral-7b-v0.1", 1, 4095)
    _h = gpu_levels.set_index("GPU").loc["H100 SXM"]
    _top = steps.iloc[0]
    mo.md(f"""
    ## Takeaways

    - A forward pass's FLOPs are a formula of the shape: the layers take {_mistral:.1%} of a Mistral 7B decode
      step at 4k tokens, but not most of a tiny model's with a big vocabulary, and attention over the context
      overtakes the linear layers only at tens of thousands of tokens without a window.
    - Memory comes in levels: small and fast on chip, large and slow off it. Measured here, {_top['level']} read
      {f"{_top['× DRAM']:.0f}× faster than DRAM" if isinstance(_top['× DRAM'], float) and _top['× DRAM'] == _top['× DRAM'] else "fastest"}; on an H100 SXM
      shared memory streams {_h['on-chip ÷ HBM bandwidth']:.1f}× faster than HBM and is {_h['HBM ÷ on-chip size']:,.0f}× smaller.
    - FlashAttention computes exact attention tile by tile with the online softmax: the N×N matrix never
      goes to HBM, the traffic drops by the tile height and the memory from N² to N.
    - A KV cache grows with the context; a sparse pattern, a linear-attention state or a Mamba state does
      not — at the price of what the model can recall. Hybrids keep a little attention for that.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
