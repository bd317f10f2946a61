"""The decision guide: which engine for which workload, with the figures measured here beside
published ones (each cited), and the conclusions a rule draws from the numbers.

Published figures (every row carries its source):
- the talk's Demo F on one H100 (10 concurrent requests × 50 tokens, 1,656-token shared prefix);
- the talk's engine comparison: vLLM and SGLang statistically indistinguishable on ShareGPT-like
  traffic; SGLang 3–4× better on the agentic branching workload (radix-tree prefix cache);
- Orca (Yu et al., OSDI 2022): iteration-level scheduling — continuous batching — 36.9× the
  throughput of FasterTransformer at the same latency (GPT-3 175B);
- vLLM (Kwon et al., "Efficient Memory Management for Large Language Model Serving with
  PagedAttention", SOSP 2023): 2–4× the throughput of FasterTransformer and Orca at the same latency;
- SGLang (Zheng et al., "SGLang: Efficient Execution of Structured Language Model Programs",
  NeurIPS 2024): up to 6.4× the throughput of other systems on workloads that share prefixes;
- DistServe (Zhong et al., OSDI 2024): goodput — the highest request rate served with ≥ 90 % of
  requests within the SLO — as the measure (vLLM bench's "goodput", requests/s within the SLO in one
  run, is another quantity).

The decision guide itself (`measured_decisions`) is rebuilt from a make engines run: each row cites the
run and the figures it took (read by the rules of helpers.benchmark.findings), GPU claims are labelled
"cited" with their source.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..formulas.verdicts import CHANGE_MARGIN, Verdict, change_verdict
from ..parallel.plan import parallel_step
from .agreement import crosscheck_line
from .findings import BASELINE, BATCHING, VLLM, batching_trade, key_figures, throughput_order


TALK_CSV = Path(__file__).resolve().parents[1] / "data" / "talk_serving_h100.csv"   # the talk's Demo F, its owner
TALK_SOURCE = "the workshop talk, Demo F (one H100; 10 concurrent × 50 tokens; 1,656-token shared prefix)"


def talk_table():
    """The talk's table (helpers/data/talk_serving_h100.csv), as reported on one H100: not measured here."""
    import pandas as pd

    t = pd.read_csv(TALK_CSV, comment="#").rename(columns={"tok_s": "tok/s", "ttft_ms": "TTFT ms", "itl_ms": "ITL ms"})
    return t[["configuration", "concurrency", "tok/s", "TTFT ms", "ITL ms"]].assign(source=TALK_SOURCE)


def talk(name_has: str, column: str):
    """One figure of the talk's table: the first row whose configuration contains `name_has`."""
    rows = talk_table().drop(columns="source").to_dict("records")
    for r in rows:
        if name_has in r["configuration"]:
            if column not in r:
                raise ValueError(f"the talk's table has no column {column!r}; it has {', '.join(r)}")
            return r[column]
    raise ValueError(f"no row of the talk's table contains {name_has!r}; rows: " + "; ".join(r["configuration"] for r in rows))


def _step(name_a: str, name_b: str, column: str, unit: str) -> str:
    return f"{talk(name_a, column):,g} → {talk(name_b, column):,g} {unit}"


PUBLISHED = [
    {"claim": "continuous batching (iteration-level scheduling) vs static batching", "figure": "36.9× throughput at the same latency",
     "source": "Yu et al., Orca, OSDI 2022 (GPT-3 175B vs FasterTransformer)"},
    {"claim": "paged attention + continuous batching (vLLM)", "figure": "2–4× throughput at the same latency",
     "source": "Kwon et al., vLLM/PagedAttention, SOSP 2023 (vs FasterTransformer and Orca)"},
    {"claim": "radix-tree prefix cache (SGLang) on shared-prefix programs", "figure": "up to 6.4× throughput",
     "source": "Zheng et al., SGLang, NeurIPS 2024"},
    {"claim": "vLLM vs SGLang on ShareGPT-like chat", "figure": "statistically indistinguishable",
     "source": "the workshop talk, §8 (one H100)"},
    {"claim": "SGLang vs vLLM on the agentic branching workload", "figure": "3–4× better",
     "source": "the workshop talk, §8 (one H100)"},
    {"claim": "goodput: the highest request rate at which ≥ 90 % of requests meet the TTFT and TPOT SLOs",
     "figure": "the measure to optimise, not raw tok/s", "source": "Zhong et al., DistServe, OSDI 2024, §2"},
    {"claim": "vLLM bench's goodput: requests/s meeting the SLO in one run", "figure": "a rate of one run, not a limit",
     "source": "vllm/benchmarks/serve.py (--goodput)"},
]

def talk_speedups() -> dict:
    """Ratios of the talk's table against its baseline (the talk spoke of "almost 15×" and "50×")."""
    t = talk_table()
    return dict(zip(t["configuration"][1:], t["tok/s"][1:] / t["tok/s"][0]))


@dataclass(frozen=True)
class TalkFactors:
    """The talk's "almost 15×" (vLLM default against the one-at-a-time baseline) split into its two
    factors: total = per-request speed (baseline ITL ÷ vLLM ITL) × the rest, which comes from serving
    `concurrent` requests at once instead of one."""

    total: float
    per_request_itl: float
    concurrency: float
    concurrent: int

    @property
    def concurrency_share(self) -> str:
        """"most" when serving several at once is the larger factor."""
        return "most" if self.concurrency > self.per_request_itl else "less than half"

    def words(self) -> str:
        """The talk's "almost 15×" split into its factors, with the larger one named by the numbers."""
        return (f"The talk's \"almost 15×\" compared a baseline serving one request at a time with vLLM serving "
                f"{self.concurrent}: {self.total:.1f}× in tokens/s, of which {self.per_request_itl:.1f}× is each "
                f"request's shorter ITL and {self.concurrency:.1f}× serving {self.concurrent} requests at once: "
                + {"higher": f"serving {self.concurrent} at once is the larger factor",
                   "lower": "each request's shorter ITL is the larger factor",
                   "about equal": f"the two factors within {CHANGE_MARGIN:.0%} of each other"}[
                    change_verdict(self.concurrency / self.per_request_itl)]
                + " (notebook 08 measures batching on its own: continuous batching off and on in the same server).")


def talk_factors() -> TalkFactors:
    base, vllm = "baseline", "vLLM default"
    total = talk(vllm, "tok/s") / talk(base, "tok/s")
    per_request = talk(base, "ITL ms") / talk(vllm, "ITL ms")
    return TalkFactors(total, per_request, total / per_request, int(talk(vllm, "concurrency")))


def published_table():
    import pandas as pd

    return pd.DataFrame(PUBLISHED)


def decision_table(data: dict):
    """The decision guide of one make engines run (measured_decisions) as a table."""
    import pandas as pd

    return pd.DataFrame(measured_decisions(data))


def tensor_parallel_table(model: str = "gpt-oss-120b", gpu: str = "H100 SXM", gpus=(1, 2, 4, 8),
                          weight_dtype: str = "bf16", context: int = 4096, batch: int = 16, link=None):
    """What tensor parallelism changes, on paper, from helpers.parallel.plan.parallel_step (the one owner
    of the multi-GPU decode step; notebook 09 uses it too): whether the model fits, the largest batch,
    the decode step — the planner's floor ÷ its efficiency **plus** the two all-reduces per layer over
    the link (None: the fastest in a server) — and tokens/s and $ per million tokens at that step.
    tokens/s is an upper bound: every step runs the full batch, no prefill interleaved."""
    import pandas as pd

    rows, efficiency = [], None
    for n in gpus:
        s = parallel_step(model, gpu, tp=n, batch=batch, context=context, weight_dtype=weight_dtype, link=link)
        rows.append({"GPUs": n, "fits": s.fits, "link": s.link if n > 1 else "—",
                     "weights per GPU GB": round(s.weight_bytes_per_gpu / 1e9, 1), "max batch": s.max_batch,
                     "decode step ms (floor ÷ efficiency + all-reduces)": None if s.step_s is None else round(s.step_s * 1e3, 2),
                     "all-reduces ms": None if s.all_reduce_s is None else round(s.all_reduce_s * 1e3, 3),
                     "communication share": None if s.communication_share is None else round(s.communication_share, 3),
                     "tok/s (upper bound)": None if s.tokens_per_s is None else round(s.tokens_per_s),
                     "$ per M tokens": None if s.usd_per_million_tokens is None else round(s.usd_per_million_tokens, 3),
                     "why": s.reason})
        efficiency = s.efficiency
    return pd.DataFrame(rows).assign(computed=f"{model} {weight_dtype} on {gpu}, {context:,}-token context, batch {batch}, "
                                              f"efficiency {efficiency:g} (helpers.parallel.plan.parallel_step)")


# ----------------------------------------------------------------------------- measured figures (make engines)


# ----------------------------------------------------------------------------- the guide, from a run

def run_label(data: dict) -> str:
    """How a row cites the run it comes from: when, where, under what load."""
    load = data.get("load_average_at_start")
    machine = (data.get("machine") or {})
    where = f"{machine.get('kind', '?')}: {machine.get('name', '?')}, {machine.get('cores', '?')} cores"
    return (f"make engines of {str(data.get('recorded_at', '?'))[:16].replace('T', ' ')} UTC ({where}; profile "
            f"{data.get('profile', '?')}" + (f"; load average {load[0]:g}" if load else "") + ")")


def run_short(data: dict) -> str:
    """The run a headline figure comes from, short: 'the make engines run of 2026-12-02 09:50 UTC on AMD EPYC'."""
    return (f"the make engines run of {str(data.get('recorded_at', '?'))[:16].replace('T', ' ')} UTC on "
            f"{(data.get('machine') or {}).get('name', '?')}")


# the servers a CPU machine can run, simplest first (nothing to install beyond transformers, then vLLM's build)
SIMPLEST_FIRST = (BASELINE, BATCHING, VLLM)
SHORT = {BASELINE: "transformers serve", BATCHING: "transformers serve --continuous-batching", VLLM: "vLLM default"}


def pick(data: dict, workload: str, concurrency: int) -> tuple[str, Verdict] | None:
    """The recommendation for one CPU machine at one level, by this run: of the servers that gave the most
    output tokens/s there (those within the 10 % margin of the highest, throughput_order), the simplest to
    install (SIMPLEST_FIRST); with the ranking's verdict as its evidence. None when none of them ran."""
    rk = throughput_order(data, workload, concurrency, names=SIMPLEST_FIRST)
    if rk is None:
        return None
    return next(n for n in SIMPLEST_FIRST if n in rk.leaders), rk.verdict


def one_user_row(data: dict, run: str) -> dict:
    """One user on a CPU: the simplest of the fastest at concurrency 1 in this run (chat)."""
    p = pick(data, "chat", 1)
    row = {"workload": "one user, a laptop or a CPU; a quick local demo"}
    if p is None:
        return dict(row, engine="— (no server measured at concurrency 1)", why="transformers serve needs nothing "
                    "else installed", evidence=f"not measured in this run — {run}")
    name, v = p
    why = ("nothing else to install, any Hub model; in this run as fast as the fastest (within "
           f"{CHANGE_MARGIN:.0%})" if name == BASELINE else
           "the most output tokens/s for one request in this run" + (
               "" if name != VLLM else "; transformers serve needs nothing else installed"))
    return dict(row, engine=SHORT[name], why=why, evidence=f"measured, chat: {v.words} — {run}")


def several_users_row(data: dict, top: int, run: str) -> dict | None:
    """Several users on one CPU machine: the simplest of the fastest at the run's top level (chat)."""
    p = pick(data, "chat", top)
    if p is None:
        return None
    name, v = p
    base = v.evidence.get(BASELINE)
    queued = (base is not None and name != BASELINE and change_verdict(v.evidence[name] / base) == "higher")
    why = (f"the most output tokens/s with {top} at once in this run" +
           ("; one request at a time queues them" if queued else "") +
           ("" if name != BATCHING else "; nothing beyond transformers to install"))
    return {"workload": f"several users on one CPU machine (chat, {top} at once)", "engine": SHORT[name],
            "why": why, "evidence": f"measured: {v.words} — {run}"}


def measured_decisions(data: dict) -> list[dict]:
    """The decision guide rebuilt from a make engines run: each row's evidence the figures of that run
    (cited by run_label) where it measured them, and GPU claims marked "cited" with their source."""
    run = run_label(data)
    top = max(data.get("concurrencies") or [1])
    f = key_figures(data)         # from the runs, by these rules (a stored "figures" may predate them)
    rows = []
    rows.append(one_user_row(data, run))
    several = several_users_row(data, top, run)
    if several:
        rows.append(several)
    sc = f.vllm_scaling_chat or f.vllm_scaling
    rows.append({"workload": "many independent chat users (ShareGPT-like) on NVIDIA GPUs", "engine": "vLLM (SGLang equal)",
                 "why": "paged attention and continuous batching; the production default, widest model support",
                 "evidence": "cited: the talk §7–8 (one H100), Kwon et al., SOSP 2023 (2–4× at the same latency)"
                             + (f"; measured here on a CPU: vLLM × {sc.ratio:.1f} output tok/s from concurrency 1 to "
                                f"{sc.concurrency} — {run}" if sc else "")})
    pc = f.prefix_caching.get("agentic") or []
    rb = f.radix_against_blocks
    ev = "; ".join(f"c={r.concurrency}: TTFT {r.ttft_off_ms:,.0f} → {r.ttft_on_ms:,.0f} ms (÷ {r.off_over_on:.1f})"
                   for r in pc) or "vLLM's prefix caching not measured in this run"
    if rb:
        ev += (f"; the same trace replayed: radix tree {rb.radix:.1%} of prompt tokens cached, "
               f"16-token blocks {rb.blocks[16]:.1%} — {rb.verdict} (at most × {rb.most_saved:.2f} less prefill)")
    rows.append({"workload": "agents that share long prompts (branching, multi-turn, RAG over the same documents)",
                 "engine": "any engine with prefix caching on (vLLM's default since 0.8, SGLang)",
                 "why": "a shared prefix is prefilled once; an edit invalidates every later block (or tree node) in both",
                 "evidence": f"measured: {ev} — {run}; cited: the talk §8 (SGLang 3–4× on this workload), "
                             "Zheng et al., NeurIPS 2024 (up to 6.4×) — not reproduced by hit rates here"})
    fp8 = f.fp8_kv_cache
    rows.append({"workload": "long contexts that fill the KV cache", "engine": "an fp8 KV cache (--kv-cache-dtype fp8)",
                 "why": "half the KV bytes of bf16 per token: twice the tokens in the same memory; pays only when "
                        "the cache, not the weights, limits the batch",
                 "evidence": ("measured here: it ran" if fp8.ran else f"not measured here: {fp8.why}")
                             + "; cited: the talk's table " + _step("prefix caching", "KV-cache quantization", "tok/s", "tok/s")
                             + " at ~2 GB of KV on an 80 GB GPU (no memory pressure: no speed claim follows)"})
    sp = f.ngram_speculation
    ev = "; ".join(f"c={r.concurrency}: latency per token × {r.latency_ratio:.2f} "
                   f"({r.latency}), tok/s × {r.throughput_ratio:.2f}" for r in sp) or "not measured"
    rows.append({"workload": "output that copies its input (code edits, extraction), latency first",
                 "engine": "n-gram speculative decoding — after measuring it on your traffic",
                 "why": "draft tokens copied from the prompt, verified in one pass; rejected drafts cost time",
                 "evidence": f"measured on chat of random words (drafts rarely match): {ev} — {run}; cited: the talk's "
                             f"table, ITL {_step('KV-cache quantization', 'speculative', 'ITL ms', 'ms')} when added on "
                             "top of fp8 KV (a regression on its text)"})
    rows.append({"workload": "NVIDIA only, every last bit of throughput", "engine": "TensorRT-LLM (NVIDIA Dynamo to route)",
                 "why": "kernels and graphs compiled for the exact GPU; more build and operations work",
                 "evidence": "cited: named in the talk §8; no figure measured or published here"})
    tp = tensor_parallel_table()
    fit = tp[tp["fits"]]
    step = "decode step ms (floor ÷ efficiency + all-reduces)"
    tp_ev = ""
    if len(fit) >= 2:
        a, b = fit.iloc[-2], fit.iloc[-1]
        tp_ev = f"; {a['GPUs']} → {b['GPUs']} GPUs: step {a[step]:.2f} → {b[step]:.2f} ms (× {b[step] / a[step]:.2f})"
    rows.append({"workload": "the model outgrows one GPU", "engine": "tensor parallelism in vLLM/SGLang (--tensor-parallel-size / --tp)",
                 "why": "weights and KV heads split over N GPUs; two all-reduces per layer need NVLink-class links",
                 "evidence": "computed: helpers.parallel.plan.parallel_step (GPT-OSS-120B bf16, H100 SXM)" + tp_ev})
    return rows


def markdown_table(rows: list[dict], columns=("workload", "engine", "why", "evidence")) -> str:
    out = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(r[c]).replace("|", "\\|") for c in columns) + " |")
    return "\n".join(out)


GENERATED_START = "<!-- generated by `python -m helpers.benchmark.guide`: do not edit by hand -->"
GENERATED_END = "<!-- end of generated section -->"


def guide_markdown(data: dict, record: str) -> str:
    """The generated part of workshop/engines.md: the decision guide and the headline figures of one run."""
    f = key_figures(data)         # from the runs, by these rules (a stored "figures" may predate them)
    took = f", which took {data['seconds']:.0f} s" if data.get("seconds") else ""
    lines = [GENERATED_START, "", f"From `{record}`, {run_label(data)}{took}.", "", "### The decision guide", "",
             markdown_table(measured_decisions(data)), "", "### Headline figures of that run", ""]
    for sc in (f.vllm_scaling, f.vllm_scaling_chat):
        if not sc:
            continue
        lines.append(f"- vLLM default, {sc.workload}: {sc.tok_s_at_1} → {sc.tok_s_at_top} output tok/s from concurrency 1 "
                     f"to {sc.concurrency} (× {sc.ratio}" + ("" if sc.workload == "fixed" else
                     ": a mixed batch ends with its longest request") + f"), in {run_short(data)}.")
    for w, rows in f.prefix_caching.items():
        for r in rows:
            lines.append(f"- {w}, concurrency {r.concurrency}: mean TTFT {r.ttft_off_ms:,.1f} ms with prefix "
                         f"caching off, {r.ttft_on_ms:,.1f} ms on (÷ {r.off_over_on}): {r.verdict}"
                         + (f"; vLLM counted {r.vllm_hit_rate_on:.1%} of prompt tokens as hits"
                            if r.vllm_hit_rate_on is not None else "") + ".")
    cb = f.continuous_batching.get("chat")
    if cb:
        lines.append(f"- transformers serve, chat at concurrency {cb.concurrency}: continuous batching × "
                     f"{cb.throughput_ratio} throughput ({cb.throughput}), TTFT {cb.ttft} (off ÷ on "
                     f"{cb.ttft_ratio}), and each request's ITL {cb.itl_off_ms} → {cb.itl_on_ms} ms "
                     f"({cb.itl}: {batching_trade(cb)}).")
    for row in f.crosscheck:
        lines.append(crosscheck_line(row))
    for name, ol in f.open_loop.items():
        lines.append(f"- {name}, open loop: DistServe goodput {goodput_words(ol.distserve_goodput, [p.rate for p in ol.points])}.")
    lines += ["", "### The talk's speed-up, split", "", talk_factors().words() + f" (cited: {TALK_SOURCE})", "",
              GENERATED_END]
    return "\n".join(lines)


def goodput_words(g: float | None, rates: list[float]) -> str:
    """DistServe's goodput `g` of open-loop runs at `rates`, in words: a rate, at least the highest rate
    measured when every rate met the goal, or below the lowest."""
    if g is None:
        return f"below {min(rates):g} req/s, the lowest rate measured"
    if g == max(rates):
        return f"at least {g:g} req/s (every rate measured kept ≥ 90 % of requests within the SLO)"
    return f"{g:g} req/s (the highest rate measured with ≥ 90 % of requests within the SLO)"


def write_guide(record: str | Path, markdown: str | Path) -> Path:
    """Replace the generated section of `markdown` with the one made from the run in `record`."""
    from .. import records

    record, markdown = Path(record), Path(markdown)
    data = records.load(record, "engines", roots=(record.parent,))    # one RecordError line when it is not one
    if not isinstance(data.get("configs"), list):
        raise ValueError(f"{record} is not a make engines record (a JSON object with its configs); allowed: "
                         "build/engines/engines.json or a workshop/results/<record>/engines.json")
    try:
        text = markdown.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:  # missing, a folder, not UTF-8
        raise ValueError(f"cannot read {markdown}: {getattr(exc, 'strerror', None) or exc}; allowed: the guide's "
                         "markdown") from None
    if GENERATED_START not in text or GENERATED_END not in text:
        raise ValueError(f"{markdown} has no generated section (the markers {GENERATED_START!r} … {GENERATED_END!r})")
    head, rest = text.split(GENERATED_START, 1)
    tail = rest.split(GENERATED_END, 1)[1]
    try:
        new = head + guide_markdown(data, records.shown(record)) + tail
    except (KeyError, TypeError, AttributeError, IndexError) as exc:   # a field missing or of another type
        raise ValueError(f"{record} is not a make engines record ({type(exc).__name__}: {exc}); allowed: "
                         "build/engines/engines.json or a workshop/results/<record>/engines.json") from None
    try:
        return records.write_atomic(markdown, new)
    except OSError as exc:
        raise ValueError(f"cannot write {markdown}: {exc.strerror or exc}; allowed: a writable file") from None


if __name__ == "__main__":
    import argparse
    import sys

    class _Parser(argparse.ArgumentParser):
        def error(self, message):  # one line and exit 2, as the workshop's other command lines
            self.exit(2, f"error: {message}\n")

    p = _Parser(prog="python -m helpers.benchmark.guide",
                description="regenerate workshop/engines.md's decision guide from a make engines run")
    p.add_argument("--record", default="workshop/results/cpu-amd-epyc/engines.json")
    p.add_argument("--write", default="workshop/engines.md")
    a = p.parse_args()
    try:
        print(f"wrote {write_guide(a.record, a.write)}")
    except ValueError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        sys.exit(2)


