"""The tiny-trained profile: a text held out from training, a cache keyed by what the weights depend
on, training reproducible from its seed, and the three quality targets of issue #11 on the real build."""
import dataclasses
import hashlib
import json
import math

import pytest

from helpers.measure import local_models, models, quality, quant, training
from helpers.measure.quality import eval_ids
from helpers.present import quant_figures
from helpers.formulas import speculation


# ----------------------------------------------------------------------------- the text

def test_text_is_the_shipped_novel_with_its_last_chapter_held_out():
    full = quality.training_text()
    # the digest helpers/data/README.md names for the file extracted from r-cran-janeaustenr
    assert hashlib.sha256(full.encode()).hexdigest() == "5822e368a17a7167ddc3942a60335da0c1f9ae816ba10e8f26ed38788a4bf43d"
    train, held = quality.split()
    assert train + "\n" + held == full
    assert held.startswith("Chapter 24\n\n") and held.rstrip().endswith("Finis")
    assert "Chapter 23\n" in train and "Chapter 24" not in train
    ev = quality.heldout_eval_text()
    assert held.startswith(ev.rstrip("\n")) and len(ev) >= quality.EVAL_CHARS
    # no sentence of the evaluation text occurs in the training part
    sentences = [s.strip() for s in ev.replace("\n", " ").split(".") if len(s.strip()) > 40]
    assert sentences and not any(s in train for s in sentences)


def test_tiny_profiles_evaluate_on_the_held_out_text(tiny):
    assert quality.eval_text("tiny") == quality.eval_text("tiny-trained") == quality.heldout_eval_text()
    assert quality.eval_text("mistral-7b") == quality.eval_text() == quality.EVAL_TEXT.read_text()
    ids = eval_ids(tiny.tokenizer, profile="tiny-trained")
    assert ids[0] == 1 and 900 <= len(ids) <= 1300
    assert quality.eval_ids(tiny.tokenizer, 50, profile="tiny") == ids[:50]


def test_split_without_the_heading_is_a_clear_error():
    with pytest.raises(ValueError, match="no 'Chapter 24' heading"):
        quality.split("a text with no chapters")


# ----------------------------------------------------------------------------- cache and recipe

def test_cache_key_follows_config_text_and_seed():
    base = training.cache_key(local_models.TINY_CONFIG, "text", training.RECIPE)
    assert base == training.cache_key(dict(local_models.TINY_CONFIG), "text", dict(training.RECIPE))
    assert base != training.cache_key({**local_models.TINY_CONFIG, "num_hidden_layers": 2}, "text", training.RECIPE)
    assert base != training.cache_key(local_models.TINY_CONFIG, "text.", training.RECIPE)
    assert base != training.cache_key(local_models.TINY_CONFIG, "text", {**training.RECIPE, "seed": 1})
    assert training.trained_folder().parent == local_models.cache_dir()


def test_learning_rate_schedule():
    r = {**training.RECIPE, "lr": 1.0, "warmup_steps": 4, "steps": 105, "min_lr_ratio": 0.1}
    assert training.lr_at(0, r) == pytest.approx(0.25) and training.lr_at(3, r) == pytest.approx(1.0)
    assert training.lr_at(4, r) == pytest.approx(1.0)     # the cosine starts at the peak ...
    assert training.lr_at(54, r) == pytest.approx(0.55)   # ... is half way down after 50 of its 100 steps: (1 + 0.1) / 2
    assert training.lr_at(104, r) == pytest.approx(0.1)   # ... and ends at min_lr_ratio on the last step


@pytest.mark.slow
def test_training_is_reproducible_from_its_seed(tmp_path, monkeypatch):
    """A few steps of a small recipe, twice with one seed and once with another, in a fresh cache."""
    from safetensors.torch import load_file

    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    small = {**training.RECIPE, "steps": 2, "batch_size": 2, "seq_len": 16, "warmup_steps": 1}

    def weights(recipe, where):
        training.train(where, local_models.TINY_CONFIG, recipe, progress=False)
        return load_file(where / "model.safetensors")

    a, b = weights(small, tmp_path / "a"), weights(small, tmp_path / "b")
    c = weights({**small, "seed": 1}, tmp_path / "c")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    assert any(not (a[k] == c[k]).all() for k in a)
    # build_trained caches by key: a second call reuses the folder without training again
    folder = training.build_trained(recipe=small, progress=False)
    stamp = (folder / "training.json").stat().st_mtime_ns
    assert training.build_trained(recipe=small, progress=False) == folder
    assert (folder / "training.json").stat().st_mtime_ns == stamp
    assert folder.name == f"tiny-trained-{training.cache_key(local_models.TINY_CONFIG, quality.training_text(), small)}"
    # the bench section (`make bench`, build/bench/training.json) trains the recipe afresh, outside the
    # cache, and reports its time against the budget
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_script", quality.TEXT_FILE.parents[2] / "scripts" / "bench.py")
    bench_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_script)
    monkeypatch.setattr(training, "RECIPE", small)
    fig = bench_script.SECTIONS["training"]()
    assert fig["tokens_seen"] == 2 * 2 * 16 and fig["budget_s"] == 180
    assert fig["within_budget"] == (fig["train_wall_s"] <= 180) and fig["tokens_per_s"] > 0
    assert fig["heldout_perplexity_random"] > 10_000 and fig["heldout_perplexity_trained"] > 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("tiny-trained-")) == [folder.name]


# ----------------------------------------------------------------------------- the real build

def test_tiny_trained_profile_is_the_tiny_architecture(tiny, tiny_trained):
    assert tiny_trained.profile == "tiny-trained" and tiny_trained.dtype == "fp32"
    assert tiny_trained.label == "tiny (Mistral architecture, trained on Persuasion) · fp32 · cpu · profile tiny-trained"
    same = dataclasses.replace(tiny_trained.spec, name="tiny") == dataclasses.replace(tiny.spec, name="tiny")
    assert same   # same shapes (the spec that timing and memory lessons read), only the name differs
    assert [(n, p.shape) for n, p in tiny_trained.model.named_parameters()] == \
           [(n, p.shape) for n, p in tiny.model.named_parameters()]
    assert models.default_dtype("tiny-trained", "cpu") == "fp32"


def test_training_record(tiny_trained):
    log = training.log()
    assert log["recipe"] == training.RECIPE and len(log["losses"]) == training.RECIPE["steps"]
    assert log["text_sha256"] == hashlib.sha256(quality.training_text().encode()).hexdigest()
    # a random model over 32,000 tokens starts near ln(32000) = 10.4 nats; training brings it down
    assert log["losses"][0] == pytest.approx(math.log(32000), abs=0.3)
    assert sum(log["losses"][-10:]) / 10 < log["losses"][0] - 3
    assert log["heldout_loss_after"] < log["heldout_loss_before"] - 3
    assert json.loads((training.build_trained() / "config.json").read_text())["hidden_size"] == 256


def test_target_heldout_perplexity_20x_lower_than_random(tiny, tiny_trained):
    """Issue #11: held-out perplexity at least 20 times lower than the random model's, on the same text.
    Checked against the model's own loss (transformers' cross-entropy), an independent computation."""
    import torch

    ids = eval_ids(tiny.tokenizer, profile="tiny-trained")
    ppl = {}
    for m in (tiny, tiny_trained):
        ppl[m.profile] = quality.perplexity(quality.next_token_logprobs(m.model, ids), ids)
        x = torch.tensor(ids).reshape(1, -1)
        with torch.inference_mode():
            own = math.exp(m.model(input_ids=x, labels=x).loss.item())
        assert ppl[m.profile] == pytest.approx(own, rel=1e-4)
    assert ppl["tiny"] > 10_000   # near the vocabulary size: a model that knows nothing
    assert ppl["tiny"] / ppl["tiny-trained"] >= 20, ppl


def test_target_identical_draft_accepts_95_percent(tiny_trained):
    """Issue #11: greedy speculative decoding with a draft identical to the target accepts at least 95 % of
    the drafted tokens. The draft is the target's own layers, all of them (helpers.engine.speculative.DraftModel
    with every layer: same weights, a paged cache of its own), through the engine's speculative loop."""
    from helpers.engine import speculative as spec_loop
    from helpers.engine.request import SamplingParams

    m = tiny_trained.model
    prompt = eval_ids(tiny_trained.tokenizer, 32, "tiny-trained")
    params = SamplingParams(max_tokens=64, ignore_eos=True)
    plain = spec_loop.generate(m, [prompt], params)
    r = spec_loop.generate(m, [prompt], params, k=4,
                           drafter=spec_loop.DraftModel(m, num_layers=m.config.num_hidden_layers))
    assert len(r.outputs[0]) == 64 and r.outputs == plain.outputs
    drafted, kept = sum(d for d, _ in r.rounds), sum(a for _, a in r.rounds)
    # independent of the loop's own counts: each target pass adds exactly one token of its own
    assert kept + r.target_passes == 64 and len(r.rounds) == r.target_passes
    assert drafted >= 4 * (len(r.rounds) - 1)
    assert kept / drafted >= 0.95, r.rounds
    # nearly every checked token kept: eq. 1 at the fitted α must describe the passes (α = 1: k + 1 each)
    # α per checked token, accepted ÷ (accepted + rounds that ended in a rejection), the maximum-likelihood α
    alpha = kept / (kept + sum(a < d for d, a in r.rounds))
    expected = sum(speculation.expected_tokens_per_pass(alpha, d) for d, _ in r.rounds) / len(r.rounds)
    assert expected == pytest.approx(r.tokens_per_pass, rel=0.1)


def test_target_int8_kl_smaller_than_nf4(tiny_trained):
    """Issue #11: on the trained model, int8's KL against the unquantized reference is smaller than nf4's."""
    ids = eval_ids(tiny_trained.tokenizer, profile="tiny-trained")
    ref = quality.next_token_logprobs(tiny_trained.model, ids)
    source = quant.model_source(tiny_trained)
    assert source == training.build_trained()
    kl = {}
    for scheme in ("int8", "nf4"):
        q = quality.quality(ref, quality.next_token_logprobs(quant.load_quantized(source, scheme), ids), ids)
        kl[scheme] = q["kl_mean"]
        assert q["top1_agreement"] > 0.5, (scheme, q)
    assert 0 < kl["int8"] < kl["nf4"], kl


def test_perplexities_put_random_trained_and_uniform_side_by_side(tiny, tiny_trained):
    ps = training.perplexities(tiny, tiny_trained)
    assert [p.profile for p in ps] == ["tiny", "tiny-trained", ""]
    assert ps[2].perplexity == 32000.0 and ps[2].measured_on == "computed: exp(ln V) = V"
    assert ps[0].tokens == ps[1].tokens == len(eval_ids(tiny.tokenizer, profile="tiny-trained"))
    assert ps[0].perplexity / ps[1].perplexity >= 20 and ps[1].measured_on == tiny_trained.label
    rows = quant_figures.perplexity_rows(ps)        # the table notebook 05 draws
    assert rows[1]["first ÷ this"] == pytest.approx(ps[0].perplexity / ps[1].perplexity)
    assert rows[2]["measured on"] == "computed: exp(ln V) = V"
