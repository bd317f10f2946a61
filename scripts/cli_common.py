"""What only the command lines of scripts/ and slides/ share, beside helpers.command: a writable --out, and
several violations as one `error: …` line each."""
from __future__ import annotations

import os

from helpers import checks
from helpers.command import BAD_INPUT, fail


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


def fail_lines(message: str, status: int = BAD_INPUT) -> int:
    """Several violations (a bad agenda lists every one), one `error: …` line each; the exit status."""
    for line in str(message).splitlines() or ["failed"]:
        fail(line, status)
    return status
