"""What every command line shares (``python -m helpers``, servebench, scripts/, slides/): a parser whose
errors are one line, numbers within stated bounds, dtype spellings as the library takes them, and faults
(a closed or full stdout, an ASCII-only terminal) as one line on stderr, never a traceback. Exit status: 0 the
answer was printed; 2 bad input; 1 a fault of the environment.
"""
from __future__ import annotations

import argparse
import codecs
import os
import sys

from . import checks
from .formulas.config_schema import MAX_TOKENS

BAD_INPUT, ENVIRONMENT = 2, 1


class CliError(Exception):
    """Bad input on the command line: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump, exit 2
        raise CliError(f"{self.prog}: {message}")


def _typed(parse, what: str | None = None):
    """An argparse type: parse(text), or one line: `what` was expected and what came (else parse's own words)."""
    def typed(text: str):
        try:
            return parse(text)
        except (ValueError, TypeError) as exc:
            raise argparse.ArgumentTypeError(f"must be {what}, got {checks.shown(text)}" if what else str(exc)) from None
    return typed


def bounded_int(lo: int, hi: int):
    """An argparse type: a whole number from lo to hi, or one line saying so."""
    what = f"a {'positive ' if lo == 1 else ''}whole number from {lo:,} to {hi:,}"
    return _typed(lambda text: checks.count(int(text), "", lo, hi), what)


def bounded_float(lo: float, hi: float):
    """An argparse type: a finite number in (lo, hi], or one line saying so."""
    what = f"a positive finite number, at most {hi:,.0f}" if lo == 0 else f"a finite number above {lo:,g}, at most {hi:,.0f}"
    return _typed(lambda text: checks.number(float(text), "", lo, hi, positive=True), what)


positive_int = bounded_int(1, MAX_TOKENS)   # counts typed on a command line: as far as a config's context goes
positive_float = bounded_float(0.0, 1e9)


def dtype_type(allowed: tuple[str, ...]):
    """An argparse type taking every spelling helpers.formulas.units.normalize_dtype does (bfloat16, BF16, …)."""
    from .formulas.units import normalize_dtype

    return _typed(lambda text: normalize_dtype(text, allowed))


# What an ASCII-only terminal gets instead of the symbols the tables use.
ASCII = {"×": "x", "≥": ">=", "≤": "<=", "÷": "/", "→": "->", "…": "...", "—": "-", "–": "-", "µ": "u",
         "±": "+/-", "≈": "~", "‘": "'", "’": "'", "“": '"', "”": '"', "⚠": "!", "·": "-"}


def _fallback(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(ASCII.get(ch, "?") for ch in err.object[err.start:err.end]), err.end


codecs.register_error("helpers-ascii", _fallback)


def prepare_streams() -> None:
    """Let stdout and stderr print any text: characters the terminal's encoding lacks become ASCII."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="helpers-ascii")
        except (AttributeError, ValueError, OSError):  # none, or closed: reported when written
            pass


def silence_stdout() -> None:
    """After a failed write, point fd 1 at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def fail(message, status: int = BAD_INPUT) -> int:
    """Print `error: message` as one line on stderr (when there is one); the exit status."""
    if sys.stderr is not None:
        try:
            print(f"error: {' '.join(str(message).split()) or 'failed'}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass
    return status


def classify(exc: BaseException) -> tuple[str, int]:
    """(one line, exit status) for an exception a command raised: 2 for bad input, 1 for the environment."""
    if isinstance(exc, UnicodeError):
        return f"cannot encode text for this terminal ({exc})", ENVIRONMENT
    if isinstance(exc, (CliError, ValueError)):
        return str(exc), BAD_INPUT
    if isinstance(exc, (ArithmeticError, RecursionError)):
        return f"cannot compute this ({type(exc).__name__}: {exc})", BAD_INPUT
    if isinstance(exc, MemoryError):
        return "out of memory", ENVIRONMENT
    if isinstance(exc, ImportError):
        return f"a library is missing or broken: {exc} (run `make setup`)", ENVIRONMENT
    if isinstance(exc, OSError):
        return f"{exc.strerror or type(exc).__name__}" + (f": {exc.filename}" if exc.filename else ""), ENVIRONMENT
    return f"internal error, please report it: {type(exc).__name__}: {exc}", ENVIRONMENT
