"""Commands `capacity` and `gpus` of ``python -m helpers``.

    python -m helpers capacity --model M --gpu G [--gpus N] [--dtype D] [--kv-dtype D] --context C
                               (--batch B | --slo-ms S) [--prompt P] [--json]
    python -m helpers capacity --model M --gpu all ...   # every catalogued GPU, cheapest first
    python -m helpers gpus [--json]

Bad input (unknown GPU, context beyond the model, zero or negative numbers, a model that fits no
catalogued GPU at that count) prints one line and exits 2.
"""
from __future__ import annotations

from ..cli import command, dtype_type, positive_float, positive_int, table


def _register(name: str, help_: str, add_args, render, run) -> None:
    command(name, help_, add_args, render)(run)


def _money(x) -> str:
    return "-" if x is None else f"${x:,.3f}"


def _num(x, fmt: str = "{:,.2f}") -> str:
    return "-" if x is None else fmt.format(x)


# ------------------------------------------------------------------ capacity

def _capacity_args(p) -> None:
    from ..memory import KV_DTYPES, WEIGHT_SCHEMES

    p.add_argument("--model", required=True, help="preset name or path to a config.json")
    p.add_argument("--gpu", required=True,
                   help="a catalogued GPU (see `python -m helpers gpus`), or 'all' to rank every GPU")
    p.add_argument("--gpus", type=positive_int, default=1, help="GPUs in tensor parallel (default 1)")
    p.add_argument("--dtype", default="bf16", type=dtype_type(WEIGHT_SCHEMES),
                   help=f"weight dtype or quantization scheme: {', '.join(WEIGHT_SCHEMES)}")
    p.add_argument("--kv-dtype", default="bf16", type=dtype_type(KV_DTYPES),
                   help=f"KV-cache element type: {', '.join(KV_DTYPES)} (default bf16)")
    p.add_argument("--context", type=positive_int, required=True, help="tokens each sequence holds")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--batch", type=positive_int,
                   help="sequences decoded together (with --gpu all: the minimum batch)")
    g.add_argument("--slo-ms", type=positive_float,
                   help="latency SLO in ms per output token: the largest batch within it")
    p.add_argument("--prompt", type=positive_int, default=None,
                   help="prompt tokens for the prefill time (default: the whole context)")


def _plan_dict(p, meets_slo=None, slo_ms=None) -> dict:
    d = p.to_dict()
    d["meets_slo"] = meets_slo
    d["slo_ms"] = slo_ms
    return d


def _capacity_render(r: dict) -> str:
    if "ranking" in r:
        lines = [f"{r['source']}",
                 f"{'rank':>4}  {'GPU':<23} {'status':<15} {'batch':>5} {'ms/token':>9} {'tokens/s':>10} "
                 f"{'$/hour':>8} {'$/M tokens':>11}  why"]
        for row in r["ranking"]:
            lines.append(
                f"{row['rank'] if row['rank'] else '-':>4}  {row['gpu']:<23} {row['status']:<15} "
                f"{row['batch'] if row['batch'] else '-':>5} {_num(row['step_ms']):>9} "
                f"{_num(row['tokens_per_s'], '{:,.0f}'):>10} {_num(row['usd_per_hour']):>8} "
                f"{_money(row['usd_per_million_tokens']):>11}  {row['note']}")
        return "\n".join(lines)
    where = f"{r['gpus']}× {r['gpu']}" if r["gpus"] > 1 else r["gpu"]
    rows = [("model", f"{r['model']} (weights {r['weight_dtype']}, KV {r['kv_dtype']})"),
            ("GPU", f"{where}, {r['memory_bytes_per_gpu'] / 1e9:g} GB each"),
            ("context, batch", f"{r['context']:,} tokens × {r['batch']} sequences")]
    if r["slo_ms"] is not None:
        rows.append(("SLO", f"{r['slo_ms']:g} ms per output token: {'met' if r['meets_slo'] else 'MISSED'}"))
    rows += [("fits", "yes" if r["fits"] else "no"),
             ("why", r["reason"]),
             ("max batch at this context", f"{r['max_batch']:,}"),
             ("weights per GPU", f"{r['weight_bytes_per_gpu'] / 1e9:,.2f} GB"),
             ("KV per sequence per GPU", f"{r['kv_bytes_per_seq_per_gpu'] / 1e9:,.3f} GB"),
             ("tensor parallel", r["sharding"])]
    if r["fits"]:
        rows += [("decode step", f"{r['step_ms']:,.2f} ms per output token ({r['bound']}-bound floor)"),
                 ("prefill of one prompt", f"{r['prefill_ms']:,.1f} ms ({r['prompt_tokens']:,} tokens)"),
                 ("tokens/s", f"{r['tokens_per_s']:,.0f} (all sequences)"),
                 ("price", f"${r['usd_per_hour_total']:,.2f} per hour"),
                 ("$ per million output tokens", _money(r["usd_per_million_tokens"]))]
    return table(rows)


def _capacity(a) -> dict:
    from . import planner as capacity, ranking as capacity_ranking, views as capacity_views
    from ..specs import get_spec

    spec = get_spec(a.model)
    capacity.check_context(spec, a.context)
    if a.prompt is not None and a.prompt > a.context:
        raise ValueError(f"--prompt {a.prompt:,} is longer than --context {a.context:,}")
    if a.gpu.strip().lower() == "all":
        rows = capacity_ranking.rank(spec, a.dtype, a.kv_dtype, a.context, slo_ms=a.slo_ms, min_batch=a.batch,
                                     gpus=a.gpus)
        return {"model": spec.name, "weight_dtype": a.dtype, "kv_dtype": a.kv_dtype, "context": a.context,
                "gpus": a.gpus, "slo_ms": a.slo_ms, "min_batch": a.batch,
                "source": capacity_views.source_text(spec, a.dtype, a.kv_dtype, a.gpus, a.context), "ranking": rows}
    from ..gpus import get_gpu

    gpu = get_gpu(a.gpu)
    capacity.sharding(spec, a.gpus)
    first = capacity.plan(spec, gpu, a.gpus, a.dtype, a.kv_dtype, a.context, 1, a.prompt)
    if first.max_batch < 1 and not capacity_ranking._fits_somewhere(spec, a.dtype, a.kv_dtype, a.context, a.gpus):
        raise ValueError(capacity_ranking.no_fit_message(spec, a.dtype, a.kv_dtype, a.context, a.gpus))
    if a.slo_ms is not None:
        p, ok = capacity.plan_for_slo(spec, gpu, a.slo_ms, a.gpus, a.dtype, a.kv_dtype, a.context,
                                      prompt_tokens=a.prompt)
        return _plan_dict(p, ok if p.fits else False, a.slo_ms)
    return _plan_dict(capacity.plan(spec, gpu, a.gpus, a.dtype, a.kv_dtype, a.context, a.batch, a.prompt))


# ------------------------------------------------------------------ gpus

def _gpus_render(rows: list) -> str:
    lines = [f"{'GPU':<23} {'memory GB':>9} {'TB/s':>6} {'BF16 TF':>8} {'FP8 TF':>7} {'$/GPU-h':>8}  price from"]
    for g in rows:
        fp8 = "-" if g["fp8_tflops"] is None else f"{g['fp8_tflops']:g}"
        lines.append(f"{g['name']:<23} {g['memory_gb']:>9g} {g['bandwidth_tbs']:>6g} {g['bf16_tflops']:>8g} "
                     f"{fp8:>7} {g['usd_per_hour']:>8.2f}  {g['price_provider']}, read {g['price_read']}")
    lines.append("dense tensor TFLOP/s (no 2:4 sparsity); every figure's source: --json or helpers/data/gpus.csv")
    return "\n".join(lines)


def _gpus(a) -> list:
    from ..gpus import catalog_rows

    return catalog_rows()


_register("capacity", "fit, max batch, decode step, tokens/s and $ per million output tokens on a GPU",
          _capacity_args, _capacity_render, _capacity)
_register("gpus", "the GPU catalog: memory, bandwidth, dense TFLOP/s, price per GPU-hour, with sources",
          lambda p: None, _gpus_render, _gpus)
