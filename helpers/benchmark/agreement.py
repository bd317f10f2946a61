"""Our client's figures against two established tools, read by rules: `vllm bench serve` on the same
server (the cross-check scripts/engines.py runs; `crosscheck_gaps`, `crosscheck_reading`) and
guidellm on its own requests (helpers.benchmark.guidellm_runner; `agreement`, `agreement_reading`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..formulas.verdicts import Verdict
from .metrics import config_record, relative_gap

OURS = "ours on guidellm"   # the source of our figures recomputed from guidellm's own per-request times

ITL_TOLERANCE = 0.01         # our client against vllm bench serve side by side: mean ITL within 1 %


def _gap(a, b):
    return None if a is None or b is None or not b else round(relative_gap(a, b), 4)


FIGURES = ("ttft", "tpot", "itl", "e2el")


@dataclass(frozen=True)
class Gaps:
    """Relative gaps to vllm bench serve's: TTFT, per-request ITL to its TPOT, pooled ITL to its ITL, E2E to E2EL."""

    ttft: float | None
    tpot: float | None
    itl: float | None
    e2el: float | None


def _gaps(ours: dict | None, theirs: dict | None) -> Gaps | None:
    return None if not ours or not theirs else Gaps(*(_gap(ours.get(k), theirs.get(k)) for k in FIGURES))


@dataclass(frozen=True)
class Crosscheck:
    """One level of the vllm bench serve cross-check (scripts/engines.py) and the rule's reading:
    our client and vllm bench agree when their alternated runs' mean TTFT differ by no more than vllm
    bench's runs differ from each other, and their mean ITL over the server's steps both streamed, side
    by side, by at most ITL_TOLERANCE."""

    concurrency: int
    repeats: int                  # alternated runs of each tool behind `client`
    client: Gaps | None           # our client's runs against vllm bench's (their means)
    bench_spread: Gaps | None     # vllm bench against itself: (max − min) ÷ mean of its runs
    side_by_side: Gaps | None     # our client against vllm bench, both running at once: all their requests
    shared_itl: float | None      # ... their mean gap between chunks over the steps both streamed at once
    shared_gaps: int              # how many gaps each that is
    definitions: Gaps | None      # our definitions on vllm bench's own requests, against its figures
    verdict: str


def _spread(runs: list[dict]) -> Gaps | None:
    """(largest − smallest) ÷ mean of a tool's own runs, per figure: its noise (None for fewer than two)."""
    if len(runs) < 2:
        return None
    vals = {k: [r.get(k) for r in runs] for k in FIGURES}
    return Gaps(*(None if None in v or not sum(v) else round((max(v) - min(v)) / (sum(v) / len(v)), 4)
                  for v in vals.values()))


def crosscheck_verdict(client: Gaps | None, spread: Gaps | None, shared_itl: float | None) -> str:
    ttft = None if client is None or spread is None or None in (client.ttft, spread.ttft) else client.ttft <= spread.ttft
    itl = None if shared_itl is None else shared_itl <= ITL_TOLERANCE
    if ttft is None or itl is None:
        return "not judged: " + ("fewer than two runs of vllm bench" if ttft is None else "no steps streamed side by side")
    if ttft and itl:
        return "agree"
    return "apart: " + " and ".join(w for w, ok in (("TTFT beyond vllm bench's own spread", ttft),
                                                    (f"ITL beyond {ITL_TOLERANCE:.0%}", itl)) if not ok)


def crosscheck_gaps(data: dict, name: str = "vLLM default") -> list[Crosscheck]:
    rows = []
    for lv in ((config_record(data, name) or {}).get("crosscheck") or []):
        runs, side = lv.get("runs") or {}, lv.get("side by side") or {}
        shared = side.get("shared steps") or {}
        client = _gaps(lv.get("our client's own run"), lv.get("vllm bench, direct"))
        spread, itl = _spread(runs.get("vllm bench, direct") or []), _gap(shared.get("ours"), shared.get("vllm bench"))
        rows.append(Crosscheck(lv["concurrency"], len(runs.get("our client's own run") or []), client, spread,
                               _gaps(side.get("ours"), side.get("vllm bench")), itl, shared.get("gaps") or 0,
                               _gaps(lv.get("ours on its requests"), lv.get("vllm bench, direct")),
                               crosscheck_verdict(client, spread, itl)))
    return rows



AGREEMENT_TOLERANCE = 0.15   # the client and guidellm agree when their means differ by at most 15 %


def agreement(table, workload: str | None = None, ours: str = OURS):
    """Our mean TTFT and ITL against guidellm's per configuration and level, within AGREEMENT_TOLERANCE or not;
    ours=OURS: our definitions on guidellm's requests (the same run); "client": our client's run just before."""
    import pandas as pd

    t = table if workload is None else table[table["workload"] == workload]
    rows = []
    for (name, c), g in t.groupby(["configuration", "concurrency"], sort=False):
        cl, gl = g[g["source"] == ours], g[g["source"] == "guidellm"]
        if not len(cl) or not len(gl):
            continue
        row = {"configuration": name, "concurrency": c, "compared": "same run" if ours == OURS else "back to back"}
        for col in ("TTFT mean ms", "ITL mean ms"):
            a, b = cl[col].iloc[0], gl[col].iloc[0]
            row[f"{ours} {col}"], row[f"guidellm {col}"] = a, b
            row[f"{col.split()[0]} gap"] = None if a is None or b is None else relative_gap(a, b)
        row["agree"] = all(row[k] is not None and row[k] <= AGREEMENT_TOLERANCE for k in ("TTFT gap", "ITL gap"))
        rows.append(row)
    return pd.DataFrame(rows)


def agreement_reading(table) -> Verdict | None:
    if table is None or table.empty:
        return None
    gaps = [(r[f"{k} gap"], k, r["configuration"], r["concurrency"]) for _, r in table.iterrows()
            for k in ("TTFT", "ITL") if r[f"{k} gap"] is not None]
    if not gaps:
        return None
    g, k, name, c = max(gaps)
    return Verdict(f"the largest gap between our definitions and guidellm's on the same requests is {g:.1%} "
                   f"({k}, {name} at concurrency {c}), " +
                   (f"within the {AGREEMENT_TOLERANCE:.0%} tolerance" if g <= AGREEMENT_TOLERANCE else
                    f"beyond the {AGREEMENT_TOLERANCE:.0%} tolerance"), "agreement_reading", {"largest_gap": g})


def crosscheck_reading(rows) -> list[Verdict]:
    """The cross-check's largest gaps over its levels: our definitions on its requests, ITL side by side, its spread."""
    out = []

    def largest(pick):
        vals = [(v, r.concurrency) for r in rows for v in [pick(r)] if v is not None]
        return max(vals) if vals else None

    d = largest(lambda r: None if r.definitions is None else max(
        (x for x in (r.definitions.ttft, r.definitions.itl, r.definitions.tpot, r.definitions.e2el) if x is not None),
        default=None))
    if d:
        out.append(Verdict(f"our definitions on vllm bench's own per-request times: at most {d[0]:.1%} from its means "
                           f"(concurrency {d[1]})", "definitions_gap", {"largest": d[0]}))
    s = largest(lambda r: r.shared_itl)
    if s:
        out.append(Verdict(f"side by side, over the steps both streamed: mean ITL at most {s[0]:.1%} apart "
                           f"(concurrency {s[1]}; the rule's tolerance {ITL_TOLERANCE:.0%})", "side_by_side_gap",
                           {"largest": s[0]}))
    b = largest(lambda r: None if r.bench_spread is None else max(
        (x for x in (r.bench_spread.ttft, r.bench_spread.itl) if x is not None), default=None))
    if b:
        out.append(Verdict(f"back to back, vllm bench's own runs of one load spread up to {b[0]:.1%} (concurrency "
                           f"{b[1]}: (largest − smallest) ÷ mean)", "bench_spread", {"largest": b[0]}))
    return out
