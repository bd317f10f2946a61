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
- DistServe (Zhong et al., OSDI 2024): goodput — requests per second within the SLO — as the measure.
"""
from __future__ import annotations

from ..parallel.plan import parallel_step
from .metrics import CHANGE_MARGIN, change_verdict, relative_gap  # noqa: F401  (CHANGE_MARGIN re-exported)

AGREEMENT_TOLERANCE = 0.15   # the client and guidellm agree when their means differ by at most 15 %

TALK_TABLE = [  # the talk's Demo F: one H100, 10 concurrent requests × 50 tokens, 1,656-token shared prefix
    {"configuration": "HF transformers baseline (one request at a time)", "tok/s": 51, "TTFT ms": 54, "ITL ms": 19.0},
    {"configuration": "vLLM default (paged attention, continuous batching)", "tok/s": 736, "TTFT ms": 336, "ITL ms": 6.7},
    {"configuration": "+ prefix caching", "tok/s": 1034, "TTFT ms": 125, "ITL ms": 6.8},
    {"configuration": "+ KV-cache quantization (fp8)", "tok/s": 1010, "TTFT ms": 134, "ITL ms": 6.9},
    {"configuration": "+ n-gram speculative decoding", "tok/s": 991, "TTFT ms": 75, "ITL ms": 8.2},
]
TALK_SOURCE = "the workshop talk, Demo F (one H100; 10 concurrent × 50 tokens; 1,656-token shared prefix)"
TALK_CONCURRENT = 10          # requests in flight in every row but the baseline's (one at a time)


def talk(name_has: str, column: str):
    """One figure of the talk's table: the first row whose configuration contains `name_has`."""
    for r in TALK_TABLE:
        if name_has in r["configuration"]:
            if column not in r:
                raise ValueError(f"the talk's table has no column {column!r}; it has {', '.join(r)}")
            return r[column]
    raise ValueError(f"no row of the talk's table contains {name_has!r}; rows: "
                     + "; ".join(r["configuration"] for r in TALK_TABLE))


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
    {"claim": "goodput: requests/s meeting TTFT and TPOT SLOs", "figure": "the measure to optimise, not raw tok/s",
     "source": "Zhong et al., DistServe, OSDI 2024"},
]

DECISIONS = [
    {"workload": "one user, a laptop or a CPU; a quick local demo", "engine": "transformers serve",
     "why": "nothing else to install, any Hub model; turn on --continuous-batching (bounded) as soon as two users share it",
     "evidence": "measured here (notebook 08)"},
    {"workload": "many independent chat users (ShareGPT-like) on NVIDIA GPUs", "engine": "vLLM (SGLang equal)",
     "why": "paged attention and continuous batching; the production default, widest model and hardware support",
     "evidence": "talk §7–8; Kwon et al. 2023"},
    {"workload": "agents that share long prompts (branching, multi-turn, RAG over the same documents)",
     "engine": "SGLang, or vLLM with prefix caching", "why": "the radix tree matches the longest shared prefix; hashed blocks miss on small edits",
     "evidence": "talk §8 (3–4×); Zheng et al. 2024 (up to 6.4×); talk table: prefix caching "
                 + _step("vLLM default", "prefix caching", "tok/s", "tok/s")},
    {"workload": "many users with long contexts (memory-bound)", "engine": "any of them with an fp8 KV cache",
     "why": "half the KV bytes per token: twice the tokens in the same memory; speed unchanged at 10 users",
     "evidence": "talk table: " + _step("prefix caching", "KV-cache quantization", "tok/s", "tok/s")
                 + "; notebook 06 / helpers.memory for the bytes"},
    {"workload": "latency-critical output that repeats its input (code edits, extraction)", "engine": "n-gram speculative decoding",
     "why": "draft tokens copied from the prompt, verified in one pass; helps only when drafts are accepted",
     "evidence": "talk table: ITL " + _step("prefix caching", "speculative", "ITL ms", "ms")
                 + " on random text (drafts rejected)"},
    {"workload": "NVIDIA only, the last 20–30 % of throughput matters", "engine": "TensorRT-LLM (or NVIDIA Dynamo to route)",
     "why": "kernels and graphs compiled for the exact GPU; more build and operations work", "evidence": "named in the talk §8; not measured here"},
    {"workload": "the model outgrows one GPU", "engine": "tensor parallelism in vLLM/SGLang (--tensor-parallel-size / --tp)",
     "why": "weights and KV heads split over N GPUs; two all-reduces per layer need NVLink-class links",
     "evidence": "on paper here: tensor_parallel_table() (helpers.parallel.plan.parallel_step)"},
]


def talk_table():
    import pandas as pd

    return pd.DataFrame(TALK_TABLE).assign(source=TALK_SOURCE)


def talk_speedups() -> dict:
    """Ratios of the talk's table against its baseline (the talk spoke of "almost 15×" and "50×")."""
    base = TALK_TABLE[0]["tok/s"]
    return {r["configuration"]: r["tok/s"] / base for r in TALK_TABLE[1:]}


def talk_factors() -> dict:
    """The talk's "almost 15×" (vLLM default against the one-at-a-time baseline) split into its two
    factors: total = per-request speed (baseline ITL ÷ vLLM ITL) × the rest, which comes from serving
    TALK_CONCURRENT requests at once instead of one. "most" when the rest is the larger factor."""
    base, vllm = "baseline", "vLLM default"
    total = talk(vllm, "tok/s") / talk(base, "tok/s")
    per_request = talk(base, "ITL ms") / talk(vllm, "ITL ms")
    rest = total / per_request
    return {"total ×": total, "per-request ITL ×": per_request, "concurrency ×": rest,
            "concurrent": TALK_CONCURRENT, "concurrency share": "most" if rest > per_request else "less than half"}


def published_table():
    import pandas as pd

    return pd.DataFrame(PUBLISHED)


def decision_table():
    import pandas as pd

    return pd.DataFrame(DECISIONS)


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


def _row(table, name_has: str, concurrency: int, source: str = "client", workload: str | None = None):
    t = table[(table["source"] == source) & (table["concurrency"] == concurrency)]
    if workload is not None:
        t = t[t["workload"] == workload]
    t = t[t["configuration"].str.contains(name_has, regex=False)]
    return t.iloc[0] if len(t) else None


def batching_effect(table, workload: str, concurrency: int) -> dict | None:
    """Continuous batching on against off at one level: throughput and mean-TTFT ratios, and the rule's
    verdict (a change counts when it exceeds CHANGE_MARGIN, 10 %, either way)."""
    t = table[~table["configuration"].str.contains("continuous")]
    off = _row(t, "transformers", concurrency, workload=workload)
    on = _row(table, "continuous batching", concurrency, workload=workload)
    if off is None or on is None or not off["output tok/s"] or not on["TTFT mean ms"]:
        return None
    thr = on["output tok/s"] / off["output tok/s"]
    ttft = off["TTFT mean ms"] / on["TTFT mean ms"]
    verdict = {"higher": "raised throughput", "lower": "lowered throughput",
               "about equal": "left throughput unchanged"}[change_verdict(thr)]
    return {"concurrency": concurrency, "throughput ×": thr, "TTFT ÷": ttft, "verdict": verdict,
            "off tok/s": off["output tok/s"], "on tok/s": on["output tok/s"],
            "off TTFT ms": off["TTFT mean ms"], "on TTFT ms": on["TTFT mean ms"]}


def agreement(table, workload: str | None = None, ours: str = "tap"):
    """Our mean TTFT and ITL against guidellm's, per configuration and level: the relative gap and
    whether it is within AGREEMENT_TOLERANCE. ours="tap": our definitions on guidellm's own requests
    (the same run); ours="client": our client's own run, just before guidellm's (back to back)."""
    import pandas as pd

    t = table if workload is None else table[table["workload"] == workload]
    rows = []
    for (name, c), g in t.groupby(["configuration", "concurrency"], sort=False):
        cl, gl = g[g["source"] == ours], g[g["source"] == "guidellm"]
        if not len(cl) or not len(gl):
            continue
        row = {"configuration": name, "concurrency": c, "compared": "same run" if ours == "tap" else "back to back"}
        for col in ("TTFT mean ms", "ITL mean ms"):
            a, b = cl[col].iloc[0], gl[col].iloc[0]
            row[f"{ours} {col}"], row[f"guidellm {col}"] = a, b
            row[f"{col.split()[0]} gap"] = None if a is None or b is None else relative_gap(a, b)
        row["agree"] = all(row[k] is not None and row[k] <= AGREEMENT_TOLERANCE for k in ("TTFT gap", "ITL gap"))
        rows.append(row)
    return pd.DataFrame(rows)
