"""Generate the deck's data and figures from helpers (no number is typed here).

    python slides/figures.py                      # build/slides/numbers.json + build/slides/figures/*.png
    python slides/figures.py --readme PATH.png    # also the README's figure (committed)

numbers.json holds every key figure of scripts/keyfigures.py: {name: {value, text, source}}; the deck's
{{name}} placeholders are filled from it by slides/build.py, and tests/test_slides.py checks each
number in the built deck against it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # the key figures sit beside the make targets that use them
OUT = ROOT / "build" / "slides"

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from cli_common import fail_lines, writable_folder  # noqa: E402  (scripts/cli_common.py)
from helpers.command import CliError, Parser, classify, fail  # noqa: E402
import keyfigures as kf  # noqa: E402  (scripts/keyfigures.py)
from helpers.present import plots  # noqa: E402
from helpers.formulas.units import GB  # noqa: E402

COMPUTED, REPORTED, LIMIT = "tab:blue", "tab:gray", "tab:red"   # one colour per meaning
PNG = {"metadata": {"Software": None}, "dpi": 110}               # byte-stable output


def numbers() -> dict:
    return {k: f.to_dict() for k, f in kf.all_figures().items()}


def kv_context_users():
    """KV cache bytes against context for a few user counts (helpers.formulas.memory), and the room an
    H100's memory leaves after the weights (helpers.capacity.plan)."""
    from helpers.capacity import plan
    from helpers.formulas.memory import kv_cache_bytes

    contexts = [2 ** i for i in range(9, 18)]
    fig, ax = plots.figure(width=7, height=4)
    for users in (1, 8, 80):
        ax.plot(contexts, [kv_cache_bytes(kf.FULL_ATTENTION, c, users) / GB for c in contexts], marker="o",
                label=f"{users} user{'s' if users > 1 else ''}")
    p = plan(kf.MODEL, kf.GPU, context=kf.CONTEXT)
    ax.axhline(p.kv_budget_bytes_per_gpu / GB, color=LIMIT, ls="--",
               label=f"KV room on one {p.gpu} after bf16 weights and overhead")
    ax.set(xscale="log", yscale="log", xlabel="context (tokens per user)", ylabel="KV cache (GB, 10⁹ B)",
           title="Mistral 7B KV cache: context × users (bf16, full attention)")
    ax.set_xticks(contexts, [f"{c // 1024}k" if c >= 1024 else str(c) for c in contexts])
    ax.legend(fontsize=8)
    return plots.finish(fig, f"computed: helpers.formulas.memory.kv_cache_bytes('{kf.FULL_ATTENTION}'), bf16; "
                             f"room from helpers.capacity.plan on {p.gpu}")


def roofline():
    """The talk GPU's roofline with decode (batch 1, 4, 16, 64) and prefill at the talk's context."""
    from helpers.formulas.gpus import get_gpu
    from helpers.formulas.roofline import attainable_flops
    from helpers.formulas.stepcost import forward_cost

    g = get_gpu(kf.GPU)
    peak, _ = g.peak_flops("bf16")
    xs = [2 ** (i / 4) for i in range(-8, 60)]
    fig, ax = plots.figure(width=7, height=4)
    ax.plot(xs, [attainable_flops(x, peak, g.bandwidth) / 1e12 for x in xs], color="black", label=f"{g.name} roof")
    for b in (1, 4, 16, 64):
        x = forward_cost(kf.MODEL, 1, kf.CONTEXT - 1, b).intensity
        ax.scatter([x], [attainable_flops(x, peak, g.bandwidth) / 1e12], color=COMPUTED, zorder=3)
        ax.annotate(f"decode, batch {b}", (x, attainable_flops(x, peak, g.bandwidth) / 1e12), fontsize=8,
                    xytext=(4, -10), textcoords="offset points")
    x = forward_cost(kf.MODEL, kf.CONTEXT).intensity
    ax.scatter([x], [attainable_flops(x, peak, g.bandwidth) / 1e12], color=LIMIT, zorder=3)
    ax.annotate(f"prefill, {kf.CONTEXT:,} tokens", (x, peak / 1e12), fontsize=8, xytext=(-60, -14), textcoords="offset points")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte)", ylabel="attainable TFLOP/s",
           title=f"Roofline of one {g.name}: Mistral 7B decode and prefill (bf16)")
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, f"computed: helpers.formulas.stepcost (forward FLOPs and bytes of {kf.MODEL}, bf16); "
                             f"{g.name} datasheet (helpers/data/gpus.csv)")


def quantization():
    """Weight bytes under each scheme (helpers.formulas.memory.weight_bytes), against one H100's memory as CUDA
    reports it (its 80 GB label beside it)."""
    from helpers.formulas.gpus import get_gpu
    from helpers.formulas.memory import weight_bytes

    bars = [(f"Mistral 7B {s}", weight_bytes(kf.MODEL, s).bytes) for s in ("bf16", "int8", "nf4")]
    bars += [(f"GPT-OSS-120B {s}", weight_bytes("gpt-oss-120b", s).bytes) for s in ("bf16", "fp8", "mxfp4")]
    fig, ax = plots.figure(width=7, height=4)
    ax.barh([b[0] for b in bars][::-1], [b[1] / GB for b in bars][::-1], color=COMPUTED)
    g = get_gpu(kf.GPU)
    ax.axvline(g.usable_memory_bytes / GB, color=LIMIT, ls="--",
               label=f"one {g.name}: {g.usable_memory_bytes / GB:,.2f} GB as CUDA reports it (labelled {g.memory_gb:g} GB)")
    ax.set(xlabel="weights (GB, 10⁹ B), scales included", title="Weight bytes under quantization")
    ax.legend(fontsize=8)
    return plots.finish(fig, "computed: helpers.formulas.memory.weight_bytes (bitsandbytes int8/nf4 on nn.Linear; fp8 per "
                             "tensor; mxfp4 on experts), bf16 elsewhere")


def mla():
    """MLA's bytes per token against named baselines (helpers.formulas.attention.mla_ratios)."""
    from helpers.formulas.attention import mla_ratios

    rows = mla_ratios("deepseek-v3", kf.MODEL)
    labels = ["DeepSeek V3 MLA", "MHA, same model", "MHA, real head sizes", "Mistral 7B GQA"]
    fig, ax = plots.figure(width=7, height=3.6)
    ax.barh(labels[::-1], [r.bytes_per_token / 1024 for r in rows][::-1], color=COMPUTED)
    for i, r in enumerate(rows[::-1]):
        ax.annotate(f"{r.baseline_over_mla:,.1f}× MLA", (r.bytes_per_token / 1024, i), fontsize=8,
                    xytext=(4, -3), textcoords="offset points")
    ax.set(xscale="log", xlabel="KV cache per token (KiB, 2¹⁰ B), bf16", title="MLA's cache against named baselines")
    return plots.finish(fig, "computed: helpers.formulas.attention.mla_ratios('deepseek-v3', 'mistral-7b-v0.1'), bf16")


def serving():
    """The talk's reported serving benchmark (tokens/s), baseline concurrency marked."""
    from helpers.benchmark.guide import TALK_CSV, talk_rows

    rows = talk_rows().to_dict("records")
    fig, ax = plots.figure(width=7, height=3.6)
    labels = [f"{r['configuration']} ({r['concurrency']} at once)" for r in rows]
    ax.barh(labels[::-1], [float(r["tok_s"]) for r in rows][::-1], color=REPORTED)
    ax.set(xlabel="output tokens per second", title="Serving benchmark as the talk reported it (one H100)")
    return plots.finish(fig, f"reported by the presenters, not measured here: helpers/data/{TALK_CSV.name}")


FIGURES = {"kv_context_users": kv_context_users, "roofline": roofline, "quantization": quantization,
           "mla": mla, "serving": serving}


def main(argv=None) -> int:
    ap = Parser(prog="python slides/figures.py", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--readme", type=Path, help="also write the README's figure (kv_context_users) here")
    try:
        a = ap.parse_args(argv)
        figures = writable_folder(writable_folder(a.out, "--out") / "figures", "--out's figures folder")
        if a.readme:
            writable_folder(a.readme.parent, "--readme's folder")
        data = numbers()                   # reads workshop/agenda.toml first: a bad one is its lines, exit 2
        (a.out / "numbers.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        for name, make in FIGURES.items():
            fig = make()
            fig.savefig(figures / f"{name}.png", **PNG)
            if a.readme and name == "kv_context_users":
                fig.savefig(a.readme, **PNG)
    except (CliError, ValueError) as exc:  # bad input: one line per violation
        return fail_lines(str(exc))
    except OSError as exc:                 # the disk: full, or a file where a figure goes
        return fail(*classify(exc))
    print(f"slides: {len(FIGURES)} figures and numbers.json in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
