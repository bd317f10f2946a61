"""The engine benchmark's findings: the rules that read the numbers of one `make engines` run (run_all's
result, or its record) — concurrency scaling, prefix caching off against on, continuous batching, the
radix tree against hashed blocks, the cross-check with vllm bench serve, open-loop goodput, speculation.
Each rule returns the figures it took and its verdict (helpers.engines.metrics.change_verdict); the
decision guide and the notebook's tables are drawn from them (helpers.engines.guide).
"""
from __future__ import annotations

from .metrics import attainment, change_verdict, distserve_goodput, relative_gap

SCALING_TARGET = 4.0          # issue 21: vLLM at concurrency 8 ÷ 1 in output tokens/s, on this CPU
PREFIX_TTFT_TARGET = 2.0      # issue 21: agentic workload, mean TTFT prefix caching off ÷ on
CROSSCHECK_TOLERANCE = 0.05   # issue 21: our client against vllm bench serve, TTFT and ITL


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


def key_figures(data: dict) -> dict:
    """The benchmark's headline figures, each computed from the runs of `data` (run_all's result) with
    the rule that reads it; what could not be measured is None with why."""
    figs: dict = {}
    # the measure: one prompt and output length (a mixed batch ends with its longest request)
    figs["vllm concurrency scaling"] = concurrency_scaling(data, "vLLM default", "fixed")
    figs["vllm concurrency scaling, chat"] = concurrency_scaling(data, "vLLM default", "chat")
    figs["prefix caching"] = {w: prefix_caching_effect(data, w) for w in ("agentic", "chat")}
    figs["radix against blocks"] = radix_against_blocks(data)
    figs["vllm bench cross-check"] = crosscheck_gaps(data)
    figs["open loop"] = open_loop_table(data, "chat")
    figs["continuous batching"] = {w: batching_effect_data(data, w) for w in ("chat", "agentic")}
    figs["fp8 KV cache"] = config_outcome(data, "vLLM + fp8 KV cache")
    figs["n-gram speculation"] = speculation_effect(data, "chat")
    return figs


def _mean(run: dict, key: str):
    return (run.get(f"{key}_s") or {}).get(f"{key}_mean")


def concurrency_scaling(data: dict, name: str, workload: str) -> dict | None:
    """Output tokens/s at the highest closed-loop level ÷ at concurrency 1, for one configuration."""
    runs = config_runs(data, name, workload)
    one, top = at_level(runs, 1), max(runs, key=lambda r: r["concurrency"], default=None)
    if one is None or top is None or top is one or not one["output_tok_per_s"]:
        return None
    ratio = top["output_tok_per_s"] / one["output_tok_per_s"]
    return {"configuration": name, "workload": workload, "concurrency": top["concurrency"],
            "tok/s at 1": round(one["output_tok_per_s"], 1), "tok/s at top": round(top["output_tok_per_s"], 1),
            "ratio": round(ratio, 2), "target": SCALING_TARGET, "met": ratio >= SCALING_TARGET}


def prefix_caching_effect(data: dict, workload: str, off: str = "vLLM, prefix caching off",
                          on: str = "vLLM default") -> list[dict]:
    """vLLM with prefix caching off against on, level by level: mean TTFT off ÷ on, the rule's verdict,
    and the hit rate vLLM itself counted over the workload (its /metrics)."""
    rows, offs, ons = [], config_runs(data, off, workload), config_runs(data, on, workload)
    hits = {n: ((_config(data, n) or {}).get("prefix_cache") or {}).get(workload) for n in (off, on)}
    for r_on in ons:
        r_off = at_level(offs, r_on["concurrency"])
        a, b = (_mean(r_off, "ttft") if r_off else None), _mean(r_on, "ttft")
        if not a or not b:
            continue
        ratio = a / b
        rows.append({"concurrency": r_on["concurrency"], "TTFT off ms": round(a * 1e3, 1), "TTFT on ms": round(b * 1e3, 1),
                     "off ÷ on": round(ratio, 2), "verdict": {"higher": "prefix caching cut TTFT",
                                                             "lower": "prefix caching raised TTFT",
                                                             "about equal": "prefix caching left TTFT unchanged"}[
                         change_verdict(ratio)],
                     "target met": ratio >= PREFIX_TTFT_TARGET,
                     "vLLM hit rate on": (hits[on] or {}).get("hit rate"),
                     "vLLM hit rate off": (hits[off] or {}).get("hit rate")})
    return rows


def _config(data: dict, name: str) -> dict | None:
    return next((c for c in data.get("configs", []) if c["config"]["name"] == name), None)


def radix_against_blocks(data: dict, workload: str = "agentic") -> dict | None:
    """The agentic trace replayed through a radix tree, token-granular and in blocks (bench.prefix_model),
    beside what vLLM counted; the rule: a finer cache can cut the prefill work at most by
    (1 − block hit rate) ÷ (1 − radix hit rate) — the tokens each leaves to compute."""
    model = (data.get("prefix_model") or {}).get(workload)
    if not model:
        return None
    radix, blocks = model["radix (token-granular)"], model["blocks of 16"]
    bound = (1 - blocks) / (1 - radix) if radix < 1 else None
    measured = ((_config(data, "vLLM default") or {}).get("prefix_cache") or {}).get(workload)
    verdict = None if bound is None else {"higher": "a radix tree could cut the prefill work",
                                          "lower": "impossible (a radix tree never caches less)",
                                          "about equal": "radix tree and hashed blocks are about equal"}[
        change_verdict(bound)]
    return dict(model, **{"most prefill a radix tree saves over 16-token blocks ×": None if bound is None else round(bound, 3),
                          "verdict": verdict, "vLLM counted (default, all levels)": measured})


def _gap(a, b):
    return None if a is None or b is None or not b else round(relative_gap(a, b), 4)


def crosscheck_gaps(data: dict, name: str = "vLLM default") -> list[dict]:
    """Per level of the vllm bench serve cross-check: the relative gap of each of our readings to vLLM
    bench's own figure (TTFT; our per-request ITL against its TPOT; our pooled ITL against its ITL; E2E
    against its E2EL), and whether TTFT and ITL agree within CROSSCHECK_TOLERANCE."""
    rows = []
    for lv in ((_config(data, name) or {}).get("crosscheck") or []):
        theirs = lv["vllm bench"]
        tap_ttft = (lv.get("vLLM's definitions on the tap") or {}).get("ttft")
        # what the tap's relay adds to vllm bench's TTFT: vllm bench times the relay hop, the tap does not
        row = {"concurrency": lv["concurrency"], "relay ms (vllm bench TTFT − the tap's, same requests)":
               None if tap_ttft is None or theirs.get("ttft") is None else round(theirs["ttft"] - tap_ttft, 2)}
        for what in ("our client's own run", "ours on the tap", "vLLM's definitions on the tap"):
            mine = lv.get(what) or {}
            gaps = {k: _gap(mine.get(k), theirs.get(k)) for k in ("ttft", "tpot", "itl", "e2el")}
            row[what] = gaps
            row[f"{what}: TTFT and ITL within {CROSSCHECK_TOLERANCE:.0%}"] = all(
                g is not None and g <= CROSSCHECK_TOLERANCE for g in (gaps["ttft"], gaps["tpot"]))
        rows.append(row)
    return rows


def open_loop_table(data: dict, workload: str) -> dict:
    """Per configuration, its open-loop runs: request rate, SLO attainment, normalized latency, requests/s
    within the SLO; and DistServe's goodput (the highest rate with ≥ 90 % attainment)."""
    out = {}
    for c in data.get("configs", []):
        runs = sorted(config_runs(data, c["config"]["name"], workload, open_loop=True), key=lambda r: r["rate"])
        if not runs:
            continue
        pts = [{"rate req/s": r["rate"], "SLO attained": r.get("slo_attainment"),
                "norm. latency ms/token": None if r.get("normalized_latency_s") is None
                else round(r["normalized_latency_s"] * 1e3, 2),
                "req/s in SLO": None if r.get("goodput_rps") is None else round(r["goodput_rps"], 2)} for r in runs]
        out[c["config"]["name"]] = {"points": pts, "DistServe goodput req/s": distserve_goodput(
            [(p["rate req/s"], p["SLO attained"]) for p in pts])}
    return out


def batching_effect_data(data: dict, workload: str) -> dict | None:
    """transformers serve with continuous batching on against off at the top closed-loop level: output
    tokens/s, mean TTFT and mean per-request ITL, each ratio read by the rule."""
    off, on = config_runs(data, "HF transformers serve", workload), config_runs(data, "HF transformers serve + continuous batching",
                                                                     workload)
    if not off or not on:
        return None
    c = max(r["concurrency"] for r in on)
    a, b = at_level(off, c), at_level(on, c)
    if a is None or b is None or not a["output_tok_per_s"] or not _mean(b, "ttft") or not _mean(a, "itl"):
        return None
    thr, ttft, itl = b["output_tok_per_s"] / a["output_tok_per_s"], _mean(a, "ttft") / _mean(b, "ttft"), \
        _mean(b, "itl") / _mean(a, "itl")
    return {"concurrency": c, "throughput on ÷ off": round(thr, 2), "throughput": change_verdict(thr),
            "TTFT off ÷ on": round(ttft, 2), "TTFT": {"higher": "lower with it", "lower": "higher with it",
                                                     "about equal": "about equal"}[change_verdict(ttft)],
            "per-request ITL on ÷ off": round(itl, 2), "ITL": change_verdict(itl),
            "ITL off ms": round(_mean(a, "itl") * 1e3, 2), "ITL on ms": round(_mean(b, "itl") * 1e3, 2)}


def config_outcome(data: dict, name: str) -> dict:
    """Whether a configuration ran here, and if not, the line of its fault that says why."""
    c = _config(data, name)
    if c is None:
        return {"ran": False, "why": "not configured on this machine"}
    if any(not r.get("run_failed") for r in c["runs"]):
        return {"ran": True, "runs": len(c["runs"])}
    detail = " ".join(str(f["detail"]) for f in c["faults"])
    lines = [ln.strip() for ln in detail.splitlines() if ("Error" in ln or "requires" in ln) and len(ln) < 300]
    return {"ran": False, "why": (lines[-1] if lines else (c["faults"][0]["kind"] if c["faults"] else "no run succeeded"))}


def speculation_effect(data: dict, workload: str, name: str = "vLLM + n-gram speculation",
                       base: str = "vLLM default") -> list[dict]:
    """n-gram speculation against the default, level by level: the normalized latency (E2E ÷ tokens: it
    does not depend on how tokens are grouped into chunks, which speculation changes, and a loaded server
    does too) and output tokens/s, each ratio read by the rule."""
    rows, spec, ref = [], config_runs(data, name, workload), config_runs(data, base, workload)
    for s in spec:
        r = at_level(ref, s["concurrency"])
        a, b = (r or {}).get("normalized_latency_s"), s.get("normalized_latency_s")
        if r is None or not a or not b or not r["output_tok_per_s"]:
            continue
        lat, thr = b / a, s["output_tok_per_s"] / r["output_tok_per_s"]
        rows.append({"concurrency": s["concurrency"], "latency per token with ÷ without": round(lat, 2),
                     "latency per token": change_verdict(lat), "tok/s with ÷ without": round(thr, 2),
                     "throughput": change_verdict(thr)})
    return rows


def attainment_points(data: dict, workload: str, slo) -> dict:
    """Per configuration, (rate, share of requests within `slo`) of its open-loop runs, recomputed from
    each request's figures (so an SLO chosen after the run applies), and DistServe's goodput under it."""
    out = {}
    for c in data.get("configs", []):
        runs = sorted(config_runs(data, c["config"]["name"], workload, open_loop=True), key=lambda r: r["rate"])
        pts = [(r["rate"], attainment(r.get("requests_detail") or [], slo)) for r in runs]
        if pts:
            out[c["config"]["name"]] = {"points": pts, "DistServe goodput req/s": distserve_goodput(pts)}
    return out
