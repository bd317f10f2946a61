"""helpers.capacity.inputs, the planner web app's inputs, without a browser: bad values give a note and
the last good inputs; the path box's note is the same whether or not a path exists."""
import json

import pytest

from helpers.capacity.inputs import LastGood, read_model, unreadable_note
from helpers.formulas.specs import preset_path

GOOD = ("", "mistral-7b-v0.1", "bf16", "bf16", 4096, 10, 1, "1")


def test_good_inputs_pass_and_become_the_last_good():
    k = LastGood()
    inputs, note = k.resolve("", "llama-3.1-8b", "fp8", "bf16", 8192, 0, 4, "2")
    assert note == "" and inputs.model.name == "llama-3.1-8b" and inputs.slo_ms is None
    assert (inputs.context, inputs.min_batch, inputs.gpus) == (8192, 4, 2)
    again, note = k.resolve("", "llama-3.1-8b", "fp8", "bf16", 10**9, 0, 4, "2")
    assert again == inputs and "exceeds llama-3.1-8b's maximum of 131,072" in note
    assert "Showing the last good answer: llama-3.1-8b, weights fp8" in note


@pytest.mark.parametrize("values,needle", [
    (("", "mistral-7b-v0.1", "bf16", "bf16", 4096, 10, 0, "1"), "minimum batch must be a whole number from 1 to 4,096"),
    (("", "mistral-7b-v0.1", "bf16", "bf16", 4096, 10, 5000, "1"), "minimum batch must be a whole number from 1 to 4,096"),
    (("", "mistral-7b-v0.1", "bf16", "bf16", 4096, 10, 1.5, "1"), "minimum batch must be a whole number from 1 to 4,096"),
    (("", "mistral-7b-v0.1", "bf16", "bf16", 4096, 10, 1, "3"), "divisible by 3"),
    (("", "deepseek-v3", "bf16", "bf16", 4096, 10, 1, "1"), "fits no catalogued GPU alone"),
    (("", "mistral-7b-v0.1", "bf17", "bf16", 4096, 10, 1, "1"), "unknown dtype 'bf17'"),
])
def test_bad_control_values_keep_the_last_good(values, needle):
    k = LastGood()
    good, _ = k.resolve(*GOOD)
    inputs, note = k.resolve(*values)
    assert inputs == good and needle in note and note.startswith("⚠️ **Cannot plan this:**")


def test_config_file_validated_by_the_schema(tmp_path):
    cfg = json.loads(preset_path("deepseek-v2-lite").read_text())
    (tmp_path / "x.json").write_text(json.dumps({**cfg, "kv_lora_rank": 0}))
    spec, note = read_model(str(tmp_path / "x.json"))
    assert spec is None and note == ("config 'x': kv_lora_rank is 0; allowed: a whole number from 1 to 65,536, "
                                     "or null (not MLA)")
    (tmp_path / "y.json").write_text(json.dumps(cfg))
    spec, note = read_model(str(tmp_path / "y.json"))
    assert note == "" and spec.name == "y" and spec.kv_lora_rank == 512


def test_unreadable_paths_all_give_the_same_note(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "big.json").write_text(" " * 1_000_001)
    (tmp_path / "a.txt").write_text(preset_path("mistral-7b-v0.1").read_text())
    (tmp_path / "dir.json").mkdir()
    paths = ["/no/such/file.json", str(tmp_path / "missing.json"), str(tmp_path / "bad.json"),
             str(tmp_path / "list.json"), str(tmp_path / "big.json"), str(tmp_path / "a.txt"),
             str(tmp_path / "dir.json"), str(tmp_path), "/etc/passwd", "/dev/zero", "~nosuchuser/x.json", "a\0.json"]
    for p in paths:
        spec, note = read_model(p)
        assert spec is None and note == unreadable_note(p), p
