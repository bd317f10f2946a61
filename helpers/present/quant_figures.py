"""Tables of notebook 05 (weight and KV-cache quantization), each ratio beside its below / at / above label."""
from __future__ import annotations

from typing import Any

from ..formulas import regime
from ..formulas.memory import weight_bytes
from ..formulas.quantization import FORMATS, bits_per_weight, preset_footprints, rule_of_thumb
from ..measure.quant import SCHEMES, streamed_bytes


def _labelled(name: str, value, reference) -> dict:
    """{name: value ÷ reference, name label: below / at / above}."""
    r, way = regime.against(value, reference)
    return {name: r, f"{name} label": way}


def footprint_rows(results: list, spec) -> list[dict[str, Any]]:
    """Measured weight bytes against the prediction, each ÷ the reference's and ÷ the rule of thumb's."""
    ref, base = results[0].footprint.get("measured_weight_bytes"), results[0].scheme
    rows = []
    for r in results:
        if r.error:
            rows.append({"scheme": r.label, "error": r.error})
            continue
        f, share = r.footprint, regime.ratio(r.footprint["measured_weight_bytes"], ref)
        rows.append({"scheme": r.label, "measured weights (B)": f["measured_weight_bytes"],
                     "predicted weights (B)": f["predicted_weight_bytes"],
                     "measured − predicted (B)": f["measured_weight_bytes"] - f["predicted_weight_bytes"],
                     "of which metadata (B)": f["metadata_bytes"], "buffers (B)": f["buffer_bytes"],
                     "model total (MB)": f["measured_model_bytes"] / 1e6, "÷ reference": share,
                     **_labelled("÷ rule of thumb", share, rule_of_thumb(r.scheme, base) if r.scheme in SCHEMES else 1.0),
                     "predicted at bf16 base (MB)":   # the reference at bf16
                     weight_bytes(spec, r.scheme if r.scheme in SCHEMES else "bf16", base_dtype="bf16").bytes / 1e6})
    return rows


def speed_rows(results: list, spec, bandwidth: float | None = None) -> list[dict[str, Any]]:
    """Each timed model's prefill and step, step ÷ reference against bytes read ÷ reference (labelled) and, with
    a datasheet `bandwidth`, step ÷ its memory floor."""
    ref = results[0]
    ref_step = ref.speed.get("itl_s") if ref.speed else None
    ref_bytes = streamed_bytes(ref, spec, ref.scheme) if ref.footprint else None
    rows = []
    for r in (r for r in results if not r.error and r.speed):
        step = r.speed.get("itl_s")
        row = {"scheme": r.label, "prompt tokens": r.speed.get("prompt_tokens"),
               "prefill (ms)": 1e3 * r.speed.get("prefill_s", float("nan")),
               "decode step (ms)": 1e3 * step if step is not None else None, "decode (tokens/s)": regime.ratio(1.0, step),
               "step ÷ reference": regime.ratio(step, ref_step),
               "bytes read ÷ reference": regime.ratio(streamed_bytes(r, spec, ref.scheme), ref_bytes) if r.footprint else float("nan")}
        row.update(_labelled("time ÷ bytes", row["step ÷ reference"], row["bytes read ÷ reference"]))
        if bandwidth:
            floor = streamed_bytes(r, spec, ref.scheme) / bandwidth
            row.update({"floor (ms)": 1e3 * floor, **_labelled("step ÷ floor", step, floor)})
        rows.append(row)
    return rows


def quality_rows(results: list) -> list[dict[str, Any]]:
    """Each model's perplexity ÷ the reference's (labelled), KL against it, top-1 agreement."""
    ref = results[0].quality or {}
    return [{"scheme": r.label, "perplexity": q["perplexity"],
             **_labelled("perplexity ÷ reference", q["perplexity"], ref.get("perplexity")),
             "KL(ref ‖ q) mean (nats)": q["kl_mean"], "KL max (nats)": q["kl_max"], "top-1 agreement": q["top1_agreement"],
             "positions with another top token": round((1 - q["top1_agreement"]) * q["positions"]),
             "positions": q["positions"]} for r, q in ((r, r.quality) for r in results) if not r.error and q is not None]


def weights_rows(weights: list) -> list[dict[str, Any]]:
    """One model's computed weight bytes by scheme (quantization.preset_footprints), ÷ bf16 and the rule of thumb."""
    return [{"model": w.model, "scheme": w.scheme, "bytes": w.bytes, "GB": w.gb, "metadata (B)": w.metadata_bytes,
             "share quantized": w.quantized_share, "÷ bf16": w.vs_first,
             **_labelled("÷ rule of thumb", w.vs_first, rule_of_thumb(w.scheme))} for w in weights]


def presets_rows(models=None, schemes=("bf16", "int8", "nf4", "nf4-dq")) -> list[dict[str, Any]]:
    """Weight GB of each model under each bitsandbytes scheme, the share it quantizes, nf4 ÷ bf16 against ¼."""
    from ..formulas.specs import PRESETS

    fps = [{w.scheme: w for w in preset_footprints(name, schemes)} for name in models or PRESETS]
    return [{"model": fp[schemes[0]].model, **{f"{s} (GB)": w.gb for s, w in fp.items()},
             "share bitsandbytes quantizes": fp[schemes[-1]].quantized_share,
             **(_labelled("nf4 ÷ bf16 ÷ ¼", fp["nf4"].vs_first, rule_of_thumb("nf4")) if "nf4" in fp else {})} for fp in fps]


def formats_rows(in_features: int = 4096, out_features: int = 4096) -> list[dict[str, Any]]:
    """Bits per weight of one matrix in each stored format, metadata included, and ÷ bf16's."""
    bits = {f: bits_per_weight(f, in_features, out_features) for f in FORMATS}
    return [{"format": f, "bits per weight": b, "÷ bf16": b / bits_per_weight("bf16", in_features, out_features)}
            for f, b in bits.items()]


def fit_rows(fits: list) -> list[dict[str, Any]]:
    """A model on one GPU by scheme (helpers.formulas.quantization.fit_on_gpu)."""
    return [{"model": f["model"], "scheme": f["scheme"], "gpu": f["gpu"], "weight bytes": f["weight_bytes"],
             "weights (GB)": f["weight_bytes"] / 1e9, "GPU reports (GB)": f["memory_bytes"] / 1e9,
             "usable after reserve (GB)": f["usable_bytes"] / 1e9, "fits": f["fits"],
             "left for KV cache (GB)": f["kv_budget_bytes"] / 1e9,
             f"sequences of {f['context']:,} tokens": f["max_batch"],
             f"KV cache room ({f['kv_dtype']}), one sequence up to (tokens)": f["longest_sequence"]} for f in fits]


def perplexity_rows(perplexities: list) -> list[dict[str, Any]]:
    """The random, the trained and the uniform guess (training.perplexities), the first's ÷ each."""
    first = perplexities[0].perplexity if perplexities else None
    return [{"model": p.model, "profile": p.profile, "perplexity": p.perplexity, "tokens": p.tokens,
             "measured on": p.measured_on, "first ÷ this": regime.ratio(first, p.perplexity)}
            for p in perplexities]


# ----------------------------------------------------------------------------- KV-cache quantization

def kv_bytes_rows(rows) -> list[dict[str, Any]]:
    """kv_quant.SchemeBytes: the real cache's bytes against the formula, and ÷ the full-precision cache."""
    full = rows[0].measured_bytes if rows else None
    return [{"scheme": r.scheme, "tokens": r.tokens, "measured (B)": r.measured_bytes, "formula (B)": r.formula_bytes,
             "measured − formula (B)": r.measured_bytes - r.formula_bytes, "values (B)": r.measured_values_bytes,
             "scales & zero points (B)": r.metadata_bytes, "full-precision residual (B)": r.residual_bytes,
             "÷ full precision": regime.ratio(r.measured_bytes, full)} for r in rows]


def kv_speed_rows(rows) -> list[dict[str, Any]]:
    """helpers.serving.kv_quant.SchemeSpeed: the median decode step and ÷ the full-precision cache's (labelled)."""
    base = rows[0].step_ms if rows else None
    return [{"scheme": r.scheme, "context tokens": r.context_tokens, "decode step (ms)": r.step_ms,
             **_labelled("÷ full precision", r.step_ms, base)} for r in rows]


def kv_quality_rows(rows) -> list[dict[str, Any]]:
    """helpers.serving.kv_quant.SchemeQuality: KL against the full-precision cache and top-1 agreement."""
    return [{"scheme": r.scheme, "positions": r.positions, "KL mean (nats)": r.kl_mean_nats,
             "KL max (nats)": r.kl_max_nats, "top-1 agreement": r.top1_agreement,
             "positions with another top token": round((1 - r.top1_agreement) * r.positions)} for r in rows]


def kv_projected_rows(model: str, tokens: int = 4096, dtype: str = "bf16") -> list[dict[str, Any]]:
    """A model's cache at `tokens` by scheme (kv_quant.cache_bytes) and how many times the users it holds."""
    from ..serving.kv_quant import cache_bytes, projected_shares

    full = cache_bytes(model, tokens, dtype, "full precision").total
    return [{"scheme": s, "cache (B)": round(share * full), "÷ full precision": share,
             "users or context ×": regime.ratio(1.0, share)} for s, share in projected_shares(model, tokens, dtype).items()]


def datasheet_bandwidth(measured, device: str) -> tuple[float, str] | None:
    """(bandwidth, its name) of the GPU a measurement ran on, from its datasheet; None on a CPU."""
    from ..formulas.gpus import datasheet_gpu
    from ..measure.hardware import device_info, measured_on_of

    if measured.replayed:
        d = measured_on_of(measured.recorded)["device"]
        kind, name = d["kind"] or "", d["name"] or ""
    else:
        info = device_info(device) if str(device).startswith("cuda") else None
        kind, name = (info.kind, info.name) if info else ("", "")
    g = datasheet_gpu(kind, name)
    return (g.bandwidth, f"the {g.name}'s datasheet {g.bandwidth / 1e9:,.0f} GB/s") if g else None
