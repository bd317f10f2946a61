"""python -m helpers capacity / gpus: an answer for every catalogued GPU, JSON with the agreed keys,
and one-line errors with exit status 2."""
import json

import pytest

from cli_run import in_process as cli, python_m
from helpers.formulas import gpus

KEYS = {"fits", "max_batch", "step_ms", "tokens_per_s", "usd_per_million_tokens"}


def run_main(*args):
    r = cli(*args)
    return r.returncode, r.stdout, r.stderr


def test_capacity_json_through_python_dash_m():  # the real process, once; the rest in-process
    r = python_m("capacity", "--model", "mistral-7b-v0.1", "--gpu", "H100 SXM", "--context", "4096", "--batch", "1", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert KEYS <= set(d)
    assert d["fits"] is True and d["max_batch"] == 115   # 92 % of the 79.11 GiB an H100 reports
    assert d["step_ms"] >= 14.48e9 / 3.35e12 * 1e3
    assert d["tokens_per_s"] == pytest.approx(1e3 / d["step_ms"])


@pytest.mark.parametrize("name", gpus.names())
def test_every_catalogued_gpu_answers(name):
    code, out, err = run_main("capacity", "--model", "mistral-7b-v0.1", "--gpu", name, "--dtype", "fp8",
                              "--context", "2048", "--batch", "4", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert KEYS <= set(d) and d["gpu"] == name
    if d["fits"]:
        assert d["step_ms"] > 0 and d["tokens_per_s"] > 0 and d["usd_per_million_tokens"] > 0
    else:
        assert d["reason"] and d["step_ms"] is None
    code, out, _ = run_main("capacity", "--model", "mistral-7b-v0.1", "--gpu", name, "--context", "4096",
                            "--slo-ms", "50")
    assert code == 0 and "slo_ms" in out and "meets_slo" in out


def test_slo_picks_the_largest_batch_within_it():
    code, out, _ = run_main("capacity", "--model", "mistral-7b-v0.1", "--gpu", "h100-sxm", "--context", "4096",
                            "--slo-ms", "10", "--json")
    d = json.loads(out)
    assert code == 0 and d["meets_slo"] is True and d["step_ms"] <= 10 and d["batch"] > 1
    code, out, _ = run_main("capacity", "--model", "mistral-7b-v0.1", "--gpu", "L4", "--context", "4096",
                            "--slo-ms", "10", "--json")
    d = json.loads(out)
    assert d["meets_slo"] is False and d["batch"] == 1 and d["step_ms"] > 10


def test_t4_answers_that_mistral_bf16_does_not_fit():
    code, out, _ = run_main("capacity", "--model", "mistral-7b-v0.1", "--gpu", "T4", "--context", "4096",
                            "--batch", "1", "--json")
    d = json.loads(out)
    assert code == 0 and d["fits"] is False and d["max_batch"] == 0 and "runtime overhead" in d["reason"]
    code, out, _ = run_main("capacity", "--model", "mistral-7b-v0.1", "--gpu", "T4", "--context", "4096",
                            "--batch", "1")
    assert code == 0 and any(line.split() == ["fits", "False"] for line in out.splitlines())


def test_rank_all_gpus():
    code, out, _ = run_main("capacity", "--model", "mistral-7b-v0.1", "--gpu", "all", "--context", "4096",
                            "--slo-ms", "10", "--json")
    d = json.loads(out)
    assert code == 0 and len(d["ranking"]) == len(gpus.names()) and d["ranking"][0]["rank"] == 1
    code, out, _ = run_main("capacity", "--model", "mistral-7b-v0.1", "--gpu", "all", "--context", "4096",
                            "--batch", "8")
    assert code == 0 and "$ per M output tokens" in out and "prices read" in out


def test_gpus_lists_the_catalog():
    r = cli("gpus", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert isinstance(rows, list) and [g["name"] for g in rows] == gpus.names()
    for g in rows:
        assert {"name", "memory_gb", "bandwidth_tbs", "bf16_tflops", "fp8_tflops", "usd_per_hour",
                "price_provider", "price_read", "price_source", "spec_source"} <= set(g)
    r = cli("gpus")
    assert r.returncode == 0 and "sources and notes: --json" in r.stdout
    h100 = next(line for line in r.stdout.splitlines() if line.strip().startswith("H100 SXM"))
    assert " 79.11 " in h100                                  # the memory CUDA reports, GiB
    mi300x = next(g for g in rows if g["name"] == "MI300X")   # none found: 192 GiB × 39.50 ÷ 40
    assert mi300x["memory_reported_gib"] is None and round(mi300x["usable_memory_bytes"] / 2**30, 2) == 189.6


@pytest.mark.parametrize("args,needle", [
    (["--gpu", "H800", "--context", "4096", "--batch", "1"], "unknown GPU 'H800'; choose one of: T4, L4"),
    (["--gpu", "T4", "--context", "65536", "--batch", "1"], "exceeds mistral-7b-v0.1's maximum of 32,768"),
    (["--gpu", "T4", "--context", "0", "--batch", "1"], "positive whole number"),
    (["--gpu", "T4", "--context", "4096", "--batch", "-3"], "positive whole number"),
    (["--gpu", "T4", "--context", "4096", "--slo-ms", "0"], "positive finite number"),
    (["--gpu", "T4", "--gpus", "0", "--context", "4096", "--batch", "1"], "positive whole number"),
    (["--gpu", "T4", "--context", "4096"], "one of the arguments --batch --slo-ms is required"),
    (["--gpu", "T4", "--context", "4096", "--batch", "1", "--slo-ms", "5"], "not allowed with"),
    (["--gpu", "H100 SXM", "--gpus", "3", "--context", "4096", "--batch", "1"], "divisible by 3"),
])
def test_bad_input_exits_2_with_one_line(args, needle):
    code, out, err = run_main("capacity", "--model", "mistral-7b-v0.1", *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err


def test_a_model_that_fits_no_gpu_exits_2():
    for gpu in ("H200", "all"):
        r = cli("capacity", "--model", "deepseek-v3", "--gpu", gpu, "--context", "4096", "--batch", "1")
        assert r.returncode == 2 and r.stdout == ""
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert "fits no catalogued GPU" in r.stderr and "--gpus 8" in r.stderr


def test_unknown_gpu_exits_2():
    r = cli("capacity", "--model", "mistral-7b-v0.1", "--gpu", "voodoo", "--context", "1024", "--batch", "1")
    assert r.returncode == 2 and "choose one of" in r.stderr and "Traceback" not in r.stderr
