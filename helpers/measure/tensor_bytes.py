"""Bytes of real tensors, counted: what a transformers cache holds now, and a loaded model's weights,
quantization states and buffers — held equal to helpers.formulas.memory by the tests, byte for byte. A tensor
seen twice, or a view of storage already counted, counts once.
"""
from __future__ import annotations

from typing import Iterable


def _tensor_bytes(t) -> int:
    return t.numel() * t.element_size()


def _unique_bytes(tensors: Iterable) -> int:
    import torch

    seen: set[tuple[int, int]] = set()
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            continue
        key = (t.data_ptr(), _tensor_bytes(t))
        if key in seen and key[0] != 0:
            continue
        seen.add(key)
        total += _tensor_bytes(t)
    return total


def plain_tensors(value) -> list:
    """The plain tensors inside a stored value: a tensor; a tensor subclass that wraps others (optimum-quanto's
    packed QTensor, flattened with __tensor_flatten__); or a tuple, list or dict of them (transformers' fp8 and
    HQQ quantized caches store (data, scale) and (data, {scale, zero, …}))."""
    import torch

    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor and hasattr(value, "__tensor_flatten__"):
            names = value.__tensor_flatten__()[0]
            return [t for n in names for t in plain_tensors(getattr(value, n))]
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in plain_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in plain_tensors(v)]
    return []


def measured_cache_bytes(cache) -> int:
    """Bytes of the tensors a transformers Cache holds, layer by layer (keys, values, and quantized stores with
    their scales and zero points)."""
    import torch

    out = []
    for layer in getattr(cache, "layers", []):
        for name, value in vars(layer).items():
            if name.startswith("_quantized"):
                out.extend(plain_tensors(value))
            elif isinstance(value, torch.Tensor) and value.dim() >= 3 and not name.startswith("_sliding"):
                out.append(value)
    return _unique_bytes(out)


def _quant_state_tensors(p) -> list:
    qs = getattr(p, "quant_state", None)
    out = []
    if qs is not None:
        out += [getattr(qs, "absmax", None), getattr(qs, "code", None), getattr(qs, "offset", None)]
        s2 = getattr(qs, "state2", None)
        if s2 is not None:
            out += [getattr(s2, "absmax", None), getattr(s2, "code", None)]
    scb = getattr(p, "SCB", None)
    if scb is not None:
        out.append(scb)
    return [t for t in out if t is not None]


def measured_weight_bytes(model) -> int:
    """Bytes of a loaded model's weights: parameters as stored (packed when quantized) plus bitsandbytes'
    quantization states (absmax, code books, int8 row scales)."""
    tensors = []
    for p in model.parameters():
        tensors.append(p)
        tensors += _quant_state_tensors(p)
    for module in model.modules():
        state = getattr(module, "state", None)  # bnb Linear8bitLt keeps SCB on its state too
        scb = getattr(state, "SCB", None)
        if scb is not None:
            tensors.append(scb)
    return _unique_bytes(tensors)


def measured_model_bytes(model) -> int:
    """The model's own footprint: its weights (with quantization states) and buffers (rotary tables and the
    like), not the device's total."""
    return measured_weight_bytes(model) + _unique_bytes(model.buffers())
