"""helpers.present.notebook's small rules that notebooks' sentences rely on."""
import math

import pytest

from helpers.present.notebook import speedup_phrase


@pytest.mark.parametrize("ratio, text", [(1.7, "1.7× faster"), (1 / 1.7, "1.7× slower"), (1.04, "1.04× faster"),
                                         (0.96, "1.04× slower"), (1.0, "no faster"), (7.49, "7.5× faster")])
def test_speedup_phrase_says_the_direction_the_number_has(ratio, text):
    assert speedup_phrase(ratio) == text


def test_speedup_phrase_takes_other_words_and_refuses_nonsense():
    assert speedup_phrase(0.5, "shorter", "longer") == "2.0× longer"
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="positive finite"):
            speedup_phrase(bad)
