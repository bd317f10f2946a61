"""Commands `capacity` and `gpus` of ``python -m helpers``.

    python -m helpers capacity --model M --gpu G [--gpus N] [--dtype D] [--kv-dtype D] --context C
                               (--batch B | --slo-ms S) [--prompt-tokens P] [--output-tokens O]
                               [--efficiency E] [--json]
    python -m helpers capacity --model M --gpu all [--provider NAME] ...   # every GPU, cheapest first
    python -m helpers gpus [--json]

Bad input (unknown GPU, context beyond the model, zero or negative numbers, a model that fits no
catalogued GPU at that count) prints one line and exits 2.
"""
from __future__ import annotations

from dataclasses import asdict

from ..command import command, dtype_type, positive_float, positive_int, table


def _register(name: str, help_: str, add_args, render, run) -> None:
    command(name, help_, add_args, render)(run)


def _money(x, nd: int = 3) -> str:
    return "-" if x is None else f"${x:,.{nd}f}"


def _num(x, fmt: str = "{:,.2f}") -> str:
    return "-" if x is None else fmt.format(x)


# ------------------------------------------------------------------ capacity

def _capacity_args(p) -> None:
    from ..formulas.memory import KV_DTYPES, WEIGHT_SCHEMES

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
    p.add_argument("--prompt", "--prompt-tokens", dest="prompt", type=positive_int, default=None,
                   help="prompt tokens for the prefill time (default: the whole context)")
    _new_capacity_args(p)


def _new_capacity_args(p) -> None:
    from .planner import DEFAULT_EFFICIENCY, EFFICIENCY_SOURCE

    p.add_argument("--output-tokens", type=positive_int, default=None,
                   help="output tokens per request: adds the cost of a request (prompt + output ≤ context), "
                        "prefill counted, as $ per million input and per million output tokens")
    p.add_argument("--efficiency", type=positive_float, default=DEFAULT_EFFICIENCY,
                   help=f"share of the datasheet's bandwidth and FLOP/s an engine reaches, in (0, 1]: "
                        f"step_ms = step_floor_ms ÷ efficiency; the SLO, ranking and cost use step_ms "
                        f"(default {DEFAULT_EFFICIENCY:g}: {EFFICIENCY_SOURCE})".replace("%", "%%"))
    p.add_argument("--parallel", default=None,
                   help="tensor × pipeline parallel, e.g. tp=4,pp=2 (optionally mb=M micro-batches): adds the decode "
                        "step with its all-reduces, the pipeline bubble and the communication share (helpers.parallel)")
    p.add_argument("--link", default=None, choices=("nvlink", "pcie", "infiniband", "infinity fabric"),
                   help="with --parallel: the link between the GPUs (default: the fastest inside one server)")
    p.add_argument("--provider", default=None,
                   help="with --gpu all: rank only the GPUs this provider prices (see `python -m helpers gpus`); "
                        "without it the ranking mixes providers and lists them")


def _plan_dict(p, meets_slo=None, slo_ms=None) -> dict:
    d = p.to_dict()
    d["meets_slo"] = meets_slo
    d["slo_ms"] = slo_ms
    return d


def _capacity_render(r: dict) -> str:
    if "ranking" in r:
        lines = [f"{r['source']}", f"prices from: {', '.join(r['providers'])} (--provider NAME ranks within one)",
                 f"ms/token at {r['efficiency']:.0%} of the datasheet (floor: at 100 %); $/M out: decode only",
                 f"{'rank':>4}  {'GPU':<23} {'price from':<14} {'status':<15} {'batch':>5} {'floor ms':>8} "
                 f"{'ms/token':>9} {'tokens/s':>10} {'$/hour':>8} {'$/M out':>9}"
                 + (f" {'$/M in':>8} {'req $/M out':>11} {'$/request':>10}" if r.get("output_tokens") else "") + "  why"]
        for row in r["ranking"]:
            req = (f" {_money(row['usd_per_million_input_tokens']):>8} {_money(row['usd_per_million_output_tokens']):>11}"
                   f" {_money(row['usd_per_request'], 5):>10}") if r.get("output_tokens") else ""
            lines.append(
                f"{row['rank'] if row['rank'] else '-':>4}  {row['gpu']:<23} {row['provider']:<14} {row['status']:<15} "
                f"{row['batch'] if row['batch'] else '-':>5} {_num(row['step_floor_ms']):>8} {_num(row['step_ms']):>9} "
                f"{_num(row['tokens_per_s'], '{:,.0f}'):>10} {_num(row['usd_per_hour']):>8} "
                f"{_money(row['usd_per_million_tokens']):>9}{req}  {row['note']}")
        if r.get("output_tokens"):
            lines.append(f"a request: {r['prompt_tokens']:,} prompt + {r['output_tokens']:,} output tokens, prefill "
                         "counted; $/M in and $/M out price its prefill and its decode apart")
        return "\n".join(lines)
    total, stages = r["gpus"] * r.get("pipeline_stages", 1), r.get("pipeline_stages", 1)
    where = f"{total}× {r['gpu']}" if total > 1 else r["gpu"]
    if stages > 1:
        where += f" ({stages} pipeline stages of {r['gpus']} GPU{'s' if r['gpus'] > 1 else ''})"
    rows = [("model", f"{r['model']} (weights {r['weight_dtype']}, KV {r['kv_dtype']})"),
            ("GPU", f"{where}, labelled {r['memory_label_gb']:g} GB, {r['memory_bytes_per_gpu'] / 2**30:,.2f} GiB "
                    f"usable each; prices from {r['provider']}"),
            ("memory source", r["memory_source"]),
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
        rows += [("decode step, datasheet floor", f"{r['step_floor_ms']:,.2f} ms per output token ({r['bound']}-bound)"),
                 ("decode step", f"{r['step_ms']:,.2f} ms per output token at {r['efficiency']:.0%} of the datasheet"),
                 ("efficiency from", r["efficiency_source"]),
                 ("prefill of one prompt", f"{r['prefill_ms']:,.1f} ms ({r['prompt_tokens']:,} tokens)"),
                 ("tokens/s", f"{r['tokens_per_s']:,.0f} (all sequences)"),
                 ("price", f"${r['usd_per_hour_total']:,.2f} per hour"),
                 ("$ per million output tokens", f"{_money(r['usd_per_million_tokens'])} (decode only)")]
        if r.get("output_tokens"):
            rows += [("a request", f"{r['prompt_tokens']:,} prompt + {r['output_tokens']:,} output tokens: "
                                   f"{r['request_prefill_s'] * 1e3:,.1f} ms prefill + {r['request_decode_s'] * 1e3:,.1f} ms "
                                   "of GPU time decoding (its share of the batch)"),
                     ("$ per request", _money(r["usd_per_request"], 6)),
                     ("$ per million input tokens", f"{_money(r['usd_per_million_input_tokens'])} (prefill)"),
                     ("$ per million output tokens, request", f"{_money(r['usd_per_million_output_tokens'])} "
                                                              "(decode at the request's mean context)")]
    if r.get("parallel"):
        rows += _parallel_rows(r["parallel"])
    return table(rows)


def _capacity(a) -> dict:
    from . import planner as capacity, ranking as capacity_ranking, slo, views as capacity_views
    from ..formulas.specs import get_spec

    spec = get_spec(a.model)
    capacity.check_context(spec, a.context)
    if a.prompt is not None and a.prompt > a.context:
        raise ValueError(f"--prompt {a.prompt:,} is longer than --context {a.context:,}")
    if getattr(a, "link", None) and getattr(a, "parallel", None) is None:
        raise ValueError("--link chooses the link between GPUs for --parallel; give --parallel tp=N (or pp=N) with it")
    if a.gpu.strip().lower() == "all":
        if getattr(a, "parallel", None) is not None:
            raise ValueError("--parallel needs one --gpu, not 'all'")
        rows = capacity_ranking.rank(spec, a.dtype, a.kv_dtype, a.context, slo_ms=a.slo_ms, min_batch=a.batch,
                                     gpus=a.gpus, **_request_kw(a), provider=a.provider)
        return {"model": spec.name, "weight_dtype": a.dtype, "kv_dtype": a.kv_dtype, "context": a.context,
                "gpus": a.gpus, "slo_ms": a.slo_ms, "min_batch": a.batch,
                "source": capacity_views.source_text(spec, a.dtype, a.kv_dtype, a.gpus, a.context),
                "ranking": [asdict(row) for row in rows],
                "efficiency": a.efficiency, "prompt_tokens": a.prompt, "output_tokens": a.output_tokens,
                "provider": a.provider, "providers": capacity_ranking.providers_of(rows),
                "providers_mixed": len({row.provider for row in rows}) > 1}
    from ..formulas.gpus import get_gpu

    gpu = get_gpu(a.gpu)
    if getattr(a, "parallel", None) is not None:
        return _capacity_parallel(a, spec, gpu)
    capacity.sharding(spec, a.gpus)
    first = capacity.plan(spec, gpu, a.gpus, a.dtype, a.kv_dtype, a.context, 1, **_request_kw(a))
    if first.max_batch < 1 and not capacity_ranking.fits_somewhere(spec, a.dtype, a.kv_dtype, a.context, a.gpus):
        raise ValueError(capacity_ranking.no_fit_message(spec, a.dtype, a.kv_dtype, a.context, a.gpus))
    if a.slo_ms is not None:
        p, ok = slo.plan_for_slo(spec, gpu, a.slo_ms, a.gpus, a.dtype, a.kv_dtype, a.context, **_request_kw(a))
        return _plan_dict(p, ok if p.fits else False, a.slo_ms)
    return _plan_dict(capacity.plan(spec, gpu, a.gpus, a.dtype, a.kv_dtype, a.context, a.batch, **_request_kw(a)))


def _request_kw(a) -> dict:
    """The planner's keyword arguments from the new options (efficiency, request size)."""
    if a.efficiency > 1:
        raise ValueError(f"--efficiency must be a fraction of the datasheet in (0, 1], got {a.efficiency:g}")
    if a.output_tokens is not None and (a.prompt or a.context) + a.output_tokens > a.context:
        raise ValueError(f"--prompt-tokens + --output-tokens ({a.prompt or a.context:,} + {a.output_tokens:,}) "
                         f"exceed --context {a.context:,}; give a context that holds the whole request")
    return {"prompt_tokens": a.prompt, "efficiency": a.efficiency, "output_tokens": a.output_tokens}


# ------------------------------------------------------------------ capacity --parallel (helpers.parallel.plan)

def _capacity_parallel(a, spec, gpu) -> dict:
    """The capacity command's result with `--parallel tp=T,pp=P[,mb=M]`: the plan on T GPUs per
    stage and P stages (memory per GPU), and under "parallel" the decode step with its communication."""
    from ..parallel.plan import parallel_step, parse_parallel
    from .planner import plan

    par = parse_parallel(a.parallel)
    tp, pp, mb = par["tp"], par["pp"], par["mb"]
    if a.gpus not in (1, tp * pp):
        raise ValueError(f"--gpus {a.gpus} disagrees with --parallel tp={tp},pp={pp} ({tp * pp} GPUs); "
                         "give one or the other")
    if a.batch is None:
        raise ValueError("--parallel takes --batch B (not --slo-ms): the batch the pipeline splits into micro-batches")
    d = _plan_dict(plan(spec, gpu, tp, a.dtype, a.kv_dtype, a.context, a.batch, pipeline_stages=pp, **_request_kw(a)))
    d["parallel"] = parallel_step(spec, gpu, tp, pp, mb, a.batch, a.context, a.dtype, a.kv_dtype,
                                  getattr(a, "link", None), efficiency=a.efficiency).to_dict()
    return d


def _parallel_rows(p: dict) -> list[tuple[str, str]]:
    """Rows the capacity command prints for its "parallel" part."""
    between = f"; between stages {p['pp_link']}" if p.get("pp_link") and p["pp_link"] != p["link"] else ""
    rows = [("parallel", f"tp={p['tp']} × pp={p['pp']} = {p['gpus']} GPUs, {p['micro_batches']} micro-batch(es); "
                         f"link {p['link']}{between}")]
    if not p["fits"]:
        return rows
    if p["steady_fits"]:
        full_step = f"{p['steady_step_s'] * 1e3:,.2f} ms with the pipeline kept full"
        full_rate = f"{p['steady_tokens_per_s']:,.0f} (pipeline full, {p['in_flight']:,} sequences in flight)"
    else:
        full_step = f"pipeline full: does not fit ({p['steady_reason']})"
        full_rate = "pipeline full: - (its KV cache does not fit, above)"
    rows += [("per micro-batch per stage", f"work {p['stage_s'] * 1e3:,.3f} ms + all-reduces {p['all_reduce_s'] * 1e3:,.3f} ms "
                                           f"({p['all_reduces_per_step']} per token, {p['all_reduce_bytes']:,} B each) + "
                                           f"send to next stage {p['send_s'] * 1e3:,.4f} ms"),
             ("communication share", f"{p['communication_share']:.1%} of each slot"),
             ("pipeline bubble", f"{p['bubble_share']:.1%} of the step ((pp−1)/(mb+pp−1))"),
             ("decode step with communication", f"{p['step_s'] * 1e3:,.2f} ms one batch through the pipeline; "
                                                f"{full_step}"),
             ("tokens/s with communication", f"{p['tokens_per_s']:,.0f} (one batch); {full_rate}")]
    return rows


# ------------------------------------------------------------------ gpus

def _gpus_render(rows: list) -> str:
    lines = [f"{'GPU':<23} {'label':>6} {'usable GiB':>10} {'TB/s':>6} {'BF16 TF':>8} {'FP8 TF':>7} {'$/GPU-h':>8}  "
             "price from"]
    for g in rows:
        fp8 = "-" if g["fp8_tflops"] is None else f"{g['fp8_tflops']:g}"
        usable = f"{g['usable_memory_bytes'] / 2**30:,.2f}" + ("" if g["memory_reported_gib"] else "*")
        lines.append(f"{g['name']:<23} {g['memory_gb']:>6g} {usable:>10} {g['bandwidth_tbs']:>6g} {g['bf16_tflops']:>8g} "
                     f"{fp8:>7} {g['usd_per_hour']:>8.2f}  {g['price_provider']}, read {g['price_read']}")
    lines.append("label: the vendor's \"GB\", which is GiB; usable: what CUDA reports (* none found: the label less the "
                 "largest reserve its memory kind reports); dense tensor TFLOP/s (no 2:4 sparsity); every figure's "
                 "source: --json, helpers/data/gpus.csv and gpu_memory.csv")
    return "\n".join(lines)


def _gpus(a) -> list:
    from ..formulas.gpus import catalog_rows

    return catalog_rows()


_register("capacity", "fit, max batch, decode step, tokens/s and $ per million output tokens on a GPU",
          _capacity_args, _capacity_render, _capacity)
_register("gpus", "the GPU catalog: memory, bandwidth, dense TFLOP/s, price per GPU-hour, with sources",
          lambda p: None, _gpus_render, _gpus)
