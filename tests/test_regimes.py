"""No value a measurement can take stops a notebook: every notebook runs to its end in replay mode on each
regime of tests/regimes.py — the two committed CPU records, and synthetic results below every floor, at
it, far above it, zero, one sample, and one result below its floor beside another above its own.

The notebooks run in a process per core (tests/regimes.py all), each paying the imports once; a test per notebook
reads its own rows."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


@pytest.fixture(scope="module")
def every_run():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WORKSHOP_PROFILE": os.environ.get("WORKSHOP_PROFILE", "tiny")}
    env.pop("WORKSHOP_REPLAY", None)
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "regimes.py"), "all"], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=1800)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return rows, out.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("number", NOTEBOOKS)
def test_every_regime_renders_every_cell(number, every_run):
    all_rows, stderr = every_run
    rows = [r for r in all_rows if r["notebook"] == number]
    assert rows, stderr
    failed = [f"{r['regime']}: {r['error']}" for r in rows if not r["ok"]]
    assert not failed, "\n\n".join(failed)
    import regimes
    assert [r["regime"] for r in rows] == list(regimes.REGIMES)
