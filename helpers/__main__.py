"""The calculators on the command line: ``python -m helpers kv | weights | presets | capacity | gpus … [--json]``.
Each answer is printed as JSON or as readable lines and tables (bytes in B, GiB and GB; other units in the names);
exit status 0, else one line on stderr and 2 (bad input) or 1 (the environment: stdout, a library, memory).
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import pandas as pd

from .command import (BAD_INPUT, ENVIRONMENT, CliError, Parser, classify, dtype_type, fail, positive_float,
                      positive_int, prepare_streams, silence_stdout)
from .capacity import planner, ranking, slo, views
from .capacity.planner import DEFAULT_EFFICIENCY, EFFICIENCY_SOURCE
from .formulas.gpus import catalog_rows, get_gpu
from .formulas.memory import KV_DTYPES, WEIGHT_SCHEMES, kv_bytes_per_token, kv_cache_bytes, kv_terms, weight_bytes
from .formulas.specs import PRESETS, get_spec
from .formulas.units import fmt_bytes
from .parallel.links import KINDS
from .parallel.plan import parallel_step, parse_parallel


def _kv(a) -> dict:
    s = get_spec(a.model)
    terms = kv_terms(s, a.dtype)
    return {"model": s.name, "attention": s.attention, "dtype": a.dtype, "formula": terms.formula, "terms": terms.terms,
            "kv_bytes_per_token": kv_bytes_per_token(s, a.dtype), "tokens": a.tokens, "batch": a.batch,
            "kv_bytes_total": kv_cache_bytes(s, a.tokens, a.batch, a.dtype), "sliding_window": s.sliding_window,
            "sliding_layers": s.sliding_layers}


def _weights(a) -> dict:
    w = weight_bytes(get_spec(a.model), a.dtype).to_dict()
    return {"model": get_spec(a.model).name, **w, "dtype": a.dtype, "gb": w["bytes"] / 1e9, "gib": w["bytes"] / 2**30}


def _presets(a) -> dict:
    return {"presets": [{"name": n, "attention": s.attention, "layers": s.num_layers, "heads": s.num_heads,
                         "kv_heads": s.num_kv_heads, "head_dim": s.head_dim, "sliding_window": s.sliding_window}
                        for n, s in ((n, get_spec(n)) for n in PRESETS)]}


def _capacity(a) -> dict:
    """One plan, the largest batch within --slo-ms, every GPU ranked (--gpu all), or with --parallel's communication."""
    spec = get_spec(a.model)
    planner.check_context(spec, a.context)
    if a.link and not a.parallel:
        raise ValueError("--link chooses the link between GPUs for --parallel; give --parallel tp=N (or pp=N) with it")
    kw = {"prompt_tokens": a.prompt, "efficiency": a.efficiency, "output_tokens": a.output_tokens}
    if a.gpu.strip().lower() == "all":
        if a.parallel:
            raise ValueError("--parallel needs one --gpu, not 'all'")
        rows = ranking.rank(spec, a.dtype, a.kv_dtype, a.context, slo_ms=a.slo_ms, min_batch=a.batch, gpus=a.gpus,
                            provider=a.provider, **kw)
        return {"model": spec.name, "source": views.source_text(spec, a.dtype, a.kv_dtype, a.gpus, a.context),
                "providers": ranking.providers_of(rows), "ranking": rows}
    gpu = get_gpu(a.gpu)
    if a.parallel:
        par = parse_parallel(a.parallel)
        if a.gpus not in (1, par["tp"] * par["pp"]):
            raise ValueError(f"--gpus {a.gpus} disagrees with --parallel tp={par['tp']},pp={par['pp']}; give one or the other")
        if a.batch is None:
            raise ValueError("--parallel takes --batch B (not --slo-ms): the batch the pipeline splits into micro-batches")
        p = planner.plan(spec, gpu, par["tp"], a.dtype, a.kv_dtype, a.context, a.batch, pipeline_stages=par["pp"], **kw)
        return {**p.to_dict(), "parallel": parallel_step(spec, gpu, par["tp"], par["pp"], par["mb"], a.batch, a.context,
                                                         a.dtype, a.kv_dtype, a.link, efficiency=a.efficiency).to_dict()}
    planner.sharding(spec, a.gpus)
    if planner.max_batch(spec, gpu, a.gpus, a.dtype, a.kv_dtype, a.context) < 1 \
            and not ranking.fits_somewhere(spec, a.dtype, a.kv_dtype, a.context, a.gpus):
        raise ValueError(ranking.no_fit_message(spec, a.dtype, a.kv_dtype, a.context, a.gpus))
    if a.slo_ms is None:
        return planner.plan(spec, gpu, a.gpus, a.dtype, a.kv_dtype, a.context, a.batch, **kw).to_dict()
    p, ok = slo.plan_for_slo(spec, gpu, a.slo_ms, a.gpus, a.dtype, a.kv_dtype, a.context, **kw)
    return {**p.to_dict(), "slo_ms": a.slo_ms, "meets_slo": ok and p.fits}


def _capacity_args(p) -> None:
    _model_args(WEIGHT_SCHEMES, False)(p)
    p.add_argument("--kv-dtype", default="bf16", type=dtype_type(KV_DTYPES), help=", ".join(KV_DTYPES))
    p.add_argument("--gpu", required=True, help="a catalogued GPU (see `gpus`), or 'all' to rank every GPU")
    p.add_argument("--gpus", type=positive_int, default=1, help="GPUs in tensor parallel (default 1)")
    p.add_argument("--context", type=positive_int, required=True, help="tokens each sequence holds")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--batch", type=positive_int, help="sequences decoded together (with --gpu all: the minimum)")
    g.add_argument("--slo-ms", type=positive_float, help="ms per output token: the largest batch within it")
    p.add_argument("--prompt", "--prompt-tokens", dest="prompt", type=positive_int, help="prompt tokens (default: context)")
    p.add_argument("--output-tokens", type=positive_int, help="prices a request of prompt + output tokens")
    p.add_argument("--efficiency", type=positive_float, default=DEFAULT_EFFICIENCY,
                   help=f"share of the datasheet reached, in (0, 1]: step_ms = step_floor_ms ÷ efficiency "
                        f"(default {DEFAULT_EFFICIENCY:g}: {EFFICIENCY_SOURCE})".replace("%", "%%"))
    p.add_argument("--parallel", help="tp=T,pp=P[,mb=M]: the step with its communication (helpers.parallel)")
    p.add_argument("--link", choices=KINDS, help="with --parallel: the link (default: the fastest in one server)")
    p.add_argument("--provider", help="with --gpu all: rank only the GPUs this provider prices")


def _model_args(dtypes, tokens: bool):
    def add(p) -> None:
        p.add_argument("--model", required=True, help="preset name (see `presets`) or path to a config.json")
        p.add_argument("--dtype", default="bf16", type=dtype_type(dtypes), help=", ".join(dtypes))
        if tokens:
            p.add_argument("--tokens", type=positive_int, default=4096, help="tokens per sequence (default 4096)")
            p.add_argument("--batch", type=positive_int, default=1, help="sequences (default 1)")
    return add


# name -> (help, add its arguments, run)
COMMANDS = {
    "kv": ("KV-cache bytes per token and for (tokens, batch)", _model_args(KV_DTYPES, True), _kv),
    "weights": ("weight bytes per dtype or quantization scheme, from the exact parameter count",
                _model_args(WEIGHT_SCHEMES, False), _weights),
    "presets": ("the model presets shipped with helpers", lambda p: None, _presets),
    "capacity": ("fit, max batch, decode step, tokens/s and $ per million output tokens on a GPU",
                 _capacity_args, _capacity),
    "gpus": ("the GPU catalog: memory, bandwidth, dense TFLOP/s, price per GPU-hour, with sources",
             lambda p: None, lambda a: catalog_rows()),
}


def _shown(key: str, v) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "bytes" in key:
            return fmt_bytes(v)
        return f"{v:,.0f}" if abs(v) >= 1000 or v == int(v) else f"{v:.4g}"
    return str(v)


def _text(result, prefix: str = "") -> str:
    """An answer as readable text: a list as a table (long texts left to --json), a dict as `key  value` lines
    (None left out), its lists as tables below them (the ranking: notebook 04's, helpers.capacity.views)."""
    if isinstance(result, list):
        if result and "rank" in result[0]:
            return (views.request_frame if result[0]["usd_per_request"] is not None else views.rank_frame)(result).to_string()
        df = pd.DataFrame([{k: "–" if v is None else v for k, v in r.items()} for r in result])
        short = [c for c in df if df[c].map(lambda v: len(str(v)) <= 24).all()]  # sources and notes: --json
        return df[short].to_string(index=False) + ("" if len(short) == len(df.columns) else "\nsources and notes: --json")
    lines, tables = [], []
    for key, v in result.items():
        if isinstance(v, dict):
            lines.append(_text(v, f"{prefix}{key}."))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            tables.append(_text(v))
        elif v is not None and v != "":
            lines.append(f"{prefix + key:<32} {_shown(key, v)}")
    return "\n".join(lines + tables)


def _answer(argv: list[str] | None) -> str | None:
    """Parse, run, render: the text to print. Library warnings are kept off stderr (one line or none)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parser = Parser(prog="python -m helpers", description="Calculators of the LLM inference workshop.")
        sub = parser.add_subparsers(dest="command", parser_class=Parser)
        for name, (help_, add_args, _run) in COMMANDS.items():
            p = sub.add_parser(name, help=help_, description=help_)
            add_args(p)
            p.add_argument("--json", action="store_true", help="print one JSON object")
        args = parser.parse_args(argv)
        if not args.command:
            raise CliError(f"python -m helpers: choose a command: {', '.join(COMMANDS)}")
        result = COMMANDS[args.command][2](args)
        try:  # a result that cannot be shown (NaN in JSON) is our bug, not bad input
            return json.dumps(result, indent=2, default=str, allow_nan=False) if args.json else _text(result)
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise RuntimeError(f"the answer could not be rendered ({exc})") from None


def main(argv: list[str] | None = None) -> int:
    prepare_streams()
    try:
        text = _answer(argv)
    except SystemExit as exc:  # --help: argparse printed it; only the flush below is left
        if exc.code not in (0, None):
            return exc.code if isinstance(exc.code, int) else BAD_INPUT
        text = None
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as exc:  # noqa: BLE001 - every fault is one line and a status, never a traceback
        return fail(*classify(exc))
    if sys.stdout is None:
        return 0 if text is None else fail("stdout is closed: nowhere to print the answer", ENVIRONMENT)
    try:
        sys.stdout.write("" if text is None else text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # output piped into `head` and cut short: not an error
        silence_stdout()
        return 0
    except (OSError, ValueError) as exc:  # /dev/full, a closed descriptor
        silence_stdout()
        return fail(f"cannot write the answer to stdout: {getattr(exc, 'strerror', None) or exc}", ENVIRONMENT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
