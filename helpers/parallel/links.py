"""The links between GPUs, per catalogued GPU, from ``helpers/data/gpu_links.csv`` (apart from gpus.csv).

One row per (GPU, link): ``scope`` ``node`` (one server: NVLink, PCIe, Infinity Fabric; at most
GPUS_PER_SERVER = 8 GPUs, as DGX/HGX and MI300X platforms hold) or ``cluster`` (one InfiniBand NIC per GPU);
``figure`` in ``unit`` as its source prints it, ``direction`` ``both`` (NVIDIA's "NVLink 900 GB/s") or
``each`` (an InfiniBand port's 400 Gb/s): a ring sends one way at a time, so the model uses one direction;
``hop_latency_us`` one ring step, NCCL's hwLat (src/graph/tuning.cc, Ring/LL); "(pairs)" joins two GPUs only.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import checks
from ..formulas.gpus import get_gpu

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "gpu_links.csv"
KINDS = ("nvlink", "pcie", "infiniband", "infinity fabric")
UNITS = {"GB/s": 1e9, "Gb/s": 1e9 / 8}     # bytes per second of one unit
DIRECTIONS = ("each", "both")
GPUS_PER_SERVER = 8


@dataclass(frozen=True)
class Link:
    """One link a GPU talks over, as its source prints it; ``bandwidth`` is bytes per second each way."""

    gpu: str
    name: str
    scope: str
    figure: float
    unit: str
    direction: str
    hop_latency_us: float
    source: str = ""
    note: str = ""

    def __post_init__(self):
        assert self.unit in UNITS and self.direction in DIRECTIONS, (self.unit, self.direction)

    @property
    def bandwidth(self) -> float:
        return self.figure * UNITS[self.unit] / (2 if self.direction == "both" else 1)

    @property
    def bidirectional_gbs(self) -> float:
        return 2 * self.bandwidth / 1e9

    @property
    def hop_latency_s(self) -> float:
        return self.hop_latency_us * 1e-6

    @property
    def label(self) -> str:
        return f"{self.name}, {self.bandwidth / 1e9:,.0f} GB/s each way"


def custom_link(name: str, bandwidth_bytes_per_s: float, hop_latency_s: float, source: str = "measured") -> Link:
    """A link of given one-way bandwidth (B/s) and hop latency (s): e.g. the loopback measured here."""
    if not bandwidth_bytes_per_s > 0 or not hop_latency_s >= 0:
        raise ValueError(f"a link needs a positive bandwidth and a latency ≥ 0, got {bandwidth_bytes_per_s!r} B/s "
                         f"and {hop_latency_s!r} s")
    return Link("this machine", name, "node", bandwidth_bytes_per_s / 1e9, "GB/s", "each", hop_latency_s * 1e6, source)


@functools.lru_cache(maxsize=1)
def _rows() -> tuple[Link, ...]:
    rows = pd.read_csv(DATA_FILE, dtype=str, keep_default_na=False).to_dict("records")
    return tuple(Link(r["gpu"], r["link"], r["scope"], float(r["figure"]), r["unit"], r["direction"],
                      float(r["hop_latency_us"]), r["source"], r["note"]) for r in rows)


def links(gpu) -> list[Link]:
    """Every link catalogued for a GPU (a name or alias helpers.formulas.gpus knows), fastest first."""
    name = get_gpu(gpu).name
    out = [link for link in _rows() if link.gpu == name]
    if not out:
        raise ValueError(f"no links catalogued for {name}; see helpers/data/gpu_links.csv")
    return sorted(out, key=lambda link: -link.bandwidth)


def get_link(gpu, kind: str | None = None, gpus: int = 2) -> Link:
    """The link `gpus` GPUs talk over: of `kind` (nvlink, pcie, …) or, without it, the fastest in a server that
    joins that many, the cluster's beyond. ValueError when no catalogued link joins them."""
    gpus = checks.count(gpus, "the number of GPUs a link joins")
    candidates = links(gpu)
    name = get_gpu(gpu).name

    def joins(link: Link) -> bool:
        if link.scope == "node" and gpus > GPUS_PER_SERVER:
            return False
        return not ("(pairs)" in link.name and gpus > 2)

    if kind is None:
        for scope in ("node", "cluster"):
            for link in candidates:
                if link.scope == scope and joins(link):
                    return link
        raise ValueError(f"no catalogued link joins {gpus} {name} GPUs: one server holds at most {GPUS_PER_SERVER} "
                         "and the catalog has no link between servers for this GPU")
    want = str(kind).strip().lower()
    if want not in KINDS:
        raise ValueError(f"unknown link kind {str(kind)[:30]!r}; allowed: {', '.join(KINDS)}")
    for link in candidates:
        if want in link.name.lower() and joins(link):
            return link
    if gpus > GPUS_PER_SERVER and any(want in link.name.lower() for link in candidates):
        raise ValueError(f"{want} joins the GPUs of one server, at most {GPUS_PER_SERVER}; {gpus} {name} GPUs span "
                         f"{-(-gpus // GPUS_PER_SERVER)} servers: choose infiniband, or at most {GPUS_PER_SERVER} GPUs")
    have = ", ".join(link.name for link in candidates)
    raise ValueError(f"{name} has no {want} link for {gpus} GPUs in the catalog; it has: {have}")
