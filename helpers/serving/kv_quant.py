"""KV-cache quantization with transformers' QuantizedCache: fp8 (per-tensor scale, built in), 4 and 2
bits (optimum-quanto, group-wise with a scale and a zero point per group of 64, the newest
`residual_length` tokens kept in full precision — KIVI, Liu et al., ICML 2024). For each: the bytes of
the real cache against helpers.cost.memory's formula, decode speed, and the quality cost (helpers.measure.quality:
KL divergence and top-1 agreement against the full-precision cache) on the evaluation text.

Only full-attention models: transformers' QuantizedCache rejects sliding-window layers.
"""
from __future__ import annotations

import math
import time

from ..cost.memory import kv_cache_bytes
from ..measure.tensor_bytes import measured_cache_bytes, plain_tensors
from ..measure.quality import kl_per_position, top1_agreement
from ..cost.stepcost import _count
from ..measure.timing import check_ids

# name -> (QuantizedCache backend, nbits, helpers.cost.memory KV dtype of the stored values)
SCHEMES: dict[str, tuple[str | None, int | None, str | None]] = {
    "full precision": (None, None, None),
    "fp8": ("fp8", None, "fp8"),
    "4-bit": ("quanto", 4, "int4"),
    "2-bit": ("quanto", 2, "int2"),
}


GROUP_SIZE = 64        # values per scale and zero point (QuantizedCache's q_group_size for quanto)
RESIDUAL_LENGTH = 128  # the newest tokens kept in full precision until they are quantized together
FP8_SCALE_BYTES = 4    # transformers' fp8 KV cache keeps an fp32 scale per K and V tensor (measured, fp32 and bf16)


def cache_bytes(model, tokens: int, dtype: str, scheme: str, residual_tokens: int = 0) -> dict[str, int]:
    """The bytes of a `scheme` cache holding `tokens` tokens of a model whose activations are `dtype`, by
    part: packed values (helpers.cost.memory.kv_cache_bytes at the scheme's storage dtype), metadata (quanto:
    a scale and a zero point in `dtype` per group of GROUP_SIZE values; fp8: one fp32 scale per K and V
    tensor per layer, whatever the model's dtype) and `residual_tokens` not yet quantized (full precision,
    at most RESIDUAL_LENGTH − 1). Pinned against the bytes of real QuantizedCaches of an fp32 and a bf16
    model (tests); used to project the measured shares onto a 7B model's cache."""
    from .. import checks
    from ..cost.specs import get_spec
    from ..cost.units import dtype_bytes

    backend, _, kv_dtype = SCHEMES[_check(scheme)]
    tokens = checks.count(tokens, "tokens")
    if isinstance(residual_tokens, bool) or not isinstance(residual_tokens, int) or not 0 <= residual_tokens <= tokens:
        raise ValueError(f"residual_tokens must be a whole number from 0 to tokens ({tokens}), got {residual_tokens!r}")
    spec = get_spec(model)
    if backend is None:
        return {"values": kv_cache_bytes(spec, tokens, dtype=dtype), "metadata": 0, "residual": 0,
                "total": kv_cache_bytes(spec, tokens, dtype=dtype)}
    quantized = tokens - residual_tokens
    values = kv_cache_bytes(spec, quantized, dtype=kv_dtype) if quantized else 0
    size = int(dtype_bytes(dtype))
    if backend == "fp8":
        meta = spec.num_layers * 2 * FP8_SCALE_BYTES
    else:
        elements = kv_cache_bytes(spec, quantized, dtype="int8") if quantized else 0   # 1 byte per element
        meta = math.ceil(elements / GROUP_SIZE) * 2 * size
    residual = kv_cache_bytes(spec, residual_tokens, dtype=dtype) if residual_tokens else 0
    return {"values": values, "metadata": meta, "residual": residual, "total": values + meta + residual}


def projected_shares(model, tokens: int, dtype: str) -> dict[str, float]:
    """Each scheme's cache as a share of full precision for `model` at `tokens` tokens in `dtype`, with
    half the residual window still in full precision (its average over a long generation)."""
    full = cache_bytes(model, tokens, dtype, "full precision")["total"]
    resid = min(tokens, RESIDUAL_LENGTH // 2)
    return {s: cache_bytes(model, tokens, dtype, s, 0 if SCHEMES[s][0] in (None, "fp8") else resid)["total"] / full
            for s in SCHEMES}


TRAINED_PROFILES = ("mistral-7b", "tiny-trained")   # helpers.measure.models profiles with trained weights; the rest are random


def quality_profile(current: str | None = None) -> tuple[str, bool]:
    """(profile, trained) for the quality figures: the `current` profile when its weights are trained
    (mistral-7b, tiny-trained), else a trained tiny model when helpers.measure.models offers one ('tiny-trained'),
    else the random tiny model (whose quality figures mean nothing: trained is False)."""
    from ..measure import models

    if current is not None and current not in models.PROFILES:
        raise ValueError(f"unknown profile {current!r}; allowed: {', '.join(models.PROFILES)}")
    if current in TRAINED_PROFILES:
        return current, True
    if "tiny-trained" in models.PROFILES:
        return "tiny-trained", True
    return "tiny", False


def available(scheme: str) -> str | None:
    """None when the scheme can run here, else why not."""
    backend = SCHEMES[_check(scheme)][0]
    if backend == "quanto":
        try:
            import optimum.quanto  # noqa: F401
        except ImportError:
            return "optimum-quanto is not installed (pip install optimum-quanto)"
    return None


def _check(scheme: str) -> str:
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise ValueError(f"unknown KV-cache scheme {scheme!r}; allowed: {', '.join(SCHEMES)}")
    return scheme


def make_cache(model, scheme: str, residual_length: int = RESIDUAL_LENGTH):
    from transformers import DynamicCache, QuantizedCache

    backend, nbits, _ = SCHEMES[_check(scheme)]
    if backend is None:
        return DynamicCache(config=model.config)
    if backend == "fp8":
        return QuantizedCache("fp8", model.config)
    return QuantizedCache(backend, model.config, nbits=nbits, residual_length=residual_length, q_group_size=GROUP_SIZE)


def _store_split(cache) -> dict[str, int]:
    """Bytes of a quantized cache by kind: 1-byte-element tensors (the packed values), floating-point
    tensors inside the quantized stores (scales, zero points) and the full-precision residual."""
    data = meta = resid = 0
    for layer in cache.layers:
        for name, value in vars(layer).items():
            if name.startswith("_quantized"):
                for t in plain_tensors(value):
                    if t.element_size() == 1:
                        data += t.numel()
                    else:
                        meta += t.numel() * t.element_size()
            elif name in ("keys", "values") and hasattr(value, "dim") and value.dim() >= 3:
                resid += value.numel() * value.element_size()
    return {"data": data, "metadata": meta, "residual": resid}


def bytes_rows(model, spec, ids, dtype: str) -> list[dict]:
    """Prefill `ids` (one sequence) then decode one token into each scheme's cache; the measured bytes
    (helpers.measure.tensor_bytes.measured_cache_bytes) against helpers.cost.memory.kv_cache_bytes for the packed values,
    the full-precision residual and the scales."""
    import torch

    x = check_ids(model, ids, 1, "ids", one_sequence=True).to(next(model.parameters()).device)
    rows = []
    for scheme, (backend, _, _) in SCHEMES.items():
        if available(scheme):
            continue
        cache = make_cache(model, scheme)
        with torch.inference_mode():
            nxt = model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1:].argmax(-1)
            model(input_ids=nxt, cache=cache, use_cache=True)
        tokens = x.shape[1] + 1
        measured = measured_cache_bytes(cache)
        if backend is None:
            formula = cache_bytes(spec, tokens, dtype, scheme)["total"]
            rows.append({"scheme": scheme, "tokens": tokens, "measured bytes": measured,
                         "formula bytes (values)": formula, "formula bytes (all parts)": formula,
                         "measured values bytes": measured, "scales & zero points bytes": 0,
                         "full-precision residual bytes": 0})
            continue
        split = _store_split(cache)
        resid_tokens = split["residual"] // max(1, kv_cache_bytes(spec, 1, dtype=dtype)) if split["residual"] else 0
        formula = cache_bytes(spec, tokens, dtype, scheme, resid_tokens)
        rows.append({"scheme": scheme, "tokens": tokens, "measured bytes": measured,
                     "formula bytes (values)": formula["values"], "formula bytes (all parts)": formula["total"],
                     "measured values bytes": split["data"], "scales & zero points bytes": split["metadata"],
                     "full-precision residual bytes": split["residual"]})
    full = rows[0]["measured bytes"]
    for r in rows:
        r["share of full precision"] = r["measured bytes"] / full
    return rows


def _scored_logprobs(model, ids, cache, prefill: int, chunk: int):
    """Log-probabilities at every position from `prefill − 1` on: the first `prefill` tokens in one
    forward, the rest fed `chunk` at a time into the same cache (so later tokens attend to what the cache
    stored, quantized or not)."""
    import torch

    x = torch.as_tensor(ids).reshape(1, -1).to(next(model.parameters()).device)
    outs = []
    with torch.inference_mode():
        outs.append(model(input_ids=x[:, :prefill], cache=cache, use_cache=True, logits_to_keep=1).logits[0])
        for s in range(prefill, x.shape[1], chunk):
            outs.append(model(input_ids=x[:, s:s + chunk], cache=cache, use_cache=True).logits[0])
    return torch.log_softmax(torch.cat(outs).float(), dim=-1).cpu()


def quality_rows(model, ids, prefill: int = 64, chunk: int = 16) -> list[dict]:
    """KL(p_full ‖ p_scheme) and top-1 agreement at every position after the prefill, each scheme's cache
    against the full-precision cache, on the same tokens (helpers.measure.quality)."""
    _count(prefill, "prefill", 1)
    _count(chunk, "chunk", 1)
    n = check_ids(model, ids, 0, "ids", one_sequence=True).shape[1]
    if n <= prefill + 1:
        raise ValueError(f"need more than prefill + 1 = {prefill + 1} tokens, got {n}")
    ref = _scored_logprobs(model, ids, make_cache(model, "full precision"), prefill, chunk)
    rows = []
    for scheme in SCHEMES:
        if scheme == "full precision" or available(scheme):
            continue
        lp = _scored_logprobs(model, ids, make_cache(model, scheme), prefill, chunk)
        kl = kl_per_position(ref[1:], lp[1:])     # the prefill's own position saw no quantized state
        rows.append({"scheme": scheme, "positions": int(kl.numel()), "KL mean (nats)": kl.mean().item(),
                     "KL max (nats)": kl.max().item(), "top-1 agreement": top1_agreement(ref[1:], lp[1:])})
    return rows


def speed_rows(model, ids, steps: int = 16) -> list[dict]:
    """Median time of a decode step after prefilling `ids`, per scheme (dequantizing costs time on a CPU:
    these kernels are not fused)."""
    import statistics

    import torch

    _count(steps, "steps", 1)
    x = check_ids(model, ids, steps, "ids", one_sequence=True).to(next(model.parameters()).device)
    rows = []
    for scheme in SCHEMES:
        if available(scheme):
            continue
        cache = make_cache(model, scheme)
        times = []
        with torch.inference_mode():
            nxt = model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1:].argmax(-1)
            for _ in range(steps):
                t0 = time.perf_counter()
                nxt = model(input_ids=nxt, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
                times.append(time.perf_counter() - t0)
        rows.append({"scheme": scheme, "context tokens": x.shape[1], "decode step (ms, median)": 1e3 * statistics.median(times)})
    base = rows[0]["decode step (ms, median)"]
    for r in rows:
        r["vs full precision"] = r["decode step (ms, median)"] / base
    return rows
