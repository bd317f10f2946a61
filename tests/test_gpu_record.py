"""scripts/gpu_record.sh refuses what it cannot run before it spends a lent GPU's minutes: an unknown
section, a missing bundle, a Python without the packages (it names them and the fix). The run itself is
`make gpu-dry-run` (scripts/gpu_dry_run.sh, in CI): the bare host imitated, the record end to end."""
import os
import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def record(*args, env=None):
    return subprocess.run(["bash", "scripts/gpu_record.sh", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **(env or {})))


def test_an_unknown_section_or_argument_is_bad_input():
    r = record("--only", "first,warmup")
    assert r.returncode == 2
    assert r.stderr == "gpu-record: unknown section warmup; allowed: first, notebooks, bench, engines\n"
    r = record("--fast")
    assert r.returncode == 2 and "unknown argument --fast" in r.stderr


def test_a_missing_bundle_is_named():
    r = record("--bundle", "build/no-such-bundle.tar.xz")
    assert r.returncode == 1
    assert r.stderr == "gpu-record: no bundle at build/no-such-bundle.tar.xz (make gpu-bundle builds it)\n"


def test_a_python_without_the_packages_is_told_what_is_missing_and_the_fix(tmp_path):
    venv.create(tmp_path / "bare", with_pip=False)                 # a Python with nothing installed
    r = record(env={"PY": str(tmp_path / "bare" / "bin" / "python")})
    assert r.returncode == 1
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"gpu-record: this Python ({tmp_path / 'bare' / 'bin' / 'python'}) cannot run the record: "
                           "missing: torch, transformers, nbclient, nbconvert, ipykernel, marimo, bitsandbytes")
    assert line.endswith("(make gpu-bundle, then --bundle build/gpu-bundle-cp312.tar.xz)")


def test_the_dry_run_is_in_ci_and_the_bundle_is_never_committed():
    assert "make gpu-dry-run" in (ROOT / ".ci" / "run").read_text()
    assert "build/" in (ROOT / ".gitignore").read_text().splitlines()
