"""Bad input to the entry points that run a model on ids they are given (generation, decoding, the
sweeps) is refused in one ValueError saying what is allowed — never an IndexError from the
embedding or a run past the model's positions (issue 20's hostile user). The serving mechanisms run on
requests these helpers or the tokenizer made, and do not check them again. Each case is refused before the
model runs, so the file takes seconds."""
import pytest
import torch

from helpers.decoding.impls import decode
from helpers.measure.timing import check_ids, timed_generate

OK = torch.tensor([[5, 6, 7, 8]])


def test_check_ids_says_what_is_wrong(tiny):
    m = tiny.model
    vocab, positions = m.config.vocab_size, m.config.max_position_embeddings
    assert torch.equal(check_ids(m, [[5, 6], [7, 8]]), torch.tensor([[5, 6], [7, 8]]))
    for ids, needle in ((torch.empty(1, 0, dtype=torch.long), r"at least one token, got shape \(1, 0\)"),
                        (torch.empty(0, 4, dtype=torch.long), r"got shape \(0, 4\)"),
                        ([], r"got shape \(0,\)"),
                        (torch.tensor([5, 6]), r"got shape \(2,\)"),                       # 1-D: not a batch
                        (OK.float(), "integer token ids"),
                        (torch.tensor([[vocab]]), f"holds the id {vocab}; allowed: 0 to {vocab - 1:,}"),
                        (torch.tensor([[-1]]), "holds the id -1"),
                        ("hello", "token ids"),
                        (torch.full((1, positions), 5), f"exceed the model's {positions:,} positions")):
        with pytest.raises(ValueError, match=needle):
            check_ids(m, ids, 1)


def test_generation_and_decoding_refuse_empty_out_of_vocabulary_and_too_long_prompts(tiny):
    m, vocab, positions = tiny.model, tiny.model.config.vocab_size, tiny.model.config.max_position_embeddings
    empty = torch.empty(1, 0, dtype=torch.long)
    for call, needle in ((lambda: timed_generate(m, empty, 3), "at least one token"),      # was IndexError
                         (lambda: timed_generate(m, torch.tensor([[vocab + 5]]), 3), "the vocabulary"),
                         (lambda: timed_generate(m, torch.full((1, positions), 5), 3), "positions"),
                         (lambda: decode(m, "eager", empty, 3), "at least one token"),
                         (lambda: decode(m, "static", torch.tensor([[vocab]]), 3), "the vocabulary")):
        with pytest.raises(ValueError, match=needle):
            call()


def test_sweeps_check_every_point_before_the_first_runs(tiny):
    from helpers.measure import sweeps

    limit = tiny.model.config.max_position_embeddings
    for call in (lambda: sweeps.ttft_sweep(tiny, [8, limit + 1]),   # ran 8, then failed
                 lambda: sweeps.itl_sweep(tiny, [limit - 4], steps=12)):
        with pytest.raises(ValueError, match="positions"):
            call()
