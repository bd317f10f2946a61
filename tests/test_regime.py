"""The one label (helpers.formulas.regime): below, at or above by the 10 % margin, on every value a
measurement can produce — zero, negative, equal, infinite, missing — without ever raising."""
import math

import pandas as pd
import pytest

from helpers.formulas import regime


@pytest.mark.parametrize("r, want", [
    (1.0, "at"), (1.1, "at"), (1 / 1.1, "at"), (1.1000001, "above"), (0.909, "below"), (2.0, "above"),
    (0.0, "below"), (-0.82, "below"), (-10.5, "below"), (math.inf, "above"), (-math.inf, "below"),
    (math.nan, "–"), (None, "–"), ("x", "–"),
])
def test_the_label_reads_the_ratio_by_the_margin(r, want):
    assert regime.label(r) == want


@pytest.mark.parametrize("value, reference, want", [
    (2.0, 1.0, 2.0), (1.0, 2.0, 0.5), (0.0, 1.0, 0.0), (-1.0, 2.0, -0.5), (3.0, 3.0, 1.0),
    (1.0, 0.0, math.inf), (-1.0, 0.0, -math.inf),
])
def test_a_ratio_is_a_number_on_every_value(value, reference, want):
    assert regime.ratio(value, reference) == want


@pytest.mark.parametrize("value, reference", [(0, 0), (math.nan, 1), (1, math.nan), (None, 1), (1, math.inf)])
def test_nothing_to_compare_is_nan_and_has_no_label(value, reference):
    r, way = regime.against(value, reference)
    assert math.isnan(r) and way == regime.NONE


def test_two_equal_values_are_at_and_the_margin_is_ten_percent():
    assert regime.against(5.0, 5.0) == (1.0, "at")
    assert regime.MARGIN == 0.10 and regime.LABELS == ("below", "at", "above")


def test_ratio_columns_add_the_ratio_and_its_label_row_by_row():
    df = pd.DataFrame({"measured": [2.0, 1.0, 0.0, -1.0, 1.0], "floor": [1.0, 1.05, 1.0, 1.0, 0.0]})
    out = regime.ratio_columns(df, "measured", "floor", "÷ floor")
    assert list(out["÷ floor label"]) == ["above", "at", "below", "below", "above"]
    assert out["÷ floor"].iloc[0] == 2.0 and math.isinf(out["÷ floor"].iloc[4])
    assert list(df.columns) == ["measured", "floor"]                   # the input is not changed
    empty = regime.ratio_columns(df.iloc[:0], "measured", "floor")
    assert len(empty) == 0 and "ratio label" in empty.columns


def test_epsilons_count_a_difference_in_the_dtypes_rounding():
    assert regime.epsilons(2.0**-23 * 4.0, 4.0, "fp32") == pytest.approx(1.0)
    assert regime.epsilons(-2.0**-7, 1.0, "bf16") == pytest.approx(1.0)
    assert math.isnan(regime.epsilons(1e-6, 0.0))
    with pytest.raises(ValueError, match="dtype must be one of"):
        regime.epsilons(1, 1, "int4")
