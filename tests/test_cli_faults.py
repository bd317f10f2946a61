"""The real `python -m helpers` process under faults only a process shows: a closed stdout, /dev/full, an
ASCII-only terminal, a pipe cut short, a library that warns; dtype spellings; exit status 2 for bad input,
1 for the environment, one line on stderr and never a traceback."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import in_process

ROOT = Path(__file__).resolve().parent.parent
KV = ["kv", "--model", "mistral-7b-v0.1", "--batch", "2"]


def cli(args, **kw):
    env = dict(os.environ, HF_HUB_OFFLINE="1", **kw.pop("env", {}))
    kw.setdefault("stdout", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "helpers", *args], stderr=subprocess.PIPE, text=True, timeout=120,
                          cwd=ROOT, env=env, **kw)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_closed_stdout_is_an_environment_fault():
    r = subprocess.run(f"'{sys.executable}' -m helpers kv --model mistral-7b-v0.1 >&-", shell=True, cwd=ROOT,
                       capture_output=False, stderr=subprocess.PIPE, text=True, timeout=120,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert r.returncode == 1
    assert one_line(r.stderr) == "error: stdout is closed: nowhere to print the answer"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_full_disk_is_an_environment_fault():
    with open("/dev/full", "w") as full:
        r = cli(KV, stdout=full)
    assert r.returncode == 1
    assert one_line(r.stderr) == "error: cannot write the answer to stdout: No space left on device"


def test_ascii_only_terminal_gets_ascii():
    r = cli(KV, env={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0 and r.stderr == ""
    assert "1,073,741,824 B = 1 GiB" in r.stdout and "2 x layers x kv_heads" in r.stdout
    r.stdout.encode("ascii")


def test_output_cut_short_by_head_is_not_an_error():
    r = subprocess.run(f"'{sys.executable}' -m helpers capacity --model mistral-7b-v0.1 --gpu all --context 4096 "
                       "--batch 1 | head -c 10", shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert r.returncode == 0 and r.stderr == "" and len(r.stdout) == 10


@pytest.mark.parametrize("spelling", ["bf16", "BF16", "bfloat16", "torch.bfloat16", " Bfloat16 "])
def test_dtype_spellings_the_library_accepts(spelling):
    for args in (["kv", "--model", "mistral-7b-v0.1", "--dtype", spelling],
                 ["weights", "--model", "mistral-7b-v0.1", "--dtype", spelling],
                 ["capacity", "--model", "mistral-7b-v0.1", "--gpu", "H100 SXM", "--context", "4096", "--batch", "1",
                  "--dtype", spelling, "--kv-dtype", spelling]):
        r = in_process(*args, "--json")
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)
        assert d.get("dtype", d.get("weight_dtype")) == "bf16"
    r = cli(["capacity", "--model", "mistral-7b-v0.1", "--gpu", "L4", "--context", "512", "--batch", "1",
             "--dtype", "FP8", "--kv-dtype", "float8", "--json"]) if spelling == "BF16" else None
    if r is not None:  # the real process too, once
        assert r.returncode == 0 and json.loads(r.stdout)["kv_dtype"] == "fp8"


@pytest.mark.parametrize("args,needle", [
    (["kv", "--model", "mistral-7b-v0.1", "--dtype", "fp6"], "unknown dtype 'fp6'; allowed: fp32, bf16"),
    (["kv", "--model", "mistral-7b-v0.1", "--tokens", "1" + "0" * 400], "must be a positive whole number from 1 to"),
    (["kv", "--model", "mistral-7b-v0.1", "--tokens", "2000000000"], "from 1 to 1,000,000,000, got '2000000000'"),
    (["capacity", "--model", "mistral-7b-v0.1", "--gpu", "all", "--context", "4096", "--slo-ms", "nan"],
     "must be a positive finite number, at most 1,000,000,000, got 'nan'"),
    (["capacity", "--model", "mistral-7b-v0.1", "--gpu", "all", "--context", "40000", "--batch", "1"],
     "exceeds mistral-7b-v0.1's maximum of 32,768"),
    (["kv", "--model", "/dev/zero"], "not a regular file"),
    (["kv", "--model", "a" * 5000], "cannot use 'aaaa"),
    (["kv", "--model", "~nosuchuser-workshop/config.json"], "as a model path"),
    (["kv", "--model", "mistral-7b-v0.1", "--dtype", "\udcff"], "unknown dtype"),
])
def test_bad_input_is_exit_2_and_one_line(args, needle):
    r = in_process(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert needle in one_line(r.stderr)


def test_a_library_warning_does_not_come_before_the_error(tmp_path):
    """transformers warns about an unknown activation before it fails: the user sees the error line only."""
    cfg = json.loads((ROOT / "helpers/presets/mistral-7b-v0.1.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "hidden_act": "nope", "rope_theta": "x"}))
    r = cli(["weights", "--model", str(tmp_path / "config.json")])
    assert r.returncode == 2
    assert one_line(r.stderr).startswith("error: unsupported config: transformers cannot build")
