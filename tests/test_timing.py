import time

import numpy as np
import pytest
import torch

from helpers.formulas import stats
from helpers.measure import timing


@pytest.mark.parametrize("q", [0, 10, 50, 90, 100])
def test_percentile_matches_numpy(q):
    xs = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4]
    assert stats.percentile(xs, q) == pytest.approx(np.percentile(xs, q))


def test_measure_warms_up_then_repeats():
    calls = []

    def fn():
        calls.append(time.perf_counter())
        time.sleep(0.002)

    stats = timing.measure(fn, warmup=2, repeats=5)
    assert len(calls) == 7 and len(stats.samples) == 5
    assert stats.min >= 0.002 and stats.median >= 0.002 and stats.p90 >= stats.median


def test_timed_generate_matches_transformers_generate(tiny):
    """The manual cached decode loop yields the same greedy tokens as model.generate."""
    ids = tiny.tokenizer("The capital of France is", return_tensors="pt")["input_ids"]
    g = timing.timed_generate(tiny.model, ids, max_new_tokens=8)
    with torch.inference_mode():
        ref = tiny.model.generate(ids, max_new_tokens=8, do_sample=False, min_new_tokens=8)
    assert g.token_ids[0] == ref[0, ids.shape[1]:].tolist()
    assert len(g.step_s) == 7 and g.prompt_tokens == ids.shape[1]
    assert g.ttft_s > 0 and all(s > 0 for s in g.step_s)
