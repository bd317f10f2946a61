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

    from helpers import notebook
    from helpers.engines import bench, figures, guide, process, servers

    notebook.setup()
    return bench, figures, guide, mo, pd, process, servers


@app.cell
def _(mo):
    mo.md("""
    # 08 · Serving engines: a benchmark against real server processes

    The talk compared a Hugging Face baseline with vLLM (default, + prefix caching, + fp8 KV cache,
    + n-gram speculation) and SGLang — an hour of manual server restarts, and the SGLang part failed
    live. Here every configuration runs as a **real server process** started, measured and stopped by
    `helpers.engines`, and the load comes from two clients: **guidellm**, the established load
    generator, and a **small streaming client** of our own that shows where TTFT and ITL come from.

    You will:
    1. start servers as child processes on a free port of 127.0.0.1 and stop them, always;
    2. see TTFT and inter-token latency (ITL) appear in the arrival times of streamed chunks;
    3. measure `transformers serve` with **continuous batching off and on**, side by side, at several
       concurrency levels — throughput against latency, and **goodput** under an SLO;
    4. check our client against guidellm on the same server and workload;
    5. read the **decision guide**: which engine for which workload, measured and published figures.

    **Run time**: about 2 minutes on 2 CPU cores with the tiny model (two `transformers serve`
    processes, a few dozen requests each); on a GPU host `make engines` runs every configuration
    installed there (vLLM, SGLang) in minutes.
    """)
    return


@app.cell
def _(servers):
    configs, skipped = servers.available()
    return configs, skipped


@app.cell
def _(configs, pd, skipped):
    engines_table = pd.DataFrame([c.to_dict() for c in configs] +
                                 [{"name": s["name"], "engine": s["name"], "command": "—", "description": "not here: " + s["why"]}
                                  for s in skipped])
    engines_table
    return


@app.cell
def _(mo):
    mo.md("""
    ## 1 · A server is a child process

    `helpers.engines.process.ServerProcess` takes a command line with `{port}`, picks a free port on
    127.0.0.1, starts the process in its own process group with its log in a file, and polls
    `GET /health` until it answers (or a timeout, or the process exits — each a clear error with the
    end of the log). It is stopped when the `with` block ends — also when a cell fails or the kernel
    is interrupted — at interpreter exit, and, on Linux, by the kernel if this notebook's process
    dies (a parent-death signal). The table above lists the configurations this machine can run and
    why the others cannot.

    **What you should see** — on a CPU: the two `transformers serve` configurations; vLLM and SGLang
    skipped (their wheels need CUDA). On a GPU host with vLLM and SGLang installed: the talk's four
    vLLM steps and SGLang as well.
    """)
    return


@app.cell
def _(bench):
    # Every configuration of `transformers serve` in turn: start, warm up, one example request, the
    # workload at each concurrency with our client, then the same with guidellm; stop. A server that fails
    # is a recorded fault; anything else that stops the run is shown below, and the cells that need no
    # server (the decision guide, the exercises, the takeaways) still run.
    run_error = None
    try:
        data = bench.run_all(out=bench.RESULTS_DIR / "notebook08.json", include=("transformers",),
                             plan=bench.notebook_plan)
    except Exception as _exc:  # noqa: BLE001 - shown in the next cell
        run_error = f"{type(_exc).__name__}: {_exc}"
        data = bench.new_result(bench.notebook_plan("cpu"), "cpu", "unknown", "the run did not start")
    table = bench.runs_table(data)
    source = bench.source_label(data)
    return data, run_error, source, table


@app.cell
def _(bench, data, mo, run_error):
    mo.md("**What ran** (each configuration's own server process):\n\n" + bench.status_markdown(data, run_error))
    return


@app.cell
def _(data, mo):
    _w = data["workloads"]["fixed"]
    _ready = ", ".join(f"{c['config']['name']}: {c['ready_s']:.1f} s" for c in data["configs"] if c["ready_s"])
    _ready = f"Servers became ready in {_ready}." if _ready else "No server became ready here (see **What ran**)."
    mo.md(f"""
    ## 2 · TTFT and ITL come from the arrival of streamed chunks

    The workload: {_w['requests']} chat-style prompts of one length (`helpers.serving.traces.chat_trace`,
    seeded) asking for {_w['output_tokens_asked'] // _w['requests']} tokens each, at concurrency
    {", ".join(map(str, data["concurrencies"]))}. {_ready}

    Each request is sent with `"stream": true`. The server answers with Server-Sent Events, one
    `data: {{json}}` line per token; the client notes the clock when each chunk with text arrives.
    **TTFT** = first arrival − send time (queueing + prefill); **ITL** = the gaps after it; a request's
    mean ITL is (last − first) / (tokens − 1) — guidellm's definition, and vLLM's "TPOT".
    """)
    return


@app.cell
def _(data, figures, source):
    _ex = next((c["example"] for c in data["configs"] if c.get("example") and not c["example"]["error"]), None)
    figures.chunks_figure(_ex, source)
    return


@app.cell
def _(data, guide, mo):
    _w = data["workloads"]["fixed"]
    _base, _vllm = guide.talk("baseline", "ITL ms"), guide.talk("vLLM default", "ITL ms")
    mo.md(f"""
    **What you should see** — on a CPU (tiny model): a short orange band (the prefill of a
    {_w['prompt_words_total'] / _w['requests']:.0f}-word prompt, tens of milliseconds on a quiet machine) and evenly spaced
    ticks, one per decode step. On a GPU with Mistral 7B: TTFT of tens of milliseconds, ticks
    {min(_base, _vllm):.0f}–{max(_base, _vllm):.0f} ms apart (the talk measured {_base:g} ms for the baseline and {_vllm:g} ms in vLLM).
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 3 · Continuous batching off and on, as concurrency grows

    Without continuous batching `transformers serve` runs one request at a time: with 8 requests in
    flight, 7 wait, and their TTFT is the time the others take. With it, the server admits new requests
    into the running batch at every step (paged KV cache, bounded here: `--cb-num-blocks 64
    --cb-max-batch-tokens 512`, since by default it sizes its cache from the machine's memory).
    """)
    return


@app.cell
def _(table):
    table
    return


@app.cell
def _(figures, source, table):
    figures.curve_figure(table, source, workload="fixed", tool="client")
    return


@app.cell
def _(data, guide, mo, table):
    _top = max(data["concurrencies"])
    _eff = guide.batching_effect(table, "fixed", _top)
    _failed = int(table["failed"].sum())
    if _eff is None:
        _text = "One of the two configurations produced no result at this level: see the faults below."
    else:
        _text = (f"At concurrency {_top}, continuous batching **{_eff['verdict']}**: {_eff['on tok/s']:.1f} against "
                 f"{_eff['off tok/s']:.1f} output tokens/s (× {_eff['throughput ×']:.2f}), and mean TTFT "
                 f"{_eff['on TTFT ms']:,.0f} ms against {_eff['off TTFT ms']:,.0f} ms (÷ {_eff['TTFT ÷']:.1f}). "
                 f"(A change counts when it exceeds {guide.CHANGE_MARGIN:.0%}.)")
    mo.md(f"""
    {_text} Failed requests in all runs: **{_failed}** (counted in the `failed` column, never dropped).

    **What you should see** — on a CPU: at concurrency 1 both configurations alike; at 4 and 8 the
    baseline's throughput stays flat while its TTFT grows with the queue, and continuous batching gives
    several times the throughput with a far lower TTFT (other processes on the machine slow both). On a
    GPU the same shape, larger: the talk's {guide.talk("baseline", "tok/s"):,} tok/s baseline against
    {guide.talk("vLLM default", "tok/s"):,} tok/s for vLLM.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 4 · Goodput under an SLO

    Raw tokens per second hides users who waited too long. **Goodput** counts only the requests that
    met the service-level objective — a TTFT limit *and* a TPOT (mean ITL) limit — per second
    (DistServe, OSDI 2024). The SLO here is sized for the device (`bench.notebook_plan`).
    """)
    return


@app.cell
def _(data, table):
    goodput_table = (table[table["source"] == "client"]
                     .pivot_table(index="concurrency", columns="configuration", values="goodput req/s")
                     .assign(SLO=data["slo"]))    # empty when no server ran: the next cell says so
    goodput_table
    return (goodput_table,)


@app.cell
def _(data, goodput_table, mo):
    _cols = [c for c in goodput_table.columns if c != "SLO"]
    _best = {c: goodput_table[c].max() for c in _cols}
    _winner = max(_best, key=_best.get) if _best else None
    if not _best:
        _text = "No configuration was measured here (see **What ran** above): there is no goodput to compare."
    elif _best[_winner] > 0:
        _text = f"The highest goodput: **{_winner}**, {_best[_winner]:.2f} requests/s within {data['slo']}."
    else:
        _text = (f"No configuration met {data['slo']} for any request on this machine at these levels: the SLO "
                 "is tighter than what it can serve (a result too — relax it, or serve fewer users).")
    mo.md(f"""
    {_text}

    **What you should see** — on a CPU: the baseline's goodput collapses as concurrency grows (queued
    requests miss the TTFT limit); continuous batching holds it up until the per-token time passes the
    TPOT limit. On a GPU: the same, at tens of requests per second.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 5 · Our client against guidellm

    guidellm drove the same server with the same prompts and `max_tokens` right after our client
    (closed loop at each concurrency), **through a tap** (`helpers.engines.tap`): a relay that
    timestamps every chunk with our client's parsing. So each guidellm request is measured twice, by
    guidellm and by our definitions — the same run. guidellm's definitions
    (guidellm/schemas/base/request_stats.py) are ours: they should agree. Our client's own run, just
    before, is a second run of the same load: it agrees only as far as the machine is steady.
    """)
    return


@app.cell
def _(figures, source, table):
    figures.tools_figure(table, source, workload="fixed") if (table["source"] == "guidellm").any() else None
    return


@app.cell
def _(guide, table):
    agreement_table = guide.agreement(table, "fixed", ours="tap")
    agreement_table
    return (agreement_table,)


@app.cell
def _(guide, table):
    back_to_back = guide.agreement(table, "fixed", ours="client")
    back_to_back
    return (back_to_back,)


@app.cell
def _(agreement_table, back_to_back, data, guide, mo):
    _faults = [f"{c['config']['name']}: {f['kind']}" for c in data["configs"] for f in c["faults"]]

    def _say(t, what):
        if t.empty:
            return f"{what}: guidellm did not run here (" + ("; ".join(_faults) or "not installed") + ")."
        return (f"{what}: **{int(t['agree'].sum())} of {len(t)}** configuration × concurrency pairs agree within "
                f"{guide.AGREEMENT_TOLERANCE:.0%} on both mean TTFT and mean ITL (largest gaps: TTFT "
                f"{t['TTFT gap'].max():.0%}, ITL {t['ITL gap'].max():.0%}).")

    mo.md(f"""
    {_say(agreement_table, "Same run (our definitions on guidellm's requests)")}

    {_say(back_to_back, "Back to back (our client's own run against guidellm's)")}

    Faults recorded during the benchmark: {"; ".join(_faults) or "none"}.

    **What you should see** — on the same run, within a few per cent everywhere (the tap's relay adds
    well under a millisecond per chunk on a quiet machine). Back to back, close on a quiet machine; on
    a busy one (the development machine, at a load average of 12–14, saw gaps of 20–80 %, either way)
    two runs of the same load are two measurements: with a queue, TTFT also depends on how quickly a
    load generator sends its next request. One pitfall: asking
    guidellm for a fixed *output length* makes it send vLLM's `ignore_eos` field, which `transformers
    serve` rejects with 422 for every request — and guidellm still exits 0.
    `helpers.engines.guidellm_runner` passes the length as `max_tokens` instead, and a run whose
    requests all failed is reported as a failed run.
    """)
    return


@app.cell
def _(guide, mo):
    _f = guide.talk_factors()
    mo.md(f"""
    ## 6 · The decision guide

    Which engine for which workload — measured here where this machine can, published elsewhere
    (each row cites its source). The talk's own table comes first: its baseline ran one request at a
    time against vLLM's {_f['concurrent']}. vLLM's "almost 15×" is **{_f['total ×']:.1f}×** in tokens/s; per request its
    ITL is only {_f['per-request ITL ×']:.1f}× shorter, so the other **{_f['concurrency ×']:.1f}×** comes from serving
    {_f['concurrent']} requests at once — {_f['concurrency share']} of the speed-up (the larger factor; section 3 measures
    exactly that effect).
    """)
    return


@app.cell
def _(guide):
    guide.talk_table().assign(**{"× baseline": [1.0] + [round(v, 1) for v in guide.talk_speedups().values()]})
    return


@app.cell
def _(guide):
    guide.decision_table()
    return


@app.cell
def _(guide):
    guide.published_table()
    return


@app.cell
def _(mo):
    mo.md("""
    **When one GPU is outgrown** — tensor parallelism (Megatron-LM) splits every weight matrix and the
    KV heads over N GPUs, with two all-reduces per layer; vLLM and SGLang take `--tensor-parallel-size N`
    / `--tp N`. On paper, with notebook 09's model of the step (`helpers.parallel.plan.parallel_step`:
    the capacity planner's floor ÷ its efficiency, **plus** the all-reduces over the server's fastest
    link) — the same benchmark would then run across the GPUs of one node. tokens/s is an upper bound:
    every step runs the full batch and no prefill.
    """)
    return


@app.cell
def _(guide):
    tp_table = guide.tensor_parallel_table()
    tp_table
    return (tp_table,)


@app.cell
def _(mo, tp_table):
    _fit = tp_table[tp_table["fits"]]
    _step = "decode step ms (floor ÷ efficiency + all-reduces)"
    if len(_fit) >= 2:
        _a, _b = _fit.iloc[-2], _fit.iloc[-1]
        _text = (f"From {_a['GPUs']} to {_b['GPUs']} GPUs the step goes from {_a[_step]:.2f} to {_b[_step]:.2f} ms — "
                 f"× {_b[_step] / _a[_step]:.2f}, not × {_a['GPUs'] / _b['GPUs']:.2f}: the weights per GPU shrink in "
                 f"proportion, the all-reduces do not ({_b['all-reduces ms']:.2f} ms, {_b['communication share']:.0%} of "
                 f"the step at {_b['GPUs']} GPUs).")
    else:
        _text = "Fewer than two of these GPU counts fit the model: no scaling to compare."
    mo.md(f"**What you should see** (computed, the same on every machine): {_text}")
    return


@app.cell
def _(mo):
    _ex1 = mo.md("""
    Call `bench.run_all(include=("transformers",), plan=lambda d: bench.Plan({"w": traces.chat_trace(8, sigma=0,
    output_tokens_median=128)}, (1, 8), bench.SLO(1.0, 0.1)))`. Longer outputs spread the decode over
    more steps: continuous batching's advantage in throughput grows (more steps shared), while TTFT
    without it grows in proportion to the queue ahead.
    """)
    _ex2 = mo.md("""
    `goodput` is requests meeting *both* limits per second: with a TPOT limit below the server's
    per-token time at concurrency 8, continuous batching loses its goodput even as its throughput is
    highest — batching trades per-user speed for total speed. `helpers.engines.metrics.goodput(records,
    SLO(ttft_s, tpot_s), duration_s)` recomputes it from the request records.
    """)
    _ex3 = mo.md("""
    Run `helpers.serving.traces.agentic_trace(agents=4, review_rounds=1)` through `bench.run_config`:
    its review round shares a long prefix with the proposals. `transformers serve` has no prefix cache,
    so every review pays the full prefill; on a GPU, vLLM with prefix caching and SGLang (radix tree)
    reuse it — the 3–4× the talk measured for SGLang on this workload.
    """)
    mo.accordion({
        "Exercise 1 — longer outputs: how do throughput and TTFT change with 128 output tokens?": _ex1,
        "Exercise 2 — tighten the SLO: when does the faster configuration lose on goodput?": _ex2,
        "Exercise 3 — the agentic workload: why would a prefix cache help it, and what does transformers serve lack?": _ex3,
    })
    return


@app.cell
def _(mo, process):
    _left = process.live_servers()
    mo.md(f"""
    ## Takeaways

    - Measure serving **as a server**: a real process, a real HTTP client, streamed chunks — TTFT and
      ITL are arrival times, not function timings.
    - **Continuous batching** is the first win: with requests one at a time, throughput stays flat and
      TTFT grows with the queue.
    - Report **goodput under an SLO** and the **curve across concurrency**, not one throughput number;
      count every failed request, and call a run whose requests all failed a failed run.
    - Two clients (ours and guidellm) agreeing is the check that the numbers are the server's, not the
      client's.
    - Choose the engine by workload: vLLM for general chat, SGLang (or prefix caching) for shared
      prefixes, fp8 KV for memory, tensor parallelism when one GPU is outgrown.

    Servers still running now: **{len(_left)}** (each configuration was stopped when its run ended).
    """)
    return


if __name__ == "__main__":
    app.run()
