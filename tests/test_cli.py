"""python -m helpers: JSON answers, readable tables, and one-line errors with exit status 2."""
import json

import pytest

from cli_run import in_process as cli, python_m
from helpers.formulas.specs import PRESETS, preset_path


def test_kv_json_mistral():  # the real process, once; the rest in-process
    r = python_m("kv", "--model", "mistral-7b-v0.1", "--tokens", "1000", "--batch", "3", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"] == "mistral-7b-v0.1" and d["attention"] == "gqa" and d["dtype"] == "bf16"
    assert d["kv_bytes_per_token"] == 131_072
    assert d["kv_bytes_total"] == 131_072 * 1000 * 3


@pytest.mark.parametrize("model,attention", [("deepseek-v3", "mla"), ("gpt-oss-120b", "hybrid"),
                                             ("qwen2.5-7b", "gqa")])
def test_kv_every_attention_kind_at_long_context(model, attention):
    d = json.loads(cli("kv", "--model", model, "--tokens", "131072", "--dtype", "fp8", "--json").stdout)
    assert d["attention"] == attention
    assert isinstance(d["kv_bytes_total"], int) and d["kv_bytes_total"] > 0


def test_kv_table_labels_units():
    r = cli("kv", "--model", "mistral-7b-v0.1")
    assert r.returncode == 0
    assert "131,072 B = 128 KiB = 131 kB" in r.stdout


def test_weights_json():
    d = json.loads(cli("weights", "--model", "mistral-7b-v0.1", "--json").stdout)
    assert (d["params"], d["bytes"], d["dtype"]) == (7_241_732_096, 14_483_464_192, "bf16")
    d = json.loads(cli("weights", "--model", "mistral-7b-v0.1", "--dtype", "nf4", "--json").stdout)
    assert d["bytes"] < 14_483_464_192 / 3 and d["metadata_bytes"] > 0


def test_config_path_accepted(tmp_path):
    (tmp_path / "config.json").write_text(preset_path("llama-3.1-8b").read_text())
    d = json.loads(cli("kv", "--model", str(tmp_path / "config.json"), "--json").stdout)
    assert d["kv_bytes_per_token"] == 131_072


def test_presets_listed():
    d = json.loads(cli("presets", "--json").stdout)
    assert [p["name"] for p in d["presets"]] == list(PRESETS)


@pytest.mark.parametrize("args,needle", [
    (("kv", "--model", "gpt-5"), "presets: mistral-7b-v0.1"),
    (("kv", "--model", "mistral-7b-v0.1", "--dtype", "fp6"), "allowed: fp32, bf16"),
    (("weights", "--model", "mistral-7b-v0.1", "--dtype", "int4"), "allowed: fp32, bf16"),
    (("kv", "--model", "mistral-7b-v0.1", "--tokens", "0"), "positive"),
    (("kv", "--model", "mistral-7b-v0.1", "--batch", "-3"), "positive"),
    (("kv", "--model", "mistral-7b-v0.1", "--tokens", "many"), "whole number"),
    (("kv",), "required: --model"),
    (("frobnicate",), "invalid choice"),
    ((), "choose a command"),
])
def test_bad_input_one_line_exit_2(args, needle):
    r = cli(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_unreadable_and_unsupported_configs(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    r = cli("kv", "--model", str(bad))
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr
    alien = tmp_path / "alien.json"
    alien.write_text(json.dumps({"model_type": "no-such-arch", "hidden_size": 8, "num_hidden_layers": 1,
                                 "num_attention_heads": 2, "vocab_size": 10}))
    r = cli("weights", "--model", str(alien))
    assert r.returncode == 2 and "unsupported config" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
