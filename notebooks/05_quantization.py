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

    from helpers import capacity
    from helpers.present import expected, learner, notebook, on_gpu, plots, quant_figures, replay
    from helpers.formulas import memory, quantization, regime, specs
    from helpers.measure import local_models, models, quant
    from helpers.serving import kv_quant
    from helpers.present.glossary import term
    from helpers.formulas.units import fmt_bytes
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 05 · Quantization: the weights and the KV cache

    **What you will learn**

    1. What {term("int8")}, {term("nf4")} and {term("double quantization")} store, to the byte,
       {term("scales", "scale")} included.
    2. When a quantized step is shorter: where reading the weights sets its time ({term("dequantization")}).
    3. How to check quality ({term("perplexity")}, {term("KL divergence")}, {term("top-1 agreement")}), and
       what serving engines use ({term("AWQ")}, {term("GPTQ")} with {term("Marlin")}, {term("FP8")}).
    4. What a quantized {term("KV cache", "kv-cache")} saves and costs, and whether a 120 B-parameter model
       fits one 80 GB GPU ({term("MXFP4")}).

    {run_times.header("05")}

    Fewer bits take less memory and, where reading them sets a step's time ({term("memory-bound")}), less
    time. The active profile's model, four ways:

    | scheme | what bitsandbytes stores for each `nn.Linear` weight in the decoder blocks |
    | --- | --- |
    | reference | {term("bf16")} on a GPU ({term("fp32", "bf16")} on a CPU, the tiny profiles' dtype there) |
    | `int8` | LLM.int8(): 1 byte per weight + one fp32 scale per output row; its {term("outlier features")} multiplied in the activations' dtype |
    | `nf4` | 4-bit NormalFloat: ½ byte per weight + one fp32 absmax per block of 64 |
    | `nf4-dq` | nf4 with *double quantization*: the absmax themselves stored in 8 bits |

    For each: its bytes against the prediction, its {term("prefill")} and {term("decode")} times, and its
    predictions against the reference's.
    """)
    return


@app.cell
def _():
    loaded = models.load()
    return (loaded,)


@app.cell(hide_code=True)
def _(loaded):
    compare_button = replay.run_button()
    _own = quant.sizes_for(loaded.profile, loaded.device).prompt_tokens
    compare_prompt = mo.ui.dropdown(options=[str(n) for n in sorted({32, 128, 512, _own})], value=str(_own),
                                    label=f"prompt length of the speed runs (tokens; {_own} is this device's recorded size)")
    mo.vstack([mo.md(f"""
    **Model:** {loaded.label}. bitsandbytes quantizes while loading{" (the reference's weights saved once to the workshop cache)" if loaded.profile == "mistral-7b-random" else ""}.
    **Run live** measures the four models and the KV caches.
    """), compare_prompt, compare_button])
    return compare_button, compare_prompt


@app.cell
def _(compare_button, compare_prompt, loaded):
    _own = quant.sizes_for(loaded.profile, loaded.device)
    _sizes = quant.Sizes(int(compare_prompt.value), _own.new_tokens, _own.repeats, _own.eval_tokens)
    # a recording holds the recorded size only: another size is measured here, when Run live is pressed
    mo.stop(_sizes != _own and not compare_button.value, mo.callout(mo.md(
        f"Press **Run live** to measure the four models with a {_sizes.prompt_tokens}-token prompt here."), kind="neutral"))
    compare_run = replay.measure("05/compare", models.run_on, loaded, quant.compare, sizes=_sizes,
                                 run=compare_button.value, long=True, profile=loaded.profile, device=loaded.device)
    results_on, results = compare_run.value
    results_source = compare_run.source(results_on)
    return compare_run, results, results_on, results_source


@app.cell(hide_code=True)
def _(compare_run):
    compare_run.note()
    return


@app.cell(hide_code=True)
def _():
    _p = specs.param_count("mistral-7b-v0.1")
    _bf16 = memory.weight_bytes("mistral-7b-v0.1", "bf16").bytes
    nf4_box = learner.prediction(f"Mistral 7B v0.1 has {_p:,} parameters, {_bf16 / 1e9:,.2f} GB in bf16. How many GB do "
                                 "its weights take in nf4, scales included? (The table of presets below answers it.)", "GB")
    mo.vstack([mo.md("""
    ## Footprint of each model

    Parameters as stored, quantization states (scales, code books) and buffers, against
    `helpers.formulas.memory.weight_bytes`.
    """), nf4_box])
    return (nf4_box,)


@app.cell
def _(results, results_on, results_source):
    footprints = pd.DataFrame(quant_figures.footprint_rows(results, results_on.spec))
    plots.table(footprints, f"{plots.source_label(results_source)}; predicted: helpers.formulas.memory.weight_bytes")
    return (footprints,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** `measured − predicted` **0**: the formula counts every byte bitsandbytes stores,
    so it prices models you have not loaded; another number: the installed version stores something else.

    `÷ rule of thumb` sets the bytes ÷ the reference's against "int8 halves, nf4 quarters" (of fp32: ¼, ⅛).
    **at**: the quantized layers hold the model's bytes. **above**: the embedding and the output head keep the
    reference dtype (each model's share quantized is in the presets table). **below** would be fewer bytes than
    the codes alone. *On a GPU*: the last column is the same model at a bf16 base.
    """)
    return


@app.cell(hide_code=True)
def _():
    footprint_model = mo.ui.dropdown(options=list(specs.PRESETS), value=notebook.env_default(
        "WORKSHOP_QUANT_MODEL", "mistral-7b-v0.1", list(specs.PRESETS)), label="model (computed from its config)")
    mo.vstack([footprint_model, notebook.static_note({"WORKSHOP_QUANT_MODEL": "the preset (" + ", ".join(specs.PRESETS) + ")"})])
    return (footprint_model,)


@app.cell
def _(footprint_model):
    preset_footprints = quantization.preset_footprints(footprint_model.value)
    plots.table(pd.DataFrame(quant_figures.weights_rows(preset_footprints)),
                f"computed from {footprint_model.value} config.json, bf16 base (helpers.formulas.quantization.preset_footprints)")
    return (preset_footprints,)


@app.cell
def _(nf4_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 3.6); in marimo, type it in the box above
    learner.beside(nf4_box, _given, memory.weight_bytes("mistral-7b-v0.1", "nf4").bytes / 1e9,
                   shown=lambda v: f"{v:,.2f} GB",
                   higher="nf4 stores ½ byte per quantized weight plus one fp32 absmax per 64 of them, and the "
                          "embedding and the head stay in bf16: more than the rule of thumb's quarter.",
                   lower="Only the decoder blocks' linear layers shrink to ½ byte per weight; their scales add "
                         "bytes, and the rest stays at 2 bytes.",
                   within="The codes at ½ byte, the scales, and the bf16 embedding and head, as counted above.")
    return


@app.cell
def _(results_on):
    all_presets = pd.DataFrame(quant_figures.presets_rows([results_on.spec, *specs.PRESETS]))
    plots.table(all_presets, "computed from each config.json (this run's model first), bf16 base "
                "(helpers.formulas.quantization.preset_footprints)")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    The {term("mixture-of-experts", "moe")} presets (DeepSeek-V2-Lite, DeepSeek-V3, GPT-OSS-120B) keep their
    experts as fused 3-D tensors in transformers 5, which bitsandbytes leaves at 2 bytes; they need a
    scheme of their own, such as MXFP4 (last section).
    """)
    return


@app.cell
def _(footprint_model, footprints, preset_footprints, results_on, results_source):
    _fig, (_a, _b) = plots.figure(ncols=2, width=5.5)
    _ok = footprints.dropna(subset=["model total (MB)"]) if "model total (MB)" in footprints else footprints
    plots.bars(_a, _ok["scheme"].str.replace("bitsandbytes ", ""), _ok["model total (MB)"], plots.MEASURED)
    _a.set_ylabel(plots.byte_label("MB", "model"))
    _a.set_title(f"measured: {results_on.model_name}", fontsize=9)
    plots.bars(_b, [w.scheme for w in preset_footprints], [w.gb for w in preset_footprints], plots.COMPUTED)
    _b.set_ylabel(plots.byte_label("GB", "weights"))
    _b.set_title(f"computed: {footprint_model.value}, bf16 base", fontsize=9)
    plots.finish(_fig, f"left: {plots.source_label(results_source)} · right: computed from {footprint_model.value} config.json",
                 title="Footprint by scheme")  # stamped, and closed so Jupyter shows it once
    _fig
    return


@app.cell(hide_code=True)
def _(results):
    step_box = learner.prediction(f"On this device, how long does the nf4 model's decode step take, as a multiple of the "
                                  f"{results[0].scheme} reference's (0.5 would be half the time)?", "×")
    mo.vstack([mo.md(f"""
    ## Speed: prefill and decode

    {term("Greedy decoding", "greedy-decoding")} with a {term("KV cache", "kv-cache")}, one prompt, the models
    in turn; the decode step is the median per token. `time ÷ bytes` is `step ÷ reference` over
    `bytes read ÷ reference`.
    """), step_box])
    return (step_box,)


@app.cell
def _(compare_run, results, results_on, results_source):
    _roof = quant_figures.datasheet_bandwidth(compare_run, results_on.device)
    speeds = pd.DataFrame(quant_figures.speed_rows(results, results_on.spec, _roof[0] if _roof else None))
    plots.table(speeds, f"{plots.source_label(results_source)}; medians"
                + (f"; floor: the bytes read at {_roof[1]}" if _roof else ""))
    return (speeds,)


@app.cell
def _(results_source, speeds):
    if speeds.empty:
        _out = mo.md("_No model was timed in this run._")
    else:
        _fig, (_a, _b) = plots.figure(ncols=2, width=5.0)
        _names = speeds["scheme"].str.replace("bitsandbytes ", "")
        plots.bars(_a, _names, speeds["prefill (ms)"], plots.MEASURED)
        _a.set_ylabel(f"prefill of {int(speeds['prompt tokens'].iloc[0])} tokens (ms)")
        _a.set_title("prefill (lower is faster)", fontsize=9)
        plots.bars(_b, _names, speeds["decode step (ms)"], plots.MEASURED)
        _b.set_ylabel("decode step (ms, batch 1)")
        _b.set_title("decode step (lower is faster)", fontsize=9)
        plots.finish(_fig, results_source, title="Speed by scheme")  # stamped, and closed so Jupyter shows it once
        _out = _fig
    _out
    return


@app.cell
def _(results, step_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 0.5); in marimo, type it in the box above
    _nf4 = next((r for r in results if r.scheme == "nf4" and r.error is None and r.speed), None)
    if _nf4 is None or not results[0].speed:
        _out = mo.md("_The prediction's result needs the nf4 model's decode timing, which did not run here._")
    else:
        _out = learner.beside(step_box, _given, regime.ratio(_nf4.speed["itl_s"], results[0].speed["itl_s"]),
            shown=lambda v: f"{v:.2f}×",
            higher="A 4-bit model reads fewer weight bytes, but its step is shorter only where reading them sets "
                   "the step, and only with a kernel that reads the packed codes directly: the `time ÷ bytes` "
                   "column says how far this one is from that.",
            lower="Fewer bytes read, a shorter step: the `time ÷ bytes` column says whether the step shrank as "
                  "much as its bytes.",
            within="The same time for fewer bytes: something other than reading the weights sets this step.")
    _out
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** `time ÷ bytes`:
    - **above**: the step costs more than its bytes: dequantizing, extra operators per layer, a fixed cost
      per step (the **overhead** case: the tiny model on a CPU).
    - **at**: reading the weights sets the step (the **bandwidth** case: a 7B model at batch 1 on a GPU).
    - **below**: the smaller weights fit a cache the reference's did not (notebook 00's last-level cache), or
      the kernel computes in a cheaper dtype.

    A long prefill (the **compute** case) follows its FLOPs, not its bytes.

    **What bitsandbytes 0.50 runs**, path by path:
    - **nf4, CPU with AVX512-BF16**: the first forward repacks each weight; each matmul then runs a fused
      kernel (`gemv_4bit_inference`) that looks each 4-bit code up in a 16-entry bf16 table and scales by the
      block's absmax. No matrix is written out. It takes at most 4 tokens per pass over the weights, so a
      prefill decodes every code again per 4 tokens.
    - **nf4, other CPUs**: `gemm_4bit` dequantizes the whole matrix, then calls `F.linear`.
    - **int8, CPU** (`MatMul8bitLt`): each call quantizes the activations per row to int8 (columns holding a
      value of 6.0 or more set apart), multiplies int8 × int8 into int32, rescales, and adds the outlier
      columns' product: several operators where the reference runs one.
    - **CUDA**: nf4 with up to 4 tokens per matmul runs a fused kernel that dequantizes on chip; with more it
      may dequantize the matrix and call cuBLAS. int8 multiplies on the tensor cores, with the same outlier split.
    """)
    return


@app.cell
def _():
    quant_floors = on_gpu.quantized_decode_floors()
    plots.table(quant_floors, f"computed: Mistral 7B v0.1 on an {expected.REFERENCE_GPU}, batch 1, "
                "1,024 tokens cached: the capacity planner's memory-bound floor at the datasheet's bandwidth")
    return


@app.cell
def _():
    plots.table(pd.DataFrame(quant_figures.formats_rows()), "computed: one 4096 × 4096 weight matrix, metadata included "
                "(helpers.formulas.quantization.bits_per_weight; awq as AutoAWQ packs it)")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **On a GPU, computed.** Mistral 7B's decode step at batch 1 is memory-bound (notebook 03): its floor
    falls with the weight bytes, reached at an {term("MBU")} of 100 %. Serving engines use formats built for this:

    | format | what it stores | kernel in vLLM / SGLang | trades |
    | --- | --- | --- | --- |
    | {term("AWQ")} | 4-bit weights; per group of 128 inputs one fp16 scale and one 4-bit zero point (packed eight to an int32); salient channels scaled before rounding | Marlin, or AWQ's own GEMM | a small calibration set; weight-only: activations stay 16-bit |
    | {term("GPTQ")} + {term("Marlin")} | 4-bit (or 8-bit) weights per group, rounded column by column with error correction from calibration data | Marlin: dequantizes in registers as it reads | calibration time and data; weight-only |
    | {term("FP8")} (E4M3) | 8-bit floats for weights and, optionally, activations, scaled per tensor or per channel | FP8 tensor cores (Hopper, Ada, Blackwell) | weights *and* matmuls halve, so prefill speeds up too; twice the bytes of 4-bit |

    bitsandbytes needs no calibration: it is built for fitting a model into memory.
    """)
    return


@app.cell(hide_code=True)
def _(results_on):
    _random = """
    **Random weights**: the next-token distributions spread over the whole vocabulary, so rounding flips
    the top token at near-ties, which says nothing about the scheme."""
    _caveat = {
        "tiny": _random + " The same measures on the same model *trained* follow the table.",
        "mistral-7b-random": _random + " Run with `WORKSHOP_PROFILE=mistral-7b` for figures that mean something.",
        "tiny-trained": """
    **The tiny model trained on Jane Austen's *Persuasion***, on its held-out last chapter: a toy with
    peaked distributions, so a flipped top token is a changed answer.""",
    }.get(results_on.profile, """
    Trained weights, one short text: a smoke test; check a scheme on your own task.""")
    mo.md(f"""
    ## Quality against the reference

    Every position of a fixed text predicts the next token. **Perplexity**: exp(mean negative log-likelihood
    of the actual next token). **KL(p_ref ‖ p_q)**: the quantized distribution's distance from the reference's,
    in nats. **Top-1 agreement**: the share of positions where both rank the same token first.
    {_caveat}
    """)
    return


@app.cell
def _(results, results_source):
    quality = pd.DataFrame(quant_figures.quality_rows(results))
    plots.table(quality, plots.source_label(results_source))
    return (quality,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** KL grows as the bits fall. `perplexity ÷ reference` **at**: the distributions
    changed without predicting this text worse; **above**: the rounding costs prediction; **below**: noise,
    not a better model.
    """)
    return


@app.function
def random_against_trained(loaded) -> dict | None:
    """On the tiny profiles: the random and the trained tiny model's perplexity on the same held-out text
    (the trained one built once per machine, about a minute on two cores, and cached), the training log, and
    on the random profile int8 and nf4 measured on the trained model too (footprint and quality, no timing).
    None on other profiles."""
    from helpers.measure import training

    if loaded.profile not in local_models.TINY_PROFILES:
        return None
    other = "tiny" if loaded.profile == "tiny-trained" else "tiny-trained"
    both = {loaded.profile: loaded, other: models.load(other, device=loaded.device)}
    trained = both["tiny-trained"]
    return {"perplexities": training.perplexities(both["tiny"], trained), "log": training.log(),
            "trained_quality": (quant_figures.quality_rows(quant.compare(trained, timing=False))
                                if loaded.profile == "tiny" else None), "trained_label": trained.label}


@app.cell
def _(compare_button, loaded):
    pair_run = replay.measure("05/random_vs_trained", random_against_trained, loaded, run=compare_button.value,
                              profile=loaded.profile, device=loaded.device)
    pair = pair_run.value
    if pair is None:
        _out = mo.md("*The random-against-trained comparison runs on the tiny profiles (`tiny`, `tiny-trained`).*")
    else:
        _out = plots.table(pd.DataFrame(quant_figures.perplexity_rows(pair["perplexities"])), plots.source_label(
            pair_run.source("measured: tiny and tiny-trained · fp32 · " + loaded.device)))
    _out
    return pair, pair_run


@app.cell(hide_code=True)
def _(pair_run):
    pair_run.note()
    return


@app.cell(hide_code=True)
def _(pair):
    _out = mo.md("") if pair is None else mo.md(f"""
    ### Random against trained, same architecture, same text

    `first ÷ this`: the random model's perplexity ÷ each row's. A uniform guess over V tokens scores
    exactly V; a model that has learned ranks some tokens first, which gives the quality figures meaning.
    """)
    _out
    return


@app.cell
def _(pair):
    # int8 and nf4 on the trained model, measured with the random-against-trained comparison on the random
    # tiny profile (footprint and quality, no timing); recordings made before trained_label keep the label
    # in a column.
    if pair is None or not pair.get("trained_quality"):
        _out = mo.md("")
    else:
        _rows = pd.DataFrame(pair["trained_quality"])
        _label = pair.get("trained_label") or (_rows["measured on"].iloc[0] if "measured on" in _rows else "")
        _out = mo.vstack([mo.md("**The same schemes on the trained model:**"),
                          plots.table(_rows.drop(columns="measured on", errors="ignore"), f"measured: {_label}")])
    _out
    return


@app.cell(hide_code=True)
def _(loaded):
    mo.md(f"""
    ## The KV cache in fewer bits

    At long contexts and large batches the KV cache is the other memory cost (notebook 02). transformers'
    `QuantizedCache` stores keys and values in **fp8** (E4M3, one fp32 scale per tensor) or in **4 or 2 bits**
    (optimum-quanto: a scale and a zero point per {kv_quant.GROUP_SIZE} values; up to
    {kv_quant.RESIDUAL_LENGTH} newest tokens in full precision, as in KIVI). The model: **{loaded.label}**.
    """)
    return


@app.cell
def _(compare_button, loaded):
    kv_attempt = notebook.attempt("KV-cache quantization", replay.measure, "05/kv_cache", kv_quant.measure_all, loaded,
                                  run=compare_button.value, long=True, profile=loaded.profile, device=loaded.device)
    kv_run = kv_attempt.value.value if kv_attempt.ok else None
    _out = kv_attempt.note() if not kv_attempt.ok else kv_attempt.value.note()
    _out
    return (kv_run,)


@app.cell
def _(kv_run):
    if kv_run is None:
        _out = mo.md("_The KV-cache tables need the measurement above._")
    else:
        _missing = "".join(f"\n\nNot measured here: {s} ({why})." for s, why in kv_run.missing.items())
        _out = mo.vstack([
            plots.table(pd.DataFrame(quant_figures.kv_bytes_rows(kv_run.sizes)), f"measured: {kv_run.label}; "
                        "formula: helpers.serving.kv_quant.cache_bytes"),
            plots.table(pd.DataFrame(quant_figures.kv_speed_rows(kv_run.steps)), f"measured: {kv_run.label}; "
                        "median of 16 steps, the schemes in turn"),
            plots.table(pd.DataFrame(quant_figures.kv_quality_rows(kv_run.quality)), f"measured: {kv_run.quality_label}"),
            mo.md(_missing)])
    _out
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.**
    - **Bytes**: `measured − formula` 0: the formula holds every part. The residual and the scales weigh
      less as the context grows (the computed table below).
    - **Step** `÷ full precision`: **above** is this path's cost: every step transformers dequantizes the
      whole cache for attention (`QuantizedLayer.update`). **at**: the weights or overhead set the step.
      **below** needs attention that reads the quantized cache, as vLLM's FlashAttention 3 does on fp8.
    - **Quality**: KL grows as the bits fall.
    """)
    return


@app.cell
def _():
    plots.table(pd.DataFrame(quant_figures.kv_projected_rows(expected.REFERENCE_MODEL, 4096)),
                "computed: Mistral 7B v0.1, bf16 cache, one sequence of 4,096 tokens (helpers.serving.kv_quant.cache_bytes; "
                "scales as wide as a bf16 cache keeps them, half the residual window in full precision)")
    return


@app.cell(hide_code=True)
def _():
    _gpus = ["H100 SXM", "H200", "B200", "MI300X", "A100 80GB", "L40S"]
    big_gpu = mo.ui.dropdown(options=_gpus, value=notebook.env_default("WORKSHOP_BIG_GPU", "H100 SXM", _gpus),
                             label="the one GPU")
    _spec, _pb = specs.get_spec("gpt-oss-120b"), specs.param_breakdown("gpt-oss-120b")
    _sliding = sum(t == "sliding_attention" for t in _spec.layer_types)
    mo.vstack([mo.md(f"""
    ## A big model on one GPU: GPT-OSS-120B

    GPT-OSS-120B has {_pb.total / 1e9:,.1f} B parameters, {_pb.experts / _pb.total:.0%} in its
    {_spec.num_experts} experts per layer, shipped in **MXFP4** (4-bit values, one 8-bit scale per 32); the
    rest is bf16. The table puts its weights in bf16, fp8 or MXFP4 against the memory the GPU reports less
    the runtime's reserve (`helpers.capacity.plan`: vLLM's {term("gpu_memory_utilization")}
    {capacity.GPU_MEMORY_UTILIZATION}, less {capacity.RUNTIME_OVERHEAD_BYTES / 1e9:.1f} GB). {_sliding} of its
    {_spec.num_layers} layers slide over {_spec.sliding_window:,} tokens, so a long sequence's cache grows in
    {_spec.num_layers - _sliding} only.
    """), big_gpu, notebook.static_note({"WORKSHOP_BIG_GPU": "the GPU (" + ", ".join(_gpus) + ")"})])
    return (big_gpu,)


@app.cell
def _(big_gpu):
    gpt_oss = quantization.fit_on_gpu("gpt-oss-120b", gpu=big_gpu.value)
    _mx = next(r for r in gpt_oss if r["scheme"] == "mxfp4")
    mo.vstack([plots.table(pd.DataFrame(quant_figures.fit_rows(gpt_oss)),
                           "computed from gpt-oss-120b config.json (helpers.formulas.quantization.fit_on_gpu)"),
               plots.table(pd.DataFrame(quantization.checkpoint_rows(_mx["weight_bytes"], quantization.GPT_OSS_120B_CHECKPOINT_BYTES)),
                           "the MXFP4 prediction against the tensors of openai/gpt-oss-120b on the Hub "
                           "(total_size of its safetensors index)")])
    return (gpt_oss,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **Reading the tables.** `fits`: one 4,096-token sequence fits beside the weights; the last column is
    the longest single sequence the room holds. The prediction counts packed 4-bit experts, one scale byte
    per 32 and the rest at 2 bytes: `predicted − checkpoint` is 0 (a test pins it).
    """)
    return


@app.cell
def _(gpt_oss):
    _fig, _ax = plots.figure(width=6.5)
    _colors = [plots.FITS if f["fits"] else plots.OOM for f in gpt_oss]
    _gb = [f["weight_bytes"] / 1e9 for f in gpt_oss]
    _ax.bar([f["scheme"] for f in gpt_oss], _gb, color=_colors)
    _ax.axhline(gpt_oss[0]["memory_bytes"] / 1e9, **{**plots.DATASHEET_STYLE, "ls": "-"})
    _ax.axhline(gpt_oss[0]["usable_bytes"] / 1e9, **plots.DATASHEET_STYLE)
    _ax.annotate(f"one {gpt_oss[0]['gpu']}, as CUDA reports it", (1.01, gpt_oss[0]["memory_bytes"] / 1e9),
                 xycoords=("axes fraction", "data"), va="bottom", fontsize=8)
    _ax.annotate("less the runtime reserve", (1.01, gpt_oss[0]["usable_bytes"] / 1e9),
                 xycoords=("axes fraction", "data"), va="top", fontsize=8)
    for _i, _w in enumerate(_gb):
        _ax.text(_i, _w / 2, f"{_w:,.1f} GB", ha="center", color="white", fontsize=9)
    _ax.set_ylabel(plots.byte_label("GB", "weights"))
    _ax.set_title("GPT-OSS-120B weights by scheme (green: fits)", fontsize=10)
    plots.finish(_fig, "computed from gpt-oss-120b config.json (helpers.formulas.memory.weight_bytes; budget: helpers.capacity.plan)")  # stamped, and closed so Jupyter shows it once
    _fig
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Exercises
    """)
    return


@app.cell
def _():
    _n, _dq = memory.weight_bytes("mistral-7b-v0.1", "nf4"), memory.weight_bytes("mistral-7b-v0.1", "nf4-dq")
    notebook.exercise(1, """How many bytes does double quantization save on Mistral 7B?
    `python -m helpers weights --model mistral-7b-v0.1 --dtype nf4`, then `--dtype nf4-dq`. Where do the
    saved bytes come from?""", f"""
    nf4: {fmt_bytes(_n.bytes)}, of which {fmt_bytes(_n.metadata_bytes)} of metadata; nf4-dq: {fmt_bytes(_dq.bytes)},
    metadata {fmt_bytes(_dq.metadata_bytes)}. The **{fmt_bytes(_n.bytes - _dq.bytes)}** saved are all metadata: the
    4-bit codes are the same, but the per-block absmax scales are stored in 8 bits (with a second, small
    level of fp32 scales) instead of 32.""")
    return


@app.cell
def _():
    _b = on_gpu.gpu_plan(weight_dtype="bf16", context=4096)
    _q = on_gpu.gpu_plan(weight_dtype="nf4", context=4096)
    _kv8 = capacity.plan(expected.REFERENCE_MODEL, expected.REFERENCE_GPU, weight_dtype="nf4", kv_dtype="fp8", context=4096)
    notebook.exercise(2, f"""On an {expected.REFERENCE_GPU}, what does nf4 change for serving Mistral 7B at 4,096 tokens:
    the decode step's floor and the largest batch? And an fp8 KV cache on top? `python -m helpers capacity --model
    mistral-7b-v0.1 --gpu "H100 SXM" --context 4096 --dtype nf4`, against `--dtype bf16`, then add `--kv-dtype fp8`.""", f"""
    Step floor at batch 1: {_b.step_floor_s * 1e3:,.2f} ms in bf16, {_q.step_floor_s * 1e3:,.2f} ms in nf4
    ({_b.step_s * 1e3:,.2f} and {_q.step_s * 1e3:,.2f} ms at the planner's {term("efficiency")} {_b.efficiency:g}).
    Largest batch: {_b.max_batch:,} in bf16, {_q.max_batch:,} in nf4, {_kv8.max_batch:,} with an fp8 cache too: the
    freed memory ÷ the cache per sequence, which only the cache's dtype halves.""")
    return


@app.cell(hide_code=True)
def _(big_gpu, gpt_oss, results, results_on):
    _ran = {r.scheme: r for r in results if r.error is None}
    _q = _ran.get("nf4") or next(iter(list(_ran.values())[1:]), None) or results[0]
    _mx = next(f for f in gpt_oss if f["scheme"] == "mxfp4")
    _timed = _q is not results[0] and _q.speed and results[0].speed
    check_questions = [
        learner.Question(f"How many MB do the weights of this run's {_q.label} model take, measured ({results_on.model_name})?",
                         _q.footprint["measured_weight_bytes"] / 1e6, "MB"),
        (learner.Question(f"By the {regime.MARGIN:.0%} margin, is this run's {_q.label} decode step below, at or above "
                          f"the {results[0].scheme} reference's?",
                          regime.label(regime.ratio(_q.speed["itl_s"], results[0].speed["itl_s"])), options=regime.LABELS)
         if _timed else
         learner.Question(f"How many bytes of scales does the {_q.label} model of this run hold, as predicted?",
                          _q.footprint.get("metadata_bytes", 0), "B")),
        learner.Question(f"On one {big_gpu.value}, how many 4,096-token sequences fit beside GPT-OSS-120B's MXFP4 weights?",
                         _mx["max_batch"], "sequences"),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "change the GPU above and the last changes with it")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Takeaways

    - Quantization shrinks what it touches, predictably to the byte, scales included.
    - A quantized step is shorter only where reading the weights sets its time. Measure on the hardware you
      will serve on.
    - Quality is checked, not assumed: perplexity, KL and top-1 on your own text, then a task benchmark.
    - Quantization-aware training learns weights that survive the rounding: GPT-OSS was "post-trained with
      quantization of the MoE weights to MXFP4" (its model card).
    - A quantized KV cache buys users or context; a path that dequantizes it every step costs time.
    """)
    return


@app.cell(hide_code=True)
def _():
    expected.sources(more=(
        "bitsandbytes 0.50.2 (installed): `autograd/_functions.py`, `functional.py`, `backends/{cpu,default,cuda}/ops.py`; "
        "`csrc/cpu_ops.cpp` at tag 0.50.1, <https://github.com/bitsandbytes-foundation/bitsandbytes>",
        "LLM.int8(), <https://arxiv.org/abs/2208.07339>; QLoRA §3, <https://arxiv.org/abs/2305.14314>",
        "AWQ, <https://arxiv.org/abs/2306.00978>; AutoAWQ `awq/modules/linear/gemm.py`, <https://github.com/casper-hansen/AutoAWQ>",
        "GPTQ, <https://arxiv.org/abs/2210.17323>; Marlin, <https://arxiv.org/abs/2408.11743>",
        "KIVI, <https://arxiv.org/abs/2402.02750>; transformers 5 `cache_utils.py`; vLLM's Quantized KV Cache, "
        "<https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/>",
        "OpenAI's gpt-oss model card; openai/gpt-oss-120b's `model.safetensors.index.json`; OCP Microscaling Formats v1.0",
    ))
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
