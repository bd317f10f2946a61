"""The engine benchmark's findings: the rules that read the numbers of one `make engines` run (run_all's
result, or its record) — concurrency scaling, prefix caching off against on, continuous batching, the
radix tree against hashed blocks, the cross-check with vllm bench serve, open-loop goodput, speculation.

Each rule returns a frozen dataclass: the figures it took and its verdict (helpers.benchmark.metrics.
change_verdict). The decision guide, the notebook's text and its tables are drawn from them
(helpers.benchmark.guide, notebook 08); a record stores them as plain JSON (`as_json`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..formulas.verdicts import change_verdict
from .metrics import attainment, distserve_goodput, relative_gap

SCALING_TARGET = 4.0          # issue 21: vLLM at concurrency 8 ÷ 1 in output tokens/s, on this CPU
PREFIX_TTFT_TARGET = 2.0      # issue 21: agentic workload, mean TTFT prefix caching off ÷ on
ITL_TOLERANCE = 0.01         # issue 32: our client against vllm bench serve side by side, mean ITL


def config_runs(data: dict, name: str, workload: str, source: str = "client", open_loop: bool = False) -> list[dict]:
    """The runs of one configuration on one workload that did not fail: closed-loop levels, or open-loop rates."""
    for c in data.get("configs", []):
        if c["config"]["name"] == name:
            return [r for r in c["runs"] if r.get("workload") == workload and r.get("source") == source
                    and (r.get("rate") is not None) == open_loop and not r.get("run_failed")]
    return []


def at_level(runs: list[dict], concurrency: int) -> dict | None:
    """The run at one concurrency, or None."""
    return next((r for r in runs if r["concurrency"] == concurrency), None)


def _mean(run: dict, key: str):
    return (run.get(f"{key}_s") or {}).get(f"{key}_mean")


def _config(data: dict, name: str) -> dict | None:
    return next((c for c in data.get("configs", []) if c["config"]["name"] == name), None)


# ----------------------------------------------------------------------------- the rules

@dataclass(frozen=True)
class Scaling:
    """Output tokens/s at the highest closed-loop level ÷ at concurrency 1, for one configuration."""

    configuration: str
    workload: str
    concurrency: int          # the highest level
    tok_s_at_1: float
    tok_s_at_top: float
    ratio: float
    target: float
    met: bool


def concurrency_scaling(data: dict, name: str, workload: str) -> Scaling | None:
    runs = config_runs(data, name, workload)
    one, top = at_level(runs, 1), max(runs, key=lambda r: r["concurrency"], default=None)
    if one is None or top is None or top is one or not one["output_tok_per_s"]:
        return None
    ratio = top["output_tok_per_s"] / one["output_tok_per_s"]
    return Scaling(name, workload, top["concurrency"], round(one["output_tok_per_s"], 1),
                   round(top["output_tok_per_s"], 1), round(ratio, 2), SCALING_TARGET, ratio >= SCALING_TARGET)


@dataclass(frozen=True)
class PrefixLevel:
    """vLLM with prefix caching off against on at one level."""

    concurrency: int
    ttft_off_ms: float
    ttft_on_ms: float
    off_over_on: float        # mean TTFT off ÷ on
    verdict: str
    target_met: bool
    vllm_hit_rate_on: float | None    # what vLLM itself counted over the workload (its /metrics)
    vllm_hit_rate_off: float | None


def prefix_caching_effect(data: dict, workload: str, off: str = "vLLM, prefix caching off",
                          on: str = "vLLM default") -> list[PrefixLevel]:
    """vLLM with prefix caching off against on, level by level: mean TTFT off ÷ on, the rule's verdict,
    and the hit rate vLLM itself counted over the workload."""
    rows, offs, ons = [], config_runs(data, off, workload), config_runs(data, on, workload)
    hits = {n: ((_config(data, n) or {}).get("prefix_cache") or {}).get(workload) for n in (off, on)}
    for r_on in ons:
        r_off = at_level(offs, r_on["concurrency"])
        a, b = (_mean(r_off, "ttft") if r_off else None), _mean(r_on, "ttft")
        if not a or not b:
            continue
        ratio = a / b
        verdict = {"higher": "prefix caching cut TTFT", "lower": "prefix caching raised TTFT",
                   "about equal": "prefix caching left TTFT unchanged"}[change_verdict(ratio)]
        rows.append(PrefixLevel(r_on["concurrency"], round(a * 1e3, 1), round(b * 1e3, 1), round(ratio, 2), verdict,
                                ratio >= PREFIX_TTFT_TARGET, (hits[on] or {}).get("hit rate"),
                                (hits[off] or {}).get("hit rate")))
    return rows


@dataclass(frozen=True)
class RadixAgainstBlocks:
    """The trace replayed through a radix tree, token-granular and in blocks (harness.prefix_model), beside
    what vLLM counted; `most_saved` bounds what a finer cache can cut of the prefill work:
    (1 − block hit rate) ÷ (1 − radix hit rate), the tokens each leaves to compute."""

    prompt_tokens: int | None
    radix: float                      # hit rate, token-granular
    blocks: dict                      # block size -> hit rate
    most_saved: float | None
    verdict: str | None
    vllm_counted: dict | None         # vLLM default's own prefix-cache counters, all levels


def radix_against_blocks(data: dict, workload: str = "agentic") -> RadixAgainstBlocks | None:
    model = (data.get("prefix_model") or {}).get(workload)
    if not model:
        return None
    radix = model["radix (token-granular)"]
    blocks = {int(k.removeprefix("blocks of ")): v for k, v in model.items() if k.startswith("blocks of ")}
    bound = (1 - blocks[16]) / (1 - radix) if radix < 1 else None
    measured = ((_config(data, "vLLM default") or {}).get("prefix_cache") or {}).get(workload)
    verdict = None if bound is None else {"higher": "a radix tree could cut the prefill work",
                                          "lower": "impossible (a radix tree never caches less)",
                                          "about equal": "radix tree and hashed blocks are about equal"}[
        change_verdict(bound)]
    return RadixAgainstBlocks(model.get("prompt tokens"), radix, blocks, None if bound is None else round(bound, 3),
                              verdict, measured)


def _gap(a, b):
    return None if a is None or b is None or not b else round(relative_gap(a, b), 4)


FIGURES = ("ttft", "tpot", "itl", "e2el")


@dataclass(frozen=True)
class Gaps:
    """Relative gaps of one reading to vllm bench serve's: TTFT; per-request ITL against its TPOT; pooled
    ITL against its ITL; E2E against its E2EL."""

    ttft: float | None
    tpot: float | None
    itl: float | None
    e2el: float | None


def _gaps(ours: dict | None, theirs: dict | None) -> Gaps | None:
    return None if not ours or not theirs else Gaps(*(_gap(ours.get(k), theirs.get(k)) for k in FIGURES))


@dataclass(frozen=True)
class Crosscheck:
    """One level of the vllm bench serve cross-check (helpers.benchmark.crosscheck) and the rule's reading:
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
    """How far a tool's own runs of one load differ: (largest − smallest) ÷ mean, per figure; None for
    fewer than two runs. A gap to another tool smaller than this is inside the tool's own noise."""
    if len(runs) < 2:
        return None
    vals = {k: [r.get(k) for r in runs] for k in FIGURES}
    return Gaps(*(None if None in v or not sum(v) else round((max(v) - min(v)) / (sum(v) / len(v)), 4)
                  for v in vals.values()))


def crosscheck_verdict(client: Gaps | None, spread: Gaps | None, shared_itl: float | None) -> str:
    """The cross-check's rule: TTFT of the alternated runs within vllm bench's own spread, ITL over the
    steps both streamed side by side within ITL_TOLERANCE."""
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
    for lv in ((_config(data, name) or {}).get("crosscheck") or []):
        runs, side = lv.get("runs") or {}, lv.get("side by side") or {}
        shared = side.get("shared steps") or {}
        client = _gaps(lv.get("our client's own run"), lv.get("vllm bench, direct"))
        spread, itl = _spread(runs.get("vllm bench, direct") or []), _gap(shared.get("ours"), shared.get("vllm bench"))
        rows.append(Crosscheck(lv["concurrency"], len(runs.get("our client's own run") or []), client, spread,
                               _gaps(side.get("ours"), side.get("vllm bench")), itl, shared.get("gaps") or 0,
                               _gaps(lv.get("ours on its requests"), lv.get("vllm bench, direct")),
                               crosscheck_verdict(client, spread, itl)))
    return rows


@dataclass(frozen=True)
class OpenLoopPoint:
    rate: float                          # requests per second
    slo_attained: float | None           # share of requests within the SLO
    normalized_latency_ms: float | None  # E2E ÷ output tokens, averaged
    goodput_rps: float | None            # requests/s within the SLO (vLLM bench's "goodput")


@dataclass(frozen=True)
class OpenLoop:
    """One configuration's open-loop runs and DistServe's goodput (the highest rate with ≥ 90 % attainment)."""

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
    """(rate, share of requests within an SLO) of one configuration's open-loop runs, and DistServe's goodput."""

    points: tuple[tuple[float, float | None], ...]
    distserve_goodput: float | None


def attainment_points(data: dict, workload: str, slo) -> dict[str, Attainment]:
    """Per configuration, recomputed from each request's figures (so an SLO chosen after the run applies)."""
    out = {}
    for c in data.get("configs", []):
        runs = sorted(config_runs(data, c["config"]["name"], workload, open_loop=True), key=lambda r: r["rate"])
        pts = tuple((r["rate"], attainment(r.get("requests_detail") or [], slo)) for r in runs)
        if pts:
            out[c["config"]["name"]] = Attainment(pts, distserve_goodput(pts))
    return out


@dataclass(frozen=True)
class BatchingEffect:
    """transformers serve with continuous batching on against off at the top closed-loop level."""

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
    if a is None or b is None or not a["output_tok_per_s"] or not _mean(b, "ttft") or not _mean(a, "itl"):
        return None
    thr, ttft = b["output_tok_per_s"] / a["output_tok_per_s"], _mean(a, "ttft") / _mean(b, "ttft")
    itl = _mean(b, "itl") / _mean(a, "itl")
    return BatchingEffect(c, round(thr, 2), change_verdict(thr), round(ttft, 2),
                          {"higher": "lower with it", "lower": "higher with it", "about equal": "about equal"}[
                              change_verdict(ttft)], round(itl, 2), change_verdict(itl),
                          round(_mean(a, "itl") * 1e3, 2), round(_mean(b, "itl") * 1e3, 2))


@dataclass(frozen=True)
class Outcome:
    """Whether a configuration ran here, and if not, the line of its fault that says why."""

    ran: bool
    runs: int = 0
    why: str | None = None


def config_outcome(data: dict, name: str) -> Outcome:
    c = _config(data, name)
    if c is None:
        return Outcome(False, why="not configured on this machine")
    if any(not r.get("run_failed") for r in c["runs"]):
        return Outcome(True, runs=len(c["runs"]))
    detail = " ".join(str(f["detail"]) for f in c["faults"])
    lines = [ln.strip() for ln in detail.splitlines() if ("Error" in ln or "requires" in ln) and len(ln) < 300]
    return Outcome(False, why=lines[-1] if lines else (c["faults"][0]["kind"] if c["faults"] else "no run succeeded"))


@dataclass(frozen=True)
class SpeculationLevel:
    """n-gram speculation against the default at one level: normalized latency (E2E ÷ tokens, which does not
    depend on how tokens are grouped into chunks) and output tokens/s, each ratio read by the rule."""

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


# ----------------------------------------------------------------------------- every rule on one run

@dataclass(frozen=True)
class KeyFigures:
    """The benchmark's headline figures, each by the rule that reads it; what could not be measured is None
    (or empty)."""

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
    """Every rule on the runs of `data` (run_all's result or its record)."""
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
    """A finding as plain JSON (dicts, lists, numbers, strings): what a record stores."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    return value
