"""The workshop's environment variables, read in one place: each value stripped, checked once, and a
bad one refused with one line naming the variable, its value and what is allowed (``EnvError``, a
ValueError). An unset or empty variable means its default.

    WORKSHOP_PROFILE, WORKSHOP_DEVICE, WORKSHOP_DTYPE   which model, device and dtype (helpers.measure.models,
                                                       helpers.measure.hardware)
    WORKSHOP_MODEL_ID, WORKSHOP_CACHE                  the Hub id of mistral-7b; where built models live
    WORKSHOP_COMPILE, WORKSHOP_BENCH_COMPILE           torch.compile on a CPU (flags: 1/0, true/false,
                                                       yes/no, on/off)
    WORKSHOP_FIGURES_DIR                               where a run notes key figures (helpers.present.recorded)
    WORKSHOP_CELL_TIMEOUT                              seconds a notebook cell may run (scripts/notebooks.py)
    WORKSHOP_GPU_GB, WORKSHOP_CONTEXT, …               a notebook control's starting value outside marimo
                                                       (helpers.present.notebook.env_default)

Nothing here imports the rest of helpers, so every layer may read its variables through it.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterable

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class EnvError(ValueError):
    """An environment variable the workshop cannot use: the message names it, its value, what is allowed."""


def _shown(raw: str) -> str:
    return repr(raw) if len(raw) <= 60 else repr(raw[:60]) + "…"


def refuse(name: str, raw: str, allowed: str, fix: str = "") -> EnvError:
    """The one-line error for `name`=`raw`: what is allowed and, by default, that unsetting it is the fix."""
    return EnvError(f"{name}={_shown(raw)} is not allowed; allowed: {allowed}. "
                    f"{fix or f'Fix: set {name} to an allowed value, or unset it for the default'}")


def text(name: str, default: str | None = None) -> str | None:
    """The variable's value, stripped of surrounding whitespace; `default` when it is unset or blank."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    return raw.strip()


def choice(name: str, allowed: Iterable[str], default: str) -> str:
    """One of `allowed` (compared in lower case), else EnvError."""
    allowed = tuple(allowed)
    raw = os.environ.get(name, "")
    value = text(name, default).lower()
    if value not in allowed:
        raise refuse(name, raw, ", ".join(allowed))
    return value


def flag(name: str, default: bool = False) -> bool:
    """A yes/no switch: 1, true, yes, on or 0, false, no, off (any case), else EnvError."""
    raw = os.environ.get(name, "")
    value = text(name)
    if value is None:
        return default
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise refuse(name, raw, f"{', '.join(TRUE)} to switch it on, {', '.join(FALSE)} to switch it off")


def number(name: str, default, kind: type = float, lo: float | None = None, hi: float | None = None,
           allowed: Iterable | None = None):
    """A finite number of `kind` (int or float) from lo to hi (or one of `allowed`), else EnvError.
    An int must be a whole number: "80" or "80.0", not "80.5", "inf" or "1e400"."""
    raw = os.environ.get(name, "")
    value = text(name)
    if value is None:
        return default
    if isinstance(allowed, range) and len(allowed) > 6:
        span = f"a whole number from {allowed[0]:,} to {allowed[-1]:,} in steps of {allowed.step:,}"
    elif allowed is not None:
        span = ", ".join(map(str, allowed))
    elif lo is not None and hi is not None:
        span = f"{'a whole number' if kind is int else 'a number'} from {lo:,} to {hi:,}"
    else:
        span = f"a finite {'whole number' if kind is int else 'number'}"
    try:
        x = float(value) if len(value) <= 40 else math.nan
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or (kind is int and not x.is_integer()):
        raise refuse(name, raw, span)
    x = kind(x)
    if (allowed is not None and x not in list(allowed)) or (lo is not None and x < lo) or (hi is not None and x > hi):
        raise refuse(name, raw, span)
    return x


def folder(name: str, default: str | Path | None = None) -> Path | None:
    """A folder this process can write (created when missing), from the variable or `default`; None
    when both are unset. EnvError when it cannot be created or written."""
    value = text(name)
    where = Path(value if value is not None else default).expanduser() if (value or default) else None
    if where is None:
        return None
    try:
        where.mkdir(parents=True, exist_ok=True)
        ok = os.access(where, os.W_OK | os.X_OK)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        ok, why = False, getattr(exc, "strerror", None) or str(exc)
    else:
        why = "no permission to write there"
    if not ok:
        what = f"{name}={_shown(os.environ.get(name, ''))}" if value is not None else f"{name}'s default, {where},"
        raise EnvError(f"{what} is not a folder this process can write ({why}); allowed: a writable folder. "
                       f"Fix: point {name} at one, or unset it")
    return where
