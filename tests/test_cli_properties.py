"""Property-based (hypothesis): configs made by mutating the real presets — wrong types, zero, negative,
huge, NaN, missing fields, inconsistent head counts — and command-line numbers of every kind, through
every command of ``python -m helpers``. For each: either a valid answer (finite JSON, non-negative
bytes, `fits` consistent with `max_batch`) and exit 0, or exit 2 with one line on stderr.

The commands run in-process (helpers.__main__.main), so an exception that escaped would fail the test
outright; tests/test_cli_faults.py runs the real process for what only a process shows. Runs in well
under a minute on two loaded cores (derandomized: the same examples in CI every time).
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cli_run import in_process
from helpers.formulas.gpus import catalog
from helpers.formulas.specs import PRESETS, preset_path

def PROPERTY(examples: int):
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

FIELDS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
          "vocab_size", "intermediate_size", "max_position_embeddings", "sliding_window", "use_sliding_window",
          "layer_types", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank",
          "n_routed_experts", "num_local_experts", "num_experts_per_tok", "first_k_dense_replace",
          "moe_intermediate_size", "tie_word_embeddings", "model_type", "text_config"]

BAD_VALUES = st.one_of(
    st.sampled_from([0, -1, -8, 1, 2, 3, 7, 8, 64, 2**31, 10**30, 10**400, "8", "", True, False, None, [], {},
                     0.5, 128.0, float("nan"), float("inf"), -float("inf"), [1, 2], ["full_attention"]]),
    st.integers(min_value=-10, max_value=100_000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
)


@st.composite
def mutated_config(draw, presets=PRESETS):
    cfg = json.loads(preset_path(draw(st.sampled_from(presets))).read_text())
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        field = draw(st.sampled_from(FIELDS))
        action = draw(st.sampled_from(["delete", "set", "scale", "scale"]))
        if action == "delete":
            cfg.pop(field, None)
        elif action == "set":
            cfg[field] = draw(BAD_VALUES)
        elif isinstance(cfg.get(field), int) and not isinstance(cfg.get(field), bool):
            # plausible neighbours keep many examples valid, so the answers get checked too
            cfg[field] = max(1, cfg[field] * draw(st.sampled_from([1, 2, 4])) // draw(st.sampled_from([1, 2, 3])))
    return cfg


NUMBERS = st.one_of(
    st.integers(min_value=-3, max_value=300_000).map(str),
    st.sampled_from(["0", "-1", "1", "1e3", "nan", "inf", "-inf", "", " 7 ", "1_000", "0x10", "9" * 50, "4096",
                     "1000000000", "1000000001", "3.5", "٣", "1" + "0" * 400]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


def numbers(*plausible: str):
    """Mostly plausible values (so answers get checked), often hostile ones."""
    return st.one_of(st.sampled_from(plausible), st.sampled_from(plausible), NUMBERS)


DTYPES = st.sampled_from(["bf16", "BF16", "bfloat16", "torch.bfloat16", "fp16", "float16", "fp32", "fp8", "int8",
                          "int4", "nf4", "nf4-dq", "NF4_DQ", "mxfp4", "fp6", "", "bf 16", "⊥"])
GPUS = st.sampled_from([g.name for g in catalog()] + ["all", "ALL", "h100", "", "H100 SXM ", "TPU"])
GOOD_DTYPES = st.sampled_from(["bf16", "BF16", "bfloat16", "fp8", "FP16"])


def _no_constant(token):
    raise AssertionError(f"non-finite number {token} in the JSON answer")


def answer(argv: list[str]) -> dict | list | None:
    """The parsed answer when the command answered (exit 0); None when it refused the input (exit 2)."""
    r = in_process(*argv)
    code, out, err = r.returncode, r.stdout, r.stderr
    assert code in (0, 2), f"exit {code} for {argv}: {err}"
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and out == "", (argv, err, out)
        assert "Traceback" not in err
        return None
    assert err == "", f"stderr on success for {argv}: {err}"
    return json.loads(out, parse_constant=_no_constant)


@pytest.fixture
def config_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cfg")

    def write(cfg: dict) -> str:
        path = folder / "config.json"
        path.write_text(json.dumps(cfg))  # NaN and Infinity written as JSON extensions: refused on reading
        return str(path)
    return write


def _bytes_ok(*values) -> None:
    for v in values:
        assert isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, values


@PROPERTY(150)
@given(cfg=mutated_config(), tokens=numbers("1", "4096", "131072"), batch=numbers("1", "8", "256"), dtype=DTYPES)
def test_kv(config_file, cfg, tokens, batch, dtype):
    d = answer(["kv", "--model", config_file(cfg), "--tokens", tokens, "--batch", batch, "--dtype", dtype, "--json"])
    if d is not None:
        _bytes_ok(d["kv_bytes_per_token"], d["kv_bytes_total"])
        assert d["kv_bytes_per_token"] > 0 and d["kv_bytes_total"] >= d["kv_bytes_per_token"] or d["sliding_window"]


@PROPERTY(60)
@given(cfg=mutated_config(), dtype=DTYPES)
def test_weights(config_file, cfg, dtype):
    d = answer(["weights", "--model", config_file(cfg), "--dtype", dtype, "--json"])
    if d is not None:
        _bytes_ok(d["bytes"], d["params"], d["metadata_bytes"], d["gb"])
        assert d["params"] > 0 and d["bytes"] > 0


@PROPERTY(100)
@given(cfg=mutated_config(), gpu=GPUS, gpus=st.sampled_from(["1", "1", "1", "2", "8", "0", "3", "-2", "x"]),
       context=numbers("512", "4096", "32768"), batch=numbers("1", "16", "1000"),
       slo=st.one_of(st.none(), numbers("5", "20", "0.5")), prompt=st.one_of(st.none(), st.none(), numbers("1", "512")),
       dtype=st.one_of(GOOD_DTYPES, DTYPES), kv=st.one_of(GOOD_DTYPES, DTYPES))
def test_capacity(config_file, cfg, gpu, gpus, context, batch, slo, prompt, dtype, kv):
    argv = ["capacity", "--model", config_file(cfg), "--gpu", gpu, "--gpus", gpus, "--context", context,
            "--dtype", dtype, "--kv-dtype", kv, "--json"]
    argv += ["--slo-ms", slo] if slo is not None else ["--batch", batch]
    argv += ["--prompt", prompt] if prompt is not None else []
    d = answer(argv)
    if d is None:
        return
    plans = d["ranking"] if "ranking" in d else [d]
    for p in plans:
        _bytes_ok(p["max_batch"], p["usd_per_hour"] if "usd_per_hour" in p else p["usd_per_hour_total"])
        if "fits" in p:  # one GPU: a plan
            _bytes_ok(p["weight_bytes_per_gpu"], p["kv_bytes_per_seq_per_gpu"])
            assert p["fits"] == (p["batch"] <= p["max_batch"])
            if p["fits"]:
                _bytes_ok(p["step_ms"], p["tokens_per_s"], p["usd_per_million_tokens"])
        elif p["status"] == "ok":  # a ranking row
            assert 1 <= p["batch"] <= p["max_batch"]
            _bytes_ok(p["step_ms"], p["tokens_per_s"], p["usd_per_million_tokens"])


def test_the_properties_see_answers_as_well_as_refusals(config_file):
    """The generators are not all refusals: the real presets answer, and so do plausible neighbours."""
    cfg = json.loads(preset_path("mistral-7b-v0.1").read_text())
    d = answer(["kv", "--model", config_file({**cfg, "num_key_value_heads": 4}), "--tokens", "10", "--json"])
    assert d["kv_bytes_per_token"] == 2 * 32 * 4 * 128 * 2
    assert answer(["kv", "--model", config_file({**cfg, "num_key_value_heads": -8}), "--json"]) is None
