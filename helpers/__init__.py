"""helpers: the small package every workshop notebook imports.

One job per module (see ../shared/DESIGN.md): units, specs, memory, models, hardware,
timing, and one module per topic as the notebooks need them. Bytes and seconds inside.
"""
__version__ = "0.1.0"
