"""Every catalogued GPU ranked by the cost of a million output tokens once a latency SLO or a minimum batch
is fixed, each at the largest batch the constraints allow (rows read from helpers.capacity.planner's plans);
and, when a model fits no catalogued GPU at a count, why, with the tensor-parallel count that would work.
"""
from __future__ import annotations

import math
from typing import Iterable

from .. import checks
from .planner import DEFAULT_EFFICIENCY, GPU_COUNTS, Plan, check_context, plan, sharding
from .slo import plan_for_slo
from ..formulas.gpus import catalog, providers
from ..formulas.specs import ModelSpec, get_spec


def fits_somewhere(spec, weight_dtype, kv_dtype, context, gpus) -> bool:
    """Whether batch 1 fits some catalogued GPU at this count (False when the count cannot shard the model)."""
    try:
        return any(plan(spec, g, gpus, weight_dtype, kv_dtype, context, 1).max_batch >= 1 for g in catalog())
    except ValueError:
        return False


def no_fit_message(spec: ModelSpec, weight_dtype: str, kv_dtype: str, context: int, gpus: int) -> str:
    """Why a model fits no catalogued GPU at this count, and the smallest count that would."""
    biggest = max(catalog(), key=lambda g: g.memory_gb)
    p = plan(spec, biggest, gpus, weight_dtype, kv_dtype, context, 1)
    n = next((n for n in GPU_COUNTS if n > gpus and fits_somewhere(spec, weight_dtype, kv_dtype, context, n)), None)
    hint = f"; it fits on {n} GPUs in tensor parallel (--gpus {n})" if n else ""
    count = "alone" if gpus == 1 else f"in tensor parallel over {gpus}"
    return (f"{spec.name} ({weight_dtype} weights, {kv_dtype} KV, {context:,} tokens) fits no catalogued GPU "
            f"{count}: even on the largest, {biggest.name} ({biggest.memory_gb:g} GB), {p.reason}{hint}; "
            "or choose a smaller weight dtype (fp8, nf4) or a shorter context")


def providers_of(rows: Iterable[dict]) -> list[str]:
    """The providers whose prices a ranking holds, in its order (more than one: the ranking mixes them)."""
    return list(dict.fromkeys(r["provider"] for r in rows))


def rank(model, weight_dtype: str = "bf16", kv_dtype: str = "bf16", context: int = 4096,
         slo_ms: float | None = None, min_batch: int | None = None, gpus: int = 1, efficiency: float = DEFAULT_EFFICIENCY,
         provider: str | None = None, prompt_tokens: int | None = None, output_tokens: int | None = None) -> list[dict]:
    """Every catalogued GPU (or those `provider` prices), cheapest first, each at the largest
    batch that fits and meets `slo_ms` (latency first: chat) with at least `min_batch` sequences (throughput
    first: batch jobs): the largest batch costs least per token. Ranked by $ per request with `output_tokens`,
    else by $ per million output tokens; GPUs that miss the constraints follow, with the reason. ValueError
    when the model fits no catalogued GPU at this count, with the count that would work."""
    spec = get_spec(model)
    context = check_context(spec, context)
    gpus = checks.count(gpus, "GPU count")
    sharding(spec, gpus)  # refuses counts that do not divide the heads
    need = 1 if min_batch is None else checks.count(min_batch, "minimum batch")
    if slo_ms is not None:
        checks.number(slo_ms, "SLO", positive=True, unit="ms per output token")
    if provider is not None and str(provider).strip().lower() not in [p.lower() for p in providers()]:
        raise ValueError(f"unknown provider {provider!r}; the catalog's prices come from: {', '.join(providers())}")
    gs = [g for g in catalog() if provider is None or g.price_provider.lower() == str(provider).strip().lower()]
    if not fits_somewhere(spec, weight_dtype, kv_dtype, context, gpus):
        raise ValueError(no_fit_message(spec, weight_dtype, kv_dtype, context, gpus))
    kw = {"efficiency": efficiency, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens}
    rows = []
    for g in gs:
        first = plan(spec, g, gpus, weight_dtype, kv_dtype, context, 1, **kw)
        if first.max_batch < 1:
            rows.append(_row(first, "does not fit", first.reason))
            continue
        if first.max_batch < need:
            p = plan(spec, g, gpus, weight_dtype, kv_dtype, context, need, **kw)
            rows.append(_row(p, "batch too small", f"fits batch {first.max_batch} < minimum {need}"))
            continue
        if slo_ms is not None:
            p, ok = plan_for_slo(spec, g, slo_ms, gpus, weight_dtype, kv_dtype, context, need, **kw)
            if not ok:
                rows.append(_row(p, "misses SLO", f"batch {p.batch} already takes {p.step_ms:.2f} ms per token "
                                 f"> SLO {slo_ms:g} ms"))
                continue
            note = f"largest batch within {slo_ms:g} ms (fits {first.max_batch})"
        else:
            p = plan(spec, g, gpus, weight_dtype, kv_dtype, context, first.max_batch, **kw)
            note = "largest batch that fits"
        rows.append(_row(p, "ok", note))
    by = "usd_per_request" if output_tokens is not None else "usd_per_million_tokens"
    rows.sort(key=lambda r: (r["status"] != "ok", r[by] if r["status"] == "ok" else math.inf, r["gpu"]))
    return [{**r, "rank": i if r["status"] == "ok" else None} for i, r in enumerate(rows, 1)]


def rank_requests(model, prompt_tokens: int, output_tokens: int, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                  context: int | None = None, slo_ms: float | None = None, min_batch: int | None = None,
                  gpus: int = 1, efficiency: float = DEFAULT_EFFICIENCY,
                  provider: str | None = None) -> list[dict]:
    """rank() for requests of prompt + output tokens (context: their sum unless given), cheapest
    request first: $ per million input and output tokens the way API providers price them, prefill
    counted, next to the decode-only figure."""
    prompt_tokens = checks.count(prompt_tokens, "prompt tokens")
    output_tokens = checks.count(output_tokens, "output tokens")
    return rank(model, weight_dtype, kv_dtype, context or prompt_tokens + output_tokens, slo_ms, min_batch, gpus,
                efficiency=efficiency, provider=provider, prompt_tokens=prompt_tokens, output_tokens=output_tokens)


# A ranking's row: the plan's figures for one GPU; rank None and status why ("does not fit", "batch too small",
# "misses SLO") where it misses the constraints, its figures then None; usd_per_hour counts all its `gpus`.
ROW = ("rank gpu gpus provider status batch max_batch step_ms step_floor_ms tokens_per_s prefill_ms bound prefill_bound "
       "usd_per_hour usd_per_million_tokens usd_per_million_input_tokens usd_per_million_output_tokens usd_per_request "
       "note").split()
_OK_ONLY = ("batch", "tokens_per_s", "prefill_ms", "bound", "prefill_bound", "usd_per_million_tokens",
            "usd_per_million_input_tokens", "usd_per_million_output_tokens", "usd_per_request")


def _row(p: Plan, status: str, note: str) -> dict:
    d = {**p.to_dict(), "rank": None, "status": status, "note": note, "usd_per_hour": p.usd_per_hour * p.gpus}
    blank = (() if status == "ok" else _OK_ONLY) + (() if status in ("ok", "misses SLO") else ("step_ms", "step_floor_ms"))
    return {f: None if f in blank else d[f] for f in ROW}
