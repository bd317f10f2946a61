"""The typed config schema (helpers.formulas.config_schema) where a config enters helpers.formulas.specs: every case of
issue 8 gives one ValueError naming the field, its value and what is allowed — or a valid ModelSpec."""
import json
import os
import sys
import threading

import pytest

from helpers.formulas import memory, specs
from helpers.formulas.config_schema import MAX_CONFIG_BYTES, ConfigError, validate_config


def preset(name="mistral-7b-v0.1"):
    return json.loads(specs.preset_path(name).read_text())


@pytest.mark.parametrize("name", specs.PRESETS)
def test_every_preset_is_valid(name):
    s = specs.get_spec(name)
    assert s.num_layers > 0 and memory.kv_bytes_per_token(s) > 0


def test_transformers_own_config_dicts_pass():
    """Dicts that transformers writes (every default field, nulls included) are valid configs."""
    from transformers import AutoConfig

    from helpers.measure.local_models import TINY_CONFIG
    from helpers.measure.mla import TINY_MLA_CONFIG

    for cfg in (TINY_CONFIG, TINY_MLA_CONFIG, preset("gpt-oss-120b"), preset("qwen2.5-7b")):
        c = dict(cfg)
        full = AutoConfig.for_model(c.pop("model_type"), **c).to_dict()
        s = specs.spec_from_config(full, "t")
        assert s.num_layers == cfg["num_hidden_layers"]


# (field, value, words the message must hold): the cases the issue found, each refused by name.
BAD_FIELDS = [
    ("num_key_value_heads", -8, "num_key_value_heads is -8; allowed: a whole number from 1"),
    ("num_key_value_heads", 0, "num_key_value_heads is 0"),
    ("num_key_value_heads", True, "num_key_value_heads is true"),
    ("num_key_value_heads", "8", "num_key_value_heads is '8'"),
    ("num_key_value_heads", 3, "cannot be shared evenly by 3 KV heads"),
    ("head_dim", -128, "head_dim is -128"),
    ("head_dim", 0.5, "head_dim is 0.5"),
    ("head_dim", float("inf"), "head_dim is inf"),
    ("head_dim", float("nan"), "head_dim is nan"),
    ("hidden_size", "4096", "hidden_size is '4096'"),
    ("num_hidden_layers", None, "num_hidden_layers is null"),
    ("vocab_size", 10**400, "vocab_size is 1000000000000000000000000000000000000000… (401 digits)"),
    ("max_position_embeddings", -1, "max_position_embeddings is -1; allowed: a whole number from 1 to"),
    ("max_position_embeddings", 10**400, "max_position_embeddings is 1000"),
    ("sliding_window", 0, "sliding_window is 0"),
    ("intermediate_size", [1], "intermediate_size is [1]"),
    ("tie_word_embeddings", "no", "tie_word_embeddings is 'no'; allowed: true or false"),
    ("text_config", 5, "text_config is 5"),
]


@pytest.mark.parametrize("field,value,needle", BAD_FIELDS, ids=lambda v: str(v)[:20])
def test_bad_field_named_with_value_and_what_is_allowed(field, value, needle):
    cfg = preset()
    cfg[field] = value
    with pytest.raises(ValueError) as err:
        specs.spec_from_config(cfg, "m")
    assert needle in str(err.value)
    assert str(err.value).startswith("config 'm': ") and "allowed" in str(err.value) or "no '" in str(err.value)


def test_hidden_smaller_than_heads_needs_head_dim():
    cfg = {**preset(), "hidden_size": 16, "num_attention_heads": 32, "num_key_value_heads": 8}
    with pytest.raises(ValueError, match="hidden_size 16 is not divisible by num_attention_heads 32"):
        specs.spec_from_config(cfg)
    # with an explicit head_dim it is a valid (odd) shape, and its bytes are positive
    assert memory.kv_bytes_per_token(specs.spec_from_config({**cfg, "head_dim": 4})) == 32 * 2 * 8 * 4 * 2


@pytest.mark.parametrize("field", ["kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"])
def test_mla_ranks_of_zero_or_missing_are_refused(field):
    cfg = preset("deepseek-v2-lite")
    with pytest.raises(ValueError, match=f"{field} is 0"):
        specs.spec_from_config({**cfg, field: 0})
    if field != "kv_lora_rank":
        with pytest.raises(ValueError, match=f"kv_lora_rank is 512 \\(MLA\\) but {field} is missing"):
            specs.spec_from_config({k: v for k, v in cfg.items() if k != field})


def test_layer_types_must_match_layers_and_kinds():
    cfg = preset("gpt-oss-120b")
    with pytest.raises(ValueError, match="layer_types has 35 entries for num_hidden_layers 36"):
        specs.spec_from_config({**cfg, "layer_types": cfg["layer_types"][:35]})
    with pytest.raises(ValueError, match="layer_types holds 'mamba'"):
        specs.spec_from_config({**cfg, "layer_types": ["mamba"] * 36})
    with pytest.raises(ValueError, match="sliding_window is null"):
        specs.spec_from_config({**cfg, "sliding_window": None})


def test_experts_per_token_within_experts():
    with pytest.raises(ValueError, match="num_experts_per_tok is 300; allowed: at most the 256 experts"):
        specs.spec_from_config({**preset("deepseek-v3"), "num_experts_per_tok": 300})


def test_null_kv_heads_means_mha_but_zero_is_refused():
    cfg = preset()
    assert specs.spec_from_config({**cfg, "num_key_value_heads": None}).attention == "mha"
    with pytest.raises(ValueError):
        specs.spec_from_config({**cfg, "num_key_value_heads": 0})


def test_not_a_dict():
    with pytest.raises(ConfigError, match="is a list"):
        validate_config([1, 2])


# ---------------------------------------------------------------------------------------------- files

def test_nan_infinity_and_huge_numbers_in_a_file(tmp_path):
    p = tmp_path / "config.json"
    text = specs.preset_path("mistral-7b-v0.1").read_text()
    for bad, needle in (('"head_dim": NaN,', "NaN is not a number JSON allows"),
                        ('"head_dim": Infinity,', "Infinity is not a number JSON allows"),
                        ('"max_position_embeddings_x": ' + "9" * 5000 + ",", "cannot read"),
                        ('"max_position_embeddings": 1' + "0" * 400 + ",", "max_position_embeddings is")):
        p.write_text(text.replace('"max_position_embeddings": 32768,', "").replace("{", "{" + bad, 1))
        with pytest.raises(ValueError, match=needle):
            specs.get_spec(p)


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        specs.get_spec(p)


def test_size_limit_and_special_files(tmp_path):
    big = tmp_path / "big.json"
    big.write_text('{"pad": "' + "x" * MAX_CONFIG_BYTES + '"}')
    with pytest.raises(ValueError, match=f"allowed: a config.json of at most {MAX_CONFIG_BYTES:,} bytes"):
        specs.get_spec(big)
    if os.path.exists("/dev/zero"):
        with pytest.raises(ValueError, match="not a regular file"):
            specs.get_spec("/dev/zero")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_does_not_hang(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("err", pytest.raises(ValueError, specs.get_spec, fifo)),
                         daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading a named pipe hung"
    assert "not a regular file" in str(out["err"].value)


def test_two_files_in_one_folder_have_their_own_names(tmp_path):
    text = specs.preset_path("llama-3.1-8b").read_text()
    (tmp_path / "a.json").write_text(text)
    (tmp_path / "b.json").write_text(text)
    (tmp_path / "config.json").write_text(text)
    assert specs.get_spec(tmp_path / "a.json").name == "a"
    assert specs.get_spec(tmp_path / "b.json").name == "b"
    assert specs.get_spec(tmp_path / "config.json").name == tmp_path.name
    assert specs.get_spec(tmp_path).name == tmp_path.name


def test_param_count_validates_a_dict_first():
    with pytest.raises(ValueError, match="num_key_value_heads is -8"):
        specs.param_count({**preset(), "num_key_value_heads": -8})
