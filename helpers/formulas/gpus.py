"""The GPU catalog: memory, bandwidth, dense tensor FLOP/s and an on-demand price per GPU-hour,
each figure with its source, from the data file ``helpers/data/gpus.csv``.

Conventions of the file (checked by tests/test_gpus.py):
- ``memory_gb`` is the number on the vendor's label ("80 GB"). GPU memory comes in binary sizes — an
  H100's 80 GB is five HBM3 stacks of 16 GiB, 80 GiB — so the label is read as GiB (``memory_bytes`` =
  memory_gb × 2^30). What a program can plan with is a little less: what the device reports (CUDA's
  cudaMemGetInfo total, which vLLM multiplies by gpu_memory_utilization and PyTorch prints as "total
  capacity"): an H100 SXM reports 79.11 GiB, an H200 139.81 GiB. Those reported figures, each with its
  source, and the stacks × stack size of the HBM GPUs' datasheets are in ``helpers/data/gpu_memory.csv``;
  ``GPU.usable_memory_bytes`` uses the reported figure and, for a GPU without one, its label in GiB × the
  smallest share of the label that a GPU of the same memory kind (HBM, GDDR) reports (``reported_share``).
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
from dataclasses import asdict, dataclass, replace
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
    memory_type: str = ""                      # HBM2, HBM2e, HBM3, HBM3e, GDDR6, GDDR6X, GDDR7
    stacks: int | None = None                  # HBM stacks, from the datasheet or whitepaper
    stack_gib: float | None = None             # GiB per stack
    fallback_share: float = 1.0                # reported ÷ label (GiB) for a GPU without a reported figure
    fallback_from: str = ""                    # the GPU whose report gives that share

    @property
    def memory_kind(self) -> str:
        """"HBM" or "GDDR": the kind whose reported figures stand in for a GPU without one."""
        return "HBM" if self.memory_type.upper().startswith("HBM") else "GDDR"

    @property
    def memory_bytes(self) -> float:
        """The label's capacity: memory_gb read as GiB (× 2^30), as the chips hold it."""
        return self.memory_gb * GIB

    @property
    def usable_memory_bytes(self) -> float:
        """The memory a program can plan with: what the device reports (GiB × 2^30); without a reported
        figure, the label in GiB × fallback_share."""
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


def _memory_rows() -> dict[str, dict]:
    return {r["name"].strip(): r for r in pd.read_csv(MEMORY_FILE, dtype=str, keep_default_na=False).to_dict("records")}


@functools.lru_cache(maxsize=1)
def reported_memory() -> dict[str, tuple[float, str]]:
    """name -> (GiB the device reports, source), for each GPU of helpers/data/gpu_memory.csv that has one."""
    return {name: (_num(r["reported_gib"], "reported_gib", name), r["source"].strip())
            for name, r in _memory_rows().items() if r["reported_gib"].strip()}


def reported_share(gpus, kind: str) -> tuple[float, str]:
    """(share, name): the smallest reported ÷ label (GiB) among `gpus` of memory kind `kind` ("HBM" or
    "GDDR") that have a reported figure — what a GPU of that kind without one is planned with (the
    conservative side for "does it fit"). (1.0, "") when none has one."""
    shares = [(g.memory_reported_gib / g.memory_gb, g.name) for g in gpus
              if g.memory_reported_gib and g.memory_kind == kind]
    return min(shares) if shares else (1.0, "")


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[GPU, ...]:
    """Every catalogued GPU, in the file's order."""
    mem = _memory_rows()
    out = []
    for row in pd.read_csv(DATA_FILE, dtype=str, keep_default_na=False).to_dict("records"):
        name = row["name"].strip()
        m = mem.get(name, {})
        stacks = _num(m.get("stacks", ""), "stacks", name)
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
            memory_reported_gib=_num(m.get("reported_gib", ""), "reported_gib", name),
            memory_source=m.get("source", "").strip(),
            memory_type=m.get("memory_type", "").strip(),
            stacks=int(stacks) if stacks else None,
            stack_gib=_num(m.get("stack_gib", ""), "stack_gib", name),
        ))
    shares = {kind: reported_share(out, kind) for kind in ("HBM", "GDDR")}
    return tuple(replace(g, fallback_share=shares[g.memory_kind][0], fallback_from=shares[g.memory_kind][1])
                 for g in out)


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
