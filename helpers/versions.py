"""The library versions helpers needs, checked at ``import helpers`` with one line (found, needed, the fix), and
the versions and commit every record notes (library_versions, git_commit).

An older library can give plausible, wrong numbers: transformers 5.24 renamed the forward's
``past_key_values=`` to ``cache=`` (models/mistral/modeling_mistral.py); under 5.23 ``cache=cache`` falls into
``**kwargs`` and every decode step runs without its KV history. 5.24 turns PyTorch off below 2.6 with only a
logged warning (utils/import_utils.py). requirements.txt states the same floors (tests/test_versions.py).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import re
import subprocess
from pathlib import Path

# distribution -> (lowest version allowed, first version not allowed or None), and why
FLOORS: dict[str, tuple[str, str | None, str]] = {
    "transformers": ("5.24", "6", "the model forward takes cache= from 5.24 on; older releases ignore it"),
    "torch": ("2.6", None, "transformers 5.24 turns PyTorch off below 2.6"),
}


class LibraryVersionError(ImportError):
    """An installed library outside the range helpers needs (FLOORS)."""


def version_tuple(version: str) -> tuple[int, ...]:
    """The release numbers of a version string: '2.13.0+cpu' -> (2, 13, 0), '5.25.0.dev0' -> (5, 25, 0)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    if not m:
        raise ValueError(f"not a version number: {version!r}")
    return tuple(map(int, m.group(1).split(".")))


def requirement(name: str) -> str:
    """The pip requirement for one floor: 'transformers>=5.24,<6'."""
    low, high, _ = FLOORS[name]
    return f"{name}>={low}" + (f",<{high}" if high else "")


def problem(name: str, found: str | None) -> str | None:
    """One line saying why `found` (a version of `name`) will not do, or None; one not installed fails where used."""
    low, high, why = FLOORS[name]
    if found is None or version_tuple(low) <= version_tuple(found) < version_tuple(high or "999"):
        return None
    fix = f'pip install -U "{requirement(name)}"' if name != "torch" else f"install torch {low} or newer"
    return (f"helpers needs {requirement(name)} ({why}), found {name} {found}; "
            f"fix: {fix}, then restart the kernel or process")


def installed(name: str) -> str | None:
    """The version of the distribution Python would import first (the first on sys.path), or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def require() -> None:
    """Raise LibraryVersionError (one line) for a library outside FLOORS, from package metadata (no import)."""
    for line in (problem(name, installed(name)) for name in FLOORS):
        if line:
            raise LibraryVersionError(line)


# what a record, the preflight and a benchmark run note as the libraries they ran with
LIBRARIES = ("torch", "transformers", "accelerate", "bitsandbytes", "mistral_common", "marimo",
             "pandas", "matplotlib", "numpy", "huggingface_hub")


def _imported(name: str) -> str:
    try:
        return getattr(importlib.import_module(name), "__version__", "installed")
    except Exception as exc:  # noqa: BLE001 - a broken import is a finding, not a crash
        return f"missing ({type(exc).__name__})"


def library_versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Python's, each of LIBRARIES' (imported, or 'missing (…)'), then each of `extra`'s (metadata, or 'not installed')."""
    return {"python": platform.python_version(), **{name: _imported(name) for name in LIBRARIES},
            **{name: installed(name) or "not installed" for name in extra}}


def git_commit() -> str | None:
    """The commit a record notes: RECORD_COMMIT (a GPU host's copy has no .git), else `git rev-parse HEAD`, or None."""
    given = os.environ.get("RECORD_COMMIT", "").strip()
    if given:
        return given
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent.parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
