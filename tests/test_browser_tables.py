"""Every table of every notebook is readable under `marimo run` (as on Molab), in a real browser: no two
neighbouring cells' text touch. marimo draws a pandas Styler with no stylesheet of its own for its cells
(nbconvert's HTML brings one), so a table without cell styles reads "7,241,732,09628,966,928,38429".
"""
from __future__ import annotations

import pytest

from browser import ROOT, browser, marimo_run, page_text, page_wait_s, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
GAP_PX = 4            # the least space between the text of two cells side by side

# For each table: the smallest horizontal gap between the text of two neighbouring cells of a row, and the
# pair of texts where it occurs (a Range over each cell's contents measures the text, not the cell's box).
GAPS = """() => [...document.querySelectorAll('table')].map((t) => {
  let worst = null;
  for (const row of t.querySelectorAll('tr')) {
    const cells = [...row.children].filter((c) => c.tagName === 'TD' || c.tagName === 'TH');
    const boxes = cells.map((c) => { const r = document.createRange(); r.selectNodeContents(c);
                                     return [r.getBoundingClientRect(), c.innerText.trim()]; });
    for (let i = 0; i + 1 < boxes.length; i++) {
      const [a, ta] = boxes[i], [b, tb] = boxes[i + 1];
      if (!ta || !tb || a.width === 0 || b.width === 0) continue;
      const gap = b.left - a.right;
      if (worst === null || gap < worst[0]) worst = [gap, ta.slice(0, 30), tb.slice(0, 30)];
    }
  }
  return [t.innerText.trim().slice(0, 60).replace(/\\s+/g, ' '), worst];
})"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One `marimo run notebooks/` for every test here (its kernels are threads of one process, so the imports
    are paid once), in replay mode (the committed records): the tables a live run draws, in seconds."""
    wait_s = page_wait_s(240)
    log = tmp_path_factory.mktemp("marimo") / "marimo.log"
    with marimo_run(ROOT / "notebooks", log, wait_s, env={"WORKSHOP_REPLAY": "1"}) as url, browser() as b:
        yield url, b, wait_s


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_table_has_cells_that_touch(notebook, served):
    url, b, wait_s = served
    pg = b.new_page(viewport={"width": 1400, "height": 1000})
    try:
        pg.goto(f"{url}?file={notebook.name}")
        wait_idle(pg, wait_s)
        tables = pg.evaluate(GAPS)
        assert tables, f"{notebook.stem}: the page shows no table: {page_text(pg)}"
        touching = [(head, worst) for head, worst in tables if worst is not None and worst[0] < GAP_PX]
        assert not touching, f"{notebook.stem}: tables whose cells touch (gap px, left, right): {touching}"
        assert "Traceback" not in page_text(pg, 100_000)
    finally:
        pg.close()
