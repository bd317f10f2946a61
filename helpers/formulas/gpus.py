"""The GPU catalog: memory, bandwidth, dense tensor FLOP/s and an on-demand price per GPU-hour, each with its
source (helpers/data/gpus.csv), and the memory each device reports (helpers/data/gpu_memory.csv).
``memory_gb`` is the label read as GiB (an H100's 80 GB is five HBM3 stacks of 16 GiB); a program plans with
what the device reports (cudaMemGetInfo's total: 79.11 GiB on an H100 SXM), a GPU without a reported figure with
its label × the smallest reported share of its memory kind. FLOP/s are **dense** (half a 2:4-sparse figure).
"""
from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

DATA_FILE = Path(__file__).parents[1] / "data" / "gpus.csv"
MEMORY_FILE = Path(__file__).parents[1] / "data" / "gpu_memory.csv"
GIB = 2**30
_NUMBERS = ("memory_gb", "bandwidth_tbs", "bf16_tflops", "fp8_tflops", "usd_per_hour", "memory_reported_gib",
            "stacks", "stack_gib")


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
    memory_type: str = ""                      # HBM2, HBM2e, HBM3, HBM3e, GDDR6, GDDR6X, GDDR7
    stacks: int | None = None                  # HBM stacks, from the datasheet or whitepaper
    stack_gib: float | None = None             # GiB per stack
    fallback_share: float = 1.0                # reported ÷ label (GiB) for a GPU without a reported figure
    fallback_from: str = ""                    # the GPU whose report gives that share

    @property
    def memory_kind(self) -> str:
        return "HBM" if self.memory_type.upper().startswith("HBM") else "GDDR"

    @property
    def memory_bytes(self) -> float:
        """The label's capacity: memory_gb read as GiB (× 2^30), as the chips hold it."""
        return self.memory_gb * GIB

    @property
    def usable_memory_bytes(self) -> float:
        """What the device reports, or without a reported figure the label × fallback_share."""
        if self.memory_reported_gib:
            return self.memory_reported_gib * GIB
        return self.memory_bytes * self.fallback_share

    @property
    def usable_memory_note(self) -> str:
        if self.memory_reported_gib:
            return (f"{self.memory_reported_gib:g} GiB as the device reports it (labelled {self.memory_gb:g} GB, "
                    f"{self.memory_gb:g} GiB); source: {self.memory_source}")
        return (f"no reported figure found: the label, {self.memory_gb:g} GB read as {self.memory_gb:g} GiB, × "
                f"{self.fallback_share:.4f} (the smallest share of its label a {self.memory_kind} GPU reports, "
                f"{self.fallback_from}'s) = {self.usable_memory_bytes / GIB:,.2f} GiB")

    @property
    def bandwidth(self) -> float:
        return self.bandwidth_tbs * 1e12

    def peak_flops(self, weight_dtype: str = "bf16") -> tuple[float, str]:
        """(dense tensor FLOP/s, which peak): FP8's for fp8 weights on a GPU that has it, else the 16-bit one
        (int8/nf4/mxfp4 weights are dequantized to bf16 for the matmul in the common kernels)."""
        if weight_dtype == "fp8" and self.fp8_tflops:
            return self.fp8_tflops * 1e12, "fp8"
        return self.bf16_tflops * 1e12, "bf16" if self.name != "T4" else "fp16"


def _key(name: str) -> str:
    """Lookup key: lower case, without spaces, hyphens, underscores or dots ('H100-SXM' -> 'h100sxm')."""
    return re.sub(r"[\s\-_.]+", "", str(name).strip().lower())


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[GPU, ...]:
    """Every catalogued GPU, in the file's order, with its reported memory (gpu_memory.csv)."""
    memory = pd.read_csv(MEMORY_FILE, dtype=str, keep_default_na=False).rename(
        columns={"reported_gib": "memory_reported_gib", "source": "memory_source"})
    rows = pd.read_csv(DATA_FILE, dtype=str, keep_default_na=False).merge(memory, on="name", how="left").fillna("")
    out = []
    for row in rows.to_dict("records"):
        d = {k: (float(v) if v.strip() else None) if k in _NUMBERS else v.strip()
             for k, v in row.items() if k in GPU.__dataclass_fields__}
        out.append(GPU(**{**d, "aliases": tuple(a.strip() for a in d["aliases"].split(";") if a.strip()),
                          "stacks": int(d["stacks"]) if d["stacks"] else None}))
    # a GPU without a reported figure: the smallest reported ÷ label of its memory kind (1.0 when none has one)
    shares = {kind: min([(g.memory_reported_gib / g.memory_gb, g.name) for g in out
                         if g.memory_reported_gib and g.memory_kind == kind], default=(1.0, ""))
              for kind in ("HBM", "GDDR")}
    return tuple(replace(g, fallback_share=shares[g.memory_kind][0], fallback_from=shares[g.memory_kind][1])
                 for g in out)


def names() -> list[str]:
    return [g.name for g in catalog()]


def get_gpu(name: str | GPU) -> GPU:
    """The catalogued GPU of a name or alias, case and punctuation ignored ('h100-sxm', 'H100 SXM'); a
    ValueError listing the choices otherwise."""
    if isinstance(name, GPU):
        return name
    key = _key(name)
    for g in catalog():
        if key == _key(g.name) or key in {_key(a) for a in g.aliases}:
            return g
    raise ValueError(f"unknown GPU {str(name)!r}; choose one of: {', '.join(names())}")


def datasheet_gpu(device: str, device_name: str | None) -> GPU | None:
    """The catalogued GPU whose datasheet describes this device (the longest catalogued name or alias in the
    name it reports: 'NVIDIA A100-SXM4-80GB' → 'A100 80GB'; the H100 SXM5 reports 'H100 80GB HBM3', its alias, per
    nvidia-smi), or None: a CPU, an Apple GPU, an uncatalogued one."""
    if not str(device).startswith("cuda") or not device_name:
        return None
    key = _key(device_name)
    found = [(len(k), g) for g in catalog() for k in (_key(g.name), *map(_key, g.aliases)) if k and k in key]
    return max(found, key=lambda f: f[0], default=(0, None))[1]


def catalog_label() -> str:
    """What a plot or table built on the catalog says about it: the months its prices were read."""
    months = sorted({g.price_read for g in catalog() if re.fullmatch(r"\d{4}-\d{2}", g.price_read)}) or ["unknown"]
    read = months[0] if months[0] == months[-1] else f"{months[0]} to {months[-1]}"
    return f"GPU catalog helpers/data/gpus.csv, prices read {read}"


def catalog_rows() -> list[dict]:
    """The catalog as plain dicts (the `gpus` command's JSON)."""
    return [{**asdict(g), "aliases": list(g.aliases), "usable_memory_bytes": g.usable_memory_bytes}
            for g in catalog()]


def providers() -> list[str]:
    """The providers whose prices the catalog holds, in the file's order."""
    return list(dict.fromkeys(g.price_provider for g in catalog()))
