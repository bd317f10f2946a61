"""The workshop's environment variables, read in one place: each stripped, checked once, a bad one refused
with one line naming it, its value and what is allowed (``EnvError``); unset or empty means the default.
``VARIABLES`` lists them; a notebook control's starting value is read by ``control`` within the control's own
range. Nothing here imports the rest of helpers, so every layer may read its variables through it.
"""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Iterable

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")

# Every variable the workshop reads besides the notebook controls' (helpers.preflight finds those, and calls each
# one's reader: setting_problems)
VARIABLES = ("WORKSHOP_PROFILE", "WORKSHOP_DEVICE", "WORKSHOP_DTYPE", "WORKSHOP_MODEL_ID", "WORKSHOP_CACHE",
             "WORKSHOP_COMPILE", "WORKSHOP_BENCH_COMPILE", "WORKSHOP_FIGURES_DIR", "WORKSHOP_CELL_TIMEOUT",
             "WORKSHOP_REPO_URL", "WORKSHOP_REPLAY", "WORKSHOP_REPLAY_RECORD")
CELL_TIMEOUT_S, MAX_CELL_TIMEOUT_S = 1200, 86_400    # a cell's limit in make run: 20 minutes, at most a day


class EnvError(ValueError):
    """An environment variable the workshop cannot use: the message names it, its value, what is allowed."""


def _shown(raw: str) -> str:
    return repr(raw) if len(raw) <= 60 else repr(raw[:60]) + "…"


def refuse(name: str, raw: str, allowed: str, fix: str = "") -> EnvError:
    """The one-line error for `name`=`raw`: what is allowed, and the fix."""
    return EnvError(f"{name}={_shown(raw)} is not allowed; allowed: {allowed}. "
                    f"{fix or f'Fix: set {name} to an allowed value, or unset it for the default'}")


def text(name: str, default: str | None = None) -> str | None:
    """The variable's value, stripped; `default` when it is unset or blank."""
    return (os.environ.get(name) or "").strip() or default


def choice(name: str, allowed: Iterable[str], default: str) -> str:
    """One of `allowed` (compared in lower case), else EnvError."""
    value = text(name, default).lower()
    if value not in allowed:
        raise refuse(name, os.environ.get(name, ""), ", ".join(allowed))
    return value


def flag(name: str, default: bool = False) -> bool:
    """A yes/no switch: 1, true, yes, on or 0, false, no, off (any case), else EnvError."""
    value = (text(name) or "").lower()
    if value and value not in TRUE + FALSE:
        raise refuse(name, os.environ[name], f"{', '.join(TRUE)} to switch it on, {', '.join(FALSE)} to switch it off")
    return value in TRUE if value else default


def number(name: str, default, kind: type = float, lo: float | None = None, hi: float | None = None,
           allowed: Iterable | None = None):
    """A finite number of `kind` (an int: "80" or "80.0", not "80.5") from lo to hi, or one of `allowed`; else EnvError."""
    value = text(name)
    if value is None:
        return default
    if isinstance(allowed, range) and len(allowed) > 6:
        span = f"a whole number from {allowed[0]:,} to {allowed[-1]:,} in steps of {allowed.step:,}"
    elif allowed is not None:
        span = ", ".join(map(str, allowed))
    else:
        span = f"{'a whole number' if kind is int else 'a number'} from {lo:,} to {hi:,}"
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and (kind is not int or x.is_integer())
            and (kind(x) in list(allowed) if allowed is not None else lo <= x <= hi)):
        raise refuse(name, os.environ[name], span)
    return kind(x)


def folder(name: str, default: str | Path | None = None) -> Path | None:
    """A folder this process can write (made when missing) from the variable or `default`, or None; else EnvError."""
    value = text(name)
    if not (value or default):
        return None
    where = Path(value or default).expanduser()
    try:
        where.mkdir(parents=True, exist_ok=True)
        # a file made and removed: os.access says yes to root for /proc, where nothing can be made
        with tempfile.NamedTemporaryFile(dir=where, prefix=".write-check-"):
            return where
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        what = f"{name}={_shown(os.environ[name])}" if value else f"{name}'s default, {where},"
        raise EnvError(f"{what} is not a folder this process can write ({getattr(exc, 'strerror', None) or exc}); "
                       f"allowed: a writable folder. Fix: point {name} at one, or unset it") from None


def control(name: str, default, allowed=None, *, lo: float | None = None, hi: float | None = None):
    """A notebook control's starting value: the variable parsed like `default`, within the control's own range
    (`allowed`: its options or a slider's steps; or `lo` and `hi`), else EnvError; `default` when unset."""
    if allowed is None and (lo is None or hi is None):
        raise TypeError(f"{name}: a control's starting value needs the control's range (allowed, or lo and hi)")
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        return number(name, default, type(default), lo=lo, hi=hi, allowed=allowed)
    value = text(name, default)
    if value not in list(allowed):
        raise refuse(name, os.environ.get(name, ""), ", ".join(map(str, allowed)))
    return value


def cell_timeout() -> int:
    """Seconds a notebook cell may run in make run: WORKSHOP_CELL_TIMEOUT, 1 to a day, else 20 minutes."""
    return number("WORKSHOP_CELL_TIMEOUT", CELL_TIMEOUT_S, int, lo=1, hi=MAX_CELL_TIMEOUT_S)


def url(name: str) -> str | None:
    """An http(s) address without spaces or quotes (a link's base), or None when unset; else EnvError."""
    value = text(name)
    if value is None:
        return None
    scheme, sep, rest = value.partition("://")
    if len(value) > 2000 or not sep or scheme.lower() not in ("http", "https") or not rest.split("/", 1)[0] \
            or any(c.isspace() or c in "\"'<>`()[]" or not c.isprintable() for c in value):
        raise refuse(name, os.environ[name], "an http:// or https:// address, such as https://github.com/OWNER/REPOSITORY")
    return value
