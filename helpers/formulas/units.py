"""Units: bytes and seconds inside, GB (10**9) and GiB (2**30) both labelled where shown; only the functions
here turn bytes and counts into text."""
from __future__ import annotations

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

# Bytes per element of each storage dtype: int4/nf4/mxfp4 pack two elements per byte, int2 (KIVI's 2-bit KV
# cache, transformers' QuantizedCache nbits=2) four; scales are counted by helpers.formulas.memory.
DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5,
                                 "int2": 0.25, "nf4": 0.5, "mxfp4": 0.5}
FLOAT_DTYPES = ("fp32", "bf16", "fp16")   # the dtypes torch computes in here (helpers.measure.dtypes.torch_dtype)

_ALIASES = {"float32": "fp32", "float": "fp32", "f32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
            "f16": "fp16", "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e4m3": "fp8", "fp8_e4m3": "fp8",
            "e4m3": "fp8", "e4m3fn": "fp8", "uint4": "int4", "fp4": "mxfp4", "mx_fp4": "mxfp4", "nf4_dq": "nf4-dq",
            "nf4dq": "nf4-dq"}


def normalize_dtype(name: str, allowed: tuple[str, ...] | None = None) -> str:
    """Canonical short name of a dtype, whatever the spelling ('bfloat16', 'BF16', 'torch.bfloat16' -> 'bf16');
    a ValueError listing what is allowed."""
    allowed = allowed or tuple(DTYPE_BYTES)
    key = str(name).strip().lower().replace("-", "_").removeprefix("torch.")
    key = _ALIASES.get(key, key).replace("_", "-")
    if key not in allowed:
        shown = repr(name) if len(repr(name)) <= 40 else repr(name)[:40] + "…"
        raise ValueError(f"unknown dtype {shown}; allowed: {', '.join(allowed)} (also spelled e.g. bfloat16, "
                         "float16, float32)")
    return key


def dtype_bytes(name: str) -> float:
    """Bytes per element of a dtype name (see DTYPE_BYTES)."""
    return DTYPE_BYTES[normalize_dtype(name)]


def _scaled(n: float, units) -> str:
    """n in the largest of `units` ((name, size), largest first) it reaches: '14.48 GB', '128 KiB', '512 B'."""
    unit, size = next(((u, s) for u, s in units if abs(n) >= s), ("B", 1))
    x = n / size
    return f"{x:,.0f} {unit}" if x >= 100 or float(x).is_integer() else f"{x:,.2f} {unit}"


def fmt_si(n: float) -> str:
    """Bytes in decimal units: 131072 -> '131 kB'."""
    return _scaled(n, (("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB)))


def fmt_iec(n: float) -> str:
    """Bytes in binary units: 131072 -> '128 KiB'."""
    return _scaled(n, (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)))


def fmt_bytes(n: float) -> str:
    """Bytes shown three ways, so no reader confuses kB with KiB: '131,072 B = 128 KiB = 131 kB'."""
    exact = f"{n:,.0f} B" if float(n).is_integer() else f"{n:,.1f} B"
    return exact if abs(n) < KB else f"{exact} = {fmt_iec(n)} = {fmt_si(n)}"

