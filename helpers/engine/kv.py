"""The paged KV cache: one real tensor of blocks, and the block allocator that hands them out.

Keys and values live in `k` and `v`, each shaped [layers, num_blocks, block_size, kv_heads, head_dim].
A request owns a *block table* (blocks.py: free list, reference counts,
copy-on-write); token t of the request sits in block `table[t // block_size]`, slot `t % block_size`.
The runner writes each new token's K/V to that slot (`slots`, `write`) and reads a request's K/V back
through its table (`gather`): attention never needs a request's cache to be contiguous, so any free
block fits any request (vLLM's PagedAttention, Kwon et al., SOSP 2023).

A block shared by two tables (a prefix-cache hit) is read by both; the first write into a shared,
partly filled block copies it first (`reserve` does the allocator's bookkeeping and the tensor copy).
"""
from __future__ import annotations

from .blocks import BlockAllocator


class PagedKVCache:
    def __init__(self, num_layers: int, num_blocks: int, block_size: int, kv_heads: int, head_dim: int,
                 dtype=None, device="cpu"):
        import torch

        self.alloc = BlockAllocator(num_blocks, block_size)
        self.block_size = block_size
        shape = (num_layers, num_blocks, block_size, kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype or torch.float32, device=device)
        self.v = torch.zeros_like(self.k)

    @classmethod
    def for_model(cls, model, num_blocks: int, block_size: int, num_layers: int | None = None) -> "PagedKVCache":
        """A cache shaped for a transformers model (its layers, KV heads, head size, dtype, device)."""
        c = model.config
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        p = next(model.parameters())
        return cls(num_layers or c.num_hidden_layers, num_blocks, block_size, c.num_key_value_heads, head_dim,
                   p.dtype, p.device)

    @property
    def num_blocks(self) -> int:
        return self.alloc.num_blocks

    @property
    def bytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()

    # ------------------------------------------------------------------ bookkeeping (the allocator)
    def table(self, rid) -> list[int]:
        return self.alloc.tables[rid]

    def has(self, rid) -> bool:
        return rid in self.alloc.tables

    def reserve(self, rid, tokens: int) -> None:
        """Room for `tokens` more tokens of `rid`: new blocks as needed; a shared partly filled last block
        is copied first (copy-on-write), in the tensor too. The caller checked `cost` against `free`."""
        copied = self.alloc.append(rid, tokens)
        if copied is not None:
            src, dst = copied
            self.k[:, dst] = self.k[:, src]
            self.v[:, dst] = self.v[:, src]

    def cost(self, rid, tokens: int) -> int:
        return self.alloc.append_cost(rid, tokens)

    @property
    def free(self) -> int:
        return self.alloc.free_blocks

    # ------------------------------------------------------------------ data (the tensor)
    def slots(self, table: list[int], start: int, n: int) -> list[int]:
        """Flat slot indices (block × block_size + offset) of token positions start … start + n − 1."""
        bs = self.block_size
        return [table[p // bs] * bs + p % bs for p in range(start, start + n)]

    def write(self, layer: int, slots, k, v) -> None:
        """Store the new tokens' keys and values (rows of k, v: [tokens, kv_heads, head_dim]) at `slots`."""
        self.k[layer].view(-1, *k.shape[1:]).index_copy_(0, slots, k)
        self.v[layer].view(-1, *v.shape[1:]).index_copy_(0, slots, v)

    def gather(self, layer: int, tables):
        """K and V of several requests through their block tables (a [requests, blocks] tensor, padded with
        any block id): [requests, kv_heads, blocks × block_size, head_dim] each, position j at column j."""
        s, b = tables.shape
        flat = tables.reshape(-1)
        k = self.k[layer].index_select(0, flat).view(s, b * self.block_size, *self.k.shape[3:])
        v = self.v[layer].index_select(0, flat).view(s, b * self.block_size, *self.v.shape[3:])
        return k.transpose(1, 2), v.transpose(1, 2)
