"""`python -m helpers.benchmark [--quick] [--out build/engines/engines.json]`: run every serving
configuration available on this machine (make engines).

`python -m helpers.benchmark --target http://HOST:8000 --model NAME`: the same workloads and levels against a
server already running elsewhere (a multi-GPU vLLM or SGLang deployment); nothing is started or stopped.

The result is written after every level; Ctrl-C keeps the levels that finished. Exit codes: 0 every run
had successes; 1 a fault of the environment or a run in which every request failed; 2 bad input (one
line, `error: …`); 130 interrupted."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from .. import checks

ENGINES = ("transformers", "readable", "vllm", "sglang")
# (option, its argparse dest): the options that mean something only with --target, and only without it
TARGET_ONLY = (("--model", "model"), ("--device", "device"))
LOCAL_ONLY = (("--engines", "engines"), ("--workloads", "workloads"), ("--profile", "profile"),
              ("--no-guidellm", "no_guidellm"), ("--notebook", "notebook"), ("--list", "list"))


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as the workshop's other command lines
        self.exit(2, f"error: {message}\n")


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
    p = _Parser(prog="python -m helpers.benchmark", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="build/engines/engines.json", help="where the JSON result goes")
    p.add_argument("--quick", action="store_true", help="fewer requests and levels (a check of the pipeline)")
    p.add_argument("--notebook", action="store_true", help="notebook 08's short live run (plans.notebook_plan)")
    p.add_argument("--list", action="store_true", help="print what this machine can run, and why not the rest, as JSON")
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
    from ..measure.models import resolve_profile
    from .client import check_base_url

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
        check_base_url(a.target)
        if not (a.model or "").strip():
            raise ValueError("--target needs --model (the name the server serves)")
        return ()
    resolve_profile(a.profile)
    include = ENGINES if a.engines is None else tuple(x.strip() for x in a.engines.split(",") if x.strip())
    bad = sorted(set(include) - set(ENGINES))
    if bad or not include:
        raise ValueError(f"unknown engine(s) {bad or [a.engines]}; allowed: {', '.join(ENGINES)}")
    from .plans import plan_for

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
    from .plans import notebook_plan, plan_for

    if a.notebook:
        return notebook_plan
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
    except SystemExit as exc:       # --help (0) or a bad argument (2, its line printed): a code, as below
        return exc.code
    try:
        include = _check(a)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.list:
        import json

        from .servers import available

        configs, skipped = available(a.profile, include)
        print(json.dumps({"configs": [c.to_dict() for c in configs], "skipped": skipped}))
        return 0
    from .harness import run_all, run_target
    from .records import runs_table

    try:
        if a.target is not None:
            data = run_target(a.target, a.model, a.out, a.device or "cuda", a.quick, deadline_s=a.deadline_s)
        else:
            data = run_all(a.profile, a.out, a.quick, include, not a.no_guidellm, plan=_plan(a), deadline_s=a.deadline_s)
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


if __name__ == "__main__":
    sys.exit(main())
