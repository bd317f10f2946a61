"""The decision guide: which engine for which workload, rebuilt from a make engines run (`measured_decisions`,
each row citing the run and the figures the rules of helpers.benchmark.findings took), beside the talk's
table and published figures (`PUBLISHED`, each with its source; GPU claims labelled "cited").
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..formulas.verdicts import CHANGE_MARGIN, Verdict, change_verdict
from ..parallel.plan import parallel_step
from .findings import BASELINE, BATCHING, VLLM, key_figures, throughput_order


TALK_CSV = Path(__file__).resolve().parents[1] / "data" / "talk_serving_h100.csv"   # the talk's Demo F, its owner
TALK_SOURCE = "the workshop talk, Demo F (one H100; 10 concurrent × 50 tokens; 1,656-token shared prefix)"


def talk_rows():
    """The talk's table as its CSV holds it (key, configuration, concurrency, tok_s, ttft_ms, itl_ms): the
    one reader of helpers/data/talk_serving_h100.csv, for the guide, the key figures and the slides."""
    import pandas as pd

    return pd.read_csv(TALK_CSV, comment="#")


def talk_table():
    t = talk_rows().rename(columns={"tok_s": "tok/s", "ttft_ms": "TTFT ms", "itl_ms": "ITL ms"})
    return t[["configuration", "concurrency", "tok/s", "TTFT ms", "ITL ms"]].assign(source=TALK_SOURCE)


def talk(name_has: str, column: str):
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
    """The talk's "almost 15×" = per-request speed (baseline ITL ÷ vLLM ITL) × serving `concurrent` at once."""

    total: float
    per_request_itl: float
    concurrency: float
    concurrent: int

    @property
    def concurrency_share(self) -> str:
        return "most" if self.concurrency > self.per_request_itl else "less than half"

    def words(self) -> str:
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
    import pandas as pd

    return pd.DataFrame(measured_decisions(data))


def tensor_parallel_table(model: str = "gpt-oss-120b", gpu: str = "H100 SXM", gpus=(1, 2, 4, 8),
                          weight_dtype: str = "bf16", context: int = 4096, batch: int = 16, link=None):
    """Tensor parallelism on paper (helpers.parallel.plan.parallel_step): fit, largest batch, decode step
    (floor ÷ efficiency + the all-reduces), and tokens/s (an upper bound: no prefill) and $ at that step."""
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


# ----------------------------------------------------------------------------- the guide, from a run

def run_label(data: dict) -> str:
    from ..measure.hardware import measured_label, measured_on_of, measured_when

    load = data.get("load_average_at_start")
    m = measured_on_of(data)
    where = f"{measured_label(m)}, {m['device']['cores'] or '?'} cores"
    return (f"make engines of {measured_when(m)} ({where}; profile "
            f"{m['profile'] or '?'}" + (f"; load average {load[0]:g}" if load else "") + ")")


# the servers a CPU machine can run, simplest first (nothing to install beyond transformers, then vLLM's build)
SIMPLEST_FIRST = (BASELINE, BATCHING, VLLM)
SHORT = {BASELINE: "transformers serve", BATCHING: "transformers serve --continuous-batching", VLLM: "vLLM default"}


def pick(data: dict, workload: str, concurrency: int) -> tuple[str, Verdict] | None:
    """Of the servers within 10 % of the most output tokens/s at one level, the simplest to install; its evidence."""
    rk = throughput_order(data, workload, concurrency, names=SIMPLEST_FIRST)
    if rk is None:
        return None
    return next(n for n in SIMPLEST_FIRST if n in rk.leaders), rk.verdict


def one_user_row(data: dict, run: str) -> dict:
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


def goodput_words(g: float | None, rates: list[float]) -> str:
    if g is None:
        return f"below {min(rates):g} req/s, the lowest rate measured"
    if g == max(rates):
        return f"at least {g:g} req/s (every rate measured kept ≥ 90 % of requests within the SLO)"
    return f"{g:g} req/s (the highest rate measured with ≥ 90 % of requests within the SLO)"
