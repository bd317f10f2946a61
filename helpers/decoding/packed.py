"""Weights prepacked for the CPU's matrix library: what CPU inference stacks do before they decode.

A decode step at batch 1 is a matrix–vector product per weight, as fast as its kernel streams the weights.
``nn.Linear`` on a CPU calls MKL, whose fp32 matrix–vector product runs on one thread (about half what the
memory delivers on 2 cores); oneDNN (``torch.ops.mkldnn``, what ``torch.compile``'s CPU backend emits) reads
a weight it has reordered once into its blocked layout with every core. ``packed_weights(model)`` swaps each
``nn.Linear`` for one on its prepacked weight within a ``with`` block; the copies are kept per model (the
linear weights' bytes again). Logits agree to about 1e-5, greedy tokens exactly (tests/test_decoding.py).
"""
from __future__ import annotations

from contextlib import contextmanager

PACKABLE_DTYPES = ("fp32", "bf16")
_HELD = "_workshop_packed_linears"   # model.__dict__ key: {module path: PackedLinear}, made once


def available(device: str, dtype: str) -> tuple[bool, str]:
    """(whether packed weights can run here, why not when they cannot)."""
    import torch

    if not str(device).startswith("cpu"):
        return False, (f"prepacking is a CPU technique; on {device} the vendor library (cuBLAS) already reads "
                       "the weights at full bandwidth as they are")
    if dtype not in PACKABLE_DTYPES:
        return False, f"oneDNN prepacking here covers {' and '.join(PACKABLE_DTYPES)} weights, not {dtype}"
    if not torch.backends.mkldnn.is_available():
        return False, "this PyTorch build has no oneDNN (mkldnn) backend"
    ops = torch.ops.mkldnn
    if not all(hasattr(ops, name) for name in ("_reorder_linear_weight", "_linear_pointwise")):
        return False, "this PyTorch build lacks oneDNN's linear ops (torch.ops.mkldnn._linear_pointwise)"
    return True, ""


_WEIGHTS: dict[int, object] = {}     # key -> packed weight, for the compiled path's custom op
_OP = None


def _compiled_op():
    """``workshop::packed_linear(x, key)``: the packed product as a custom operator, so that
    ``torch.compile`` can trace a model whose weights are oneDNN's opaque tensors (it cannot fake them):
    the graph holds the key, the weight stays here. Registered once per process."""
    global _OP
    if _OP is None:
        import torch

        @torch.library.custom_op("workshop::packed_linear", mutates_args=(), schema="(Tensor x, int key) -> Tensor")
        def packed_linear(x: torch.Tensor, key: int) -> torch.Tensor:
            return torch.ops.mkldnn._linear_pointwise(x, _WEIGHTS[key], None, "none", [], "")

        @packed_linear.register_fake
        def _(x, key):
            return x.new_empty((*x.shape[:-1], _WEIGHTS[key].shape[0]))

        _OP = packed_linear
    return _OP


def _module():
    import torch

    class PackedLinear(torch.nn.Module):
        """``y = x Wᵀ + b`` through oneDNN, on a weight reordered once into oneDNN's blocked layout.
        Run eagerly it calls oneDNN directly; traced by ``torch.compile`` it calls the custom operator."""

        def __init__(self, linear: torch.nn.Linear, batch_hint: int = 1):
            super().__init__()
            with torch.no_grad():
                self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), batch_hint)
            self.bias = None if linear.bias is None else linear.bias.detach()
            self.in_features, self.out_features = linear.in_features, linear.out_features
            self.key = id(self)
            _WEIGHTS[self.key] = self.packed
            self._op = _compiled_op()          # registered here, never while a compiler traces

        def forward(self, x):
            if torch.compiler.is_compiling():
                y = self._op(x, self.key)
                return y if self.bias is None else y + self.bias
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

        def extra_repr(self) -> str:
            return f"in_features={self.in_features}, out_features={self.out_features}, oneDNN prepacked"

    return PackedLinear


def _packed_modules(model) -> dict:
    import torch

    held = model.__dict__.get(_HELD)
    if held is None:
        packed_linear = _module()
        held = {name: packed_linear(mod) for name, mod in model.named_modules() if type(mod) is torch.nn.Linear}
        model.__dict__[_HELD] = held
    return held


COMPILED = "_workshop_compiled_packed"   # model.__dict__ key of a compiled forward over packed weights


def release(model) -> None:
    """Drop the packed copies of a model's weights (and a compiled forward built over them)."""
    for packed in (model.__dict__.pop(_HELD, None) or {}).values():
        _WEIGHTS.pop(packed.key, None)
    model.__dict__.pop(COMPILED, None)


@contextmanager
def packed_weights(model, device: str = "cpu", dtype: str = "fp32"):
    """Within the block, every ``nn.Linear`` of `model` runs through oneDNN on a prepacked weight."""
    ok, why = available(device, dtype)
    if not ok:
        raise ValueError(f"packed weights cannot run here: {why}")
    swaps = _packed_modules(model)
    originals = {}
    try:
        for name, packed in swaps.items():
            parent_name, _, attr = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            originals[name] = (parent, attr, getattr(parent, attr))
            setattr(parent, attr, packed)
        yield model
    finally:
        for parent, attr, original in originals.values():
            setattr(parent, attr, original)
