"""What you should see: the figures the notebooks' "What you should see" notes and conclusions quote,
computed from the helpers that own each quantity — for the tiny model on a CPU and for Mistral 7B on a
reference GPU of the catalog.

Each cost is reached through one function here, so a change of owner is a one-line change:
- FLOPs of a forward pass, split into weight matmuls, attention and the output head: `flop_split`
  (calls helpers.formulas.stepcost's forward_cost);
- a GPU's step, prefill and batch from the capacity planner: `gpu_plan` (calls helpers.capacity.plan);
- the roofline figures notebooks 03 and 04 quote for a GPU: `on_gpu` (helpers.formulas.stepcost bytes and FLOPs,
  helpers.formulas.roofline ridge, at the datasheet and at the planner's default efficiency).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .. import checks
from ..formulas.specs import get_spec

REFERENCE_MODEL = "mistral-7b-v0.1"
REFERENCE_GPU = "H100 SXM"   # the GPU of the talk's serving benchmark (talk outline, Demo F)
SHARE_TOKENS = (512, 2048, 4096, 32768)
SHARE_MODELS = ("mistral-7b-v0.1", "mistral-7b-v0.3", "llama-3.1-8b", "qwen2.5-7b")


# ----------------------------------------------------------------------------- attention's share of prefill

def flop_split(model, new_tokens: int, past_tokens: int = 0) -> dict[str, int]:
    """FLOPs of one sequence's forward pass over `new_tokens` after `past_tokens`, split three ways:
    the weight matmuls (2 per parameter per token), attention's QKᵀ and softmax·V over the keys each
    query sees (windows honoured), and the output head for the last position. The single call into the
    FLOP cost model (helpers.formulas.stepcost.forward_cost), so the sum is its total."""
    from ..formulas.stepcost import forward_cost

    spec = get_spec(model)
    new_tokens = checks.count(new_tokens, "new_tokens")
    c = forward_cost(spec, new_tokens, past_tokens)
    return {"matmul": c.matmul_flops, "attention": c.attention_flops, "head": c.head_flops}


def attention_share(model, tokens: int) -> float:
    """Attention's share of a prefill's FLOPs (matmuls + attention + head) for a prompt of `tokens`."""
    f = flop_split(model, tokens)
    return f["attention"] / sum(f.values())


def attention_share_verdict(model, tokens: int):
    """Attention's share of a prefill's FLOPs for a prompt of `tokens`, said by the share rule
    (helpers.formulas.verdicts.share): '38 % of the prefill's FLOPs (less than half)'."""
    from ..formulas.verdicts import share

    f = flop_split(model, tokens)
    return share(f["attention"], sum(f.values()), "the prefill's FLOPs")


def attention_parity_tokens(model, limit: int | None = None) -> int | None:
    """The shortest prompt whose prefill spends as many FLOPs in attention as in the weight matmuls,
    or None when no prompt up to `limit` tokens (default 2²⁰, past any preset's context: the crossing
    is a property of the shape) gets there — a sliding window caps the keys each query sees, and with
    them attention's cost per token, so such a model may never get there.

    Attention per prompt token grows with the prompt (or stops growing at the window) while the
    matmuls' stays fixed, so the ratio only rises: a bisection finds the first length."""
    spec = get_spec(model)
    top = int(limit or 2**20)

    def reached(n: int) -> bool:
        f = flop_split(spec, n)
        return f["attention"] >= f["matmul"]

    if not reached(top):
        return None
    lo, hi = 1, top
    while lo < hi:
        mid = (lo + hi) // 2
        if reached(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class AttentionShare:
    """One model: its width, depth, window and context, the prompt length where attention's FLOPs reach
    the matmuls' in a prefill (None: never), whether that is within its context, and attention's share
    of the prefill (%) at each prompt length (NaN beyond the model's context)."""

    model: str
    hidden_size: int
    layers: int
    window: int | None
    context: int | None
    parity_tokens: int | None
    within_context: bool
    share_pct: dict[int, float]


def attention_shares(models: Iterable = SHARE_MODELS, tokens: Iterable[int] = SHARE_TOKENS,
                     extra: dict[str, Any] | None = None) -> list[AttentionShare]:
    """One AttentionShare per model. `extra` adds named specs (e.g. {"tiny (this run)": loaded.spec})
    before the presets."""
    named = list((extra or {}).items()) + [(m, m) for m in models]
    rows = []
    for name, model in named:
        spec = get_spec(model)
        parity = attention_parity_tokens(spec)
        limit = spec.max_position_embeddings
        shares = {n: round(100 * attention_share(spec, n), 1) if limit is None or n <= limit else float("nan")
                  for n in tokens}
        rows.append(AttentionShare(name, spec.hidden_size, spec.num_layers, spec.sliding_window, limit, parity,
                                   parity is not None and parity <= (limit or parity), shares))
    return rows


def attention_share_frame(rows: Iterable[AttentionShare]):
    """attention_shares() as the table the notebooks show, one row per model."""
    import pandas as pd

    return pd.DataFrame([{"model": r.model, "hidden size": r.hidden_size, "layers": r.layers,
                          "window": r.window or "none", "context (tokens)": r.context,
                          "attention = matmuls at (tokens)": r.parity_tokens if r.parity_tokens is not None else "never",
                          "within its context": r.within_context,
                          **{f"attention share at {n:,} (%)": pct for n, pct in r.share_pct.items()}} for r in rows])


# ----------------------------------------------------------------------------- a GPU, from the planner

def gpu_plan(model=REFERENCE_MODEL, gpu: str = REFERENCE_GPU, weight_dtype: str = "bf16", context: int = 4096,
             batch: int = 1, prompt_tokens: int | None = None):
    """The capacity planner's plan (helpers.capacity.plan): the single call for a GPU's decode step,
    prefill and largest batch. Its step_floor_s and prefill_floor_s are at the datasheet's bandwidth and
    peak; its step_s and prefill_s at the planner's default efficiency (DEFAULT_EFFICIENCY, 0.5 of the
    datasheet), i.e. the floor ÷ 0.5."""
    from ..capacity import plan

    return plan(model, gpu, weight_dtype=weight_dtype, context=context, batch=batch, prompt_tokens=prompt_tokens)


def gpu_sizes():
    """The sweep sizes notebook 01 uses for Mistral 7B on a large GPU (helpers.measure.sweeps.sweep_sizes)."""
    from ..measure.sweeps import sweep_sizes

    return sweep_sizes("mistral-7b", "cuda")


def gpu_users(model=REFERENCE_MODEL, gpu: str = REFERENCE_GPU, context: int = 1024, overhead_bytes: float = 0.0) -> int:
    """Sequences of `context` tokens whose bf16 cache fits beside the bf16 weights in the memory the GPU reports
    to CUDA (helpers.formulas.gpus: usable_memory_bytes; the label where no report was found), less
    `overhead_bytes` (0: the whole memory, as a bare PyTorch sweep sees it; runtime_reserve_bytes(...) for
    what a vLLM-like runtime plans with) — helpers.formulas.memory.max_users on that one memory basis."""
    from ..formulas.gpus import get_gpu
    from ..formulas.memory import kv_bytes_per_token, max_users, weight_bytes

    spec = get_spec(model)
    return max_users(get_gpu(gpu).usable_memory_bytes, weight_bytes(spec, "bf16").bytes, overhead_bytes,
                     kv_bytes_per_token(spec, "bf16"), context)


def gpu_expectations(model=REFERENCE_MODEL, gpu: str = REFERENCE_GPU, sizes=None) -> dict[str, Any]:
    """What a GPU run of notebook 01 should show, computed for its sweep sizes: the cache at the
    longest sequence; floors it cannot beat — TTFT of one prompt alone (prefill) and the decode step, at
    the shortest and longest lengths (and every TTFT length), and the step at batches 1, 8 and 64; the
    memory the GPU reports to CUDA (its label beside it), how many sequences of the users sweep's context
    that memory holds beside the weights (cache only, gpu_users), and the first batch of the doubling sweep
    whose weights + cache + its prefill's largest activation (helpers.formulas.memory.prefill_activation_bytes,
    a lower bound) exceed that memory."""
    from ..formulas.gpus import get_gpu
    from ..formulas.memory import kv_bytes_per_token, kv_cache_bytes, prefill_activation_bytes, weight_bytes

    spec, g = get_spec(model), get_gpu(gpu)
    sizes = sizes or gpu_sizes()
    w = weight_bytes(spec, "bf16").bytes
    memory = g.usable_memory_bytes
    longest = sizes.memory_tokens[-1]
    ttft = (sizes.ttft_tokens[0], sizes.ttft_tokens[-1])
    itl = (sizes.itl_contexts[0], sizes.itl_contexts[-1])
    ctx = sizes.users_context
    users = gpu_users(spec, g.name, ctx)

    def needs(b: int) -> int:
        return w + kv_cache_bytes(spec, ctx, b, "bf16") + prefill_activation_bytes(spec, ctx, b, "bf16")

    oom_at = next((b for b in sizes.users_batches if needs(b) > memory), None)
    return {"model": spec.name, "gpu": g.name, "bandwidth": g.bandwidth, "peak_flops": g.peak_flops("bf16")[0],
            "memory_bytes": memory, "memory_label_gb": g.memory_gb, "memory_reported_gib": g.memory_reported_gib,
            "memory_source": g.memory_source,
            "weight_bytes": w, "window": spec.sliding_window, "kv_bytes_per_token": kv_bytes_per_token(spec, "bf16"),
            "longest": longest, "cache_at_longest": kv_cache_bytes(spec, longest, 1, "bf16"),
            "ttft_floor_s": {n: gpu_plan(spec, g.name, context=n).prefill_floor_s for n in ttft},
            "ttft_floors_s": {n: gpu_plan(spec, g.name, context=n).prefill_floor_s for n in sizes.ttft_tokens},
            "step_floor_s": {c: gpu_plan(spec, g.name, context=c).step_floor_s for c in itl},
            "batched_step_s": {b: gpu_plan(spec, g.name, context=1024, batch=b).step_floor_s for b in (1, 8, 64)},
            "users_context": ctx, "users_fit": users,
            "users_cache_oom_at": next((b for b in sizes.users_batches if b > users), None),
            "users_oom_at": oom_at, "needs_at_oom": needs(oom_at) if oom_at else None,
            "activation_at_oom": prefill_activation_bytes(spec, ctx, oom_at, "bf16") if oom_at else None}


def gpu_memory_on_gpu(gpu: str = REFERENCE_GPU) -> OnGpu:
    """The one memory basis, said once for every notebook: what a GPU reports to CUDA (the figure the
    preflight's table, the planner and notebooks 01, 02, 04 and 06 use), beside its label, cited from the
    report in helpers/data/gpu_memory.csv."""
    from ..formulas.gpus import get_gpu

    g = get_gpu(gpu)
    assert g.memory_reported_gib, f"{g.name} has no reported memory in gpu_memory.csv"
    return OnGpu("cited", f"an {g.name} labelled {g.memory_gb:g} GB reports {g.memory_reported_gib:g} GiB = "
                          f"{g.usable_memory_bytes / 1e9:,.2f}·10⁹ B to CUDA, {g.usable_memory_bytes / g.memory_bytes:,.3f}× "
                          "the label's bytes: the memory the capacity planner and the notebooks plan with",
                 f"helpers/data/gpu_memory.csv, from {g.memory_source}")


@dataclass(frozen=True)
class QuantizedFloor:
    """One weight scheme's decode-step floor: its weight bytes, the floor (ms), what bounds it, and the
    first scheme's floor ÷ this one (vs_bf16)."""

    scheme: str
    weight_bytes: int
    step_floor_ms: float
    bound: str
    vs_bf16: float


def quantized_decode_floors(model=REFERENCE_MODEL, gpu: str = REFERENCE_GPU,
                            schemes: Iterable[str] = ("bf16", "fp8", "int8", "nf4"),
                            context: int = 1024) -> list[QuantizedFloor]:
    """The decode step's floor on a GPU for each weight scheme (batch 1, `context` tokens cached):
    a memory-bound step reads the weights once, so fewer bytes per weight means a shorter floor —
    if a kernel dequantizes on the fly at full bandwidth. vs_bf16 is the first scheme's (bf16's) floor ÷ this one."""
    plans = [(s, gpu_plan(model, gpu, weight_dtype=s, context=context)) for s in schemes]
    base = plans[0][1].step_floor_s
    return [QuantizedFloor(s, p.weight_bytes, p.step_floor_s * 1e3, p.bound, base / p.step_floor_s) for s, p in plans]


def quantized_decode_frame(rows: Iterable[QuantizedFloor]):
    """quantized_decode_floors() as the table notebook 05 shows."""
    import pandas as pd

    return pd.DataFrame([{"scheme": r.scheme, "weight bytes": r.weight_bytes, "step floor (ms)": r.step_floor_ms,
                          "bound": r.bound, "vs bf16 (×)": r.vs_bf16} for r in rows])


# ----------------------------------------------------------------------------- notebooks 03 and 04 on a GPU

def on_gpu(gpu: str = "H100 SXM", model: str = REFERENCE_MODEL, contexts=(512, 4096), prompt: int = 2048) -> dict[str, Any]:
    """The roofline figures of `model` in bf16 on a catalogued GPU: ridge, crossover batch, decode
    floor (batch 1) at `contexts`, the prefill floor of a `prompt`-token prompt, and the decode step at
    the planner's default efficiency."""
    from ..capacity.planner import DEFAULT_EFFICIENCY
    from ..formulas.gpus import get_gpu
    from ..formulas.roofline import crossover_batch, ridge_point
    from ..formulas.stepcost import decode_cost, forward_cost

    g = get_gpu(gpu)
    peak, _ = g.peak_flops("bf16")
    decode = {c: decode_cost(model, c, 1, "bf16") for c in contexts}
    pre = forward_cost(model, prompt, 0, 1, "bf16")
    return {
        "gpu": g.name, "model": model, "bandwidth": g.bandwidth, "peak_flops": peak,
        "ridge": ridge_point(peak, g.bandwidth), "crossover_batch": crossover_batch(peak, g.bandwidth, 2),
        "decode_floor_s": {c: d.bytes / g.bandwidth for c, d in decode.items()},
        "decode_intensity": {c: d.intensity for c, d in decode.items()},
        "decode_at_efficiency_s": {c: d.bytes / g.bandwidth / DEFAULT_EFFICIENCY for c, d in decode.items()},
        "efficiency": DEFAULT_EFFICIENCY,
        "prompt": prompt, "prefill_floor_s": max(pre.flops / peak, pre.bytes / g.bandwidth),
        "prefill_intensity": pre.intensity,
    }


# ----------------------------------------------------------------------------- what you should see, here and on a GPU

SOURCES = ("computed", "cited", "recorded")
PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published.csv"


@dataclass(frozen=True)
class OnGpu:
    """One sentence of what a GPU shows, labelled by where it comes from: *computed* (a helper's formula,
    named in `where`), *cited* (a publication's figure, `where` its source and address) or *recorded*
    (a committed GPU record under workshop/results/, `where` its path)."""

    source: str
    text: str
    where: str

    def __post_init__(self):
        assert self.source in SOURCES, self.source


@dataclass(frozen=True)
class Published:
    """A figure a publication printed (helpers/data/published.csv)."""

    key: str
    value: float
    unit: str
    what: str
    source: str
    url: str


def published(key: str) -> Published:
    """One cited figure by its key in helpers/data/published.csv."""
    import pandas as pd

    rows = pd.read_csv(PUBLISHED).set_index("key")
    r = rows.loc[key]
    return Published(key, float(r["value"]), r["unit"], r["what"], r["source"], r["url"])


def computed(text: str, where: str) -> OnGpu:
    return OnGpu("computed", text, where)


def cited(text: str, *keys: str) -> OnGpu:
    """A sentence made from published figures: `where` names each figure's publication, once."""
    sources = list(dict.fromkeys(f"{published(k).source} ({published(k).url})" for k in keys))
    return OnGpu("cited", text, "; ".join(sources))


def gpu_records(notebook: str | None = None) -> list:
    """The committed GPU records (helpers.present.recorded), those holding `notebook`'s figures when named.
    Empty until a GPU has been recorded: no *recorded* sentence is said without one."""
    from .recorded import records as all_records

    return [r for r in all_records() if r.is_gpu and (notebook is None or r.key_figures(notebook))]


def eager_against_floor_on_gpu() -> list[OnGpu]:
    """What an eager loop and a compiled one reach on a GPU, cited from gpt-fast (Llama-2-7B, batch 1,
    A100-80GB at 330 W), with the factors computed from its own figures: the bytes it reads per token
    (its bandwidth ÷ its tokens/s), the eager loop's step against the floor at the datasheet bandwidth."""
    from ..formulas.gpus import get_gpu

    eager, fast = published("gpt_fast_eager_tokens_per_s"), published("gpt_fast_compiled_tokens_per_s")
    bw = published("gpt_fast_compiled_bandwidth_bytes_per_s")
    a100 = get_gpu("A100 80GB")
    per_token = bw.value / fast.value
    floor_s, eager_s = per_token / a100.bandwidth, 1 / eager.value
    return [cited(f"gpt-fast's plain eager loop decodes Llama-2-7B at {eager.value:g} tokens/s and its compiled one "
                  f"(static cache, torch.compile with CUDA graphs) at {fast.value:g} tokens/s, reading "
                  f"{bw.value / 1e9:,.0f} GB/s — {100 * bw.value / a100.bandwidth:,.0f} % of the "
                  f"{a100.name}'s {a100.bandwidth / 1e9:,.0f} GB/s datasheet",
                  "gpt_fast_eager_tokens_per_s", "gpt_fast_compiled_tokens_per_s",
                  "gpt_fast_compiled_bandwidth_bytes_per_s"),
            computed(f"from those figures: {per_token / 1e9:,.2f} GB read per token, a floor of "
                     f"{1e3 * floor_s:,.2f} ms at the datasheet bandwidth; the eager step "
                     f"({1e3 * eager_s:,.1f} ms) is {eager_s / floor_s:,.1f}× that floor, the compiled one "
                     f"{1 / fast.value / floor_s:,.2f}×",
                     "helpers.present.expected.eager_against_floor_on_gpu (gpt-fast's figures, the GPU catalog)")]


def should_see(here, gpu=(), title: str = "What you should see"):
    """The notebook's "What you should see": a part made by rules from the numbers shown above it (`here`:
    Verdicts or sentences a rule returned; measured here or, in replay mode, a record's, as each table's
    caption says) and a GPU part whose every sentence says where it comes from (`gpu`:
    OnGpu). Markdown (a marimo element)."""
    import marimo as mo

    here = [str(h) for h in (here if isinstance(here, (list, tuple)) else [here]) if str(h)]
    out = [f"**{title}.**"]
    if here:
        out.append("*Here*, from the numbers above: " + (here[0] if len(here) == 1 else ""))
        if len(here) > 1:
            out.extend(f"- {h}" for h in here)
    gpu = list(gpu)
    if gpu:
        out.append("\n*On a GPU*:")
        out.extend(f"- **{g.source}**: {g.text} ({g.where})." for g in gpu)
    return mo.md("\n".join(out))
