"""`python -m helpers ...` two ways. in_process runs helpers.__main__.main in this interpreter: the same exit status,
stdout and stderr as the real process, without its interpreter start and imports (3-4 s each on two cores).
python_m runs the real process: kept where the process itself is tested (one run per command family here, and
tests/test_cli_faults.py for closed stdout, /dev/full, an ASCII terminal, `| head`, a library's warning)."""
import contextlib
import io
import subprocess
import sys

from helpers.__main__ import main


def in_process(*args: str) -> subprocess.CompletedProcess:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["python", "-m", "helpers", *args], code, out.getvalue(), err.getvalue())


def python_m(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "helpers", *args], capture_output=True, text=True, timeout=120)
