"""Recorded runs (workshop/results/<device>/), the helper that shows one beside the live run, the
report's key figures, and the static-control note."""
from __future__ import annotations

import sys
import json
import re
import struct
from pathlib import Path

import pytest

from helpers import records
from helpers.present import notebook, recorded

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import keyfigures  # noqa: E402  (scripts/keyfigures.py)
import report  # noqa: E402  (scripts/report.py)
RECORDS = sorted(p.parent for p in (ROOT / "workshop" / "results").glob("*/meta.json"))


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def _body(path: Path) -> dict:
    """A record's fields without its envelope (record_format, kind)."""
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in ("record_format", "kind")}


def test_a_cpu_record_is_committed():
    assert sum(json.loads((r / "meta.json").read_text())["measured_on"]["device"]["kind"] == "cpu" for r in RECORDS) >= 2


@pytest.mark.parametrize("folder", RECORDS, ids=lambda p: p.name)
def test_record_layout(folder):
    meta = json.loads((folder / "meta.json").read_text())
    assert "notebooks" in meta, f"{folder.name}/meta.json lacks notebooks"
    where = meta["measured_on"]       # its shape: tests/test_measured_on.py, for every record
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", where["recorded_at"])
    assert where["device"]["kind"] in ("cuda", "cpu", "mps") and where["device"]["name"] and where["profile"]
    assert where["versions"]["torch"] == where["device"]["torch_version"]
    for nb in meta["notebooks"]:
        figs = sorted((folder / "figures").glob(f"{nb['notebook']}-*.png"))
        assert len(figs) == nb["figures"], nb["notebook"]
        assert all(min(_png_size(f)) > 50 for f in figs)
        if nb.get("html"):
            assert (folder / nb["html"]).is_file()
        assert nb["seconds"] is None or nb["seconds"] > 0
    rec = recorded.Record(folder, meta)
    assert where["profile"] in rec.label and rec.device in rec.label and where["recorded_at"][:10] in rec.label
    kf = rec.key_figures()
    if any(n["notebook"].startswith("03_") and n["ok"] for n in meta["notebooks"]):
        f = kf["03_prefill_decode_roofline"]
        assert f["ridge (FLOP/B)"] == pytest.approx(f["peak matmul (TFLOP/s)"] * 1e12 / (f["bandwidth (GB/s)"] * 1e9))
        assert 0 < f["decode efficiency (loaded model)"] <= 1


def _fake_record(tmp_path: Path, kind: str, when: str, name: str) -> Path:
    folder = tmp_path / name
    (folder / "figures").mkdir(parents=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(folder / "figures" / "03_x-01.png")
    plt.close(fig)
    meta = {"measured_on": {"recorded_at": when, "device": {"kind": kind, "name": name.upper()},
                            "profile": "mistral-7b-random"}, "gpu": name.upper(), "notebooks": [{"notebook": "03_x", "ok": True, "figures": 1}]}
    records.dump(folder / "meta.json", "record-meta", meta)
    records.dump(folder / "key_figures.json", "key-figures", {"03_x": {"ridge (FLOP/B)": 295.5}})
    return folder


def test_beside_live_labels_where_and_when(tmp_path):
    _fake_record(tmp_path, "cpu", "2026-11-30T12:00:00+00:00", "cpu-box")
    _fake_record(tmp_path, "cuda", "2026-11-01T09:30:00+00:00", "h200")
    assert recorded.pick("03_x", tmp_path).folder.name == "h200"          # a GPU first, even if older
    page = recorded.beside_live_html("03_x", {"ridge (FLOP/B)": 12.0}, tmp_path)
    assert "recorded on H200" in page and "2026-11-01 09:30" in page and "mistral-7b-random" in page
    assert "12" in page and "295.5" in page and page.count("data:image/png;base64,") == 1
    assert "none holds 99_y" in recorded.beside_live_html("99_y", {}, tmp_path)


def test_note_figures_writes_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.delenv(recorded.FIGURES_ENV, raising=False)
    assert recorded.note_figures("03_x", {"a": 1}) is None
    monkeypatch.setenv(recorded.FIGURES_ENV, str(tmp_path))
    import numpy as np

    path = recorded.note_figures("03_x", {"a": np.float64(2.5), "b": float("nan"), "c": "cpu"})
    assert _body(path) == {"a": 2.5, "b": None, "c": "cpu"}
    assert recorded.noted_figures(tmp_path) == {"03_x": {"a": 2.5, "b": None, "c": "cpu"}}


def test_report_section_has_each_notebooks_figures_machine_and_links(tmp_path):
    records.dump(tmp_path / "figures" / "03_prefill_decode_roofline.json", "key-figures", {"ridge (FLOP/B)": 7.25})
    rows = [(s, True, 1.0, "") for s in ("02_memory_equation", "03_prefill_decode_roofline", "04_capacity_planner",
                                         "05_quantization", "06_attention_variants")] + [("01_feel_the_pain", False, 2.0, "boom")]
    page = report.section(rows, tmp_path, "tiny", "cpu: Test CPU")

    expected = [keyfigures.foundations()["kv_bytes_per_token"].text, keyfigures.roofline_figures()["ridge"].text,
                keyfigures.planner()["best_gpu"].text, keyfigures.quantization()["mistral_nf4_gb"].text,
                keyfigures.mla()["mla_vs_mistral_gqa"].text]
    for text in expected:
        assert text in page
    assert "7.25" in page and "cpu: Test CPU" in page and "<b>tiny</b>" in page
    for stem, *_ in rows:
        assert f"href='{stem}.html'" in page and f"href='executed/{stem}.ipynb'" in page
    assert "failed" in page and not re.search(r"(?:src|href)='(?:https?:)?//", page)
    run = json.loads(report.write_run_json(rows, tmp_path, "tiny", "cpu").read_text())
    assert [n["notebook"] for n in run["notebooks"]] == [r[0] for r in rows] and run["notebooks"][-1]["ok"] is False
    assert run["measured_on"]["profile"] == "tiny" and run["measured_on"]["device"]["kind"] == "cpu"
    assert set(run) == {"record_format", "kind", "measured_on", "notebooks"}


def test_env_default_and_static_note(monkeypatch):
    monkeypatch.delenv("WORKSHOP_TEST_N", raising=False)
    assert notebook.env_default("WORKSHOP_TEST_N", 80, lo=1, hi=200) == 80
    monkeypatch.setenv("WORKSHOP_TEST_N", "141")
    assert notebook.env_default("WORKSHOP_TEST_N", 80, lo=1, hi=200) == 141
    with pytest.raises(ValueError, match="WORKSHOP_TEST_N.*allowed: 1, 2"):
        notebook.env_default("WORKSHOP_TEST_N", 1, [1, 2])
    monkeypatch.setenv("WORKSHOP_TEST_N", "lots")
    with pytest.raises(ValueError, match="WORKSHOP_TEST_N='lots' is not allowed; allowed: a whole number from 1 to 200"):
        notebook.env_default("WORKSHOP_TEST_N", 80, lo=1, hi=200)
    assert not notebook.in_marimo()
    note = notebook.static_note({"WORKSHOP_GPU_GB": "GPU memory"})._repr_html_()
    assert "static outside marimo" in note and "WORKSHOP_GPU_GB" in note
    monkeypatch.setattr(notebook, "in_marimo", lambda: True)
    assert "WORKSHOP_GPU_GB" not in notebook.static_note({"WORKSHOP_GPU_GB": "GPU memory"})._repr_html_()


# ----------------------------------------------------------------------------- hostile records (issue 20)

BROKEN = [b"", b"{", b'{"recorded_at": "2026-', b"[]", b"null", b"7", b"\xff\xfe{}", b'{"a": NaN}', b"[" * 5000]


@pytest.mark.parametrize("content", BROKEN, ids=lambda b: repr(b[:12]))
def test_a_corrupt_meta_json_is_skipped_with_a_note(tmp_path, content):
    _fake_record(tmp_path, "cpu", "2026-11-30T12:00:00+00:00", "cpu-box")
    broken = _fake_record(tmp_path, "cuda", "2026-12-01T09:30:00+00:00", "broken")
    (broken / "meta.json").write_bytes(content)
    skipped = []
    assert [r.folder.name for r in recorded.records(tmp_path, skipped)] == ["cpu-box"]
    assert len(skipped) == 1 and "broken/meta.json" in skipped[0]
    page = recorded.beside_live_html("03_x", {"ridge (FLOP/B)": 12.0}, tmp_path)  # used to raise for every notebook
    assert "recorded on CPU-BOX" in page and "skipped a record" in page and "broken/meta.json" in page


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"03_x": []}', b'{"03_x": "fast"}', b"\xff",
                                     b'{"03_x": {"a": 1e999}}'], ids=repr)
def test_a_corrupt_key_figures_json_is_skipped_with_a_note(tmp_path, content):
    _fake_record(tmp_path, "cpu", "2026-11-30T12:00:00+00:00", "cpu-box")
    broken = _fake_record(tmp_path, "cuda", "2026-12-01T09:30:00+00:00", "h200")   # a GPU: picked first if readable
    (broken / "key_figures.json").write_bytes(content)
    page = recorded.beside_live_html("03_x", {}, tmp_path)
    assert "recorded on CPU-BOX" in page and "h200/key_figures.json" in page


def test_wrong_typed_meta_fields_still_label_the_record(tmp_path):
    folder = _fake_record(tmp_path, "cpu", "2026-11-30T12:00:00+00:00", "odd")
    records.dump(folder / "meta.json", "record-meta", {"measured_on": {"device": "a string", "recorded_at": 5,
                                                                       "profile": [1]}, "note": {"x": 1}, "gpu": True})
    rec = recorded.pick("03_x", tmp_path)
    assert rec.label == "recorded on ?: ? · profile ? · ?" and not rec.is_gpu
    records.dump(folder / "meta.json", "record-meta", {"measured_on": "a string", "gpu": True})
    assert recorded.pick("03_x", tmp_path).label == "recorded on ?: ? · profile ? · ?"


def test_report_leaves_out_a_truncated_figures_file_and_says_which(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "02_memory_equation.json").write_text('{"users that fit": 4')      # truncated
    records.dump(tmp_path / "figures" / "03_prefill_decode_roofline.json", "key-figures", {"ridge (FLOP/B)": 7.25})
    rows = [("02_memory_equation", True, 1.0, ""), ("03_prefill_decode_roofline", True, 1.0, "")]
    page = report.section(rows, tmp_path, "tiny", "cpu: Test CPU")
    assert "7.25" in page and "measured figures unreadable" in page and "02_memory_equation.json" in page
    skipped = []
    assert list(recorded.noted_figures(tmp_path / "figures", skipped)) == ["03_prefill_decode_roofline"]
    assert "not valid JSON" in skipped[0]


def test_figures_are_written_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv(recorded.FIGURES_ENV, str(tmp_path))
    path = recorded.note_figures("03_x", {"a": 1})
    import os

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(records.os, "replace", crash)
    with pytest.raises(ValueError, match="No space left on device"):
        recorded.note_figures("03_x", {"a": 2})
    assert _body(path) == {"a": 1}                   # the old file whole, not half a new one
    assert [p.name for p in tmp_path.iterdir()] == ["03_x.json"]       # and no temporary file left
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"


def test_run_clears_stale_figures_and_writes_the_report_whatever_the_figures(tmp_path, monkeypatch):
    """scripts/notebooks.py run with one notebook that fails in its first cell: last run's figures of it
    are gone (not shown as "measured in this run"), and a truncated figures file of another notebook no
    longer stops index.html and run.json from being written."""
    import importlib.util

    import nbformat

    spec = importlib.util.spec_from_file_location("notebooks_script", ROOT / "scripts" / "notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src, colab, build = tmp_path / "notebooks", tmp_path / "colab", tmp_path / "build"
    for d in (src, colab, build / "figures"):
        d.mkdir(parents=True)
    (src / "98_fails.py").write_text("# a notebook that fails at once\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise RuntimeError('boom early')")])
    nbformat.write(nb, colab / "98_fails.ipynb")
    (build / "figures" / "98_fails.json").write_text(json.dumps({"ridge (FLOP/B)": 123.0}))   # last run's
    (build / "figures" / "97_other.json").write_text('{"truncat')
    monkeypatch.setattr(mod, "NOTEBOOKS", src)
    monkeypatch.setattr(mod, "COLAB", colab)
    monkeypatch.setattr(mod, "BUILD", build)
    monkeypatch.setenv("WORKSHOP_FIGURES_DIR", str(build / "figures"))
    assert mod.run(["98"], 120) == 1
    assert not (build / "figures" / "98_fails.json").exists()
    page = (build / "index.html").read_text()
    assert "123" not in page and "97_other.json" in page and "boom early" in page
    run = json.loads((build / "run.json").read_text())
    assert run["notebooks"][0]["notebook"] == "98_fails" and run["notebooks"][0]["ok"] is False
    assert run["measured_on"]["profile"] and run["measured_on"]["device"]["kind"] in ("cpu", "cuda", "mps")
