"""Multi-head latent attention (MLA, DeepSeek-V2 arXiv:2405.04434 §2.1), small and readable: each layer caches one
latent per token, [c | k_R] (kv_lora_rank + qk_rope_head_dim), and attends from it with both up-projections
absorbed — "W^UK can be absorbed into W^Q, and W^UV can be absorbed into W^O" (§2.1.2); only the RoPE key cannot
(§2.1.3), so it travels beside the latent. Its bytes and transformers' DeepSeek-V3 cache are measured against
helpers.formulas.memory.kv_cache_bytes."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ..formulas import regime
from ..formulas.attention import mha_kv_bytes_per_token
from ..formulas.memory import kv_cache_bytes
from ..formulas.specs import spec_from_config
from .kv_caches import CacheCheck, measured_cache
from .local_models import tiny_model
from .tensor_bytes import measured_cache_bytes


# A DeepSeek-style MLA at toy scale: 4 layers, 8 heads, latent 32 + rope key 16 per token per layer; every layer
# dense (first_k_dense_replace = 4): the MLP plays no part in the cache.
TINY_MLA_CONFIG: dict[str, Any] = {
    "model_type": "deepseek_v3", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
    "moe_intermediate_size": 128, "num_hidden_layers": 4, "first_k_dense_replace": 4,
    "num_attention_heads": 8, "num_key_value_heads": 8, "n_routed_experts": 4, "n_shared_experts": 1,
    "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "q_lora_rank": None, "kv_lora_rank": 32,
    "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "max_position_embeddings": 4096,
    "rope_theta": 10000.0, "rope_scaling": None, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
}


def _rope(x, positions, theta: float):
    """Rotary position embedding on the last dimension (halves rotated), positions: (tokens,)."""
    import torch

    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * ang.cos().to(x.dtype) + torch.cat([-x2, x1], -1) * ang.sin().to(x.dtype)


def _mla_module_class():
    import torch
    import torch.nn as nn

    class MLAttention(nn.Module):
        """One MLA layer (§2.1.2–2.1.3), no query compression: caches c = RMSNorm(W_DKV x) and k_R = RoPE(W_KR x).
        ``forward`` attends from the cache with W_UK absorbed into the query (q·k_C = (W_UKᵀq)·c) and W_UV into the
        output projection (``absorbed_output``); ``forward_expanded`` rebuilds K and V per head: the reference."""

        def __init__(self, cfg: dict) -> None:
            super().__init__()
            self.h = cfg["num_attention_heads"]
            self.nope, self.rope_dim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
            self.v_dim, self.rank = cfg["v_head_dim"], cfg["kv_lora_rank"]
            self.theta = float(cfg.get("rope_theta", 10000.0))
            hidden = cfg["hidden_size"]
            self.q_proj = nn.Linear(hidden, self.h * (self.nope + self.rope_dim), bias=False)
            self.kv_a_proj_with_mqa = nn.Linear(hidden, self.rank + self.rope_dim, bias=False)
            self.kv_a_layernorm = nn.RMSNorm(self.rank, eps=cfg.get("rms_norm_eps", 1e-6))
            self.kv_b_proj = nn.Linear(self.rank, self.h * (self.nope + self.v_dim), bias=False)
            self.o_proj = nn.Linear(self.h * self.v_dim, hidden, bias=False)
            self.scale = (self.nope + self.rope_dim) ** -0.5

        def _q(self, x, pos):
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, self.h, self.nope + self.rope_dim).transpose(1, 2)
            return q[..., : self.nope], _rope(q[..., self.nope:], pos, self.theta)

        def latent(self, x, pos):
            ckv = self.kv_a_proj_with_mqa(x)
            c, k_r = ckv[..., : self.rank], ckv[..., self.rank:]
            return torch.cat([self.kv_a_layernorm(c), _rope(k_r, pos, self.theta)], dim=-1)

        def _weights(self):
            w = self.kv_b_proj.weight.view(self.h, self.nope + self.v_dim, self.rank)
            return w[:, : self.nope], w[:, self.nope:]          # W_UK (h, nope, rank), W_UV (h, v, rank)

        def absorbed_output(self):
            """W_O·W_UV per head, (hidden, h, rank): what an engine precomputes once."""
            _, w_uv = self._weights()
            w_o = self.o_proj.weight.view(-1, self.h, self.v_dim)             # (hidden, h, v)
            return torch.einsum("dhv,hvr->dhr", w_o, w_uv)

        def forward(self, x, cache, layer: int):
            held, t = cache.layers[layer], x.shape[1]
            start = 0 if held.latent is None else held.latent.shape[1]      # tokens already cached here
            pos = torch.arange(start, start + t, device=x.device)
            q_nope, q_rope = self._q(x, pos)
            new = self.latent(x, pos)
            held.latent = lat = new if held.latent is None else torch.cat([held.latent, new], dim=1)  # (b, s, rank + rope)
            c, k_r = lat[..., : self.rank], lat[..., self.rank:]
            w_uk, _ = self._weights()
            q_lat = torch.einsum("bhtn,hnr->bhtr", q_nope, w_uk)        # absorb W_UK into the query
            scores = (torch.einsum("bhtr,bsr->bhts", q_lat, c)
                      + torch.einsum("bhtp,bsp->bhts", q_rope, k_r)) * self.scale
            causal = torch.arange(lat.shape[1], device=x.device)[None, :] <= pos[:, None]     # (t, s)
            scores = scores.masked_fill(~causal, float("-inf"))
            o_lat = torch.einsum("bhts,bsr->bhtr", scores.softmax(-1), c)     # the weighted sum of latents
            return torch.einsum("bhtr,dhr->btd", o_lat, self.absorbed_output())  # W_UV absorbed into W_O

        def forward_expanded(self, x):
            """The reference: every token's K and V rebuilt for every head (an MHA-sized cache), no latent."""
            b, s, _ = x.shape
            pos = torch.arange(s, device=x.device)
            q_nope, q_rope = self._q(x, pos)
            lat = self.latent(x, pos)
            c, k_r = lat[..., : self.rank], lat[..., self.rank:]
            kv = self.kv_b_proj(c).view(b, s, self.h, self.nope + self.v_dim).transpose(1, 2)
            k = torch.cat([kv[..., : self.nope], k_r[:, None].expand(b, self.h, s, self.rope_dim)], dim=-1)
            v = kv[..., self.nope:]
            q = torch.cat([q_nope, q_rope], dim=-1)
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
            return self.o_proj(o.transpose(1, 2).reshape(b, s, self.h * self.v_dim))

    class TinyMLA(nn.Module):
        """MLA layers with residual connections: enough to fill and measure a real latent cache."""

        def __init__(self, cfg: dict) -> None:
            super().__init__()
            self.cfg = dict(cfg)
            self.layers = nn.ModuleList(MLAttention(cfg) for _ in range(cfg["num_hidden_layers"]))

        def forward(self, x, cache):
            for i, layer in enumerate(self.layers):
                x = x + layer(x, cache, i)
            return x

        def forward_expanded(self, x):
            for layer in self.layers:
                x = x + layer.forward_expanded(x)
            return x

        def new_cache(self):
            """MLA's whole cache: per layer one (batch, tokens, rank + rope) latent, nothing per head; held like a
            transformers Cache's layers, so measured_cache_bytes reads it."""
            return SimpleNamespace(layers=[SimpleNamespace(latent=None) for _ in self.layers])

    return MLAttention, TinyMLA


def tiny_mla(cfg: dict | None = None, dtype=None, seed: int = 0):
    """A TinyMLA with random weights (fixed seed)."""
    import torch

    _, TinyMLA = _mla_module_class()
    torch.manual_seed(seed)
    model = TinyMLA(cfg or TINY_MLA_CONFIG).eval()
    return model.to(dtype) if dtype is not None else model


def run_mla(model, tokens: int, batch: int, prompt: int, seed: int = 0):
    """(cached output, expanded reference, cache) of random sequences: a prompt at once, then a token per step."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, tokens, model.cfg["hidden_size"], generator=g).to(next(model.parameters()).dtype)
    cache = model.new_cache()
    with torch.inference_mode():
        outs = [model(x[:, :prompt], cache)]
        for i in range(prompt, tokens):
            outs.append(model(x[:, i:i + 1], cache))
        ref = model.forward_expanded(x)
    return torch.cat(outs, dim=1), ref, cache


@dataclass(frozen=True)
class MLACheck:
    """TinyMLA's latent cache against the formula and an expanded (MHA-sized) cache; its output against the reference."""

    tokens: int
    batch: int
    measured_bytes: int        # the latent cache, measured
    formula_bytes: int         # helpers.formulas.memory.kv_cache_bytes
    expanded_bytes: int        # K and V for every head, as MHA would cache them
    max_output_error: float    # max |cached − expanded| over the outputs
    output_scale: float        # max |x| of the reference output

    @property
    def equal(self) -> bool:
        return self.measured_bytes == self.formula_bytes

    @property
    def error_epsilons(self) -> float:
        """The output error in fp32 roundings at the output's scale."""
        return regime.epsilons(self.max_output_error, self.output_scale, "fp32")


def measure_mla(cases=((16, 1), (100, 1), (64, 4)), prompt: int = 8, cfg: dict | None = None) -> list[MLACheck]:
    """MLACheck of each (tokens, batch) of `cases`."""
    cfg = cfg or TINY_MLA_CONFIG
    model, spec = tiny_mla(cfg), spec_from_config(cfg, "tiny MLA")
    rows = []
    for tokens, batch in cases:
        out, ref, cache = run_mla(model, tokens, batch, prompt=prompt)
        mha = mha_kv_bytes_per_token(spec.num_layers, spec.num_heads, cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"],
                                     cfg["v_head_dim"], "fp32") * tokens * batch
        rows.append(MLACheck(tokens, batch, measured_cache_bytes(cache), kv_cache_bytes(spec, tokens, batch, "fp32"),
                             mha, (out - ref).abs().max().item(), ref.abs().max().item()))
    return rows


def measure_hf_mla(cases=((16, 1), (64, 4)), cfg: dict | None = None) -> list[CacheCheck]:
    """The same check on transformers' DeepSeek-V3 (random weights, toy size): its cache holds the latent too."""
    cfg = cfg or TINY_MLA_CONFIG
    model, spec = tiny_model(cfg), spec_from_config(cfg, "tiny MLA")
    return [CacheCheck("transformers DeepseekV3ForCausalLM", tokens, batch,
                       measured_cache_bytes(measured_cache(model, tokens, batch)),
                       kv_cache_bytes(spec, tokens, batch, "fp32"))
            for tokens, batch in cases]
