"""Shared pieces of the command line: a parser whose errors are one line and exit 2, numbers within
stated bounds, dtype spellings as the library accepts them, output as JSON or as a readable table with
units labelled — written so that no fault (a closed stdout, a full disk, an ASCII-only terminal) ends
in a traceback.

Exit status: 0 the answer was printed; 2 bad input (the one line says what was wrong and what is
allowed); 1 a fault of the environment (stdout closed or full, a library missing, out of memory).
"""
from __future__ import annotations

import argparse
import codecs
import json
import os
import sys
from typing import Any, Callable

from . import checks
from .formulas.config_schema import MAX_TOKENS

BAD_INPUT, ENVIRONMENT = 2, 1

# Bounds of numbers typed on the command line: beyond any real deployment, inside what the arithmetic
# carries (token counts of 10^9 by batches of 10^9 stay finite in every formula). The same bound as a
# config's max_position_embeddings.
MAX_COUNT = MAX_TOKENS
MAX_MS = 1e9

# The commands of ``python -m helpers``: name -> (help, add_args, run, render). Kept here, in a
# module imported once, so topic modules (helpers.capacity.cli, …) register into the same dict
# that main() reads — under ``python -m`` the running __main__ is not helpers.__main__.
COMMANDS: dict[str, tuple[str, Callable[[Any], None], Callable[[Any], dict], Callable[[dict], str]]] = {}


def command(name: str, help: str, add_args: Callable[[Any], None], render: Callable[[dict], str]):
    """Decorator registering ``run(args) -> dict`` as a command with its arguments and renderer."""
    def register(run: Callable[[Any], dict]):
        COMMANDS[name] = (help, add_args, run, render)
        return run
    return register


class CliError(Exception):
    """Bad input on the command line: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump, exit 2
        raise CliError(f"{self.prog}: {message}")


def bounded_int(lo: int, hi: int):
    """An argparse type: a whole number from lo to hi (checked by helpers.checks.count), or one line saying so."""
    what = "positive whole number" if lo == 1 else "whole number"

    def parse(text: str) -> int:
        try:
            value = int(text) if len(text) <= 40 else None
        except ValueError:
            value = None
        if value is None:
            raise argparse.ArgumentTypeError(f"expected a whole number from {lo:,} to {hi:,}, got {checks.shown(text)}")
        try:
            return checks.count(value, "the value", lo, hi)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a {what} from {lo:,} to {hi:,}, got {checks.shown(text)}") from None
    return parse


def bounded_float(lo: float, hi: float, lo_open: bool = True):
    """An argparse type: a finite number in (lo, hi] (or [lo, hi]) (checked by helpers.checks.number), or
    one line saying so."""
    if lo == 0 and lo_open:
        span = f"a positive finite number, at most {hi:,.0f}"
    else:
        span = f"a finite number from {lo:,g}{' (excluded)' if lo_open else ''} to {hi:,.0f}"

    def parse(text: str) -> float:
        try:
            return checks.number(float(text) if len(text) <= 40 else None, "the value", lo, hi, positive=lo_open)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {span}, got {checks.shown(text)}") from None
    return parse


def writable_folder(folder, what: str):
    """`folder` (a Path), created when missing, or ValueError saying it cannot be: a bad --out is bad input."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(0, "no permission to write there")
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise ValueError(f"{what} {checks.shown(str(folder))} is not a folder this process can write "
                         f"({getattr(exc, 'strerror', None) or exc}); allowed: a writable folder") from None
    return folder


positive_int = bounded_int(1, MAX_COUNT)
positive_float = bounded_float(0.0, MAX_MS)


def dtype_type(allowed: tuple[str, ...]):
    """An argparse type accepting every spelling helpers.formulas.units.normalize_dtype does (bfloat16, BF16, …)."""
    from .formulas.units import normalize_dtype

    def parse(text: str) -> str:
        try:
            return normalize_dtype(text, allowed)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = "dtype"
    return parse


def table(rows: list[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def render_text(result: Any, as_json: bool, render: Callable[[Any], str]) -> str:
    """The answer as text; JSON must be finite (NaN or Infinity here is a bug, not an answer)."""
    if as_json:
        return json.dumps(result, indent=2, default=str, allow_nan=False)
    return render(result)


# ----------------------------------------------------------------------------- faults of the terminal

# What an ASCII-only terminal gets instead of the symbols the tables use.
ASCII = {"×": "x", "≥": ">=", "≤": "<=", "÷": "/", "→": "->", "…": "...", "—": "-", "–": "-", "µ": "u",
         "±": "+/-", "≈": "~", "‘": "'", "’": "'", "“": '"', "”": '"', "⚠": "!", "·": "-"}


def _fallback(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    bad = err.object[err.start:err.end]
    return "".join(ASCII.get(ch, "?") for ch in bad), err.end


codecs.register_error("helpers-ascii", _fallback)


def prepare_streams() -> None:
    """Let stdout and stderr print any text: characters the terminal's encoding lacks become ASCII."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="helpers-ascii")
            except (ValueError, OSError):  # a closed or detached stream: reported when written
                pass


def silence_stdout() -> None:
    """After a failed write, point fd 1 at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def fail(message: str, status: int = BAD_INPUT) -> int:
    """Print one line on stderr (when there is one) and return the exit status."""
    line = " ".join(str(message).split()) or "failed"
    if sys.stderr is not None:
        try:
            print(f"error: {line}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass
    return status


def fail_lines(message: str, status: int = BAD_INPUT) -> int:
    """Several violations, one `error: …` line each (a bad agenda lists every one); the exit status."""
    for line in str(message).splitlines() or ["failed"]:
        fail(line, status)
    return status


def classify(exc: BaseException) -> tuple[str, int]:
    """(one line, exit status) for an exception a command raised: 2 for bad input, 1 for the environment."""
    if isinstance(exc, CliError):
        return str(exc), BAD_INPUT
    if isinstance(exc, UnicodeError):
        return f"cannot encode text for this terminal ({exc})", ENVIRONMENT
    if isinstance(exc, (ValueError, ArithmeticError, RecursionError)):
        text = str(exc) if isinstance(exc, ValueError) else f"cannot compute this ({type(exc).__name__}: {exc})"
        return text, BAD_INPUT
    if isinstance(exc, MemoryError):
        return "out of memory", ENVIRONMENT
    if isinstance(exc, ImportError):
        return f"a library is missing or broken: {exc} (run `make setup`)", ENVIRONMENT
    if isinstance(exc, OSError):
        return f"{exc.strerror or type(exc).__name__}" + (f": {exc.filename}" if exc.filename else ""), ENVIRONMENT
    return f"internal error, please report it: {type(exc).__name__}: {exc}", ENVIRONMENT
