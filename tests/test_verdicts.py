"""The words of the workshop's conclusions (helpers.formulas.verdicts): each rule's words against the
numbers it read, at and around every threshold, and the GPU sentences labelled by where they come from."""
from __future__ import annotations

import pytest

from helpers.formulas import verdicts
from helpers.present import expected, recorded


@pytest.mark.parametrize("new, old, words", [
    (27.8, 23.9, "1.16× slower"),            # the packed loop against the bare one on the Intel Xeon record
    (10.0, 23.0, "2.3× faster"),
    (10.0, 10.9, "as fast (within 10%: 1.09×)"),
    (10.9, 10.0, "as fast (within 10%: 1.09×)"),
    (1.0, 12.0, "12× faster"), (1.0, 1300.0, "1,300× faster"),
])
def test_speed_says_the_direction_the_numbers_have(new, old, words):
    v = verdicts.speed(new, old)
    assert v.words == words and v.rule == "speed" and v.evidence["ratio"] == pytest.approx(old / new)


@pytest.mark.parametrize("ratio, words", [
    (1.11, "more"), (1.10, "as much"), (1.0, "as much"), (1 / 1.1, "as much"), (0.90, "less"),
    (float("inf"), "more"),                  # a rise from zero
])
def test_change_words_takes_the_callers_words_by_the_margin(ratio, words):
    assert verdicts.change_words(ratio, higher="more", lower="less", within="as much") == words
    assert verdicts.change_words(1.15, higher="more", lower="less", within="as much", margin=0.2) == "as much"


@pytest.mark.parametrize("fraction, band", [
    (0.95, "nearly all"), (0.90, "nearly all"), (0.89, "most"), (0.60, "most"), (0.55, "about half"),
    (0.50, "about half"), (0.45, "about half"), (0.44, "less than half"), (0.34, "less than half"),
    (0.13, "less than half"), (0.10, "less than half"), (0.09, "a small part"), (0.0, "a small part"),
])
def test_share_bands_at_and_around_each_threshold(fraction, band):
    assert verdicts.share_band(fraction) == band
    v = verdicts.share(fraction * 50, 50, "the step")
    assert v.words == f"{100 * fraction:,.0f} % of the step ({band})" and v.evidence["fraction"] == pytest.approx(fraction)


def test_the_fixed_cost_of_the_two_cpu_records_is_not_called_most_of_the_step():
    # 03 §5's fixed-cost probe: 34 % of the step on the Intel Xeon, 13 % on the AMD EPYC (issue's read-through)
    assert "less than half" in verdicts.share(0.34, 1).words and "less than half" in verdicts.share(0.13, 1).words


@pytest.mark.parametrize("rate, roof, words", [
    (45.8, 26.7, "above the copy bandwidth (1.72×)"),        # tiny weights read from a 480 MiB L3
    (26.7, 26.7, "at the copy bandwidth (100 %)"), (28.0, 26.7, "at the copy bandwidth (105 %)"),
    (12.0, 26.7, "45 % of the copy bandwidth"),
])
def test_against_roof_names_a_rate_above_its_roof(rate, roof, words):
    assert verdicts.against_roof(rate, roof, "the copy bandwidth").words == words


def test_times_as_is_a_factor_never_a_size_word():
    assert verdicts.times_as(1.45, 1.0, "the planner's step").words == "1.45× the planner's step"
    assert verdicts.times_as(6.0, 1.0, "the floor").words == "6.0× the floor"
    assert verdicts.times_as(0.05, 1.0, "the floor").words == "0.050× the floor"


def test_gpu_sentences_are_labelled_and_cite_what_they_use():
    sentences = expected.eager_against_floor()
    assert [s.source for s in sentences] == ["cited", "computed"]
    cited, computed = sentences
    assert "25.5 tokens/s" in cited.text and "104.9 tokens/s" in cited.text and "69 %" in cited.text
    assert "pytorch.org/blog/accelerating-generative-ai-2" in cited.where and "gpt-fast#benchmarks" in cited.where
    # 1397.31 GB/s ÷ 104.9 tokens/s = 13.32 GB a token; ÷ 2,039 GB/s = 6.53 ms; 1/25.5 s = 39.2 ms = 6.0×
    assert "13.32 GB" in computed.text and "6.53 ms" in computed.text and "6.0× that floor" in computed.text
    with pytest.raises(AssertionError):
        expected.OnGpu("guessed", "x", "y")


def test_no_recorded_gpu_sentence_without_a_gpu_record():
    assert recorded.gpu_records() == []          # none committed yet: nothing may be said as recorded


def test_should_see_says_here_and_gpu_apart():
    text = expected.should_see([verdicts.speed(27.8, 23.9)], expected.eager_against_floor()).text
    assert "<em>Here</em>, from the numbers above: 1.16× slower" in text
    assert "<strong>cited</strong>" in text and "<strong>computed</strong>" in text


def test_byte_for_byte_says_every_only_when_every_row_is():
    assert verdicts.byte_for_byte([True] * 9).words == "equal to the formula to the byte in every row (9 of 9)"
    assert verdicts.byte_for_byte([True, False, True], "the prediction").words == \
        "equal to the prediction in 2 of 3 rows; row 2 differs"
    v = verdicts.byte_for_byte([False, True, False], rows="step")
    assert v.words.endswith("steps 1, 3 differ") and v.evidence == {"equal": 1, "rows": 3}
    with pytest.raises(AssertionError):
        verdicts.byte_for_byte([])


@pytest.mark.parametrize("error, scale, dtype, rounding", [
    (1.07e-6, 4.16, "fp32", True),          # TinyMLA's absorbed attention against the expanded heads
    (3.6e-7, 1.0, "fp32", True),            # linear attention, recurrent against parallel (Xeon record)
    (64 * 2**-23, 1.0, "fp32", True), (65 * 2**-23, 1.0, "fp32", False),
    (1e-3, 1.0, "fp32", False), (1e-3, 1.0, "bf16", True),
])
def test_rounding_counts_epsilons_at_the_values_scale(error, scale, dtype, rounding):
    v = verdicts.rounding(error, scale, dtype, "the output")
    assert v.evidence["epsilons"] == pytest.approx(error / (verdicts.EPSILON[dtype] * scale))
    assert v.words.startswith("float rounding") == rounding
    assert v.words.startswith("more than float rounding") == (not rounding)
