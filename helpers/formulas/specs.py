"""A model's shape, read from its Hugging Face ``config.json`` (``head_dim``, ``layer_types``, whether a window
is switched on, MLA ranks: not assumed from hidden ÷ heads), and exact parameter counts from the architecture
transformers builds on the ``meta`` device (no weights, no memory). Every config is validated once, where it
enters (spec_from_config, by helpers.formulas.config_schema).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from .config_schema import read_config_file, show, validate_config

PRESET_DIR = Path(__file__).parents[1] / "presets"

# Short names of the presets shipped in helpers/presets/ (sources: presets/SOURCES.md).
PRESETS = ("mistral-7b-v0.1", "mistral-7b-v0.3", "llama-3.1-8b", "qwen2.5-7b", "deepseek-v2-lite", "deepseek-v3",
           "gpt-oss-120b")
ALIASES = {"mistral-7b": "mistral-7b-v0.1"}


def preset_path(name: str) -> Path:
    return PRESET_DIR / f"{ALIASES.get(name, name)}.json"


def load_config(model) -> tuple[str, dict]:
    """(name, config dict) for a preset name, a path to a config.json (or its folder, named after the folder), or
    a dict; a one-line ValueError on anything else."""
    if isinstance(model, ModelSpec):
        return model.name, model.config
    if isinstance(model, dict):
        name = model.get("_name_or_path") or model.get("model_type") or "config"
        return (name if isinstance(name, str) else "config")[:100], dict(model)
    text = str(model).strip()
    if not text:
        raise ValueError(f"empty model name; use a preset ({', '.join(PRESETS)}) or a path to a config.json")
    key = ALIASES.get(text.lower(), text.lower())
    if key in PRESETS:
        return key, read_config_file(preset_path(key))
    try:
        path = Path(text).expanduser()
        path = path / "config.json" if path.is_dir() else path
        found = path.exists()
    except (OSError, RuntimeError, ValueError) as exc:  # a name too long, ~nosuchuser, a NUL byte
        raise ValueError(f"cannot use {show(text, 200)} as a model path ({exc}); presets: {', '.join(PRESETS)}; "
                         "or give the path to a Hugging Face config.json") from None
    if not found:
        raise ValueError(f"unknown model {show(text, 200)}: not a preset and no such file; "
                         f"presets: {', '.join(PRESETS)}; or give the path to a Hugging Face config.json")
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem or path.name
    return name, read_config_file(path)


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only transformer, as far as memory and FLOPs need it."""

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    max_position_embeddings: int | None
    tie_word_embeddings: bool
    layer_types: tuple[str, ...]          # per layer: "full_attention" or "sliding_attention"
    sliding_window: int | None            # None when no layer slides
    kv_lora_rank: int | None = None       # MLA (DeepSeek V2/V3): compressed KV latent width
    qk_rope_head_dim: int | None = None   # MLA: the decoupled RoPE key part, cached too
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    num_experts: int | None = None
    experts_per_token: int | None = None
    moe_intermediate_size: int | None = None
    first_k_dense_replace: int | None = None
    config: dict = field(default_factory=dict, repr=False, compare=False, hash=False)

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def attention(self) -> str:
        """mha, mqa, gqa, mla, or hybrid (sliding and full layers mixed)."""
        if self.is_mla:
            return "mla"
        if len(set(self.layer_types)) > 1:
            return "hybrid"
        return {self.num_heads: "mha", 1: "mqa"}.get(self.num_kv_heads, "gqa")

    @property
    def sliding_layers(self) -> int:
        return sum(t == "sliding_attention" for t in self.layer_types)


def spec_from_config(cfg: dict, name: str = "config") -> ModelSpec:
    """A Hugging Face config dict as a ModelSpec, validated once (config_schema: a one-line ValueError)."""
    c = validate_config(cfg, name)
    heads, n = c.num_attention_heads, c.num_hidden_layers
    window = None if c.use_sliding_window is False else c.sliding_window   # Qwen2 carries a window switched off
    if window is None:
        types = ("full_attention",) * n
    elif c.layer_types:
        types = tuple(c.layer_types)
    else:
        first_full = (c.max_window_layers if c.use_sliding_window else 0) or 0
        types = tuple("sliding_attention" if i >= first_full else "full_attention" for i in range(n))
    return ModelSpec(
        name=name, hidden_size=c.hidden_size, num_layers=n,
        num_heads=heads, num_kv_heads=c.num_key_value_heads or heads, head_dim=c.head_dim or c.hidden_size // heads,
        vocab_size=c.vocab_size, intermediate_size=c.intermediate_size or 0,
        max_position_embeddings=c.max_position_embeddings, tie_word_embeddings=bool(c.tie_word_embeddings),
        layer_types=types, sliding_window=window if "sliding_attention" in types else None, config=cfg,
        num_experts=c.n_routed_experts or c.num_local_experts or c.num_experts or None,
        experts_per_token=c.num_experts_per_tok or c.experts_per_token,
        **{f: getattr(c, f) for f in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                                      "moe_intermediate_size", "first_k_dense_replace")})


def get_spec(model) -> ModelSpec:
    """ModelSpec for a preset name, a config.json path, or a config dict (a ModelSpec is returned as is)."""
    if isinstance(model, ModelSpec):
        return model
    name, cfg = load_config(model)
    return spec_from_config(cfg, name)


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameters by how quantizers treat them: linear, the blocks' nn.Linear weights (what bitsandbytes replaces;
    their rows, count and sizes; the attention blocks' q, k, v, o apart); experts, fused 3-D expert tensors (left
    alone by bitsandbytes); embedding and lm_head (0 when tied); other: norms, biases, routers, sinks."""

    total: int
    embedding: int
    lm_head: int
    linear: int
    linear_rows: int
    linear_layers: int
    linear_sizes: tuple[int, ...]
    experts: int
    expert_matrices: int
    other: int
    attention_projections: int


def build_meta_model(cfg: dict):
    """The architecture as transformers builds it, on the meta device: shapes, no storage."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    c = {k: v for k, v in cfg.items() if k not in ("quantization_config", "auto_map", "_name_or_path")}
    model_type = c.pop("model_type", None)
    if not model_type:
        raise ValueError("config has no model_type; cannot build its architecture")
    try:
        config = AutoConfig.for_model(model_type, **c)
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(config)
    except Exception as exc:  # noqa: BLE001 - any failure of transformers here is a config it cannot build
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"unsupported config: transformers cannot build a causal LM of model_type "
                         f"{model_type!r} ({first[:200]})") from None


@functools.lru_cache(maxsize=32)
def _breakdown(cfg_json: str) -> ParamBreakdown:
    import torch.nn as nn

    model = build_meta_model(json.loads(cfg_json))
    out_emb, in_emb = model.get_output_embeddings(), model.get_input_embeddings()
    seen: set[int] = set()
    emb = head = lin = rows = exp = nexp = other = attn = 0
    sizes: list[int] = []
    for mname, module in model.named_modules():
        for pname, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue  # tied weights count once
            seen.add(id(p))
            n = p.numel()
            if module is in_emb:
                emb += n
            elif module is out_emb:
                head += n
            elif isinstance(module, nn.Linear) and pname == "weight":
                lin, rows = lin + n, rows + p.shape[0]
                sizes.append(n)
                attn += n if ".self_attn." in f".{mname}." else 0
            elif p.ndim == 3:
                exp, nexp = exp + n, nexp + p.shape[0]
            else:
                other += n
    return ParamBreakdown(emb + head + lin + exp + other, emb, head, lin, rows, len(sizes), tuple(sizes), exp, nexp,
                          other, attn)


def param_breakdown(model) -> ParamBreakdown:
    """Exact parameter counts by kind, from the architecture built on the meta device."""
    return _breakdown(json.dumps(get_spec(model).config, sort_keys=True))


def param_count(model) -> int:
    """Exact number of parameters (tied weights once), e.g. 7,241,732,096 for Mistral 7B v0.1."""
    return param_breakdown(model).total
