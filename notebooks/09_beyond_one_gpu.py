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
    from helpers.parallel import collectives, disagg, links, tp_demo, views as par_views
    from helpers.parallel import plan as par

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 09 · Beyond one GPU: parallelism, and what talking costs

    Notebook 04 split a model over N GPUs for free. Here the GPUs talk, and talking takes time.

    **What you will learn**

    1. What a ring {term("all-reduce")} costs over {term("NVLink")}, {term("PCIe")} and {term("InfiniBand")}, and
       what that does to {term("tensor parallelism")}, {term("pipeline parallelism")} and a
       {term("mixture of experts", "moe")}' {term("all-to-all")} ({term("expert parallelism")}).
    2. A tensor-parallel forward in two processes on this machine ({term("gloo")}) against one process.
    3. When {term("disaggregating prefill and decode", "disaggregated-serving")} pays.
    4. What {term("offloading the KV cache", "kv-offload")} costs, and the engines' flags for all of it.

    {run_times.header("09")}

    GPU figures are *computed*: the planner's step at an {term("efficiency")} of {par.DEFAULT_EFFICIENCY:g}, plus
    communication.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 1 · Links, and what an all-reduce costs over them

    NVLink joins a server's GPUs, PCIe a GPU to its host, InfiniBand the servers. NVIDIA's GPU datasheets add
    both directions ("NVLink 900 GB/s" is 450 each way); an InfiniBand port's rate is per direction (NDR 400 Gb/s:
    50 GB/s each way). A ring sends one way; hop latencies are {term("NCCL")}'s.
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
        f"{par.ACTIVATION_BYTES} B = {decode_message:,} B twice per layer. Over {ar_gpus} H100 SXMs' NVLink "
        f"({ar_links['nvlink'].bandwidth / 1e9:,.0f} GB/s each way), how long does one take?", "µs")
    ar_box
    return (ar_box,)


@app.cell(hide_code=True)
def _(ar_gpus, ar_links, decode_message):
    ar_parts = collectives.all_reduce_parts(decode_message, ar_gpus, ar_links["nvlink"])
    _p = ar_parts
    mo.md(f"""
    **The ring all-reduce, derived.** Each of N GPUs cuts its M-byte message into N chunks. *Reduce-scatter*
    (N−1 steps): each sends a chunk on and adds the one it receives. *All-gather* (N−1 more): the sums travel
    round. Each GPU sends 2·(N−1)/N · M bytes at one-way bandwidth B; each step waits a hop's latency α; NCCL's
    base cost is paid once:

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
    **What you should see.** The table is the dotted line, link by link.
    - **latency share above ½**: the message is under the crossover; the hops set the time and latency ranks
      the links (the figure's flat left side);
    - **below ½**: the bytes set it, and bandwidth ranks them (the right side).
    """)
    return


@app.cell(hide_code=True)
def _():
    _batches = [1, 8, 32, 128]
    tp_batch = mo.ui.dropdown(options=[str(b) for b in _batches], value=str(notebook.env_default("WORKSHOP_TP_BATCH", 8, _batches)),
                              label="batch (sequences decoded together)")
    tp_box = learner.prediction("Over PCIe, how many times faster is Mistral 7B's decode step on 8 GPUs than on one, at "
                                "your batch? (At 128, over 2 GPUs: one cannot hold it.)", "×")
    mo.vstack([mo.md(f"""
    ## 2 · Tensor parallelism: where the speed-up flattens

    Megatron-style tensor parallelism splits every weight matrix over N GPUs; two all-reduces per layer add the
    partial results. The step: the planner's work ÷ N **plus** those all-reduces, every shard at the same
    efficiency (an **assumption**: notebook 03 measures small matrices further from their floor).
    """), tp_batch, notebook.static_note({"WORKSHOP_TP_BATCH": "1, 8, 32 or 128", "WORKSHOP_MICRO_BATCHES": "2, 4, 8 or 16",
                                          "WORKSHOP_ARRIVAL_RATE": "4, 8, 12, 14, 16 or 20"}),
                tp_box])
    return tp_batch, tp_box


@app.cell
def _(tp_batch):
    scaling = {kind: par.tp_scaling("mistral-7b-v0.1", "H100 SXM", batch=int(tp_batch.value), context=4096, link=kind)
               for kind in ("nvlink", "pcie")}
    plots.table(par_views.frame([_r for _rows in scaling.values() for _r in _rows], par_views.TP_COLUMNS), f"computed from mistral-7b-v0.1 config.json, bf16, H100 SXM, batch "
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
    **What you should see.** "gain over previous" is what a doubling of N buys; the speed-up **flattens** below
    {par.FLATTEN_GAIN}×.
    - a gain **at** 2: the halved work still sets the step;
    - a gain falling towards 1: the all-reduces, which do not shrink with N, have caught up with the work; over
      PCIe, whose all-reduces cost more, at a smaller N.
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

    Each GPU holds a **stage** of the layers; a batch cut into m **micro-batches** keeps the stages busy except
    while the pipeline fills and drains. One micro-batch through one stage is a slot: m micro-batches take
    m + P − 1 slots, and each stage idles in P − 1 of them, the **bubble**:

        bubble = (P − 1) ÷ (m + P − 1)          e.g. P = {_p}, m = {_m}: {par.bubble_share(_p, _m):.0%}

    Engines keep several batches in flight ("pipeline full"). Llama 3.1 8B, batch 32.
    """), pp_micro, pp_box])
    return pp_box, pp_micro


@app.cell
def _(pp_micro):
    _m = int(pp_micro.value)
    pp_steps = {(tp, pp, mb): par.parallel_step("llama-3.1-8b", "H100 SXM", tp, pp, mb, 32, 8192)
                for tp, pp, mb in ((1, 1, 1), (1, 2, 1), (1, 2, _m), (1, 4, 1), (1, 4, _m), (2, 2, _m), (4, 1, 1))}
    plots.table(par_views.frame(pp_steps.values(), par_views.PIPELINE_COLUMNS), "computed from llama-3.1-8b config.json, bf16, H100 SXM, "
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
    **What you should see.** Each pp with one micro-batch, then with m:
    - **tokens/s rises**: the bubble shrank by more than the extra work costs;
    - **tokens/s falls**: each micro-batch reads the stage's weights again, costing more than the bubble saved.

    Pipelining buys "max batch"; tp=4 shortens a token's latency.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 4 · Expert parallelism: the experts a step reads, and the all-to-all

    An MoE layer sends each token to k of E experts; b tokens touch 1 − (1 − k/E)^b of them. With the experts
    over 8 GPUs, each layer sends every token to its experts' GPUs and back: two all-to-alls. **A step waits for
    the busiest GPU**: its expected experts, exactly (`plan.busiest_gpu_experts`), beside the mean. DeepSeek V3,
    {term("FP8")}, 8 H200s; its router (4 of 8 groups, load balancing) taken as uniform.
    """)
    return


@app.cell
def _():
    moe_steps = par.moe_rows("deepseek-v3", "H200", batches=(1, 8, 32, 128, 512), ep=8, weight_dtype="fp8")
    plots.table(moe_steps, "computed from deepseek-v3 config.json, fp8, 8 × H200, NVLink; "
                                                "uniform independent routing")
    return (moe_steps,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** "experts touched" climbs with the batch: "active parameters" count one token's.
    The two all-to-all shares part where few choices land unevenly (small batches) and meet once every expert
    is touched; the busiest one is what a step pays.
    """)
    return


@app.cell(hide_code=True)
def _():
    tp_button = replay.run_button()
    forward_box = learner.prediction(
        "Two processes (one thread each) each do half of every layer. Their forward takes how many times one "
        "process's?", "×")
    mo.vstack([mo.md("""
    ## 5 · Measured here: a tensor-parallel forward in two processes

    Two processes each keep half of every layer of the tiny model (q/k/v and gate/up by columns, the output
    projections by rows); gloo over 127.0.0.1 adds the partial outputs. The loopback is measured as a link (an
    all-reduce of 4 B and of 4 MiB) and the model's all-reduces predicted over it.
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
                              higher="The output head is not split, and waiting and all-reduces are added: see the "
                                     "parts table.",
                              lower="Half of every decoder layer each: the parts table shows the rest.",
                              within="The parts table shows what makes it up.")
    _out
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** *The logits.* The all-reduce adds two half-sums: the same sum in another order,
    which rounds differently (floating-point addition is not associative). A difference of the order of one unit
    of fp32 rounding at the logits' scale is that alone; hundreds would be a bug.

    *The time*, forward ÷ one process:
    - **above 1**, the overhead regime: operators too small to hide their fixed cost, paid twice; the output
      head computed by both; each all-reduce waiting for the slower process;
    - **between ½ and 1**: the split work saves more than the talking costs;
    - **½ or below**: the shards ran at their FLOPs' pace over a free link.

    The calls table's last row is the same call over NVLink, computed.
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

    In a shared pool a prefill stalls every decode on its GPU, and their {term("ITL")} jumps. Prefill GPUs apart
    from decode GPUs remove the stall, but move each request's KV cache over a link and leave fewer GPUs per
    phase. `helpers.parallel.disagg` computes both from the planner's step times: the **prefill load** (arrivals
    × prefill ÷ prefill GPUs; from 1 the queue never drains: "–"), {term("TTFT")} with queueing, ITL per output
    token, the **longest gap**. Prefills run whole; engines that chunk them (vLLM V1, SGLang) stall for one chunk.
    SLOs: TTFT ≤ 1 s, ITL ≤ 15 ms.
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
        _ax.axvline(float(disagg_rate.value), color="#bbb", lw=1, label="your rate")
        _ax.set_xlabel("arrival rate (requests/s)")
        _ax.set_ylabel(_unit)
        _ax.legend(fontsize=7)
    _b.set_yscale("log")
    _a.set_title("ITL against the arrival rate")
    _b.set_title("TTFT against the arrival rate")
    _fig = plots.finish(_fig, "computed: helpers.parallel.disagg, mistral-7b-v0.1 bf16, 4 × H100 SXM, 4,096 + 128 tokens")
    mo.vstack([plots.table(disagg_table, f"computed: mistral-7b-v0.1, bf16, 4 × H100 SXM, {disagg_rate.value} requests/s of 4,096 + 128 tokens, "
                                         f"planner step times at efficiency {par.DEFAULT_EFFICIENCY:g}, KV over "
                                         f"{links.get_link('H100 SXM', 'infiniband').label}"), _fig])
    return disagg_case, disagg_rows, disagg_slo, disagg_table


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** Read each row's two labels.
    - **shared above on ITL, a split at or below on both**: splitting pays at this rate;
    - **every row at or below**: the shared pool meets the SLOs with all its GPUs;
    - **a split above on TTFT**: its prefill load approaches 1, and the queue sets TTFT.

    The shared pool's longest gap holds a whole prefill at any rate: an SLO on the slowest gap (p99 ITL) is
    where splitting pays first.
    """)
    return


@app.cell
def _():
    offload_computed = disagg.offload_steps("llama-3.1-8b", "H100 SXM", contexts=(4096, 32768, 131072))
    mo.vstack([mo.md(f"""
    ## 7 · KV offload

    An offloaded cache lives in host memory: a step brings it over PCIe instead of reading it from {term("HBM")}.
    """), plots.table(offload_computed,
                      "computed from llama-3.1-8b config.json, bf16 KV, batch 1, H100 SXM HBM against PCIe Gen5 each way"),
               mo.md("""
    **What you should see.** The two times' ratio is HBM's bandwidth ÷ the link's at every context: capacity,
    paid on each step that reads the cache; a fit for idle KV.
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

    Above one engine, **NVIDIA Dynamo** runs vLLM, SGLang or TensorRT-LLM workers as prefill and decode pools,
    moves KV with NIXL and routes a request to the worker holding its {term("prefix", "prefix-caching")};
    **llm-d** does this on Kubernetes. Notebook 08's benchmark against a multi-GPU server:

        vllm serve mistralai/Mistral-7B-v0.1 --tensor-parallel-size 4 --port 8000
        python -m servebench record --target http://SERVER:8000 --model mistralai/Mistral-7B-v0.1 --out build/engines/tp4.json
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
    notebook.exercise(1, "A PCIe-only GPU: `python -m helpers capacity --model llama-3.1-8b --gpu L40S --context 4096 "
                      "--batch 1 --parallel tp=4`. What share of the step is communication, and where does the speed-up "
                      "flatten?", f"""
    Over {_link.label}: {', '.join(f"tp={r.tp}: {r.speed_up:.2f}×" for r in _rows)}; flattens at
    {par.flattens_at(_rows) or '–'}. Communication at tp={_rows[-1].tp}: {_rows[-1].communication_share:.0%} of the
    step, {_step.all_reduces_per_step} all-reduces of {_one.total_s * 1e6:.1f} µs, {_one.latency_share:.0%} latency.
    """)
    return


@app.cell
def _():
    _a = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 4, 1, 32, 8192)
    _b = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 4, 8, 32, 8192)
    _one = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 1, 1, 32, 8192)
    notebook.exercise(2, "The bubble. With pp=4 and batch 32, compare 1 and 8 micro-batches (`--parallel pp=4,mb=8`). "
                      "Why is the step not shorter in proportion to the bubble?", f"""
    Bubble {_a.bubble_share:.0%} → {_b.bubble_share:.0%}, step {_a.step_s * 1e3:.2f} → {_b.step_s * 1e3:.2f} ms:
    a slot takes {_b.slot_s / _a.slot_s:.2f}× a whole batch's, not 1/8, as each micro-batch reads the stage's
    weights again. A pipeline buys room: {_a.max_batch} sequences against one GPU's {_one.max_batch}.
    """)
    return


@app.cell
def _(disagg_case, disagg_rate, disagg_rows):
    _slow = links.custom_link("slow", 1e9, 5e-6)
    _rows = disagg.deployments(rate=float(disagg_rate.value), **{**disagg_case, "link": _slow})
    notebook.exercise(3, f"A slow KV link: section 6 at {disagg_rate.value} requests/s with the KV moving at "
                      f"{_slow.bandwidth / 1e9:g} GB/s (`links.custom_link('slow', 1e9, 5e-6)`). What changes?", "\n".join(
                          [f"The transfer: {1e3 * disagg_rows[1].kv_send_s:.1f} → {1e3 * _rows[1].kv_send_s:,.0f} ms, "
                           "between the first and second token:", ""]
                          + [f"- {new.name}: longest gap {plots.cell_text(1e3 * old.longest_gap_s)} → "
                             f"{plots.cell_text(1e3 * new.longest_gap_s)}, ITL {plots.cell_text(1e3 * old.itl_s)} → "
                             f"{plots.cell_text(1e3 * new.itl_s)} ms"
                             for old, new in zip(disagg_rows[1:], _rows[1:])]
                          + ["", "The mean ITL spreads it over 127 gaps; one gap takes it whole."]))
    return


@app.cell(hide_code=True)
def _(ar_gpus, ar_links, decode_message, disagg_rate, disagg_table, flat, tp_batch):
    _ib = ar_links["infiniband"]
    _shared = disagg_table.iloc[0]
    check_questions = [
        learner.Question(f"Section 1's all-reduce ({decode_message:,} B, {ar_gpus} GPUs) over {_ib.name} "
                         f"({_ib.bandwidth / 1e9:,.0f} GB/s each way, {_ib.hop_latency_us:g} µs a hop): how long?",
                         collectives.all_reduce_s(decode_message, ar_gpus, _ib) * 1e6, "µs"),
        learner.Question(f"At batch {tp_batch.value} (section 2), over which links does the speed-up flatten by 8 GPUs?",
                         {frozenset(): "neither", frozenset({"pcie"}): "PCIe only", frozenset({"nvlink"}): "NVLink only",
                          frozenset({"nvlink", "pcie"}): "NVLink and PCIe"}[frozenset(k for k, v in flat.items() if v)],
                         options=("NVLink and PCIe", "PCIe only", "NVLink only", "neither")),
        learner.Question(f"At {disagg_rate.value} requests/s (section 6), is the shared pool's ITL below, at or above "
                         "the SLO?", _shared["ITL ÷ SLO label"], options=regime.LABELS),
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

    - A step past one GPU is the planner's floor **plus** communication, which does not shrink with N.
    - Pipelines buy memory, not latency.
    - An MoE step waits for its busiest GPU.
    - Tensor parallelism is exact up to the rounding of a reordered sum.
    - Disaggregation trades prefill stalls for a KV transfer and fewer GPUs per phase.
    - Offloaded KV crosses PCIe on every step that reads it.
    """)
    return


@app.cell(hide_code=True)
def _():
    expected.sources(more=(
        "Links: the datasheets named in `helpers/data/gpu_links.csv`; NVIDIA Quantum-2 QM9700 (64 × 400 Gb/s = "
        "51.2 Tb/s both ways) <https://www.nvidia.com/en-us/networking/infiniband/qm9700/>",
        "NVIDIA/nccl `src/graph/tuning.cc`; Patarasuk & Yuan 2009 (ring all-reduce)",
        "Megatron-LM arXiv:1909.08053; GPipe arXiv:1811.06965; DeepSeek-V3 arXiv:2412.19437; DistServe "
        "arXiv:2401.09670; Splitwise arXiv:2311.18677",
        "vLLM 0.32 `engine/arg_utils.py`, `config/parallel.py`; SGLang `srt/server_args.py`; "
        "<https://docs.nvidia.com/dynamo/>; <https://llm-d.ai/docs/architecture>",
        "Databricks, \"LLM Inference Performance Engineering\" (the efficiency)",
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
