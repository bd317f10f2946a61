"""The library versions helpers cannot run correctly without, checked when ``helpers`` is imported, and the
versions and commit a record notes (library_versions, git_commit; helpers.measure.hardware.measured_on puts
them in every record).

An older library here does not always fail: it can give plausible, wrong numbers. transformers 5.24
renamed the model forward's ``past_key_values=`` to ``cache=`` (read in every release's
``models/mistral/modeling_mistral.py``: 5.17 to 5.23 take ``past_key_values``, 5.24 takes ``cache``
and keeps the old name as a deprecated alias). Under 5.23 or older, ``model(..., cache=cache)`` falls
into ``**kwargs`` and is ignored: every decode step runs without its KV history, and its timings look
fine (helpers.measure.timing, workloads, decoding, serving, breakdown all pass ``cache=``). transformers 5.24
in turn turns PyTorch off below 2.6 with only a logged warning (``utils/import_utils.py``,
``is_torch_available``). So ``import helpers`` stops on a GPU host, on Colab and on a laptop alike,
with one line: the version found, the version needed, and the fix.

requirements.txt states the same floors (tests/test_versions.py holds them together); torch is not in
it (the host's build is kept, scripts/setup.sh installs a CPU build elsewhere).
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
    """The release numbers of a version string: '5.24.0' -> (5, 24, 0), '2.13.0+cpu' -> (2, 13, 0),
    '5.25.0.dev0' -> (5, 25, 0)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    if not m:
        raise ValueError(f"not a version number: {version!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def requirement(name: str) -> str:
    """The pip requirement for one floor: 'transformers>=5.24,<6'."""
    low, high, _ = FLOORS[name]
    return f"{name}>={low}" + (f",<{high}" if high else "")


def problem(name: str, found: str | None) -> str | None:
    """One line saying why `found` (a version of `name`, None when not installed) will not do, or None
    when it will. A library that is not installed is not this check's business: importing it fails
    loudly where it is used."""
    if found is None:
        return None
    low, high, why = FLOORS[name]
    v = version_tuple(found)
    if v >= version_tuple(low) and (high is None or v < version_tuple(high)):
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
    """Raise LibraryVersionError (one line) when an installed library is outside FLOORS. Reads package
    metadata only: it imports neither torch nor transformers."""
    for name in FLOORS:
        line = problem(name, installed(name))
        if line:
            raise LibraryVersionError(line)


# what a record, the preflight and a benchmark run note as the libraries they ran with
LIBRARIES = ("torch", "transformers", "accelerate", "bitsandbytes", "mistral_common", "marimo",
             "pandas", "matplotlib", "numpy", "huggingface_hub")


def library_versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Python's version and each of LIBRARIES' (imported to read it; 'missing (...)' when it does not import),
    then each distribution named in `extra` (the engine benchmark's servers and clients: read from package
    metadata, never imported; 'not installed' when absent)."""
    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            mod = importlib.import_module(name)
            out[name] = getattr(mod, "__version__", "installed")
        except Exception as exc:  # noqa: BLE001 - a broken import is a finding, not a crash
            out[name] = f"missing ({type(exc).__name__})"
    if isinstance(extra, str):
        raise ValueError(f"extra is a tuple of package names, got the string {extra[:40]!r}")
    for name in extra:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a package name is a non-empty string, got {name!r}")
        out[name] = installed(name) or "not installed"
    return out


def git_commit() -> str | None:
    """The commit this checkout is at, which every record notes: RECORD_COMMIT when set (a GPU host gets a
    copy of the files, not the repository), else `git rev-parse HEAD`; None outside a git checkout."""
    given = os.environ.get("RECORD_COMMIT", "").strip()
    if given:
        return given
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent.parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None

