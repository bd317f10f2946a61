"""A minimal recorded run: notebook 03's key figures measured with torch and transformers alone.

For a GPU machine that lacks the notebook tooling (marimo, nbclient, the Mistral tokenizer), where
`make gpu-record` cannot run the notebooks: measures this device's read bandwidth and bf16 matmul peak
(helpers.measure.microbench), the ridge, and the decode efficiency (helpers.decoding.regimes.efficiency_row) of the
probe, tiny and small sizes and of the full Mistral 7B v0.1 architecture with random weights; writes
workshop/results/<device>/key_figures.json, decode_efficiency.json and meta.json (the same layout as
`make gpu-record`, with no executed notebooks).

    python scripts/record_key_figures.py [--context 1024] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    from helpers.formulas import roofline
    from helpers.decoding import regimes
    from helpers.measure import microbench
    from helpers.measure.hardware import device_info, free_memory
    from helpers.measure.local_models import tiny_model
    from helpers.formulas.specs import load_config

    from cli_common import writable_folder
    from helpers.command import CliError, Parser, bounded_int, fail
    from helpers.formulas.config_schema import MAX_TOKENS

    ap = Parser(prog="python scripts/record_key_figures.py", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--context", type=bounded_int(1, MAX_TOKENS), default=1024)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--big", default="mistral-7b-v0.1", help="preset measured last ('tiny' size to try the script on a CPU)")
    t0 = time.time()
    info = device_info()
    try:                     # bad input stops here, in one line, before anything is measured
        a = ap.parse_args(argv)
        big = regimes.size_config("tiny") if a.big == "tiny" else load_config(a.big)[1]
        slug = re.sub(r"[^a-z0-9]+", "-", info.name.lower().removeprefix("nvidia ")).strip("-")
        out = writable_folder(a.out or ROOT / "workshop" / "results" / slug, "--out")
    except (CliError, ValueError) as exc:
        return fail(str(exc))
    device = info.kind
    dtype = "bf16" if device == "cuda" else "fp32"
    bw = microbench.read_benchmark(device).bandwidth
    peak = microbench.matmul_benchmark(device, dtype).flops_per_s
    rows = []
    for name in ("probe", "tiny", "small"):
        cfg = regimes.size_config(name)
        m = tiny_model(cfg, device, dtype)
        rows.append(regimes.efficiency_row(name, m, cfg, dtype, device, bw, a.context))
        del m
        free_memory(device)
    cfg = big
    m = tiny_model(cfg, device, dtype)
    rows.append(regimes.efficiency_row(f"{a.big} (random weights)", m, cfg, dtype, device, bw, a.context))
    del m
    free_memory(device)
    ridge = roofline.ridge_point(peak, bw)
    figures = {"03_prefill_decode_roofline": {
        "profile": "mistral-7b-random", "device": device, "bandwidth (GB/s)": bw / 1e9,
        "peak matmul (TFLOP/s)": peak / 1e12, "ridge (FLOP/B)": ridge,
        "crossover batch": roofline.crossover_batch(peak, bw, 2 if dtype == "bf16" else 4),
        "decode efficiency (loaded model)": rows[-1]["efficiency"]}}
    from helpers import records

    records.dump(out / "key_figures.json", "key-figures", figures)
    records.dump(out / "decode_efficiency.json", "bench", {"rows": rows})
    from helpers.measure.hardware import MEASURED_ON, measured_on

    meta = {MEASURED_ON: measured_on(device, "mistral-7b-random"), "gpu": info.name, "dtype": dtype,
            "context": a.context, "how": "scripts/record_key_figures.py (no notebook tooling on this machine: key figures only)",
            "notebooks": [], "seconds": round(time.time() - t0, 1)}
    records.dump(out / "meta.json", "record-meta", meta)
    print(json.dumps(figures, indent=1))
    for r in rows:
        print(f"  {r.model}: step {r.step_s * 1e3:.3f} ms, floor {r.floor_s * 1e3:.3f} ms, efficiency {r.efficiency:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
