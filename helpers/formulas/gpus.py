"""The GPU catalog: memory, bandwidth, dense tensor FLOP/s and an on-demand price per GPU-hour,
each figure with its source, from the data file ``helpers/data/gpus.csv``.

Conventions of the file (checked by tests/test_gpus.py):
- ``memory_gb`` is the vendor's label in GB (10^9 B). What a program can plan with is what the device
  reports (CUDA's cudaMemGetInfo total, which vLLM multiplies by gpu_memory_utilization and PyTorch
  prints as "total capacity"): an H100 labelled "80 GB" reports 79.11 GiB = 84.9·10^9 B, an H200
  labelled "141 GB" 139.81 GiB = 150.1·10^9 B. Those reported figures, each with its source, are in
  ``helpers/data/gpu_memory.csv``; ``GPU.usable_memory_bytes`` uses them, and the label × 10^9 (the
  conservative side for "does it fit") where none was found.
- ``bandwidth_tbs`` is peak memory bandwidth in TB/s (10^12 B/s), from the vendor's sheet.
- ``bf16_tflops`` / ``fp8_tflops`` are **dense** tensor-core TFLOP/s (10^12). Vendors print several
  of these with 2:4 structured sparsity; the file stores half of those. ``fp8_tflops`` is empty
  where the GPU has no FP8 (T4, A10G, A100). T4 has no BF16: its figure is FP16.
- ``usd_per_hour`` is one typical on-demand price per GPU-hour, with the provider, the product, the
  month it was read (``price_read``), where (``price_source``) and how (``price_note``). Prices
  move weekly; they were read from stored copies of published pages, not live.
"""
from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

DATA_FILE = Path(__file__).parents[1] / "data" / "gpus.csv"
MEMORY_FILE = Path(__file__).parents[1] / "data" / "gpu_memory.csv"
GIB = 2**30


@dataclass(frozen=True)
class GPU:
    """One catalogued GPU. Units as in the file; properties give bytes, B/s and FLOP/s."""

    name: str
    aliases: tuple[str, ...]
    memory_gb: float
    bandwidth_tbs: float
    bf16_tflops: float
    fp8_tflops: float | None
    spec_source: str
    spec_note: str
    usd_per_hour: float
    price_provider: str
    price_product: str
    price_read: str
    price_source: str
    price_note: str
    memory_reported_gib: float | None = None   # what CUDA reports (cudaMemGetInfo total), GiB
    memory_source: str = ""

    @property
    def memory_bytes(self) -> float:
        """The vendor's label in bytes (memory_gb × 10^9)."""
        return self.memory_gb * 1e9

    @property
    def usable_memory_bytes(self) -> float:
        """The memory a program can plan with: what the device reports (GiB × 2^30), else the label."""
        return self.memory_reported_gib * GIB if self.memory_reported_gib else self.memory_bytes

    @property
    def usable_memory_note(self) -> str:
        if self.memory_reported_gib:
            return (f"{self.memory_reported_gib:g} GiB as the device reports it (labelled {self.memory_gb:g} GB); "
                    f"source: {self.memory_source}")
        return f"no reported figure found: the label, {self.memory_gb:g} GB (10^9 B), is used"

    @property
    def bandwidth(self) -> float:
        """Peak memory bandwidth in bytes per second."""
        return self.bandwidth_tbs * 1e12

    @property
    def has_fp8(self) -> bool:
        return self.fp8_tflops is not None

    def peak_flops(self, weight_dtype: str = "bf16") -> tuple[float, str]:
        """(dense tensor FLOP/s, which peak): the FP8 peak when the weights are fp8 and the GPU has
        FP8 tensor cores, else the BF16/FP16 peak (int8/nf4/mxfp4 weights are dequantized to bf16
        for the matmul in the common kernels, so they run at the 16-bit rate)."""
        if weight_dtype == "fp8" and self.fp8_tflops:
            return self.fp8_tflops * 1e12, "fp8"
        return self.bf16_tflops * 1e12, "bf16" if self.name != "T4" else "fp16"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["aliases"] = list(self.aliases)
        return d


def _key(name: str) -> str:
    """Lookup key: lower case, without spaces, hyphens, underscores or dots ('H100-SXM' -> 'h100sxm')."""
    return re.sub(r"[\s\-_.]+", "", str(name).strip().lower())


def _num(text: str, field: str, name: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{DATA_FILE.name}: {name}: {field} is not a number: {text!r}") from None


@functools.lru_cache(maxsize=1)
def reported_memory() -> dict[str, tuple[float, str]]:
    """name -> (GiB the device reports, source), from helpers/data/gpu_memory.csv."""
    return {r["name"].strip(): (_num(r["reported_gib"], "reported_gib", r["name"]), r["source"].strip())
            for r in pd.read_csv(MEMORY_FILE, dtype=str, keep_default_na=False).to_dict("records")}


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[GPU, ...]:
    """Every catalogued GPU, in the file's order."""
    reported = reported_memory()
    out = []
    for row in pd.read_csv(DATA_FILE, dtype=str, keep_default_na=False).to_dict("records"):
        name = row["name"].strip()
        out.append(GPU(
            name=name,
            aliases=tuple(a.strip() for a in row["aliases"].split(";") if a.strip()),
            memory_gb=_num(row["memory_gb"], "memory_gb", name),
            bandwidth_tbs=_num(row["bandwidth_tbs"], "bandwidth_tbs", name),
            bf16_tflops=_num(row["bf16_tflops"], "bf16_tflops", name),
            fp8_tflops=_num(row["fp8_tflops"], "fp8_tflops", name),
            spec_source=row["spec_source"].strip(),
            spec_note=row["spec_note"].strip(),
            usd_per_hour=_num(row["usd_per_hour"], "usd_per_hour", name),
            price_provider=row["price_provider"].strip(),
            price_product=row["price_product"].strip(),
            price_read=row["price_read"].strip(),
            price_source=row["price_source"].strip(),
            price_note=row["price_note"].strip(),
            memory_reported_gib=reported.get(name, (None, ""))[0],
            memory_source=reported.get(name, (None, ""))[1],
        ))
    return tuple(out)


def names() -> list[str]:
    return [g.name for g in catalog()]


def get_gpu(name: str | GPU) -> GPU:
    """The catalogued GPU of a name or alias, case and punctuation ignored ('h100-sxm', 'H100 SXM').

    Raises ValueError listing the choices.
    """
    if isinstance(name, GPU):
        return name
    key = _key(name)
    for g in catalog():
        if key == _key(g.name) or key in {_key(a) for a in g.aliases}:
            return g
    raise ValueError(f"unknown GPU {str(name)!r}; choose one of: {', '.join(names())}")


# CUDA's names that contain no catalogued name or alias: the H100 SXM5 reports itself as "H100 80GB HBM3"
# (the PCIe card as "H100 PCIe"), per nvidia-smi on each.
_CUDA_NAMES = {"h10080gbhbm3": "H100 SXM"}


def datasheet_gpu(device: str, device_name: str | None) -> GPU | None:
    """The catalogued GPU (helpers.formulas.gpus) whose datasheet describes this device, or None: a CPU, an
    Apple GPU, or a CUDA device the catalog lacks. Matches the longest catalogued name or alias
    contained in the name the device reports ('NVIDIA A100-SXM4-80GB' → 'A100 80GB')."""
    if not str(device).startswith("cuda") or not device_name:
        return None
    key = _key(device_name)
    for cuda_key, name in _CUDA_NAMES.items():
        if cuda_key in key:
            return next(g for g in catalog() if g.name == name)
    best, length = None, 0
    for g in catalog():
        for k in (_key(g.name), *(_key(a) for a in g.aliases)):
            if k and k in key and len(k) > length:
                best, length = g, len(k)
    return best


def catalog_date() -> str:
    """The months the catalog's prices were read, e.g. '2026-05 to 2026-09'."""
    months = sorted({g.price_read for g in catalog() if re.fullmatch(r"\d{4}-\d{2}", g.price_read)})
    if not months:
        return "unknown"
    return months[0] if months[0] == months[-1] else f"{months[0]} to {months[-1]}"


def catalog_label() -> str:
    """What a plot or table built on the catalog says about it."""
    return f"GPU catalog helpers/data/gpus.csv, prices read {catalog_date()}"


def catalog_rows() -> list[dict]:
    """The catalog as plain dicts (the `gpus` command's JSON)."""
    return [{**g.to_dict(), "usable_memory_bytes": g.usable_memory_bytes} for g in catalog()]


def providers() -> list[str]:
    """The providers whose prices the catalog holds, in the file's order."""
    return list(dict.fromkeys(g.price_provider for g in catalog()))
