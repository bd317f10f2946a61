"""FlashAttention as a mechanism: attention computed tile by tile with running softmax statistics,
and the bytes each algorithm moves to and from the slow memory (HBM on a GPU).

- naive_attention: S = QKᵀ/√d, P = softmax(S), O = PV — the N×N matrices S and P exist in full.
- tiled_attention: FlashAttention's forward pass (Dao et al. 2022, "FlashAttention: Fast and
  Memory-Efficient Exact Attention with IO-Awareness", arXiv:2205.14135, Algorithm 1), in the loop
  order of FlashAttention-2 (Dao 2023, arXiv:2307.08691, Algorithm 1): for each block of queries,
  stream the K/V blocks past it, keeping per query a running maximum m, a running sum ℓ of
  exp(s − m) and an unnormalised output; when the maximum grows, rescale both by exp(m_old − m_new)
  (the online softmax: Milakov & Gimelshein 2018, arXiv:1805.02867). No N×N matrix is ever formed.
- Bytes to and from slow memory, per (sequence, head), counted in elements:
  standard (Algorithm 0 of the FlashAttention paper): read Q, K, write S; read S, write P; read P, V,
  write O — 4·N·d + 4·N² elements. tiled: read Q once and write O once (2·N·d), and read every
  K and V block once per query block it meets (2·d × the keys each query block visits). With query
  blocks of B_r rows that is ≈ 2·N²·d / B_r: Θ(N²d²/M) for on-chip memory M (the paper's Theorem 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from ..cost.units import DTYPE_BYTES, normalize_dtype, torch_dtype
from ..present import plots


def _check(q, k, v, causal: bool) -> None:
    """Shapes (batch, heads, tokens, head_dim); K/V heads divide the query heads (GQA)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, tokens, head_dim), got shape {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q and k must agree on batch and head_dim, got {tuple(q.shape)} and {tuple(k.shape)}")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"query heads ({q.shape[1]}) must be a multiple of K/V heads ({k.shape[1]})")
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(f"causal attention here needs as many queries as keys, got {q.shape[2]} and {k.shape[2]}")


def _expand_kv(k, v, heads: int):
    """GQA: repeat each K/V head for the query heads of its group."""
    group = heads // k.shape[1]
    if group == 1:
        return k, v
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def naive_attention(q, k, v, causal: bool = False):
    """Standard attention with the N×N score and probability matrices materialised."""
    import torch

    _check(q, k, v, causal)
    k, v = _expand_kv(k, v, q.shape[1])
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def tiled_attention(q, k, v, causal: bool = False, block_q: int = 64, block_k: int = 64):
    """FlashAttention's forward pass, readable: query blocks × K/V blocks with the online softmax."""
    import torch

    _check(q, k, v, causal)
    for b, what in ((block_q, "block_q"), (block_k, "block_k")):
        if isinstance(b, bool) or not isinstance(b, int) or b <= 0:
            raise ValueError(f"{what} must be a positive integer, got {b!r}")
    k, v = _expand_kv(k, v, q.shape[1])
    n_q, n_k = q.shape[2], k.shape[2]
    out = torch.empty_like(q)
    for i0 in range(0, n_q, block_q):                       # one query block stays "on chip"
        qi = q[:, :, i0:i0 + block_q] / math.sqrt(q.shape[-1])
        rows = qi.shape[2]
        m = torch.full((*qi.shape[:3], 1), float("-inf"), dtype=q.dtype, device=q.device)  # running max
        l = torch.zeros_like(m)                              # running sum of exp(s - m)
        acc = torch.zeros_like(qi)                           # unnormalised output
        last_key = min(n_k, i0 + rows) if causal else n_k    # causal: keys after the block's last query are skipped
        for j0 in range(0, last_key, block_k):               # stream K/V blocks past it
            s = qi @ k[:, :, j0:j0 + block_k].transpose(-1, -2)
            if causal and j0 + s.shape[-1] > i0 + 1:         # the block crosses the diagonal: mask k > q
                qpos = torch.arange(i0, i0 + rows, device=q.device)[:, None]
                kpos = torch.arange(j0, j0 + s.shape[-1], device=q.device)[None, :]
                s = s.masked_fill(kpos > qpos, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)
            rescale = torch.exp(m - m_new)                   # how much the old max over-counted
            l = rescale * l + p.sum(dim=-1, keepdim=True)
            acc = rescale * acc + p @ v[:, :, j0:j0 + block_k]
            m = m_new
        out[:, :, i0:i0 + rows] = acc / l
    return out


# ============================================================================ bytes to and from HBM

def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return value


def standard_hbm_elements(n: int, head_dim: int) -> dict[str, int]:
    """Elements read and written by standard attention for one (sequence, head), FlashAttention paper
    Algorithm 0: (1) read Q, K, write S = QKᵀ; (2) read S, write P = softmax(S); (3) read P and V, write
    O = PV. Causal masking is folded into step 2 (the full N×N matrix is still written and read)."""
    n, d = _positive_int(n, "n"), _positive_int(head_dim, "head_dim")
    read = 2 * n * d + n * n + (n * n + n * d)
    write = n * n + n * n + n * d
    return {"read": read, "write": write, "total": read + write, "nxn_matrix": n * n}


def keys_visited(n: int, block_q: int, block_k: int, causal: bool) -> int:
    """Σ over query blocks of the keys in the K/V blocks that block visits (tiled_attention's loops)."""
    n, bq, bk = _positive_int(n, "n"), _positive_int(block_q, "block_q"), _positive_int(block_k, "block_k")
    total = 0
    for i0 in range(0, n, bq):
        last_key = min(n, i0 + bq) if causal else n
        total += min(n, math.ceil(last_key / bk) * bk)      # whole blocks, the last one cut at n
    return total


def tiled_hbm_elements(n: int, head_dim: int, block_q: int = 64, block_k: int = 64,
                       causal: bool = False) -> dict[str, int]:
    """Elements read and written by tiled_attention for one (sequence, head): Q read once, O written
    once, K and V read once per query block for every block of keys it visits. The running max and
    sum stay on chip (an inference forward pass need not store them)."""
    d = _positive_int(head_dim, "head_dim")
    kv = 2 * d * keys_visited(n, block_q, block_k, causal)
    read = n * d + kv
    write = n * d
    return {"read": read, "write": write, "total": read + write, "nxn_matrix": 0}


def paper_block_sizes(sram_bytes: int, head_dim: int, dtype: str = "bf16") -> tuple[int, int]:
    """(B_r, B_c) of FlashAttention's Algorithm 1, line 1: B_c = ⌈M / 4d⌉, B_r = min(⌈M / 4d⌉, d),
    with M the on-chip memory in elements (sram_bytes ÷ bytes per element)."""
    m = _positive_int(sram_bytes, "sram_bytes") // DTYPE_BYTES[normalize_dtype(dtype)]
    b_c = math.ceil(m / (4 * _positive_int(head_dim, "head_dim")))
    return min(b_c, head_dim), b_c


def traffic_ratio_limit(block_q: int, head_dim: int, causal: bool = True) -> float:
    """What standard ÷ tiled HBM traffic tends to as N grows: both are Θ(N²) — standard moves 4·N² elements
    of S and P, tiled moves K and V once per query block, 2·d·N²/B_r elements (half that when causal: a block
    visits only the keys before it) — so the ratio is 4·B_r/d causal, 2·B_r/d not. Tiling divides the
    N² traffic by d/(4·B_r), not by the block height: with B_r = d = 128, 4×."""
    return (4 if causal else 2) * _positive_int(block_q, "block_q") / _positive_int(head_dim, "head_dim")


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


def hbm_bytes_table(shape: AttentionShape, lengths: Sequence[int], block_q: int, block_k: int,
                    causal: bool = True) -> list[dict[str, Any]]:
    """Bytes to and from slow memory of one layer's attention, standard against tiled, by length;
    with the bytes of one N×N matrix (all heads) that the standard algorithm must hold."""
    per = shape.batch * shape.heads * shape.bytes_per_element
    rows = []
    for n in lengths:
        std = standard_hbm_elements(n, shape.head_dim)
        tiled = tiled_hbm_elements(n, shape.head_dim, block_q, block_k, causal)
        rows.append({"tokens": n, "standard bytes": int(std["total"] * per), "tiled bytes": int(tiled["total"] * per),
                     "standard ÷ tiled": std["total"] / tiled["total"],
                     "N×N matrix, all heads (bytes)": int(std["nxn_matrix"] * per)})
    return rows


# ============================================================================ timed here

def attention_inputs(n: int, shape: AttentionShape, device: str = "cpu", seed: int = 0):
    """Random q, k, v of (batch, heads, n, head_dim) in the shape's dtype (values do not change timing)."""
    import torch

    from .microbench import MATMUL_DTYPES

    dt = torch_dtype(normalize_dtype(shape.dtype, MATMUL_DTYPES))
    g = torch.Generator(device=device).manual_seed(seed)  # drawn on the device: no host copy of GBs of inputs
    return [torch.randn(shape.batch, shape.heads, n, shape.head_dim, generator=g, device=device, dtype=dt)
            for _ in range(3)]


def time_attention(lengths: Sequence[int], shape: AttentionShape, device: str = "cpu", causal: bool = True,
                   repeats: int = 3, tiled_up_to: int = 0, block: int = 64, cpu_threads: int | None = 1):
    """Median time of naive attention (N×N materialised) against PyTorch's fused
    scaled_dot_product_attention at each length, and of tiled_attention (Python loops: for reading,
    not speed) up to `tiled_up_to` tokens. Running out of memory ends the sweep as a marked result.
    On a CPU the timings run on `cpu_threads` threads (helpers.measure.hierarchy.cpu_threads)."""
    import torch
    import torch.nn.functional as F

    from .hierarchy import cpu_threads as _threads
    from .timing import measure
    from .sweeps import guarded_sweep

    def point(n: int) -> dict:
        q, k, v = attention_inputs(n, shape, device)
        with torch.inference_mode():
            row = {"tokens": n,
                   "naive_s": measure(lambda: naive_attention(q, k, v, causal), device, 1, repeats).median,
                   "sdpa_s": measure(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), device, 1,
                                     repeats).median}
            if n <= tiled_up_to:
                row["tiled_s"] = measure(lambda: tiled_attention(q, k, v, causal, block, block), device, 0, 1).median
        row["naive ÷ sdpa"] = row["naive_s"] / row["sdpa_s"]
        return row

    with _threads(cpu_threads, device):
        return guarded_sweep(lengths, point, device, "tokens", desc="attention lengths")


def hbm_figure(table, block_r: int, block_c: int, source: Any):
    """Bytes to and from HBM by sequence length (log–log): standard against tiled, with one N×N matrix."""
    from ..present import plots

    fig, ax = plots.figure(width=7, height=4)
    ax.loglog(table["tokens"], table["standard bytes"] / 1e9, "o-", color="tab:red", label="standard (S and P through HBM)")
    ax.loglog(table["tokens"], table["tiled bytes"] / 1e9, "o-", color="tab:green",
              label=f"tiled, blocks {block_r} × {block_c} (an upper bound: every K/V block from HBM, no L2 reuse)")
    ax.loglog(table["tokens"], table["N×N matrix, all heads (bytes)"] / 1e9, ":", color="grey",
              label="one N×N matrix, all heads")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length N (tokens)")
    ax.set_ylabel("bytes to and from HBM, one layer (GB)")
    ax.set_title("Attention's HBM traffic: standard against tiled")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


@plots.notes_when_empty('Naive against fused attention')
def timing_figure(df, source: Any):
    """Median time per call by length (log–log): naive, fused SDPA, and the readable tiled version."""
    from ..present import plots

    ok = df[~df["oom"]]
    fig, ax = plots.figure(width=7, height=4)
    ax.loglog(ok["tokens"], ok["naive_s"] * 1e3, "o-", color="tab:red", label="naive (S and P materialised)")
    ax.loglog(ok["tokens"], ok["sdpa_s"] * 1e3, "o-", color="tab:green", label="scaled_dot_product_attention (fused)")
    if "tiled_s" in ok:
        t = ok.dropna(subset=["tiled_s"])
        ax.loglog(t["tokens"], t["tiled_s"] * 1e3, "s--", color="tab:grey", label="tiled_attention (Python loops)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("ms per call (median)")
    ax.set_title("Attention time: materialised against fused")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


def bench_attention(device: str | None = None) -> dict[str, Any]:
    """`make bench` section: naive attention against PyTorch's fused SDPA on this device (medians).
    CPU: 8 heads × 32, fp32, 256 … 2,048 tokens, one thread; CUDA: Mistral's 32 × 128 in bf16, 1k … 16k."""
    from .hardware import pick_device

    dev = pick_device(device)
    gpu = dev.startswith("cuda")
    shape = AttentionShape(1, 32, 128, "bf16") if gpu else AttentionShape(1, 8, 32, "fp32")
    lengths = [1024 * 2**k for k in range(5)] if gpu else [256, 512, 1024, 2048]
    result = time_attention(lengths, shape, dev, causal=True, repeats=5)
    return {"device": dev, "shape": {"batch": shape.batch, "heads": shape.heads, "head_dim": shape.head_dim,
                                     "dtype": shape.dtype, "causal": True},
            "rows": result.rows, "oom_at": result.oom_at,
            "definitions": {"naive ÷ sdpa": "median seconds of the materialised version ÷ the fused kernel's"}}
