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

from ..capacity.planner import plan
from .metrics import relative_gap

AGREEMENT_TOLERANCE = 0.15   # the client and guidellm agree when their means differ by at most 15 %

TALK_TABLE = [  # the talk's Demo F: one H100, 10 concurrent requests × 50 tokens, 1,656-token shared prefix
    {"configuration": "HF transformers baseline (one request at a time)", "tok/s": 51, "TTFT ms": 54, "ITL ms": 19.0},
    {"configuration": "vLLM default (paged attention, continuous batching)", "tok/s": 736, "TTFT ms": 336, "ITL ms": 6.7},
    {"configuration": "+ prefix caching", "tok/s": 1034, "TTFT ms": 125, "ITL ms": 6.8},
    {"configuration": "+ KV-cache quantization (fp8)", "tok/s": 1010, "TTFT ms": 134, "ITL ms": 6.9},
    {"configuration": "+ n-gram speculative decoding", "tok/s": 991, "TTFT ms": 75, "ITL ms": 8.2},
]
TALK_SOURCE = "the workshop talk, Demo F (one H100; 10 concurrent × 50 tokens; 1,656-token shared prefix)"

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
     "evidence": "talk §8 (3–4×); Zheng et al. 2024 (up to 6.4×); talk table: prefix caching 736 → 1,034 tok/s"},
    {"workload": "many users with long contexts (memory-bound)", "engine": "any of them with an fp8 KV cache",
     "why": "half the KV bytes per token: twice the tokens in the same memory; speed unchanged at 10 users",
     "evidence": "talk table: 1,034 → 1,010 tok/s; notebook 06 / helpers.memory for the bytes"},
    {"workload": "latency-critical output that repeats its input (code edits, extraction)", "engine": "n-gram speculative decoding",
     "why": "draft tokens copied from the prompt, verified in one pass; helps only when drafts are accepted",
     "evidence": "talk table: ITL 6.8 → 8.2 ms on random text (drafts rejected)"},
    {"workload": "NVIDIA only, the last 20–30 % of throughput matters", "engine": "TensorRT-LLM (or NVIDIA Dynamo to route)",
     "why": "kernels and graphs compiled for the exact GPU; more build and operations work", "evidence": "named in the talk §8; not measured here"},
    {"workload": "the model outgrows one GPU", "engine": "tensor parallelism in vLLM/SGLang (--tensor-parallel-size / --tp)",
     "why": "weights and KV heads split over N GPUs; two all-reduces per layer need NVLink-class links",
     "evidence": "on paper here: tensor_parallel_table() (helpers.capacity.planner)"},
]


def talk_table():
    import pandas as pd

    return pd.DataFrame(TALK_TABLE).assign(source=TALK_SOURCE)


def talk_speedups() -> dict:
    """Ratios of the talk's table against its baseline (the talk spoke of "almost 15×" and "50×")."""
    base = TALK_TABLE[0]["tok/s"]
    return {r["configuration"]: r["tok/s"] / base for r in TALK_TABLE[1:]}


def published_table():
    import pandas as pd

    return pd.DataFrame(PUBLISHED)


def decision_table():
    import pandas as pd

    return pd.DataFrame(DECISIONS)


def tensor_parallel_table(model: str = "gpt-oss-120b", gpu: str = "H100 SXM", gpus=(1, 2, 4, 8),
                          weight_dtype: str = "bf16", context: int = 4096, batch: int = 16):
    """What tensor parallelism changes, on paper (helpers.capacity.planner.plan): whether the model fits,
    the largest batch, the decode-step floor and $ per million tokens on 1, 2, 4, 8 GPUs."""
    import pandas as pd

    rows = []
    for n in gpus:
        p = plan(model, gpu, gpus=n, weight_dtype=weight_dtype, context=context, batch=batch)
        rows.append({"GPUs": n, "fits": p.fits, "weights per GPU GB": round(p.weight_bytes_per_gpu / 1e9, 1),
                     "max batch": p.max_batch, "decode step ms (floor)": None if p.step_ms is None else round(p.step_ms, 2),
                     "tok/s (floor)": None if p.tokens_per_s is None else round(p.tokens_per_s),
                     "$ per M tokens": None if p.usd_per_million_tokens is None else round(p.usd_per_million_tokens, 3),
                     "why": p.reason})
    return pd.DataFrame(rows).assign(computed=f"{model} {weight_dtype} on {gpu}, {context:,}-token context, batch {batch}")


def _row(table, name_has: str, concurrency: int, source: str = "client", workload: str | None = None):
    t = table[(table["source"] == source) & (table["concurrency"] == concurrency)]
    if workload is not None:
        t = t[t["workload"] == workload]
    t = t[t["configuration"].str.contains(name_has, regex=False)]
    return t.iloc[0] if len(t) else None


def batching_effect(table, workload: str, concurrency: int) -> dict | None:
    """Continuous batching on against off at one level: throughput and mean-TTFT ratios, and the rule's
    verdict (a change counts when it exceeds 10 % either way)."""
    t = table[~table["configuration"].str.contains("continuous")]
    off = _row(t, "transformers", concurrency, workload=workload)
    on = _row(table, "continuous batching", concurrency, workload=workload)
    if off is None or on is None or not off["output tok/s"] or not on["TTFT mean ms"]:
        return None
    thr = on["output tok/s"] / off["output tok/s"]
    ttft = off["TTFT mean ms"] / on["TTFT mean ms"]
    verdict = ("raised throughput" if thr > 1.1 else "lowered throughput" if thr < 1 / 1.1 else "left throughput unchanged")
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
