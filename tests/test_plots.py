"""The visual style (helpers.present.plots): one colour per meaning, decimal byte units, readable log ticks,
a title on every figure, captioned tables without empty columns."""
import math
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers.present import plots  # noqa: E402


def test_one_colour_per_meaning():
    meanings = [plots.MEASURED, plots.COMPUTED, plots.DATASHEET, plots.FIT, plots.OOM]
    assert len(set(meanings)) == len(meanings)
    phases = [plots.WAITING, plots.PREFILL, plots.DECODE, plots.IDLE]
    assert not set(phases) & set(meanings), "request phases must not reuse a meaning's colour"
    assert plots.DATASHEET_STYLE["ls"] == "--"


@pytest.mark.parametrize("n,expected", [(999, (1.0, "B")), (1000, (1e3, "kB")), (4_194_304, (1e6, "MB")),
                                        (14_483_464_192, (1e9, "GB")), (1.342e12, (1e12, "TB"))])
def test_byte_unit_is_decimal(n, expected):
    assert plots.byte_unit(n) == expected


def test_byte_label_names_the_power():
    assert plots.byte_label("MB", "KV cache") == "KV cache, MB (10⁶ bytes)"
    assert plots.byte_label("GB") == "GB (10⁹ bytes)"


@pytest.mark.parametrize("value,text", [(16, "16"), (1024, "1k"), (4096, "4k"), (131072, "128k"), (1000, "1,000"),
                                        (1536, "1,536"), (0.5, "0.5"), (2.0, "2")])
def test_tick_labels_read_like_the_text(value, text):
    assert plots.tick_label(value) == text


def test_log_axis_ticks_at_the_data_with_readable_labels():
    fig, ax = plots.figure()
    xs = [16, 64, 256, 1024, 4096]
    ax.plot(xs, [1, 2, 3, 4, 5])
    plots.log_axis(ax, "x", ticks=xs)
    assert ax.get_xscale() == "log"
    assert list(ax.get_xticks()) == xs
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "64", "256", "1k", "4k"]


def test_finish_warns_on_a_figure_without_title_and_sets_one_when_given():
    fig, ax = plots.figure()
    ax.plot([0, 1], [0, 1])
    with pytest.warns(UserWarning, match="without a title"):
        plots.finish(fig, "computed")
    fig, ax = plots.figure()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.finish(fig, "computed", title="A title")
    assert fig._suptitle.get_text() == "A title" and plots.has_title(fig)
    fig, (a, b) = plots.figure(ncols=2)
    a.set_title("left")
    assert not plots.has_title(fig)  # one panel untitled
    b.set_title("right")
    assert plots.has_title(fig)


def test_table_caption_once_no_empty_columns_thousands_separators():
    df = pd.DataFrame({"tokens": [16, 4096], "bytes": [32768, 8_388_608], "cuda peak": [None, None],
                       "ratio": [0.5, 12.3456], "ok": [True, False], "measured": pd.array([1234, None], dtype="Int64")})
    styler = plots.table(df, "measured: tiny · fp32 · cpu")
    html = styler.to_html()
    assert html.count("measured: tiny · fp32 · cpu") == 1
    assert "cuda peak" not in html                 # an all-None column is left out
    assert "8,388,608" in html and "4,096" in html and "1,234" in html
    assert "12.3" in html and "0.5" in html and "True" in html and "–" in html   # missing cell reads "–"


def test_table_formats_some_columns_and_keeps_its_cell_styles():
    df = pd.DataFrame({"tokens": [4096, 8192], "share": [0.12345, None], "error": [3.2e-7, 1.0e-6]})
    html = plots.table(df, "computed", formats={"share": "{:.1%}", "error": "{:.1e}", "absent": "{:.0f}"}).to_html()
    assert "12.3%" in html and "3.2e-07" in html and "8,192" in html and "–" in html
    assert "padding: 0.25em 0.8em" in html          # the cells spaced (marimo brings no stylesheet for them)


def test_no_notebook_styles_a_table_past_plots_table():
    """A frame's own .style has no cell padding: under `marimo run` its cells touch (notebook 10 had nine)."""
    import re
    for nb in sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.py")):
        assert not re.search(r"\.style\.(format|set_caption)", nb.read_text(encoding="utf-8")), nb.name


@pytest.mark.parametrize("value,text", [(None, "–"), (float("nan"), "–"), (7_241_732_096, "7,241,732,096"),
                                        (3.14159, "3.14"), (270.93, "271"), (123456.7, "123,457"),
                                        ("never", "never"), (True, "True")])
def test_cell_text(value, text):
    assert plots.cell_text(value) == text


def test_bars_start_at_zero_on_a_linear_axis():
    fig, ax = plots.figure()
    plots.bars(ax, ["a", "b"], [10.0, 20.0], plots.MEASURED)
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and math.isclose(ax.get_ylim()[1], 23.0)
    assert [t.get_text() for t in ax.texts] == ["10", "20"]


def test_bars_keep_one_bar_per_label_even_when_labels_repeat():
    fig, ax = plots.figure()
    plots.bars(ax, ["measured", "expected", "measured", "expected"], [3.0, 2.6, 3.2, 3.5],
               [plots.MEASURED, plots.COMPUTED] * 2)
    assert [p.get_x() + p.get_width() / 2 for p in ax.patches] == [0, 1, 2, 3]
    assert [p.get_height() for p in ax.patches] == [3.0, 2.6, 3.2, 3.5]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["measured", "expected", "measured", "expected"]


# ----------------------------------------------------------------------------- nothing to draw

def _figure_functions():
    import importlib
    import inspect

    names = ("present.sweep_figures", "serving.figures", "present.roofline_figures", "decoding.views",
             "present.hood_figures", "benchmark.figures")
    for name in names:
        mod = importlib.import_module(f"helpers.{name}")
        for fname, fn in inspect.getmembers(mod, inspect.isfunction):
            if getattr(fn, "empty_title", None):
                yield f"{name}.{fname}", fn


def test_every_measured_figure_draws_a_note_when_it_has_nothing_to_draw():
    import pandas as pd

    found = dict(_figure_functions())
    assert {"present.sweep_figures.ttft_figure", "serving.figures.slots_figure", "decoding.views.roofline_figure",
            "present.roofline_figures.efficiency_figure"} <= set(found)
    import inspect

    for name, fn in found.items():
        params = inspect.signature(fn).parameters
        kw = {"source": "measured: nothing"} if "source" in params else {}
        for empty in (None, [], pd.DataFrame()):
            fig = fn(empty, **kw)
            texts = [t.get_text() for t in fig.texts] + [t.get_text() for ax in fig.axes for t in ax.texts]
            assert fig._suptitle.get_text() == fn.empty_title, name
            assert any(t.startswith("Nothing to draw: nothing was measured") for t in texts), name
            assert ("measured: nothing" if kw else "nothing measured") in texts, name


def test_a_figure_with_data_is_drawn_as_before():
    import pandas as pd

    from helpers.present import plots

    @plots.notes_when_empty("never shown")
    def draw(df, source):
        fig, ax = plots.figure()
        ax.plot(df["x"], df["y"])
        return plots.finish(fig, source, "drawn")

    fig = draw(pd.DataFrame({"x": [1, 2], "y": [3, 4]}), "measured: two points")
    assert fig._suptitle.get_text() == "drawn" and len(fig.axes[0].lines) == 1
    assert plots.is_empty(pd.DataFrame({"x": []})) and not plots.is_empty([0]) and not plots.is_empty(3.0)
