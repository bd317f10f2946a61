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
    import marimo as mo
    import pandas as pd

    from helpers import attention, mla, notebook, plots

    notebook.setup()
    return attention, mla, mo, pd, plots


@app.cell
def _(mo):
    mo.md("""
    # 06 · Attention variants and the KV cache

    Every generated token reads the keys and values of every earlier token, so the KV cache grows
    with context × users and often, not the weights, decides how many requests fit on a GPU. The
    attention variants differ in **what they cache per token per layer**:

    | variant | cached per token per layer | used by |
    | --- | --- | --- |
    | MHA — multi-head | K and V for every query head: 2 × heads × head_dim | GPT-2, Llama 1 |
    | MQA — multi-query | one K/V head shared by all query heads: 2 × head_dim | PaLM, Falcon 7B |
    | GQA — grouped-query | one K/V head per group of query heads: 2 × groups × head_dim | Mistral, Llama 3, Qwen 2.5 |
    | MLA — multi-head latent | one compressed latent + a small decoupled RoPE key, shared by all heads | DeepSeek V2/V3 |
    | sliding window | any of the above, but a layer keeps only the last *W* tokens | Mistral 7B v0.1, GPT-OSS (every other layer) |

    First the formula for every preset, then each variant **measured** on a real cache.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## KV bytes per token, every preset

    From each model's `config.json` with `helpers.memory` (bf16 cache). "Per token" is at short
    context; the per-sequence columns honour sliding windows — a sliding layer stops growing at its
    window.
    """)
    return


@app.cell
def _(attention, pd):
    kv = pd.DataFrame(attention.kv_table())
    kv["source"] = "computed from each config.json, bf16 KV"
    kv
    return


@app.cell
def _(attention, pd, plots):
    _rows = pd.DataFrame(attention.kv_vs_context(max_tokens=131072))
    _fig, (_log, _lin) = plots.figure(ncols=2, width=6.0, height=4.5)
    _styles = {"mistral-7b-v0.3": ":", "deepseek-v2-lite": "--"}
    for _name, _g in _rows.groupby("model", sort=False):
        _label = f"{_name} ({_g['attention'].iloc[0]})"
        for _ax in (_log, _lin):
            _ax.plot(_g["tokens"], _g["bytes"] / 2**30, _styles.get(_name, "-"), marker="." if _ax is _log else None,
                     label=_label, lw=2.5 if _name == "mistral-7b-v0.3" else 1.5)
    _ticks = [64, 1024, 4096, 32768, 131072]
    _log.set_xscale("log", base=2)
    _log.set_yscale("log")
    _log.set_xticks(_ticks, ["64", "1k", "4k", "32k", "128k"])
    _log.set_title("log–log: every preset", fontsize=10)
    _lin.set_xticks(_ticks[2:], ["4k", "32k", "128k"])
    _lin.set_title("linear: caps and slopes", fontsize=10)
    for _ax in (_log, _lin):
        _ax.set_xlabel("context length (tokens, one sequence)")
        _ax.set_ylabel("KV cache (GiB, 2³⁰ bytes, bf16)")
    _lin.legend(fontsize=7, title="Llama 3.1 8B and Mistral v0.3 coincide", title_fontsize=7)
    plots.finish(_fig, "computed from each preset's config.json with helpers.memory.kv_cache_bytes, bf16")  # stamped, and closed so Jupyter shows it once
    _fig
    return


@app.cell
def _(mo):
    mo.md("""
    Reading the plots: the GQA models grow linearly all the way; **Mistral 7B v0.1 flattens at 4,096
    tokens** (its window is on every layer — v0.3 dropped it); **GPT-OSS-120B** grows at half its
    short-context rate past 128 tokens, when its 18 sliding layers stop growing and only its 18
    full-attention layers keep going (on the log–log plot, a line shifted down 2×); the **DeepSeek**
    models sit low for their size because MLA caches a 576-wide latent per layer instead of per-head
    K and V — DeepSeek V3, at 671 B parameters, caches less per token than Llama 3.1 8B.

    ## Measured: MHA, GQA, MQA on real caches

    Three tiny Mistral models that differ **only** in their number of K/V heads — all 8 (MHA), 2 (GQA,
    the tiny profile's own), 1 (MQA) — built with random weights, loaded through `from_pretrained`,
    and run forward with transformers' `DynamicCache`. The measured bytes are those of the cache's
    tensors; the formula is `helpers.memory.kv_cache_bytes` at fp32.
    """)
    return


@app.cell
def _(attention, pd):
    kv_heads = pd.DataFrame(attention.measure_kv_heads())
    kv_heads["measured on"] = "tiny Mistral variants (random weights) · fp32 · cpu"
    kv_heads
    return


@app.cell
def _(mo):
    mo.md("""
    ## Measured: a sliding window caps the cache

    A tiny Mistral with `sliding_window = 16`, decoding one token at a time. transformers' sliding
    layer (`DynamicSlidingWindowLayer`) keeps **window − 1 = 15** tokens between steps: the next
    token's own K and V are computed afresh in its forward pass and joined to those 15, so each
    query still attends to 16 tokens — the window is the attention span, and the cache between steps
    is one slot smaller. Mistral's paper describes a rolling buffer of W slots; the formula takes
    either (`window_slots`), and the measurement matches window − 1 exactly.
    """)
    return


@app.cell
def _(attention, pd):
    sliding = pd.DataFrame(attention.measure_sliding(window=16, prompt=4, total=48))
    sliding["measured on"] = "tiny Mistral, sliding_window=16 (random weights) · fp32 · cpu"
    sliding.iloc[[0, 10, 11, 12, 13, 20, len(sliding) - 1]]
    return (sliding,)


@app.cell
def _(plots, sliding):
    _fig, _ax = plots.figure(width=6.5)
    _ax.plot(sliding["tokens seen"], sliding["no window (B)"] / 1e3, "--", color="#999", label="no window (formula)")
    _ax.plot(sliding["tokens seen"], sliding["formula, 15 slots (B)"] / 1e3, color="#4c72b0", lw=3, alpha=0.5,
             label="formula, window − 1 = 15 slots")
    _ax.plot(sliding["tokens seen"], sliding["measured (B)"] / 1e3, ".", color="k", label="measured DynamicCache")
    _ax.set_xlabel("tokens seen")
    _ax.set_ylabel("cache (kB, 10³ bytes)")
    _ax.legend(fontsize=8)
    plots.finish(_fig, "measured: tiny Mistral, sliding_window=16 (random weights) · fp32 · cpu")  # stamped, and closed so Jupyter shows it once
    _fig
    return


@app.cell
def _(mla, mo):
    _c = mla.TINY_MLA_CONFIG
    mo.md(f"""
    ## Measured: MLA caches a latent, not heads

    MLA (DeepSeek-V2, arXiv:2405.04434, §2.1) projects each token down to a latent
    **c** of `kv_lora_rank` numbers and caches it, together with one small **decoupled RoPE key**
    k_R of `qk_rope_head_dim` numbers shared by all heads (position information cannot pass through
    the compression, so it travels beside it). At attention time up-projections rebuild every head's
    key and value from c. `helpers.mla.MLAttention` is a small, readable MLA in torch
    ({_c['num_hidden_layers']} layers, {_c['num_attention_heads']} heads, latent {_c['kv_lora_rank']}
    + rope key {_c['qk_rope_head_dim']}); its cache holds only `[c | k_R]` per token per layer.
    It attends straight from the cache with the key up-projection *absorbed* into the query — the
    paper's inference trick — and is checked against a reference that expands K and V to every head,
    as MHA would. The prompt goes in at once, then one token per step.
    """)
    return


@app.cell
def _(mla, pd):
    mla_cache = pd.DataFrame(mla.measure_mla())
    mla_cache["measured on"] = "helpers.mla.TinyMLA (random weights) · fp32 · cpu"
    mla_cache
    return


@app.cell
def _(mo):
    mo.md("""
    The same check on transformers' own DeepSeek-V3 implementation at toy size: its cache, too,
    holds the latent and the rope key per token per layer.
    """)
    return


@app.cell
def _(mla, pd):
    hf_mla = pd.DataFrame(mla.measure_hf_mla())
    hf_mla["measured on"] = "transformers DeepseekV3ForCausalLM, toy config (random weights) · fp32 · cpu"
    hf_mla
    return


@app.cell
def _(attention, mo):
    mo.md(f"""
    ## MLA's saving, stated honestly

    "MLA saves N×" means nothing without the baseline. DeepSeek V3 caches 61 layers × (512 + 64)
    elements per token. Against:

    1. **MHA of the same model**, with its 128 heads × 128 dims, K and V per layer — the comparison in
       the DeepSeek-V2 paper's Table 1 (MHA caches 2 n_h d_h l elements per token, MLA (d_c + d_h^R) l);
    2. the same, with the head sizes DeepSeek's attention actually computes — keys of 192 dims
       (128 + 64 rope), values of 128;
    3. a real **GQA** model of today, Mistral 7B (8 K/V heads × 128, 32 layers).

    The paper's own summary: MLA's cache equals GQA with only {attention.mla_equivalent_gqa_groups("deepseek-v3")}
    groups (of 128-dim heads).
    """)
    return


@app.cell
def _(attention, pd):
    ratios = pd.DataFrame(attention.mla_ratios("deepseek-v3", "mistral-7b-v0.1"))
    ratios["source"] = "computed from deepseek-v3 and mistral-7b-v0.1 config.json"
    ratios
    return (ratios,)


@app.cell
def _(mo, ratios):
    _x = ratios["baseline ÷ MLA"].tolist()   # rows: MLA itself, MHA 128×128, MHA with rope keys, GQA
    mo.md(f"""
    So: **≈ {_x[1]:.0f}× against MHA of the same model** ({_x[2]:.0f}× if the MHA keys carry the 64 rope dims too), but
    only **≈ {_x[3]:.1f}× against Mistral 7B's GQA cache** — and Mistral 7B is a far smaller model. Both are
    true; quote the one whose baseline you name.

    The same figures from the command line, for any preset or `config.json`, any context — MLA and
    hybrid sliding/full layers included:

    ```bash
    .venv/bin/python -m helpers kv --model deepseek-v3 --tokens 131072
    .venv/bin/python -m helpers kv --model gpt-oss-120b --tokens 131072 --json
    ```

    ## Quality: what the papers report

    Cache size is half the story; the other half is what the model loses. Published comparisons,
    each with its source (`helpers/data/attention_scorecard.csv`). They are not comparable across
    rows: different models, data and benchmarks. Within a row the comparison is controlled.
    """)
    return


@app.cell
def _(attention, pd):
    scorecard = pd.DataFrame(attention.scorecard())
    scorecard
    return


@app.cell
def _(mo):
    mo.md("""
    What the rows say: an **uptrained** GQA-8 model keeps nearly all of MHA's quality at close to
    MQA's speed (GQA paper, T5-XXL); trained from scratch at 7B, DeepSeek found MHA clearly ahead of
    GQA and MQA on hard benchmarks — and MLA ahead of MHA in five of the six comparisons listed
    (behind on C-Eval at the small scale) with 4–14 % of its cache. Mistral
    reports its 4,096-token window cuts the cache 8× at 32k tokens without hurting quality, and gives
    no side-by-side score.

    ## What to take away

    - The KV cache per token is a formula of the config — layers, K/V heads, head size, bytes — and
      the formula matches real caches to the byte, for every variant.
    - GQA and MQA cut the cache by sharing heads; MLA by compressing; a sliding window by forgetting.
      Each trades something: quality (MQA), compute at attention time (MLA's up-projections, mostly
      absorbed), or long-range recall within a layer (sliding windows).
    - A ratio is only as honest as its baseline: name it.
    """)
    return


if __name__ == "__main__":
    app.run()
