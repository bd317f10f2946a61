"""The deck: built offline from slides/deck.md, every number in it from generated data, checked here.

The deck source types no number of its own (only placeholders, list markers and names such as
"Mistral 7B" or "bf16"); every number in the built HTML is one of numbers.json's; the figures that
carry the talk's corrections are checked against independent sources (the formula by hand, the
published parameter count, the DeepSeek-V2 paper's dimensions, the reported serving table).
"""
from __future__ import annotations

import sys
import csv
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DECK = ROOT / "slides" / "deck.md"

# Names that contain digits but state no figure: model and dtype names, GPU names, versions, notebook ids.
WHITELIST = re.compile(
    r"Mistral 7B|GPT-OSS-120B|DeepSeek V3|DeepSeek-V2|Llama 3\.1 8B|\bv0\.\d\b|\b[HAB]\d00\b|"
    r"\b(?:bf16|fp16|fp8|fp32|int8|int4|nf4|mxfp4|FP8|MXFP4)\b|\b\d\d_[a-z_]+\b|"
    r"^\s*\d+\.\s", re.M)
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"slides_{name}", ROOT / "slides" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("slides")
    assert _load("figures").main(["--out", str(out)]) == 0
    page = _load("build").build(DECK, out)
    return out, json.loads((out / "numbers.json").read_text()), page.read_text()


def _visible_text(page: str) -> str:
    # a recorded run's caption is its provenance (device, date, note from meta.json), checked below
    page = re.sub(r"<(script|style|figcaption)\b.*?</\1>", " ", page, flags=re.S)
    page = re.sub(r"src='data:[^']*'", " ", page)
    return re.sub(r"<[^>]+>", " ", page)


def test_deck_source_types_no_numbers():
    text = re.sub(r"\{\{\s*[a-z0-9_]+\s*\}\}", " ", DECK.read_text())
    text = re.sub(r"\]\((?:figures/[a-z_]+\.png|recorded:[a-z0-9_]+)\)", "]()", text)
    text = WHITELIST.sub(" ", text)
    stray = [(m.group(), text[max(0, m.start() - 30):m.end() + 10]) for m in NUMBER.finditer(text)]
    assert not stray, f"numbers typed into slides/deck.md (use a {{{{placeholder}}}}): {stray}"


def test_every_number_in_the_built_deck_is_generated(built):
    _, numbers, page = built
    allowed = {n for f in numbers.values() for n in NUMBER.findall(str(f["text"]))}
    text = WHITELIST.sub(" ", _visible_text(page))
    found = NUMBER.findall(text)
    assert found, "the deck states no number at all"
    assert not [n for n in found if n not in allowed], f"numbers in the deck not in numbers.json: {set(found) - allowed}"
    assert "{{" not in page


def test_numbers_json_is_what_helpers_compute(built):
    sys.path.insert(0, str(ROOT / "scripts"))
    import keyfigures  # scripts/keyfigures.py

    _, numbers, _ = built
    assert numbers == json.loads(json.dumps({k: f.to_dict() for k, f in keyfigures.all_figures().items()}))


def test_the_talks_corrections_against_independent_sources(built):
    _, n, _ = built
    # KV per token by hand: K and V × head_dim 128 × 32 layers × 8 KV heads × 2 bytes (Mistral 7B config.json)
    assert n["kv_bytes_per_token"]["value"] == 2 * 128 * 32 * 8 * 2 == 131072
    assert n["kv_kib_per_token"]["text"] == "128 KiB" and n["kv_kb_per_token"]["text"] == "131.072 kB"
    # Mistral 7B v0.1: 7,241,732,096 parameters (the safetensors index's total_size ÷ 2 bytes)
    assert n["params"]["value"] == 7_241_732_096
    assert n["weights_gb"]["text"] == "14.48 GB" and n["weights_gib"]["text"] == "13.49 GiB"
    assert abs(n["kv_user_4k_gib"]["value"] - 0.5) < 1e-12 and abs(n["kv_user_16k_gib"]["value"] - 2.0) < 1e-12
    assert n["kv_users_gb"]["value"] == pytest.approx(80 * 4096 * 131072 / 1e9)
    # DeepSeek V3 MLA (config.json: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64; 128 heads of 128)
    assert n["mla_bytes"]["value"] == 61 * (512 + 64) * 2
    assert n["mla_vs_mha"]["value"] == pytest.approx(round(61 * 128 * 128 * 2 * 2 / (61 * 576 * 2), 2))
    assert n["mla_vs_mistral_gqa"]["value"] == pytest.approx(round(131072 / (61 * 576 * 2), 2))
    assert n["mla_gqa_groups"]["value"] == (512 + 64) / (2 * 128) == 2.25
    # GPT-OSS-120B fits one 80 GB GPU only with MXFP4 experts
    assert [n[f"gptoss_{s}_fits"]["value"] for s in ("bf16", "fp8", "mxfp4")] == [False, False, True]
    # the serving ratio comes from the reported table and says its concurrency caveat
    rows = list(csv.DictReader(r for r in open(ROOT / "helpers" / "data" / "talk_serving_h100.csv") if not r.startswith("#")))
    assert n["serve_best_ratio"]["value"] == pytest.approx(max(float(r["tok_s"]) for r in rows) / float(rows[0]["tok_s"]))
    assert (n["serve_baseline_concurrency"]["value"], n["serve_concurrency"]["value"]) == (1, 10)


def test_deck_covers_the_agenda_with_notes_and_opens_offline(built):
    out, _, page = built
    sections = re.findall(r"<section class='slide'.*?</section>", page, flags=re.S)
    heads = " | ".join(re.findall(r"<h[12]>(.*?)</h[12]>", page)).lower()
    order = ["why inference cost", "feel the pain", "foundations", "capacity", "model optimizations",
             "serving optimizations", "engines", "decision"]
    positions = [heads.find(k) for k in order]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), heads
    notes = re.findall(r"<aside class='notes'>(.*?)</aside>", page, flags=re.S)
    assert len(notes) == len(sections) >= 15 and sum(bool(x.strip()) for x in notes) >= len(sections) - 2
    assert not re.search(r"""(?:src|href)\s*=\s*['"]?(?:https?:)?//""", page), "the deck must load nothing from the network"
    assert "<link" not in page and page.count("data:image/png;base64,") >= 5
    assert (out / "index.html").stat().st_size < 5e6


def test_unknown_placeholder_is_refused():
    build = _load("build")
    with pytest.raises(ValueError, match="no_such_figure"):
        build.fill("a {{no_such_figure}}", {"x": {"text": "1"}})


def test_recorded_figures_are_captioned_with_their_record(built):
    from helpers.present import recorded

    _, _, page = built
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", page, flags=re.S)
    rec = recorded.pick("03_prefill_decode_roofline")
    if rec is None:
        assert "no recorded run of 03_prefill_decode_roofline" in page
    else:
        import html

        assert html.escape(rec.label) in captions
