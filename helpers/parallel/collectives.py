"""What collectives cost over a link: the alpha–beta model NCCL uses to pick an algorithm (NVIDIA/nccl,
src/graph/tuning.cc: latency + bytes ÷ bandwidth; base 3.6 µs and the hops' hwLat, Ring with the LL
protocol small messages use). B is the one-way bandwidth; one GPU costs nothing.

    all_reduce = base + 2·(N−1) · hop + 2·(N−1)/N · M ÷ B   ring: reduce-scatter then all-gather (Patarasuk &
                                                            Yuan 2009, J. Parallel Distrib. Comput. 69(2))
    all_to_all = base + (N−1) · hop + (N−1)/N · M ÷ B       each GPU keeps 1/N of its M bytes (experts)
    send       = base + hop + M ÷ B                         point to point (a stage's activations, a KV cache)
"""
from __future__ import annotations

from dataclasses import dataclass

from .links import Link

BASE_LATENCY_S = 3.6e-6   # NCCL tuning.cc (commit 01afd20a) baseLat, Ring / LL


def all_reduce_s(message_bytes: float, n: int, link: Link, base_s: float = BASE_LATENCY_S) -> float:
    """Seconds of one ring all-reduce of `message_bytes` over `n` GPUs joined by `link`."""
    return 0.0 if n == 1 else all_reduce_latency_s(n, link, base_s) + all_reduce_wire_bytes(message_bytes, n) / link.bandwidth


def all_reduce_wire_bytes(message_bytes: float, n: int) -> float:
    """Bytes each GPU sends in a ring all-reduce: 2·(N−1)/N of the message."""
    return 2 * (n - 1) / n * message_bytes


def all_reduce_latency_s(n: int, link: Link, base_s: float = BASE_LATENCY_S) -> float:
    """The part of a ring all-reduce that does not depend on the message: base + 2·(N−1) hops."""
    return 0.0 if n == 1 else base_s + 2 * (n - 1) * (link.hop_latency_us * 1e-6)


def all_reduce_crossover_bytes(n: int, link: Link, base_s: float = BASE_LATENCY_S) -> float:
    """The message whose bytes take as long on the wire as the all-reduce's latency (n ≥ 2)."""
    return all_reduce_latency_s(n, link, base_s) * link.bandwidth * n / (2 * (n - 1))


def all_to_all_s(bytes_per_gpu: float, n: int, link: Link, base_s: float = BASE_LATENCY_S) -> float:
    """Seconds of one all-to-all in which each GPU holds `bytes_per_gpu` and sends (N−1)/N of it."""
    return 0.0 if n == 1 else base_s + (n - 1) * (link.hop_latency_us * 1e-6) + (n - 1) / n * bytes_per_gpu / link.bandwidth


def send_s(message_bytes: float, link: Link, base_s: float = BASE_LATENCY_S) -> float:
    """Seconds to send `message_bytes` from one GPU to another over `link`."""
    return base_s + link.hop_latency_us * 1e-6 + message_bytes / link.bandwidth


def bandwidth_from_all_reduce(message_bytes: float, n: int, seconds: float, latency_s: float = 0.0) -> float:
    """The one-way bandwidth (B/s) a measured all-reduce implies: the inverse of all_reduce_s."""
    return all_reduce_wire_bytes(message_bytes, n) / (seconds - latency_s)


@dataclass(frozen=True)
class AllReduceParts:
    """One ring all-reduce taken apart, term by term (module docstring)."""

    message_bytes: float
    gpus: int
    link: str
    wire_bytes: float
    bytes_s: float
    hops: int
    hop_s: float
    base_s: float
    latency_s: float
    total_s: float
    crossover_bytes: float

    @property
    def latency_share(self) -> float:
        return self.latency_s / self.total_s


def all_reduce_parts(message_bytes: float, n: int, link: Link, base_s: float = BASE_LATENCY_S) -> AllReduceParts:
    """all_reduce_s(message_bytes, n, link) term by term, for a worked example (n ≥ 2 GPUs)."""
    wire, latency = all_reduce_wire_bytes(message_bytes, n), all_reduce_latency_s(n, link, base_s)
    return AllReduceParts(message_bytes, n, link.label, wire, wire / link.bandwidth, 2 * (n - 1), link.hop_latency_us * 1e-6, base_s,
                          latency, latency + wire / link.bandwidth, all_reduce_crossover_bytes(n, link, base_s))
