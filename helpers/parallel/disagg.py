"""Disaggregated prefill and decode from the planner's step times: TTFT and ITL on G GPUs that share both
phases and on the same GPUs split into prefill and decode GPUs (DistServe, arXiv:2401.09670; Splitwise,
arXiv:2311.18677). Requests of P prompt and O output tokens arrive at λ per second (Poisson), in steady state::

    t_p    = plan(prompt_tokens=P).prefill_s        one prompt's prefill on one GPU
    t_d(b) = plan(batch=b, context=P + O/2).step_s   one decode step of b sequences at their mean context

    shared, G GPUs (each prefills a request whole before its next decode step):
        ρ = λ · t_p ÷ G,  ITL = t_d(b) ÷ (1 − ρ),  b = λ · O · ITL ÷ G (Little's law),  longest gap = t_d(b) + t_p
    split, P prefill and D = G − P decode GPUs, each request's KV cache crossing `link` once:
        ρ = λ · t_p ÷ P,  b = λ · O · t_d(b) ÷ D,  ITL = t_d(b) + send(KV) ÷ (O − 1),  longest gap = t_d(b) + send(KV)
    both, ρ the prefill load: TTFT = t_p + ρ · t_p ÷ (2 · (1 − ρ)), the prefill and an M/D/1 queue's mean wait

NaN where ρ ≥ 1 or the decode batch outgrows the KV cache. Engines that chunk prefills (vLLM V1, SGLang) stall
for one chunk instead of t_p. KV offload (offload_steps): a cache in host memory comes over PCIe each step.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import pandas as pd

from .. import checks
from ..capacity.planner import DEFAULT_EFFICIENCY, plan
from ..formulas.gpus import get_gpu
from ..formulas.memory import kv_cache_bytes
from ..formulas.specs import get_spec
from .collectives import send_s
from .links import Link, get_link

NAN = float("nan")


@dataclass(frozen=True)
class Deployment:
    """One way to serve the requests on the GPUs (seconds; NaN where the deployment cannot keep up)."""

    name: str
    prefill_gpus: int            # GPUs that prefill (all G in the shared pool)
    decode_gpus: int             # GPUs that decode (all G in the shared pool)
    prefill_load: float          # ρ: arrivals × prefill ÷ prefill GPUs
    decode_batch: float          # sequences decoding on one decode GPU
    ttft_s: float
    itl_s: float
    longest_gap_s: float
    kv_send_s: float             # one request's KV cache over the link (0 in the shared pool)
    prefill_s: float             # t_p
    decode_step_s: float         # t_d at the decode batch


@functools.lru_cache(maxsize=4096)     # shared by the calls of deployments() at each arrival rate
def _step_s(spec, gpu, weight_dtype: str, kv_dtype: str, context: int, batch: int, efficiency: float) -> float:
    return plan(spec, gpu, 1, weight_dtype, kv_dtype, context, batch, efficiency=efficiency).step_s


def deployments(model, gpu, gpus: int = 4, rate: float = 8.0, prompt: int = 4096, output: int = 128,
                link: str | Link | None = "infiniband", weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                efficiency: float = DEFAULT_EFFICIENCY) -> list[Deployment]:
    """The shared pool of `gpus` GPUs, then each split into prefill and decode GPUs; `link` carries the KV cache."""
    spec, g = get_spec(model), get_gpu(gpu)
    gpus, prompt, output = checks.count(gpus, "GPUs"), checks.count(prompt, "prompt tokens"), checks.count(output, "output tokens")
    rate = checks.number(rate, "the arrival rate", unit="requests/s")
    if gpus < 2 or output < 2:
        raise ValueError(f"a split needs at least 2 GPUs and 2 output tokens, got {gpus} GPUs, {output} tokens")
    context = prompt + output // 2
    first = plan(spec, g, 1, weight_dtype, kv_dtype, context, 1, prompt_tokens=prompt, efficiency=efficiency)
    if not first.fits:
        raise ValueError(f"{spec.name} does not fit one {g.name} at {context:,} tokens: {first.reason}")

    def step(b: int) -> float:
        return _step_s(spec, g.name, weight_dtype, kv_dtype, context, b, efficiency)

    t_p = first.prefill_s
    send = send_s(kv_cache_bytes(spec, prompt, 1, kv_dtype), get_link(g, link, 2))
    out = []
    for p in range(gpus):                  # p = 0: the shared pool, every GPU doing both
        pre, dec, hop = (gpus, gpus, 0.0) if p == 0 else (p, gpus - p, send)
        load = rate * t_p / pre
        stretch = 1 / (1 - load) if p == 0 and load < 1 else 1.0
        b = t_d = NAN                      # the fewest slots n that hold the b = λ · O · t_d(n) · stretch ÷ D sequences
        for n in range(1, first.max_batch + 1) if load < 1 else ():
            if (need := rate * output * step(n) * stretch / dec) <= n:
                b, t_d = need, step(n)
                break
        out.append(Deployment(f"shared {gpus}" if p == 0 else f"split {p} + {dec}", pre, dec, load, b,
                              t_p + load * t_p / (2 * (1 - load)) if b == b else NAN,   # the M/D/1 queue's wait
                              t_d * stretch if p == 0 else t_d + send / (output - 1),
                              t_d + (t_p if p == 0 else send), hop, t_p, t_d))
    return out


def offload_steps(model, gpu, contexts=(4096, 32768, 131072), batch: int = 1, kv_dtype: str = "bf16") -> pd.DataFrame:
    """Per decode step, one row per context: the KV cache's bytes read from HBM against brought over PCIe."""
    spec, g = get_spec(model), get_gpu(gpu)
    pcie = get_link(g, "pcie").bandwidth
    kv = {c: kv_cache_bytes(spec, c, batch, kv_dtype) for c in contexts}
    return pd.DataFrame([(c, b / 1e9, b / g.bandwidth * 1e3, b / pcie * 1e3, g.bandwidth / pcie) for c, b in kv.items()],
                        columns=["context (tokens)", "KV cache GB", "from HBM ms", "over PCIe ms", "PCIe ÷ HBM time"])
