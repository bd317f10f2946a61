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
    from helpers.formulas import memory, quantization, specs, verdicts
    from helpers.measure import local_models, models, quality as quality_measures, quant
    from helpers.present.glossary import term
    from helpers.formulas.units import fmt_bytes
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 05 · Weight quantization

    **What you will learn**

    1. What {term("int8")}, {term("nf4")} and {term("double quantization")} store, and to predict a quantized
       model's bytes exactly — {term("scales", "scale")} included.
    2. Why quantized {term("decode")} can be *slower* on a CPU and can be faster on a GPU, with a kernel that
       dequantizes as it reads: {term("dequantization")} kernels.
    3. How to check quality against the unquantized model ({term("perplexity")}, {term("KL divergence")},
       {term("top-1 agreement")}), and which formats serving engines use ({term("AWQ")}, {term("GPTQ")} with
       {term("Marlin")}, {term("FP8")}).
    4. Whether a 120 B-parameter model fits on one 80 GB GPU ({term("MXFP4")}).

    {run_times.header("05")}

    After each measurement, **What you should see** says what this run's numbers show, by a rule from the
    numbers above it, then what a GPU shows, each GPU sentence labelled computed, cited or recorded.

    Store the weights in fewer bits and the model takes less memory — and, where decoding is
    {term("memory-bound")} (limited by how fast the weights stream from memory), it can run faster. This notebook loads the active
    profile's model four ways, **in one run**, and measures each:

    | scheme | what bitsandbytes stores for each `nn.Linear` weight in the decoder blocks |
    | --- | --- |
    | reference | {term("bf16")} on a GPU ({term("fp32", "bf16")} on a CPU: the tiny profiles' dtype there, `helpers.measure.models.default_dtype`) |
    | `int8` | LLM.int8(): 1 byte per weight + one fp32 scale per output row; its {term("outlier features")} multiplied in 16 bits |
    | `nf4` | 4-bit NormalFloat: ½ byte per weight + one fp32 absmax per block of 64 |
    | `nf4-dq` | nf4 with *double quantization*: the absmax themselves stored in 8 bits |

    Three questions for each: **how big** is the loaded model (measured, against `helpers.formulas.memory`'s
    prediction), **how fast** ({term("prefill")} and decode), and **how different** its predictions are from
    the reference on a fixed text shipped in the repository. Then the headline case: does GPT-OSS-120B
    fit on one 80 GB GPU?
    """)
    return


@app.cell
def _():
    loaded = models.load()
    return (loaded,)


@app.cell(hide_code=True)
def _(loaded):
    _ref = ("fp32 — the dtype the tiny profiles run in on a CPU (`helpers.measure.models.default_dtype`), so the "
            "reference (and what bitsandbytes leaves unquantized) is fp32 here" if loaded.dtype == "fp32" else loaded.dtype)
    compare_button = replay.run_button()
    _own = quant.sizes_for(loaded.profile, loaded.device).prompt_tokens
    compare_prompt = mo.ui.dropdown(options=[str(n) for n in sorted({32, 128, 512, _own})], value=str(_own),
                                    label=f"prompt length of the speed runs (tokens; {_own} is this device's recorded size)")
    mo.vstack([mo.md(f"""
    **Model:** {loaded.label}
    **Reference dtype:** {_ref}.
    bitsandbytes quantizes while loading a checkpoint, so each quantized copy is loaded from the
    same weights as the reference{" (for `mistral-7b-random`, a copy saved once to the workshop cache)" if loaded.profile == "mistral-7b-random" else ""}.
    **Run live** loads and measures the four models (`helpers.measure.quant.compare`): the footprint, speed and
    quality sections below all read that one run. The prompt length sets the prefill the speed section times;
    at another length than the recorded one, the run waits for **Run live**.
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

    The model's own bytes — its parameters as stored (packed when quantized), bitsandbytes'
    quantization states (row scales, absmax, code books) and its buffers (the rotary tables) — not
    the device's total, which also counts the allocator's cache and everything else running.
    `predicted` is `helpers.formulas.memory.weight_bytes(spec, scheme)`, metadata included; the two must agree
    to the byte.
    """), nf4_box])
    return (nf4_box,)


@app.cell
def _(results, results_on, results_source):
    footprints = pd.DataFrame(quant_figures.footprint_rows(results, results_on.spec, results_on.label))
    plots.table(footprints.drop(columns="measured on", errors="ignore"), f"{plots.source_label(results_source)}; "
                "predicted: helpers.formulas.memory.weight_bytes")
    return (footprints,)


@app.cell(hide_code=True)
def _(results, results_on):
    expected.should_see(quant.footprint_verdicts(results, results_on.spec), quant_figures.footprint_on_gpu())
    return


@app.cell(hide_code=True)
def _(results_on):
    _tiny = quantization.embedding_share(results_on.spec)
    _m7 = quantization.embedding_share("mistral-7b-v0.1")
    _m7_int8 = next(w for w in quantization.preset_footprints("mistral-7b-v0.1") if w.scheme == "int8")
    mo.md(f"""
    **What bitsandbytes leaves alone, and the rule of thumb "int8 halves, nf4 quarters".** The rule of thumb
    counts every weight at the scheme's bits; bitsandbytes quantizes the `nn.Linear` layers of the decoder
    blocks only, and the input embedding and the output head stay in the reference dtype. In this model
    they are **{_tiny.embedding_and_head:,} of {_tiny.params:,} parameters:
    {verdicts.share(_tiny.embedding_and_head, _tiny.params)}**. In Mistral 7B they are
    {_m7.embedding_and_head:,} of {_m7.params:,}: {verdicts.share(_m7.embedding_and_head, _m7.params)}; there
    {quantization.against_rule_of_thumb(_m7_int8.vs_first, "int8")} — computed below from its config, at a bf16 base.
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
    _w = memory.weight_bytes("mistral-7b-v0.1", "nf4")
    _e = quantization.embedding_share("mistral-7b-v0.1")
    _bf16 = memory.weight_bytes("mistral-7b-v0.1", "bf16").bytes
    learner.beside(nf4_box, _given, _w.bytes / 1e9, shown=lambda v: f"{v:,.2f} GB",
        higher=f"nf4 stores ½ byte per quantized weight plus one fp32 absmax per 64 of them "
               f"({fmt_bytes(_w.metadata_bytes)} of scales), and the embedding and the head, "
               f"{_e.embedding_and_head:,} parameters, stay in bf16: not the rule of thumb's ¼ of "
               f"{fmt_bytes(_bf16)}.",
        lower=f"Only the decoder blocks' linear layers shrink to ½ byte per weight; their scales add "
              f"{fmt_bytes(_w.metadata_bytes)}, and the rest stays at 2 bytes.",
        within="The codes at ½ byte, the scales, and the bf16 embedding and head, as counted above.")
    return


@app.cell(hide_code=True)
def _():
    _newline = chr(10)
    mo.md(f"""
    Every preset, computed the same way. transformers 5 keeps a {term("mixture-of-experts", "moe")} model's experts as fused
    3-D tensors, and bitsandbytes replaces only `nn.Linear` layers, so in the presets with experts:

    {_newline.join(f"- {quantization.left_alone(m)};" for m in quantization.moe_presets())}

    For those, the experts need a scheme of their own, such as GPT-OSS's MXFP4 (last section).
    """)
    return


@app.cell
def _():
    all_presets = pd.DataFrame(quant_figures.presets_rows())
    plots.table(all_presets, "computed from each config.json, bf16 base (helpers.formulas.quantization.preset_footprints)")
    return


@app.cell
def _(
    footprint_model,
    footprints,
    preset_footprints,
    results_on,
    results_source,
):
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
    _ref = results[0].scheme
    step_box = learner.prediction(f"On this device, how long does the nf4 model's decode step take, as a multiple of the "
                                  f"{_ref} reference's (0.5 would be half the time)?", "×")
    mo.vstack([mo.md(f"""
    ## Speed: prefill and decode, side by side

    {term("Greedy decoding", "greedy-decoding")} with a real {term("KV cache", "kv-cache")}, the same prompt from the
    evaluation text for every model.
    Prefill is the time to the first token; decode is one token per step, reported as tokens/s
    (1 / median step time). On a CPU the models take turns, round by round, so a busy machine slows
    them all alike. bitsandbytes' CPU kernels are not its GPU kernels: compare the schemes with each
    other on *this* device, not with a GPU. Where a kernel rebuilds each matrix before it multiplies, the rebuilding
    is paid once per matmul call, whatever the number of tokens, while the multiplying grows with them: the prompt
    length above sets how many tokens share one rebuilding in the prefill.
    """), step_box])
    return (step_box,)


@app.cell
def _(results, results_on, results_source):
    speeds = pd.DataFrame(quant_figures.speed_rows(results, results_on.label))
    plots.table(speeds.drop(columns="measured on", errors="ignore"), f"{plots.source_label(results_source)}; medians")
    return (speeds,)


@app.cell
def _(results_source, speeds):
    _fig, (_a, _b) = plots.figure(ncols=2, width=5.0)
    _names = speeds["scheme"].str.replace("bitsandbytes ", "")
    plots.bars(_a, _names, speeds["prefill (ms)"], plots.MEASURED)
    _a.set_ylabel(f"prefill of {int(speeds['prompt tokens'].iloc[0])} tokens (ms)")
    _a.set_title("prefill (lower is faster)", fontsize=9)
    plots.bars(_b, _names, speeds["decode (tokens/s)"], plots.MEASURED)
    _b.set_ylabel("decode (tokens/s, batch 1)")
    _b.set_title("decode (higher is faster)", fontsize=9)
    plots.finish(_fig, results_source, title="Speed by scheme")  # stamped, and closed so Jupyter shows it once
    _fig
    return


@app.cell
def _(results, results_on, step_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 0.5); in marimo, type it in the box above
    _ref = results[0]
    _nf4 = next((r for r in results if r.scheme == "nf4" and r.error is None and r.speed), None)
    if _nf4 is None or not _ref.speed:
        _out = mo.md("_The prediction's result needs the nf4 model's decode timing, which did not run here._")
    else:
        _bytes = quant.streamed_bytes(_nf4, results_on.spec, _ref.scheme) / quant.streamed_bytes(_ref, results_on.spec, _ref.scheme)
        _out = learner.beside(step_box, _given, _nf4.speed["itl_s"] / _ref.speed["itl_s"], shown=lambda v: (
            f"{v:.2f}× ({_nf4.speed['itl_s'] * 1e3:,.1f} against {_ref.speed['itl_s'] * 1e3:,.1f} ms)"),
            higher=f"nf4 reads {_bytes:.2f}× the reference's weight bytes, but a step is shorter by the bytes only "
                   "where reading them sets its time and the kernel dequantizes as it reads; bitsandbytes rebuilds "
                   "each block in the compute dtype and then multiplies.",
            lower=f"nf4 reads {_bytes:.2f}× the reference's weight bytes; with a kernel that dequantizes as it reads, a "
                  "step set by reading its weights takes time in proportion to them.",
            within=f"The step against its bytes ({_bytes:.2f}× the reference's) is read below.")
    _out
    return


@app.cell(hide_code=True)
def _(compare_run, results, results_on):
    _roof = quant_figures.datasheet_bandwidth(compare_run, results_on.device)
    _here = (quant.speed_verdicts(results, results_on.spec, *(_roof or ()))
             or ["only the reference ran, so there is nothing to compare"])
    _why = ("""On a CPU, bitsandbytes' path **dequantizes** each weight matrix back to fp32 before its matmul:
    every step does the rounding's inverse on top of the same fp32 matmul, and writes the full-size matrix
    it just rebuilt. Quantization can only shorten a step that is bound by reading the weights, and only
    with a kernel that dequantizes on the fly, in registers."""
            if results_on.device == "cpu" else """On a GPU the outcome depends on the kernel: a step bound by
    reading the weights shortens in proportion to the bytes *if* the kernel dequantizes in registers as it
    reads (Marlin, FP8 tensor cores); bitsandbytes' int8 (LLM.int8()) splits every matmul around outlier
    features, and its nf4 kernel dequantizes each block before it multiplies.""")
    mo.vstack([expected.should_see(_here, quant_figures.speed_on_gpu()), mo.md(_why)])
    return


@app.cell
def _():
    quant_floors = on_gpu.quantized_decode_floors()
    plots.table(on_gpu.quantized_decode_frame(quant_floors), f"computed: Mistral 7B v0.1 on an {expected.REFERENCE_GPU}, batch 1, 1,024 tokens "
                              "cached — the capacity planner's memory-bound floor at the datasheet's bandwidth")
    return (quant_floors,)


@app.cell(hide_code=True)
def _(quant_floors):
    _f = {r.scheme: r for r in quant_floors}
    _vs = lambda s: verdicts.speed(_f[s].step_floor_ms, _f["bf16"].step_floor_ms, "shorter", "longer", "as long")  # noqa: E731
    mo.md(f"""
    **On a GPU, computed.** For Mistral 7B a decode step at batch 1 is {term("memory-bound")} (notebook 03), so
    its floor falls with the weight bytes: against bf16's, fp8's floor is {_vs("fp8")}, int8's {_vs("int8")},
    nf4's {_vs("nf4")} — a kernel reaches them only at an {term("MBU")} of 100 %: reading the packed weights at full
    bandwidth and dequantizing in registers. Run this notebook on a GPU (`WORKSHOP_PROFILE=mistral-7b`, or `mistral-7b-random`
    without a download) to see how close bitsandbytes gets; `make gpu-record` saves that run under
    `workshop/results/<gpu>/`. Serving engines use formats built for this:

    | format | what it stores | kernel in vLLM / SGLang | trades |
    | --- | --- | --- | --- |
    | {term("AWQ")} (Lin et al. 2024) | 4-bit weights in groups of 128, one fp16 scale and zero point per group; salient channels scaled before rounding | Marlin (or AWQ's own GEMM) | a small calibration set; weight-only, activations stay 16-bit; at large batches the step is compute-bound, and the bytes saved no longer set its time |
    | {term("GPTQ")} + {term("Marlin")} (Frantar et al. 2023, 2024) | 4-bit (or 8-bit) weights per group, rounded column by column with error correction from calibration data | Marlin: dequantizes in registers as it reads the packed weights | calibration time and data; weight-only |
    | {term("FP8")} (E4M3) | 8-bit floats for weights and, optionally, activations, with per-tensor or per-channel scales | native FP8 tensor cores (Hopper, Ada, Blackwell) | halves weights *and* matmul cost, so prefill speeds up too; needs a GPU with FP8; twice the bytes of 4-bit |

    bitsandbytes (this notebook) needs no calibration and quantizes while loading: it is built for fitting a
    model into memory, not for serving it at the memory floor. The planner prices fp8 with the GPU's
    FP8 peak (`python -m helpers capacity --model mistral-7b-v0.1 --gpu "H100 SXM" --dtype fp8`).
    """)
    return


@app.cell(hide_code=True)
def _(results, results_on):
    _ref = results[0].quality
    _vocab = results_on.spec.vocab_size
    _random = (f"""
    **This model has random weights: its absolute figures mean nothing.** Its perplexity is
    {verdicts.times_as(_ref["perplexity"], _vocab, f"the vocabulary's size ({_vocab:,}, what a uniform guess scores)")},
    and its next-token distributions spread over the whole vocabulary, so the top-ranked token is decided by
    margins that rounding can flip: a disagreement there says nothing about the scheme.""")
    _caveat = {
        "tiny": _random + """ The same measures on the same model *trained* (profile `tiny-trained`) follow
    the table.
    """,
        "mistral-7b-random": _random + """ What carries over to a trained model is the mechanism. Run with
    `WORKSHOP_PROFILE=mistral-7b` for figures that mean something.
    """,
        "tiny-trained": """
    **This is the tiny model trained for about a minute on Jane Austen's *Persuasion*** (profile
    `tiny-trained`): the text below is its held-out last chapter, which it never saw. Its figures
    mean something for this text — a toy model, but one whose next-token distributions are peaked,
    so a flipped top token is a real change, not a tie broken by rounding.
    """,
    }.get(results_on.profile, f"""
    Trained weights: these figures mean what they say, for this text. {_ref["positions"]:,} positions are
    a smoke test, not a benchmark — check a scheme on your own task before you ship it.
    """)
    _text = ("the opening of the last chapter of *Persuasion* (held out from the tiny model's training; "
             "`helpers.measure.texts.heldout_eval_text()`)" if results_on.profile in ("tiny", "tiny-trained") else
             "the fixed text in `helpers/data/eval_text.txt` (original prose written for this repository, "
             "public domain)")
    mo.md(f"""
    ## Quality against the reference

    On {_text}, every position predicts the next token. For each scheme:

    - **perplexity** — exp(mean negative log-likelihood of the actual next token); lower is better;
    - **KL(p_ref ‖ p_q)** — how far the quantized model's next-token distribution is from the
      reference's, in nats, averaged over positions (0 = identical);
    - **top-1 agreement** — the share of positions where both rank the same token first.
    {_caveat}
    """)
    return


@app.cell
def _(results, results_on):
    quality = pd.DataFrame(quant_figures.quality_rows(results, results_on.label))
    mo.vstack([quality, expected.should_see(quant.quality_verdicts(results))])
    return (quality,)


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
            "trained_quality": (quant_figures.quality_rows(quant.compare(trained, timing=False), trained.label)
                                if loaded.profile == "tiny" else None)}


@app.cell
def _(compare_button, loaded):
    pair_run = replay.measure("05/random_vs_trained", random_against_trained, loaded, run=compare_button.value,
                              profile=loaded.profile, device=loaded.device)
    pair = pair_run.value
    if pair is None:
        perplexities, training_log = None, None
        _out = mo.md("*The random-against-trained comparison runs on the tiny profiles (`tiny`, `tiny-trained`); "
                     "this profile's table above is its own.*")
    else:
        perplexities, training_log = pair["perplexities"], pair["log"]
        _out = plots.table(pd.DataFrame(quant_figures.perplexity_rows(perplexities)), plots.source_label(
            pair_run.source("measured: tiny and tiny-trained · fp32 · " + loaded.device)))
    _out
    return pair, pair_run, perplexities, training_log


@app.cell(hide_code=True)
def _(pair_run):
    pair_run.note()
    return


@app.cell
def _(perplexities, training_log):
    if perplexities is None:
        _out = mo.md("")
    else:
        _p = {p.profile: p.perplexity for p in perplexities}
        _log = training_log
        _random_v, _gain = quality_measures.trained_against_random(_p["tiny"], _p["tiny-trained"],
                                                                   perplexities[-1].perplexity)
        _out = mo.vstack([mo.md(f"""
    ### Random against trained, same architecture, same text

    The random model's perplexity is **{_p["tiny"]:,.0f}** (a uniform guess over the vocabulary scores
    exactly {perplexities[-1].perplexity:,.0f}); after {_log["recipe"]["steps"]} steps on
    {_log["tokens_seen"]:,} tokens of *Persuasion*, the same model scores **{_p["tiny-trained"]:,.1f}** on a
    chapter it never saw. A toy that has learned Austen's commonest words and turns of phrase, not a
    language model you would use; a model that has learned something ranks some tokens above the rest, and
    that is what makes the quantization figures below mean something.
    """), expected.should_see([_random_v, _gain])])
    _out
    return


@app.cell
def _(pair, quality, results_on):
    # int8 and nf4 on the trained model: the table above when the profile is tiny-trained; measured with the
    # random-against-trained comparison (footprint and quality, no timing) when the profile is the random tiny.
    if results_on.profile == "tiny-trained":
        trained_quality, _out = quality, None
    elif pair is not None and pair["trained_quality"] is not None:
        trained_quality = pd.DataFrame(pair["trained_quality"])
        _out = trained_quality
    else:
        trained_quality, _out = None, None
    _out
    return (trained_quality,)


@app.cell
def _(quality, results_on, trained_quality):
    _out = mo.md("")
    if trained_quality is not None:
        _q = trained_quality.set_index("scheme")
        if {"bitsandbytes int8", "bitsandbytes nf4"} <= set(_q.index):
            _kl = "KL(ref ‖ q) mean (nats)"
            _here = [quant.closer({"int8": _q.loc["bitsandbytes int8", _kl], "nf4": _q.loc["bitsandbytes nf4", _kl]})]
            if results_on.profile == "tiny" and "bitsandbytes nf4" in set(quality["scheme"]):
                _here.append(quant.flips_against(_q.loc["bitsandbytes nf4", "top-1 agreement"],
                                                 quality.set_index("scheme").loc["bitsandbytes nf4", "top-1 agreement"],
                                                 "nf4"))
            _out = mo.vstack([mo.md(f"""
    **On the trained model** ({_q["measured on"].iloc[0]}): int8 keeps 8 bits per weight and one scale per
    row, nf4 4 bits and one scale per 64 weights; on a random model a flipped top token is a tie broken by
    rounding, on a trained one it is a change of answer."""), expected.should_see(_here)])
    _out
    return


@app.cell(hide_code=True)
def _():
    _gpus = ["H100 SXM", "H200", "B200", "MI300X", "A100 80GB", "L40S"]
    big_gpu = mo.ui.dropdown(options=_gpus, value=notebook.env_default("WORKSHOP_BIG_GPU", "H100 SXM", _gpus),
                             label="the one GPU")
    mo.vstack([mo.md("## A big model on one GPU: GPT-OSS-120B"), big_gpu,
               notebook.static_note({"WORKSHOP_BIG_GPU": "the GPU (" + ", ".join(_gpus) + ")"})])
    return (big_gpu,)


@app.cell(hide_code=True)
def _(big_gpu):
    _rows = quantization.fit_on_gpu("gpt-oss-120b", gpu=big_gpu.value)
    _mx = next(r for r in _rows if r.scheme == "mxfp4")
    _pub = quantization.GPT_OSS_120B_CHECKPOINT_BYTES
    _ctx = _mx.longest_sequence
    _users4k = _mx.max_batch
    _spec, _pb = specs.get_spec("gpt-oss-120b"), specs.param_breakdown("gpt-oss-120b")
    _sliding = sum(t == "sliding_attention" for t in _spec.layer_types)
    _full_share = (_spec.num_layers - _sliding) / _spec.num_layers
    _g = capacity.plan("gpt-oss-120b", _mx.gpu, weight_dtype="mxfp4")
    _fits_text = (f"{_users4k} sequences of 4,096 tokens at once, or one full {_ctx:,}-token context"
                  if _mx.fits else "not one sequence of 4,096 tokens")
    mo.md(f"""
    GPT-OSS-120B has {_pb.total / 1e9:,.1f} B parameters, {_pb.experts / _pb.total:.0%} of them in its
    {_spec.num_experts} experts per layer. OpenAI ships the
    experts in **MXFP4** — 4-bit values in blocks of 32 sharing one 8-bit scale — and everything else
    (attention, router, embeddings, norms) in bf16. From its config, with `helpers.formulas.memory.weight_bytes`:
    bf16 everywhere, fp8 for every matrix, or MXFP4 experts. The GPU: an {_mx.gpu}, labelled
    {_g.memory_label_gb:g} GB but reporting {_mx.memory_bytes / 1e9:.2f} GB to CUDA, less a runtime reserve
    for the CUDA context, activations and the allocator — the budget the capacity planner counts
    (`helpers.capacity.plan`, which `helpers.formulas.quantization.fit_on_gpu` calls: vLLM's default
    {term("gpu_memory_utilization")} of {capacity.GPU_MEMORY_UTILIZATION} less
    {capacity.RUNTIME_OVERHEAD_BYTES / 1e9:.1f} GB), leaving {_mx.usable_bytes / 1e9:.2f} GB.

    **Independent check:** the MXFP4 prediction against the bytes of tensors the checkpoint on the Hub
    holds (`total_size` of its safetensors index): {quantization.checkpoint_check(_mx.weight_bytes, _pub)}. The
    prediction counts what the checkpoint stores: the expert matrices as packed 4-bit blocks plus one
    scale byte per 32 values, the rest at 2 bytes.

    **What is left.** In MXFP4 the weights leave {_mx.kv_budget_bytes / 1e9:.2f} GB for the KV
    cache (the planner's `kv_budget_bytes_per_gpu`): {_fits_text}
    ({_sliding} of GPT-OSS's {_spec.num_layers} layers slide over {_spec.sliding_window:,} tokens, so a long
    sequence costs {_full_share:.0%} as much per token as it would with every layer full).
    """)
    return


@app.cell
def _(big_gpu):
    gpt_oss = quantization.fit_on_gpu("gpt-oss-120b", gpu=big_gpu.value)
    plots.table(pd.DataFrame(quant_figures.fit_rows(gpt_oss)),
                "computed from gpt-oss-120b config.json (helpers.formulas.quantization.fit_on_gpu)")
    return (gpt_oss,)


@app.cell
def _(gpt_oss):
    _fig, _ax = plots.figure(width=6.5)
    _colors = [plots.FITS if f.fits else plots.DOES_NOT_FIT for f in gpt_oss]
    _gb = [f.weight_bytes / 1e9 for f in gpt_oss]
    _ax.bar([f.scheme for f in gpt_oss], _gb, color=_colors)
    _ax.axhline(gpt_oss[0].memory_bytes / 1e9, **{**plots.DATASHEET_STYLE, "ls": "-"})
    _ax.axhline(gpt_oss[0].usable_bytes / 1e9, **plots.DATASHEET_STYLE)
    _ax.annotate(f"one {gpt_oss[0].gpu}, as CUDA reports it", (1.01, gpt_oss[0].memory_bytes / 1e9),
                 xycoords=("axes fraction", "data"),
                 va="bottom", fontsize=8)
    _ax.annotate("less the runtime reserve", (1.01, gpt_oss[0].usable_bytes / 1e9),
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
    notebook.exercise(2, f"""On an {expected.REFERENCE_GPU}, what does nf4 change for serving Mistral 7B at 4,096 tokens:
    the decode step's floor and the largest batch? `python -m helpers capacity --model mistral-7b-v0.1 --gpu
    "H100 SXM" --context 4096 --dtype nf4`, against `--dtype bf16`.""", f"""
    Step floor at batch 1 (the datasheet's bandwidth): {_b.step_floor_s * 1e3:,.2f} ms in bf16,
    {_q.step_floor_s * 1e3:,.2f} ms in nf4 ({_b.step_floor_s / _q.step_floor_s:,.1f}× shorter, if a kernel reads
    4-bit weights at full bandwidth); the step the planner prints at {term("efficiency")} {_b.efficiency:g} is
    {_b.step_s * 1e3:,.2f} ms and {_q.step_s * 1e3:,.2f} ms. Largest batch of
    4,096-token sequences: {_b.max_batch:,} in bf16, {_q.max_batch:,} in nf4 — the weights shrink, the cache per
    sequence does not, so the batch grows by the freed memory ÷ the cache per sequence, not 4×.""")
    return


@app.cell(hide_code=True)
def _(big_gpu, gpt_oss, results, results_on):
    _ran = {r.scheme: r for r in results if r.error is None}
    _q = _ran.get("nf4") or next(iter(list(_ran.values())[1:]), None) or results[0]
    _mx = next(f for f in gpt_oss if f.scheme == "mxfp4")
    _timed = _q is not results[0] and _q.speed and results[0].speed
    check_questions = [
        learner.Question(f"How many MB do the weights of this run's {_q.label} model take, measured ({results_on.model_name})?",
                         _q.footprint["measured_weight_bytes"] / 1e6, "MB"),
        (learner.Question(f"In this run, is the {_q.label} decode step shorter, about as long or longer than the "
                          f"{results[0].scheme} reference's (by the {verdicts.CHANGE_MARGIN:.0%} rule)?",
                          verdicts.change_words(_q.speed["itl_s"] / results[0].speed["itl_s"], higher="longer",
                                                lower="shorter", within="about as long"),
                          options=("shorter", "about as long", "longer")) if _timed else
         learner.Question(f"How many bytes of scales does the {_q.label} model of this run hold, as predicted?",
                          _q.footprint.get("metadata_bytes", 0), "B")),
        learner.Question(f"On one {big_gpu.value}, how many 4,096-token sequences fit beside GPT-OSS-120B's MXFP4 weights?",
                         _mx.max_batch, "sequences"),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "change the GPU above and the last changes with it")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _(results, results_on):
    _f = {w.scheme: w for w in quantization.preset_footprints("mistral-7b-v0.1")}
    _fp = quant.footprint_verdicts(results, results_on.spec)
    _sp = quant.speed_verdicts(results, results_on.spec)
    _int8 = next((v for v in _fp if v.rule == "against_rule_of_thumb"), None)
    mo.md(f"""
    ## Takeaways

    - Quantization shrinks what it touches: on Mistral 7B, where the linear layers are
      {_f["int8"].quantized_share:.0%} of the parameters, int8 takes the weights to
      {_f["int8"].vs_first:.0%} of bf16 and nf4 to {_f["nf4"].vs_first:.0%}, scales included (double
      quantization stores the scales in 8 bits: nf4-dq {_f["nf4-dq"].vs_first:.0%}). In this run's model,
      {_fp[-1]}{f"; {_int8}" if _int8 else ""}.
    - Measured against predicted, metadata included: {_fp[0]} — the formula that is checked here is the one
      that prices models you have not loaded.
    - Speed depends on the kernels and the device: measure on the hardware you will serve on. Here, the
      {_sp[0] if _sp else "reference alone ran"}.
    - Quality is an assumption to check, not a given: perplexity, KL against the unquantized model
      and top-1 agreement on your own text are first checks before a task benchmark.
    - Post-training quantization (as here) needs no training and checks quality afterwards.
      Training with the quantization in the loop learns weights that survive the rounding: GPT-OSS
      was post-trained with its MoE weights already in MXFP4, and its published evaluations are of
      that MXFP4 model (OpenAI's gpt-oss model card).
    - Serving engines quantize with kernels built for it — AWQ or GPTQ through Marlin, FP8 on tensor
      cores — so that a memory-bound step's time can fall with its bytes.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
