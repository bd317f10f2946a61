"""The learner's part, driven in a real browser under `marimo run` (as on Molab): a prediction typed into its
box is read back beside the result with the gap the rule gives, and a control changed on the page re-runs what
depends on it, the page then showing the numbers helpers compute for the new setting (notebook 09: the ring
all-reduce's time, and tensor parallelism's speed-up at the batch picked)."""
from __future__ import annotations

import re

import pytest

from browser import ROOT, browser, marimo_run, page_text, page_wait_s, wait_idle
from helpers.formulas.specs import get_spec
from helpers.parallel import collectives, links, plan as par
from helpers.present import learner

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NOTEBOOK = ROOT / "notebooks" / "09_beyond_one_gpu.py"


def _plain(markdown: str) -> str:
    return " ".join(markdown.replace("**", "").split())


def _shown_after(pg, text: str, wait_s: float) -> str:
    """The page's text once it shows `text` (marimo re-runs the cells that depend on a changed control)."""
    pg.get_by_text(re.compile(re.escape(text[:40]))).first.wait_for(timeout=wait_s * 1000)
    wait_idle(pg, wait_s)
    return " ".join(pg.locator("body").inner_text().split())


def test_a_prediction_and_a_control_on_the_page(tmp_path):
    wait_s = page_wait_s(240)
    message = par.parallel_step(get_spec("mistral-7b-v0.1").name, "H100 SXM", tp=8, batch=8).all_reduce_bytes
    ring_us = collectives.all_reduce_parts(message, 8, links.get_link("H100 SXM", "nvlink", 8)).total_s * 1e6
    said = _plain(learner.gap(learner.parse("1"), ring_us, lambda v: f"{v:,.2f} µs")[0])
    assert said.startswith("You predicted 1.00 µs; the result is")          # the gap's own numbers, recomputed here

    # replay mode: the recorded two-process forward, not a live one (what is tested here is computed)
    with marimo_run(NOTEBOOK, tmp_path / "marimo.log", wait_s, env={"WORKSHOP_REPLAY": "1"}) as url, browser() as b:
        pg = b.new_page(viewport={"width": 1400, "height": 1000})
        pg.goto(url)
        wait_idle(pg, wait_s)
        boxes = pg.get_by_placeholder("your prediction")
        assert boxes.count() >= 2, page_text(pg)
        assert "Your prediction: not given" in pg.locator("body").inner_text()   # before anything is typed

        # a prediction: the all-reduce's time over NVLink, typed as a learner would
        boxes.first.fill("1")
        boxes.first.press("Enter")
        text = _shown_after(pg, said, wait_s)
        assert said in text, text[-2000:]

        # a control: the batch of section 2, then the second prediction read against the new batch's speed-up
        batch = pg.locator("select").first
        assert "32" in batch.evaluate("e => [...e.options].map(o => o.text)")
        batch.select_option("32")
        rows = par.tp_scaling("mistral-7b-v0.1", "H100 SXM", batch=32, context=4096, link="pcie")
        speed = rows[-1].speed_up
        shown = lambda v: f"{v:.2f}× (tp={rows[-1].tp} over tp={rows[0].tp})"  # noqa: E731 - the notebook's form
        said_tp = _plain(learner.gap(learner.parse("6"), speed, shown)[0])
        boxes.nth(1).fill("6")
        boxes.nth(1).press("Enter")
        text = _shown_after(pg, said_tp, wait_s)
        assert said_tp in text, text[-2000:]
        assert "batch 32" in text                                     # the table's caption follows the control
