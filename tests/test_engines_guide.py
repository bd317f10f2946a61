"""workshop/engines.md and the pages that read an engine record: the generated section is what
`python scripts/engines_guide.py` writes from the committed record (tables only), the words a page types
about a record are its provenance (machine, date, load), and the agentic trace and its tokens per word
match the tokenizer."""
import sys
from pathlib import Path

import pytest

from helpers.benchmark import records
from servebench import harness

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import engines_guide  # noqa: E402 - scripts/engines_guide.py writes workshop/engines.md


def test_engines_md_holds_the_guide_generated_from_the_committed_record(tmp_path):
    """The committed workshop/engines.md is what `python scripts/engines_guide.py` writes from the committed
    record (regenerate it after a new make engines record); a file without the markers is refused."""
    md = ROOT / "workshop" / "engines.md"
    copy = tmp_path / "engines.md"
    copy.write_text(md.read_text())
    engines_guide.write_guide(records.RECORD, copy)
    assert copy.read_text() == md.read_text(), "workshop/engines.md is stale: python scripts/engines_guide.py"
    (tmp_path / "bare.md").write_text("no markers")
    with pytest.raises(ValueError, match="no generated section"):
        engines_guide.write_guide(records.RECORD, tmp_path / "bare.md")


def test_the_generated_section_is_tables_and_the_records_provenance():
    from helpers import records as helper_records

    data = helper_records.load(records.RECORD, "engines")
    text = engines_guide.guide_markdown(data, "x.json")
    prose = [ln for ln in text.splitlines() if ln and not ln.startswith(("|", "#", "<!--"))]
    assert prose == [f"From `x.json`: {records.provenance(data)}; it took {data['seconds']:.0f} s."]
    assert prose[0].endswith(": idle; it took 1825 s.")


def test_tokens_per_word_is_the_tokenizers_rate_on_the_word_list():
    from helpers.measure import local_models
    from helpers.serving.traces import chat_trace

    tok = local_models.load_tokenizer(local_models.build_tiny())
    reqs = chat_trace(100, seed=0, prompt_words_median=100, sigma=0.0)
    words = sum(len(r.prompt.split()) for r in reqs)
    tokens = sum(len(tok(r.prompt).input_ids) for r in reqs)
    assert tokens / words == pytest.approx(harness.TOKENS_PER_WORD, abs=0.02)
    agentic = harness.agentic()
    assert len(tok(agentic[0]["prompt"]).input_ids) == pytest.approx(1200 + 40 * 1.05, rel=0.05)   # + the task
    assert [r["round"] for r in agentic] == [0] * 4 + [1] * 4
