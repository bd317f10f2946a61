"""The cost of one forward step, the bytes it moves and the FLOPs it does, in one place: the roofline, the
planner, the measured tables and `make bench` all call forward_cost().

Bytes (Pope et al. 2022, arXiv:2211.05102, §2: weights are read once per step for the whole batch, the KV cache
per sequence): the weights under their scheme (memory.weight_bytes), but only the step's rows of an untied input
embedding and only the MoE experts its tokens touch (k of E each, independently: 1 − (1 − k/E)^tokens of them);
each sequence's cache (windows honoured) read and the new tokens' K/V written; activations left out.
FLOPs: 2 per multiply-add for every weight a token multiplies through (Kaplan et al. 2020, §2.1, C ≈ 2N; the
experts' k/E share), attention's QKᵀ and softmax·V over each query's keys, the head for each position whose logits
are computed. MLA's attention as transformers computes it, or absorbed into the latent as engines decode it
(DeepSeek-V2, arXiv:2405.04434, §2.1.2–2.1.3).
"""
from __future__ import annotations

from dataclasses import dataclass

from .memory import KV_DTYPES, WEIGHT_SCHEMES, kv_bytes_per_token, kv_cache_bytes, weight_bytes
from .specs import get_spec, param_breakdown
from .units import DTYPE_BYTES, normalize_dtype

# The share of the datasheet a serving engine reaches, for step_ms (step_floor_ms is at 100 %).
DEFAULT_EFFICIENCY = 0.5
EFFICIENCY_SOURCE = (
    "Databricks (MosaicML), \"LLM Inference Performance Engineering: Best Practices\", 2023-10-12, "
    "https://www.databricks.com/blog/llm-inference-performance-engineering-best-practices: model bandwidth "
    "utilization (MBU) = achieved ÷ peak memory bandwidth; its worked example, a 7B model in 16 bit at 14 ms "
    "per token on a 2 TB/s GPU, runs at 50 % MBU. Measure your own engine and pass --efficiency")

_PLAIN = ("fp32", "bf16", "fp16")


def expert_bytes(model, weights: str = "bf16") -> float:
    """Bytes of the routed experts as memory.weight_bytes stores them: fp8 and mxfp4 quantize experts;
    bitsandbytes int8/nf4 leave 3-D experts in bf16."""
    spec, s = get_spec(model), normalize_dtype(weights, WEIGHT_SCHEMES)
    pb = param_breakdown(spec)
    if not pb.experts:
        return 0.0
    if s not in ("mxfp4", "fp8"):
        return float(pb.experts * DTYPE_BYTES[s if s in _PLAIN else "bf16"])
    w = weight_bytes(spec, s)
    return (w.data_bytes + w.metadata_bytes) * pb.experts / w.quantized_params       # the experts' share


def experts_touched(model, tokens: int) -> float:
    """1 − (1 − k/E)^tokens: the expected share of a layer's experts `tokens` tokens touch (1 when dense)."""
    spec = get_spec(model)
    if not spec.num_experts or not spec.experts_per_token:
        return 1.0
    return 1.0 - (1.0 - spec.experts_per_token / spec.num_experts) ** tokens


def matmul_params(model) -> int:
    """Parameters each token is multiplied by in the blocks: every nn.Linear weight and the k/E active share of
    the experts (not the embedding lookup, not the head)."""
    spec = get_spec(model)
    pb = param_breakdown(spec)
    experts = pb.experts
    if experts and spec.num_experts and spec.experts_per_token:
        experts = experts * spec.experts_per_token // spec.num_experts
    return pb.linear + experts


def attention_flops_per_key(model, mla_absorbed: bool = False) -> int:
    """FLOPs of one query against one key in one layer, all query heads: QKᵀ and softmax·V, 4 × heads × head_dim;
    MLA 2·(qk_nope + qk_rope) + 2·v_head_dim per head, absorbed 2·(rank + qk_rope) + 2·rank."""
    s = get_spec(model)
    if not s.is_mla:
        return s.num_heads * 4 * s.head_dim
    if mla_absorbed:
        return s.num_heads * (2 * (s.kv_lora_rank + (s.qk_rope_head_dim or 0)) + 2 * s.kv_lora_rank)
    return s.num_heads * (2 * ((s.qk_nope_head_dim or 0) + (s.qk_rope_head_dim or 0)) + 2 * (s.v_head_dim or 0))


def _keys_in_span(first: int, last: int, window: int | None) -> int:
    """Σ_{k=first..last} min(k, window): keys attended by queries at positions first..last (1-based)."""
    if last < first:
        return 0
    if window is None or last <= window:
        return (first + last) * (last - first + 1) // 2
    if first > window:
        return (last - first + 1) * window
    return (first + window) * (window - first + 1) // 2 + (last - window) * window


def attended_keys(model, new_tokens: int, past_tokens: int = 0) -> int:
    """Query–key pairs of a causal forward over `new_tokens` after `past_tokens`, summed over layers."""
    spec = get_spec(model)
    return sum(_keys_in_span(past_tokens + 1, past_tokens + new_tokens,
                             spec.sliding_window if t == "sliding_attention" else None) for t in spec.layer_types)


@dataclass(frozen=True)
class StepCost:
    """Bytes and FLOPs of one forward step (all sequences of the batch, one GPU holding everything)."""

    model: str
    weights: str
    kv_dtype: str
    new_tokens: int
    past_tokens: int
    batch: int
    weight_bytes: int        # weights streamed once: all but the untied embedding table; MoE: experts touched
    embedding_bytes: int     # rows of the input embedding the step's tokens read (0 when tied: in weight_bytes)
    kv_read_bytes: int       # every sequence's cached K/V (at most the window on sliding layers)
    kv_write_bytes: int      # the new tokens' K/V
    matmul_flops: int
    attention_flops: int
    head_flops: int
    experts_touched: float   # share of each layer's routed experts read (1 when dense)

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.embedding_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def kv_bytes(self) -> int:
        return self.kv_read_bytes + self.kv_write_bytes

    @property
    def weight_read_bytes(self) -> int:
        return self.weight_bytes + self.embedding_bytes

    @property
    def flops(self) -> int:
        return self.matmul_flops + self.attention_flops + self.head_flops

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def forward_cost(model, new_tokens: int = 1, past_tokens: int = 0, batch: int = 1, weights: str = "bf16",
                 kv_dtype: str | None = None, logits_tokens: int = 1, mla_absorbed: bool = False) -> StepCost:
    """One forward of `batch` sequences, each `new_tokens` new after `past_tokens` (a decode step at context c:
    forward_cost(m, 1, c, batch); a prefill: forward_cost(m, n)). kv_dtype: default the weights' dtype, bf16 for
    a scheme; logits_tokens: the positions whose logits are computed (generation: the last one)."""
    spec, s = get_spec(model), normalize_dtype(weights, WEIGHT_SCHEMES)
    plain = s if s in _PLAIN else "bf16"      # a quantization scheme leaves the embedding (and the cache) in bf16
    kv = normalize_dtype(kv_dtype, KV_DTYPES) if kv_dtype else plain
    tokens = batch * new_tokens
    touched = experts_touched(spec, tokens)
    emb = 0 if spec.tie_word_embeddings else DTYPE_BYTES[plain]   # tied: the table is the head, read in full
    w = int(round(weight_bytes(spec, s).bytes - param_breakdown(spec).embedding * emb
                  - expert_bytes(spec, s) * (1.0 - touched)))
    return StepCost(
        model=spec.name, weights=s, kv_dtype=kv, new_tokens=new_tokens, past_tokens=past_tokens, batch=batch,
        weight_bytes=w, embedding_bytes=int(min(tokens, spec.vocab_size) * spec.hidden_size * emb),
        kv_read_bytes=kv_cache_bytes(spec, past_tokens, batch, kv) if past_tokens else 0,
        kv_write_bytes=tokens * kv_bytes_per_token(spec, kv),
        matmul_flops=batch * 2 * matmul_params(spec) * new_tokens,
        attention_flops=batch * attention_flops_per_key(spec, mla_absorbed) * attended_keys(spec, new_tokens, past_tokens),
        head_flops=batch * 2 * spec.hidden_size * spec.vocab_size * logits_tokens,
        experts_touched=touched)


def decode_cost(model, context: int, batch: int = 1, weights: str = "bf16", kv_dtype: str | None = None,
                mla_absorbed: bool = False) -> StepCost:
    """One decode step (one new token per sequence) over `context` cached tokens per sequence."""
    return forward_cost(model, 1, context, batch, weights, kv_dtype, mla_absorbed=mla_absorbed)
