"""Dtype names to torch dtypes and back: the one place a short name ('bf16') becomes a torch.dtype.

The names and their byte sizes are helpers.formulas.units (DTYPE_BYTES, normalize_dtype, FLOAT_DTYPES).
"""
from __future__ import annotations

from ..formulas.units import FLOAT_DTYPES, normalize_dtype


def torch_dtype(name: str):
    """The torch dtype of a floating-point dtype name, any spelling: 'bf16', 'bfloat16' -> torch.bfloat16.
    ValueError for anything but fp32, bf16 and fp16."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[normalize_dtype(name, FLOAT_DTYPES)]


def torch_dtype_name(dtype) -> str:
    """Short name of a torch dtype, e.g. torch.bfloat16 -> 'bf16'."""
    return normalize_dtype(str(dtype))
