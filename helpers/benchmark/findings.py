"""The engine benchmark's findings: the rules that read one `make engines` run (or its record), each a
frozen dataclass of the figures it took and its verdict (helpers.formulas.verdicts, the 10 % margin), and
the readings that turn them into notebook 08's sentences; `key_figures` is every rule on one run (with
helpers.benchmark.prefix and .agreement), `as_json` what a record stores.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..formulas.verdicts import CHANGE_MARGIN, Verdict, change_verdict, factor
from .agreement import Crosscheck, crosscheck_gaps
from .metrics import ATTAINMENT_GOAL, at_level, attainment, config_record, config_runs, distserve_goodput, run_mean
from .prefix import PrefixLevel, RadixAgainstBlocks, prefix_caching_effect, radix_against_blocks


# ----------------------------------------------------------------------------- the rules

@dataclass(frozen=True)
class Scaling:
    configuration: str
    workload: str
    concurrency: int          # the highest level
    tok_s_at_1: float
    tok_s_at_top: float
    ratio: float


def concurrency_scaling(data: dict, name: str, workload: str) -> Scaling | None:
    runs = config_runs(data, name, workload)
    one, top = at_level(runs, 1), max(runs, key=lambda r: r["concurrency"], default=None)
    if one is None or top is None or top is one or not one["output_tok_per_s"]:
        return None
    ratio = top["output_tok_per_s"] / one["output_tok_per_s"]
    return Scaling(name, workload, top["concurrency"], round(one["output_tok_per_s"], 1),
                   round(top["output_tok_per_s"], 1), round(ratio, 2))


@dataclass(frozen=True)
class OpenLoopPoint:
    rate: float                          # requests per second
    slo_attained: float | None           # share of requests within the SLO
    normalized_latency_ms: float | None  # E2E ÷ output tokens, averaged
    goodput_rps: float | None            # requests/s within the SLO (vLLM bench's "goodput")


@dataclass(frozen=True)
class OpenLoop:
    points: tuple[OpenLoopPoint, ...]
    distserve_goodput: float | None


def open_loop_table(data: dict, workload: str) -> dict[str, OpenLoop]:
    out = {}
    for c in data.get("configs", []):
        runs = sorted(config_runs(data, c["config"]["name"], workload, open_loop=True), key=lambda r: r["rate"])
        if not runs:
            continue
        pts = tuple(OpenLoopPoint(r["rate"], r.get("slo_attainment"),
                                  None if r.get("normalized_latency_s") is None else round(r["normalized_latency_s"] * 1e3, 2),
                                  None if r.get("goodput_rps") is None else round(r["goodput_rps"], 2)) for r in runs)
        out[c["config"]["name"]] = OpenLoop(pts, distserve_goodput([(p.rate, p.slo_attained) for p in pts]))
    return out


@dataclass(frozen=True)
class Attainment:
    points: tuple[tuple[float, float | None], ...]
    distserve_goodput: float | None


def attainment_points(data: dict, workload: str, slo) -> dict[str, Attainment]:
    """Per configuration, recomputed from each request's figures (an SLO chosen after the run)."""
    out = {}
    for c in data.get("configs", []):
        runs = sorted(config_runs(data, c["config"]["name"], workload, open_loop=True), key=lambda r: r["rate"])
        pts = tuple((r["rate"], attainment(r.get("requests_detail") or [], slo)) for r in runs)
        if pts:
            out[c["config"]["name"]] = Attainment(pts, distserve_goodput(pts))
    return out


@dataclass(frozen=True)
class BatchingEffect:
    concurrency: int
    throughput_ratio: float       # output tokens/s on ÷ off
    throughput: str               # the rule's verdict on it
    ttft_ratio: float             # mean TTFT off ÷ on
    ttft: str                     # "lower with it", "higher with it", "about equal"
    itl_ratio: float              # mean per-request ITL on ÷ off
    itl: str
    itl_off_ms: float
    itl_on_ms: float


def batching_effect_data(data: dict, workload: str) -> BatchingEffect | None:
    off, on = (config_runs(data, "HF transformers serve", workload),
               config_runs(data, "HF transformers serve + continuous batching", workload))
    if not off or not on:
        return None
    c = max(r["concurrency"] for r in on)
    a, b = at_level(off, c), at_level(on, c)
    if a is None or b is None or not a["output_tok_per_s"] or not run_mean(b, "ttft") or not run_mean(a, "itl"):
        return None
    thr, ttft = b["output_tok_per_s"] / a["output_tok_per_s"], run_mean(a, "ttft") / run_mean(b, "ttft")
    itl = run_mean(b, "itl") / run_mean(a, "itl")
    return BatchingEffect(c, round(thr, 2), change_verdict(thr), round(ttft, 2),
                          {"higher": "lower with it", "lower": "higher with it", "about equal": "about equal"}[
                              change_verdict(ttft)], round(itl, 2), change_verdict(itl),
                          round(run_mean(a, "itl") * 1e3, 2), round(run_mean(b, "itl") * 1e3, 2))


def batching_trade(e: BatchingEffect) -> Verdict:
    thr, itl = e.throughput, e.itl
    words = {("higher", "higher"): "batching traded per-request speed for total speed",
             ("higher", "about equal"): "batching raised total speed and left each request's speed as it was",
             ("higher", "lower"): "batching raised total speed and each request's speed",
             ("lower", "higher"): "batching cost each request's speed without raising total speed here",
             ("about equal", "higher"): "batching cost each request's speed without raising total speed here",
             }.get((thr, itl), f"batching left total speed {thr} and each request's ITL {itl}")
    return Verdict(words, "batching_trade", {"throughput_ratio": e.throughput_ratio, "itl_ratio": e.itl_ratio})


@dataclass(frozen=True)
class Outcome:
    ran: bool
    runs: int = 0
    why: str | None = None


def config_outcome(data: dict, name: str) -> Outcome:
    c = config_record(data, name)
    if c is None:
        return Outcome(False, why="not configured on this machine")
    if any(not r.get("run_failed") for r in c["runs"]):
        return Outcome(True, runs=len(c["runs"]))
    detail = " ".join(str(f["detail"]) for f in c["faults"])
    lines = [ln.strip() for ln in detail.splitlines() if ("Error" in ln or "requires" in ln) and len(ln) < 300]
    return Outcome(False, why=lines[-1] if lines else (c["faults"][0]["kind"] if c["faults"] else "no run succeeded"))


@dataclass(frozen=True)
class SpeculationLevel:
    """n-gram speculation against the default at one level (normalized latency: chunking does not change it)."""

    concurrency: int
    latency_ratio: float          # per token, with ÷ without
    latency: str
    throughput_ratio: float       # tok/s, with ÷ without
    throughput: str


def speculation_effect(data: dict, workload: str, name: str = "vLLM + n-gram speculation",
                       base: str = "vLLM default") -> list[SpeculationLevel]:
    rows, spec, ref = [], config_runs(data, name, workload), config_runs(data, base, workload)
    for s in spec:
        r = at_level(ref, s["concurrency"])
        a, b = (r or {}).get("normalized_latency_s"), s.get("normalized_latency_s")
        if r is None or not a or not b or not r["output_tok_per_s"]:
            continue
        lat, thr = b / a, s["output_tok_per_s"] / r["output_tok_per_s"]
        rows.append(SpeculationLevel(s["concurrency"], round(lat, 2), change_verdict(lat), round(thr, 2),
                                     change_verdict(thr)))
    return rows


# ----------------------------------------------------------------------------- the readings: words from the figures

def ratio_words(ratio: float, of: str, up: str = "higher", down: str = "lower", same: str = "about equal") -> str:
    """'1.86× {of} (higher)', 'within 10% of {of} (1.04×: about equal)': a direction, never a size word."""
    way = change_verdict(ratio)
    if way == "about equal":
        return f"within {CHANGE_MARGIN:.0%} of {of} ({factor(ratio)}: {same})"
    return f"{factor(ratio)} {of} ({up if way == 'higher' else down})"


def tok_s(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


@dataclass(frozen=True)
class Ranking:
    """One level's configurations by output tokens/s, highest first; `leaders` within 10 % of the highest."""

    workload: str
    concurrency: int
    order: tuple[tuple[str, float], ...]
    leaders: tuple[str, ...]

    @property
    def verdict(self) -> Verdict:
        (best, top), rest = self.order[0], [(n, v) for n, v in self.order if n not in self.leaders]
        if len(self.leaders) > 1:
            words = (f"at concurrency {self.concurrency}, " + " and ".join(
                f"{n} ({tok_s(v)})" for n, v in self.order if n in self.leaders)
                + f" gave the most output tokens/s, within {CHANGE_MARGIN:.0%} of each other")
        else:
            words = f"at concurrency {self.concurrency}, {best} gave the most output tokens/s: {tok_s(top)}"
        if rest:
            words += (" — " if len(self.leaders) == 1 else "; then ") + ", ".join(
                f"{factor(top / v)} {n}'s {tok_s(v)}" for n, v in rest)
        return Verdict(words, "throughput_order", dict(self.order))


def throughput_order(data: dict, workload: str, concurrency: int, names=None) -> Ranking | None:
    got = []
    for c in data.get("configs", []):
        n = c["config"]["name"]
        if names is not None and n not in names:
            continue
        r = at_level(config_runs(data, n, workload), concurrency)
        if r is not None and r.get("output_tok_per_s"):
            got.append((n, round(r["output_tok_per_s"], 1)))
    if not got:
        return None
    got.sort(key=lambda nv: -nv[1])
    top = got[0][1]
    leaders = tuple(n for n, v in got if change_verdict(top / v) == "about equal")
    return Ranking(workload, concurrency, tuple(got), leaders)


BASELINE, BATCHING, VLLM = "HF transformers serve", "HF transformers serve + continuous batching", "vLLM default"


def batching_reading(data: dict, workload: str) -> list[Verdict]:
    """What section 3 shows, from this run (empty when transformers serve lacks a run)."""
    off, on = config_runs(data, BASELINE, workload), config_runs(data, BATCHING, workload)
    if not off or not on:
        return []
    top = max(r["concurrency"] for r in on)
    a1, b1, at, bt = at_level(off, 1), at_level(on, 1), at_level(off, top), at_level(on, top)
    out = []
    if a1 and b1 and a1["output_tok_per_s"]:
        r = b1["output_tok_per_s"] / a1["output_tok_per_s"]
        out.append(Verdict(f"at concurrency 1, continuous batching gave {ratio_words(r, 'the output tokens/s of one at a time')}"
                           f" ({tok_s(a1['output_tok_per_s'])} → {tok_s(b1['output_tok_per_s'])})", "batching_at_1",
                           {"off_tok_s": a1["output_tok_per_s"], "on_tok_s": b1["output_tok_per_s"], "ratio": r}))
    if a1 and at and top > 1 and a1["output_tok_per_s"] and run_mean(a1, "ttft"):
        r, t = at["output_tok_per_s"] / a1["output_tok_per_s"], run_mean(at, "ttft") / run_mean(a1, "ttft")
        out.append(Verdict(f"one request at a time, from concurrency 1 to {top}: output tokens/s "
                           f"{ratio_words(r, 'those at 1')} ({tok_s(a1['output_tok_per_s'])} → {tok_s(at['output_tok_per_s'])}), "
                           f"mean TTFT {ratio_words(t, 'that at 1', 'longer', 'shorter')} "
                           f"({run_mean(a1, 'ttft') * 1e3:,.1f} → {run_mean(at, 'ttft') * 1e3:,.1f} ms)",
                           "one_at_a_time_scaling", {"tok_s_ratio": r, "ttft_ratio": t}))
    e = batching_effect_data(data, workload)
    if e is not None and e.concurrency == top and top > 1:
        out.append(Verdict(f"at concurrency {top}, continuous batching gave "
                           f"{ratio_words(e.throughput_ratio, 'the output tokens/s of one at a time')} "
                           f"({tok_s(at['output_tok_per_s'])} → {tok_s(bt['output_tok_per_s'])}), "
                           f"each request's ITL {ratio_words(e.itl_ratio, 'the one-at-a-time ITL', 'longer', 'shorter')} "
                           f"({e.itl_off_ms:g} → {e.itl_on_ms:g} ms)", "batching_at_top",
                           {"throughput_ratio": e.throughput_ratio, "itl_ratio": e.itl_ratio}))
    for level in sorted({1, top}):
        rk = throughput_order(data, workload, level)
        if rk is not None and len(rk.order) > 1:
            out.append(rk.verdict)
    return out


def open_loop_reading(data: dict, workload: str, attained: dict) -> list[Verdict]:
    """Each configuration's normalized latency from its lowest to its highest rate, and which first kept
    fewer than 90 % of its requests within the SLO (`attained`: attainment_points), or that none did."""
    out = []
    for name in attained:
        runs = sorted(config_runs(data, name, workload, open_loop=True), key=lambda r: r["rate"])
        lo, hi = (runs[0], runs[-1]) if len(runs) > 1 else (None, None)
        if lo and lo.get("normalized_latency_s") and hi.get("normalized_latency_s"):
            r = hi["normalized_latency_s"] / lo["normalized_latency_s"]
            out.append(Verdict(f"{name}: normalized latency from {lo['rate']:g} to {hi['rate']:g} req/s "
                               f"{lo['normalized_latency_s'] * 1e3:,.2f} → {hi['normalized_latency_s'] * 1e3:,.2f} ms/token "
                               f"({ratio_words(r, 'the lowest rate', 'climbing', 'falling', 'flat')})",
                               "normalized_latency", {"ratio": r}))
    missed = [(next((rate for rate, share in v.points if share is not None and share < ATTAINMENT_GOAL), None), n)
              for n, v in attained.items()]
    missed = sorted((m for m in missed if m[0] is not None), key=lambda m: m[0])
    if attained and not missed:
        out.append(Verdict(f"every configuration kept ≥ {ATTAINMENT_GOAL:.0%} of its requests within the SLO at "
                           "every rate measured: none passed its capacity here", "attainment_first", {}))
    elif missed:
        first = [n for rate, n in missed if rate == missed[0][0]]
        out.append(Verdict(f"below {ATTAINMENT_GOAL:.0%} within the SLO first: {' and '.join(first)}, at "
                           f"{missed[0][0]:g} req/s", "attainment_first", {"rate": missed[0][0]}))
    return out


@dataclass(frozen=True)
class QueueTTFT:
    """Mean TTFT at the top level ÷ at 1 (`ratio`), against a queue's prediction for one at a time: N requests
    together, each waits (N − 1) ÷ 2 answers (E2E at 1) on average before its own TTFT (`queued_ratio`)."""

    configuration: str
    concurrency: int
    ttft_1_ms: float
    ttft_top_ms: float
    e2e_1_ms: float
    ratio: float
    queued_ratio: float


def queue_ttft(data: dict, workload: str, name: str = BASELINE) -> QueueTTFT | None:
    runs = config_runs(data, name, workload)
    one, top = at_level(runs, 1), max(runs, key=lambda r: r["concurrency"], default=None)
    if one is None or top is None or top is one or not run_mean(one, "ttft") or not run_mean(top, "ttft"):
        return None
    t1, tt, e1, n = run_mean(one, "ttft"), run_mean(top, "ttft"), run_mean(one, "e2e"), top["concurrency"]
    return QueueTTFT(name, n, t1 * 1e3, tt * 1e3, e1 * 1e3, tt / t1, (t1 + (n - 1) / 2 * e1) / t1)


def chunk_reading(example: dict | None) -> Verdict | None:
    """How the example request's tokens arrived: one a chunk, or several in one."""
    if not example or not example.get("token_s") or not example.get("output_tokens"):
        return None
    chunks, tokens = len(example["token_s"]), example["output_tokens"]
    words = (f"{tokens} tokens in {chunks} chunks: one a decode step" if tokens == chunks else
             f"{tokens} tokens in {chunks} chunks: {tokens - chunks} more token{'s' if tokens - chunks > 1 else ''} than "
             "chunks, so a chunk carried more than one")
    return Verdict(words, "chunk_reading", {"tokens": tokens, "chunks": chunks})


# ----------------------------------------------------------------------------- every rule on one run

@dataclass(frozen=True)
class KeyFigures:
    vllm_scaling: Scaling | None            # the measure: one prompt and output length ("fixed")
    vllm_scaling_chat: Scaling | None       # a mixed batch ends with its longest request
    prefix_caching: dict[str, list[PrefixLevel]]
    radix_against_blocks: RadixAgainstBlocks | None
    crosscheck: list[Crosscheck]
    open_loop: dict[str, OpenLoop]
    continuous_batching: dict[str, BatchingEffect | None]
    fp8_kv_cache: Outcome
    ngram_speculation: list[SpeculationLevel]


def key_figures(data: dict) -> KeyFigures:
    return KeyFigures(
        vllm_scaling=concurrency_scaling(data, "vLLM default", "fixed"),
        vllm_scaling_chat=concurrency_scaling(data, "vLLM default", "chat"),
        prefix_caching={w: prefix_caching_effect(data, w) for w in ("agentic", "chat")},
        radix_against_blocks=radix_against_blocks(data),
        crosscheck=crosscheck_gaps(data),
        open_loop=open_loop_table(data, "chat"),
        continuous_batching={w: batching_effect_data(data, w) for w in ("chat", "agentic")},
        fp8_kv_cache=config_outcome(data, "vLLM + fp8 KV cache"),
        ngram_speculation=speculation_effect(data, "chat"))


def as_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    return value
