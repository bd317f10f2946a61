"""Bytes of real tensors: a transformers cache, a loaded model's weights, quantization states and buffers; a tensor
seen twice, or a view of storage already counted, counts once."""
from __future__ import annotations

from typing import Iterable


def _unique_bytes(tensors: Iterable) -> int:
    """Bytes of the tensors among `tensors` (anything else, None included, is skipped), each storage once."""
    import torch

    seen: set[tuple[int, int]] = set()
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            continue
        key = (t.data_ptr(), t.nbytes)
        if key in seen and key[0] != 0:
            continue
        seen.add(key)
        total += t.nbytes
    return total


def plain_tensors(value) -> list:
    """The plain tensors inside a stored value: a tensor, a wrapping subclass (quanto's QTensor, __tensor_flatten__),
    or a tuple, list or dict of them (transformers' fp8 and HQQ quantized caches)."""
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
    """Bytes of the tensors a transformers Cache holds: keys, values, quantized stores with their scales."""
    import torch

    out = []
    for layer in getattr(cache, "layers", []):
        for name, value in vars(layer).items():
            if name.startswith("_quantized"):
                out.extend(plain_tensors(value))
            elif isinstance(value, torch.Tensor) and value.dim() >= 3 and not name.startswith("_sliding"):
                out.append(value)
    return _unique_bytes(out)


def measured_weight_bytes(model) -> int:
    """Parameters as stored (packed when quantized) plus bitsandbytes' states (absmax, code books, int8 row scales)."""
    tensors = []
    for p in model.parameters():
        qs = getattr(p, "quant_state", None)
        s2 = getattr(qs, "state2", None)
        tensors += [p, getattr(qs, "absmax", None), getattr(qs, "code", None), getattr(qs, "offset", None),
                    getattr(s2, "absmax", None), getattr(s2, "code", None), getattr(p, "SCB", None)]
    # bnb's Linear8bitLt keeps SCB on its state too
    return _unique_bytes(tensors + [getattr(getattr(m, "state", None), "SCB", None) for m in model.modules()])


def measured_model_bytes(model) -> int:
    """The model's own footprint: its weights and buffers (rotary tables and the like)."""
    return measured_weight_bytes(model) + _unique_bytes(model.buffers())
