"""What you should see: how a notebook says what a result shows, here and on a GPU.

The here-part is the verdicts of rules over the numbers shown above it (helpers.formulas.verdicts); every
GPU sentence is labelled by where it comes from — *computed* (a helper's formula: `computed`), *cited*
(a publication's figure in helpers/data/published.csv: `cited`, `published`) or *recorded* (a committed GPU
record, helpers.present.recorded.gpu_records). A GPU's computed figures are helpers.present.on_gpu.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REFERENCE_MODEL = "mistral-7b-v0.1"
REFERENCE_GPU = "H100 SXM"   # the GPU of the talk's serving benchmark (talk outline, Demo F)


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


# ----------------------------------------------------------------------------- cited sentences several notebooks quote

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


def eager_against_floor() -> list[OnGpu]:
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
                     "helpers.present.expected.eager_against_floor (gpt-fast's figures, the GPU catalog)")]


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


def sources(*keys: str, more: tuple[str, ...] = ()):
    """A notebook's closing "Sources" cell: each publication cited in it once — the rows of
    helpers/data/published.csv named by `keys` (their source and address, each source once) and `more`
    (markdown lines for sources that are not a published figure: a datasheet, a paper's table, a library's
    file at its version). Markdown (a marimo element)."""
    import marimo as mo

    seen = dict.fromkeys(f"{published(k).source} — <{published(k).url}>" for k in keys)
    lines = [*seen, *more]
    return mo.md("## Sources\n\n" + "\n".join(f"- {line}" for line in lines) if lines else "")
