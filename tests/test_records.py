"""helpers.records: one versioned JSON form for every record — every value a recording holds comes back
equal, a record is never code, reading is confined to the record folders with its size checked first, and
no path of the recording machine is written."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import records
from helpers.formulas.roofline import RooflinePoint
from helpers.measure.timing import Stats


def _roundtrip(tmp_path, value):
    path = records.dump(tmp_path / "r.json", "test", {"value": value})
    return records.load(path, "test", roots=(tmp_path,))["value"]


def test_every_tagged_form_comes_back_equal(tmp_path):
    value = {"tuple": (1, 2.5, "x"), "int keys": {512: 1.0, 4096: 2.0}, "tuple keys": {(1, 2): "a"},
             "dollar key": {"$tuple": 1}, "nan": math.nan, "inf": -math.inf, "none": None, "bool": True,
             "nested": [Stats((0.1, 0.2)), {"deep": (Stats((3.0,)),)}], "np": np.float32(1.5), "npi": np.int64(7),
             "array": np.arange(6, dtype=np.int16).reshape(2, 3)}
    back = _roundtrip(tmp_path, value)
    assert back["tuple"] == (1, 2.5, "x") and back["int keys"] == {512: 1.0, 4096: 2.0}
    assert back["tuple keys"] == {(1, 2): "a"} and back["dollar key"] == {"$tuple": 1}
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf and back["none"] is None and back["bool"] is True
    assert back["nested"][0] == Stats((0.1, 0.2)) and back["nested"][1]["deep"][0].median == 3.0
    assert back["np"] == 1.5 and back["npi"] == 7 and isinstance(back["npi"], int)
    assert back["array"].dtype == np.int16 and back["array"].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_a_frame_keeps_its_columns_index_and_dtypes(tmp_path):
    df = pd.DataFrame({"tokens": [128, 256], "ms": [1.5, math.nan], "ok": [True, False], "name": ["a", "b"]})
    back = _roundtrip(tmp_path, df)
    pd.testing.assert_frame_equal(back, df)
    indexed = df.set_index("name")
    pd.testing.assert_frame_equal(_roundtrip(tmp_path, indexed), indexed, check_names=False)


def test_a_frozen_dataclass_with_nested_results(tmp_path):
    p = RooflinePoint(**{f: 1.0 for f in RooflinePoint.__dataclass_fields__})
    assert _roundtrip(tmp_path, p) == p


def test_a_record_is_never_code(tmp_path):
    path = tmp_path / "r.json"
    for name, why in (("os.system", "not a result type of helpers"),
                      ("helpers.records.RecordError", r"not a result type \(a dataclass\)"),
                      ("helpers.nowhere.Thing", "no longer exists"),
                      ("helpers.records.__builtins__", r"not a result type \(a dataclass\)")):
        path.write_text(json.dumps({"record_format": 1, "kind": "t", "value": {"$dataclass": name, "fields": {}}}))
        with pytest.raises(records.RecordError, match=why):
            records.load(path, "t", roots=(tmp_path,))
    with pytest.raises(TypeError, match="cannot hold a builtins.bytes"):
        records.dump(path, "t", {"value": b"x"})
    with pytest.raises(TypeError, match="helpers' results; test_records.Local is not one"):
        records.dump(path, "t", {"value": Local(1)})


@dataclass
class Local:
    x: int


def test_a_field_gained_since_with_a_default_reads_as_its_default(tmp_path):
    from helpers.measure.models import Loaded

    path = tmp_path / "r.json"
    fields = {"model": None, "tokenizer": None, "profile": "tiny", "model_name": "tiny", "device": "cpu",
              "dtype": "fp32", "reason": "r"}             # no `config`: Loaded has gained it with a default
    path.write_text(json.dumps({"record_format": 1, "kind": "t",
                                "v": {"$dataclass": "helpers.measure.models.Loaded", "fields": fields}}))
    assert records.load(path, "t", roots=(tmp_path,))["v"].config == {}
    del fields["dtype"]                                   # one without a default: the record says what changed
    path.write_text(json.dumps({"record_format": 1, "kind": "t",
                                "v": {"$dataclass": "helpers.measure.models.Loaded", "fields": fields}}))
    with pytest.raises(records.RecordError, match=r"fields it has gained: \['dtype'\]"):
        records.load(path, "t", roots=(tmp_path,))


@pytest.mark.parametrize("content, why", [
    (b"", "is not valid JSON"), (b"{", "is not valid JSON"), (b"\xff\xfe", "is not UTF-8"),
    (b"[1]", "holds a JSON list"), (b'{"record_format": 1, "kind": "t", "x": NaN}', "NaN is not a number"),
    (b'{"record_format": 1, "kind": "t", "x": 1e999}', "beyond a finite number"),
    (b'{"kind": "t"}', "record format None"), (b'{"record_format": 2, "kind": "t"}', "this code reads format 1"),
    (b'{"record_format": 1, "kind": "other"}', "is a 'other' record, not 't'"),
    (b'{"record_format": 1, "kind": "t", "v": {"$frame": 3}}', "r.json"),
    (b'{"record_format": 1, "kind": "t", "v": ' + b"[" * 100000 + b"]" * 100000 + b"}", "is not valid JSON"),
])
def test_a_bad_record_is_one_line_naming_the_file(tmp_path, content, why):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(records.RecordError, match=why) as err:
        records.load(path, "t", roots=(tmp_path,))
    assert "\n" not in str(err.value) and "r.json" in str(err.value)


def test_reading_is_confined_and_the_size_checked_before_reading(tmp_path):
    with pytest.raises(records.RecordError, match="not inside a record folder"):
        records.load("/etc/passwd")
    with pytest.raises(records.RecordError, match="not inside a record folder"):
        records.load(records.RESULTS / ".." / ".." / "README.md")
    big = tmp_path / "big.json"
    with open(big, "wb") as f:          # sparse: the size is known without reading a byte
        f.truncate(records.MAX_BYTES + 1)
    with pytest.raises(records.RecordError, match="more than a record's"):
        records.load(big, roots=(tmp_path,))
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(records.RecordError, match="not a file"):
        records.load(tmp_path / "dir.json", roots=(tmp_path,))
    with pytest.raises(records.RecordError, match="cannot read"):
        records.load(tmp_path / "missing.json", roots=(tmp_path,))


def test_no_path_of_the_recording_machine_is_written(tmp_path):
    home = str(Path.home())
    text = f"{records.ROOT}/.venv/bin/python -m x --model {home}/.cache/llm/tiny serve {home}/notes"
    path = records.dump(tmp_path / "r.json", "t", {"command": text, "where": records.ROOT / "build" / "x"})
    raw = path.read_text()
    assert str(records.ROOT) not in raw and home + "/" not in raw
    back = records.load(path, "t", roots=(tmp_path,))
    assert back["command"] == "<checkout>/.venv/bin/python -m x --model <user-cache>/llm/tiny serve ~/notes"
    assert back["where"] == "build/x"


def test_writing_is_atomic_and_refuses_what_is_not_a_record(tmp_path):
    path = records.dump(tmp_path / "sub" / "r.json", "t", {"a": 1})
    assert json.loads(path.read_text()) == {"record_format": 1, "kind": "t", "a": 1}
    with pytest.raises(ValueError, match="a record holds results, not a model"):
        records.dump(path, "t", {"a": "x" * records.MAX_BYTES})
    with pytest.raises(TypeError):
        records.dump(path, "t", {"a": object()})
    assert json.loads(path.read_text())["a"] == 1 and [p.name for p in path.parent.iterdir()] == ["r.json"]
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="cannot write the record"):
        records.dump(tmp_path / "file" / "r.json", "t", {})


def test_each_lists_the_records_that_load_and_says_why_of_the_others(tmp_path):
    records.dump(tmp_path / "a" / "meta.json", "m", {"x": 1})
    records.dump(tmp_path / "b" / "meta.json", "other", {})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "meta.json").write_text("{")
    skipped = []
    assert [(p.parent.name, d["x"]) for p, d in records.each("*/meta.json", "m", tmp_path, skipped)] == [("a", 1)]
    assert len(skipped) == 2 and "b/meta.json" in skipped[0] and "not valid JSON" in skipped[1]


@pytest.mark.parametrize("record", ["cpu-amd-epyc", "cpu-intel-xeon"])
def test_every_committed_record_file_is_in_the_format(record):
    folder = records.RESULTS / record
    files = sorted(folder.rglob("*.json"))
    assert files and not list(folder.rglob("*.pkl"))
    for path in files:
        data = records.load(path)
        assert data["record_format"] == records.RECORD_FORMAT and data["kind"]
        raw = path.read_text()
        assert "/root/" not in raw and "/home/" not in raw and "/work/" not in raw, path


def test_git_commit_is_the_checkout_s_or_the_one_a_gpu_host_was_given(monkeypatch):
    import subprocess
    from pathlib import Path

    from helpers.versions import git_commit

    monkeypatch.delenv("RECORD_COMMIT", raising=False)
    root = Path(__file__).resolve().parent.parent
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root).stdout.strip()
    assert git_commit() == (head or None)
    monkeypatch.setenv("RECORD_COMMIT", " 0123abc ")
    assert git_commit() == "0123abc"
