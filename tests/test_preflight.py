"""Preflight predicts what the notebooks do: for a bad WORKSHOP_PROFILE and a bad WORKSHOP_DEVICE its
verdict is checked against real notebook runs (marimo's script mode); its weights row says what was
checked; the workshop report's error column carries no terminal colour codes."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import preflight

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def _bad_device() -> str:
    import torch

    return "tpu" if torch.cuda.is_available() else "cuda"   # cuda is refused only where there is none


def run_notebook(name: str, env: dict) -> subprocess.CompletedProcess:
    full = dict(os.environ, HF_HUB_OFFLINE="1", MPLBACKEND="Agg", PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, str(ROOT / "notebooks" / name)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=full)


def verdicts(monkeypatch, env: dict) -> tuple[dict, preflight.ModelCheck, dict]:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    info = preflight.summary()
    check = preflight.check_model()
    rows = {r["notebook"][:2]: r for r in preflight.go_no_go(check.ok, info["versions"], info["device"]["kind"])}
    return info, check, rows


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["profile", "device"])
def test_verdict_matches_a_real_notebook_run(monkeypatch, setting):
    env = {"WORKSHOP_PROFILE": "garbage"} if setting == "profile" else {"WORKSHOP_PROFILE": "tiny",
                                                                          "WORKSHOP_DEVICE": _bad_device()}
    info, check, rows = verdicts(monkeypatch, env)
    assert not check.ok and "Fix:" in check.message
    assert info["problems"] == [check.message]            # the same words in the table and in the notebooks
    assert rows["01"]["verdict"] == "no-go" and rows["04"]["verdict"] == "go"

    r = run_notebook("01_feel_the_pain.py", env)           # predicted no-go: it stops, with that message
    assert r.returncode != 0
    assert check.message in r.stderr.strip().splitlines()[-1]
    if setting == "profile":                                # predicted go: it runs to the end, with a note
        r = run_notebook("04_capacity_planner.py", env)
        assert r.returncode == 0, r.stderr[-2000:]


def test_preflight_itself_always_answers(monkeypatch):
    info, check, rows = verdicts(monkeypatch, {"WORKSHOP_PROFILE": "mistral-70b", "WORKSHOP_DEVICE": "tpu"})
    assert info["profile"] == "none"
    assert any("WORKSHOP_DEVICE" in p and "Fix:" in p for p in info["problems"])
    assert any("allowed: auto, tiny" in p and "Fix:" in p for p in info["problems"])
    assert rows["00"]["verdict"] == "go"


def test_notebooks_that_never_load_the_profile_are_not_stopped_by_it():
    """A notebook whose source never calls load() runs whatever the profile: preflight must not say no-go.
    The engine benchmark (08) loads nothing itself but serves the profile's model from a server process
    (servebench, started by helpers.benchmark.records, resolves the profile), so a model that does not load
    stops it too."""
    rows = {r["notebook"]: r for r in preflight.go_no_go(False, preflight.library_versions(), "cpu")}
    for name, row in rows.items():
        source = (ROOT / "notebooks" / name).read_text()
        serves_the_profile = "helpers.benchmark import" in source
        if "load()" not in source and "check_model()" not in source and not serves_the_profile:
            assert row["verdict"] == "go", (name, row)
        elif serves_the_profile:
            assert row["verdict"] == "no-go" and "does not load" in row["why"], (name, row)


def test_weights_row_says_what_was_checked(monkeypatch):
    from helpers.measure.models import weights_status

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("WORKSHOP_MODEL_ID", "workshop-tests/not-a-model")
    msg = weights_status(probe_hub=False).message
    assert "not in the local Hugging Face cache" in msg and "the Hub was not asked (only the local cache" in msg
    assert "HF_HUB_OFFLINE=1" not in msg
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "switched off (HF_HUB_OFFLINE=1)" in weights_status(probe_hub=False).message


def test_report_error_column_has_no_colour_codes(tmp_path):
    """A real failing notebook through the report's runner: the error is plain text."""
    import nbformat

    import notebooks

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise ValueError('boom')")])
    path = tmp_path / "fail.ipynb"
    nbformat.write(nb, path)
    ok, _secs, _nb, err = notebooks._execute(path, 120)
    assert not ok and err == "ValueError: boom"
    assert notebooks.strip_ansi("\x1b[0;31mValueError\x1b[0m: boom\x1b[?25h") == "ValueError: boom"


def test_machine_rows_on_this_machine_a_gpu_host_and_an_unknown_memory(monkeypatch):
    """Notebook 00's machine table: every value a summary can hold, memory in bytes, GiB and GB, "–" where unknown."""
    info, _, _ = verdicts(monkeypatch, {"WORKSHOP_PROFILE": "tiny"})
    rows = {r["what"]: r["this machine"] for r in preflight.machine_rows(info)}
    assert rows["device"] == f"{info['device']['kind']}: {info['device']['name']}" and rows["profile"] == "tiny"
    assert rows["tiny-trained: training here, once"] == "–"
    gpu = {**info, "device": {**info["device"], "kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "cores": 132,
                              "capability": "9.0", "total_memory": int(79.11 * 2**30), "free_memory": None},
           "profile": "mistral-7b"}
    rows = {r["what"]: r["this machine"] for r in preflight.machine_rows(gpu, {"seconds": 71.4, "threads": 2})}
    assert rows["memory (total)"] == "84,943,715,696 B = 79.11 GiB = 84.94 GB" and rows["memory (free now)"] == "–"
    assert rows["CUDA capability"] == "9.0" and rows["tiny-trained: training here, once"] == "71 s on 2 threads"
    bare = {**info, "device": {"kind": "cpu", "name": "?", "total_memory": 0, "free_memory": 0, "cores": None,
                               "capability": None}}
    rows = {r["what"]: r["this machine"] for r in preflight.machine_rows(bare)}
    assert rows["memory (total)"] == rows["CPU threads / CUDA SMs"] == rows["CUDA capability"] == "–"


def test_go_no_go_rows_beside_a_cuda_gpu():
    """Here and on a CUDA GPU, the same rules: a model that does not load stops the model notebooks here only."""
    versions = preflight.library_versions()
    rows = {r["notebook"][:2]: r for r in preflight.go_no_go_rows(False, versions, "cpu")}
    assert rows["01"]["here"] == "no-go" and rows["01"]["on a CUDA GPU (computed)"] == "go"
    assert rows["04"]["here"] == "go" and rows["00"]["here"] == "go"
    assert len(rows) == len(preflight.notebooks())
    same = preflight.go_no_go_rows(True, versions, "cuda")
    assert all(r["here"] == r["on a CUDA GPU (computed)"] for r in same)


def test_training_time_reads_the_log_or_says_none(monkeypatch, tmp_path):
    from helpers.measure import training

    monkeypatch.setattr(training, "trained_folder", lambda: tmp_path)
    assert preflight.training_time() is None
    (tmp_path / "training.json").write_text('{"train_wall_s": 70.6, "torch_threads": 2}')
    assert preflight.training_time() == {"seconds": 70.6, "threads": 2}

    def refused():
        raise ValueError("WORKSHOP_CACHE refused")

    monkeypatch.setattr(training, "trained_folder", refused)
    assert preflight.training_time() is None


def test_profile_refusal_is_what_the_preflight_lists(monkeypatch):
    from helpers.measure.models import resolve_profile

    refused = preflight.profile_refusal("mistral-70b")
    assert refused.startswith("WORKSHOP_PROFILE='mistral-70b' is not allowed; allowed: auto, tiny") and "Fix:" in refused
    monkeypatch.setenv("WORKSHOP_PROFILE", "mistral-70b")
    assert preflight.summary()["problems"] == [refused]                      # the exercise's command, word for word
    with pytest.raises(ValueError) as err:
        resolve_profile()
    assert str(err.value) == refused
    monkeypatch.setenv("WORKSHOP_PROFILE", "tiny")
    assert preflight.profile_refusal("tiny") is None and preflight.profile_refusal("auto") is None
    assert preflight.summary()["profile"] == "tiny"                           # the environment is left as it was


# ----------------------------------------------------------------------------- the environment first (issue 33)

def test_a_refused_variable_is_preflights_first_line_in_the_words_of_its_reader(monkeypatch):
    """WORKSHOP_CACHE=/proc/nope was a FileNotFoundError deep in the model check; now the line the reader
    (local_models.cache_dir) raises is the first problem and the first line notebook 00 shows."""
    from helpers import env
    from helpers.measure import local_models

    monkeypatch.setenv("WORKSHOP_CACHE", "/proc/nope")
    with pytest.raises(env.EnvError) as err:
        local_models.cache_dir()
    info = preflight.summary()
    assert info["problems"] == [str(err.value)]
    assert preflight.notes(info)[0] == f"⛔ **Setting refused:** {err.value}"
    check = preflight.check_model()                 # the model check says the same, not a traceback's last line
    assert not check.ok and check.message == str(err.value)


@pytest.mark.parametrize("name, raw, needle", [
    ("WORKSHOP_OVERHEAD_PCT", "-5", "WORKSHOP_OVERHEAD_PCT='-5' is not allowed; allowed: a whole number from 0 to 30 "
                                    "in steps of 1. Fix: set WORKSHOP_OVERHEAD_PCT to an allowed value, or unset it for "
                                    "the default (notebook 02)"),
    ("WORKSHOP_SPEC_ALPHA", "1e30", "WORKSHOP_SPEC_ALPHA='1e30' is not allowed; allowed: a number from 0.1 to 0.95"),
    ("WORKSHOP_MODEL_ID", "a b", "WORKSHOP_MODEL_ID='a b' is not allowed; allowed: a Hugging Face Hub id"),
    ("WORKSHOP_COMPILE", "maybe", "WORKSHOP_COMPILE='maybe' is not allowed"),
    ("WORKSHOP_CELL_TIMEOUT", "0", "WORKSHOP_CELL_TIMEOUT='0' is not allowed"),
    ("WORKSHOP_PROFLE", "tiny", "WORKSHOP_PROFLE is set but the workshop reads no such variable; did you mean "
                                "WORKSHOP_PROFILE?"),
])
def test_every_kind_of_bad_variable_comes_first(monkeypatch, name, raw, needle):
    monkeypatch.setenv(name, raw)
    info = preflight.summary()
    assert len(info["problems"]) == 1 and info["problems"][0].startswith(needle), info["problems"]
    assert preflight.notes(info)[0].startswith("⛔ **Setting refused:** " + needle)
    assert info["profile"] == "tiny"                # a control or a typo does not stop the profile


def test_without_the_notebooks_beside_it_no_control_is_called_unread(monkeypatch, tmp_path):
    """helpers installed from the repository without its notebooks (Colab's pip install): the controls'
    variables cannot be known, so a set one is not reported as read by nothing."""
    monkeypatch.setenv("WORKSHOP_OVERHEAD_PCT", "31")
    assert preflight.setting_problems(tmp_path) == []
    assert preflight.setting_problems() == ["WORKSHOP_OVERHEAD_PCT='31' is not allowed; allowed: a whole number from 0 "
                                            "to 30 in steps of 1. Fix: set WORKSHOP_OVERHEAD_PCT to an allowed value, or "
                                            "unset it for the default (notebook 02)"]


def test_preflight_finds_every_control_and_checks_all_but_those_computed_from_data():
    found = {c.name: c for c in preflight.controls()}
    assert len(found) == 27          # notebook 10's WORKSHOP_SPARSE_KEEP retired with the sparse-attention toy
    assert {n for n, c in found.items() if c.allowed is None and None in (c.lo, c.hi)} == {"WORKSHOP_QUANT_MODEL", "WORKSHOP_FLASH_GPU",
                                                                "WORKSHOP_USERS_CONTEXT"}   # 01: from the profile's sizes
    assert found["WORKSHOP_OVERHEAD_PCT"].allowed == range(0, 31)
    assert found["WORKSHOP_MEMORY_GPU"].default == "H100 SXM" and "H100 SXM" in found["WORKSHOP_MEMORY_GPU"].allowed
    assert (found["WORKSHOP_SPEC_ALPHA"].lo, found["WORKSHOP_SPEC_ALPHA"].hi) == (0.1, 0.95)


@pytest.mark.slow
def test_notebook_00_runs_to_the_end_with_a_refused_setting():
    r = run_notebook("00_preflight.py", {"WORKSHOP_PROFILE": "tiny", "WORKSHOP_CACHE": "/proc/nope"})
    assert r.returncode == 0, r.stderr[-2000:]
