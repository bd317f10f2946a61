"""A prompt past the model's positions is refused in one ValueError before the model runs, never a silent run
past them (issue 20's hostile user). The ids themselves come from prompt_ids or a tokenizer, and are not checked
again (issue 46: validation at the edges only)."""
import pytest
import torch

from helpers.measure.timing import timed_generate


def test_generation_refuses_a_prompt_past_the_positions(tiny):
    positions = tiny.model.config.max_position_embeddings
    with pytest.raises(ValueError, match="positions"):
        timed_generate(tiny.model, torch.full((1, positions), 5), 3)


def test_sweeps_check_every_point_before_the_first_runs(tiny):
    from helpers.measure import sweeps

    limit = tiny.model.config.max_position_embeddings
    for call in (lambda: sweeps.ttft_sweep(tiny, [8, limit + 1]),   # ran 8, then failed
                 lambda: sweeps.itl_sweep(tiny, [limit - 4], steps=12)):
        with pytest.raises(ValueError, match="positions"):
            call()
