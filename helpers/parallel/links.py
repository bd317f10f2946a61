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

    @property
    def bandwidth(self) -> float:
        return self.figure * UNITS[self.unit] / (2 if self.direction == "both" else 1)

    @property
    def label(self) -> str:
        return f"{self.name}, {self.bandwidth / 1e9:,.0f} GB/s each way"


def custom_link(name: str, bandwidth_bytes_per_s: float, hop_latency_s: float) -> Link:
    """A link of given one-way bandwidth (B/s) and hop latency (s): e.g. the loopback measured here."""
    return Link("this machine", name, "node", bandwidth_bytes_per_s / 1e9, "GB/s", "each", hop_latency_s * 1e6)


@functools.lru_cache(maxsize=1)
def _rows() -> tuple[Link, ...]:
    return tuple(Link(r["gpu"], r["link"], r["scope"], float(r["figure"]), r["unit"], r["direction"],
                      float(r["hop_latency_us"])) for r in pd.read_csv(DATA_FILE, dtype=str).to_dict("records"))


def links(gpu) -> list[Link]:
    """Every link catalogued for a GPU (a name or alias helpers.formulas.gpus knows), fastest first."""
    name = get_gpu(gpu).name
    out = sorted((link for link in _rows() if link.gpu == name), key=lambda link: -link.bandwidth)
    if not out:
        raise ValueError(f"no links catalogued for {name}; see helpers/data/gpu_links.csv")
    return out


def get_link(gpu, kind: str | Link | None = None, gpus: int = 2) -> Link:
    """The link `gpus` GPUs talk over: `kind` itself when a Link; of `kind` (nvlink, pcie, …); or, without it, the
    fastest in a server that joins that many, the cluster's beyond. ValueError when no catalogued link joins them."""
    if isinstance(kind, Link):
        return kind
    gpus = checks.count(gpus, "the number of GPUs a link joins")
    candidates, name = links(gpu), get_gpu(gpu).name
    joins = [lk for lk in candidates if not (lk.scope == "node" and gpus > GPUS_PER_SERVER)
             and not ("(pairs)" in lk.name and gpus > 2)]
    if kind is None:
        found = [lk for lk in joins if lk.scope == "node"] + [lk for lk in joins if lk.scope == "cluster"]
        if not found:
            raise ValueError(f"no catalogued link joins {gpus} {name} GPUs: one server holds at most {GPUS_PER_SERVER} "
                             "and the catalog has no link between servers for this GPU")
        return found[0]
    want = str(kind).strip().lower()
    if want not in KINDS:
        raise ValueError(f"unknown link kind {str(kind)[:30]!r}; allowed: {', '.join(KINDS)}")
    found = [lk for lk in joins if want in lk.name.lower()]
    if found:
        return found[0]
    if gpus > GPUS_PER_SERVER and any(want in lk.name.lower() for lk in candidates):
        raise ValueError(f"{want} joins the GPUs of one server, at most {GPUS_PER_SERVER}; {gpus} {name} GPUs span "
                         f"{-(-gpus // GPUS_PER_SERVER)} servers: choose infiniband, or at most {GPUS_PER_SERVER} GPUs")
    raise ValueError(f"{name} has no {want} link for {gpus} GPUs in the catalog; it has: "
                     f"{', '.join(lk.name for lk in candidates)}")
