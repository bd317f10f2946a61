"""guidellm, the established load generator, on the same requests: every level and rate, repeated, in one
invocation for the closed loop and one for the open loop; its per-request times are the record's rows (read
by helpers.benchmark.metrics, like our client's). It gets one output length as its backend's `max_tokens`:
a length per request makes it send vLLM's `ignore_eos` (guidellm/backends/openai/request_handlers.py),
which `transformers serve` refuses with 422 (transformers/cli/serving/utils.py, _validate_request).
`vllm bench serve` would measure vLLM only: it sends `repetition_penalty`, which `transformers serve` refuses.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from . import harness, process


class ToolError(RuntimeError):
    """A load generator that failed: its exit code and the end of its output."""


def guidellm_bin() -> str | None:
    here = Path(sys.executable).parent / "guidellm"
    return str(here) if here.exists() else shutil.which("guidellm")


def guidellm_command(base_url: str, tokenizer: str, data: Path, max_tokens: int, profile: str, values: list,
                     count: int, out: Path) -> list[str]:
    """guidellm on our prompts at each of `values` (streams, or Poisson rates: its seed is fixed, 42)."""
    exe = guidellm_bin()
    if exe is None:
        raise ToolError("guidellm is not installed: pip install guidellm (keep the CPU torch: -c constraints)")
    return [exe, "run", "--backend", f"kind=openai_http,target={base_url},request_format=/v1/completions,"
                                     f"max_tokens={int(max_tokens)}",
            "--tokenizer", f"kind=huggingface_auto,model={tokenizer}", "--data", f"kind=json_file,path={data}",
            "--profile", f"kind={profile}", "--override", "profile.streams" if profile == "concurrent" else
            "profile.rate", ",".join(f"{v:g}" for v in values),
            "--constraint", f"kind=max_requests,count={int(count)}", "--output", f"kind=json,path={out}",
            "--disable-console"]


def guidellm_runs(report: dict, rates: list) -> list[dict]:
    """Each benchmark of guidellm's JSON report as a run: its requests' times by our definitions."""
    out = []
    for b, (c, rate, repeat) in zip(report.get("benchmarks", []), rates):
        rows, sends, errors = [], [], {}
        for kind in ("successful", "errored", "incomplete"):
            for r in (b.get("requests") or {}).get(kind) or []:
                t = (r.get("info") or {}).get("timings") or {}
                n = int(((r.get("output_metrics") or {}).get("text_tokens")) or 0)
                start, first, last, end = (t.get(k) for k in ("request_start", "first_token_iteration",
                                                              "last_token_iteration", "request_end"))
                if start is None:
                    continue
                sends.append(start)
                if kind != "successful" or first is None or not n:
                    k = kind if kind != "successful" else "no token count"
                    errors[k] = errors.get(k, 0) + 1
                    rows.append(None)
                    continue
                rows.append([first - start, (last - first) / (n - 1) if n > 1 else None, (end or last) - start, n])
        out.append(harness.run_entry("guidellm", "chat", rows, float(b.get("duration") or 0.0), sends or [0.0], "",
                                     repeat, {}, c, rate, errors))
    return out


def guidellm(base_url: str, model: str, requests: list[dict], plan: "harness.Plan", work: Path,
             cpus: set[int] | None, timeout_s: float, add) -> None:
    """The plan's chat levels and rates, each `plan.repeats` times, by guidellm: `add(run)` as each invocation
    ends (a ToolError for one that fails keeps those before it). The model's name is the folder (or Hub id)
    guidellm reads its tokenizer from."""
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    # the prompts alone: an output-length column would make guidellm send ignore_eos
    (work / "data.jsonl").write_text("".join(json.dumps({"prompt": r["prompt"]}) + "\n" for r in requests))
    env = dict(os.environ, HF_HUB_OFFLINE="1", GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL="ERROR")
    for profile, values in (("concurrent", plan.concurrencies), ("poisson", plan.rates)):
        levels, out, log = [v for _ in range(plan.repeats) for v in values], work / f"{profile}.json", work / "log"
        if not levels:
            continue
        out.unlink(missing_ok=True)
        with harness.Load() as load:
            code = process.run_tool(guidellm_command(base_url, model, work / "data.jsonl", requests[0]["max_tokens"],
                                                     profile, levels, len(requests), out), log, timeout_s, env, work, cpus)
        if code != 0 or not out.exists():
            raise ToolError(f"guidellm exited with {code} and wrote no report. End of its output:\n"
                            f"{log.read_text(errors='replace')[-2000:]}")
        keys = [((v, None) if profile == "concurrent" else (None, v)) + (i // len(values),) for i, v in enumerate(levels)]
        for r in guidellm_runs(json.loads(out.read_text()), keys):
            add(dict(r, **load.note))
