"""The workshop's key figures, each computed by the helper that owns it, for the slides and the report.

Every figure is a :class:`Figure`: the value, the text a slide or the report shows, and the helper
call that produced it. ``all_figures()`` is what ``slides/figures.py`` writes to JSON and what the
deck's ``{{name}}`` placeholders are filled from; ``by_notebook()`` groups them for the report.
Nothing here computes a quantity itself: it calls helpers.formulas.memory, helpers.formulas.roofline, helpers.capacity,
helpers.measure.quant, helpers.formulas.attention and formats the result with helpers.formulas.units.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from helpers.formulas.units import GB, GiB, KB, KiB

MODEL = "mistral-7b-v0.1"            # the talk's model
FULL_ATTENTION = "mistral-7b-v0.3"   # same shape, no sliding window: the talk's "context × users" figures
GPU = "H100 SXM"                     # the talk's GPU
SLO_MS = 10.0                        # the talk's premium-chat latency SLO, ms per output token
CONTEXT = 4096


@dataclass(frozen=True)
class Figure:
    value: Any
    text: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _n(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def foundations() -> dict[str, Figure]:
    """Notebook 02: KV bytes per token (B, KiB and kB), the exact parameter count, weight bytes, context × users."""
    from helpers.capacity import plan
    from helpers.formulas.memory import kv_bytes_per_token, kv_cache_bytes, weight_bytes

    kv = kv_bytes_per_token(MODEL, "bf16")
    w = weight_bytes(MODEL, "bf16")
    user_4k = kv_cache_bytes(FULL_ATTENTION, CONTEXT, 1)
    user_16k = kv_cache_bytes(FULL_ATTENTION, 4 * CONTEXT, 1)
    users = 80
    many = kv_cache_bytes(FULL_ATTENTION, CONTEXT, users)
    fit = plan(MODEL, GPU, context=CONTEXT)
    return {
        "kv_bytes_per_token": Figure(kv, f"{_n(kv)} B", f"kv_bytes_per_token('{MODEL}')"),
        "kv_kib_per_token": Figure(kv / KiB, f"{_n(kv / KiB)} KiB", f"kv_bytes_per_token('{MODEL}') / 2**10"),
        "kv_kb_per_token": Figure(kv / KB, f"{kv / KB:,.3f} kB", f"kv_bytes_per_token('{MODEL}') / 10**3"),
        "params": Figure(w.params, _n(w.params), f"weight_bytes('{MODEL}').params (architecture on meta)"),
        "weights_gb": Figure(w.bytes / GB, f"{w.bytes / GB:,.2f} GB", f"weight_bytes('{MODEL}', 'bf16') / 10**9"),
        "weights_gib": Figure(w.bytes / GiB, f"{w.bytes / GiB:,.2f} GiB", f"weight_bytes('{MODEL}', 'bf16') / 2**30"),
        "context": Figure(CONTEXT, _n(CONTEXT), "the talk's context"),
        "context_long": Figure(4 * CONTEXT, _n(4 * CONTEXT), "the talk's long context"),
        "kv_user_4k_gib": Figure(user_4k / GiB, f"{user_4k / GiB:,.2f} GiB", f"kv_cache_bytes('{FULL_ATTENTION}', {CONTEXT})"),
        "kv_user_16k_gib": Figure(user_16k / GiB, f"{user_16k / GiB:,.2f} GiB", f"kv_cache_bytes('{FULL_ATTENTION}', {4 * CONTEXT})"),
        "users": Figure(users, _n(users), "the talk's user count"),
        "kv_users_gb": Figure(many / GB, f"{many / GB:,.1f} GB", f"kv_cache_bytes('{FULL_ATTENTION}', {CONTEXT}, {users})"),
        "kv_users_gib": Figure(many / GiB, f"{many / GiB:,.1f} GiB", f"kv_cache_bytes('{FULL_ATTENTION}', {CONTEXT}, {users})"),
        "max_users_gpu": Figure(fit.max_batch, _n(fit.max_batch),
                                f"helpers.capacity.plan('{MODEL}', '{GPU}', context={CONTEXT}).max_batch"),
    }


def roofline_figures(gpu: str = GPU) -> dict[str, Figure]:
    """Notebook 03 on a catalogued GPU: ridge point, decode and prefill intensity, the decode floor."""
    from helpers.formulas.gpus import get_gpu
    from helpers.formulas.memory import kv_cache_bytes
    from helpers.formulas.roofline import crossover_batch, decode_floor_s, prefill_ridge_tokens, ridge_point
    from helpers.formulas.stepcost import decode_cost, forward_cost

    g = get_gpu(gpu)
    peak, _ = g.peak_flops("bf16")
    ridge = ridge_point(peak, g.bandwidth)
    dec = forward_cost(MODEL, 1, CONTEXT - 1).intensity
    pre = forward_cost(MODEL, CONTEXT).intensity
    shortest = prefill_ridge_tokens(MODEL, g.name)
    floor = decode_floor_s(decode_cost(MODEL, 0).weight_read_bytes, kv_cache_bytes(MODEL, CONTEXT), g.bandwidth)
    return {
        "gpu": Figure(g.name, g.name, "helpers/data/gpus.csv"),
        "gpu_bandwidth_tbs": Figure(g.bandwidth / 1e12, f"{g.bandwidth / 1e12:,.2f} TB/s", "helpers.formulas.gpus (datasheet)"),
        "gpu_peak_tflops": Figure(peak / 1e12, f"{peak / 1e12:,.0f} TFLOP/s", "helpers.formulas.gpus (dense bf16, datasheet)"),
        "ridge": Figure(ridge, f"{ridge:,.0f} FLOP/B", f"ridge_point(peak, bandwidth) of {g.name}"),
        "decode_intensity": Figure(dec, f"{dec:,.2f} FLOP/B", f"one decode step at {CONTEXT} tokens, batch 1"),
        "prefill_intensity": Figure(pre, f"{pre:,.0f} FLOP/B", f"prefill of {CONTEXT} tokens"),
        "prefill_ridge_tokens": Figure(shortest, _n(shortest),
                                       f"prefill_ridge_tokens('{MODEL}', '{g.name}'): the shortest compute-bound prompt"),
        "crossover_batch": Figure(crossover_batch(peak, g.bandwidth, 2), _n(crossover_batch(peak, g.bandwidth, 2)),
                                  "crossover_batch(peak, bandwidth, 2 B per parameter)"),
        "decode_floor_ms": Figure(floor * 1e3, f"{floor * 1e3:,.2f} ms", f"decode_floor_s(weights + KV at {CONTEXT}) / bandwidth"),
        **decode_batch_figures(g, peak, ridge),
    }


def decode_batch_figures(g, peak: float, ridge: float) -> dict[str, Figure]:
    """Batching against the KV cache at the talk's context: decode's intensity at the largest batch whose
    KV cache fits (helpers.capacity.max_batch) and at the weights-only crossover batch, against the ridge.
    Each sequence brings its own cache to read, so a batch raises FLOPs faster than bytes only while the
    weights dominate: at 4,096 tokens decode stays memory-bound at any batch that fits."""
    from helpers.capacity.planner import max_batch
    from helpers.formulas.roofline import crossover_batch
    from helpers.formulas.stepcost import forward_cost

    def intensity(batch: int) -> float:
        return forward_cost(MODEL, 1, CONTEXT - 1, batch).intensity

    fit = max_batch(MODEL, g.name, context=CONTEXT)
    cross = round(crossover_batch(peak, g.bandwidth, 2))
    src = f"stepcost.forward_cost('{MODEL}', 1 new token, {CONTEXT - 1} past, batch).intensity"
    return {
        "decode_batch_fit": Figure(fit, _n(fit), f"capacity.planner.max_batch('{MODEL}', '{g.name}', context={CONTEXT})"),
        "decode_intensity_at_fit": Figure(intensity(fit), f"{intensity(fit):,.1f} FLOP/B", src),
        "decode_intensity_at_crossover": Figure(intensity(cross), f"{intensity(cross):,.1f} FLOP/B", src),
        "decode_reaches_ridge_at_fit": Figure(intensity(fit) >= ridge,
                                              "reaches" if intensity(fit) >= ridge else "stays below",
                                              "decode_intensity_at_fit against ridge"),
    }


def planner() -> dict[str, Figure]:
    """Notebook 04: the cheapest catalogued GPU for Mistral 7B under the talk's 10 ms SLO at 4k context."""
    from helpers.capacity.ranking import rank

    rows = [r for r in rank(MODEL, context=CONTEXT, slo_ms=SLO_MS) if r["status"] == "ok"]
    best = rows[0]
    src = f"helpers.capacity.ranking.rank('{MODEL}', context={CONTEXT}, slo_ms={SLO_MS:g})[0]"
    return {
        "slo_ms": Figure(SLO_MS, f"{SLO_MS:g} ms", "the talk's premium-chat SLO"),
        "best_gpu": Figure(best["gpu"], best["gpu"], src),
        "best_gpu_batch": Figure(best["batch"], _n(best["batch"]), src),
        "best_gpu_usd_per_mtok": Figure(best["usd_per_million_tokens"], f"${best['usd_per_million_tokens']:,.3f}", src),
        "gpus_meeting_slo": Figure(len(rows), _n(len(rows)), "GPUs ranked ok"),
    }


def quantization() -> dict[str, Figure]:
    """Notebook 05: Mistral 7B under bitsandbytes schemes; GPT-OSS-120B on one GPU (the planner's budget)."""
    from helpers.formulas.memory import weight_bytes
    from helpers.formulas.quantization import fit_on_gpu

    out: dict[str, Figure] = {}
    bf16 = weight_bytes(MODEL, "bf16").bytes
    for s in ("bf16", "int8", "nf4"):
        b = weight_bytes(MODEL, s).bytes
        out[f"mistral_{s}_gb"] = Figure(b / GB, f"{b / GB:,.2f} GB", f"weight_bytes('{MODEL}', '{s}')")
        out[f"mistral_{s}_share"] = Figure(b / bf16, f"{100 * b / bf16:,.0f} %", f"{s} ÷ bf16")
    for r in fit_on_gpu("gpt-oss-120b", ("bf16", "fp8", "mxfp4"), GPU):
        s = r["scheme"]
        out[f"gptoss_{s}_gb"] = Figure(r["weight_bytes"] / GB, f"{r['weight_bytes'] / GB:,.0f} GB",
                                       f"fit_on_gpu('gpt-oss-120b')[{s}]")
        out[f"gptoss_{s}_fits"] = Figure(bool(r["fits"]), "fits" if r["fits"] else "does not fit",
                                         f"fit_on_gpu('gpt-oss-120b', gpu={GPU!r})[{s}]: the planner's budget")
    return out


def mla() -> dict[str, Figure]:
    """Notebook 06: MLA's cache per token against named baselines (DeepSeek V3 vs MHA and Mistral's GQA)."""
    from helpers.formulas.attention import mla_equivalent_gqa_groups, mla_ratios

    rows = mla_ratios("deepseek-v3", MODEL)
    keys = ("mla_bytes", "mla_vs_mha", "mla_vs_mha_rope", "mla_vs_mistral_gqa")
    out = {"mla_bytes": Figure(rows[0].bytes_per_token, f"{rows[0].bytes_per_token:,} B",
                               "mla_ratios('deepseek-v3')[0]")}
    for key, r in zip(keys[1:], rows[1:]):
        out[key] = Figure(r.baseline_over_mla, f"{r.baseline_over_mla:,.1f}×", f"mla_ratios: {r.cache}")
        out[key + "_bytes"] = Figure(r.bytes_per_token, f"{r.bytes_per_token:,} B", f"mla_ratios: {r.cache}")
    g = mla_equivalent_gqa_groups("deepseek-v3")
    out["mla_gqa_groups"] = Figure(g, f"{g:g}", "mla_equivalent_gqa_groups('deepseek-v3')")
    return out


def serving_reported() -> dict[str, Figure]:
    """The talk's serving benchmark (reported on an H100, not measured here) and its ratios, with the
    caveat that the baseline served one request at a time against vLLM's ten."""
    from helpers.benchmark.guide import TALK_CSV, talk_rows

    rows, name = talk_rows().to_dict("records"), TALK_CSV.name
    out: dict[str, Figure] = {}
    for r in rows:
        k = r["key"]
        for col, unit in (("tok_s", ""), ("ttft_ms", " ms"), ("itl_ms", " ms")):
            v = float(r[col])
            out[f"serve_{k}_{col}"] = Figure(v, f"{v:,.1f}{unit}" if col == "itl_ms" else f"{v:,.0f}{unit}",
                                             f"{name}: {r['configuration']}")
    base = float(rows[0]["tok_s"])
    best = max(rows[1:], key=lambda r: float(r["tok_s"]))
    ratio = float(best["tok_s"]) / base
    out["serve_best_ratio"] = Figure(ratio, f"{ratio:,.0f}×", f"{best['configuration']} ÷ {rows[0]['configuration']}")
    out["serve_concurrency"] = Figure(int(rows[1]["concurrency"]), str(rows[1]["concurrency"]), name)
    out["serve_baseline_concurrency"] = Figure(int(rows[0]["concurrency"]), str(rows[0]["concurrency"]), name)
    return out


def compute_share_figures() -> dict[str, Figure]:
    """Notebook 10: the share of a forward pass's FLOPs inside the transformer layers (the talk's "about
    95 %"), for Mistral 7B's decode step and prefill at the talk's context."""
    from helpers.formulas.compute_share import TALK_LAYER_SHARE, layer_share

    decode = layer_share(MODEL, 1, CONTEXT)
    prefill = layer_share(MODEL, CONTEXT, 0)
    holds = min(decode, prefill) >= TALK_LAYER_SHARE
    return {
        "talk_layers_share": Figure(100 * TALK_LAYER_SHARE, f"{100 * TALK_LAYER_SHARE:,.0f} %", "the talk's claim"),
        "layers_share_verdict": Figure(holds, "holds" if holds else "does not hold",
                                       "both shares ≥ the talk's claim (compute_share.TALK_LAYER_SHARE)"),
        "layers_share_decode": Figure(100 * decode, f"{100 * decode:,.1f} %", f"compute_share.layer_share('{MODEL}', 1, {CONTEXT})"),
        "layers_share_prefill": Figure(100 * prefill, f"{100 * prefill:,.1f} %",
                                       f"compute_share.layer_share('{MODEL}', {CONTEXT}, 0)"),
    }


CHUNK = 512   # the chunk of a chunked prefill on the slide (vLLM's default token budget is larger on a GPU)


def chunked_prefill_figures() -> dict[str, Figure]:
    """Notebook 07's chunked prefill at the talk's scale (helpers.capacity.plan): a whole prompt of the
    talk's context prefilled in one step stalls every running decode for its prefill; in chunks of
    CHUNK tokens each decode step waits for one chunk only."""
    from helpers.capacity import plan

    whole = plan(MODEL, GPU, context=CONTEXT, batch=1, prompt_tokens=CONTEXT)
    chunk = plan(MODEL, GPU, context=CONTEXT, batch=1, prompt_tokens=CHUNK)
    step = plan(MODEL, GPU, context=CONTEXT, batch=8)
    src = f"capacity.plan('{MODEL}', '{GPU}', prompt_tokens=…).prefill_s (efficiency {whole.efficiency:g})"
    return {
        "prefill_whole_floor_ms": Figure(whole.prefill_floor_s * 1e3, f"{whole.prefill_floor_s * 1e3:,.0f} ms",
                                         f"capacity.plan(prompt_tokens={CONTEXT}).prefill_floor_s (datasheet peak)"),
        "prefill_whole_ms": Figure(whole.prefill_s * 1e3, f"{whole.prefill_s * 1e3:,.0f} ms", src),
        "prefill_chunk_tokens": Figure(CHUNK, _n(CHUNK), "the slide's chunk"),
        "prefill_chunk_ms": Figure(chunk.prefill_s * 1e3, f"{chunk.prefill_s * 1e3:,.0f} ms", src),
        "prefill_chunks": Figure(CONTEXT // CHUNK, _n(CONTEXT // CHUNK), f"{CONTEXT} ÷ {CHUNK}"),
        "decode_step_b8_ms": Figure(step.step_s * 1e3, f"{step.step_s * 1e3:,.1f} ms",
                                    f"capacity.plan('{MODEL}', '{GPU}', context={CONTEXT}, batch=8).step_s"),
        "efficiency": Figure(whole.efficiency, f"{whole.efficiency:g}", "capacity.planner.DEFAULT_EFFICIENCY"),
    }


def parallel_figures() -> dict[str, Figure]:
    """Notebook 09: Mistral 7B's decode step under tensor parallelism on H100 SXMs (batch 8, the talk's
    context) over NVLink and PCIe, where the speed-up flattens, and pipeline parallelism's bubble."""
    from helpers.parallel import plan as par

    out: dict[str, Figure] = {}
    for kind in ("nvlink", "pcie"):
        rows = par.tp_scaling(MODEL, GPU, batch=8, context=CONTEXT, link=kind)
        last, flat = rows[-1], par.flattens_at(rows)
        src = f"parallel.plan.tp_scaling('{MODEL}', '{GPU}', batch=8, context={CONTEXT}, link='{kind}')"
        out[f"tp_{kind}_gpus"] = Figure(last.tp, _n(last.tp), src)
        out[f"tp_{kind}_speedup"] = Figure(last.speed_up, f"{last.speed_up:,.1f}×", src)
        out[f"tp_{kind}_comm_share"] = Figure(last.communication_share, f"{last.communication_share:.0%}", src)
        out[f"tp_{kind}_flattens"] = Figure(flat, f"flattens at {flat} GPUs" if flat else "does not flatten", src)
    one = par.parallel_step("llama-3.1-8b", GPU, 1, 1, 1, 32, 8192)
    two = par.parallel_step("llama-3.1-8b", GPU, 1, 2, 1, 32, 8192)
    src = "parallel.plan.parallel_step('llama-3.1-8b', 'H100 SXM', pp=2, micro_batches=1, batch=32, context=8192)"
    out["pp2_step_ratio"] = Figure(two.step_s / one.step_s, f"{two.step_s / one.step_s:,.2f}×", src)
    out["pp2_bubble"] = Figure(two.bubble_share, f"{two.bubble_share:.0%}", src)
    out["pp2_batch_ratio"] = Figure(two.max_batch / one.max_batch, f"{two.max_batch / one.max_batch:,.1f}×", src)
    return out


def agenda_figures() -> dict[str, Figure]:
    """The room's timings (scripts/agenda.py, from workshop/agenda.toml): `time_<slot>` ('0:08–0:20 · 12 min')
    for each slot, and `agenda_outline`, the agenda slide's list."""
    import agenda

    a = agenda.load()
    out: dict[str, Figure] = {}
    lines = []
    for s in a.slots:
        start = a.start(s.id)
        when = f"{agenda.clock(start)}–{agenda.clock(start + s.minutes)} · {s.minutes:g} min"
        out[f"time_{s.id}"] = Figure(start, when, f"agenda.load() (scripts/agenda.py).start({s.id!r}), workshop/agenda.toml")
        lines.append(f"- **{agenda.clock(start)}** {s.title}" + (f" — `{agenda.notebook_file(s.notebook).stem}`"
                                                                  if s.notebook else ""))
    out["agenda_outline"] = Figure(a.total_minutes, "\n".join(lines), "agenda.load() (scripts/agenda.py), workshop/agenda.toml")
    return out


def by_notebook() -> dict[str, dict[str, Figure]]:
    """Key figures grouped by the notebook that shows them (stems of notebooks/NN_*.py)."""
    return {"02_memory_equation": foundations(), "03_prefill_decode_roofline": roofline_figures(),
            "04_capacity_planner": planner(), "05_quantization": quantization(),
            "06_attention_variants": mla(), "07_serving_optimizations": chunked_prefill_figures(),
            "09_beyond_one_gpu": parallel_figures(),
            "10_under_the_hood": compute_share_figures()}


def all_figures() -> dict[str, Figure]:
    """Every key figure under one flat name (the slides' placeholders)."""
    out: dict[str, Figure] = {}
    for group in (agenda_figures(), serving_reported(), *by_notebook().values()):   # the agenda first: a bad one stops at once
        for k, v in group.items():
            if k in out and out[k] != v:  # pragma: no cover - names are chosen unique
                raise ValueError(f"two figures named {k}")
            out[k] = v
    return out

