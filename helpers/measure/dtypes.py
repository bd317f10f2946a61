"""Dtype names to torch dtypes: the one place a short name ('bf16') becomes a torch.dtype (the names and their
sizes: helpers.formulas.units)."""
from __future__ import annotations

from ..formulas.units import FLOAT_DTYPES, normalize_dtype


def torch_dtype(name: str):
    """The torch dtype of a floating-point dtype name, any spelling ('bf16', 'bfloat16'); ValueError for others."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[normalize_dtype(name, FLOAT_DTYPES)]
