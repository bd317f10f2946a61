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


def _notebooks_in_process(monkeypatch, capsys, *args, **environ):
    """scripts/notebooks.py's main() in this interpreter (its environment read when it runs, not at start): the
    same exit status, stdout and stderr as _notebooks without 1.5 s of interpreter start."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import notebooks

    monkeypatch.delenv("WORKSHOP_CELL_TIMEOUT", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["notebooks.py", *args])
    monkeypatch.chdir(ROOT)
    try:
        code = notebooks.main()
    except SystemExit as exc:   # --help
        code = exc.code or 0
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


@pytest.mark.parametrize("raw", ["", "abc", "inf", "0", "-5", "1.5"])
def test_cell_timeout_never_breaks_help_and_is_refused_in_one_line(monkeypatch, capsys, raw):
    def script(*args):
        return _notebooks_in_process(monkeypatch, capsys, *args, WORKSHOP_CELL_TIMEOUT=raw)

    r = script("run", "--help")     # int('') used to fail before argparse ran
    assert r.returncode == 0 and "--timeout" in r.stdout, r.stderr
    if raw:
        r = script("run", "00")       # refused before any notebook runs
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


# ----------------------------------------------------------------------------- every variable, its range (issue 33)

def _notebook_calls():
    """(notebook, the mo.ui control call, the env_default call giving its value) of every control read from
    the environment, from the notebooks' source."""
    import ast

    def resolved(value, names):
        """The expression a control's value= stands for: a name or a dict entry (`defaults["block"]`) assigned
        in the same cell is followed back to what was assigned (a form's controls keep their defaults apart)."""
        if isinstance(value, ast.Name) and value.id in names:
            return names[value.id]
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and \
                isinstance(names.get(value.value.id), ast.Dict) and isinstance(value.slice, ast.Constant):
            table = names[value.value.id]
            return next((v for k, v in zip(table.keys, table.values)
                         if isinstance(k, ast.Constant) and k.value == value.slice.value), value)
        return value

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        for cell in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cell, ast.FunctionDef):
                continue
            names = {t.id: node.value for node in ast.walk(cell) if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name)}
            for call in ast.walk(cell):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                        isinstance(call.func.value, ast.Attribute) and call.func.value.attr == "ui":
                    value = next((k.value for k in call.keywords if k.arg == "value"), None)
                    value = resolved(value, names) if value is not None else None
                    inner = next((n for n in ast.walk(value) if isinstance(n, ast.Call)
                                  and getattr(n.func, "attr", None) == "env_default"), None) if value else None
                    if inner is not None:
                        yield path.name[:2], call, inner


def test_every_notebook_control_reads_its_variable_within_the_controls_own_range():
    """WORKSHOP_SPEC_ALPHA had no range (1e30 was the slider's start); each range is the control's own:
    a slider's steps or start/stop, a dropdown's options, a number box's start and stop."""
    import ast

    found = list(_notebook_calls())
    assert len(found) == 27          # notebook 10's sparse-attention keys control retired with its toy (issue 46)
    for nb, ui, call in found:
        kw = {k.arg: k.value for k in ui.keywords}
        own = {k.arg: k.value for k in call.keywords}
        allowed = call.args[2] if len(call.args) > 2 else None
        where = f"notebook {nb}: {ast.unparse(call)}"
        if "steps" in kw:                                       # a slider over listed steps
            assert ast.dump(allowed) == ast.dump(kw["steps"]) or \
                list(ast.literal_eval(allowed)) == list(ast.literal_eval(kw["steps"])), where
        elif "options" in kw:                                   # a dropdown: its options (as text)
            opts = kw["options"]
            if isinstance(opts, ast.ListComp):                  # [str(b) for b in X]: X itself
                assert ast.dump(allowed) == ast.dump(opts.generators[0].iter), where
            elif isinstance(opts, ast.List) and isinstance(allowed, (ast.Tuple, ast.List)):
                assert [str(x) for x in ast.literal_eval(allowed)] == ast.literal_eval(opts), where
            else:
                assert ast.dump(allowed) == ast.dump(opts), where
        else:                                                   # start, stop (and step)
            start, stop = ast.literal_eval(kw["start"]), ast.literal_eval(kw["stop"])
            step = ast.literal_eval(kw.get("step", ast.Constant(1)))
            if allowed is not None:
                assert list(range(start, stop + 1, step)) == list(eval(ast.unparse(allowed))), where  # noqa: S307
            else:
                assert (ast.literal_eval(own["lo"]), ast.literal_eval(own["hi"])) == (start, stop), where


@pytest.mark.parametrize("name, raw, allowed", [
    ("WORKSHOP_OVERHEAD_PCT", "-5", "a whole number from 0 to 30 in steps of 1"),
    ("WORKSHOP_MEMORY_GPU", "H100", "T4, RTX 4090, L40S, A100 40GB, A100 80GB, H100 SXM, H200"),
    ("WORKSHOP_CONTEXT", "-1", "512, 1024, 2048, 4096, 8192, 16384, 32768"),
    ("WORKSHOP_CONTEXT", "1e30", "512, 1024, 2048, 4096, 8192, 16384, 32768"),
    ("WORKSHOP_SPEC_ALPHA", "1e30", "a number from 0.1 to 0.95"),
    ("WORKSHOP_SPEC_ALPHA", "-1", "a number from 0.1 to 0.95"),
    ("WORKSHOP_SPEC_ALPHA", "nan", "a number from 0.1 to 0.95"),
    ("WORKSHOP_ROOF_BATCH", "0", "a whole number from 1 to 4,096 in steps of 1"),
    ("WORKSHOP_ROOF_GPU", "H100", "L4, A100 80GB, H100 SXM, H200, B200"),
])
def test_each_controls_variable_is_refused_outside_its_range(monkeypatch, name, raw, allowed):
    from helpers import preflight

    control = next(c for c in preflight.controls() if c.name == name)
    monkeypatch.setenv(name, raw)
    with pytest.raises(env.EnvError, match=f"^{name}={raw!r} is not allowed; allowed: {allowed}. Fix: "):
        env.control(name, control.default, control.allowed, lo=control.lo, hi=control.hi)
    monkeypatch.setenv(name, str(control.default))
    assert env.control(name, control.default, control.allowed, lo=control.lo, hi=control.hi) == control.default


def test_a_control_without_its_range_is_a_programming_error():
    with pytest.raises(TypeError, match="needs the control's range"):
        notebook.env_default("WORKSHOP_SPEC_ALPHA", 0.6)
    with pytest.raises(TypeError, match="needs the control's range"):
        notebook.env_default("WORKSHOP_SPEC_ALPHA", 0.6, lo=0.1)


def test_every_variable_the_workshop_reads_is_listed_with_its_reader():
    """The names in helpers.env.VARIABLES and the notebooks' controls are every WORKSHOP_* name the code and
    the documents name (a new one without a checked reader fails here; the deck's notes named two variables,
    WORKSHOP_PLAN_CONTEXT and WORKSHOP_PLAN_SLO_MS, that nothing read)."""
    import re

    from helpers import preflight

    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    named = set()
    for name in files:
        path = ROOT / name
        if path.suffix in (".py", ".md", ".sh", ".toml", "") and not name.startswith(("tests/", "notebooks/colab/")) \
                and path.is_file():
            named |= set(re.findall(r"WORKSHOP_[A-Z_]+[A-Z]", path.read_text(errors="replace")))
    controls = {c.name for c in preflight.controls()}
    assert not controls & set(env.VARIABLES)
    assert named == set(env.VARIABLES) | controls, named ^ (set(env.VARIABLES) | controls)


@pytest.mark.parametrize("name, raw, needle, read", [
    ("WORKSHOP_CACHE", "/proc/nope", "WORKSHOP_CACHE='/proc/nope' is not a folder this process can write "
                                     "(No such file or directory); allowed: a writable folder", "cache"),
    ("WORKSHOP_CACHE", "/dev/null", "WORKSHOP_CACHE='/dev/null' is not a folder this process can write", "cache"),
    ("WORKSHOP_MODEL_ID", "a b", "WORKSHOP_MODEL_ID='a b' is not allowed; allowed: a Hugging Face Hub id", "model"),
    ("WORKSHOP_MODEL_ID", "../../etc", "WORKSHOP_MODEL_ID='../../etc' is not allowed", "model"),
    ("WORKSHOP_MODEL_ID", "a/b/c", "WORKSHOP_MODEL_ID='a/b/c' is not allowed", "model"),
    ("WORKSHOP_DTYPE", "int4", "WORKSHOP_DTYPE='int4' is not allowed; allowed: fp32, bf16, fp16", "dtype"),
    ("WORKSHOP_REPO_URL", "javascript:alert(1)", "WORKSHOP_REPO_URL='javascript:alert(1)' is not allowed; allowed: "
                                                 "an http:// or https:// address", "url"),
    ("WORKSHOP_REPO_URL", "https://x.org/a b", "WORKSHOP_REPO_URL='https://x.org/a b' is not allowed", "url"),
    ("WORKSHOP_REPO_URL", "https://", "WORKSHOP_REPO_URL='https://' is not allowed", "url"),
    ("WORKSHOP_CELL_TIMEOUT", "1e30", "WORKSHOP_CELL_TIMEOUT='1e30' is not allowed; allowed: a whole number from 1 "
                                      "to 86,400", "timeout"),
])
def test_each_variable_is_refused_in_one_line_where_it_is_read(monkeypatch, name, raw, needle, read):
    """WORKSHOP_CACHE=/proc/nope was a traceback (mkdir, much later); a model id with a space went to the Hub."""
    from helpers.measure import local_models, models
    from helpers.present import glossary

    readers = {"cache": local_models.cache_dir, "model": models.hub_model_id, "dtype": models.env_dtype,
               "url": lambda: glossary.url("ttft"), "timeout": env.cell_timeout}
    monkeypatch.setenv(name, raw)
    with pytest.raises(env.EnvError) as err:
        readers[read]()
    assert str(err.value).startswith(needle) and "\n" not in str(err.value), str(err.value)


def test_good_values_pass_where_they_are_read(monkeypatch, tmp_path):
    from helpers.measure import local_models, models
    from helpers.present import glossary

    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path / "new" / "cache"))
    assert local_models.cache_dir() == tmp_path / "new" / "cache" and (tmp_path / "new" / "cache").is_dir()
    monkeypatch.setenv("WORKSHOP_MODEL_ID", "gpt2")
    assert models.hub_model_id() == "gpt2"
    monkeypatch.delenv("WORKSHOP_MODEL_ID")
    assert models.hub_model_id() == models.DEFAULT_MODEL_ID
    monkeypatch.setenv("WORKSHOP_DTYPE", "bfloat16")
    assert models.env_dtype() == "bf16"
    monkeypatch.setenv("WORKSHOP_REPO_URL", "https://github.com/acme/llm.git")
    assert glossary.url("ttft") == "https://github.com/acme/llm/blob/main/workshop/glossary.md#ttft"


@pytest.mark.parametrize("where", ["/proc", "/proc/replay", "README.md"])
def test_a_recording_folder_that_cannot_take_a_file_is_one_line_and_preflight_says_it(monkeypatch, where):
    """/proc passes os.access for root, yet nothing can be made in it: the folder is tried with a real file."""
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("WORKSHOP_REPLAY_RECORD", where)
    with pytest.raises(env.EnvError, match=r"^WORKSHOP_REPLAY_RECORD='[^']+' is not a folder this process can write"):
        env.folder("WORKSHOP_REPLAY_RECORD")
    from helpers import preflight

    assert any(p.startswith("WORKSHOP_REPLAY_RECORD=") for p in preflight.setting_problems())


def test_a_writable_folder_is_made_and_left_clean(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKSHOP_REPLAY_RECORD", str(tmp_path / "rec"))
    assert env.folder("WORKSHOP_REPLAY_RECORD") == tmp_path / "rec"
    assert list((tmp_path / "rec").iterdir()) == []          # the write check leaves nothing behind
