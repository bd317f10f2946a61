"""A notebook never loses its later cells to one failed measurement: the measurement's fault is shown
where it happened (helpers.present.notebook.attempt), the cells that need its value say so, and every other cell
still runs. Checked on the real notebook in the marimo runtime with the measurement made to fail."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.present import notebook

ROOT = Path(__file__).resolve().parent.parent


def test_attempt_keeps_the_value_or_the_one_line_fault():
    ok = notebook.attempt("parsing", int, "42")
    assert ok.ok and ok.value == 42 and ok.error is None

    def broken():
        raise RuntimeError("gloo: connection refused\n  on 127.0.0.1:29500")

    bad = notebook.attempt("The two-process forward", broken)
    assert not bad.ok and bad.value is None
    assert bad.error == "RuntimeError: gloo: connection refused on 127.0.0.1:29500"   # one line
    assert "Traceback" in bad.detail and "broken" in bad.detail
    assert "The two-process forward failed here" in bad.note().text
    assert "needs The two-process forward, which failed above" in bad.skipped("The table").text
    with pytest.raises(KeyboardInterrupt):       # stopping a run is not a measurement's fault
        notebook.attempt("x", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))


RUN_WITH_FAULT = """
import json, runpy, sys
import helpers.parallel.tp_demo as tp_demo
def refuse(**kw):
    raise RuntimeError("gloo: connection refused (injected by the test)")
tp_demo.run_tp = refuse
app = runpy.run_path(sys.argv[1])["app"]
_, defs = app.run()
print("DEFS=" + json.dumps({"error": defs["tp_attempt"].error, "later": sorted(k for k in ("disagg_rows", "disagg_table") if k in defs)}))
"""


@pytest.mark.slow
def test_notebook_09_goes_on_when_its_two_process_forward_fails(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", WORKSHOP_PROFILE="tiny", MPLBACKEND="Agg", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", RUN_WITH_FAULT, str(ROOT / "notebooks" / "09_beyond_one_gpu.py")],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("DEFS="))
    got = json.loads(line[5:])
    assert got["error"] == "RuntimeError: gloo: connection refused (injected by the test)"
    assert got["later"] == ["disagg_rows", "disagg_table"]     # section 6, after the failed section 5, ran
