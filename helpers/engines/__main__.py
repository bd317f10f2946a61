"""`python -m helpers.engines [--quick] [--out build/engines/engines.json]`: run every serving
configuration available on this machine (make engines).

`python -m helpers.engines --target http://HOST:8000 --model NAME`: the same workloads and levels against a
server already running elsewhere (a multi-GPU vLLM or SGLang deployment); nothing is started or stopped."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m helpers.engines", description=__doc__)
    p.add_argument("--out", default="build/engines/engines.json", help="where the JSON result goes")
    p.add_argument("--quick", action="store_true", help="fewer requests and levels (a check of the pipeline)")
    p.add_argument("--engines", default="transformers,vllm,sglang", help="comma-separated: transformers, vllm, sglang")
    p.add_argument("--no-guidellm", action="store_true", help="the streaming client only")
    p.add_argument("--workloads", default=None, help="comma-separated workloads of the plan to run (default: all)")
    p.add_argument("--profile", default=None, help="WORKSHOP_PROFILE to use (default: the environment's)")
    p.add_argument("--target", default=None, help="base URL of a running OpenAI-compatible server to measure instead")
    p.add_argument("--model", default=None, help="with --target: the model name the server serves")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="with --target: size the workloads for it")
    a = p.parse_args(argv)
    if a.target:
        if not a.model:
            print("error: --target needs --model (the name the server serves)", file=sys.stderr)
            return 2
        from .bench import run_target, runs_table

        try:
            data = run_target(a.target, a.model, a.out, a.device, a.quick)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(runs_table(data).to_string(index=False))
        print(f"wrote {a.out}")
        return 1 if any(r["run_failed"] for r in data["configs"][0]["runs"]) else 0
    include = tuple(x.strip() for x in a.engines.split(",") if x.strip())
    bad = set(include) - {"transformers", "vllm", "sglang"}
    if bad:
        print(f"error: unknown engine(s) {sorted(bad)}; allowed: transformers, vllm, sglang", file=sys.stderr)
        return 2
    from .bench import plan_for, run_all, runs_table

    wanted = tuple(x.strip() for x in (a.workloads or "").split(",") if x.strip())
    known = set(plan_for("cpu", a.quick).workloads) | set(plan_for("cuda", a.quick).workloads)
    if set(wanted) - known:
        print(f"error: unknown workload(s) {sorted(set(wanted) - known)}; allowed: {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2

    def plan(device: str):
        """The device's plan with only the workloads asked for (gpu_record.sh's dry run: one), or all of
        them when the device's plan has none of those."""
        full = plan_for(device, a.quick)
        keep = {k: v for k, v in full.workloads.items() if k in wanted}
        if keep:
            full.workloads = keep
        elif wanted:
            full.notes.append(f"none of {', '.join(wanted)} in the {device} plan: all of its workloads run")
        return full

    data = run_all(a.profile, a.out, a.quick, include, not a.no_guidellm, plan=plan)
    table = runs_table(data)
    if not table.empty:
        print(table.to_string(index=False))
    for s in data["skipped"]:
        print(f"skipped {s['name']}: {s['why']}")
    faults = [(c["config"]["name"], f["kind"]) for c in data["configs"] for f in c["faults"]]
    for name, kind in faults:
        print(f"fault in {name}: {kind}")
    print(f"wrote {a.out} ({data['seconds']} s)")
    failed = [r for c in data["configs"] for r in c["runs"] if r["run_failed"]]
    return 1 if failed or not data["configs"] or any(not c["runs"] for c in data["configs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
