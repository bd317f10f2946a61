"""helpers.env, the one reader of the workshop's environment variables, and the places that read through
it: a bad value is one line naming the variable, its value and what is allowed (issue 20's hostile user)."""
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import env
from helpers.measure import hardware
from helpers.present import notebook, recorded
from helpers.decoding import regimes

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", "1e400", "80.5", "eighty", "0x50"])
def test_notebook_controls_refuse_non_finite_and_fractional_values(monkeypatch, raw):
    # WORKSHOP_GPU_GB=inf raised OverflowError out of int(float('inf')); 80.5 was cut to 80 silently
    monkeypatch.setenv("WORKSHOP_GPU_GB", raw)
    with pytest.raises(ValueError, match=rf"^WORKSHOP_GPU_GB='{raw}' is not allowed; allowed: a whole number from 16 "
                                         "to 192 in steps of 8"):
        notebook.env_default("WORKSHOP_GPU_GB", 80, range(16, 193, 8))
    monkeypatch.setenv("WORKSHOP_CONTEXT", raw)
    with pytest.raises(ValueError, match="WORKSHOP_CONTEXT.*allowed: 512, 1024"):
        notebook.env_default("WORKSHOP_CONTEXT", 4096, [512, 1024, 2048, 4096])


def test_values_are_stripped(monkeypatch):
    monkeypatch.setenv("WORKSHOP_GPU_GB", " 144\n")
    assert notebook.env_default("WORKSHOP_GPU_GB", 80, range(16, 193, 8)) == 144
    monkeypatch.setenv("WORKSHOP_DEVICE", "  CPU ")
    assert hardware.pick_device() == "cpu"
    monkeypatch.setenv("WORKSHOP_MODEL_ID", " someone/model ")
    assert env.text("WORKSHOP_MODEL_ID") == "someone/model"
    monkeypatch.setenv("WORKSHOP_MODEL_ID", "   ")
    assert env.text("WORKSHOP_MODEL_ID", "default/id") == "default/id"      # blank means unset
    from helpers.measure import local_models, models

    monkeypatch.setenv("WORKSHOP_CACHE", " /tmp/somewhere ")
    assert local_models.cache_dir() == Path("/tmp/somewhere")
    monkeypatch.setenv("WORKSHOP_DTYPE", "fp64")
    with pytest.raises(ValueError, match="WORKSHOP_DTYPE='fp64' is not allowed; allowed: fp32, bf16, fp16"):
        models.load("tiny", device="cpu")


@pytest.mark.parametrize("raw, want", [("1", True), ("on", True), (" Yes ", True), ("TRUE", True),
                                       ("0", False), ("off", False), ("no", False), ("", False)])
def test_compile_flag_reads_every_spelling(monkeypatch, raw, want):
    monkeypatch.setenv("WORKSHOP_COMPILE", raw)
    assert regimes.compile_allowed("cpu") is want          # 'on' used to be silently false


@pytest.mark.parametrize("raw", ["maybe", "2", "enabled"])
def test_compile_flag_refuses_what_it_cannot_read(monkeypatch, raw):
    monkeypatch.setenv("WORKSHOP_COMPILE", raw)
    with pytest.raises(ValueError, match=f"WORKSHOP_COMPILE='{raw}' is not allowed; allowed: 1, true, yes, on"):
        regimes.compile_allowed("cpu")


def test_mps_is_refused_where_torch_has_none(monkeypatch):
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    monkeypatch.setenv("WORKSHOP_DEVICE", "mps")
    with pytest.raises(ValueError, match="WORKSHOP_DEVICE=mps but torch sees no Apple-silicon GPU"):
        hardware.pick_device()
    with pytest.raises(ValueError, match="Apple-silicon"):
        hardware.pick_device("mps")
    monkeypatch.setenv("WORKSHOP_DEVICE", "tpu")
    with pytest.raises(ValueError, match="WORKSHOP_DEVICE='tpu' is not allowed; allowed: auto, cuda, mps, cpu"):
        hardware.pick_device()


def test_an_unwritable_figures_folder_warns_and_the_notebook_goes_on(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(recorded.FIGURES_ENV, str(blocker / "figures"))    # under a file: cannot be made
    with pytest.warns(UserWarning, match="WORKSHOP_FIGURES_DIR=.*is not a folder this process can write"):
        assert recorded.note_figures("03_x", {"a": 1}) is None
    with pytest.raises(env.EnvError, match="WORKSHOP_FIGURES_DIR"):
        env.folder(recorded.FIGURES_ENV)


def _notebooks(*args, **environ):
    full = {k: v for k, v in __import__("os").environ.items() if k != "WORKSHOP_CELL_TIMEOUT"}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "notebooks.py"), *args], capture_output=True,
                          text=True, timeout=120, env={**full, **environ}, cwd=ROOT)


@pytest.mark.parametrize("raw", ["", "abc", "inf", "0", "-5", "1.5"])
def test_cell_timeout_never_breaks_help_and_is_refused_in_one_line(raw):
    r = _notebooks("run", "--help", WORKSHOP_CELL_TIMEOUT=raw)     # int('') used to fail before argparse ran
    assert r.returncode == 0 and "--timeout" in r.stdout, r.stderr
    if raw:
        r = _notebooks("run", "00", WORKSHOP_CELL_TIMEOUT=raw)       # refused before any notebook runs
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
        assert r.stderr.startswith(f"error: WORKSHOP_CELL_TIMEOUT={raw!r} is not allowed") and "run:" not in r.stdout


def test_notebooks_run_refuses_bad_settings_before_running(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for environ, args, needle in (({"WORKSHOP_FIGURES_DIR": str(blocker / "f")}, ["00"], "WORKSHOP_FIGURES_DIR="),
                                  ({}, ["77"], "no notebook numbered '77'"),
                                  ({"WORKSHOP_PROFILE": "bogus"}, ["00"], "WORKSHOP_PROFILE")):
        r = _notebooks("run", *args, **environ)
        assert r.returncode == 2 and needle in r.stderr and "run:" not in r.stdout, r.stderr
