"""KV-cache quantization with transformers' QuantizedCache: fp8 (a per-tensor scale), 4 and 2 bits
(optimum-quanto, a scale and zero point per group of 64, the newest `residual_length` tokens in full
precision: KIVI, Liu et al., ICML 2024): bytes against helpers.formulas.memory, decode speed, KL and top-1
against the full-precision cache (notebook 05). transformers 5 dequantizes the whole store at every step
(cache_utils.py: QuantizedLayer.update, Fp8QuantizedLayer.update) and attention reads a full-precision
copy: these caches save memory, not bytes read per step. Full-attention models only (no sliding window)."""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

from ..formulas.regime import ratio
from ..formulas.memory import kv_cache_bytes
from ..formulas.specs import get_spec
from ..measure.tensor_bytes import measured_cache_bytes, plain_tensors
from ..measure.timing import timed_generate
from ..measure.quality import kl_per_position, top1_agreement
from . import trained_profile

# name -> (QuantizedCache backend, nbits, helpers.formulas.memory KV dtype of the stored values)
SCHEMES: dict[str, tuple[str | None, int | None, str | None]] = {
    "full precision": (None, None, None),
    "fp8": ("fp8", None, "fp8"),
    "4-bit": ("quanto", 4, "int4"),
    "2-bit": ("quanto", 2, "int2"),
}


GROUP_SIZE = 64        # values per scale and zero point (QuantizedCache's q_group_size for quanto)
RESIDUAL_LENGTH = 128  # the newest tokens kept in full precision until they are quantized together
FP8_SCALE_BYTES = 4    # transformers' fp8 KV cache keeps an fp32 scale per K and V tensor (measured, fp32 and bf16)


@dataclass(frozen=True)
class CacheBytes:
    """A cache's bytes by part (the formula)."""

    values: int                      # the packed values
    metadata: int                    # scales and zero points
    residual: int                    # tokens not yet quantized, in full precision
    total: int


@dataclass(frozen=True)
class SchemeBytes:
    """One scheme's real cache against the formula."""

    scheme: str
    tokens: int
    measured_bytes: int
    formula_values_bytes: int
    formula_bytes: int               # every part: values, scales and zero points, residual
    measured_values_bytes: int
    metadata_bytes: int              # scales & zero points, measured
    residual_bytes: int              # the full-precision residual, measured
    share_of_full: float             # measured ÷ the full-precision cache's


@dataclass(frozen=True)
class SchemeQuality:
    """One scheme's cache against the full-precision cache, on the same tokens."""

    scheme: str
    positions: int
    kl_mean_nats: float
    kl_max_nats: float
    top1_agreement: float


@dataclass(frozen=True)
class SchemeSpeed:
    """One scheme's median decode step."""

    scheme: str
    context_tokens: int
    step_ms: float                   # median decode step
    vs_full: float                   # ÷ the full-precision cache's step


def cache_bytes(model, tokens: int, dtype: str, scheme: str, residual_tokens: int = 0) -> CacheBytes:
    """The bytes of a `scheme` cache of `tokens` tokens, activations in `dtype`, by part: packed values
    (kv_cache_bytes at the scheme's dtype), metadata (quanto: a scale and a zero point in `dtype` per
    GROUP_SIZE values; fp8: one fp32 scale per K and V tensor per layer) and `residual_tokens` in full
    precision. Pinned against real QuantizedCaches of an fp32 and a bf16 model (tests)."""
    from ..formulas.units import dtype_bytes

    backend, _, kv_dtype = SCHEMES[scheme]
    spec = get_spec(model)
    if backend is None:
        full = kv_cache_bytes(spec, tokens, dtype=dtype)
        return CacheBytes(full, 0, 0, full)
    quantized = tokens - residual_tokens
    values = kv_cache_bytes(spec, quantized, dtype=kv_dtype) if quantized else 0
    size = int(dtype_bytes(dtype))
    if backend == "fp8":
        meta = spec.num_layers * 2 * FP8_SCALE_BYTES
    else:
        elements = kv_cache_bytes(spec, quantized, dtype="int8") if quantized else 0   # 1 byte per element
        meta = math.ceil(elements / GROUP_SIZE) * 2 * size
    residual = kv_cache_bytes(spec, residual_tokens, dtype=dtype) if residual_tokens else 0
    return CacheBytes(values, meta, residual, values + meta + residual)


def projected_shares(model, tokens: int, dtype: str) -> dict[str, float]:
    """Each scheme's cache as a share of full precision for `model` at `tokens` tokens in `dtype`, with
    half the residual window still in full precision (its average over a long generation)."""
    full = cache_bytes(model, tokens, dtype, "full precision").total
    resid = min(tokens, RESIDUAL_LENGTH // 2)
    return {s: cache_bytes(model, tokens, dtype, s, 0 if SCHEMES[s][0] in (None, "fp8") else resid).total / full
            for s in SCHEMES}


def available(scheme: str, device: str = "cpu") -> str | None:
    """None when the scheme can run here, else why not."""
    from importlib.util import find_spec

    if SCHEMES[scheme][0] != "quanto":
        return None
    if not (find_spec("optimum") and find_spec("optimum.quanto")):
        return "optimum-quanto is not installed (pip install optimum-quanto)"
    return _quanto_cpu_kernel() if device == "cpu" else None


@functools.cache
def _quanto_cpu_kernel() -> str | None:
    """None when optimum-quanto's CPU kernel (the 2- and 4-bit unpacking) loads, else why not. quanto compiles
    it from C++ on its first use in an environment (library/extensions/cpp: about half a minute once), which
    needs a C++ compiler."""
    try:
        from optimum.quanto.library.extensions import get_extension

        get_extension("quanto_cpp").lib
    except Exception as exc:  # noqa: BLE001 - a compiler missing or failing: the scheme is not measured here
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return (f"optimum-quanto compiles its CPU kernel on first use, and could not here ({first[:160]}); "
                "a C++ compiler fixes it (Debian/Ubuntu: apt install g++; macOS: xcode-select --install)")
    return None


def make_cache(model, scheme: str):
    from transformers import DynamicCache, QuantizedCache

    backend, nbits, _ = SCHEMES[scheme]
    if backend is None:
        return DynamicCache(config=model.config)
    if backend == "fp8":
        return QuantizedCache("fp8", model.config)
    return QuantizedCache(backend, model.config, nbits=nbits, residual_length=RESIDUAL_LENGTH, q_group_size=GROUP_SIZE)


def _store_split(cache) -> dict[str, int]:
    """Bytes of a quantized cache: 1-byte tensors (values), float tensors in the stores (scales, zero points), residual."""
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


def bytes_by_scheme(model, spec, ids, dtype: str) -> list[SchemeBytes]:
    """Prefill `ids` (one sequence) then decode one token into each scheme's cache."""
    import torch

    x = torch.as_tensor(ids).reshape(1, -1).to(next(model.parameters()).device)
    rows: list[dict] = []
    for scheme, (backend, _, _) in SCHEMES.items():
        if available(scheme, x.device.type):
            continue
        cache = make_cache(model, scheme)
        timed_generate(model, x, 2, cache=cache)   # a prefill and one decode step into the scheme's cache
        tokens = x.shape[1] + 1
        measured = measured_cache_bytes(cache)
        split = {"data": measured, "metadata": 0, "residual": 0} if backend is None else _store_split(cache)
        formula = cache_bytes(spec, tokens, dtype, scheme, split["residual"] // kv_cache_bytes(spec, 1, dtype=dtype))
        rows.append(dict(scheme=scheme, tokens=tokens, measured_bytes=measured, formula_values_bytes=formula.values,
                         formula_bytes=formula.total, measured_values_bytes=split["data"],
                         metadata_bytes=split["metadata"], residual_bytes=split["residual"]))
    full = rows[0]["measured_bytes"]
    return [SchemeBytes(**r, share_of_full=ratio(r["measured_bytes"], full)) for r in rows]


def _scored_logprobs(model, ids, cache, prefill: int, chunk: int):
    """Log-probabilities from position `prefill − 1` on: the prefill in one forward, the rest `chunk` at a
    time into the same cache (later tokens attend to what the cache stored, quantized or not)."""
    import torch

    x = torch.as_tensor(ids).reshape(1, -1).to(next(model.parameters()).device)
    outs = []
    with torch.inference_mode():
        outs.append(model(input_ids=x[:, :prefill], cache=cache, use_cache=True, logits_to_keep=1).logits[0])
        for s in range(prefill, x.shape[1], chunk):
            outs.append(model(input_ids=x[:, s:s + chunk], cache=cache, use_cache=True).logits[0])
    return torch.log_softmax(torch.cat(outs).float(), dim=-1).cpu()


def quality_by_scheme(model, ids, prefill: int = 64, chunk: int = 16) -> list[SchemeQuality]:
    """KL(p_full ‖ p_scheme) and top-1 agreement at every position after the prefill, each scheme's cache
    against the full-precision cache, on the same tokens (helpers.measure.quality)."""
    ref = _scored_logprobs(model, ids, make_cache(model, "full precision"), prefill, chunk)
    rows = []
    for scheme in SCHEMES:
        if scheme == "full precision" or available(scheme, model.device.type):
            continue
        lp = _scored_logprobs(model, ids, make_cache(model, scheme), prefill, chunk)
        kl = kl_per_position(ref[1:], lp[1:])     # the prefill's own position saw no quantized state
        rows.append(SchemeQuality(scheme, int(kl.numel()), kl.mean().item(), kl.max().item(),
                                  top1_agreement(ref[1:], lp[1:])))
    return rows


def speed_by_scheme(model, ids, steps: int = 16) -> list[SchemeSpeed]:
    """Median decode step after prefilling `ids`, per scheme: one step of each in turn, `steps` rounds, so
    anything else slowing the machine slows them alike."""
    import statistics

    import torch

    x = torch.as_tensor(ids).reshape(1, -1).to(next(model.parameters()).device)
    caches, nxt, times = {}, {}, {}
    with torch.inference_mode():
        for scheme in SCHEMES:
            if available(scheme, x.device.type):
                continue
            caches[scheme] = make_cache(model, scheme)
            nxt[scheme] = model(input_ids=x, cache=caches[scheme], use_cache=True,
                                logits_to_keep=1).logits[:, -1:].argmax(-1)
            times[scheme] = []
        for _ in range(steps):
            for scheme, cache in caches.items():
                t0 = time.perf_counter()
                nxt[scheme] = model(input_ids=nxt[scheme], cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
                times[scheme].append(time.perf_counter() - t0)
    rows = [(scheme, x.shape[1], 1e3 * statistics.median(t)) for scheme, t in times.items()]
    base = rows[0][2]
    return [SchemeSpeed(scheme, context, ms, ratio(ms, base)) for scheme, context, ms in rows]


@dataclass
class KvQuantRun:
    """Each scheme's bytes and decode step on the loaded model, its quality on a trained one; `missing`: why not run."""

    label: str                      # the model the bytes and steps were measured on (Loaded.label)
    quality_label: str              # the model the quality was measured on
    sizes: list[SchemeBytes]
    steps: list[SchemeSpeed]
    quality: list[SchemeQuality]
    missing: dict[str, str] = field(default_factory=dict)


def measure_all(loaded, tokens: int = 300, quality_tokens: int = 400) -> KvQuantRun:
    """Bytes and decode steps of every scheme's cache after `tokens` tokens of the evaluation text on the
    loaded model; KL and top-1 against the full-precision cache over `quality_tokens` tokens on the model
    trained_profile names (the loaded one when its weights are trained)."""
    from ..measure import models
    from ..measure.quality import eval_ids

    ids = eval_ids(loaded.tokenizer, tokens)
    sizes = bytes_by_scheme(loaded.model, loaded.spec, ids, loaded.dtype)
    steps = speed_by_scheme(loaded.model, ids)
    profile = trained_profile(loaded.profile)
    judged = loaded if profile == loaded.profile else models.load(profile, device=loaded.device)
    quality = quality_by_scheme(judged.model, eval_ids(judged.tokenizer, quality_tokens, profile=judged.profile))
    missing = {s: why for s in SCHEMES if (why := available(s, loaded.model.device.type))}
    return KvQuantRun(loaded.label, judged.label, sizes, steps, quality, missing)
