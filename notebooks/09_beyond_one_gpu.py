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

    from helpers import models, notebook, plots
    from helpers.parallel import collectives, kv_offload, links, sim, tp_demo
    from helpers.parallel import plan as par
    from helpers.serving import traces

    notebook.setup()
    return collectives, kv_offload, links, mo, models, notebook, par, pd, plots, sim, tp_demo, traces


@app.cell
def _(mo):
    mo.md("""
    # 09 · Beyond one GPU: parallelism and what it costs to talk, disaggregated prefill and decode, MoE, KV offload

    The planner of notebook 04 split a model over N GPUs for free. Here the GPUs talk, and talking costs
    time. **You will learn:**

    1. the links between GPUs (NVLink, PCIe, InfiniBand) and what a ring [all-reduce](../workshop/glossary.md#all-reduce)
       costs over each;
    2. [tensor parallelism](../workshop/glossary.md#tensor-parallelism)'s decode step with its two all-reduces per
       layer — the speed-up against N, where it flattens, PCIe against NVLink;
       [pipeline parallelism](../workshop/glossary.md#pipeline-parallelism)'s bubble; a
       [mixture of experts](../workshop/glossary.md#moe)' experts touched and its all-to-all;
    3. a tensor-parallel forward **run for real** in two processes on this machine, equal to the
       one-process model, its all-reduces timed against the model's prediction;
    4. when [disaggregating prefill and decode](../workshop/glossary.md#disaggregated-serving) pays, in a
       simulation driven by the planner's step costs;
    5. what offloading the [KV cache](../workshop/glossary.md#kv-cache) to host memory costs per step, and what
       evicting all but attention sinks and a recent window saves and loses;
    6. how vLLM, SGLang, NVIDIA Dynamo and llm-d do it.

    **Run time:** about 1–2 min on a laptop CPU (tiny profile; the two-process run takes most of it);
    about the same on a GPU (the two-process run stays on the CPU, gloo).
    """)
    return


@app.cell
def _(models):
    loaded = models.load()
    on_gpu = loaded.device.startswith("cuda")
    return loaded, on_gpu


@app.cell
def _(mo):
    mo.md("""
    ## 1 · Links, and what an all-reduce costs over them

    Each catalogued GPU's links, from `helpers/data/gpu_links.csv` (each row cites its datasheet). Vendors
    print a link's bandwidth **summed over both directions**; a ring sends one way at a time, so the model
    uses half. A ring all-reduce of M bytes over N GPUs sends 2·(N−1)/N · M bytes per GPU, plus a latency
    per step (NCCL's own figures: `helpers.parallel.collectives`).
    """)
    return


@app.cell
def _(links, pd):
    link_table = pd.DataFrame([{"GPU": l.gpu, "link": l.name, "scope": l.scope,
                                "GB/s both ways (datasheet)": l.bidirectional_gbs,
                                "GB/s each way": l.bandwidth / 1e9, "hop latency µs": l.hop_latency_us}
                               for g in ("L4", "A100 80GB", "H100 SXM", "H200", "B200", "MI300X")
                               for l in links.links(g)])
    link_table.attrs["source"] = "helpers/data/gpu_links.csv (vendor datasheets; hop latency: NCCL tuning.cc)"
    link_table
    return


@app.cell
def _(collectives, links, par, plots):
    _fig, _ax = plots.figure()
    _sizes = [2**k for k in range(10, 31, 2)]
    ar_gpus = 8
    ar_links = {_kind: links.get_link("H100 SXM", _kind, ar_gpus) for _kind in ("nvlink", "pcie", "infiniband")}
    for _l in ar_links.values():
        _ax.loglog(_sizes, [collectives.all_reduce_s(m, ar_gpus, _l) * 1e6 for m in _sizes], marker="o", label=_l.label)
    # one decode all-reduce's message, from the step model itself: batch × hidden × bytes per activation
    decode_message = par.parallel_step("mistral-7b-v0.1", "H100 SXM", tp=ar_gpus, batch=8).all_reduce_bytes
    _ax.axvline(decode_message, color="#888", ls=":",
                label=f"one decode all-reduce, Mistral 7B batch 8: {decode_message:,} B")
    _ax.set_xlabel("message (bytes)")
    _ax.set_ylabel(f"ring all-reduce over {ar_gpus} GPUs (µs)")
    _ax.set_title("All-reduce time: latency-bound below ~1 MB, bandwidth-bound above")
    _ax.legend(fontsize=8)
    plots.finish(_fig, "computed: helpers.parallel.collectives, H100 SXM links from gpu_links.csv")
    return ar_gpus, ar_links, decode_message


@app.cell
def _(ar_gpus, ar_links, collectives, decode_message, mo):
    _nv, _pc, _ib = (ar_links[k] for k in ("nvlink", "pcie", "infiniband"))
    _at = {k: collectives.all_reduce_s(decode_message, ar_gpus, l) * 1e6 for k, l in ar_links.items()}
    _ratio = _nv.bandwidth / _pc.bandwidth
    mo.md(f"""
    **What you should see** (computed, the same on a CPU and a GPU): flat lines on the left — a decode
    step's all-reduce ({decode_message / 1e3:,.0f} kB) is paid in **latency** (microseconds), not bandwidth. The
    flat parts are not on top of each other: a ring over {ar_gpus} GPUs pays 2·({ar_gpus}−1) hops, and a hop costs
    {_nv.hop_latency_us:g} µs over NVLink, {_pc.hop_latency_us:g} µs over PCIe and {_ib.hop_latency_us:g} µs over InfiniBand — at
    that message {_at['nvlink']:.1f}, {_at['pcie']:.1f} and {_at['infiniband']:.1f} µs, InfiniBand
    {_at['infiniband'] / _at['nvlink']:.1f}× NVLink. The lines part by bandwidth only above about a megabyte, where
    PCIe is {_ratio:.1f}× slower than NVLink.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 2 · Tensor parallelism: the step, its all-reduces, and where the speed-up flattens

    Megatron-style tensor parallelism splits every layer over N GPUs and adds the partial results with two
    all-reduces per layer, each of batch × hidden × 2 bytes in a decode step. The step is the planner's
    (notebook 04: bytes ÷ bandwidth or FLOPs ÷ peak, at its efficiency) **plus** the communication, by link
    (`helpers.parallel.plan`). Mistral 7B on H100 SXMs, batch 8, 4,096 tokens.
    """)
    return


@app.cell
def _(par, pd):
    scaling = {kind: par.tp_scaling("mistral-7b-v0.1", "H100 SXM", batch=8, context=4096, link=kind)
               for kind in ("nvlink", "pcie")}
    tp_table = pd.DataFrame([{"link": k, **r} for k, rows in scaling.items() for r in rows])
    tp_table.attrs["source"] = "computed from mistral-7b-v0.1 config.json, bf16, H100 SXM (helpers.parallel.plan)"
    tp_table
    return scaling, tp_table


@app.cell
def _(par, plots, scaling):
    flat = {k: par.flattens_at(rows) for k, rows in scaling.items()}
    _fig, _ax = plots.figure()
    for _k, _rows in scaling.items():
        _ax.plot([r["tp"] for r in _rows], [r["speed_up"] for r in _rows], marker="o", label=_rows[0]["link"])
    _n = [r["tp"] for r in scaling["nvlink"]]
    _ax.plot(_n, _n, ls=":", color="#888", label="ideal (N×)")
    _ax.set_xlabel("GPUs in tensor parallel")
    _ax.set_ylabel("decode speed-up over one GPU")
    _where = [f"{k} at {v} GPUs" for k, v in flat.items() if v]
    _ax.set_title("Mistral 7B decode, batch 8: " + ("communication flattens the speed-up (" + ", ".join(_where) + ")"
                                                    if _where else f"the speed-up does not flatten up to {max(_n)} GPUs"))
    _ax.legend(fontsize=8)
    plots.finish(_fig, f"computed from mistral-7b-v0.1 config.json, bf16, H100 SXM, efficiency {par.DEFAULT_EFFICIENCY:g}")
    return (flat,)


@app.cell
def _(flat, mo, par, scaling):
    _last = {k: rows[-1] for k, rows in scaling.items()}
    _say = {k: (f"flattens at **{v} GPUs**" if v else f"does not flatten up to {_last[k]['tp']} GPUs") for k, v in flat.items()}
    mo.md(f"""
    **What you should see** (computed, the same on a CPU and a GPU): the work halves with each doubling
    but the all-reduces do not: their latency is paid per step, whatever N. Over NVLink the speed-up
    {_say['nvlink']}, over PCIe it {_say['pcie']} (the rule the code applies: doubling the GPUs gains less
    than {par.FLATTEN_GAIN}×). Communication is {_last['nvlink']['communication_share']:.0%} of the step over NVLink at
    {_last['nvlink']['tp']} GPUs and {_last['pcie']['communication_share']:.0%} over PCIe at {_last['pcie']['tp']} GPUs.

    The same from the command line:
    `python -m helpers capacity --model mistral-7b-v0.1 --gpu "H100 SXM" --context 4096 --batch 8 --parallel tp=4 --link pcie`.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 3 · Pipeline parallelism: stages, micro-batches and the bubble

    Pipeline parallelism gives each GPU a slice of the layers. A token still passes through every layer
    in turn, so one batch's step is no faster; a batch cut into m micro-batches keeps the stages busy,
    except while the pipeline fills and drains: the **bubble**, (P−1)/(m+P−1) of the time. Engines keep
    several batches in flight, so the pipeline stays full ("steady"). Llama 3.1 8B, batch 32.
    """)
    return


@app.cell
def _(par, pd):
    pp_table = pd.DataFrame([{k: v for k, v in par.parallel_step("llama-3.1-8b", "H100 SXM", tp, pp, mb, 32, 8192).to_dict().items()
                              if k in ("tp", "pp", "micro_batches", "gpus", "max_batch", "bubble_share", "communication_share",
                                       "step_s", "steady_step_s", "tokens_per_s", "steady_tokens_per_s")}
                             for tp, pp, mb in ((1, 1, 1), (1, 2, 1), (1, 2, 4), (1, 4, 4), (2, 2, 4), (4, 1, 1))])
    pp_table.attrs["source"] = "computed from llama-3.1-8b config.json, bf16, H100 SXM, NVLink (helpers.parallel.plan)"
    pp_table
    return (pp_table,)


@app.cell
def _(mo, pp_table):
    _one = pp_table.iloc[0]
    _pp2 = pp_table.iloc[1]
    mo.md(f"""
    **What you should see** (computed): pp=2 with one micro-batch takes {_pp2['step_s'] / _one['step_s']:.2f}× the
    single GPU's step (no faster; the bubble is {_pp2['bubble_share']:.0%}), but holds {_pp2['max_batch'] / _one['max_batch']:.1f}×
    the batch. Micro-batches shrink the bubble; a full pipeline turns the stages into throughput. Tensor
    parallelism is the one that shortens a token's latency.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 4 · Expert parallelism: how many experts a step reads, and the all-to-all

    A mixture-of-experts layer sends each token to k of E experts. One token reads k/E of the expert
    weights; a batch of b tokens touches 1 − (1 − k/E)^b of them (`helpers.stepcost.experts_touched`), so
    the bytes per step climb with the batch towards the whole model. With the experts split over 8 GPUs,
    each MoE layer sends every token's hidden state to its experts' GPUs and back: two all-to-alls.
    DeepSeek V3 in FP8 on 8 H200s (NVLink).
    """)
    return


@app.cell
def _(par, pd):
    moe_table = pd.DataFrame(par.moe_rows("deepseek-v3", "H200", batches=(1, 8, 32, 128, 512), ep=8, weight_dtype="fp8"))
    moe_table.attrs["source"] = "computed from deepseek-v3 config.json, fp8, 8 × H200, NVLink (helpers.parallel.plan)"
    moe_table
    return (moe_table,)


@app.cell
def _(mo, moe_table):
    _a, _b = moe_table.iloc[0], moe_table.iloc[-1]
    mo.md(f"""
    **What you should see** (computed): batch 1 touches {_a['experts_touched']:.1%} of the experts, batch
    {int(_b['batch'])} {_b['experts_touched']:.1%} — the "active parameters" figure holds for one token only. At
    small batches the all-to-all is {_a['all_to_all_share']:.0%} of (all-to-all + expert reads): latency again;
    at large batches the expert reads dominate.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 5 · Measured here: a tensor-parallel forward in two processes

    Two processes on this machine each load the tiny model and keep half of every layer (q/k/v and the
    MLP's gate/up split by columns, the output projections by rows); `torch.distributed` (gloo, over
    127.0.0.1) adds the partial outputs, two all-reduces per layer. The logits are compared with the
    one-process model's. The loopback "link" is measured the way a GPU link is — an all-reduce of one float
    (latency) and of 4 MiB (bandwidth) — and the model's own all-reduces are predicted over it.
    """)
    return


@app.cell
def _(notebook, pd, tp_demo):
    tp_attempt = notebook.attempt("The two-process tensor-parallel forward", tp_demo.run_tp, world=2, tokens=32, reps=3)
    tp_run = tp_attempt.value
    if tp_run is None:
        _shown = tp_attempt.note()
    else:
        tp_measured = pd.DataFrame([
            {"quantity": "largest |logit difference| vs one process", "value": f"{tp_run.max_abs_diff:.2e}"},
            {"quantity": "same next token at every position", "value": str(tp_run.same_argmax)},
            {"quantity": "forward, one process (ms)", "value": f"{tp_run.single_forward_s * 1e3:.1f}"},
            {"quantity": "forward, two processes (ms)", "value": f"{tp_run.forward_s * 1e3:.1f}"},
            {"quantity": f"in {tp_run.all_reduces} all-reduces of {tp_run.message_bytes:,} B (ms)", "value": f"{tp_run.all_reduce_s * 1e3:.2f}"},
            {"quantity": "waiting for the other process first (ms)", "value": f"{tp_run.wait_s * 1e3:.2f}"},
            {"quantity": "predicted all-reduces over the measured link (ms)", "value": f"{tp_run.predicted_all_reduce_s * 1e3:.2f}"},
            {"quantity": "loopback link: latency (µs) / bandwidth each way (GB/s)",
             "value": f"{tp_run.link_latency_s * 1e6:.0f} / {tp_run.link_bandwidth / 1e9:.2f}"},
        ])
        tp_measured.attrs["source"] = "measured: tiny model (random weights), fp32, cpu, 2 gloo processes, 1 thread each"
        _shown = tp_measured
    _shown
    return tp_attempt, tp_run


@app.cell
def _(mo, tp_attempt, tp_run):
    _ratio = tp_run.all_reduce_s / tp_run.predicted_all_reduce_s if tp_run is not None else float("nan")
    _said = mo.md(f"""
    **What you should see.** On a CPU: the logits agree to about 1e-6 (float sums in another order) and the
    same token wins everywhere. Here the all-reduces took {_ratio:.1f}× the prediction from the measured link;
    the time spent *waiting* for the slower process is shown apart, and on a shared machine it can be the
    largest part — the real-world cost of tensor parallelism that a link model leaves out. On a GPU machine
    this section still runs on the CPU (gloo); NCCL over NVLink is what section 2 models.
    """)
    _said if tp_run is not None else tp_attempt.skipped("What you should see")
    return


@app.cell
def _(mo):
    mo.md("""
    ## 6 · Disaggregated prefill and decode: when does splitting pay?

    In a shared pool every GPU prefills new requests and decodes running ones; a long prefill stalls every
    decode on that GPU, so inter-token latency ([ITL](../workshop/glossary.md#itl)) jumps. Splitting the pool
    into prefill GPUs and decode GPUs removes the stall but moves each request's KV cache over a link and
    leaves fewer GPUs for each phase. A deterministic simulation (`helpers.parallel.sim`) serves the same
    seeded chat trace (48 requests, Poisson arrivals, `helpers.serving.traces`; prompts ×60 to stand for
    long RAG prompts, outputs of about 128 tokens) both ways on 4 H100 SXMs with Mistral 7B, its step costs from the planner, and counts
    [goodput](../workshop/glossary.md#goodput): requests per second meeting a [TTFT](../workshop/glossary.md#ttft)
    and an ITL SLO.
    """)
    return


@app.cell
def _(links, loaded, sim, traces):
    costs = sim.PlannerCosts("mistral-7b-v0.1", "H100 SXM")
    kv_link = links.get_link("H100 SXM", "infiniband")
    disagg_gpus, ttft_slo_s, itl_slo_s = 4, 1.0, 0.020
    disagg, disagg_reqs = {}, {}
    for _rate in (8.0, 24.0):
        disagg_reqs[_rate] = sim.from_trace(traces.chat_trace(48, seed=0, rate_per_s=_rate, output_tokens_median=128),
                                            loaded.tokenizer, prompt_scale=60)
        disagg[_rate] = sim.compare(disagg_reqs[_rate], costs, disagg_gpus, kv_link, ttft_slo_s=ttft_slo_s, itl_slo_s=itl_slo_s)
    mean_prompt = {r: sum(q.prompt_tokens for q in reqs) / len(reqs) for r, reqs in disagg_reqs.items()}
    return costs, disagg, disagg_gpus, disagg_reqs, itl_slo_s, kv_link, mean_prompt, ttft_slo_s


@app.cell
def _(costs, disagg, disagg_gpus, itl_slo_s, kv_link, pd, ttft_slo_s):
    disagg_table = pd.DataFrame([{"arrivals per s": rate, **{k: v for k, v in r.items() if k != "prefill_gpus"}}
                                 for rate, rows in disagg.items() for r in rows])
    disagg_table.attrs["source"] = (f"simulated: {costs.spec.name}, {costs.weight_dtype}, {disagg_gpus} × {costs.gpu}, planner step "
                                    f"costs at efficiency {costs.efficiency:g}; KV over {kv_link.label}; "
                                    f"SLO TTFT ≤ {ttft_slo_s:g} s, ITL ≤ {itl_slo_s * 1e3:g} ms")
    disagg_table
    return


@app.cell
def _(collectives, costs, disagg, kv_link, mean_prompt, mo, sim):
    _lines = []
    for _rate, _rows in disagg.items():
        _best = max(_rows[1:], key=lambda r: r["goodput_rps"])
        _lines.append(f"- at {_rate:g} requests/s: shared goodput {_rows[0]['goodput_rps']:.2f}/s, best split "
                      f"({_best['deployment']}) {_best['goodput_rps']:.2f}/s — splitting **{sim.split_verdict(_rows)}**")
    _mp = mean_prompt[max(mean_prompt)]
    mo.md("**What you should see** (simulated, the same on a CPU and a GPU; the rule: splitting pays when the "
          f"best split's goodput beats the shared pool's by more than {sim.CHANGE_MARGIN:.0%}, and reads *about equal* "
          f"within {sim.CHANGE_MARGIN:.0%} either way):\n\n" + "\n".join(_lines) + f"""

    The split's decode GPUs keep a steady ITL, the shared pool's ITL carries every prefill it runs between
    decode steps; the split pays when those stalls break the ITL SLO, and costs TTFT when a single prefill
    GPU queues. Moving a mean prompt's KV ({_mp:,.0f} tokens, {costs.kv_bytes(int(_mp)) / 1e6:,.0f} MB) over
    {kv_link.label} takes {collectives.send_s(costs.kv_bytes(int(_mp)), kv_link) * 1e3:.1f} ms.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 7 · KV offload and eviction

    **Offload.** transformers' offloaded cache keeps each layer's keys and values in host memory and
    brings them back before the layer runs: every decode step moves the whole cache over PCIe instead of
    reading it from HBM. Computed for Llama 3.1 8B (full attention at every layer) on an H100 SXM, then the
    real offloaded cache tried on this machine.
    """)
    return


@app.cell
def _(kv_offload, pd):
    offload_table = pd.DataFrame(kv_offload.offload_rows("llama-3.1-8b", "H100 SXM", contexts=(4096, 32768, 131072)))
    offload_table.attrs["source"] = "computed from llama-3.1-8b config.json, bf16 KV, batch 1, H100 SXM HBM vs PCIe Gen5"
    offload_table
    return (offload_table,)


@app.cell
def _(kv_offload, loaded, pd):
    offload_run = kv_offload.measure_offloaded(loaded, context=256, steps=8)
    pd.DataFrame([offload_run])
    return (offload_run,)


@app.cell
def _(mo, offload_run, offload_table, on_gpu):
    _ran = offload_run["offloaded_step_s"] is not None
    mo.md(f"""
    **What you should see.** Computed: an offloaded step moves the cache {offload_table.iloc[0]['slower']:.0f}× slower
    than HBM reads it ({offload_table.iloc[-1]['over_pcie_ms']:,.0f} ms a step at {int(offload_table.iloc[-1]['context']):,} tokens), so offloading buys capacity, not speed — worth it for KV that
    is idle (a paused conversation), not for the cache every step reads. Measured here:
    {"the offloaded cache ran, " + f"{offload_run['offloaded_step_s'] * 1e3:.1f} ms a step against {offload_run['plain_step_s'] * 1e3:.1f} ms plain" if _ran else
     "the offloaded cache did not run on this device (" + str(offload_run['offloaded_error']) + "): it needs CUDA streams. On a CPU the 'host' is the same memory, so no CPU measurement could show the PCIe cost anyway"}.
    {"On this GPU the difference is the PCIe traffic." if on_gpu and _ran else ""}
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    **Eviction.** StreamingLLM keeps the first few tokens (the *attention sinks*, which attention piles
    onto) and a recent window, and drops the middle. Teacher-forced over the evaluation text: 256 tokens
    prefilled, then 64 decoded one at a time with the cache cut to 4 sinks + 60 recent tokens after every
    step, against the full cache.
    """)
    return


@app.cell
def _(kv_offload, loaded, models, pd):
    from helpers.serving.kv_quant import quality_profile as _quality_profile

    # quality needs a model whose predictions mean something: the loaded one when trained, else tiny-trained
    _name, _ = _quality_profile(loaded.profile)
    evict_loaded = loaded if _name == loaded.profile else models.load(_name, device=loaded.device)
    evict_rows = [kv_offload.eviction_quality(evict_loaded, 256, 64, sinks=4, window=w) for w in (28, 60, 124, 400)]
    evict_table = pd.DataFrame([{k: r[k] for k in ("sinks", "window", "tokens", "kv_bytes_full", "kv_bytes_kept", "saved",
                                                    "kl_mean", "top1_agreement", "perplexity", "reference_perplexity")}
                                for r in evict_rows])
    evict_table.attrs["source"] = "measured: " + evict_loaded.label
    evict_table
    return evict_loaded, evict_table


@app.cell
def _(evict_loaded, evict_table, mo):
    _random = "random weights" in evict_loaded.model_name
    mo.md(f"""
    **What you should see.** The bytes kept are exactly (sinks + window) tokens' worth on the real cache
    tensors, whatever the model: {evict_table.iloc[1]['saved']:.0%} saved at a 60-token window; a window that holds
    everything changes nothing (KL 0, top-1 agreement 1). {"**The quality columns are meaningless here**: the tiny model's weights are random, so its predictions carry no information to lose. " if _random else ""}On a GPU with
    Mistral 7B, expect the KL to fall and the top-1 agreement to rise as the window grows.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 8 · How the real engines do it

    | what | vLLM | SGLang |
    | --- | --- | --- |
    | tensor parallel | `--tensor-parallel-size N` | `--tp-size N` |
    | pipeline parallel | `--pipeline-parallel-size N` | `--pp-size N` |
    | expert parallel | `--enable-expert-parallel` (experts over the TP × DP GPUs) | `--ep-size N`, and `--enable-dp-attention` for MLA models |
    | prefill/decode split | `--kv-transfer-config` (KV connectors, e.g. NIXL) | `--disaggregation-mode prefill` / `decode`, `--disaggregation-transfer-backend mooncake` or `nixl` |

    Sources: vLLM, "Parallelism and Scaling" and "Disaggregated Prefilling"
    (https://docs.vllm.ai/en/latest/serving/parallelism_scaling.html, https://docs.vllm.ai/en/latest/features/disagg_prefill.html);
    SGLang, "Server Arguments" and "PD Disaggregation" (https://docs.sglang.io/advanced_features/server_arguments.html,
    https://docs.sglang.io/advanced_features/pd_disaggregation.html). Above one engine:
    **NVIDIA Dynamo** (https://github.com/ai-dynamo/dynamo) runs vLLM, SGLang or TensorRT-LLM workers split into
    prefill and decode pools, moves KV with NIXL and routes each request to the worker that already holds
    its prefix (KV-aware routing; https://docs.nvidia.com/dynamo/); **llm-d** (https://github.com/llm-d/llm-d) does
    the same on Kubernetes around vLLM, with a KV-cache-aware scheduler and prefill/decode disaggregation.
    Splitwise (arXiv:2311.18677) and DistServe (arXiv:2401.09670) are the papers behind the split.

    **The benchmark of notebook 08 against a multi-GPU server** (no such machine here; the commands, not a
    run). On the server:

        vllm serve mistralai/Mistral-7B-v0.1 --tensor-parallel-size 4 --port 8000

    then from this repository point the engine benchmark of notebook 08 at it — the same workloads, levels
    and SLO, nothing started or stopped:

        python -m helpers.engines --target http://SERVER:8000 --model mistralai/Mistral-7B-v0.1 \\
            --out build/engines/tp4.json

    or use vLLM's own client:

        vllm bench serve --backend vllm --base-url http://SERVER:8000 --model mistralai/Mistral-7B-v0.1 \\
            --dataset-name random --random-input-len 2000 --random-output-len 200 --num-prompts 200 --request-rate 4

    and compare its ITL with section 2's step for tp=4.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## Exercises
    """)
    return


@app.cell
def _(links, notebook, par):
    _nv = par.tp_scaling("llama-3.1-8b", "L40S", batch=1, context=4096)
    _n = par.flattens_at(_nv)
    _link = links.get_link("L40S", None, _nv[-1]["tp"])
    _step = par.parallel_step("llama-3.1-8b", "L40S", tp=_nv[-1]["tp"], batch=1, context=4096)
    notebook.folded("1 · A PCIe-only GPU. Run `python -m helpers capacity --model llama-3.1-8b --gpu L40S --context 4096 "
                    "--batch 1 --parallel tp=4`. What share of the step is communication, and where does the speed-up flatten?", f"""
    The L40S has no NVLink; its GPUs talk over {_link.label}. At batch 1 the speed-up over one GPU is
    {', '.join(f"tp={r['tp']}: {r['speed_up']:.2f}×" for r in _nv)}; communication is
    {_nv[-1]['communication_share']:.0%} of the step at tp={_nv[-1]['tp']}.
    {"It flattens at " + str(_n) + " GPUs." if _n else "It does not flatten within these counts."} At batch 1 the messages are
    tiny ({_step.all_reduce_bytes:,} B): the latency per all-reduce, {_step.all_reduces_per_step} of them per token, is what costs.
    """)
    return


@app.cell
def _(notebook, par):
    _a = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 4, 1, 32, 8192)
    _b = par.parallel_step("llama-3.1-8b", "H100 SXM", 1, 4, 8, 32, 8192)
    notebook.folded("2 · The bubble. With pp=4 and batch 32, compare 1 and 8 micro-batches "
                    "(`--parallel pp=4,mb=8`). What happens to the bubble and to the step, and why is the step "
                    "not 4× shorter?", f"""
    One micro-batch: bubble {_a.bubble_share:.0%}, step {_a.step_s * 1e3:.2f} ms. Eight: bubble {_b.bubble_share:.0%}, step
    {_b.step_s * 1e3:.2f} ms. In decode every micro-batch reads the stage's weights again, so cutting the batch
    multiplies the weight reads: the bubble shrinks but each slot costs almost as much as a whole batch.
    Pipelines pay off in decode by holding more sequences and keeping several batches in flight, not by
    micro-batching one.
    """)
    return


@app.cell
def _(collectives, costs, disagg, disagg_gpus, disagg_reqs, itl_slo_s, kv_link, links, mean_prompt, notebook, sim,
      ttft_slo_s):
    _rate = 24.0
    _slow_link = links.custom_link("slow", 1e9, 5e-6)
    _slow = sim.compare(disagg_reqs[_rate], costs, disagg_gpus, _slow_link, ttft_slo_s=ttft_slo_s, itl_slo_s=itl_slo_s)
    _fast = disagg[_rate]
    _best = max(_slow[1:], key=lambda r: r["goodput_rps"])
    _same = next(r for r in _fast if r["deployment"] == _best["deployment"])
    _kv = costs.kv_bytes(int(mean_prompt[_rate]))
    _before, _now = sim.split_verdict(_fast), sim.split_verdict(_slow)
    notebook.folded(f"3 · A slow KV link. Rerun section 6 at {_rate:g} requests/s with the KV moving at "
                    f"{_slow_link.bandwidth / 1e9:g} GB/s (`links.custom_link('slow', 1e9, 5e-6)`). Does the split still pay?", f"""
    Shared pool: goodput {_slow[0]['goodput_rps']:.2f}/s, SLO met by {_slow[0]['slo_attainment']:.0%}. Best split
    ({_best['deployment']}): {_best['goodput_rps']:.2f}/s, SLO met by {_best['slo_attainment']:.0%} — splitting
    **{_now}** (over {kv_link.label} it read **{_before}**). Each request's KV ({costs.spec.name} holds
    {costs.kv_bytes(1) / 1e3:.0f} kB a token: the mean prompt of {mean_prompt[_rate]:,.0f} tokens, {_kv / 1e9:.2f} GB) now takes
    {collectives.send_s(_kv, _slow_link):.2f} s to cross instead of {collectives.send_s(_kv, kv_link) * 1e3:.1f} ms. The simulation
    stamps the first token when the prefill ends, so the wait lands between the first and second token: that
    split's TTFT p90 is {_same['ttft_p90_s']:.2f} s over {kv_link.name} and {_best['ttft_p90_s']:.2f} s over the slow link,
    {"unchanged" if abs(_same['ttft_p90_s'] - _best['ttft_p90_s']) < 5e-3 else "changed by the queue"}, while its ITL p90 goes from
    {_same['itl_p90_s'] * 1e3:.1f} ms to {_best['itl_p90_s'] * 1e3:.1f} ms (SLO {itl_slo_s * 1e3:g} ms). The split pays only when the link
    moves a prompt's cache faster than the stalls it removes.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## Takeaways

    - Past one GPU the step is the planner's floor **plus** communication. A decode step's all-reduces are
      small: their **latency**, paid twice per layer, is what flattens tensor parallelism, and PCIe flattens
      it sooner than NVLink.
    - Pipeline parallelism buys memory, not latency; its bubble is (P−1)/(m+P−1), and engines hide it by
      keeping several batches in flight.
    - An MoE step reads more experts as the batch grows; the all-to-all is the price of spreading them.
    - Tensor parallelism is real and exact here: two processes give the one-process logits; what the link
      model leaves out is waiting for the slowest process.
    - Disaggregation removes prefill stalls from decode at the price of a KV transfer and fewer GPUs per
      phase: it pays when the stalls break the ITL SLO — measure goodput, not throughput.
    - Offloading KV to host memory costs a PCIe crossing per step; eviction saves memory at a quality
      cost that only a trained model can show.
    """)
    return


if __name__ == "__main__":
    app.run()
