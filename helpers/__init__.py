"""helpers: the small package every workshop notebook imports.

One job per module (see ../shared/DESIGN.md): units, specs, memory, models, hardware,
timing, and one module per topic as the notebooks need them. Bytes and seconds inside.
"""
import logging as _logging

# bitsandbytes announces optional CPU kernels it did not find at import; the notebooks' readers
# need not see that on every run.
_logging.getLogger("bitsandbytes").setLevel(_logging.ERROR)

__version__ = "0.1.0"
