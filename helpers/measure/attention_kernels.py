"""FlashAttention as a mechanism, run: naive attention (the N×N matrices S and P in full) against the tiled forward
pass (Dao et al. 2022, arXiv:2205.14135, Algorithm 1, in FlashAttention-2's loop order, arXiv:2307.08691): per query
block, the K/V blocks stream past with a running max m, a running sum ℓ of exp(s − m) and an unnormalised output,
rescaled by exp(m_old − m_new) when m grows (the online softmax, arXiv:1805.02867); and PyTorch's fused kernel."""
from __future__ import annotations

import math
from typing import Sequence

from ..formulas.flash import AttentionShape
from ..formulas.regime import ratio
from .dtypes import torch_dtype


def _expand_kv(k, v, heads: int):
    """GQA: repeat each K/V head for the query heads of its group."""
    group = heads // k.shape[1]
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def naive_attention(q, k, v, causal: bool = False):
    """Standard attention with the N×N score and probability matrices materialised."""
    import torch

    k, v = _expand_kv(k, v, q.shape[1])
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def tiled_attention(q, k, v, causal: bool = False, block_q: int = 64, block_k: int = 64):
    """FlashAttention's forward pass, readable: query blocks × K/V blocks with the online softmax."""
    import torch

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


def attention_inputs(n: int, shape: AttentionShape, device: str = "cpu", seed: int = 0):
    """Random q, k, v of (batch, heads, n, head_dim) in the shape's dtype."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)  # drawn on the device: no host copy of GBs of inputs
    return [torch.randn(shape.batch, shape.heads, n, shape.head_dim, generator=g, device=device,
                        dtype=torch_dtype(shape.dtype)) for _ in range(3)]


def time_attention(lengths: Sequence[int], shape: AttentionShape, device: str = "cpu", causal: bool = True,
                   repeats: int = 3, tiled_up_to: int = 0, block: int = 64, cpu_threads: int | None = 1):
    """Median times of naive, fused and (up to `tiled_up_to` tokens: Python loops, for reading) tiled attention."""
    import torch
    import torch.nn.functional as F

    from .hierarchy import cpu_threads as _threads
    from .sweeps import guarded_sweep
    from .timing import measure

    def point(n: int) -> dict:
        q, k, v = attention_inputs(n, shape, device)
        with torch.inference_mode():
            row = {"tokens": n,
                   "naive_s": measure(lambda: naive_attention(q, k, v, causal), device, 1, repeats).median,
                   "sdpa_s": measure(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), device, 1,
                                     repeats).median}
            if n <= tiled_up_to:
                row["tiled_s"] = measure(lambda: tiled_attention(q, k, v, causal, block, block), device, 0, 1).median
        row["naive_over_sdpa"] = ratio(row["naive_s"], row["sdpa_s"])
        return row

    with _threads(cpu_threads, device):
        return guarded_sweep(lengths, point, device, "tokens", desc="attention lengths")
