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
    import textwrap
    import time

    import marimo as mo
    import pandas as pd

    from helpers.present import expected, learner, notebook, plots, replay
    from helpers.formulas import verdicts
    import psutil

    from helpers.benchmark import agreement, figures, findings, guide, metrics, prefix, records
    from helpers.present.glossary import term
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 08 · Serving engines: a benchmark against real server processes

    The talk compared a Hugging Face baseline with vLLM (default, + {term("prefix caching")}, + fp8 KV cache,
    + n-gram speculation) and SGLang — an hour of manual server restarts, and the SGLang part failed
    live. Here every configuration runs as a **real server process**, started, measured and stopped by
    `helpers.benchmark`: `transformers serve` with {term("continuous batching")} off and on, and **vLLM**
    itself (its CPU build, in an environment of its own), on the same two workloads — ShareGPT-like chat
    and the talk's agentic branching.

    **What you will learn**

    1. To measure a server as its users see it: {term("TTFT")} and {term("ITL")} from the arrival times of
       streamed chunks, throughput against latency as concurrency grows, and open-loop arrivals.
    2. To read {term("goodput")} under an {term("SLO")} two ways — the share of requests within it at each
       request rate (DistServe's goodput: the highest rate with ≥ 90 %) and vLLM bench's requests/s within it.
    3. To check a benchmark against others: our client, guidellm and `vllm bench serve` on the same server,
       and where their definitions differ.
    4. To choose an engine by workload from measured figures, and to tell measured from cited claims.

    {run_times.header("08")} In marimo the live run waits for its button; the full comparison (`make engines`,
    its run time in §6) is shown from its record.
    """)
    return


@app.cell
def _():
    configs, skipped = records.available()     # servers.available(), asked in a process of its own
    plots.table(pd.DataFrame(
        [{"configuration": c["name"], "engine": c["engine"], "command": c["command"]} for c in configs]
        + [{"configuration": s["name"], "engine": "—", "command": "not here: " + s["why"]} for s in skipped]),
        "servers.available(): what this machine can run, and why not the others")
    return configs, skipped


@app.cell(hide_code=True)
def _(configs, skipped):
    _why = next((s["why"] for s in skipped if s["name"] == "vllm"), None)
    _engines = {}
    for _c in configs:
        _engines[_c["engine"]] = _engines.get(_c["engine"], 0) + 1
    _here = "; ".join(f"{_e}: {_n} configuration{'s' if _n > 1 else ''}" for _e, _n in _engines.items()) or "none"
    mo.md(f"""
    ## 1 · A server is a child process

    `helpers.benchmark.process.ServerProcess` takes a command line with `{{port}}`, picks a free port on
    127.0.0.1, and starts it in a session of its own. A server is a tree of processes (vLLM's API server,
    its engine core, their workers), and the whole tree is ended with psutil — SIGTERM, a grace period,
    SIGKILL to what is left — when the `with` block ends, when a cell fails or the kernel is interrupted,
    and at interpreter exit; when this notebook's process dies without cleaning up, the kernel sends the
    server SIGTERM (Linux's `PR_SET_PDEATHSIG`) and the server ends its workers. Readiness is
    `GET /health` within a timeout; the log goes to a file; requests to 127.0.0.1 bypass any proxy.

    **What you should see** — here, from `servers.available()`: {_here}
    {"(vLLM is installed here)" if _why is None else f"— not vLLM here: {_why}"}; SGLang is skipped on a CPU
    (no CPU wheel). On a GPU host with vLLM and SGLang installed: those, in bf16, and SGLang.
    """)
    return


@app.cell
def _():
    run = replay.run_button("Run the live benchmark")
    mo.vstack([run, mo.md("Starts each configuration's server in turn (transformers serve off and on, the vLLM "
                          "default): the agentic workload and ShareGPT-like chat at concurrency 1 and 4, chat also "
                          "open loop at 2 and 8 requests/s (`plans.notebook_plan`), guidellm on one configuration; "
                          "then stops it.")])
    return (run,)


@app.cell
def _(run):
    # transformers serve off and on, then the vLLM default (where installed): start, warm up, one example
    # request, every workload and level, stop — harness.run_all in a process of its own, whose record is
    # read back. A failed server is a recorded fault.
    live = notebook.attempt("The live benchmark", replay.measure, "08/engines", records.run_live,
                            run=run.value, long=True)
    live.note()
    return (live,)


@app.cell
def _():
    # the full comparison (make engines): this machine's own complete run, else the committed record
    record, record_label = records.load_record()
    return record, record_label


@app.cell
def _(live):
    data = live.value.value if live.ok else {"configs": [], "skipped": [], "profile": "unknown"}
    table = records.runs_table(data)
    source = live.value.source(records.source_label(data)) if live.ok else "nothing measured"
    mo.md("**What ran** (each configuration's own server process):\n\n" + records.status_markdown(data, live.error))
    return data, source, table


@app.cell(hide_code=True)
def _(data):
    _ready = ", ".join(f"{c['config']['name']}: {c['ready_s']:.0f} s" for c in data["configs"] if c["ready_s"])
    mo.md(f"""
    ## 2 · TTFT and ITL come from the arrival of streamed chunks

    Each request is sent with `"stream": true`; the server answers with Server-Sent Events, one
    `data: {{json}}` line per chunk, and the client notes the clock when each chunk with text arrives.
    **TTFT** = first arrival − send time (queueing + prefill); a request's **ITL** = (last − first) ÷
    (tokens − 1) — guidellm's definition, and vLLM bench's "{term("TPOT")}". A stream counts only when it says it
    is complete (a `finish_reason`, the usage chunk or `[DONE]`): one cut mid-way is a failure, as is a
    reply that is not a completion chunk or a token count the stream contradicts.
    The timing is written out in `helpers/benchmark/client.py` (`stream_one` on aiohttp, the HTTP stack of
    `vllm bench serve`, and `StreamReader`) because it is the lesson; in your own code the `openai` package
    does the same inside `for chunk in stream`:
    `client.stream_with_openai` times one request that way, and `tests/test_engines.py` checks that both
    clients see the same tokens and the same first-token wait from a server.
    {"Servers became ready in " + _ready + "." if _ready else "No server became ready here (see **What ran**)."}
    """)
    return


@app.cell
def _(data, source):
    example = next((c["example"] for c in data["configs"] if c.get("example") and not c["example"]["error"]), None)
    figures.chunks_figure(example, source)
    return (example,)


@app.cell(hide_code=True)
def _(example):
    _t = guide.talk_table().set_index("configuration")
    _base, _vllm = (next(r for n, r in _t.iterrows() if key in n) for key in ("baseline", "vLLM default"))
    _here = [findings.chunk_reading(example)]
    if example and example.get("ttft_s") is not None:
        _here.insert(0, f"the orange band is this request's TTFT, {example['ttft_s'] * 1e3:,.1f} ms (queueing + prefill)")
    _top = int(guide.talk("vLLM default", "concurrency"))
    mo.vstack([expected.should_see([h for h in _here if h], [
        expected.OnGpu("cited", f"the talk measured, for Mistral 7B on one H100, TTFT {_base['TTFT ms']:g} ms and ITL "
                                f"{_base['ITL ms']:g} ms for the baseline (one request at a time), TTFT {_vllm['TTFT ms']:g} ms "
                                f"and ITL {_vllm['ITL ms']:g} ms in vLLM with {_top} requests at once", guide.TALK_SOURCE)]),
        mo.md(f"""
    ## 3 · Continuous batching and vLLM, as concurrency grows

    Without continuous batching `transformers serve` runs one request at a time: with 4 in flight, 3
    wait, and their TTFT is the time the others take. With it, the server admits new requests into the
    running batch at every step ({term("paged attention", "paged-attention")}'s block table over a bounded
    KV cache here: `--cb-num-blocks 64 --cb-max-batch-tokens 512`). vLLM does the same, with
    {term("chunked prefill")} and its own kernels.
    """)])
    return


@app.cell(hide_code=True)
def _(data):
    top_level = max(data.get("concurrencies") or [1])
    ttft_box = learner.prediction(
        f"Chat, `transformers serve` without continuous batching (one request at a time): with {top_level} requests "
        f"in flight, how many times its mean TTFT at concurrency 1 is its mean TTFT?", "×")
    gain_box = learner.prediction(
        f"Chat at concurrency {top_level}: how many times the output tokens/s of one request at a time does "
        "continuous batching give?", "×")
    mo.vstack([ttft_box, gain_box])
    return gain_box, top_level, ttft_box


@app.cell
def _():
    workload = mo.ui.dropdown(["chat", "agentic"], value="chat", label="workload")
    workload
    return (workload,)


@app.cell
def _(source, table, workload):
    figures.curve_figure(table, source, workload=workload.value, tool="client")
    return


@app.cell
def _(source, table, workload):
    plots.table(table[(table["workload"] == workload.value) & table["rate req/s"].isna()]
                .drop(columns=["rate req/s", "workload"]), source)
    return


@app.cell
def _(data, ttft_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 4); in marimo, type it in the box above
    _q = findings.queue_ttft(data, "chat")
    if _q is None:
        _out = mo.md("_The one-at-a-time server has no chat runs at two levels here: nothing to compare._")
    else:
        _queue = (f"A queue in turn predicts × {_q.queued_ratio:.1f}: the {_q.concurrency} requests sent together, the "
                  f"k-th waits for the k − 1 answers ahead — ({_q.concurrency} − 1) ÷ 2 answers of {_q.e2e_1_ms:,.0f} ms "
                  f"(the mean E2E at concurrency 1) on top of its {_q.ttft_1_ms:,.1f} ms. The measured × {_q.ratio:.1f} is "
                  + findings.ratio_words(_q.ratio / _q.queued_ratio, "that prediction", "longer", "shorter") + ".")
        _out = mo.vstack([learner.beside(ttft_box, _given, _q.ratio, shown=lambda v: f"× {v:.1f}",
            higher="Each request ahead costs a whole answer — its prefill and every decode step — not one prefill.",
            lower="At concurrency 1 the TTFT is a prefill and the server's own overhead; with a queue, the wait for "
                  "the answers ahead is added to it, not multiplied.",
            within="The wait for the answers ahead, added to one prefill."),
            mo.md(f"**The queue, derived.** {_queue}")])
    _out
    return


@app.cell
def _(data, gain_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 3); in marimo, type it in the box above
    _e = findings.batching_effect_data(data, "chat")
    _out = mo.md("_transformers serve did not produce both configurations' chat runs here._") if _e is None else \
        learner.beside(gain_box, _given, _e.throughput_ratio, shown=lambda v: f"× {v:.2f}",
            higher="A decode step reads the weights once for every request in the batch: with N requests in flight "
                   "one step yields N tokens, as long as the step's time is the weights' read and not per-request work.",
            lower="The gain is the batch's tokens per step ÷ how much longer a batched step takes: on a CPU with a "
                  f"tiny model a step's time is not the weights' read alone — each request's ITL went {_e.itl_off_ms:g} → "
                  f"{_e.itl_on_ms:g} ms here — and concurrency 1 pays the batching server's bookkeeping too.",
            within="Tokens per step × steps per second, as the batch and the step time set them.")
    _out
    return


@app.cell(hide_code=True)
def _(data, workload):
    _eff = findings.batching_effect_data(data, workload.value)
    _sc = findings.concurrency_scaling(data, "vLLM default", workload.value)
    if _eff is None:
        _text = "transformers serve did not produce both configurations' runs here: see **What ran**."
    else:
        _text = (f"At concurrency {_eff.concurrency}, continuous batching gave × {_eff.throughput_ratio} the "
                 f"output tokens/s (**{_eff.throughput}**), a mean TTFT **{_eff.ttft}** (off ÷ on "
                 f"{_eff.ttft_ratio}) — and a per-request ITL {_eff.itl_off_ms} → {_eff.itl_on_ms} ms "
                 f"(**{_eff.itl}**): each request shares every step with the others: "
                 f"{findings.batching_trade(_eff)}.")
    if _sc:
        _text += (f" vLLM (default) went from {_sc.tok_s_at_1} to {_sc.tok_s_at_top} output tokens/s between "
                  f"concurrency 1 and {_sc.concurrency} (× {_sc.ratio}).")
    _orca = next(p for p in guide.PUBLISHED if p["claim"].startswith("continuous batching"))
    _paged = next(p for p in guide.PUBLISHED if p["claim"].startswith("paged attention"))
    mo.vstack([mo.md(f"""
    {_text} (A change counts when it exceeds {verdicts.CHANGE_MARGIN:.0%}; failed requests are counted in the
    `failed` column, never dropped. Other processes on the machine slow every figure: see each run's load
    average.)
    """), expected.should_see(findings.batching_reading(data, workload.value), [
        expected.OnGpu("cited", f"{_orca['claim']}: {_orca['figure']}", _orca["source"]),
        expected.OnGpu("cited", f"{_paged['claim']}: {_paged['figure']}", _paged["source"])])])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 4 · Prefix caching on the agentic workload

    The agentic trace: a 1,200-token system prompt shared by every request, a proposal per agent, then
    a review round in which every reviewer reads the system prompt and all proposals. vLLM's
    {term("prefix caching")} (on by default since vLLM 0.8) hashes full blocks of the prompt — 128
    tokens in its CPU build, 16 on a GPU — and reuses the ones already computed; SGLang matches the
    longest cached prefix token by token in a {term("radix tree")}. Each level runs a fresh trace (other
    words, same shape), so a cache warmed by one level does not serve the next.
    """)
    return


@app.cell
def _(data, record, source):
    # the live run has vLLM's default only; prefix caching off against on comes from the record then
    prefix_rows = prefix.prefix_caching_effect(data, "agentic")
    prefix_data, _src = data, source
    if not prefix_rows and record:
        prefix_data, _src = record, f"recorded: {guide.run_label(record)}"
        prefix_rows = prefix.prefix_caching_effect(record, "agentic")
    _model = dict((prefix_data.get("prefix_model") or {}).get("agentic") or {})
    _counted = ((next((c for c in prefix_data["configs"] if c["config"]["name"] == "vLLM default"), {}) or {})
                .get("prefix_cache") or {}).get("agentic")
    if _counted and _counted.get("hit rate") is not None:
        _model["vLLM counted"] = _counted["hit rate"]
    figures.prefix_figure(prefix_rows, _src, _model)
    return prefix_data, prefix_rows


@app.cell(hide_code=True)
def _(prefix_data, prefix_rows):
    _rb = prefix.radix_against_blocks(prefix_data)
    _lines = [f"- concurrency {r.concurrency}: mean TTFT {r.ttft_off_ms:,.0f} → {r.ttft_on_ms:,.0f} ms "
              f"(÷ {r.off_over_on}): **{r.verdict}**" for r in prefix_rows]
    _talk = prefix.radix_against_talk(_rb)
    _radix = ("" if not _rb else
              f"Replayed through a radix tree, the trace's prompts find {_rb.radix:.1%} of their "
              f"tokens cached token by token, {_rb.blocks[16]:.1%} in 16-token blocks and "
              f"{_rb.blocks[128]:.1%} in 128-token ones: **{_rb.verdict}** — token-granular matching "
              f"leaves at most × {_rb.most_saved:.2f} less to prefill than 16-token blocks"
              + (f"; {_talk}" if _talk else "") + ". An edit invalidates every later block in both schemes.")
    _from = "" if prefix_data.get("measured_on") is None else f"From {guide.run_label(prefix_data)}:\n\n"
    _reading = prefix.prefix_reading(prefix_rows)
    mo.vstack([mo.md(_from + "\n".join(_lines or ["vLLM's two prefix settings have not both run here or in the record."]) + f"""

    {_radix}

    At concurrency 1 each request can find the previous one's prefix computed; with several in flight the first
    round's requests arrive together, before any of them has computed the shared blocks.
    """), expected.should_see([_reading] if _reading else [], [expected.OnGpu(
        "cited", f"SGLang {prefix.TALK_AGENTIC_GAP[0]:g}–{prefix.TALK_AGENTIC_GAP[1]:g}× vLLM on this agentic workload "
                 "(radix-tree prefix cache)", "the workshop talk, §8 (one H100)")])])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 5 · Open loop: requests that do not wait for each other

    A closed loop sends the next request when one finishes, so a slow server slows its own load. Users
    do not wait: an **open loop** sends each request at its time — Poisson arrivals at a fixed rate —
    and a server that cannot keep up builds a queue. The vLLM paper plots {term("normalized latency")} (each
    request's end-to-end latency ÷ its output tokens, averaged) against the rate; DistServe plots **SLO
    attainment** (the share of requests within the {term("SLO")}) and calls the highest rate with ≥ 90 %
    the **goodput**. vLLM bench's "goodput" is another figure: requests/s within the SLO in one run.
    Move the SLO: attainment is recomputed from every request's own figures.
    """)
    return


@app.cell
def _(data):
    _ttft, _tpot = (data.get("slo_s") or [1.0, 0.1])
    ttft_ms = mo.ui.slider(100, 5000, step=100, value=int(_ttft * 1e3), label="SLO: TTFT ≤ (ms)")
    tpot_ms = mo.ui.slider(10, 500, step=10, value=int(_tpot * 1e3), label="SLO: TPOT ≤ (ms)")
    mo.vstack([ttft_ms, tpot_ms, mo.md("" if notebook.in_marimo() else
                                       "_Static here (Jupyter, a headless run): the plan's SLO. In marimo the sliders "
                                       "recompute the attainment below._")])
    return tpot_ms, ttft_ms


@app.cell
def _(data, source, table, tpot_ms, ttft_ms):
    slo = metrics.SLO(ttft_ms.value / 1e3, tpot_ms.value / 1e3)
    open_loop = findings.attainment_points(data, "chat", slo)
    figures.open_loop_figure(table, source, "chat", {k: v.points for k, v in open_loop.items()})
    return open_loop, slo


@app.cell(hide_code=True)
def _(data, open_loop, slo, table):
    _t = table[table["rate req/s"].notna() & (table["source"] == "client")]
    _lines = [f"- **{n}**: DistServe goodput " + guide.goodput_words(v.distserve_goodput, [p[0] for p in v.points])
              + "; attainment " +
              ", ".join(f"{p[1]:.0%} at {p[0]:g}/s" for p in v.points if p[1] is not None) for n, v in open_loop.items()]
    mo.vstack([mo.md("\n".join(_lines or ["No open-loop run here."]) + f"""

    Under {slo.describe()}. vLLM bench's figure for the same runs (requests/s within the plan's SLO) is the
    table's `req/s in SLO` column: it counts a run's successes per second, so it can rise with the rate while
    the attainment falls — which is why the two must not share a name. Runs: {len(_t)}.

    A server past its capacity builds a queue, and its normalized latency climbs with the rate. A tighter
    TPOT limit bites where requests share steps (a batching server's time per token is a whole batch's step);
    a looser TTFT limit admits requests that waited in a queue.
    """), expected.should_see(findings.open_loop_reading(data, "chat", open_loop))])
    return


@app.cell(hide_code=True)
def _(record, record_label):
    _took = f" That run took {record['seconds']:.0f} s." if record and record.get("seconds") else ""
    mo.md(f"## 6 · The full comparison: `make engines`\n\nShown from {record_label}.{_took} Six servers (transformers "
          "serve off/on; vLLM prefix caching off, default, + fp8 KV cache, + n-gram speculation), both workloads, "
          "closed and open loop, guidellm and `vllm bench serve` beside our client.")
    return


@app.cell
def _(record, record_label):
    if record is None:
        _out = mo.md(f"_Nothing to show: {record_label}. `make engines` measures it (`workshop/engines.md` says how long it took here)._")
    else:
        _t = records.runs_table(record)
        _out = plots.table(_t[(_t["source"] == "client") & _t["rate req/s"].isna()].drop(columns=["rate req/s"]),
                           f"recorded: {records.source_label(record)} · {guide.run_label(record)}")
    _out
    return


@app.cell(hide_code=True)
def _(record):
    _lines = []
    if record:
        _f = findings.key_figures(record)     # from the record's runs, by this code's rules
        _sc, _fp8 = _f.vllm_scaling, _f.fp8_kv_cache
        if _sc:
            _lines.append(f"- vLLM default, {_sc.workload} workload: × **{_sc.ratio}** output tokens/s from concurrency 1 "
                          f"to {_sc.concurrency} ({_sc.tok_s_at_1} → {_sc.tok_s_at_top}).")
        _lines += [f"- agentic, concurrency {r.concurrency}: prefix caching off ÷ on mean TTFT **{r.off_over_on}** "
                   f"({r.verdict})." for r in _f.prefix_caching.get("agentic") or []]
        _lines.append("- fp8 KV cache: " + ("ran." if _fp8.ran else f"did not run here — {_fp8.why}."))
        _lines += [f"- n-gram speculation, concurrency {r.concurrency}: latency per token × "
                   f"{r.latency_ratio} ({r.latency}), tok/s × {r.throughput_ratio} "
                   f"({r.throughput})" + (" — the chat's prompts are random words: a draft copied from them is accepted only by chance." if r.latency == "higher"
                                          else ".") for r in _f.ngram_speculation]
    mo.md("\n".join(_lines) or "_No record to read._")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 7 · Three load generators on one server

    guidellm and `vllm bench serve` each drive the same server and save every request's times (guidellm's
    JSON report; vllm bench's `--save-detailed`), so each of their requests is measured twice — by them and
    by our definitions on their timestamps, the same run. Our client and vllm bench also each run the load
    straight to the server, three times, alternated — their means agree only as far as the machine is
    steady — and once side by side, both at once on the same server, so that both time the same decode
    steps (make engines' cross-check, `scripts/engines.py`). Beside vLLM's CPU build, which binds its
    worker to a core, every load generator runs on the other cores (`process.client_cpus`), so that none
    takes the model's core, and vLLM's EngineCore, which waits for its worker in a `sched_yield()` loop on the core the load
    shares, runs at nice 10 (`process.yield_spinners`): at the same priority it kept a runnable client off
    that core for a whole answer, which then arrived in one read (TTFT ≈ E2E).

    Where vLLM bench's definitions differ from ours (each pinned by a test, `tests/test_engines_vllm.py`
    against vLLM's own request function): {metrics.DEFINITIONS["vLLM bench's view"]}.
    """)
    return


@app.cell
def _(source, table):
    figures.tools_figure(table, source, workload="fixed")
    return


@app.cell
def _(source, table):
    agreement_table = agreement.agreement(table, "fixed")
    plots.table(agreement_table, f"our definitions on guidellm's requests against guidellm's · {source}") \
        if not agreement_table.empty else mo.md("_guidellm did not run here._")
    return (agreement_table,)


@app.cell
def _(record):
    _rows = []
    for _r in (agreement.crosscheck_gaps(record) if record else []):
        for _what, _g in (("our client, alternated runs", _r.client), ("vllm bench against itself", _r.bench_spread),
                          ("our client, side by side", _r.side_by_side), ("our definitions on its requests", _r.definitions)):
            if _g is not None:
                _rows.append({"concurrency": _r.concurrency, "against vllm bench serve": _what,
                              **{f"{k} gap": getattr(_g, k) for k in agreement.FIGURES}, "the rule": _r.verdict})
        _rows.append({"concurrency": _r.concurrency, "against vllm bench serve":
                      f"our client, side by side: the {_r.shared_gaps:,} steps both streamed", "itl gap": _r.shared_itl,
                      "the rule": _r.verdict})
    plots.table(pd.DataFrame(_rows), "recorded: relative gaps to vllm bench serve's own means (TTFT; our ITL "
                "against its TPOT; our pooled ITL against its ITL; E2E against E2EL)") if _rows else \
        mo.md("_No vllm bench cross-check in the record._")
    return


@app.cell(hide_code=True)
def _(agreement_table, record):
    _agree = ("guidellm did not run here." if agreement_table.empty else
              f"Same run: **{int(agreement_table['agree'].sum())} of {len(agreement_table)}** configuration × level pairs "
              f"agree within {agreement.AGREEMENT_TOLERANCE:.0%} on mean TTFT and ITL.")
    _cross = agreement.crosscheck_reading(agreement.crosscheck_gaps(record) if record else [])
    _here = [agreement.agreement_reading(agreement_table),
             f"recorded ({guide.run_label(record)}): " + "; ".join(map(str, _cross)) if _cross else ""]
    mo.vstack([mo.md(f"""
    {_agree}

    Our definitions differ from vllm bench's only at the documented edge cases (at most a chunk's worth at each
    end); side by side, our client and vllm bench time the same decode steps, so what is left between their ITL
    is each one's own timing. Back to back, two runs of one load meet a machine in two states. One pitfall:
    asking guidellm for a fixed *output length* makes it send vLLM's `ignore_eos`, which `transformers serve`
    rejects with 422 for every request — and guidellm still exits 0; `guidellm_runner` passes the length as
    `max_tokens` instead.
    """), expected.should_see([h for h in _here if h])])
    return


@app.cell(hide_code=True)
def _(record, record_label):
    _f = guide.talk_factors()
    mo.md(f"""
    ## 8 · The decision guide

    Rebuilt from {record_label}: each row cites that run; GPU claims are marked **cited** with their source.
    The talk's own table: its baseline ran one request at a time against vLLM's {_f.concurrent}. vLLM's
    "almost 15×" is **{_f.total:.1f}×** in tokens/s; per request its ITL is {_f.per_request_itl:.1f}×
    shorter, so the other **{_f.concurrency:.1f}×** comes from serving {_f.concurrent} requests at once —
    {_f.concurrency_share} of the speed-up (section 3 measures that effect).
    """)
    return


@app.cell
def _(record):
    plots.table(guide.decision_table(record), f"the decision guide · {guide.run_label(record)}") if record else \
        mo.md("_No record: the guide's measured rows need `make engines`._")
    return


@app.cell
def _():
    plots.table(guide.talk_table().drop(columns=["source"]).assign(
        **{"× baseline": [1.0] + [round(v, 1) for v in guide.talk_speedups().values()]}), "cited: " + guide.TALK_SOURCE)
    return


@app.cell
def _():
    plots.table(guide.published_table(), "cited: published figures, each with its source")
    return


@app.cell
def _():
    tp_table = guide.tensor_parallel_table()
    plots.table(tp_table.drop(columns=["computed"]), "computed: " + tp_table["computed"].iloc[0])
    return (tp_table,)


@app.cell(hide_code=True)
def _(tp_table):
    _fit = tp_table[tp_table["fits"]]
    _step = "decode step ms (floor ÷ efficiency + all-reduces)"
    if len(_fit) >= 2:
        _a, _b = _fit.iloc[-2], _fit.iloc[-1]
        _text = (f"From {_a['GPUs']} to {_b['GPUs']} GPUs the step goes from {_a[_step]:.2f} to {_b[_step]:.2f} ms — "
                 f"× {_b[_step] / _a[_step]:.2f}, not × {_a['GPUs'] / _b['GPUs']:.2f}: the weights per GPU shrink in "
                 f"proportion, the all-reduces do not ({_b['all-reduces ms']:.2f} ms, {_b['communication share']:.0%} "
                 f"of the step at {_b['GPUs']} GPUs).")
    else:
        _text = "Fewer than two of these GPU counts fit the model: no scaling to compare."
    mo.md(f"""
    **When one GPU is outgrown** — {term("tensor parallelism")} splits every weight matrix and the KV heads over
    N GPUs, with two all-reduces per layer (`--tensor-parallel-size N` / `--tp N`). On paper, with notebook 09's
    step model (`helpers.parallel.plan.parallel_step`); tokens/s is an upper bound (every step the full batch).

    **What you should see** (computed, the same on every machine): {_text}
    """)
    return


@app.cell
def _():
    _ex1 = notebook.exercise(1, textwrap.dedent("""
    Longer outputs: how do throughput, TTFT and ITL change with 128 output tokens?

    ```python
    from helpers.benchmark import harness, metrics, plans
    from helpers.serving.traces import chat_trace

    plan = plans.Plan({"w": chat_trace(8, sigma=0, output_tokens_median=128)}, (1, 4), metrics.SLO(1.0, 0.1))
    long = harness.run_all(include=("transformers",), plan=plan, out="build/engines/exercise1.json")
    records.runs_table(long)
    ```"""), """Each request now decodes 128 tokens after one prefill: decode's share of each request's time
    is larger than with 32, so the steps that continuous batching shares are a larger part of the work; the
    one-at-a-time server's TTFT includes the whole answers ahead, 128 steps each; and with batching each
    step attends over longer sequences. Compare the two tables' ratios (on ÷ off, concurrency 4 ÷ 1) with
    `findings.batching_effect_data(long, "w")`: the rules, not the expectation, say how far each moved.""")
    _ex2 = notebook.exercise(2, textwrap.dedent("""
    Tighten the SLO with the sliders of section 5 (TPOT ≤ 30 ms, say): which
    configuration loses its attainment first, and why? Recompute one run by hand:

    ```python
    run = next(r for c in data["configs"] for r in c["runs"] if r.get("rate"))
    metrics.attainment(run["requests_detail"], metrics.SLO(1.0, 0.03))
    ```"""), """The configurations that batch hardest: their requests share every step, so each
    request's per-token time (TPOT) is the step time of a full batch. A one-at-a-time server keeps
    TPOT low but misses the TTFT limit once a queue forms. Goodput under an SLO rewards the
    configuration that keeps both limits at the rate asked, not the one with the most tokens/s.""")
    _ex3 = notebook.exercise(3, textwrap.dedent("""
    The agentic workload with more reviews: does prefix caching pay more
    when every review shares a longer transcript?

    ```python
    from helpers.benchmark import harness, metrics, plans, servers
    from helpers.benchmark.workloads import agentic

    plan = plans.Plan({"agentic": lambda level: agentic(4, 2, 1200, 24, 12, seed=level)}, (1,),
                      metrics.SLO(1.0, 0.1))
    cfgs = [c for c in servers.available(include=("vllm",))[0] if "default" in c.name or "off" in c.name]
    runs = {c.name: harness.run_config(c, plan) for c in cfgs}
    {n: r["runs"][0]["ttft_s"]["ttft_mean"] for n, r in runs.items()}
    ```"""), """Yes: the second review round's prompts share the system prompt, the proposals and the
    first round's reviews — a longer prefix, so the cached share of every prompt grows and the TTFT
    ratio (off ÷ on) with it. `transformers serve` has no prefix cache: every review pays its full
    prefill. Where vLLM is not installed, the record's `prefix caching` figures answer it.""")
    mo.vstack([_ex1, _ex2, _ex3])
    return


@app.cell(hide_code=True)
def _(data, prefix_rows, top_level):
    _rk = findings.throughput_order(data, "chat", top_level)
    _e = findings.batching_effect_data(data, "chat")
    _p1 = next((r for r in prefix_rows if r.concurrency == 1), None)
    check_questions = []
    if _rk is not None:
        check_questions.append(learner.Question(
            f"In this run's chat at concurrency {top_level} (section 3's table), which server gave the most output "
            "tokens/s?", _rk.order[0][0], options=tuple(n for n, _ in _rk.order)))
    if _e is not None:
        check_questions.append(learner.Question(
            f"Chat at concurrency {_e.concurrency}: each request's mean ITL with continuous batching ÷ without it?",
            _e.itl_ratio, "×"))
    if _p1 is not None:
        check_questions.append(learner.Question(
            "Agentic workload at concurrency 1 (section 4): mean TTFT with prefix caching off ÷ on?", _p1.off_over_on, "×"))
    check_form = learner.self_check(check_questions) if check_questions else mo.md("_No run here to ask about._")
    learner.self_check_section(check_form, check_questions, "a live run changes them")
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions) if check_questions else mo.md("")
    return


@app.cell(hide_code=True)
def _(data, prefix_data):
    _left = psutil.Process().children(recursive=True)
    _e = findings.batching_effect_data(data, "chat")
    _cb = ("" if _e is None else
           f" In this run, at concurrency {_e.concurrency}: total output tokens/s "
           + findings.ratio_words(_e.throughput_ratio, "one at a time's")
           + ", each request's ITL " + findings.ratio_words(_e.itl_ratio, "one at a time's", "longer", "shorter") + ".")
    _rb = prefix.radix_against_blocks(prefix_data)
    _px = ("" if not _rb else f" On the agentic trace token-granular and 16-token block matching cached {_rb.radix:.1%} "
           f"and {_rb.blocks[16]:.1%} of prompt tokens: {_rb.verdict}.")
    mo.md(f"""
    ## Takeaways

    - Measure serving **as a server**: a real process, a real HTTP client, streamed chunks — TTFT and ITL
      are arrival times, and a stream counts only when it says it is complete.
    - **Continuous batching** admits new requests into the running batch at every step: one at a time, a
      server's throughput is one request's and TTFT carries the queue; with it, every request shares each
      step.{_cb}
    - Report **SLO attainment against the request rate** (DistServe's goodput is the highest rate with
      ≥ 90 %), not one throughput number — and do not confuse it with vLLM bench's requests/s within the SLO.
    - **Prefix caching** pays on shared prompts when a request arrives after its prefix was computed.{_px}
    - Three load generators agreeing on the same run is the check that the numbers are the server's.

    Processes this notebook started that still run now: **{len(_left)}** (each configuration's server was
    stopped when its run ended, and the benchmark's process with it).
    This notebook took {notebook.elapsed(started)}.
    """)
    return


if __name__ == "__main__":
    app.run()
