"""The command line over the calculators: ``python -m helpers <command> … [--json]``.

Commands register themselves in helpers.command.COMMANDS: each has a function that adds its arguments and one
that returns a JSON-able result and a renderer for the readable table.

Exit status: 0 the answer was printed; 2 bad input; 1 a fault of the environment (a closed or full
stdout, a missing library, no memory). Either way one line on stderr, never a traceback.
"""
from __future__ import annotations

import os
import sys
import warnings

from .command import (BAD_INPUT, COMMANDS, ENVIRONMENT, Parser, CliError, classify, command, dtype_type, fail, positive_int, prepare_streams, render_text, silence_stdout, table)
from .formulas.units import fmt_bytes, fmt_count


# ------------------------------------------------------------------ kv

def _kv_args(p) -> None:
    from .formulas.memory import KV_DTYPES

    p.add_argument("--model", required=True, help="preset name or path to a config.json")
    p.add_argument("--dtype", default="bf16", type=dtype_type(KV_DTYPES),
                   help=f"KV-cache element type: {', '.join(KV_DTYPES)} (also bfloat16, BF16, …)")
    p.add_argument("--tokens", type=positive_int, default=4096, help="tokens per sequence (default 4096)")
    p.add_argument("--batch", type=positive_int, default=1, help="sequences (default 1)")


def _kv_render(r: dict) -> str:
    rows = [("model", r["model"]), ("attention", r["attention"]), ("dtype", r["dtype"]),
            ("formula", r["formula"]),
            ("KV bytes per token", fmt_bytes(r["kv_bytes_per_token"]))]
    if r["sliding_window"]:
        rows.append(("sliding window", f"{r['sliding_window']:,} tokens on {r['sliding_layers']} of {r['layers']} layers"))
    rows += [(f"KV bytes, {r['tokens']:,} tokens × {r['batch']:,} seq", fmt_bytes(r["kv_bytes_total"]))]
    return table(rows)


@command("kv", "KV-cache bytes per token and for (tokens, batch)", _kv_args, _kv_render)
def _kv(a) -> dict:
    from .formulas.memory import kv_bytes_per_token, kv_cache_bytes, kv_terms
    from .formulas.specs import get_spec

    spec = get_spec(a.model)
    terms = kv_terms(spec, a.dtype)
    return {
        "model": spec.name,
        "attention": spec.attention,
        "heads_attention": spec.heads_attention,
        "dtype": a.dtype,
        "tokens": a.tokens,
        "batch": a.batch,
        "kv_bytes_per_token": kv_bytes_per_token(spec, a.dtype),
        "kv_bytes_total": kv_cache_bytes(spec, a.tokens, a.batch, a.dtype),
        "layers": spec.num_layers,
        "kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "kv_lora_rank": spec.kv_lora_rank,
        "qk_rope_head_dim": spec.qk_rope_head_dim,
        "sliding_window": spec.sliding_window,
        "sliding_layers": spec.sliding_layers,
        "formula": terms.formula,
        "terms": terms.terms,
    }


# ------------------------------------------------------------------ weights

def _weights_args(p) -> None:
    from .formulas.memory import WEIGHT_SCHEMES

    p.add_argument("--model", required=True, help="preset name or path to a config.json")
    p.add_argument("--dtype", default="bf16", type=dtype_type(WEIGHT_SCHEMES),
                   help=f"weight dtype or quantization scheme: {', '.join(WEIGHT_SCHEMES)}")


def _weights_render(r: dict) -> str:
    rows = [("model", r["model"]), ("dtype", r["dtype"]), ("parameters", f"{r['params']:,} ({fmt_count(r['params'])})"),
            ("weight bytes", fmt_bytes(r["bytes"]))]
    if r["quantized_params"]:
        rows += [("quantized parameters", f"{r['quantized_params']:,}"),
                 ("left unquantized", f"{r['unquantized_params']:,} (embeddings, lm_head, norms, biases…)"),
                 ("quantization metadata", fmt_bytes(r["metadata_bytes"]))]
    return table(rows)


@command("weights", "weight bytes per dtype or quantization scheme, from the exact parameter count",
         _weights_args, _weights_render)
def _weights(a) -> dict:
    from .formulas.memory import weight_bytes
    from .formulas.specs import get_spec

    spec = get_spec(a.model)
    w = weight_bytes(spec, a.dtype)
    return {"model": spec.name, "dtype": a.dtype, **{k: v for k, v in w.to_dict().items() if k != "scheme"},
            "gb": w.bytes / 1e9, "gib": w.bytes / 2**30}


# ------------------------------------------------------------------ presets

def _presets_render(r: dict) -> str:
    lines = [f"{'preset':<18} {'attention':<9} {'layers':>6} {'heads':>5} {'kv':>4} {'head_dim':>8}  window"]
    for p in r["presets"]:
        lines.append(f"{p['name']:<18} {p['attention']:<9} {p['layers']:>6} {p['heads']:>5} {p['kv_heads']:>4} "
                     f"{p['head_dim']:>8}  {p['sliding_window'] or '-'}")
    return "\n".join(lines)


@command("presets", "the model presets shipped with helpers", lambda p: None, _presets_render)
def _presets(a) -> dict:
    from .formulas.specs import PRESETS, get_spec

    out = []
    for name in PRESETS:
        s = get_spec(name)
        out.append({"name": name, "attention": s.attention, "layers": s.num_layers, "heads": s.num_heads,
                    "kv_heads": s.num_kv_heads, "head_dim": s.head_dim, "sliding_window": s.sliding_window})
    return {"presets": out}


def _register_topic_commands() -> None:
    """Topic modules (capacity, …) add their own commands when present."""
    import importlib

    for mod in ("helpers.capacity.cli",):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


def _answer(argv: list[str] | None) -> str:
    """Parse, run, render: the text to print. Library warnings are kept off stderr (one line or none)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _register_topic_commands()
        parser = Parser(prog="python -m helpers", description="Calculators of the LLM inference workshop.")
        sub = parser.add_subparsers(dest="command", parser_class=Parser)
        for name, (help_, add_args, _run, _render) in COMMANDS.items():
            p = sub.add_parser(name, help=help_, description=help_)
            add_args(p)
            p.add_argument("--json", action="store_true", help="print one JSON object")
        args = parser.parse_args(argv)
        if not args.command:
            raise CliError(f"python -m helpers: choose a command: {', '.join(COMMANDS)}")
        _help, _add, run, render = COMMANDS[args.command]
        result = run(args)
    try:
        return render_text(result, args.json, render)
    except (ValueError, TypeError, ArithmeticError) as exc:  # a result that cannot be shown is our bug
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
        if text is not None:
            sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # output piped into `head` and cut short: not an error
        silence_stdout()
        return 0
    except (OSError, ValueError) as exc:  # /dev/full, a closed descriptor
        silence_stdout()
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return fail(f"cannot write the answer to stdout: {why}", ENVIRONMENT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
