"""Formulas: what things cost in bytes, FLOPs and seconds, and the GPU catalog. No torch, no matplotlib (the
parameter count asks transformers to build the architecture on the meta device, inside that one function).
"""
