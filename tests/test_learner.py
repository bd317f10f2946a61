"""The learner takes part (helpers.present.learner): a prediction typed or set, read as a number, shown
beside the result with the gap as a ratio and its label; a self-check whose answers are this run's numbers."""
from __future__ import annotations

import pytest

from helpers.present import learner


@pytest.mark.parametrize("text, value", [
    ("131072", 131072), ("131,072", 131072), ("128 KiB", 131072), ("128KiB", 131072), ("128k", 128_000),
    ("1.3e5", 130_000), ("14.5 GB", 14.5e9), ("0.5 GiB", 2**29), ("60 %", 60), ("2.5x", 2.5), ("2.5×", 2.5),
    ("1,200 tokens", 1200), ("112 users", 112), ("24.7 FLOP/B", 24.7), ("  7 ", 7), (".5", 0.5), ("-3", -3),
])
def test_a_prediction_is_read_as_the_learner_types_it(text, value):
    assert learner.parse(text).value == pytest.approx(value)


@pytest.mark.parametrize("text", ["abc", "12 apples", "1e999", "inf", "nan", "1.2.3", "--1"])
def test_what_is_not_a_number_says_why_and_is_not_given(text):
    g = learner.parse(text)
    assert g.value is None and g.error and "\n" not in g.error


def test_an_empty_box_is_not_given():
    assert learner.parse("").value is None and not learner.parse("").error
    assert learner.read(None).value is None


class Box:
    def __init__(self, value):
        self.value = value


def test_the_jupyter_variable_wins_over_the_box():
    assert learner.read(Box("5"), given=None).value == 5
    assert learner.read(Box("5"), given=7).value == 7
    assert learner.read(Box(""), given="128 KiB").value == 131072


@pytest.mark.parametrize("guess, result, ratio, way", [
    ("128 KiB", 131072, "1.00", "at"),
    ("120k", 131072, "1.09", "at"),                # inside the 10 % margin
    ("64 KiB", 131072, "2.00", "above"),
    ("1e6", 131072, "0.13", "below"),
    ("0", 131072, "∞", "above"),                   # a zero prediction: no finite ratio, the direction stands
    ("0", 0, "–", "at"),
    ("-3", 5, "–", "above"),                       # opposite signs: the direction alone
    ("5", -3, "–", "below"),
    ("2", 0, "0.00", "below"),                     # a result of zero: a ratio of zero
])
def test_the_gap_is_a_ratio_and_its_label(guess, result, ratio, way):
    words, label = learner.gap(learner.parse(guess), result)
    assert label == way and f"result ÷ prediction = **{ratio}** ({way} your prediction)" in words


def test_not_given_shows_the_result_alone():
    words, label = learner.gap(learner.parse(""), 131072)
    assert words == "Your prediction: not given. The result: **131,072**." and label == ""
    assert "could not read" in learner.gap(learner.parse("abc"), 1)[0]


def test_beside_adds_the_static_hint_for_the_gaps_direction():
    hints = dict(higher="K and V are both cached.", lower="GQA shares heads.", within="Right.")
    assert "K and V are both cached." in learner.beside(Box("64 KiB"), None, 131072, **hints).text
    assert "GQA shares heads." in learner.beside(Box("1 MiB"), None, 131072, **hints).text
    assert "Right." in learner.beside(Box("120 KiB"), None, 131072, **hints).text      # 1.09: at, within 10 %
    assert "K and V" not in learner.beside(Box(""), None, 131072, **hints).text       # nothing given: no hint
    assert "(above your prediction). K and V are both cached." in learner.beside(Box("0"), None, 5, **hints).text
    assert "(at your prediction). Right." in learner.beside(Box("0"), None, 0, **hints).text


def test_self_check_answers_come_from_the_run_and_are_checked():
    qs = [learner.Question("KV bytes per token of this run's model?", 131072, "B"),
          learner.Question("Which roof binds decode at batch 1?", "memory", options=("memory", "compute"))]
    assert qs[0].check("128 KiB") and qs[0].check("125000") and not qs[0].check("64 KiB") and qs[0].check("") is None
    assert qs[1].check("memory") and not qs[1].check("compute")
    form = learner.self_check(qs)
    folded = learner.answers(form, qs).text        # not submitted (Jupyter, headless): the answers, folded
    assert "<details>" in folded and "131,072 B" in folded and "memory" in folded

    class Submitted:
        value = {"q0": "128 KiB", "q1": "compute"}

    checked = learner.answers(Submitted(), qs).text
    assert "✅ 1." in checked and "❌ 2." in checked


def test_outside_marimo_the_question_is_text_and_reads_as_not_given():
    """Jupyter, Colab and a headless run draw no marimo control: the prediction's question and the self-check's
    questions are shown as text, and reading them gives 'not given' (the Jupyter variable still wins)."""
    box = learner.prediction("How many bytes per token?", "B")
    assert "Predict first." in box.text and "How many bytes per token? (B)" in box.text and "variable" in box.text
    assert learner.read(box).value is None and learner.read(box, given="64 KiB").value == 65536
    qs = [learner.Question("Bytes per token?", 131072, "B"),
          learner.Question("Which roof?", "memory", options=("memory", "compute"))]
    form = learner.self_check(qs)
    assert "<li>Bytes per token? (B)</li>" in form.text and "<li>Which roof? (memory / compute)</li>" in form.text
    assert "<details>" in learner.answers(form, qs).text


def test_in_marimo_the_prediction_and_the_self_check_are_controls(monkeypatch):
    import marimo as mo

    monkeypatch.setattr(mo, "running_in_notebook", lambda: True)
    box = learner.prediction("How many bytes per token?", "B")
    assert box.value == "" and learner.read(box).value is None
    qs = [learner.Question("Bytes per token?", 131072, "B")]
    assert learner.self_check(qs).value is None       # a form: None until submitted


def test_the_self_check_section_counts_its_questions_and_says_what_they_follow():
    qs = [learner.Question("a?", 1.0), learner.Question("b?", "yes", options=("yes", "no")), learner.Question("c?", 2.0)]
    text = learner.self_check_section(learner.self_check(qs), qs, "change a control and they change").text
    assert "Self-check" in text and "Three questions whose answers are this run's numbers (change a control and they change)." in text
    assert "One question whose" in learner.self_check_section(learner.self_check(qs[:1]), qs[:1], "x").text
