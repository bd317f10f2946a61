"""The decision guide: which engine for which workload. Its CPU rows are sorted tables read from a run —
the learner's live run where it measured a configuration, else the record it cites (its machine, date and
load), both where they disagree (`cpu_rows`); its GPU rows are cited or computed (`gpu_table`), beside the
talk's table and published figures (`published_table`, each with its source) and tensor parallelism on paper.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..formulas import regime
from ..parallel.plan import parallel_step
from . import records

DATA = Path(__file__).resolve().parents[1] / "data"
TALK_CSV = DATA / "talk_serving_h100.csv"   # the talk's Demo F, its owner
TALK_SOURCE = "the workshop talk, Demo F (one H100; 10 concurrent × 50 tokens; 1,656-token shared prefix)"


def talk_rows():
    """The talk's table as its CSV holds it (key, configuration, concurrency, tok_s, ttft_ms, itl_ms): the
    one reader of helpers/data/talk_serving_h100.csv, for the guide, the key figures and the slides."""
    return pd.read_csv(TALK_CSV, comment="#")


def talk_table():
    t = talk_rows().rename(columns={"tok_s": "tok/s", "ttft_ms": "TTFT ms", "itl_ms": "ITL ms"})
    return t[["configuration", "concurrency", "tok/s", "TTFT ms", "ITL ms"]].assign(source=TALK_SOURCE)


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


def talk_factors() -> TalkFactors:
    t = talk_rows().set_index("key")
    total = t.at["vllm", "tok_s"] / t.at["hf", "tok_s"]
    per_request = t.at["hf", "itl_ms"] / t.at["vllm", "itl_ms"]
    return TalkFactors(total, per_request, total / per_request, int(t.at["vllm", "concurrency"]))


def published_table():
    """Published figures beside the guide, each with its source (helpers/data/engine_published.csv)."""
    return pd.read_csv(DATA / "engine_published.csv")


def tensor_parallel_table(model: str = "gpt-oss-120b", gpu: str = "H100 SXM", gpus=(1, 2, 4, 8),
                          weight_dtype: str = "bf16", context: int = 4096, batch: int = 16, link=None):
    """Tensor parallelism on paper (helpers.parallel.plan.parallel_step): fit, largest batch, decode step
    (floor ÷ efficiency + the all-reduces), and tokens/s (an upper bound: no prefill) and $ at that step."""
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


def gpu_batching_table(batches=(1, 4, 8, 32), context: int = 512):
    """What batching buys on a GPU, computed: Mistral 7B bf16 on an H100 SXM (helpers.present.on_gpu.gpu_plan),
    the decode step's floor at each batch and the output tokens/s it allows (batch ÷ step), ÷ batch 1."""
    from ..present.on_gpu import gpu_plan

    rows = []
    for b in batches:
        step = gpu_plan(batch=b, context=context).step_floor_s
        rows.append({"batch": b, "step floor ms": step * 1e3, "tok/s at the floor": b / step})
    t = pd.DataFrame(rows)
    return t.assign(**{"× batch 1": t["tok/s at the floor"] / t["tok/s at the floor"].iloc[0]})


# ----------------------------------------------------------------------------- the CPU rows, from the runs

CPU_COLUMNS = ("situation", "concurrency", "configuration", "output tok/s", "output spread", "runs", "÷ best",
               "÷ best label", "live ÷ record", "live ÷ record label", "from")


def _level_rows(data: dict, concurrency: int, prefer: tuple[str, ...]):
    """A run's chat rows at one closed-loop level, one per configuration (by the first tool of `prefer` that
    measured it), sorted by median output tok/s."""
    t = records.levels_table(data)
    t = t[(t["concurrency"] == concurrency) & t["rate asked"].isna() & t["output tok/s"].notna()]
    t = t.assign(order=[prefer.index(x) if x in prefer else len(prefer) for x in t["tool"]])
    return t.sort_values("order").drop_duplicates("configuration").drop(columns="order")


def cpu_rows(live: dict | None, record: dict | None, live_label: str = "this machine's live run"):
    """The guide's CPU rows: for one user (concurrency 1) and for the most users a run measured, each
    configuration by median output tok/s, highest first, ÷ the highest of the same run with its label. A
    configuration's row reads the live run where it measured it, else the record; where both measured it
    and live ÷ record is not "at" (by the 10 % margin), both rows are shown. `from` cites the run."""
    rec_label = f"record: {records.provenance(record)}" if record else ""
    tops = [max((data.get("plan") or {}).get("concurrencies") or data.get("concurrencies") or [1])
            for data in (live, record) if data]
    out = []
    for situation, c in (("one user", 1), ("several users at once", max(tops, default=1))):
        mine, theirs = _level_rows(live or {}, c, ("client",)), _level_rows(record or {}, c, ("guidellm", "client"))
        rows = []
        for name in dict.fromkeys([*mine["configuration"], *theirs["configuration"]]):
            a, b = mine[mine["configuration"] == name], theirs[theirs["configuration"] == name]
            r, lab = regime.against(a["output tok/s"].iloc[0], b["output tok/s"].iloc[0]) if len(a) and len(b) else (None, "")
            if len(a):
                rows.append(dict(a.iloc[0], **{"from": live_label, "live ÷ record": r, "live ÷ record label": lab}))
            if len(b) and (not len(a) or lab != regime.AT):
                rows.append(dict(b.iloc[0], **{"from": rec_label}))
        for source in {r["from"] for r in rows}:
            best = max(r["output tok/s"] for r in rows if r["from"] == source)
            for r in (r for r in rows if r["from"] == source):
                r["÷ best"], r["÷ best label"] = regime.against(r["output tok/s"], best)
        out += sorted((dict(r, situation=situation) for r in rows), key=lambda r: -r["output tok/s"])
    return pd.DataFrame(out, columns=list(CPU_COLUMNS))


def gpu_table():
    """The guide's GPU rows, each cited or computed (helpers/data/engine_guide_gpu.csv)."""
    return pd.read_csv(DATA / "engine_guide_gpu.csv")
