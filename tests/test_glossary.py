"""workshop/glossary.md: every term the notebooks link exists, its anchors follow the lowercase-hyphen
rule, and the figures it quotes are the ones helpers compute."""
import re
from pathlib import Path

import pytest

from helpers.present import glossary

ROOT = Path(__file__).resolve().parent.parent
TEXT = " ".join(glossary.GLOSSARY.read_text(encoding="utf-8").split())   # one line: wrapping does not matter
TERM_CALL = re.compile(r"""term\(\s*(["'])(.+?)\1\s*(?:,\s*(["'])(.+?)\3\s*)?\)""")

REQUIRED = ["ttft", "itl", "tpot", "throughput", "goodput", "arithmetic-intensity", "ridge-point", "roofline",
            "prefill", "decode", "kv-cache", "gqa", "mqa", "mla", "paged-attention", "continuous-batching",
            "prefix-caching", "speculative-decoding", "quantization", "int8", "nf4", "fp8", "awq", "gptq", "marlin",
            "dequantization", "quality-latency-throughput-triangle"]


def test_slug_is_githubs_rule():
    assert glossary.slug("TTFT") == "ttft"
    assert glossary.slug("Arithmetic intensity") == "arithmetic-intensity"
    assert glossary.slug("Peak FLOP/s") == "peak-flops"
    assert glossary.slug("GB and GiB") == "gb-and-gib"


def test_the_glossary_has_the_terms_the_issue_asks_for():
    missing = [a for a in REQUIRED if a not in glossary.anchors()]
    assert not missing, missing


def test_every_notebook_link_resolves():
    used = set()
    for src in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        for m in TERM_CALL.finditer(src.read_text(encoding="utf-8")):
            used.add((src.name, m.group(4) or glossary.slug(m.group(2))))
    assert used, "no notebook links to the glossary"
    broken = sorted((n, a) for n, a in used if a not in glossary.anchors())
    assert not broken, broken


def test_every_written_glossary_link_resolves():
    """Links written out (`workshop/glossary.md#anchor`, not through term()) in every notebook source and
    in helpers point at an anchor the glossary has; so do the glossary's own links (its contents)."""
    link = re.compile(r"workshop/glossary\.md#([^\s)\]\"'`]+)")
    sources = sorted((ROOT / "notebooks").glob("*.py")) + sorted((ROOT / "helpers").rglob("*.py"))
    used = {(src.relative_to(ROOT).as_posix(), a) for src in sources
            for a in link.findall(src.read_text(encoding="utf-8"))}
    assert link.findall("a [KV cache](../workshop/glossary.md#kv-cache), and") == ["kv-cache"]
    used |= {("workshop/glossary.md", a) for a in re.findall(r"\]\(#([^)]+)\)", glossary.GLOSSARY.read_text(encoding="utf-8"))}
    broken = sorted((n, a) for n, a in used if a not in glossary.anchors())
    assert not broken, broken


def test_the_notebooks_new_terms_have_entries():
    for anchor in ("shared-memory", "sparse-attention", "linear-attention", "state-space-model"):
        assert anchor in glossary.anchors(), anchor


def test_term_makes_a_link_and_refuses_an_unknown_anchor(monkeypatch):
    monkeypatch.delenv("WORKSHOP_REPO_URL", raising=False)
    assert glossary.term("TTFT") == "[TTFT](../workshop/glossary.md#ttft)"
    assert glossary.term("time to first token", "ttft") == "[time to first token](../workshop/glossary.md#ttft)"
    monkeypatch.setenv("WORKSHOP_REPO_URL", "https://github.com/acme/llm-inference.git")
    assert glossary.url("kv-cache") == "https://github.com/acme/llm-inference/blob/main/workshop/glossary.md#kv-cache"
    with pytest.raises(ValueError, match="no glossary entry 'ttfx'"):
        glossary.term("TTFX")


def test_the_glossary_figures_are_the_computed_ones():
    from helpers.formulas.gpus import get_gpu
    from helpers.formulas.memory import kv_bytes_per_token
    from helpers.formulas.roofline import ridge_point
    from helpers.formulas.specs import get_spec, param_count

    h100 = get_gpu("H100 SXM")
    assert f"{h100.bandwidth_tbs:g} TB/s" in TEXT
    assert f"{h100.bf16_tflops:g} TFLOP/s" in TEXT
    assert f"CUDA reports about 1 % less ({h100.memory_reported_gib:g} GiB)" in TEXT           # the GB and GiB entry
    assert f"≈ {ridge_point(h100.peak_flops('bf16')[0], h100.bandwidth):,.0f} FLOP/B" in TEXT
    assert f"{kv_bytes_per_token('mistral-7b-v0.1', 'bf16'):,} B" in TEXT
    assert f"{param_count('mistral-7b-v0.1'):,}" in TEXT
    assert f"{get_spec('mistral-7b-v0.3').vocab_size:,} entries for Mistral 7B v0.3" in TEXT
    assert f"{get_spec('mistral-7b-v0.1').vocab_size:,} for v0.1" in TEXT
    assert f"Mistral 7B v0.1: {get_spec('mistral-7b-v0.1').sliding_window:,}" in TEXT
    oss = get_spec("gpt-oss-120b")
    assert f"GPT-OSS-120B: {oss.experts_per_token} of {oss.num_experts}" in TEXT
    v3 = get_spec("deepseek-v3")
    assert f"({v3.kv_lora_rank} numbers in DeepSeek V2/V3)" in TEXT and f"key ({v3.qk_rope_head_dim})" in TEXT
    m = get_spec("mistral-7b-v0.1")
    assert f"Mistral 7B: {m.num_heads} query heads, {m.num_kv_heads} KV heads" in TEXT
    assert f"{m.num_heads // m.num_kv_heads}× smaller than MHA" in TEXT


def test_preflight_shows_the_weights_fix_whole():
    from helpers.preflight import split_fix

    msg = ("mistralai/Mistral-7B-v0.1 weights are not in the local cache and the Hub is switched off "
           "(HF_HUB_OFFLINE=1). Fix: on a machine with internet run `hf download mistralai/Mistral-7B-v0.1` "
           "(accept the licence at https://huggingface.co/mistralai/Mistral-7B-v0.1 and set HF_TOKEN first if "
           "it is gated), or use WORKSHOP_PROFILE=tiny or mistral-7b-random.")
    head, fix = split_fix(msg)
    assert head.endswith("(HF_HUB_OFFLINE=1).") and fix.startswith("on a machine with internet")
    assert fix.endswith("or use WORKSHOP_PROFILE=tiny or mistral-7b-random.")
    assert split_fix("weights are in the local cache") == ("weights are in the local cache", None)


def test_exercise_solution_is_folded_outside_marimo():
    from helpers.present.notebook import exercise

    html = exercise(2, "What is `x`?", "**x** = 42").text
    assert "<details>" in html and "Exercise 2." in html
    assert html.index("<details>") < html.index("42")  # the answer sits inside the folded block


def test_the_glossary_acceptance_figures_are_computed():
    """The acceptance-rate entry's worked figures are helpers.formulas.speculation's (α = 0.8, k = 4)."""
    from helpers.formulas.speculation import tokens_per_pass_parts

    p = tokens_per_pass_parts(0.8, 4)
    assert f"at α = 0.8 and k = 4, {p.total:.2f} tokens, of which the drafts are {p.total - 1:.2f}, " \
           f"{100 * p.kept_share_of_drafted:.0f} % of the 4 drafted" in TEXT


def test_the_glossary_links_are_the_catalogued_ones():
    """The link figures the glossary quotes (NVLink, PCIe, InfiniBand of an H100 SXM) are gpu_links.csv's."""
    from helpers.parallel.links import get_link

    nv, pc, ib = (get_link("H100 SXM", k, 8) for k in ("nvlink", "pcie", "infiniband"))
    assert f"{2 * nv.bandwidth / 1e9:g} GB/s for an H100 SXM's NVLink 4, {nv.bandwidth / 1e9:g} GB/s each way" in TEXT
    assert f"PCIe Gen5 x16 link: {2 * pc.bandwidth / 1e9:g} GB/s both ways, {pc.bandwidth / 1e9:g} GB/s each way" in TEXT
    assert f"400 Gb/s, {ib.bandwidth / 1e9:g} GB/s each way" in TEXT and "NDR 400" in ib.name


def test_the_glossary_parity_length_is_the_computed_one():
    from helpers.formulas.compute_share import parity_parts

    d, p = parity_parts("mistral-7b-v0.3", "decode"), parity_parts("mistral-7b-v0.3", "prefill")
    assert f"(Mistral 7B v0.3: {d.tokens:,} tokens in decode, {p.tokens:,} in a prefill)" in TEXT
    assert parity_parts("mistral-7b-v0.1").tokens is None and "it is never reached" in TEXT


# terms a notebook uses before (or without) a section of its own: linked with term() no later than their first
# use in its text after the title (notebook → (the word as the prose writes it, its glossary anchor))
FIRST_USES = {
    "03": [("DynamicCache", "dynamiccache"), ("CUDA graphs", "cuda-graphs"), ("static cache", "static-cache"),
           ("torch.compile", "torchcompile"), ("ridge point", "ridge-point"), ("roofline", "roofline")],
    "04": [("KV cache", "kv-cache"), ("efficiency", "efficiency"), ("MBU", "mbu"), ("SLO", "slo"),
           ("tensor parallelism", "tensor-parallelism"), ("prefill", "prefill"), ("memory-bound", "memory-bound"),
           ("compute-bound", "compute-bound"), ("ridge point", "ridge-point")],
    "08": [("continuous batching", "continuous-batching"), ("prefix caching", "prefix-caching"), ("TTFT", "ttft"),
           ("ITL", "itl"), ("goodput", "goodput"), ("SLO", "slo"), ("TPOT", "tpot"),
           ("paged attention", "paged-attention"), ("chunked prefill", "chunked-prefill"), ("radix tree", "radix-tree"),
           ("tensor parallelism", "tensor-parallelism"), ("normalized latency", "normalized-latency")],
    "01": [("token", "token"), ("KV cache", "kv-cache"), ("TTFT", "ttft"), ("prefill", "prefill"),
           ("forward pass", "forward-pass"), ("DynamicCache", "dynamiccache"), ("GQA", "gqa"),
           ("left-padded", "left-padding"), ("greedy", "greedy-decoding"), ("ITL", "itl"),
           ("memory-bound", "memory-bound"), ("OOM", "oom")],
    "02": [("quantization", "quantization"), ("KV cache", "kv-cache"), ("GQA", "gqa"), ("DynamicCache", "dynamiccache"),
           ("gpu_memory_utilization", "gpu_memory_utilization")],
    "07": [("KV cache", "kv-cache"), ("throughput", "throughput"), ("prefix caching", "prefix-caching"),
           ("speculative decoding", "speculative-decoding"), ("compute-bound", "compute-bound"),
           ("paged attention", "paged-attention"), ("continuous batching", "continuous-batching"),
           ("token budget", "token-budget"), ("chunked prefill", "chunked-prefill"), ("preemption", "preemption"),
           ("radix tree", "radix-tree"), ("greedy", "greedy-decoding"), ("block table", "block-table"),
           ("copy-on-write", "copy-on-write"), ("decode", "decode"), ("static batches", "static-batching"),
           ("left-padded", "left-padding"), ("draft model", "draft-model"), ("acceptance", "acceptance-rate"),
           ("memory-bound", "memory-bound"), ("TTFT", "ttft"), ("inter-token latency", "itl")],
    "09": [("all-reduce", "all-reduce"), ("NVLink", "nvlink"), ("PCIe", "pcie"), ("InfiniBand", "infiniband"),
           ("tensor parallelism", "tensor-parallelism"), ("pipeline parallelism", "pipeline-parallelism"),
           ("all-to-all", "all-to-all"), ("expert parallelism", "expert-parallelism"), ("gloo", "gloo"),
           ("NCCL", "nccl"), ("ITL", "itl"), ("TTFT", "ttft"), ("efficiency", "efficiency"),
           ("HBM", "hbm"), ("FP8", "fp8"), ("MLA", "mla")],
    "05": [("decode", "decode"), ("bf16", "bf16"), ("fp32", "bf16"), ("outlier features", "outlier-features"),
           ("prefill", "prefill"), ("memory-bound", "memory-bound"), ("mixture-of-experts", "moe"),
           ("Greedy decoding", "greedy-decoding"), ("KV cache", "kv-cache"), ("MBU", "mbu"),
           ("gpu_memory_utilization", "gpu_memory_utilization"), ("efficiency", "efficiency")],
    "06": [("KV cache", "kv-cache"), ("RoPE", "rope"), ("decode", "decode"), ("prefill", "prefill"), ("bf16", "bf16"),
           ("fp32", "bf16"), ("DynamicCache", "dynamiccache"), ("FLOPs", "flop")],
}


@pytest.mark.parametrize("number", sorted(FIRST_USES))
def test_terms_are_linked_at_their_first_use(number):
    (path,) = (ROOT / "notebooks").glob(f"{number}_*.py")
    src = path.read_text(encoding="utf-8")
    src = src[src.index("\n    # ", src.index("app.setup")):]          # after the imports, from the title on
    src = src[src.index("\n", 1):]                                      # the title line names the topics only
    for word, anchor in FIRST_USES[number]:
        links = [m.start() for m in TERM_CALL.finditer(src) if (m.group(4) or glossary.slug(m.group(2))) == anchor]
        assert links, f"notebook {number} never links {word!r} to #{anchor}"
        first_use = re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", src)
        assert first_use.start() >= links[0], (
            f"notebook {number} uses {word!r} before linking it: …{src[first_use.start() - 60:first_use.start() + 20]}…")
