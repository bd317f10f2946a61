"""helpers: the small package every workshop notebook imports.

In layers (ARCHITECTURE.md, at the repository's root, is the map and tests/test_architecture.py keeps it
true): formulas in ``helpers.formulas`` (no torch), measurement in ``helpers.measure``, presentation in
``helpers.present``, and the families ``capacity``, ``serving``, ``decoding``, ``engines``, ``parallel``.
Bytes and seconds inside.
"""
import logging as _logging
import sys as _sys

from .versions import LibraryVersionError, require as _require

# An older transformers gives plausible, wrong numbers rather than an error (helpers/versions.py):
# stop here, in one line. Under `python -m helpers …` (the package is imported while argv[0] is
# still "-m") that line is the command line's: `error: …` and exit status 1, a fault of the environment.
try:
    _require()
except LibraryVersionError as _exc:
    if _sys.argv[:1] == ["-m"]:
        _sys.stderr.write(f"error: {_exc}\n")
        raise SystemExit(1) from None
    raise

# bitsandbytes announces optional CPU kernels it did not find at import; the notebooks' readers
# need not see that on every run.
_logging.getLogger("bitsandbytes").setLevel(_logging.ERROR)

__version__ = "0.1.0"
