"""helpers: the small package every workshop notebook imports, in layers (ARCHITECTURE.md is the map):
formulas (no torch), measure, present, and the families. Bytes and seconds inside.
"""
import logging as _logging
import sys as _sys

from .versions import LibraryVersionError, require as _require

# An older transformers gives plausible, wrong numbers (helpers/versions.py): stop here, in one line; under
# `python -m helpers` (argv[0] still "-m") as the command line's `error: …` and exit status 1.
try:
    _require()
except LibraryVersionError as _exc:
    if _sys.argv[:1] == ["-m"]:
        _sys.stderr.write(f"error: {_exc}\n")
        raise SystemExit(1) from None
    raise

# bitsandbytes announces optional CPU kernels it did not find at import: not the readers' business.
_logging.getLogger("bitsandbytes").setLevel(_logging.ERROR)
