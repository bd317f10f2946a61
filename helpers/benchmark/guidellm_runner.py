"""guidellm, the established load generator, driven from Python: its figures, and ours on its requests.

    guidellm run --backend kind=openai_http,target=URL,request_format=/v1/completions,max_tokens=32
                 --tokenizer kind=huggingface_auto,model=LOCAL_FOLDER --data kind=json_file,path=PROMPTS.jsonl
                 --profile kind=concurrent --override profile.streams 1,8
                 --constraint kind=max_requests,count=16 --output kind=json,path=OUT.json

The pitfall guarded here: an output length per request makes guidellm send vLLM's `ignore_eos`, which
`transformers serve` answers with 422 — every request fails and guidellm still exits 0. So the length
goes in the backend's `max_tokens`, and a run is read from its request totals. Its definitions
(guidellm/schemas/base/request_stats.py) are those of `metrics`; its mean ITL is weighted by tokens.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Sequence

from ..serving.traces import TraceRequest
from .agreement import OURS
from .metrics import RequestRecord, RunSummary, SLO, summarize
from .process import run_tool



class GuidellmError(RuntimeError):
    pass


def guidellm_bin() -> str | None:
    here = Path(sys.executable).parent / "guidellm"
    return str(here) if here.exists() else shutil.which("guidellm")


def write_prompts(requests: Sequence[TraceRequest], path: str | Path) -> Path:
    """The prompts as JSON lines, nothing else: an output-length column would make guidellm send `ignore_eos`."""
    path = Path(path)
    path.write_text("".join(json.dumps({"prompt": r.prompt}) + "\n" for r in requests))
    return path


def command(base_url: str, tokenizer: str | Path, data: str | Path, max_tokens: int, streams: Sequence[int],
            count: int, out_json: str | Path, request_format: str = "/v1/completions") -> list[str]:
    exe = guidellm_bin()
    if exe is None:
        raise GuidellmError("guidellm is not installed: pip install guidellm (keep the CPU torch: -c constraints)")
    return [exe, "run",
            "--backend", f"kind=openai_http,target={base_url},request_format={request_format},max_tokens={int(max_tokens)}",
            "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
            "--data", f"kind=json_file,path={data}",
            "--profile", "kind=concurrent", "--override", "profile.streams", ",".join(str(int(s)) for s in streams),
            "--constraint", f"kind=max_requests,count={int(count)}",
            "--output", f"kind=json,path={out_json}"]


NO_COUNT = "no token count"


def records(benchmark: dict) -> list[RequestRecord]:
    """guidellm's per-request timestamps as RequestRecords (first and last token, count); one it counted
    successful without a token count keeps NO_COUNT (its ITL cannot be known)."""
    out = []
    reqs = benchmark.get("requests", {})
    for kind in ("successful", "errored", "incomplete"):
        for r in reqs.get(kind) or []:
            t = (r.get("info") or {}).get("timings") or {}
            start = t.get("request_start")
            if start is None:
                continue
            first, last = t.get("first_token_iteration"), t.get("last_token_iteration")
            n = ((r.get("output_metrics") or {}).get("text_tokens")) or 0
            rec = RequestRecord(rid=len(out), sent_s=start, end_s=t.get("request_end") or last,
                                token_times=[x for x in (first, last) if x is not None][: max(1, min(n, 2))],
                                output_tokens=int(n))
            if kind != "successful":
                err = str((r.get("info") or {}).get("error") or kind)
                rec.error, rec.detail = ("http " + err.split()[0] if err[:3].isdigit() else kind), err[:300]
            elif not n:
                rec.error, rec.detail = NO_COUNT, "guidellm counted it successful, but the server reported no usage"
            out.append(rec)
    return out


def _stat(metric: dict, prefix: str, scale: float) -> dict:
    s = (metric or {}).get("successful") or {}
    p = s.get("percentiles") or {}
    val = lambda v: None if v is None or not s.get("count") else v * scale  # noqa: E731
    return {f"{prefix}_mean": val(s.get("mean")), f"{prefix}_median": val(s.get("median")),
            f"{prefix}_p90": val(p.get("p90")), f"{prefix}_p99": val(p.get("p99"))}


def reported(benchmark: dict, label: str, slo: SLO | None = None) -> RunSummary:
    m = benchmark["metrics"]
    totals = m["request_totals"]
    duration = float(benchmark.get("duration") or 0) or 1e-9
    out_tokens = int(((m.get("output_token_count") or {}).get("successful") or {}).get("total_sum") or 0)
    streams = (benchmark.get("config", {}).get("strategy") or {}).get("streams") or \
        (benchmark.get("config", {}).get("strategy") or {}).get("max_concurrency") or 0
    recs = records(benchmark)
    total = int(totals.get("total", len(recs)))
    # ok, failed and errors from one source, the per-request records, so that they add up; requests
    # guidellm counted but left out of its per-request sample keep its own verdict
    unsampled_ok = max(0, int(totals.get("successful", 0)) - sum(1 for r in recs if r.error in (None, NO_COUNT)))
    good = sum(r.ok for r in recs) + unsampled_ok
    errors: dict = {}
    for r in recs:
        if not r.ok:
            errors[r.error or "failed"] = errors.get(r.error or "failed", 0) + 1
    if total - len(recs) - unsampled_ok > 0:
        errors["failed (not in guidellm's sample)"] = total - len(recs) - unsampled_ok
    # goodput needs every request's TTFT and TPOT: unknown when a count is missing or a request unsampled
    judged = not errors.get(NO_COUNT) and len(recs) == total
    goodput = sum(r.meets(slo) for r in recs) / duration if slo is not None and judged else None
    return RunSummary(label, int(streams), total, good, total - good, errors, duration, out_tokens,
                      out_tokens / duration, good / duration, goodput, slo.describe() if slo else None,
                      _stat(m.get("time_to_first_token_ms"), "ttft", 1e-3),
                      _stat(m.get("inter_token_latency_ms"), "itl", 1e-3),
                      _stat(m.get("request_latency"), "e2e", 1.0), source="guidellm")


def run(base_url: str, tokenizer: str | Path, requests: Sequence[TraceRequest], streams: Sequence[int],
        out_dir: str | Path, label: str = "", slo: SLO | None = None, timeout_s: float = 600.0,
        cpus: set[int] | None = None) -> tuple[list[RunSummary], list[RunSummary], dict]:
    """guidellm on a workload of one output length, at each concurrency of `streams`: (its figures per
    level, ours on its requests, its JSON)."""
    lengths = {r.max_new_tokens for r in requests}
    if len(lengths) != 1:
        raise ValueError(f"guidellm takes one output length (max_tokens) per run; this workload has {sorted(lengths)}. "
                         "Use a trace with one output length (chat_trace(..., sigma=0)).")
    out_dir = Path(out_dir).resolve()   # guidellm runs in out_dir: every path it gets is absolute
    out_dir.mkdir(parents=True, exist_ok=True)
    data = write_prompts(requests, out_dir / "prompts.jsonl")
    out_json = out_dir / "guidellm.json"
    out_json.unlink(missing_ok=True)
    cmd = command(base_url, tokenizer, data, lengths.pop(), streams, len(requests), out_json)
    env = dict(os.environ, HF_HUB_OFFLINE="1", GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL="ERROR")
    t0 = time.perf_counter()
    code = run_tool(cmd, out_dir / "guidellm.log", timeout_s, env, cwd=out_dir, cpus=cpus)   # its workers end with it
    if code is None:
        raise GuidellmError(f"guidellm did not finish within {timeout_s:g} s")
    if code != 0 or not out_json.exists():
        log = (out_dir / "guidellm.log").read_text(errors="replace")
        raise GuidellmError(f"guidellm exited with {code} after {time.perf_counter() - t0:.0f} s and wrote "
                            f"no results. End of its output:\n{log[-2000:]}")
    raw = json.loads(out_json.read_text())
    theirs = [reported(b, label, slo) for b in raw.get("benchmarks", [])]
    ours = [summarize(recs, label, g.concurrency, slo) for g, b in zip(theirs, raw.get("benchmarks", []))
            if (recs := records(b))]
    for s in ours:
        s.source = OURS
    return theirs, ours, raw
