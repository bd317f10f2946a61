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

    from helpers.formulas import verdicts
    from helpers.formulas.specs import get_spec
    from helpers.measure import models
    from helpers.present import expected, learner, notebook, plots, replay
    from helpers.present.glossary import term
    from helpers.parallel import collectives, kv_offload, links, offload, sim, tp_demo, views as par_views
    from helpers.parallel import plan as par
    from helpers.serving import traces
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 09 · Beyond one GPU: parallelism and what it costs to talk, disaggregated prefill and decode, MoE, KV offload

    The planner of notebook 04 split a model over N GPUs for free. Here the GPUs talk, and talking costs
    time.

    **What you will learn**

    1. What a ring {term("all-reduce")} costs over {term("NVLink")}, {term("PCIe")} and {term("InfiniBand")}
       (derived term by term), and what that does to {term("tensor parallelism")}'s decode step (where the
       speed-up flattens), to {term("pipeline parallelism")}'s bubble and to the {term("all-to-all")} of a
       {term("mixture of experts", "moe")} split over GPUs ({term("expert parallelism")}).
    2. A tensor-parallel forward **run for real** in two processes on this machine over {term("gloo")}, equal to
       the one-process model — and where its time goes, measured part by part.
    3. When {term("disaggregating prefill and decode", "disaggregated-serving")} pays, in a simulation driven by
       the planner's step costs, read through {term("goodput")}, {term("SLO attainment", "slo-attainment")} and the
       {term("makespan")}.
    4. What {term("offloading the KV cache", "kv-offload")} to host memory costs per step, what evicting all but
       {term("attention sinks")} and a recent window saves and loses — and how vLLM, SGLang, NVIDIA Dynamo and
       llm-d do it (section 8).

    Before each central result you are asked for a **prediction**; the result shows it beside what was
    computed or measured. A self-check at the end asks three questions whose answers are this run's numbers.

    {run_times.header("09")}

    Throughout, a GPU's step is the capacity planner's (notebook 04) at an **{term("efficiency")} of
    {par.DEFAULT_EFFICIENCY:g}**: the step takes its floor (bytes ÷ the datasheet's bandwidth, or FLOPs ÷ its peak)
    ÷ {par.DEFAULT_EFFICIENCY:g}, i.e. an engine reaches half of what the datasheet promises (the worked example of
    Databricks' "LLM Inference Performance Engineering: Best Practices").
    """)
    return


@app.cell
def _():
    loaded = models.load()
    return (loaded,)


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 1 · Links, and what an all-reduce costs over them

    Each catalogued GPU's links, from `helpers/data/gpu_links.csv` (each row cites its datasheet): NVLink (with an
    NVSwitch) joins the GPUs of one server, PCIe joins a GPU to its host (and GPUs that have no NVLink), InfiniBand
    joins servers. Vendors print a link's bandwidth **summed over both directions**; a ring sends one way at a
    time, so the model uses half. The latency of one hop is {term("NCCL")}'s own figure (its cost model,
    `helpers.parallel.collectives`).

    An **all-reduce** leaves every GPU with the sum of all GPUs' tensors; tensor parallelism needs one after
    each layer's attention and each layer's MLP, to add the partial results the GPUs computed.
    """)
    return


@app.cell
def _():
    link_table = pd.DataFrame([{"GPU": l.gpu, "link": l.name, "scope": l.scope,
                                "GB/s both ways (datasheet)": l.bidirectional_gbs,
                                "GB/s each way": l.bandwidth / 1e9, "hop latency µs": l.hop_latency_us}
                               for g in ("L4", "A100 80GB", "H100 SXM", "H200", "B200", "MI300X")
                               for l in links.links(g)])
    plots.table(link_table, "helpers/data/gpu_links.csv (vendor datasheets; hop latency: NCCL tuning.cc)")
    return


@app.cell
def _():
    # 8 H100 SXMs in one server, each link kind; one decode all-reduce's message, from the step model itself:
    # batch × hidden × bytes per activation (Mistral 7B, batch 8)
    ar_gpus, ar_batch = 8, 8
    ar_links = {_kind: links.get_link("H100 SXM", _kind, ar_gpus) for _kind in ("nvlink", "pcie", "infiniband")}
    ar_spec = get_spec("mistral-7b-v0.1")
    decode_message = par.parallel_step(ar_spec.name, "H100 SXM", tp=ar_gpus, batch=ar_batch).all_reduce_bytes
    return ar_batch, ar_gpus, ar_links, ar_spec, decode_message


@app.cell(hide_code=True)
def _(ar_batch, ar_gpus, ar_links, ar_spec, decode_message):
    ar_box = learner.prediction(
        f"A decode step of Mistral 7B at batch {ar_batch} all-reduces {ar_batch} × {ar_spec.hidden_size:,} × "
        f"{par.ACTIVATION_BYTES} B = {decode_message:,} B after each attention and each MLP. Over {ar_gpus} H100 SXMs "
        f"joined by NVLink ({ar_links['nvlink'].bandwidth / 1e9:,.0f} GB/s each way), how long does one such "
        "all-reduce take?", "µs")
    ar_box
    return (ar_box,)


@app.cell(hide_code=True)
def _(ar_gpus, ar_links, decode_message):
    ar_parts = collectives.all_reduce_parts(decode_message, ar_gpus, ar_links["nvlink"])
    _p = ar_parts
    mo.md(f"""
    **The ring all-reduce, derived.** N GPUs sit on a ring and each cuts its M-byte message into N chunks.

    1. *Reduce-scatter*, N−1 steps: in each, every GPU sends one chunk (M/N bytes) to the next GPU and adds the
       chunk it receives to its own. After N−1 steps each GPU holds one chunk summed over all N.
    2. *All-gather*, N−1 more steps: the summed chunks travel round the ring until every GPU has all N.

    Each GPU has sent 2·(N−1) chunks of M/N bytes, **2·(N−1)/N · M bytes**, at the link's one-way bandwidth B.
    Each of the 2·(N−1) steps also waits one hop's latency α, and the call pays NCCL's base cost once:

        t = base + 2·(N−1)·α + 2·(N−1)/N · M ÷ B

    **Worked example** (`collectives.all_reduce_parts`): M = {_p.message_bytes:,.0f} B, N = {_p.gpus},
    {ar_links['nvlink'].name}: B = {ar_links['nvlink'].bandwidth / 1e9:,.0f} GB/s, α = {_p.hop_s * 1e6:g} µs,
    base = {_p.base_s * 1e6:g} µs.

    - the bytes: 2·{_p.gpus - 1}/{_p.gpus} × {_p.message_bytes:,.0f} = {_p.wire_bytes:,.0f} B, ÷ B = **{_p.bytes_s * 1e6:.2f} µs**
    - the latency: {_p.base_s * 1e6:g} + {_p.hops} × {_p.hop_s * 1e6:g} = **{_p.latency_s * 1e6:.2f} µs**
    - the two terms are equal at the **crossover** message M* = latency × B × N ÷ (2·(N−1)) =
      {_p.crossover_bytes:,.0f} B: below it latency is more than half the time, above it the bytes are
    - t = **{_p.total_s * 1e6:.2f} µs**: {_p.reading()}.
    """)
    return (ar_parts,)


@app.cell
def _(ar_box, ar_parts):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 0.5); in marimo, type it in the box above
    learner.beside(ar_box, _given, ar_parts.total_s * 1e6, shown=lambda v: f"{v:,.2f} µs",
        higher=f"The bytes alone take {ar_parts.bytes_s * 1e6:.2f} µs; the rest is latency — {ar_parts.hops} hops "
               "and the base cost, paid whatever the message's size.",
        lower=f"Each GPU sends 2·(N−1)/N × M = {ar_parts.wire_bytes:,.0f} B, less than twice the message whatever N, "
              f"and the {ar_parts.hops} hops with the base cost add {ar_parts.latency_s * 1e6:.2f} µs in all.",
        within="Latency and bytes, term by term as derived.")
    return


@app.cell
def _(ar_gpus, ar_links):
    _step = par.parallel_step("mistral-7b-v0.1", "H100 SXM", tp=ar_gpus, batch=128)
    _pc = collectives.all_reduce_parts(_step.all_reduce_bytes, ar_gpus, ar_links["pcie"])
    mo.vstack([mo.md(f"""
    **Problem.** The same model decodes a batch of 128 over {ar_gpus} H100 SXMs joined by
    {ar_links['pcie'].name} only ({ar_links['pcie'].bandwidth / 1e9:,.0f} GB/s each way, α =
    {ar_links['pcie'].hop_latency_us:g} µs). What is one all-reduce's message, how long does it take, and what share of
    it is latency?
    """), notebook.folded("Solution (computed by helpers.parallel.collectives.all_reduce_parts)", f"""
    - M = 128 × {get_spec('mistral-7b-v0.1').hidden_size:,} × {par.ACTIVATION_BYTES} B = {_pc.message_bytes:,.0f} B
    - the bytes: 2·{_pc.gpus - 1}/{_pc.gpus} × {_pc.message_bytes:,.0f} = {_pc.wire_bytes:,.0f} B ÷
      {ar_links['pcie'].bandwidth / 1e9:,.0f} GB/s = {_pc.bytes_s * 1e6:.2f} µs
    - the latency: {_pc.base_s * 1e6:g} + {_pc.hops} × {_pc.hop_s * 1e6:g} = {_pc.latency_s * 1e6:.2f} µs
    - the crossover on this link: {_pc.latency_s * 1e6:.2f} µs × {ar_links['pcie'].bandwidth / 1e9:,.0f} GB/s ×
      {_pc.gpus} ÷ (2·{_pc.gpus - 1}) = {_pc.crossover_bytes:,.0f} B
    - t = **{_pc.total_s * 1e6:.2f} µs**: {_pc.reading()}.

    Two of them per layer, {_step.all_reduces_per_step} per token: {_step.all_reduce_s * 1e3:.2f} ms of the step's
    {_step.step_s * 1e3:.2f} ms at tp={ar_gpus}.
    """)])
    return


@app.cell
def _(ar_gpus, ar_links, decode_message):
    _fig, _ax = plots.figure()
    _sizes = [2**k for k in range(10, 31, 2)]
    for _l in ar_links.values():
        _ax.loglog(_sizes, [collectives.all_reduce_s(m, ar_gpus, _l) * 1e6 for m in _sizes], marker="o", label=_l.label)
    _ax.axvline(decode_message, color="#888", ls=":",
                label=f"one decode all-reduce, Mistral 7B batch 8: {decode_message:,} B")
    _ax.set_xlabel("message (bytes)")
    _ax.set_ylabel(f"ring all-reduce over {ar_gpus} GPUs (µs)")
    _cross = [collectives.all_reduce_crossover_bytes(ar_gpus, _l) / 1e6 for _l in ar_links.values()]
    _ax.set_title(f"All-reduce time: latency decides below {min(_cross):,.1f}–{max(_cross):,.1f} MB, bandwidth above")
    _ax.legend(fontsize=8)
    plots.finish(_fig, "computed: helpers.parallel.collectives, H100 SXM links from gpu_links.csv")
    return


@app.cell(hide_code=True)
def _(ar_gpus, ar_links, decode_message):
    _nv, _pc, _ib = (ar_links[k] for k in ("nvlink", "pcie", "infiniband"))
    mo.vstack([mo.md(f"""
    A ring over {ar_gpus} GPUs pays 2·({ar_gpus}−1) hops whatever the message, and a hop costs {_nv.hop_latency_us:g} µs
    over NVLink, {_pc.hop_latency_us:g} µs over PCIe and {_ib.hop_latency_us:g} µs over InfiniBand; the bytes add
    2·(N−1)/N · M ÷ bandwidth. A decode step's all-reduce here carries {decode_message / 1e3:,.0f} kB.
    """), expected.should_see([], [expected.computed(str(v), "helpers.parallel.collectives (NCCL's alpha–beta model, "
                                                             "the links of gpu_links.csv)")
                                   for v in collectives.all_reduce_reading(decode_message, ar_gpus, ar_links)])])
    return


@app.cell(hide_code=True)
def _():
    _batches = [1, 8, 32, 128]
    tp_batch = mo.ui.dropdown(options=[str(b) for b in _batches], value=str(notebook.env_default("WORKSHOP_TP_BATCH", 8, _batches)),
                              label="batch (sequences decoded together)")
    tp_box = learner.prediction("Over PCIe only, how many times faster is Mistral 7B's decode step on 8 GPUs in tensor "
                                "parallel than on one, at the batch you picked? (At batch 128 one GPU cannot hold the "
                                "batch: the speed-up is over 2 GPUs.)", "×")
    mo.vstack([mo.md(f"""
    ## 2 · Tensor parallelism: the step, its all-reduces, and where the speed-up flattens

    Megatron-style tensor parallelism (Megatron-LM, Shoeybi et al. 2019) splits every layer's weight matrices over
    N GPUs: each GPU computes its share of every token, and two all-reduces per layer add the partial results,
    each of batch × hidden × 2 bytes in a decode step. The step is the planner's
    (notebook 04: bytes ÷ bandwidth or FLOPs ÷ peak) **plus** the communication, by link
    (`helpers.parallel.plan`). Mistral 7B on H100 SXMs, 4,096 tokens, the batch you pick.

    Every GPU's share of the work is taken at the same efficiency, {par.DEFAULT_EFFICIENCY:g}, whatever N: an
    **assumption**. A shard of 1/N of every matrix is a smaller matrix product; where it reaches less of the
    bandwidth than the whole matrix (notebook 03, section 5, measures small matrices against their floor), a real
    speed-up is lower than this one.
    """), tp_batch, notebook.static_note({"WORKSHOP_TP_BATCH": "the batch (1, 8, 32 or 128)"}), tp_box])
    return tp_batch, tp_box


@app.cell
def _(tp_batch):
    scaling = {kind: par.tp_scaling("mistral-7b-v0.1", "H100 SXM", batch=int(tp_batch.value), context=4096, link=kind)
               for kind in ("nvlink", "pcie")}
    tp_table = par_views.scaling_frame(scaling)
    plots.table(tp_table, f"computed from mistral-7b-v0.1 config.json, bf16, H100 SXM, batch {tp_batch.value}, "
                          f"efficiency {par.DEFAULT_EFFICIENCY:g} at every N (helpers.parallel.plan)")
    return (scaling,)


@app.cell
def _(scaling, tp_batch):
    flat = {k: par.flattens_at(rows) for k, rows in scaling.items()}
    _fig, _ax = plots.figure()
    for _k, _rows in scaling.items():
        _ax.plot([r.tp for r in _rows], [r.speed_up for r in _rows], marker="o", label=_rows[0].link)
    _n = [r.tp for r in scaling["nvlink"]]
    _ax.plot(_n, _n, ls=":", color="#888", label="ideal (N×)")
    _ax.set_xlabel("GPUs in tensor parallel")
    _ax.set_ylabel("decode speed-up over one GPU")
    _where = [f"{k} at {v} GPUs" for k, v in flat.items() if v]
    _ax.set_title(f"Mistral 7B decode, batch {tp_batch.value}: " + ("communication flattens the speed-up (" + ", ".join(_where) + ")"
                                                    if _where else f"the speed-up does not flatten up to {max(_n)} GPUs"))
    _ax.legend(fontsize=8)
    plots.finish(_fig, f"computed from mistral-7b-v0.1 config.json, bf16, H100 SXM, efficiency {par.DEFAULT_EFFICIENCY:g}")
    return (flat,)


@app.cell
def _(scaling, tp_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 6); in marimo, type it in the box above
    _rows = scaling["pcie"]
    _last = _rows[-1]
    learner.beside(tp_box, _given, _last.speed_up, shown=lambda v: f"{v:.2f}× (tp={_last.tp} over tp={_rows[0].tp})",
        higher=f"The work still shrinks N-fold and the all-reduces are added to it, not multiplied: at tp={_last.tp} "
               f"{_last.work_ms:.2f} ms of work and {_last.all_reduce_ms:.2f} ms of all-reduces.",
        lower=f"The work shrinks {_last.tp // _rows[0].tp}-fold, the all-reduces do not: at tp={_last.tp} they are "
              f"{_last.all_reduce_ms:.2f} ms of a {_last.step_ms:.2f} ms step.",
        within="Work ÷ N plus all-reduces that do not shrink, as the table adds them.")
    return


@app.cell(hide_code=True)
def _(scaling, tp_batch):
    mo.vstack([mo.md(f"""
    The work halves with each doubling, the all-reduces do not: their latency is paid per step, whatever N. The rule
    the code applies: the speed-up flattens where doubling the GPUs gains less than {par.FLATTEN_GAIN}×.
    The same from the command line:
    `python -m helpers capacity --model mistral-7b-v0.1 --gpu "H100 SXM" --context 4096 --batch {tp_batch.value} --parallel tp=4 --link pcie`.
    """), expected.should_see([], [expected.computed(str(v), "helpers.parallel.plan.tp_scaling and flattens_at")
                                   for v in par.tp_reading(scaling)])])
    return


@app.cell(hide_code=True)
def _():
    _counts = [2, 4, 8, 16]
    pp_micro = mo.ui.dropdown(options=[str(m) for m in _counts], value=str(notebook.env_default("WORKSHOP_MICRO_BATCHES", 4, _counts)),
                              label="micro-batches")
    pp_box = learner.prediction("With P = 4 stages and the micro-batches you picked, what share of a step does each "
                                "stage sit idle (the bubble)?", "%")
    mo.vstack([mo.md("""
    ## 3 · Pipeline parallelism: stages, micro-batches and the bubble

    Pipeline parallelism gives each GPU a slice of the layers, a **stage**. A token still passes through every
    layer in turn, so one batch's step is no faster; a batch cut into m **micro-batches** lets the stages work on
    different micro-batches at once, except while the pipeline fills and drains: those idle slots are the
    **bubble**. Engines keep several batches in flight, so the pipeline stays full ("steady"). Llama 3.1 8B,
    batch 32, each pipeline with one micro-batch and with the number you pick.
    """), pp_micro, notebook.static_note({"WORKSHOP_MICRO_BATCHES": "micro-batches (2, 4, 8 or 16)"}), pp_box])
    return pp_box, pp_micro


@app.cell(hide_code=True)
def _():
    _p, _m = 2, 4
    mo.md(f"""
    **The bubble, derived.** Cut a step into slots: one slot is one micro-batch through one stage. The first
    micro-batch leaves the last of P stages after P slots, and each further one a slot later, so m micro-batches
    take **m + P − 1 slots**. Each stage works in m of them and idles in the other P − 1:

        bubble = (P − 1) ÷ (m + P − 1)

    **Worked example** (`plan.bubble_share`): P = {_p}, m = {_m}: ({_p} − 1) ÷ ({_m} + {_p} − 1) =
    **{par.bubble_share(_p, _m):.0%}**. (Exercise 2 asks what the slots cost in decode.)
    """)
    return


@app.cell
def _(pp_micro):
    _m = int(pp_micro.value)
    pp_steps = {(tp, pp, mb): par.parallel_step("llama-3.1-8b", "H100 SXM", tp, pp, mb, 32, 8192)
                for tp, pp, mb in ((1, 1, 1), (1, 2, 1), (1, 2, _m), (1, 4, 1), (1, 4, _m), (2, 2, _m), (4, 1, 1))}
    plots.table(par_views.pipeline_frame(pp_steps.values()), "computed from llama-3.1-8b config.json, bf16, H100 SXM, NVLink, efficiency "
                          f"{par.DEFAULT_EFFICIENCY:g} (helpers.parallel.plan)")
    return (pp_steps,)


@app.cell
def _(pp_box, pp_micro, pp_steps):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 25); in marimo, type it in the box above
    _p, _m = 4, int(pp_micro.value)
    learner.beside(pp_box, _given, 100 * pp_steps[(1, _p, _m)].bubble_share, shown=lambda v: f"{v:.0f} % (P = {_p}, m = {_m})",
                   higher=f"The pipeline fills and drains once per step: {_p - 1} of its {_m + _p - 1} slots "
                          "idle on every stage.",
                   lower=f"Only the {_p - 1} slots of filling and draining idle; in the other {_m} each stage works.",
                   within="(P − 1) of (m + P − 1) slots, as derived.")
    return


@app.cell(hide_code=True)
def _(pp_micro, pp_steps):
    mo.vstack([mo.md(f"""
    In decode every micro-batch reads the stage's weights again, so cutting a batch into m multiplies the weight
    reads while the bubble shrinks; whether one batch's throughput rises depends on which wins (a change within
    {verdicts.CHANGE_MARGIN:.0%} either way is no change). Several whole batches in flight fill the pipeline
    without cutting any: what engines do.
    """), expected.should_see([], [expected.computed(str(v), "helpers.parallel.plan.parallel_step")
                                   for v in par.pipeline_reading(pp_steps, int(pp_micro.value))])])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 4 · Expert parallelism: how many experts a step reads, and the all-to-all

    A mixture-of-experts layer sends each token to k of E experts. One token reads k/E of the expert
    weights; with tokens that choose evenly and independently, each expert is missed by one token with
    probability 1 − k/E and by all b tokens of a batch with (1 − k/E)^b, so a batch touches 1 − (1 − k/E)^b of
    them (`helpers.formulas.stepcost.experts_touched`): the
    bytes per step climb with the batch towards the whole model. With the experts split over 8 GPUs,
    each MoE layer sends every token's hidden state to its experts' GPUs and back: two all-to-alls.
    DeepSeek V3 in {term("FP8")} on 8 H200s (NVLink).
    """)
    return


@app.cell
def _():
    moe_steps = par.moe_rows("deepseek-v3", "H200", batches=(1, 8, 32, 128, 512), ep=8, weight_dtype="fp8")
    plots.table(par_views.moe_frame(moe_steps), "computed from deepseek-v3 config.json, fp8, 8 × H200, NVLink (helpers.parallel.plan)")
    return (moe_steps,)


@app.cell(hide_code=True)
def _(moe_steps):
    mo.vstack([mo.md("""
    The "active parameters" figure counts one token's experts; a batch's tokens pick different ones.
    """), expected.should_see([], [expected.computed(str(par.moe_reading(moe_steps)), "helpers.parallel.plan.moe_rows")])])
    return


@app.function
def eviction_measured(loaded) -> dict:
    """Section 7's eviction on a model whose predictions mean something (the loaded one when trained, else
    tiny-trained): four windows after 4 sinks, teacher-forced over the evaluation text
    (kv_offload.eviction_quality), and whether that model reads its context at all (kv_offload.context_use)."""
    from helpers.serving.kv_quant import quality_profile

    name, _ = quality_profile(loaded.profile)
    model = loaded if name == loaded.profile else models.load(name, device=loaded.device)
    rows = [kv_offload.eviction_quality(model, 256, 64, sinks=4, window=w) for w in (28, 60, 124, 400)]
    return {"label": model.label, "random": "random weights" in model.model_name, "rows": rows,
            "context_use": kv_offload.context_use(model)}


@app.cell(hide_code=True)
def _():
    tp_button = replay.run_button()
    forward_box = learner.prediction(
        "Each of the two processes does half of every decoder layer, one thread each. How long does the two-process "
        "forward take, as a multiple of one process running the whole model on one thread (0.5 would be half the time)?",
        "×")
    mo.vstack([mo.md("""
    ## 5 · Measured here: a tensor-parallel forward in two processes

    Two processes on this machine each load the tiny model and keep half of every layer (q/k/v and the
    MLP's gate/up split by columns, the output projections by rows); `torch.distributed` (gloo, over
    127.0.0.1) adds the partial outputs, two all-reduces per layer. The logits are compared with the
    one-process model's. The loopback "link" is measured the way a GPU link is — an all-reduce of one float
    (latency) and of 4 MiB (bandwidth) — and the model's own all-reduces are predicted over it.

    Where the time goes is measured part by part (`helpers.parallel.tp_demo`): one process running the whole
    model, in turn with the two-process forward (one thread each); the two-process forward split into
    computing its shard, waiting for the other process and the all-reduces; and one all-reduce of exactly the
    model's message timed alone — in a tight loop, and right after a matmul.
    """), tp_button, forward_box])
    return forward_box, tp_button


@app.cell
def _(loaded, tp_button):
    tp_attempt = notebook.attempt("The two-process tensor-parallel forward", replay.measure, "09/tp_forward",
                                  tp_demo.run_tp, world=2, tokens=32, reps=5, run=tp_button.value,
                                  profile=loaded.profile, device=loaded.device)
    tp_measured_run = tp_attempt.value
    tp_run = tp_measured_run.value if tp_measured_run is not None else None
    if tp_run is None:
        _shown = tp_attempt.note()
    else:
        tp_measured = pd.DataFrame([
            {"quantity": "largest |logit difference| vs one process", "value": f"{tp_run.max_abs_diff:.2e}"},
            {"quantity": "same next token at every position", "value": str(tp_run.same_argmax)},
            {"quantity": f"in {tp_run.all_reduces} all-reduces of {tp_run.message_bytes:,} B (ms)", "value": f"{tp_run.all_reduce_s * 1e3:.2f}"},
            {"quantity": "predicted all-reduces over the measured link (ms)", "value": f"{tp_run.predicted_all_reduce_s * 1e3:.2f}"},
            {"quantity": "loopback link: latency (µs) / bandwidth each way (GB/s)",
             "value": f"{tp_run.link_latency_s * 1e6:.0f} / {tp_run.link_bandwidth / 1e9:.2f}"},
            {"quantity": "machine load per core while it ran", "value": "unknown" if tp_run.load_per_core is None
             else f"{tp_run.load_per_core:.1f}"},
        ])
        _shown = plots.table(tp_measured, tp_measured_run.source(
            "measured: tiny model (random weights), fp32, cpu, 2 gloo processes, 1 thread each"))
    _shown
    return tp_attempt, tp_measured_run, tp_run


@app.cell(hide_code=True)
def _(tp_measured_run):
    tp_measured_run.note() if tp_measured_run is not None else mo.md("")
    return


@app.cell
def _(tp_attempt, tp_measured_run, tp_run):
    # Where rank 0's forward went, and one all-reduce of the model's message four ways (µs).
    if tp_run is None:
        _out = tp_attempt.skipped("The breakdown")
    else:
        _calls = {"inside the forward (per call)": tp_run.all_reduce_s / tp_run.all_reduces,
                  "alone, right after the output head's matmul": tp_run.after_compute_all_reduce_s,
                  "alone, in a tight loop": tp_run.message_all_reduce_s,
                  "predicted: latency + bytes ÷ bandwidth of the loopback": tp_run.predicted_all_reduce_s / tp_run.all_reduces}
        _calls = pd.DataFrame([{"one all-reduce of " + f"{tp_run.message_bytes:,} B": k, "µs": 1e6 * v} for k, v in _calls.items()])
        _src = tp_measured_run.source("measured: tiny model, fp32, cpu, 2 gloo processes")
        _out = mo.vstack([plots.table(pd.DataFrame(tp_run.breakdown()), f"{_src}; medians of {5} forwards"),
                          plots.table(_calls, _src)])
    _out
    return


@app.cell
def _(forward_box, tp_attempt, tp_run):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 0.6); in marimo, type it in the box above
    if tp_run is None:
        _out = tp_attempt.skipped("The prediction's result")
    else:
        _out = learner.beside(forward_box, _given, tp_run.forward_s / tp_run.single_forward_s,
                              shown=lambda v: f"{v:.2f}× ({tp_run.forward_s * 1e3:.1f} against {tp_run.single_forward_s * 1e3:.1f} ms)",
                              higher=f"Half the layers' work is not half the forward: each process also computes "
                                     f"the whole output head, waits for the other ({tp_run.wait_s * 1e3:.1f} ms) "
                                     f"and spends {tp_run.all_reduce_s * 1e3:.1f} ms in its {tp_run.all_reduces} "
                                     "all-reduces; the breakdown above adds them up.",
                              lower="Each process computes half of every decoder layer; the breakdown above "
                                    "shows what the rest costs.",
                              within="The breakdown above shows which parts make it up.")
    _out
    return


@app.cell(hide_code=True)
def _(tp_attempt, tp_run):
    import os as _os

    if tp_run is None:
        _said = tp_attempt.skipped("What you should see")
    else:
        _r = tp_demo.reading(tp_run, _os.cpu_count())
        _said = mo.vstack([mo.md(f"""
        The forward's time, part by part: computing the shard, waiting for the slower process before each all-reduce,
        and the all-reduces themselves. What makes a call slower inside the forward than alone — a process waiting to
        be scheduled again on a shared machine, cold caches, gloo's threads waking — this run does not separate; it
        shows where the time is. On a GPU machine this section still runs on the CPU (gloo); NCCL over NVLink is what
        section 2 models.
        """), expected.should_see([
            _r.agree,
            f"two processes are {_r.overall} here ({tp_run.forward_s * 1e3:.1f} against {tp_run.single_forward_s * 1e3:.1f} ms)",
            _r.compute, _r.head, _r.wait,
            f"the all-reduces took {tp_run.all_reduce_s * 1e3:.1f} ms, {_r.all_reduces} ({tp_run.predicted_all_reduce_s * 1e3:.2f} ms)",
            _r.link, _r.inside],
            [expected.computed(str(tp_demo.on_gpu(tp_run, expected.REFERENCE_GPU)), "helpers.parallel.collectives.all_reduce_s "
                               "over gpu_links.csv's NVLink")])])
    _said
    return


@app.cell(hide_code=True)
def _():
    _rates = [4, 8, 12, 16, 24, 32]
    disagg_rate = mo.ui.dropdown(options=[str(r) for r in _rates],
                                 value=str(notebook.env_default("WORKSHOP_ARRIVAL_RATE", 16, _rates)),
                                 label="a third arrival rate (requests/s)")
    mo.vstack([mo.md(f"""
    ## 6 · Disaggregated prefill and decode: when does splitting pay?

    In a shared pool every GPU prefills new requests and decodes running ones; a long prefill stalls every
    decode on that GPU, so inter-token latency ({term("ITL")}) jumps. Here the shared pool runs each prompt's
    whole prefill in one step, **without chunking** — vLLM V1 {term("chunks long prefills", "chunked-prefill")} by default and mixes them
    with decodes under a token budget per step, so a stall there lasts one chunk's step, not a whole prefill:
    against vLLM V1 a split removes shorter stalls than here. Splitting the pool into prefill GPUs and decode GPUs removes the stall but moves each
    request's KV cache over a link and leaves fewer GPUs for each phase.

    A deterministic simulation (`helpers.parallel.sim`) serves the same seeded chat trace (48 requests arriving
    at random moments at a set mean rate — Poisson arrivals —, `helpers.serving.traces`; prompts ×60 to stand for
    the long prompts of retrieval-augmented generation, RAG, where retrieved documents are pasted into the
    prompt; outputs of about 128 tokens) both ways on 4 H100 SXMs with Mistral 7B, its step costs from the planner at efficiency
    {par.DEFAULT_EFFICIENCY:g}. Three figures per deployment:

    - **SLO attainment**: the share of requests that met both {term("SLOs", "slo")}, {term("TTFT")} ≤ 1 s and ITL ≤ 20 ms;
    - **makespan**: from the first arrival to the last completion;
    - **goodput**: requests that met both SLOs ÷ the makespan (DistServe's measure: throughput that meets
      the SLO). The makespan includes the drain after the last arrival, so a deployment that meets the SLO
      more often but finishes later can show the same goodput, or less.
    """), disagg_rate, notebook.static_note({"WORKSHOP_ARRIVAL_RATE": "the third rate (4, 8, 12, 16, 24 or 32 requests/s)"})])
    return (disagg_rate,)


@app.cell
def _(disagg_rate, loaded):
    costs = sim.PlannerCosts("mistral-7b-v0.1", "H100 SXM")
    kv_link = links.get_link("H100 SXM", "infiniband")
    disagg_gpus, ttft_slo_s, itl_slo_s = 4, 1.0, 0.020
    disagg, disagg_reqs = {}, {}
    for _rate in sorted({8.0, 24.0, float(disagg_rate.value)}):
        disagg_reqs[_rate] = sim.from_trace(traces.chat_trace(48, seed=0, rate_per_s=_rate, output_tokens_median=128),
                                            loaded.tokenizer, prompt_scale=60)
        disagg[_rate] = sim.compare(disagg_reqs[_rate], costs, disagg_gpus, kv_link, ttft_slo_s=ttft_slo_s, itl_slo_s=itl_slo_s)
    mean_prompt = {r: sum(q.prompt_tokens for q in reqs) / len(reqs) for r, reqs in disagg_reqs.items()}
    return (
        costs,
        disagg,
        disagg_gpus,
        disagg_reqs,
        itl_slo_s,
        kv_link,
        mean_prompt,
        ttft_slo_s,
    )


@app.cell
def _(costs, disagg, disagg_gpus, itl_slo_s, kv_link, ttft_slo_s):
    disagg_table = par_views.deployments_frame(disagg)
    plots.table(disagg_table, f"simulated: {costs.spec.name}, {costs.weight_dtype}, {disagg_gpus} × {costs.gpu}, planner "
                              f"step costs at efficiency {costs.efficiency:g}; KV over {kv_link.label}; "
                              f"SLO TTFT ≤ {ttft_slo_s:g} s, ITL ≤ {itl_slo_s * 1e3:g} ms")
    return


@app.cell
def _(costs, kv_link, mean_prompt):
    # What one mean prompt's KV cache is, and what crosses the link: Mistral 7B v0.1's window keeps at most
    # 4,096 tokens per layer (helpers.formulas.memory.kv_cache_bytes honours it), so a longer prompt moves the window's worth.
    _n = int(mean_prompt[max(mean_prompt)])
    kv_moved = {"prompt_tokens": _n, "bytes_per_token": costs.kv_bytes(1), "window": costs.spec.sliding_window,
                "cache_bytes": costs.kv_bytes(_n), "send_s": collectives.send_s(costs.kv_bytes(_n), kv_link)}
    pd.Series({"mean prompt (tokens)": _n, "KV per token (B)": kv_moved["bytes_per_token"],
               "prompt × KV per token (GB)": _n * kv_moved["bytes_per_token"] / 1e9,
               "window (tokens)": kv_moved["window"],
               "what the cache keeps and moves (GB)": kv_moved["cache_bytes"] / 1e9,
               f"over {kv_link.name} (ms)": kv_moved["send_s"] * 1e3}, name="computed").to_frame()
    return (kv_moved,)


@app.cell(hide_code=True)
def _(disagg, disagg_reqs, kv_link, kv_moved):
    _top = max(disagg)
    _apart = sim.disagreement(disagg)
    _where = "helpers.parallel.sim on the planner's step costs"
    mo.vstack([mo.md(f"""
    The rule: splitting pays when the best split's goodput beats the shared pool's by more than
    {verdicts.CHANGE_MARGIN:.0%}, does not pay when it falls short by as much, and is no change in between. The
    shared pool's ITL carries every prefill it runs between decode steps; the split's decode GPUs run none, and its
    prefill GPUs queue the prompts. Moving a mean prompt's KV: {kv_moved['prompt_tokens']:,} tokens ×
    {kv_moved['bytes_per_token'] / 1e3:,.0f} kB would be {kv_moved['prompt_tokens'] * kv_moved['bytes_per_token'] / 1e9:.2f} GB,
    but Mistral 7B v0.1's {kv_moved['window']:,}-token window caps what the cache holds at
    {kv_moved['cache_bytes'] / 1e9:.2f} GB — that crosses {kv_link.label} in {kv_moved['send_s'] * 1e3:.1f} ms.
    """), expected.should_see([], [expected.computed(str(sim.rate_reading(r, rows)), _where) for r, rows in disagg.items()]
                              + [expected.computed(str(_apart) + ". Which matters depends on the question: a user sees "
                                                   "attainment; capacity planning counts goodput", _where) if _apart else
                                 expected.computed("attainment and goodput read the same way at every rate", _where)]
                              + [expected.computed(f"at {_top:g} requests/s: {v}", _where)
                                 for v in sim.latency_reading(disagg[_top])]
                              + [expected.computed(f"at {_top:g} requests/s {sim.drain_share(disagg_reqs[_top], disagg[_top][0])}",
                                                   _where)])])
    return


@app.cell(hide_code=True)
def _():
    offload_button = replay.run_button()
    mo.vstack([mo.md(f"""
    ## 7 · KV offload and eviction

    **Offload.** transformers' offloaded cache keeps each layer's keys and values in host memory and
    brings them back before the layer runs: every decode step moves the whole cache over PCIe instead of
    reading it from {term("HBM")}. Computed for Llama 3.1 8B (full attention at every layer) on an H100 SXM, then the
    real offloaded cache tried on this machine (**Run live** measures both the offload and the eviction below).
    """), offload_button])
    return (offload_button,)


@app.cell
def _():
    offload_computed = offload.offload_steps("llama-3.1-8b", "H100 SXM", contexts=(4096, 32768, 131072))
    plots.table(par_views.offload_frame(offload_computed),
                "computed from llama-3.1-8b config.json, bf16 KV, batch 1, H100 SXM HBM vs PCIe Gen5")
    return (offload_computed,)


@app.cell
def _(loaded, offload_button):
    offload_measured = replay.measure("09/offload", kv_offload.measure_offloaded, loaded, context=256, steps=8,
                                      run=offload_button.value, profile=loaded.profile, device=loaded.device)
    offload_run = offload_measured.value
    plots.table(pd.DataFrame([offload_run]), plots.source_label(offload_measured.source(loaded)))
    return offload_measured, offload_run


@app.cell(hide_code=True)
def _(offload_measured):
    offload_measured.note()
    return


@app.cell(hide_code=True)
def _(offload_computed, offload_run):
    mo.vstack([mo.md("""
    PCIe moves the cache at the link's bandwidth, HBM at the GPU's: offloading buys capacity, paid on every step that
    reads the offloaded cache — a fit for KV that is idle (a paused conversation), not for the cache every step reads.
    """), expected.should_see([kv_offload.offload_reading(offload_run)], [expected.computed(
        str(offload.reading(offload_computed)), "helpers.parallel.offload.offload_steps: kv_cache_bytes over the "
                                                "datasheet bandwidths")])])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **Eviction.** StreamingLLM (Xiao et al. 2023) keeps the first few tokens (the *attention sinks*, which
    attention piles onto) and a recent window, and drops the middle. Teacher-forced over the evaluation text (at
    each step the model is fed the text's next token, whatever it predicted): 256 tokens prefilled, then 64
    decoded one at a time with the cache cut to 4 sinks + a window after every step, against the full cache, by
    {term("KL divergence")}, {term("top-1 agreement")} and {term("perplexity")}. Whether the model reads its context at all is measured beside it: the same passage twice
    in a row — a model that reads its context predicts the second copy at a lower perplexity than the first (it
    can copy it).
    """)
    return


@app.cell
def _(loaded, offload_button):
    evict_run = replay.measure("09/eviction", eviction_measured, loaded, run=offload_button.value, long=True,
                               profile=loaded.profile, device=loaded.device)
    evict = evict_run.value
    evict_table = pd.DataFrame([{k: r[k] for k in ("sinks", "window", "tokens", "kv_bytes_full", "kv_bytes_kept", "saved",
                                                    "kl_mean", "top1_agreement", "perplexity", "reference_perplexity")}
                                for r in evict["rows"]])
    plots.table(evict_table, plots.source_label(evict_run.source("measured: " + evict["label"])))
    return evict, evict_run, evict_table


@app.cell(hide_code=True)
def _(evict_run):
    evict_run.note()
    return


@app.cell(hide_code=True)
def _(evict):
    _note = ("**The quality columns say nothing here**: the model's weights are random, so its predictions carry no "
             "information to lose." if evict["random"] else
             "What eviction costs in quality shows only on a model that reads its context: the probe below says "
             "whether this one does.")
    mo.vstack([mo.md(_note), expected.should_see(kv_offload.eviction_reading(evict), [expected.computed(
        str(offload.eviction_bytes("llama-3.1-8b", 32768, 4, 60)), "helpers.parallel.offload.eviction_bytes: "
                                                                  "helpers.formulas.memory.kv_cache_bytes")])])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 8 · How the real engines do it

    | what | vLLM | SGLang |
    | --- | --- | --- |
    | tensor parallel | `--tensor-parallel-size N` | `--tp-size N` |
    | pipeline parallel | `--pipeline-parallel-size N` | `--pp-size N` |
    | expert parallel | `--enable-expert-parallel` (experts over the TP × DP GPUs; DP: data parallel, whole copies of the model) | `--ep-size N`, and `--enable-dp-attention` for {term("MLA")} models |
    | prefill/decode split | `--kv-transfer-config` (KV connectors, e.g. NIXL) | `--disaggregation-mode prefill` / `decode`, `--disaggregation-transfer-backend mooncake` or `nixl` |

    Sources: vLLM, "Parallelism and Scaling" and "Disaggregated Prefilling"
    (https://docs.vllm.ai/en/latest/serving/parallelism_scaling.html, https://docs.vllm.ai/en/latest/features/disagg_prefill.html);
    SGLang, "Server Arguments" and "PD Disaggregation" (https://docs.sglang.io/advanced_features/server_arguments.html,
    https://docs.sglang.io/advanced_features/pd_disaggregation.html). Above one engine:
    **NVIDIA Dynamo** (https://github.com/ai-dynamo/dynamo) runs vLLM, SGLang or TensorRT-LLM workers split into
    prefill and decode pools, moves KV with NIXL (NVIDIA's inference transfer library, GPU memory to GPU memory
    over NVLink, InfiniBand or the host) and routes each request to the worker that already holds its
    {term("prefix", "prefix-caching")} (KV-aware routing; https://docs.nvidia.com/dynamo/); **llm-d** (https://github.com/llm-d/llm-d) does
    the same on Kubernetes around vLLM, with a KV-cache-aware scheduler and prefill/decode disaggregation.
    Splitwise (arXiv:2311.18677) and DistServe (arXiv:2401.09670) are the papers behind the split.

    **The benchmark of notebook 08 against a multi-GPU server** (no such machine here; the commands, not a
    run). On the server:

        vllm serve mistralai/Mistral-7B-v0.1 --tensor-parallel-size 4 --port 8000

    then from this repository point the engine benchmark of notebook 08 at it — the same workloads, levels
    and SLO, nothing started or stopped:

        python scripts/engines.py --target http://SERVER:8000 --model mistralai/Mistral-7B-v0.1         --out build/engines/tp4.json

    or use vLLM's own client:

        vllm bench serve --backend vllm --base-url http://SERVER:8000 --model mistralai/Mistral-7B-v0.1         --dataset-name random --random-input-len 2000 --random-output-len 200 --num-prompts 200 --request-rate 4

    and compare its ITL with section 2's step for tp=4.
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
    _nv = par.tp_scaling("llama-3.1-8b", "L40S", batch=1, context=4096)
    _n = par.flattens_at(_nv)
    _link = links.get_link("L40S", None, _nv[-1].tp)
    _step = par.parallel_step("llama-3.1-8b", "L40S", tp=_nv[-1].tp, batch=1, context=4096)
    notebook.exercise(1, "A PCIe-only GPU. Run `python -m helpers capacity --model llama-3.1-8b --gpu L40S --context 4096 "
                      "--batch 1 --parallel tp=4`. What share of the step is communication, and where does the speed-up flatten?", f"""
    The L40S has no NVLink; its GPUs talk over {_link.label}. At batch 1 the speed-up over one GPU is
    {', '.join(f"tp={r.tp}: {r.speed_up:.2f}×" for r in _nv)}; communication is
    {_nv[-1].communication_share:.0%} of the step at tp={_nv[-1].tp}.
    {"It flattens at " + str(_n) + " GPUs." if _n else "It does not flatten within these counts."} At batch 1 a message is
    {_step.all_reduce_bytes:,} B, and latency is {verdicts.share(collectives.all_reduce_latency_s(_nv[-1].tp, _link), collectives.all_reduce_s(_step.all_reduce_bytes, _nv[-1].tp, _link), "each all-reduce").words},
    {_step.all_reduces_per_step} of them per token.
    """)
    return


@app.cell
def _():
    _a = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 4, 1, 32, 8192)
    _b = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 4, 8, 32, 8192)
    notebook.exercise(2, "The bubble. With pp=4 and batch 32, compare 1 and 8 micro-batches "
                      "(`--parallel pp=4,mb=8`, or pick 8 in section 3's control). What happens to the bubble and to the "
                      "step, and why is the step not 4× shorter?", f"""
    One micro-batch: bubble {_a.bubble_share:.0%}, step {_a.step_s * 1e3:.2f} ms. Eight: bubble {_b.bubble_share:.0%}, step
    {_b.step_s * 1e3:.2f} ms. In decode every micro-batch reads the stage's weights again, so cutting the batch
    multiplies the weight reads: the bubble shrinks, and each slot takes {verdicts.times_as(_b.slot_s, _a.slot_s, "a whole batch's slot").words},
    not 1/8. A pipeline holds more sequences ({_a.max_batch} here against one GPU's
    {par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 1, 1, 32, 8192).max_batch}) and fills with several whole batches
    in flight; micro-batching one batch does not shorten its step.
    """)
    return


@app.cell
def _(
    costs,
    disagg,
    disagg_gpus,
    disagg_reqs,
    itl_slo_s,
    kv_link,
    mean_prompt,
    ttft_slo_s,
):
    _rate = 24.0
    _slow_link = links.custom_link("slow", 1e9, 5e-6)
    _slow = sim.compare(disagg_reqs[_rate], costs, disagg_gpus, _slow_link, ttft_slo_s=ttft_slo_s, itl_slo_s=itl_slo_s)
    _fast = disagg[_rate]
    _best = max(_slow[1:], key=lambda r: r.goodput_rps)
    _same = next(r for r in _fast if r.deployment == _best.deployment)
    _kv = costs.kv_bytes(int(mean_prompt[_rate]))
    _before, _now = sim.split_verdict(_fast), sim.split_verdict(_slow)
    notebook.exercise(3, f"A slow KV link. Rerun section 6 at {_rate:g} requests/s with the KV moving at "
                      f"{_slow_link.bandwidth / 1e9:g} GB/s (`links.custom_link('slow', 1e9, 5e-6)`). Does the split still pay?", f"""
    Shared pool: goodput {_slow[0].goodput_rps:.2f}/s, SLO met by {_slow[0].slo_attainment:.0%}. Best split
    ({_best.deployment}): {_best.goodput_rps:.2f}/s, SLO met by {_best.slo_attainment:.0%} — splitting
    **{_now}** (over {kv_link.label} it read **{_before}**). Each request's KV ({costs.spec.name} holds
    {costs.kv_bytes(1) / 1e3:.0f} kB a token: the mean prompt of {mean_prompt[_rate]:,.0f} tokens would be
    {mean_prompt[_rate] * costs.kv_bytes(1) / 1e9:.2f} GB, but the {costs.spec.sliding_window:,}-token window caps the cache at
    {_kv / 1e9:.2f} GB) now takes {collectives.send_s(_kv, _slow_link):.2f} s to cross instead of
    {collectives.send_s(_kv, kv_link) * 1e3:.1f} ms. The simulation
    stamps the first token when the prefill ends, so the wait lands between the first and second token: that
    split's TTFT p90 is {_same.ttft_p90_s:.2f} s over {kv_link.name} and {_best.ttft_p90_s:.2f} s over the slow link
    ({verdicts.speed(_best.ttft_p90_s, _same.ttft_p90_s, "shorter", "longer", "as long", "over " + kv_link.name).words}), while its ITL p90 goes
    from {_same.itl_p90_s * 1e3:.1f} ms to {_best.itl_p90_s * 1e3:.1f} ms (SLO {itl_slo_s * 1e3:g} ms). The split pays only
    when the link moves a prompt's cache faster than the stalls it removes.
    """)
    return


@app.cell(hide_code=True)
def _(ar_batch, ar_gpus, ar_links, decode_message, disagg, disagg_rate, flat, tp_batch):
    _ib = ar_links["infiniband"]
    _flat = {k for k, v in flat.items() if v}
    check_questions = [
        learner.Question(f"One decode all-reduce of Mistral 7B at batch {ar_batch} ({decode_message:,} B) over {ar_gpus} "
                         f"H100 SXMs, were they joined by {_ib.name} ({_ib.bandwidth / 1e9:,.0f} GB/s each way, "
                         f"{_ib.hop_latency_us:g} µs a hop): how long does it take?",
                         collectives.all_reduce_s(decode_message, ar_gpus, _ib) * 1e6, "µs"),
        learner.Question(f"At batch {tp_batch.value} (section 2), over which links does the decode speed-up flatten "
                         f"by 8 GPUs (doubling the GPUs gains less than {par.FLATTEN_GAIN}×)?",
                         {frozenset(): "neither", frozenset({"pcie"}): "PCIe only", frozenset({"nvlink"}): "NVLink only",
                          frozenset({"nvlink", "pcie"}): "NVLink and PCIe"}[frozenset(_flat)],
                         options=("NVLink and PCIe", "PCIe only", "NVLink only", "neither")),
        learner.Question(f"In section 6's simulation at {disagg_rate.value} requests/s, does splitting prefill and decode "
                         f"pay on goodput (by the {verdicts.CHANGE_MARGIN:.0%} rule)?", sim.split_verdict(disagg[float(disagg_rate.value)]),
                         options=sim.SPLIT_VERDICTS),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "change a control above and they change with it")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _(ar_gpus, ar_links, decode_message, disagg, evict, flat, moe_steps, offload_computed, pp_micro, pp_steps, tp_run):
    _nv = ar_links["nvlink"]
    _lat = verdicts.share(collectives.all_reduce_latency_s(ar_gpus, _nv),
                          collectives.all_reduce_s(decode_message, ar_gpus, _nv), "it")
    _names = {"nvlink": "NVLink", "pcie": "PCIe"}
    _flat = "; ".join(f"over {_names[k]} the speed-up flattens at {v} GPUs" if v else
                      f"over {_names[k]} it does not flatten up to 8 GPUs" for k, v in flat.items())
    _pp = par.pipeline_reading(pp_steps, int(pp_micro.value))
    _tp = ("two processes give the one-process logits: " + str(tp_demo.reading(tp_run).agree) + "; the all-reduces took "
           + str(tp_demo.reading(tp_run).all_reduces) + ", and the breakdown shows where the rest went"
           if tp_run is not None else "the two-process run did not run here")
    _use = next(v for v in kv_offload.eviction_reading(evict) if v.rule == "kv_offload.context_use")
    mo.md(f"""
    ## Takeaways

    - Past one GPU the step is the planner's floor **plus** communication. A decode step's all-reduce over
      {ar_gpus} GPUs' NVLink is {decode_message:,} B, and latency is {_lat.words}, paid twice per layer; {_flat}.
    - Pipeline parallelism buys memory, not latency — {_pp[0]}; its bubble is (P−1)/(m+P−1), and engines fill
      it with several batches in flight.
    - An MoE step reads more experts as the batch grows: {par.moe_reading(moe_steps)}.
    - Tensor parallelism is real and exact here: {_tp}.
    - Disaggregation removes prefill stalls from decode at the price of a KV transfer and fewer GPUs per phase; in
      this simulation, on goodput, splitting reads {", ".join(f"{sim.split_verdict(rows)} at {r:g} requests/s" for r, rows in disagg.items())}. Read SLO attainment and goodput together, and mind whether the shared pool chunks its prefills.
    - Offloading KV to host memory costs a PCIe crossing per step: {offload.reading(offload_computed)}. Eviction saves
      memory exactly and costs quality on a model that reads its context; here {_use}.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
