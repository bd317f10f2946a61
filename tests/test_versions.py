"""helpers.versions: `import helpers` refuses a transformers that would ignore `cache=` (5.23 and older)
in one line, in a real process with an older transformers first on the path; the floors agree with
requirements.txt, scripts/setup.sh and the GPU bundle's recipe."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import versions

ROOT = Path(__file__).resolve().parent.parent


def test_the_range_is_read_from_release_numbers():
    assert versions.version_tuple("5.24.0") == (5, 24, 0)
    assert versions.version_tuple("2.13.0+cpu") == (2, 13, 0)
    assert versions.version_tuple("5.25.0.dev0") == (5, 25, 0)
    assert versions.problem("transformers", "5.24.0") is None
    assert versions.problem("transformers", "5.30.1") is None
    assert versions.problem("transformers", None) is None           # not installed: its import says so
    assert versions.problem("torch", "2.11.0+cu130") is None        # the GPU host's
    for old in ("5.23.0", "5.17.0", "4.57.6", "6.0.0"):
        assert versions.problem("transformers", old) is not None, old
    with pytest.raises(ValueError, match="not a version number"):
        versions.version_tuple("latest")


def test_the_message_names_what_was_found_what_is_needed_and_the_fix():
    line = versions.problem("transformers", "5.17.0")
    assert line == ('helpers needs transformers>=5.24,<6 (the model forward takes cache= from 5.24 on; older '
                    'releases ignore it), found transformers 5.17.0; fix: pip install -U "transformers>=5.24,<6", '
                    'then restart the kernel or process')
    assert "\n" not in line
    assert versions.problem("torch", "2.5.1").startswith("helpers needs torch>=2.6 (transformers 5.24 turns ")
    assert "fix: install torch 2.6 or newer" in versions.problem("torch", "2.5.1")


def test_what_is_installed_here_passes():
    versions.require()
    assert versions.problem("transformers", versions.installed("transformers")) is None


def _fake_transformers(folder: Path, version: str) -> Path:
    """An importable `transformers` distribution of another version: its package and its metadata."""
    pkg = folder / "transformers"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    info = folder / f"transformers-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: transformers\nVersion: {version}\n")
    return folder


def _python(args, fake: Path):
    env = dict(os.environ, PYTHONPATH=str(fake), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


def test_importing_helpers_under_transformers_5_17_stops_with_one_line(tmp_path):
    fake = _fake_transformers(tmp_path, "5.17.0")
    # the fake is what this process would import: the check reads the distribution first on the path
    r = _python(["-c", "import transformers, importlib.metadata as m; "
                       "print(transformers.__version__, m.version('transformers'))"], fake)
    assert r.stdout.split() == ["5.17.0", "5.17.0"], r.stderr
    r = _python(["-c", "import helpers"], fake)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last == "helpers.versions.LibraryVersionError: " + versions.problem("transformers", "5.17.0")
    # the command line: one line, `error: …`, exit status 1 (a fault of the environment), no traceback
    r = _python(["-m", "helpers", "kv", "--model", "mistral-7b-v0.1"], fake)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "error: " + versions.problem("transformers", "5.17.0") + "\n"
    # the same process with the floor's own version goes on
    r = _python(["-c", "import helpers; print('imported')"], _fake_transformers(tmp_path / "ok", "5.24.0"))
    assert r.returncode == 0 and r.stdout == "imported\n", r.stderr


def test_floors_agree_with_the_requirements_setup_and_the_gpu_bundle():
    reqs = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    named = [r for r in reqs if re.match(r"transformers\b", r)]
    assert named, "requirements.txt names transformers"
    for r in named:
        assert "transformers" + re.sub(r"^transformers(\[\w+\])?", "", r) == versions.requirement("transformers")
    assert not any(re.match(r"torch\b", r) for r in reqs)           # the host's torch is kept
    torch_pin = re.search(r"TORCH_VERSION:-([\d.]+)", (ROOT / "scripts" / "setup.sh").read_text()).group(1)
    assert versions.problem("torch", torch_pin) is None
    # the GPU host's transformers (5.17) is refused, so the bundle carries one inside the range
    bundle = (ROOT / "scripts" / "gpu_bundle.txt").read_text()
    carried = re.search(r"^transformers==([\d.]+)", bundle, re.M).group(1)
    assert versions.problem("transformers", carried) is None
    assert versions.problem("transformers", "5.17.0") is not None
