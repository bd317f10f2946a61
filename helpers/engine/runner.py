"""The model runner: one forward pass of a Mistral-architecture model over a mixed batch.

A step's batch is a list of `Chunk`s, one per request: a prefill chunk (many prompt tokens), a decode
row (one token), a speculative verify (the last token and k drafts). Their tokens are laid end to end
as one flat sequence of rows, so every matrix multiply (projections, MLP, output head) runs once for
the whole batch. Only attention is per request: each row attends to its own request's earlier tokens,
read from the paged cache through the request's block table (`PagedKVCache.gather`), with a mask that
lets position p see positions ≤ p. Chunks of the same length are attended together, so all decode
rows share one attention call.

The weights are the loaded transformers model's own tensors (no copy). The arithmetic follows
transformers' modeling_mistral.py (the code under .venv/…/models/mistral): RMSNorm in float32 times
the weight, rotary embeddings with the model's inv_freq on rotate-half pairs, grouped-query attention
scaled by head_dim^-0.5 (with the sliding window when the config sets one: a key is visible when
p − window < j ≤ p), a SwiGLU MLP down(silu(gate(x)) · up(x)), the final norm and the output head.
`num_layers` below the model's runs only its first layers (an early-exit draft model)."""
from __future__ import annotations

from dataclasses import dataclass

from .kv import PagedKVCache


@dataclass
class Chunk:
    table: list[int]        # the request's block table
    tokens: list[int]       # token ids to run now
    start: int              # position of tokens[0] (tokens before it are in the cache)
    logits: int = 1         # how many of its last rows need logits (0: a prefill chunk short of the end)


def rms_norm(x, weight, eps: float):
    import torch

    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def rotate(x, cos, sin):
    """Rotary position embedding: pairs (x_i, x_{i+d/2}) turned by the angle of their frequency."""
    import torch

    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Runner:
    def __init__(self, model, kv: PagedKVCache, num_layers: int | None = None):
        c, m = model.config, model.model
        self.kv, self.eps, self.window = kv, c.rms_norm_eps, getattr(c, "sliding_window", None)
        self.heads, self.kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = kv.k.shape[-1]
        self.embed, self.norm, self.head = m.embed_tokens.weight, m.norm.weight, model.lm_head.weight
        self.inv_freq, self.rope_scale = m.rotary_emb.inv_freq, m.rotary_emb.attention_scaling
        self.layers = [(d.input_layernorm.weight, d.self_attn.q_proj.weight, d.self_attn.k_proj.weight,
                        d.self_attn.v_proj.weight, d.self_attn.o_proj.weight, d.post_attention_layernorm.weight,
                        d.mlp.gate_proj.weight, d.mlp.up_proj.weight, d.mlp.down_proj.weight)
                       for d in m.layers[:num_layers or c.num_hidden_layers]]
        self.forwards = 0       # forward passes run (each one step of the whole batch)

    def forward(self, chunks: list[Chunk]):
        """Logits [rows asked for, vocab] of the chunks' last `logits` rows, in chunk order."""
        import torch

        with torch.inference_mode():
            b = self._prepare(chunks)
            x = self.embed[b["ids"]]
            for i, weights in enumerate(self.layers):
                x = self._layer(i, weights, x, b)
            self.forwards += 1
            return torch.nn.functional.linear(rms_norm(x[b["logit_rows"]], self.norm, self.eps), self.head)

    def _prepare(self, chunks: list[Chunk]) -> dict:
        """Flat token ids, positions and cache slots, chunks of one length side by side; the rows asked for
        logits (in chunk order); rotary cos/sin per row; per group of equal-length chunks its first row,
        size, padded block tables and attention mask."""
        import torch

        dev = self.embed.device
        by_len: dict[int, list[int]] = {}
        for i, c in enumerate(chunks):
            by_len.setdefault(len(c.tokens), []).append(i)
        ids, pos, slots, first, groups = [], [], [], {}, []
        for n, members in by_len.items():
            width = max(len(chunks[i].table) for i in members)
            groups.append([len(ids), len(members), n, [chunks[i].table + [0] * (width - len(chunks[i].table))
                                                       for i in members], [chunks[i].start for i in members]])
            for i in members:
                c, first[i] = chunks[i], len(ids)
                ids += c.tokens
                pos += range(c.start, c.start + n)
                slots += self.kv.slots(c.table, c.start, n)
        logit_rows = [first[i] + len(c.tokens) - c.logits + j                 # in chunk order
                      for i, c in enumerate(chunks) for j in range(c.logits)]
        for g in groups:
            row, s, n, tables, starts = g
            q_pos = torch.tensor(starts, device=dev)[:, None] + torch.arange(n, device=dev)[None]
            k_pos = torch.arange(len(tables[0]) * self.kv.block_size, device=dev)
            mask = k_pos[None, None, :] <= q_pos[:, :, None]              # causal: j ≤ p (also j < length)
            if self.window:
                mask &= k_pos[None, None, :] > q_pos[:, :, None] - self.window
            g[3:] = [torch.tensor(tables, device=dev), mask[:, None]]     # mask [requests, 1, n, keys]
        freqs = torch.tensor(pos, device=dev, dtype=torch.float32)[:, None] * self.inv_freq.float()[None]
        emb = torch.cat((freqs, freqs), dim=-1)
        dt = self.embed.dtype
        cos, sin = ((emb.cos() * self.rope_scale).to(dt)[:, None], (emb.sin() * self.rope_scale).to(dt)[:, None])
        return {"ids": torch.tensor(ids, device=dev), "slots": torch.tensor(slots, device=dev),
                "logit_rows": torch.tensor(logit_rows, device=dev, dtype=torch.long),
                "cos": cos, "sin": sin, "groups": groups}

    def _layer(self, i: int, weights, x, b: dict):
        import torch
        import torch.nn.functional as F

        ln1, wq, wk, wv, wo, ln2, wg, wu, wd = weights
        t = x.shape[0]
        h = rms_norm(x, ln1, self.eps)
        q = rotate(F.linear(h, wq).view(t, self.heads, self.head_dim), b["cos"], b["sin"])
        k = rotate(F.linear(h, wk).view(t, self.kv_heads, self.head_dim), b["cos"], b["sin"])
        v = F.linear(h, wv).view(t, self.kv_heads, self.head_dim)
        self.kv.write(i, b["slots"], k, v)                   # the new tokens' K/V go into their blocks first
        out = torch.empty_like(q)
        for row, s, n, tables, mask in b["groups"]:           # s requests of n rows each, side by side
            keys, values = self.kv.gather(i, tables)          # [requests, kv_heads, keys, head_dim]
            queries = q[row:row + s * n].view(s, n, self.heads, -1).transpose(1, 2)
            o = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask,
                                               enable_gqa=self.heads != self.kv_heads)
            out[row:row + s * n] = o.transpose(1, 2).reshape(s * n, self.heads, -1)
        x = x + F.linear(out.view(t, -1), wo)
        h = rms_norm(x, ln2, self.eps)
        return x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)
