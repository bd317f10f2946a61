"""FlashAttention's bytes (Dao et al. 2022, arXiv:2205.14135), per (sequence, head), in elements: standard
attention (Algorithm 0) reads Q, K, writes S; reads S, writes P; reads P, V, writes O — 4·N·d + 4·N²; tiled
attention reads Q and writes O once (2·N·d) and reads each K/V block once per query block that meets it,
≈ 2·N²·d ÷ B_r, Θ(N²d²/M) for on-chip memory M (Theorem 2). Run and timed: helpers.measure.attention_kernels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .. import checks
from .units import DTYPE_BYTES, normalize_dtype


@dataclass(frozen=True)
class AttentionShape:
    """The attention of one layer: sequences, query heads, head size, dtype."""

    batch: int
    heads: int
    head_dim: int
    dtype: str = "bf16"

    @property
    def bytes_per_element(self) -> float:
        return DTYPE_BYTES[normalize_dtype(self.dtype)]


@dataclass(frozen=True)
class HBMElements:
    """Elements one algorithm reads from and writes to slow memory for one (sequence, head)."""

    read: int
    write: int
    nxn_matrix: int      # elements of the N×N matrix it must hold there (0 when tiled)

    @property
    def total(self) -> int:
        return self.read + self.write


def standard_hbm_elements(n: int, head_dim: int) -> HBMElements:
    """Elements read and written by standard attention for one (sequence, head), FlashAttention paper
    Algorithm 0: (1) read Q, K, write S = QKᵀ; (2) read S, write P = softmax(S); (3) read P and V, write
    O = PV. Causal masking is folded into step 2 (the full N×N matrix is still written and read)."""
    nd = n * head_dim
    return HBMElements(2 * nd + n * n + (n * n + nd), n * n + n * n + nd, n * n)   # reads, writes, S


def keys_visited(n: int, block_q: int, block_k: int, causal: bool) -> int:
    """Σ over query blocks of the keys in the K/V blocks that block visits (tiled_attention's loops)."""
    total = 0
    for i0 in range(0, n, block_q):
        last_key = min(n, i0 + block_q) if causal else n
        total += min(n, math.ceil(last_key / block_k) * block_k)      # whole blocks, the last one cut at n
    return total


def tiled_hbm_elements(n: int, head_dim: int, block_q: int = 64, block_k: int = 64,
                       causal: bool = False) -> HBMElements:
    """Elements read and written by tiled_attention for one (sequence, head): Q read once, O written
    once, K and V read once per query block for every block of keys it visits. The running max and
    sum stay on chip (an inference forward pass need not store them)."""
    kv = 2 * head_dim * keys_visited(n, block_q, block_k, causal)
    return HBMElements(n * head_dim + kv, n * head_dim, 0)


def paper_block_sizes(sram_bytes: int, head_dim: int, dtype: str = "bf16") -> tuple[int, int]:
    """(B_r, B_c) of FlashAttention's Algorithm 1, line 1: B_c = ⌈M / 4d⌉, B_r = min(⌈M / 4d⌉, d),
    with M the on-chip memory in elements (sram_bytes ÷ bytes per element)."""
    b_c = math.ceil(sram_bytes // DTYPE_BYTES[normalize_dtype(dtype)] / (4 * head_dim))
    return min(b_c, head_dim), b_c


def traffic_ratio_limit(block_q: int, head_dim: int, causal: bool = True) -> float:
    """What standard ÷ tiled HBM traffic tends to as N grows: both are Θ(N²) — standard moves 4·N² elements
    of S and P, tiled moves K and V once per query block, 2·d·N²/B_r elements (half that when causal: a block
    visits only the keys before it) — so the ratio is 4·B_r/d causal, 2·B_r/d not. Tiling divides the
    N² traffic by d/(4·B_r), not by the block height: with B_r = d = 128, 4×."""
    return (4 if causal else 2) * checks.count(block_q, "block_q") / checks.count(head_dim, "head_dim")


@dataclass(frozen=True)
class HBMTraffic:
    """One layer's attention at `tokens` tokens: bytes to and from slow memory, standard against tiled."""

    tokens: int
    standard_bytes: int
    tiled_bytes: int
    nxn_bytes: int       # one N×N matrix for all heads, which the standard algorithm must hold

    @property
    def standard_over_tiled(self) -> float:
        return self.standard_bytes / self.tiled_bytes


def hbm_bytes_table(shape: AttentionShape, lengths: Sequence[int], block_q: int, block_k: int,
                    causal: bool = True) -> list[HBMTraffic]:
    """Bytes to and from slow memory of one layer's attention, standard against tiled, by length;
    with the bytes of one N×N matrix (all heads) that the standard algorithm must hold."""
    per = shape.batch * shape.heads * shape.bytes_per_element
    rows = []
    for n in lengths:
        std = standard_hbm_elements(n, shape.head_dim)
        tiled = tiled_hbm_elements(n, shape.head_dim, block_q, block_k, causal)
        rows.append(HBMTraffic(n, int(std.total * per), int(tiled.total * per), int(std.nxn_matrix * per)))
    return rows
