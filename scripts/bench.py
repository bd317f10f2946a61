"""`make bench`: measured figures as JSON under build/bench/ — one file per section, each with where and
with what it was measured (helpers.measure.hardware.measured_on, under "measured_on"). Not a pass/fail
test: it prints what it measured.

    python scripts/bench.py                 # every section, on the active WORKSHOP_PROFILE
    python scripts/bench.py roofline        # only some sections
    python scripts/bench.py --out DIR       # somewhere else than build/bench

To add a section: write a function in a measuring module of helpers that returns a dict of plain numbers and
strings, and add one line to SECTIONS below. Its JSON lands in build/bench/<name>.json.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cli_common import writable_folder  # noqa: E402
from helpers.command import CliError, Parser, fail  # noqa: E402

from helpers import records  # noqa: E402 - after the checkout is on the path


def _roofline() -> dict:
    import roofline_bench

    return roofline_bench.roofline_figures()


def _capacity() -> dict:
    """The planner's predicted decode step for the active profile on this device, the measured step, and
    their ratio (measured ÷ predicted): helpers.capacity.measured.predict_vs_measure."""
    from helpers.capacity.measured import predict_vs_measure
    from helpers.measure.models import load

    r = predict_vs_measure(load())
    return {"profile": r["profile"], "label": r["label"], "device": r["device"], "dtype": r["dtype"],
            "batch": r["batch"], "prompt_tokens": r["prompt_tokens"],
            "bandwidth_gbs": r["bandwidth"] / 1e9, "bandwidth_source": r["bandwidth_source"],
            "predicted_step_ms": r["predicted_step_s"] * 1e3, "predicted_step_bytes": r["step_bytes"],
            "mean_cached_tokens": r["mean_cached_tokens"], "measured_step_ms": r["measured_step_s"] * 1e3,
            "ratio_measured_over_predicted": r["ratio"]}


def _hierarchy() -> dict:
    """This CPU's data caches and the measured read bandwidth per working set and per level found (one core)."""
    from dataclasses import asdict

    from helpers.measure import hierarchy

    caches = hierarchy.data_caches()
    rows = hierarchy.staircase(hierarchy.staircase_sizes(caches), repeats=3, bytes_per_sample=64 * 2**20, levels=caches)
    return {"caches": [{"level": c.name, "bytes": c.size_bytes, "shared_by": c.shared_by} for c in caches],
            "staircase": [asdict(r) for r in rows], "levels": [asdict(v) for v in hierarchy.levels_found(rows, caches)],
            "definitions": {"read_bandwidth": "bytes/s: bytes summed ÷ seconds, float32 sum re-reading one buffer, "
                                              "best of repeats, one CPU thread",
                            "levels": "runs of the curve between falls past the change margin (hierarchy.levels_found)"}}


def _attention() -> dict:
    """Naive attention against PyTorch's fused SDPA on this device (medians). CPU: 8 heads × 32, fp32,
    256 … 2,048 tokens, one thread; CUDA: Mistral's 32 × 128 in bf16, 1k … 16k."""
    from helpers.formulas.flash import AttentionShape
    from helpers.measure.attention_kernels import time_attention
    from helpers.measure.hardware import pick_device

    dev = pick_device()
    gpu = dev.startswith("cuda")
    shape = AttentionShape(1, 32, 128, "bf16") if gpu else AttentionShape(1, 8, 32, "fp32")
    lengths = [1024 * 2**k for k in range(5)] if gpu else [256, 512, 1024, 2048]
    result = time_attention(lengths, shape, dev, causal=True, repeats=5)
    return {"device": dev, "shape": {"batch": shape.batch, "heads": shape.heads, "head_dim": shape.head_dim,
                                     "dtype": shape.dtype, "causal": True},
            "rows": result.to_dict("records"), "oom_at": result.attrs.get("oom_at"),
            "definitions": {"naive_over_sdpa": "median seconds of the materialised version ÷ the fused kernel's"}}


def _serving() -> dict:
    import serving_bench

    return serving_bench.bench_serving()


def _training() -> dict:
    """`make bench` section "training": the recipe trained from scratch into a temporary folder (the
    cache is left alone) and timed — wall and CPU seconds, tokens per second, against the 3-minute
    budget — with the held-out perplexity before (the random start) and after."""
    import tempfile

    import torch

    from helpers.measure.local_models import TINY_CONFIG
    from helpers.measure.training import RECIPE, train

    with tempfile.TemporaryDirectory(prefix="tiny-trained-bench-") as tmp:
        rec = train(Path(tmp), dict(TINY_CONFIG), dict(RECIPE), progress=False)
    budget = 180.0   # issue #11: under 3 minutes on 2 CPU cores
    return {"recipe": RECIPE, "torch_threads": torch.get_num_threads(), "tokens_seen": rec["tokens_seen"],
            "train_wall_s": rec["train_wall_s"], "train_cpu_s": rec["train_cpu_s"],
            "tokens_per_s": rec["tokens_seen"] / rec["train_wall_s"], "budget_s": budget,
            "within_budget": rec["train_wall_s"] <= budget,
            "heldout_perplexity_random": math.exp(rec["heldout_loss_before"]),
            "heldout_perplexity_trained": math.exp(rec["heldout_loss_after"]),
            "definitions": {"train_wall_s": "the training loop alone (no model build, no save), perf_counter",
                            "train_cpu_s": "process CPU time of the loop, all threads (spin-waiting threads count too)",
                            "heldout_perplexity_*": "exp(mean NLL) on helpers.measure.quality.heldout_eval_text(), before and after"}}


# name -> a function returning a dict; each is written to <out>/<name>.json with measured_on added.
SECTIONS: dict[str, Callable[[], dict]] = {
    "roofline": _roofline,
    "capacity": _capacity,
    "hierarchy": _hierarchy,
    "attention": _attention,
    "serving": _serving,
    "training": _training,
}


def _plain(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python numbers, NaN/inf to null, tuples to lists."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _release() -> None:
    """Give back what a section loaded before the next one loads its own model: a transformers model
    sits in reference cycles, so without a collection a 7B model (14.5 GB) would still hold the GPU
    while the next section loads another."""
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def run(names: list[str], out: Path) -> int:
    import machine as machines

    from helpers import env
    from helpers.measure.hardware import MEASURED_ON, measured_on

    out.mkdir(parents=True, exist_ok=True)
    where = measured_on(profile=env.text("WORKSHOP_PROFILE"))   # one for every section: the same run
    failed = 0
    for name in names:
        t0 = time.perf_counter()
        with machines.PeakMemory() as mem:
            try:
                data = {"section": name, "ok": True, **SECTIONS[name]()}
            except Exception as exc:  # noqa: BLE001 - a failed section is written down, the others still run
                failed += 1
                data = {"section": name, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc()[-4000:]}
        data["seconds"] = time.perf_counter() - t0
        data["peak_rss_bytes"], data["peak_rss_method"] = mem.peak_bytes, mem.method   # this section's, see PeakMemory
        data[MEASURED_ON] = where
        _release()
        path = out / f"{name}.json"
        records.dump(path, "bench", _plain(data))
        print(f"bench: {name} {'ok' if data['ok'] else 'FAILED'} in {data['seconds']:.1f} s -> {path}", flush=True)
        if data["ok"]:
            headline = {k: v for k, v in data.items() if isinstance(v, (int, float, str)) and k != "section"}
            print(json.dumps(_plain(headline), indent=1))
        else:
            print(data["error"], file=sys.stderr)
    return 1 if failed else 0


def main() -> int:
    ap = Parser(prog="python scripts/bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sections", nargs="*", help=f"sections to run (default all): {', '.join(SECTIONS)}")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "bench", help="output folder (default build/bench)")
    try:
        a = ap.parse_args()
        unknown = [s for s in a.sections if s not in SECTIONS]
        if unknown:
            raise ValueError(f"unknown section(s) {', '.join(unknown)}; allowed: {', '.join(SECTIONS)}")
        writable_folder(a.out, "--out")
    except (CliError, ValueError) as exc:       # one line, exit 2, before any section runs
        return fail(str(exc))
    return run(a.sections or list(SECTIONS), a.out)


if __name__ == "__main__":
    sys.exit(main())
