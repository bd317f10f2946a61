"""A GPU's figures, computed for the reference model and GPU: the planner's plan (`gpu_plan`), the users
that fit, the quantized floors, and notebook 01's GPU tables.
"""
from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from ..formulas import regime
from ..formulas.specs import get_spec
from .expected import REFERENCE_GPU, REFERENCE_MODEL


def gpu_plan(model=REFERENCE_MODEL, gpu: str = REFERENCE_GPU, weight_dtype: str = "bf16", context: int = 4096,
             batch: int = 1, prompt_tokens: int | None = None):
    """The capacity planner's plan (helpers.capacity.plan) with the reference model and GPU as defaults."""
    from ..capacity import plan

    return plan(model, gpu, weight_dtype=weight_dtype, context=context, batch=batch, prompt_tokens=prompt_tokens)


def gpu_users(model=REFERENCE_MODEL, gpu: str = REFERENCE_GPU, context: int = 1024, overhead_bytes: float = 0.0) -> int:
    """Sequences of `context` tokens whose bf16 cache fits beside the bf16 weights in the memory CUDA reports."""
    from ..formulas.gpus import get_gpu
    from ..formulas.memory import kv_bytes_per_token, max_users, weight_bytes

    spec = get_spec(model)
    return max_users(get_gpu(gpu).usable_memory_bytes, weight_bytes(spec, "bf16").bytes, overhead_bytes,
                     kv_bytes_per_token(spec, "bf16"), context)


def gpu_expectations(sizes, model=REFERENCE_MODEL, gpu: str = REFERENCE_GPU) -> dict[str, Any]:
    """What a GPU run of notebook 01 shows for its sweep sizes (sweep_sizes("mistral-7b", "cuda"))."""
    from ..formulas.gpus import get_gpu
    from ..formulas.memory import kv_bytes_per_token, kv_cache_bytes, prefill_activation_bytes, weight_bytes

    spec, g = get_spec(model), get_gpu(gpu)
    w, ctx = weight_bytes(spec, "bf16").bytes, sizes.users_context
    users = gpu_users(spec, g.name, ctx)
    oom_at = next((b for b in sizes.users_batches if w + kv_cache_bytes(spec, ctx, b, "bf16")
                   + prefill_activation_bytes(spec, ctx, b, "bf16") > g.usable_memory_bytes), None)
    return {"model": spec.name, "gpu": g.name, "bandwidth": g.bandwidth, "peak_flops": g.peak_flops("bf16")[0],
            "memory_bytes": g.usable_memory_bytes, "weight_bytes": w, "kv_bytes_per_token": kv_bytes_per_token(spec, "bf16"),
            "ttft_floors_s": {n: gpu_plan(spec, g.name, context=n).prefill_floor_s for n in sizes.ttft_tokens},
            "users_context": ctx, "users_fit": users, "users_oom_at": oom_at,
            "users_cache_oom_at": next((b for b in sizes.users_batches if b > users), None)}


def quantized_decode_floors(model=REFERENCE_MODEL, gpu: str = REFERENCE_GPU,
                            schemes: Iterable[str] = ("bf16", "fp8", "int8", "nf4"), context: int = 1024):
    """The decode step's floor per weight scheme (batch 1), each ÷ the first's: fewer bytes, a shorter floor."""
    plans = [(s, gpu_plan(model, gpu, weight_dtype=s, context=context)) for s in schemes]
    base = plans[0][1].step_floor_s
    return pd.DataFrame([{"scheme": s, "weight bytes": p.weight_bytes, "step floor (ms)": p.step_floor_s * 1e3,
                          "bound": p.bound, "vs bf16 (×)": base / p.step_floor_s} for s, p in plans])


def gpu_users_table(gpu: dict):
    """The users sweep on a GPU (gpu_expectations' dict): memory, weights, cache, the users that fit, the OOM batch."""
    per = gpu["kv_bytes_per_token"] * gpu["users_context"]
    rows = [("memory as CUDA reports it (bytes)", gpu["memory_bytes"]), ("bf16 weights (bytes)", gpu["weight_bytes"]),
            (f"cache per sequence of {gpu['users_context']:,} tokens (bytes)", per),
            ("sequences whose cache fits beside the weights", gpu["users_fit"]),
            ("the sweep's first batch past them", gpu["users_cache_oom_at"]),
            ("first batch where weights + cache + prefill activation exceed the memory", gpu["users_oom_at"])]
    return pd.DataFrame([{"quantity": q, "value": v} for q, v in rows]).astype({"value": "object"})


def gpu_batch_table(batch: int, context: int = 1024):
    """The planner's decode floor at batch 1 and at `batch`, and batch ÷ batch 1 for each figure."""
    from ..formulas.stepcost import decode_cost

    def row(b):
        p, cost = gpu_plan(context=context, batch=b), decode_cost(REFERENCE_MODEL, context, b, "bf16")
        return ({"batch": b, "fits": True, "step floor (ms)": p.step_floor_s * 1e3, "bound": p.bound, "tokens/s": b / p.step_floor_s,
                 "weights' share of the bytes (%)": 100 * cost.weight_read_bytes / cost.bytes} if p.fits else {"batch": b, "fits": False})

    one, many = row(1), row(batch)
    ratios = {"batch": regime.ratio(batch, 1), "fits": None, **{c: regime.ratio(many.get(c), one.get(c)) for c in
                                                               ("step floor (ms)", "tokens/s", "weights' share of the bytes (%)")}}
    return pd.DataFrame([one, many, ratios], index=["batch 1", "your batch", "your batch ÷ batch 1"]).rename_axis("row").reset_index()
