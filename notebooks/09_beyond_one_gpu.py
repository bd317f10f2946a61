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

    from helpers.formulas import regime
    from helpers.formulas.specs import get_spec
    from helpers.measure import models
    from helpers.present import expected, learner, notebook, plots, replay, run_times
    from helpers.present.glossary import term
    from helpers.parallel import collectives, disagg, links, offload, tp_demo, views as par_views
    from helpers.parallel import plan as par

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 09 · Beyond one GPU: parallelism, and what talking costs

    The planner of notebook 04 split a model over N GPUs for free. Here the GPUs talk, and talking takes time.

    **What you will learn**

    1. What a ring {term("all-reduce")} costs over {term("NVLink")}, {term("PCIe")} and {term("InfiniBand")}, and
       what it does to {term("tensor parallelism")}, {term("pipeline parallelism")} and the {term("all-to-all")} of a
       {term("mixture of experts", "moe")} split over GPUs ({term("expert parallelism")}).
    2. A tensor-parallel forward run in two processes on this machine over {term("gloo")}, set against one process.
    3. When {term("disaggregating prefill and decode", "disaggregated-serving")} pays, from the planner's step times.
    4. What {term("offloading the KV cache", "kv-offload")} costs a step, and the flags vLLM, SGLang, NVIDIA Dynamo
       and llm-d use for all of this.

    {run_times.header("09")}

    Every GPU figure here is *computed*: the capacity planner's step (notebook 04) at an {term("efficiency")} of
    {par.DEFAULT_EFFICIENCY:g} — bytes ÷ bandwidth or FLOPs ÷ peak, ÷ {par.DEFAULT_EFFICIENCY:g} — plus the
    communication this notebook adds.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 1 · Links, and what an all-reduce costs over them

    NVLink (through an NVSwitch) joins the GPUs of one server, PCIe joins a GPU to its host, InfiniBand joins
    servers. Sources count a link's bandwidth two ways: NVIDIA's GPU datasheets add both directions ("NVLink
    900 GB/s" is 450 GB/s each way), an InfiniBand port's rate is per direction (NDR: 400 Gb/s = 50 GB/s each
    way). A ring sends one way at a time, so the model uses one direction. A hop's latency is {term("NCCL")}'s own
    figure (its cost model).
    """)
    return


@app.cell
def _():
    plots.table(par_views.links_frame(("L4", "A100 80GB", "H100 SXM", "B200", "MI300X")),
                "helpers/data/gpu_links.csv: each row's source is in the file; hop latency: NCCL tuning.cc")
    return


@app.cell
def _():
    # 8 H100 SXMs, each link kind; one decode all-reduce's message from the step model: batch × hidden × 2 B
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
        f"joined by NVLink ({ar_links['nvlink'].bandwidth / 1e9:,.0f} GB/s each way), how long does one take?", "µs")
    ar_box
    return (ar_box,)


@app.cell(hide_code=True)
def _(ar_gpus, ar_links, decode_message):
    ar_parts = collectives.all_reduce_parts(decode_message, ar_gpus, ar_links["nvlink"])
    _p = ar_parts
    mo.md(f"""
    **The ring all-reduce, derived.** N GPUs sit on a ring; each cuts its M-byte message into N chunks.
    *Reduce-scatter* (N−1 steps): every GPU sends one chunk to the next and adds the chunk it receives, until
    each holds one chunk summed over all N. *All-gather* (N−1 more): the summed chunks travel round the ring.
    Each GPU sends 2·(N−1)/N · M bytes at the one-way bandwidth B, each of the 2·(N−1) steps waits a hop's
    latency α, and the call pays NCCL's base cost once:

        t = base + 2·(N−1)·α + 2·(N−1)/N · M ÷ B

    **Worked example** (`collectives.all_reduce_parts`), M = {_p.message_bytes:,.0f} B, N = {_p.gpus}, NVLink:

    - bytes: 2·{_p.gpus - 1}/{_p.gpus} × {_p.message_bytes:,.0f} = {_p.wire_bytes:,.0f} B ÷
      {ar_links['nvlink'].bandwidth / 1e9:,.0f} GB/s = **{_p.bytes_s * 1e6:.2f} µs**
    - latency: {_p.base_s * 1e6:g} + {_p.hops} × {_p.hop_s * 1e6:g} = **{_p.latency_s * 1e6:.2f} µs**
    - t = **{_p.total_s * 1e6:.2f} µs**; the two terms are equal at the **crossover** message
      M* = latency × B × N ÷ (2·(N−1)) = {_p.crossover_bytes:,.0f} B.
    """)
    return (ar_parts,)


@app.cell
def _(ar_box, ar_parts):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 0.5); in marimo, type it in the box above
    learner.beside(ar_box, _given, ar_parts.total_s * 1e6, shown=lambda v: f"{v:,.2f} µs",
                   higher="Latency: 2·(N−1) hops and the base cost, paid whatever the message's size.",
                   lower="Each GPU sends less than twice the message whatever N, and a hop costs under a microsecond.",
                   within="Latency and bytes, term by term as derived.")
    return


@app.cell
def _(ar_gpus, ar_links, decode_message):
    _fig, _ax = plots.figure()
    _sizes = [2**k for k in range(10, 31, 2)]
    for _l in ar_links.values():
        _ax.loglog(_sizes, [collectives.all_reduce_s(m, ar_gpus, _l) * 1e6 for m in _sizes], marker="o", label=_l.label)
    _ax.axvline(decode_message, color="#888", ls=":", label=f"one decode all-reduce, Mistral 7B batch 8: {decode_message:,} B")
    _ax.set_xlabel("message (bytes)")
    _ax.set_ylabel(f"ring all-reduce over {ar_gpus} GPUs (µs)")
    _ax.set_title(f"Ring all-reduce time against its message, {ar_gpus} × H100 SXM")
    _ax.legend(fontsize=8)
    _fig = plots.finish(_fig, "computed: helpers.parallel.collectives, H100 SXM links from gpu_links.csv")
    mo.vstack([_fig, plots.table(par_views.all_reduce_frame(decode_message, ar_gpus, ar_links),
                                 f"computed: one all-reduce of {decode_message:,} B over {ar_gpus} × H100 SXM")])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** The table reads the dotted line: one decode all-reduce on each link.
    - **latency share above ½**: the message is under the crossover; the hops set the time, and a link's latency,
      not its bandwidth, ranks it (the flat left side of the figure).
    - **below ½**: the bytes set it, and the links part by bandwidth (the right side).

    A decode message grows with the batch (batch × hidden × 2 B), a prefill's with the prompt's tokens.
    """)
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
    ## 2 · Tensor parallelism: where the speed-up flattens

    Megatron-style tensor parallelism splits every layer's weight matrices over N GPUs; two all-reduces per layer
    add the partial results, each of batch × hidden × 2 bytes in decode. The step is the planner's work ÷ N **plus**
    those all-reduces (`helpers.parallel.plan`). Mistral 7B on H100 SXMs, 4,096 tokens. Every shard is taken at
    the same efficiency whatever N: an **assumption** — a 1/N shard is a smaller matrix product, and notebook 03
    measures small matrices further from their floor.
    """), tp_batch, notebook.static_note({"WORKSHOP_TP_BATCH": "section 2's batch (1, 8, 32 or 128)",
                                          "WORKSHOP_MICRO_BATCHES": "section 3's micro-batches (2, 4, 8 or 16)",
                                          "WORKSHOP_ARRIVAL_RATE": "section 6's arrival rate (4, 8, 12, 14, 16 or 20)"}),
                tp_box])
    return tp_batch, tp_box


@app.cell
def _(tp_batch):
    scaling = {kind: par.tp_scaling("mistral-7b-v0.1", "H100 SXM", batch=int(tp_batch.value), context=4096, link=kind)
               for kind in ("nvlink", "pcie")}
    plots.table(par_views.scaling_frame(scaling), f"computed from mistral-7b-v0.1 config.json, bf16, H100 SXM, batch "
                                                  f"{tp_batch.value}, efficiency {par.DEFAULT_EFFICIENCY:g} at every N")
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
    _ax.set_title(f"Mistral 7B decode, batch {tp_batch.value}: speed-up against N")
    _ax.legend(fontsize=8)
    plots.finish(_fig, f"computed from mistral-7b-v0.1 config.json, bf16, H100 SXM, efficiency {par.DEFAULT_EFFICIENCY:g}")
    return (flat,)


@app.cell
def _(scaling, tp_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 6); in marimo, type it in the box above
    _rows = scaling["pcie"]
    learner.beside(tp_box, _given, _rows[-1].speed_up, shown=lambda v: f"{v:.2f}× (tp={_rows[-1].tp} over tp={_rows[0].tp})",
                   higher="The work still shrinks N-fold, and the all-reduces are added to it, not multiplied.",
                   lower="The work shrinks N-fold, the all-reduces do not: compare the two columns at 8 GPUs.",
                   within="Work ÷ N plus all-reduces that do not shrink, as the table adds them.")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** "gain over previous" is what each doubling of N buys; the speed-up **flattens** where
    it drops under {par.FLATTEN_GAIN}×.
    - a gain **at** 2: the work, halved, still sets the step;
    - a gain falling towards 1: the all-reduces, paid per layer whatever N, have caught up with the shrinking work.
      PCIe reaches that point at a smaller N than NVLink at the same batch, since each of its all-reduces costs more.

    The same from the command line:
    `python -m helpers capacity --model mistral-7b-v0.1 --gpu "H100 SXM" --context 4096 --batch 8 --parallel tp=4 --link pcie`.
    """)
    return


@app.cell(hide_code=True)
def _():
    _counts = [2, 4, 8, 16]
    pp_micro = mo.ui.dropdown(options=[str(m) for m in _counts], value=str(notebook.env_default("WORKSHOP_MICRO_BATCHES", 4, _counts)),
                              label="micro-batches")
    pp_box = learner.prediction("With P = 4 stages and the micro-batches you picked, what share of a step does each "
                                "stage sit idle (the bubble)?", "%")
    _p, _m = 2, 4
    mo.vstack([mo.md(f"""
    ## 3 · Pipeline parallelism: stages, micro-batches and the bubble

    Each GPU holds a slice of the layers, a **stage**. A token still passes every layer in turn, so one batch's
    step is no faster; a batch cut into m **micro-batches** lets the stages work on different ones at once, except
    while the pipeline fills and drains. One slot is one micro-batch through one stage: m micro-batches take
    m + P − 1 slots, and each stage idles in P − 1 of them — the **bubble**:

        bubble = (P − 1) ÷ (m + P − 1)          e.g. P = {_p}, m = {_m}: {par.bubble_share(_p, _m):.0%}

    Engines keep several batches in flight, so the pipeline stays full ("pipeline full" columns). Llama 3.1 8B,
    batch 32.
    """), pp_micro, pp_box])
    return pp_box, pp_micro


@app.cell
def _(pp_micro):
    _m = int(pp_micro.value)
    pp_steps = {(tp, pp, mb): par.parallel_step("llama-3.1-8b", "H100 SXM", tp, pp, mb, 32, 8192)
                for tp, pp, mb in ((1, 1, 1), (1, 2, 1), (1, 2, _m), (1, 4, 1), (1, 4, _m), (2, 2, _m), (4, 1, 1))}
    plots.table(par_views.pipeline_frame(pp_steps.values()), "computed from llama-3.1-8b config.json, bf16, H100 SXM, "
                                                             f"NVLink, 8,192 tokens, efficiency {par.DEFAULT_EFFICIENCY:g}")
    return (pp_steps,)


@app.cell
def _(pp_box, pp_micro, pp_steps):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 25); in marimo, type it in the box above
    _p, _m = 4, int(pp_micro.value)
    learner.beside(pp_box, _given, 100 * pp_steps[(1, _p, _m)].bubble_share, shown=lambda v: f"{v:.0f} % (P = {_p}, m = {_m})",
                   higher="The pipeline fills and drains once per step: P − 1 of its m + P − 1 slots idle on every stage.",
                   lower="Only the P − 1 slots of filling and draining idle; in the other m each stage works.",
                   within="(P − 1) of (m + P − 1) slots, as derived.")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** Compare each pp row with one micro-batch against the same pp with m.
    - **tokens/s rises** with m: the bubble shrank by more than the extra work costs;
    - **tokens/s falls**: in decode every micro-batch reads the stage's weights again, so a slot costs more than
      1/m of a whole batch's, and the m slots cost more than the idle ones saved.
    "max batch" is what pipelining buys: each GPU holds 1/P of the weights, so more sequences fit. tp=4 is the row
    that shortens a token's latency.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 4 · Expert parallelism: the experts a step reads, and the all-to-all

    A mixture-of-experts layer sends each token to k of E experts. Tokens that choose evenly and independently
    touch 1 − (1 − k/E)^b of them at batch b (`stepcost.experts_touched`). With the experts split over 8 GPUs,
    each MoE layer sends every token's hidden state to its experts' GPUs and back: two all-to-alls. **A step waits
    for the busiest GPU**, the one whose block of experts the batch touched most: the table gives the expected
    number on it, computed exactly (`plan.busiest_gpu_experts`), beside the mean. DeepSeek V3 in {term("FP8")} on
    8 H200s over NVLink; its router, which picks within 4 of 8 expert groups and balances load, is taken as uniform.
    """)
    return


@app.cell
def _():
    moe_steps = par.moe_rows("deepseek-v3", "H200", batches=(1, 8, 32, 128, 512), ep=8, weight_dtype="fp8")
    plots.table(par_views.moe_frame(moe_steps), "computed from deepseek-v3 config.json, fp8, 8 × H200, NVLink; "
                                                "uniform independent routing")
    return (moe_steps,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** "experts touched" climbs with the batch towards all of them: the "active
    parameters" figure counts one token's experts. The two all-to-all shares differ where the busiest GPU holds
    more experts than the mean: a small batch, whose few choices land unevenly. Read the busiest one, since the
    layer's output waits for it. Once every expert is touched, both agree.
    """)
    return


@app.cell(hide_code=True)
def _():
    tp_button = replay.run_button()
    forward_box = learner.prediction(
        "Each of two processes does half of every decoder layer, one thread each. How long does the two-process "
        "forward take, as a multiple of one process running the whole model on one thread (0.5 would be half)?", "×")
    mo.vstack([mo.md("""
    ## 5 · Measured here: a tensor-parallel forward in two processes

    Two processes each load the tiny model and keep half of every layer (q/k/v and the MLP's gate/up split by
    columns, the output projections by rows); `torch.distributed` (gloo, over 127.0.0.1) adds the partial outputs,
    two all-reduces per layer. The loopback "link" is measured as a GPU link is — an all-reduce of one float
    (latency) and of 4 MiB (bandwidth) — and the model's all-reduces are predicted over it. The forward is then
    taken apart: one process running the whole model, and each process's shard, waiting and all-reduces.
    """), tp_button, forward_box])
    return forward_box, tp_button


@app.cell
def _(tp_button):
    tp_profile = models.resolve_profile()[0]
    tp_attempt = notebook.attempt("The two-process tensor-parallel forward", replay.measure, "09/tp_forward",
                                  tp_demo.run_tp, world=2, tokens=32, reps=5, run=tp_button.value,
                                  profile=tp_profile, device="cpu")
    tp_measured_run = tp_attempt.value
    tp_run = tp_measured_run.value if tp_measured_run is not None else None
    if tp_run is None:
        _shown = tp_attempt.note()
    else:
        _src = tp_measured_run.source("measured: tiny model (random weights), fp32, cpu, 2 gloo processes, 1 thread each")
        _shown = mo.vstack([plots.table(par_views.tp_frame(tp_run), _src),
                            plots.table(par_views.tp_parts_frame(tp_run), f"{_src}; medians of 5 forwards"),
                            plots.table(par_views.tp_calls_frame(tp_run, expected.REFERENCE_GPU), _src),
                            tp_measured_run.note()])
    _shown
    return tp_attempt, tp_run


@app.cell
def _(forward_box, tp_attempt, tp_run):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 0.6); in marimo, type it in the box above
    if tp_run is None:
        _out = tp_attempt.skipped("The prediction's result")
    else:
        _out = learner.beside(forward_box, _given, regime.ratio(tp_run.forward_s, tp_run.single_forward_s),
                              shown=lambda v: f"{v:.2f}× one process's forward",
                              higher="Half the layers' work is not half the forward: the output head is not split, "
                                     "and waiting and all-reduces are added; the parts table adds them up.",
                              lower="Each process computes half of every decoder layer; the parts table shows what "
                                    "the rest costs.",
                              within="The parts table shows which parts make it up.")
    _out
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** *The logits.* Each process sums half of every row-parallel product and the
    all-reduce adds the two halves: the same sum in another order. Floating-point addition is not associative, so
    the result rounds differently. A difference of the order of one unit of fp32 rounding at the logits' scale
    (ε × scale, the table's third row) is that and nothing else, and the next token stays the same unless two
    logits tie that closely; hundreds of units would be a bug.

    *The time*, by the forward's ratio to one process:
    - **above 1**: the overhead regime. The tiny model's operators are too small for their fixed cost (dispatch,
      a Python hook per all-reduce) to hide, both processes pay it, the output head is computed whole by both,
      and each all-reduce waits for the slower process;
    - **between ½ and 1**: the split work saves more than the communication costs;
    - **at ½ or below**: the shards ran as fast as their FLOPs allow and the link was free.

    The calls table: a call inside the forward against the same call alone says what the forward adds (a process
    waiting to be scheduled, gloo's threads waking), which a bytes-and-latency line cannot. Its last row is the
    same all-reduce over NVLink between two GPUs, computed; NCCL there is what section 2 models. On a GPU machine
    this section still runs on the CPU.
    """)
    return


@app.cell(hide_code=True)
def _():
    _rates = [4, 8, 12, 14, 16, 20]
    disagg_rate = mo.ui.dropdown(options=[str(r) for r in _rates],
                                 value=str(notebook.env_default("WORKSHOP_ARRIVAL_RATE", 12, _rates)),
                                 label="arrival rate (requests/s)")
    mo.vstack([mo.md(f"""
    ## 6 · Disaggregated prefill and decode: when does splitting pay?

    In a shared pool every GPU prefills new requests and decodes running ones; a prefill stalls every decode on
    its GPU, so the {term("ITL")} of those requests jumps. Splitting the GPUs into prefill GPUs and decode GPUs
    removes the stall, but moves each request's KV cache over a link and leaves fewer GPUs for each phase.

    `helpers.parallel.disagg` computes both from the planner's step times: requests of 4,096 prompt and 128 output
    tokens arriving at the rate you pick (Poisson), Mistral 7B on 4 H100 SXMs, KV over InfiniBand. Per
    deployment: the **prefill load** (arrivals × prefill ÷ prefill GPUs; at 1 or more the queue never drains: "–"),
    the decode batch that load sustains (Little's law), {term("TTFT")} (the prefill plus the mean wait of a queue
    of prefills), ITL (a request's mean time per output token) and the **longest gap** between two tokens. The
    shared pool runs each prefill whole; engines that chunk prefills (vLLM V1, SGLang) bound its stall at one
    chunk's step. SLOs: TTFT ≤ 1 s, ITL ≤ 15 ms.
    """), disagg_rate])
    return (disagg_rate,)


@app.cell
def _(disagg_rate):
    disagg_slo = {"ttft_s": 1.0, "itl_s": 0.015}
    disagg_case = dict(model="mistral-7b-v0.1", gpu="H100 SXM", gpus=4, prompt=4096, output=128, link="infiniband")
    disagg_rows = disagg.deployments(rate=float(disagg_rate.value), **disagg_case)
    disagg_table = par_views.deployments_frame(disagg_rows, disagg_slo["ttft_s"], disagg_slo["itl_s"])
    _rates = list(range(1, 21))
    _by_rate = [disagg.deployments(rate=float(r), **disagg_case) for r in _rates]
    _fig, (_a, _b) = plots.figure(ncols=2, width=4.5)
    for _i, _row in enumerate(disagg_rows):
        _a.plot(_rates, [1e3 * rows[_i].itl_s for rows in _by_rate], marker=".", label=_row.name)
        _b.plot(_rates, [rows[_i].ttft_s for rows in _by_rate], marker=".", label=_row.name)
    for _ax, _slo, _unit in ((_a, 1e3 * disagg_slo["itl_s"], "ITL (ms)"), (_b, disagg_slo["ttft_s"], "TTFT (s)")):
        _ax.axhline(_slo, color="#888", ls=":", label="SLO")
        _ax.set_xlabel("arrival rate (requests/s)")
        _ax.set_ylabel(_unit)
        _ax.set_yscale("log")
        _ax.legend(fontsize=7)
    _a.set_title("ITL against the arrival rate")
    _b.set_title("TTFT against the arrival rate")
    _fig = plots.finish(_fig, "computed: helpers.parallel.disagg, mistral-7b-v0.1 bf16, 4 × H100 SXM, 4,096 + 128 tokens")
    mo.vstack([plots.table(disagg_table, f"computed: mistral-7b-v0.1, bf16, 4 × H100 SXM, {disagg_rate.value} requests/s, "
                                         f"planner step times at efficiency {par.DEFAULT_EFFICIENCY:g}, KV over "
                                         f"{links.get_link('H100 SXM', 'infiniband').label}"), _fig])
    return disagg_case, disagg_rows, disagg_slo, disagg_table


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** Read the two SLO labels of each row.
    - **the shared pool above on ITL, a split at or below on both**: splitting pays at this rate;
    - **every row at or below**: the shared pool already meets the SLOs, with all its GPUs for both phases;
    - **a split above on TTFT**: its prefill load approaches 1 and the queue, not the prefill, sets TTFT;
      a split with more prefill GPUs, or none, serves it better.

    The longest gap holds the stall the shared pool pays on every prefill, at any rate: a streaming SLO on the
    slowest gap (a p99 ITL), not the mean, is where the split pays first. The split's one gap is its KV transfer.
    """)
    return


@app.cell
def _():
    offload_computed = offload.offload_steps("llama-3.1-8b", "H100 SXM", contexts=(4096, 32768, 131072))
    mo.vstack([mo.md(f"""
    ## 7 · KV offload

    An offloaded cache (transformers' `OffloadedCache`, vLLM's CPU offloading connector) keeps each layer's keys and
    values in host memory and brings them back before the layer runs: a step that reads the cache moves it over
    PCIe instead of reading it from {term("HBM")}. Llama 3.1 8B (full attention at every layer) on an H100 SXM:
    """), plots.table(par_views.offload_frame(offload_computed),
                      "computed from llama-3.1-8b config.json, bf16 KV, batch 1, H100 SXM HBM against PCIe Gen5 each way"),
               mo.md("""
    **What you should see.** Both columns grow with the context, and their ratio is the GPU's memory bandwidth ÷
    the link's, whatever the context. Offloading buys capacity paid on every step that reads the cache: a fit for
    KV that sits idle (a paused conversation), which engines bring back before it is needed.
    """)])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 8 · How the real engines do it

    | what | vLLM | SGLang |
    | --- | --- | --- |
    | tensor parallel | `--tensor-parallel-size N` | `--tp-size N` |
    | pipeline parallel | `--pipeline-parallel-size N` | `--pp-size N` |
    | expert parallel | `--enable-expert-parallel` (experts over the TP × DP GPUs; DP: whole copies) | `--ep-size N`; `--enable-dp-attention` (data-parallel attention, e.g. {term("MLA")} models) |
    | prefill/decode split | `--kv-transfer-config` (a KV connector, e.g. NixlConnector) | `--disaggregation-mode prefill` or `decode`, `--disaggregation-transfer-backend mooncake` or `nixl` |

    Above one engine, **NVIDIA Dynamo** runs vLLM, SGLang or TensorRT-LLM workers as prefill and decode pools, moves
    KV with NIXL and routes each request to the worker that already holds its {term("prefix", "prefix-caching")};
    **llm-d** does the same on Kubernetes around vLLM and SGLang. To benchmark a multi-GPU server with notebook
    08's workloads:

        vllm serve mistralai/Mistral-7B-v0.1 --tensor-parallel-size 4 --port 8000
        python scripts/engines.py --target http://SERVER:8000 --model mistralai/Mistral-7B-v0.1 --out build/engines/tp4.json

    and compare its ITL with section 2's step at tp=4.
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
    _rows = par.tp_scaling("llama-3.1-8b", "L40S", batch=1, context=4096)
    _link = links.get_link("L40S", None, _rows[-1].tp)
    _step = par.parallel_step("llama-3.1-8b", "L40S", tp=_rows[-1].tp, batch=1, context=4096)
    _one = collectives.all_reduce_parts(_step.all_reduce_bytes, _rows[-1].tp, _link)
    notebook.exercise(1, "A PCIe-only GPU. Run `python -m helpers capacity --model llama-3.1-8b --gpu L40S --context 4096 "
                      "--batch 1 --parallel tp=4`. What share of the step is communication, and where does the speed-up "
                      "flatten?", f"""
    The L40S has no NVLink; its GPUs talk over {_link.label}. Speed-up over one GPU:
    {', '.join(f"tp={r.tp}: {r.speed_up:.2f}×" for r in _rows)}; gain per doubling:
    {', '.join(f"{r.gain_over_previous:.2f}" for r in _rows[1:])} (flattens at: {par.flattens_at(_rows) or '–'}).
    Communication is {_rows[-1].communication_share:.0%} of the step at tp={_rows[-1].tp}: {_step.all_reduces_per_step}
    all-reduces of {_step.all_reduce_bytes:,} B, each {_one.total_s * 1e6:.1f} µs of which latency
    {_one.latency_share:.0%}.
    """)
    return


@app.cell
def _():
    _a = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 4, 1, 32, 8192)
    _b = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 4, 8, 32, 8192)
    _one = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 1, 1, 32, 8192)
    notebook.exercise(2, "The bubble. With pp=4 and batch 32, compare 1 and 8 micro-batches (`--parallel pp=4,mb=8`). "
                      "What happens to the bubble and to the step, and why is the step not 4× shorter?", f"""
    One micro-batch: bubble {_a.bubble_share:.0%}, step {_a.step_s * 1e3:.2f} ms. Eight: bubble {_b.bubble_share:.0%},
    step {_b.step_s * 1e3:.2f} ms; a slot takes {_b.slot_s / _a.slot_s:.2f}× a whole batch's, not 1/8, because every
    micro-batch reads the stage's weights again. A pipeline holds more sequences ({_a.max_batch} against one GPU's
    {_one.max_batch}) and fills with several whole batches in flight; micro-batching one batch does not shorten it.
    """)
    return


@app.cell
def _(disagg_case, disagg_rate, disagg_rows):
    _slow = links.custom_link("slow", 1e9, 5e-6)
    _rows = disagg.deployments(rate=float(disagg_rate.value), **{**disagg_case, "link": _slow})
    notebook.exercise(3, f"A slow KV link. Rerun section 6 at {disagg_rate.value} requests/s with the KV moving at "
                      f"{_slow.bandwidth / 1e9:g} GB/s (`links.custom_link('slow', 1e9, 5e-6)`). What changes?", "\n".join(
                          [f"The KV transfer goes from {1e3 * disagg_rows[1].kv_send_s:.1f} ms to {1e3 * _rows[1].kv_send_s:,.0f} ms. "
                           "It lands once per request, between the first and second token:", ""]
                          + [f"- {new.name}: longest gap {1e3 * old.longest_gap_s:,.1f} → {1e3 * new.longest_gap_s:,.1f} ms, "
                             f"ITL {1e3 * old.itl_s:,.2f} → {1e3 * new.itl_s:,.2f} ms"
                             for old, new in zip(disagg_rows[1:], _rows[1:])]
                          + ["", "The mean ITL spreads it over the request's 127 gaps; a streaming SLO on the slowest "
                                 "gap feels it whole. The prefill load and TTFT do not change."]))
    return


@app.cell(hide_code=True)
def _(ar_batch, ar_gpus, ar_links, decode_message, disagg_rate, disagg_table, flat, tp_batch):
    _ib = ar_links["infiniband"]
    _shared = disagg_table.iloc[0]
    check_questions = [
        learner.Question(f"One decode all-reduce of Mistral 7B at batch {ar_batch} ({decode_message:,} B) over {ar_gpus} "
                         f"H100 SXMs joined by {_ib.name} ({_ib.bandwidth / 1e9:,.0f} GB/s each way, "
                         f"{_ib.hop_latency_us:g} µs a hop): how long does it take?",
                         collectives.all_reduce_s(decode_message, ar_gpus, _ib) * 1e6, "µs"),
        learner.Question(f"At batch {tp_batch.value} (section 2), over which links does the decode speed-up flatten "
                         f"by 8 GPUs (a doubling gains less than {par.FLATTEN_GAIN}×)?",
                         {frozenset(): "neither", frozenset({"pcie"}): "PCIe only", frozenset({"nvlink"}): "NVLink only",
                          frozenset({"nvlink", "pcie"}): "NVLink and PCIe"}[frozenset(k for k, v in flat.items() if v)],
                         options=("NVLink and PCIe", "PCIe only", "NVLink only", "neither")),
        learner.Question(f"At {disagg_rate.value} requests/s (section 6), is the shared pool's ITL below, at or above "
                         "its SLO?", _shared["ITL ÷ SLO label"], options=regime.LABELS),
    ]
    check_form = learner.self_check(check_questions)
    learner.self_check_section(check_form, check_questions, "change a control above and they change with it")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## Takeaways

    - Past one GPU a step is the planner's floor **plus** communication. The all-reduces, twice per layer, do
      not shrink with N: they flatten tensor parallelism, sooner over PCIe than over NVLink.
    - Pipeline parallelism buys memory, not latency; its bubble is (P−1)/(m+P−1), and engines fill it with
      several batches in flight.
    - An MoE step reads more experts as the batch grows, and waits for the GPU whose experts were chosen most.
    - Tensor parallelism over two processes gives the one-process logits up to the rounding of a sum taken in
      another order; what the link model leaves out is measured part by part.
    - Disaggregation trades prefill stalls in decode for a KV transfer and fewer GPUs per phase: read TTFT and
      ITL against their SLOs, and the prefill load, at the rate you serve.
    - Offloading KV to host memory costs a PCIe crossing on every step that reads it.
    """)
    return


@app.cell(hide_code=True)
def _():
    expected.sources(more=(
        "NVIDIA H100, H200, A100, L4, L40S and DGX A100 / H100 / B200 datasheets; AMD Instinct MI300X data sheet — "
        "each link's row in `helpers/data/gpu_links.csv` names its document",
        "NVIDIA Quantum-2 QM9700 InfiniBand switch (64 NDR ports of 400 Gb/s, 51.2 Tb/s bidirectional: 400 Gb/s is "
        "per direction) — <https://www.nvidia.com/en-us/networking/infiniband/qm9700/>",
        "NCCL's cost model: NVIDIA/nccl `src/graph/tuning.cc` (baseLat, hwLat); ring all-reduce: Patarasuk & Yuan, "
        "J. Parallel Distrib. Comput. 69(2), 2009",
        "Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053); GPipe (Huang et al. 2019, arXiv:1811.06965); "
        "DeepSeek-V3 report (arXiv:2412.19437)",
        "DistServe (arXiv:2401.09670); Splitwise (arXiv:2311.18677)",
        "vLLM 0.32 `vllm/engine/arg_utils.py` and `vllm/config/parallel.py` (the installed version); SGLang "
        "`python/sglang/srt/server_args.py` and <https://docs.sglang.io/advanced_features/server_arguments.html>; "
        "NVIDIA Dynamo <https://docs.nvidia.com/dynamo/>; llm-d <https://llm-d.ai/docs/architecture>",
        "Databricks, \"LLM Inference Performance Engineering: Best Practices\" (the efficiency of "
        f"{par.DEFAULT_EFFICIENCY:g})",
    ))
    return


@app.cell(hide_code=True)
def _(check_questions, disagg_rows, moe_steps, tp_run):
    _last = (check_questions, disagg_rows, moe_steps, tp_run)   # after every result above
    mo.md(f"""
    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
