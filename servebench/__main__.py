"""The benchmark's command line.

    python -m servebench list                  # the configurations this machine can run (JSON)
    python -m servebench run [--out FILE]      # notebook 08's live run (plan live) -> build/engines/live.json
    python -m servebench record [--out FILE] [--plan P | --quick] [--engines a,b] [--target URL --model NAME]
                                               # make engines (plan record; gpu on a GPU) -> build/engines/engines.json

Ctrl-C (SIGINT, SIGTERM, SIGHUP, or the parent going away) ends every server within seconds and keeps the
runs that finished. Exit codes: 0 every configuration measured; 1 a fault; 2 bad input (one line); 130 interrupted.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from helpers import records
from helpers.command import CliError, Parser, bounded_float

from . import harness, process, servers


def parse(argv):
    p = Parser(prog="python -m servebench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub.add_parser("list", help="the configurations this machine can run, and why not the others (JSON)")
    for name, plan, out in (("run", "live", "build/engines/live.json"), ("record", None, "build/engines/engines.json")):
        s = sub.add_parser(name, help=f"measure (plan {plan or 'record, or gpu on a GPU'}) and write the record")
        s.add_argument("--plan", choices=sorted(harness.PLANS), default=plan)
        s.add_argument("--quick", action="store_true", help="plan quick (gpu-quick on a GPU)")
        s.add_argument("--out", default=out)
        s.add_argument("--engines", default=",".join(servers.ENGINES), help="comma-separated: " + ", ".join(servers.ENGINES))
        s.add_argument("--profile", default=None, help="WORKSHOP_PROFILE to serve (default: the environment's)")
        s.add_argument("--client-only", "--no-guidellm", action="store_true", help="our client only, no guidellm")
        s.add_argument("--deadline-s", type=bounded_float(0, 86400), default=None, help="one configuration's run at most")
        s.add_argument("--target", default=None, help="the URL of a server running elsewhere, measured instead")
        s.add_argument("--model", default=None, help="with --target: the model name it serves")
    return p.parse_args(argv)


def plan_of(a) -> harness.Plan:
    cuda = servers._cuda()
    plan = harness.PLANS[("gpu-quick" if cuda else "quick") if a.quick else a.plan or ("gpu" if cuda else "record")]
    plan = dataclasses.replace(plan, **({"client": None, "guidellm": ()} if a.client_only else {}))
    return dataclasses.replace(plan, deadline_s=a.deadline_s or plan.deadline_s)


def check(a) -> tuple[str, ...]:
    """Bad input refused before anything runs (ValueError: one line, exit 2)."""
    from helpers.measure.models import resolve_profile

    out = Path(a.out)
    if out.is_dir():
        raise ValueError(f"--out {a.out!r} is a folder; give a file such as build/engines/engines.json")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_name(f".{out.name}.probe").touch()
        out.with_name(f".{out.name}.probe").unlink()
    except OSError as exc:
        raise ValueError(f"cannot write the record to {a.out!r}: {exc.strerror or exc}") from None
    if (a.target is None) != (a.model is None) or not (a.target or "http://").startswith(("http://", "https://")):
        raise ValueError(f"--target http(s)://HOST:PORT and --model NAME go together (a server running elsewhere and "
                         f"the model it serves), got --target {a.target!r} --model {a.model!r}")
    resolve_profile(a.profile)
    include = tuple(x.strip() for x in a.engines.split(",") if x.strip())
    if not include or set(include) - set(servers.ENGINES):
        raise ValueError(f"unknown engine(s) in {a.engines!r}; allowed: {', '.join(servers.ENGINES)}")
    return include


def main(argv=None) -> int:
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
        if a.command == "list":
            configs, skipped = servers.available()
            print(json.dumps({"configs": [c.to_dict() for c in configs], "skipped": skipped}))
            return 0
        include, plan, out = check(a), plan_of(a), Path(a.out)
    except SystemExit as exc:        # --help
        return exc.code
    except (CliError, ValueError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    state: dict = {}

    def interrupted():               # Ctrl-C: what finished stays, marked
        if state.get("data") is not None:
            state["data"]["interrupted"] = True
            harness.finish(state["data"], state["t0"])
            records.dump(out, "engines", state["data"])
        print(f"interrupted: the runs that finished are in {out}", file=sys.stderr)
    process.on_signals(interrupted)
    try:
        data = harness.measure(plan, out, a.profile, include, state, (a.target, a.model) if a.target else None)
    except (OSError, RuntimeError, ValueError) as exc:    # the environment: a disk, a library, a profile unavailable
        print(f"error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    from helpers.benchmark.records import levels_table

    table = levels_table(data)
    if not table.empty:
        print(table.to_string(index=False))
    for s in data["skipped"]:
        print(f"skipped {s['name']}: {s['why']}")
    for c in data["configs"]:
        for f in c["faults"]:
            print(f"fault in {c['config']['name']}: {f['kind']}: {str(f['detail']).splitlines()[0][:200]}")
    print(f"wrote {out} ({data['seconds']} s; others used at most {data['others_max']} of the cores: "
          f"{'idle' if data['idle'] else 'not idle'})")
    measured = [c for c in data["configs"] if any(any(r["requests_detail"] or []) for r in c["runs"])]
    return 0 if data["configs"] and len(measured) == len(data["configs"]) and not any(
        c["faults"] for c in data["configs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
