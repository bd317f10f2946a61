"""The fields of a Hugging Face ``config.json`` that the calculators use, as one typed schema (pydantic v2), and
a safe reader for config files. Every config passes ``validate_config`` once, where it enters
(``helpers.formulas.specs.spec_from_config``): the checked fields, or one ``ValueError`` naming the field, its
value and what is allowed. Strict types (``"8"``, ``true``, ``0.5``, ``NaN`` are not whole numbers); bounds far
outside published models (hidden ≤ 18,432, layers ≤ 126, heads ≤ 128, vocab ≤ 262,144, context ≤ 10,485,760
today) that keep every product finite, positive and free of division by zero.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

# A config.json is kilobytes (Mistral 7B: 0.6 kB; DeepSeek V3: 1.7 kB): 1 MB leaves room for long id2label tables
# and refuses /dev/zero and multi-GB files before reading them.
MAX_CONFIG_BYTES = 1_000_000
MAX_TOKENS = 1_000_000_000        # max_position_embeddings, sliding_window (and --context, --tokens)

BOUNDS: dict[str, tuple[int, int]] = {name: bounds for bounds, names in {
    (1, 1 << 20): "hidden_size intermediate_size moe_intermediate_size",
    (1, 1024): "num_hidden_layers", (0, 1024): "max_window_layers first_k_dense_replace",
    (1, 1 << 16): "num_attention_heads num_key_value_heads head_dim kv_lora_rank qk_rope_head_dim qk_nope_head_dim "
                  "v_head_dim q_lora_rank num_experts_per_tok experts_per_token",
    (0, 1 << 16): "n_routed_experts num_local_experts num_experts n_shared_experts",
    (1, 1 << 24): "vocab_size", (1, MAX_TOKENS): "max_position_embeddings sliding_window",
}.items() for name in names.split()}
REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
MLA_FIELDS = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
LAYER_TYPES = ("full_attention", "sliding_attention")
# What a null means, said in the message of a field that may be null.
NULL_MEANS = {"num_key_value_heads": "as many as the attention heads: MHA",
              "head_dim": "hidden_size ÷ num_attention_heads", "sliding_window": "no layer slides",
              "kv_lora_rank": "not MLA", "max_position_embeddings": "no limit known"}


def show(value: Any, width: int = 40) -> str:
    """A value as the message quotes it: repr, cut short (a 400-digit number is not quoted whole)."""
    text = {None: "null", True: "true", False: "false"}.get(value, None) if isinstance(value, (bool, type(None))) \
        else repr(value)
    if len(text) > width:
        extra = f" ({len(text)} digits)" if isinstance(value, int) else ""
        text = text[:width] + "…" + extra
    return text


OTHER_FIELDS = {"layer_types": f"a list with one of {', '.join(LAYER_TYPES)} per layer",
                "tie_word_embeddings": "true or false", "use_sliding_window": "true or false",
                "model_type": "a string such as 'mistral'", "text_config": "a JSON object (the language model's config)"}


def allowed(name: str) -> str:
    """What a field accepts, in words."""
    if name not in BOUNDS:
        return OTHER_FIELDS.get(name, "a valid value")
    lo, hi = BOUNDS[name]
    return f"a whole number from {lo:,} to {hi:,}" + (f", or null ({NULL_MEANS[name]})" if name in NULL_MEANS else "")


class ConfigError(ValueError):
    """A config that the calculators cannot use: the message names the field, the value, what is allowed."""


def _field(kind, name: str | None = None):
    """A strict field of `kind` (within BOUNDS[name] for a whole number): required when REQUIRED, else nullable."""
    kind = Annotated[kind, Field(strict=True, **(dict(zip(("ge", "le"), BOUNDS[name])) if name in BOUNDS else {}))]
    return (kind, ...) if name in REQUIRED else (Optional[kind], None)


# The fields read from a (text) config; every other field passes through untouched.
ConfigFields = create_model(
    "ConfigFields", __config__=ConfigDict(extra="ignore", frozen=True), **{n: _field(int, n) for n in BOUNDS},
    model_type=_field(Annotated[str, Field(max_length=100)]), tie_word_embeddings=_field(bool),
    use_sliding_window=_field(bool), layer_types=_field(list[Annotated[str, Field(strict=True, max_length=100)]]))


def _cross_checks(c: BaseModel) -> None:
    """Consistency between fields; raises ConfigError(field, value, allowed)."""
    heads, layers = c.num_attention_heads, c.num_hidden_layers
    kv = c.num_key_value_heads
    if kv is not None and (kv > heads or heads % kv):
        raise ConfigError(f"num_key_value_heads is {kv}: {heads} attention heads cannot be shared evenly by {kv} KV "
                          f"heads; allowed: a divisor of num_attention_heads ({heads})")
    if c.head_dim is None and c.hidden_size % heads:
        raise ConfigError(f"hidden_size {c.hidden_size} is not divisible by num_attention_heads {heads}; "
                          "allowed: a multiple of the heads, or give head_dim explicitly")
    if c.kv_lora_rank is not None:
        missing = [f for f in MLA_FIELDS if getattr(c, f) is None]
        if missing:
            raise ConfigError(f"kv_lora_rank is {c.kv_lora_rank} (MLA) but {', '.join(missing)} "
                              f"{'is' if len(missing) == 1 else 'are'} missing or null; allowed: MLA configs give "
                              f"{', '.join(MLA_FIELDS)} as whole numbers ≥ 1")
    if c.layer_types is not None:
        bad = [t for t in c.layer_types if t not in LAYER_TYPES]
        if bad:
            raise ConfigError(f"layer_types holds {show(bad[0])}; allowed: {allowed('layer_types')}")
        if len(c.layer_types) != layers:
            raise ConfigError(f"layer_types has {len(c.layer_types)} entries for num_hidden_layers {layers}; "
                              "allowed: exactly one per layer")
        if "sliding_attention" in c.layer_types and c.sliding_window is None and c.use_sliding_window is not False:
            raise ConfigError("layer_types has sliding_attention layers but sliding_window is null; "
                              "allowed: a window of 1 or more tokens for sliding layers")
    experts = c.n_routed_experts or c.num_local_experts or c.num_experts
    per_tok = c.num_experts_per_tok or c.experts_per_token
    if experts and per_tok and per_tok > experts:
        raise ConfigError(f"num_experts_per_tok is {per_tok}; allowed: at most the {experts} experts")
    if c.first_k_dense_replace is not None and c.first_k_dense_replace > layers:
        raise ConfigError(f"first_k_dense_replace is {c.first_k_dense_replace}; allowed: 0 to num_hidden_layers "
                          f"({layers})")


def _first_error(exc: ValidationError, cfg: dict) -> str:
    err = exc.errors()[0]
    name = ".".join(str(p) for p in err["loc"][:1]) or "config"
    if err["type"] == "missing":
        return f"it has no {name!r}; allowed: {allowed(name)} (need a decoder-only LM config.json)"
    value = cfg.get(name, err.get("input"))
    return f"{name} is {show(value)}; allowed: {allowed(name)}"


def validate_config(cfg: Any, name: str = "config") -> BaseModel:
    """The checked fields of a config dict (its text_config merged in, as multimodal configs nest it), or a
    ConfigError (a ValueError): "config 'name': <field> is <value>; allowed: <what>"."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"config {name!r} is a {type(cfg).__name__}; allowed: a JSON object (a Hugging Face "
                          "config.json)")
    inner = cfg.get("text_config")
    if inner is not None and not isinstance(inner, dict):
        raise ConfigError(f"config {name!r}: text_config is {show(inner)}; allowed: {allowed('text_config')}")
    merged = {**cfg, **inner} if inner else cfg
    try:
        fields = ConfigFields.model_validate(merged)
        _cross_checks(fields)
    except ValidationError as exc:
        raise ConfigError(f"config {name!r}: {_first_error(exc, merged)}") from None
    except ConfigError as exc:
        raise ConfigError(f"config {name!r}: {exc}") from None
    return fields


def _no_constant(token: str):
    raise ValueError(f"{token} is not a number JSON allows")


def read_config_file(path: Path, limit: int = MAX_CONFIG_BYTES) -> dict:
    """A config file's JSON object: a regular file (not a device, pipe or folder) of at most `limit` bytes, UTF-8,
    refusing NaN/Infinity, numbers of thousands of digits and nesting too deep to parse."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ConfigError(f"{path} is not a regular file; allowed: a config.json")
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot read {show(str(path), 200)}: {why}") from None
    if len(data) > limit:   # read no further: /dev/zero and /proc files report sizes they do not hold
        raise ConfigError(f"{path} is over {limit:,} bytes; allowed: a config.json of at most {limit:,} bytes")
    try:
        cfg = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read {path} as a JSON config: it is not UTF-8 text") from None
    except RecursionError:
        raise ConfigError(f"cannot read {path} as a JSON config: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, too many digits
        raise ConfigError(f"cannot read {path} as a JSON config: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path} is not a Hugging Face config (expected a JSON object, got a {type(cfg).__name__})")
    return cfg

