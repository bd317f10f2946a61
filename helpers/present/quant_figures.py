"""Tables of notebook 05 (weight quantization): the rows a table shows, labelled here and only here, from
the measured results (helpers.measure.quant.VariantResult, helpers.measure.training.Perplexity) and the
computed ones (helpers.formulas.quantization)."""
from __future__ import annotations

from typing import Any

from ..formulas import verdicts
from ..formulas.memory import weight_bytes
from ..formulas.quantization import GpuFit, SchemeWeights, against_rule_of_thumb, preset_footprints
from ..formulas.specs import ModelSpec
from ..measure.quant import SCHEMES, VariantResult
from ..measure.training import Perplexity


def footprint_rows(results: list[VariantResult], spec: ModelSpec, loaded_label: str) -> list[dict[str, Any]]:
    """Measured model bytes against the prediction, with the bf16-base prediction beside it."""
    ref = results[0].footprint.get("measured_model_bytes")
    rows = []
    for r in results:
        if r.error:
            rows.append({"scheme": r.label, "error": r.error})
            continue
        f = r.footprint
        scheme = r.scheme if r.scheme in SCHEMES else "bf16"  # the reference at bf16
        rows.append({
            "scheme": r.label,
            "measured weights (B)": f["measured_weight_bytes"],
            "predicted weights (B)": f["predicted_weight_bytes"],
            "exact": f["exact"],
            "of which metadata (B)": f["metadata_bytes"],
            "buffers (B)": f["buffer_bytes"],
            "model total (MB)": round(f["measured_model_bytes"] / 1e6, 2),
            "vs reference": round(f["measured_model_bytes"] / ref, 3),
            "predicted at bf16 base (MB)": round(weight_bytes(spec, scheme, base_dtype="bf16").bytes / 1e6, 2),
            "measured on": loaded_label,
        })
    return rows


def speed_rows(results: list[VariantResult], loaded_label: str) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        if r.error or not r.speed:
            continue
        s = r.speed
        rows.append({"scheme": r.label, "prompt tokens": s["prompt_tokens"],
                     "prefill (ms)": round(s["prefill_s"] * 1e3, 2),
                     "decode step (ms)": round(s["itl_s"] * 1e3, 2),
                     "decode (tokens/s)": round(s["decode_tok_s"], 1), "measured on": loaded_label})
    return rows


def quality_rows(results: list[VariantResult], loaded_label: str) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        if r.error or r.quality is None:
            continue
        q = r.quality
        rows.append({"scheme": r.label, "perplexity": round(q["perplexity"], 2),
                     "KL(ref ‖ q) mean (nats)": q["kl_mean"], "KL max (nats)": q["kl_max"],
                     "top-1 agreement": round(q["top1_agreement"], 4), "positions": q["positions"],
                     "measured on": loaded_label})
    return rows


def weights_rows(weights: list[SchemeWeights]) -> list[dict[str, Any]]:
    """One model's computed weight bytes by scheme (helpers.formulas.quantization.preset_footprints)."""
    return [{"model": w.model, "scheme": w.scheme, "bytes": w.bytes, "GB": round(w.gb, 3),
             "metadata_bytes": w.metadata_bytes, "quantized_share": w.quantized_share, "vs_first": w.vs_first}
            for w in weights]


def presets_rows(models=None, schemes=("bf16", "int8", "nf4", "nf4-dq")) -> list[dict[str, Any]]:
    """Weight GB (10^9 bytes) of every preset under each bitsandbytes scheme (bf16 base), and the
    share of parameters bitsandbytes quantizes (nn.Linear in the blocks; not embeddings, not fused experts)."""
    from ..formulas.specs import PRESETS

    rows = []
    for name in models or PRESETS:
        fp = preset_footprints(name, schemes)
        row: dict[str, Any] = {"model": name}
        row.update({f"{w.scheme} (GB)": round(w.gb, 2) for w in fp})
        row["share bitsandbytes quantizes"] = round(fp[-1].quantized_share, 3)
        rows.append(row)
    return rows


def fit_rows(fits: list[GpuFit]) -> list[dict[str, Any]]:
    """A model on one GPU by scheme (helpers.formulas.quantization.fit_on_gpu)."""
    return [{"model": f.model, "scheme": f.scheme, "gpu": f.gpu, "weight bytes": f.weight_bytes,
             "weights (GB)": round(f.weight_bytes / 1e9, 2), "GPU reports (GB)": round(f.memory_bytes / 1e9, 2),
             "usable after reserve (GB)": round(f.usable_bytes / 1e9, 2), "fits": f.fits,
             "left for KV cache (GB)": round(f.kv_budget_bytes / 1e9, 2),
             f"sequences of {f.context:,} tokens": f.max_batch,
             f"KV cache room ({f.kv_dtype}), one sequence up to (tokens)": f.longest_sequence} for f in fits]


def perplexity_rows(perplexities: list[Perplexity]) -> list[dict[str, Any]]:
    """The random, the trained and the uniform guess side by side (helpers.measure.training.perplexities),
    each with its ratio to the first."""
    first = perplexities[0].perplexity
    return [{"model": p.model, "profile": p.profile, "perplexity": round(p.perplexity, 2), "tokens": p.tokens,
             "measured on": p.measured_on, "times lower than the first": round(first / p.perplexity, 1)}
            for p in perplexities]


# ----------------------------------------------------------------------------- on a GPU: computed, cited

def footprint_on_gpu(model: str = "mistral-7b-v0.1"):
    """The footprint on a GPU, computed from the config (bf16 base): each scheme against the rule of thumb."""
    from .expected import computed

    rows = preset_footprints(model)
    return [computed(f"{model} at a bf16 base: " + "; ".join(str(against_rule_of_thumb(w.vs_first, w.scheme))
                                                             for w in rows[1:]),
                     "helpers.formulas.quantization.preset_footprints, from its config.json")]


def speed_on_gpu(floors=None):
    """The decode step on a GPU: each scheme's memory-bound floor (computed by the capacity planner) and what
    an eager loop reaches against its floor (cited from gpt-fast, with the factor computed from its figures)."""
    from . import expected, on_gpu

    floors = floors or on_gpu.quantized_decode_floors()
    first = floors[0]
    each = "; ".join(f"{f.scheme} {f.step_floor_ms:,.2f} ms" + (
        "" if f is first else f" ({verdicts.speed(f.step_floor_ms, first.step_floor_ms, 'shorter', 'longer', 'as long')})")
        for f in floors)
    return [expected.computed(f"the floor of a {expected.REFERENCE_MODEL} decode step on an {expected.REFERENCE_GPU} "
                              f"(batch 1, 1,024 tokens cached, the datasheet's bandwidth): {each} — a floor a kernel "
                              "reaches only if it reads the packed weights at full bandwidth and dequantizes as it reads",
                              "helpers.present.on_gpu.quantized_decode_floors (the capacity planner)"),
            *expected.eager_against_floor()]


def datasheet_bandwidth(measured, device: str) -> tuple[float, str] | None:
    """(bandwidth, its name) of the GPU a measurement ran on, from its datasheet (helpers.formulas.gpus), or None
    on a CPU or an uncatalogued device: the roof a decode step's floor is computed at."""
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
