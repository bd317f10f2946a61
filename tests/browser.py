"""What the browser tests share: Debian's headless Chromium driven by playwright (never `playwright
install`), a notebook served by `marimo run` on a free local port (always stopped), and waits that hold on
a loaded machine (scaled by the load per core, ended as soon as the page shows what they wait for).

Without Chromium or playwright a browser test is skipped with the reason, except under CI (the CI
environment variable set), where it fails.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def page_wait_s(base_s: float = 120.0) -> float:
    """How long a wait on the page may take: `base_s` on an idle machine, scaled by the load per core
    (a participant's laptop or a CI box running other work redraws marimo's cells several times slower;
    seen: 60 s was too short at a load of 6–10 on two cores), at most 10 minutes. Waits end as soon as
    the page shows what they wait for, so a long limit costs nothing when the machine is fast."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        load = 1.0
    return min(600.0, base_s * max(1.0, load))


def unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so the browser test must run: `make test` installs it)")
    pytest.skip(reason)


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    unavailable("Debian's chromium is not installed (apt-get install chromium; `make test` does it as root)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def marimo_run(notebook: Path, log: Path, wait_s: float, env: dict | None = None):
    """`marimo run NOTEBOOK` (a notebook, or a folder of them: open one with `?file=NAME`) on a free local port, no token, the tiny profile unless `env` says otherwise;
    yields its URL once it answers; always stopped at the end."""
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", WORKSHOP_PROFILE=os.environ.get("WORKSHOP_PROFILE", "tiny"),
               MPLBACKEND="Agg", PYTHONPATH=str(ROOT), **(env or {}))
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "marimo", "run", str(notebook), "--headless", "--host", "127.0.0.1",
             "--port", str(port), "--no-token"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            if proc.poll() is not None:
                pytest.fail(f"marimo run exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"marimo run did not answer on {url} within {wait_s:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextlib.contextmanager
def browser():
    """A headless Chromium (playwright's sync API), closed at the end."""
    path = chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the Python package playwright is not installed (it is in requirements.txt)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def page_text(pg, limit: int = 2000) -> str:
    """What the page shows now (its visible text, the end of it), for a failure message."""
    try:
        text = pg.locator("body").inner_text(timeout=10_000)
    except Exception as exc:  # noqa: BLE001 - a message about the page must not hide the failure
        return f"(the page could not be read: {exc})"
    text = " ".join(text.split())
    return text[-limit:]


def wait_shown(pg, text, wait_s: float, state: str = "visible"):
    """The first element showing `text` once it reaches `state`; fails with what the page showed."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    loc = pg.get_by_text(text).first
    try:
        loc.wait_for(state=state, timeout=wait_s * 1000)
    except PlaywrightTimeout:
        raise AssertionError(f"the page did not show {text!r} ({state}) within {wait_s:.0f} s; "
                             f"it showed: {page_text(pg)}") from None
    return loc


def wait_idle(pg, wait_s: float, quiet_s: float | None = None) -> None:
    """Until marimo has run every cell: its 'running' icon gone and the page's text unchanged for `quiet_s`
    (by default 2 s on an idle machine, scaled by the load per core as page_wait_s scales its waits)."""
    quiet_s = quiet_s if quiet_s is not None else page_wait_s(2.0)
    deadline = time.monotonic() + wait_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        running = pg.locator(".running-app-icon").count()
        now = pg.evaluate("() => document.body.innerText.length")
        if running or now != last:
            last, since = now, time.monotonic()
        elif now and time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.5)
    raise AssertionError(f"marimo did not finish within {wait_s:.0f} s; the page showed: {page_text(pg)}")
