"""A marimo notebook opened on its own — as Molab opens it from a link — runs with nothing but its PEP 723
header: a fresh virtual environment gets what the header lists, with the repository URL pointing at a
local clone standing in for the published repository, and the notebook runs outside any checkout."""
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import repository  # noqa: E402  (scripts/repository.py)
NOTEBOOK = ROOT / "notebooks" / "02_memory_equation.py"   # loads the tiny model: a real run, in seconds


def _header_deps(text: str) -> list[str]:
    m = re.match(r"# /// script\n((?:#.*\n)*?)# ///\n", text)
    assert m, "no PEP 723 header"
    body = "".join(line[2:] + "\n" if line.startswith("# ") else "\n" for line in m.group(1).splitlines())
    return tomllib.loads(body)["dependencies"]


def _stand_in_repository(dst: Path) -> str:
    """A git repository holding this working tree's package files, on the stated branch: the URL pip gets."""
    w = repository.where()
    subprocess.run(["git", "init", "-q", "-b", w.branch, str(dst)], check=True)
    for name in ("pyproject.toml", "requirements.txt", "README.md"):
        (dst / name).write_bytes((ROOT / name).read_bytes())
    subprocess.run(["cp", "-r", str(ROOT / "helpers"), str(dst / "helpers")], check=True)
    subprocess.run(["find", str(dst / "helpers"), "-name", "__pycache__", "-prune", "-exec", "rm", "-rf", "{}", "+"])
    git = ["git", "-C", str(dst), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "stand-in"], check=True)
    return f"file://{dst}"


@pytest.mark.slow
def test_a_notebook_runs_from_its_pep723_header_alone(tmp_path):
    import torch

    w = repository.where()
    deps = _header_deps(NOTEBOOK.read_text())
    assert w.pip_requirement() in deps
    url = _stand_in_repository(tmp_path / "repo")
    deps = [d.replace(f"git+{w.repo_url}@", f"git+{url}@") for d in deps]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # The header says "torch": keep this machine's build (the CPU wheel on its disk) rather than a multi-GB CUDA download.
    (tmp_path / "constraints.txt").write_text(f"torch=={torch.__version__}\n")
    uv = Path(sys.executable).with_name("uv")     # scripts/setup.sh installs it; Molab installs with uv too
    if uv.exists():
        # uv reads no pip configuration: the folders pip finds wheels in (this machine's torch) are passed on
        config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
        links = dict.fromkeys(" ".join(re.findall(r"find-links='([^']*)'", config)).split())
        install = [str(uv), "pip", "install", "-q", "--python", py, *(a for f in links for a in ("--find-links", f))]
    else:
        # a current pip (an old one rejects git+file:// direct URLs)
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-U", "pip"], check=True,
                       timeout=300)
        install = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    r = subprocess.run(install + ["-c", str(tmp_path / "constraints.txt")] + deps, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    (run_dir / NOTEBOOK.name).write_text(NOTEBOOK.read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", WORKSHOP_PROFILE="tiny", MPLBACKEND="Agg")
    r = subprocess.run([py, NOTEBOOK.name], cwd=run_dir, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    # helpers came from the stand-in repository, not from this checkout
    where = subprocess.run([py, "-c", "import helpers; print(helpers.__file__)"], cwd=run_dir, capture_output=True,
                           text=True, env=env).stdout
    assert str(venv) in where and str(ROOT) not in where
