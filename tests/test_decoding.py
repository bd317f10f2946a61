"""helpers.decoding: the small profile, decode implementations with identical greedy tokens, each against its
floor at the read bandwidth measured alongside, and the bench's planner step checked by hand."""
import math
import sys
from pathlib import Path

import pytest

from helpers.measure import local_models, models
from helpers.formulas import roofline, stepcost
from helpers.decoding import impls, regimes, views
from helpers.formulas.memory import kv_cache_bytes
from helpers.formulas.specs import param_breakdown, spec_from_config
from helpers.measure.timing import prompt_ids

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import roofline_bench  # noqa: E402  (scripts/roofline_bench.py)


# ----------------------------------------------------------------------------- the small profile

def test_small_profile_is_the_tiny_recipe_widened_and_reads_half_a_gigabyte_per_step():
    cfg = local_models.SMALL_CONFIG
    assert {k: v for k, v in cfg.items() if k not in local_models.SMALL_OVERRIDES} == \
        {k: v for k, v in local_models.TINY_CONFIG.items() if k not in local_models.SMALL_OVERRIDES}
    assert regimes.size_config("small") == cfg            # one owner: the bench's "small" is the profile
    # parameters counted by the architecture itself (meta device, no weights) against helpers.formulas.specs
    m = local_models.tiny_model(cfg, "meta")
    real = sum(p.numel() for p in m.parameters())
    spec = spec_from_config(cfg, "small")
    assert param_breakdown(spec).total == real == 174_605_312
    # by hand: 8 layers × (q 1024² + k,v 1024·256 each + o 1024² + MLP 3·1024·3584 + 2 norms) + head + norm
    per_layer = 2 * 1024 * 1024 + 2 * 1024 * 256 + 3 * 1024 * 3584 + 2 * 1024
    # … + the head + the final norm + one embedding row (the step's token: the table is read by rows)
    assert stepcost.decode_cost(spec, 0, 1, "fp32").weight_read_bytes == 4 * (8 * per_layer + 32000 * 1024 + 1024 + 1024)
    assert 0.5e9 <= stepcost.decode_cost(spec, 0, 1, "fp32").weight_read_bytes <= 1e9   # the range


def test_readme_describes_the_small_profile_as_built():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    cfg, spec = local_models.SMALL_CONFIG, spec_from_config(local_models.SMALL_CONFIG, "small")
    assert (f"`small` | Mistral architecture, {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, "
            f"{param_breakdown(spec).total / 1e6:,.0f} M parameters") in readme
    assert f"reads {stepcost.decode_cost(spec, 0, 1, 'fp32').weight_read_bytes / 1e9:.2f} GB (fp32)" in readme


def test_small_profile_resolves_and_runs_in_fp32_on_a_cpu():
    assert "small" in models.PROFILES
    assert models.resolve_profile("small")[0] == "small"
    assert models.default_dtype("small", "cpu") == "fp32"
    with pytest.raises(ValueError, match="allowed: .*small"):
        models.resolve_profile("medium")
    with pytest.raises(ValueError, match="built profiles: tiny, tiny-trained, small"):
        models.built_folder("mistral-7b")


@pytest.mark.slow
def test_small_profile_loads_from_its_built_folder():
    from helpers.measure.tensor_bytes import measured_weight_bytes

    loaded = models.load("small", device="cpu")
    assert loaded.profile == "small" and loaded.dtype == "fp32"
    assert loaded.label.startswith("small (Mistral architecture, random weights) · fp32 · cpu")
    assert measured_weight_bytes(loaded.model) == 4 * 174_605_312
    assert loaded.tokenizer.encode("Hello", add_special_tokens=False)


# ----------------------------------------------------------------------------- implementations

def test_greedy_tokens_are_identical_across_implementations(tiny):
    ids = prompt_ids(24, vocab=tiny.model.config.vocab_size)
    runs = {i: impls.decode(tiny.model, i, ids, 9, "cpu") for i in ("eager", "generate", "static")}
    ref = runs["eager"].tokens
    assert len(ref) == 1 and len(ref[0]) == 9
    assert len(set(ref[0])) > 1                       # a real sequence, not one token repeated
    for name, run in runs.items():
        assert run.tokens == ref, name
        assert len(run.step_s) == 8 and all(s > 0 for s in run.step_s), name
    assert runs["static"].kv_slots == 24 + 9           # the static buffer: prompt + new tokens, every step
    assert runs["eager"].kv_slots == runs["eager"].mean_context == 24 + 4
    with pytest.raises(ValueError, match="unknown decode implementation 'Static'"):   # never read as another one
        impls.decode(tiny.model, "Static", ids, 9, "cpu")


@pytest.mark.slow
def test_compiled_static_decode_gives_the_same_tokens():
    cfg = {**local_models.TINY_CONFIG, "num_hidden_layers": 1, "vocab_size": 512}   # compiles in seconds
    model = local_models.tiny_model(cfg)
    ids = prompt_ids(12, vocab=512)
    from torch._dynamo.utils import counters

    counters.clear()
    eager = impls.decode(model, "eager", ids, 8, "cpu")
    compiled = impls.decode(model, "static+compile", ids, 8, "cpu")
    assert compiled.tokens == eager.tokens
    assert compiled.compile_s > 0 and len(compiled.step_s) == 8 - 1 - 3
    assert not counters["graph_break"], dict(counters["graph_break"])       # the step in one graph


@pytest.mark.slow
@pytest.mark.parametrize("prompt,new_tokens", [(6, 8), (12, 10)], ids=["inside-the-window", "past-the-window"])
def test_windowed_static_cache_compiles_one_graph(prompt, new_tokens):
    """Mistral 7B slides a 4,096-token window: transformers' StaticCache for it counts tokens in a Python
    int that torch.compile(dynamic=False) guards on (8 graphs, then eager). impls.static_cache builds
    full layers instead: one graph, the same tokens as the eager loop over the windowed DynamicCache."""
    import torch
    from torch._dynamo.utils import counters
    from transformers import StaticCache

    window = 16
    cfg = {**local_models.TINY_CONFIG, "num_hidden_layers": 1, "vocab_size": 512, "sliding_window": window}
    model = local_models.tiny_model(cfg)
    slots = prompt + new_tokens
    assert any(StaticCache(config=model.config, max_cache_len=slots).is_sliding)   # the trap is armed
    cache = impls.static_cache(model.config, slots)
    assert not any(cache.is_sliding) and model.config.sliding_window == window     # the model's own kept
    ids = prompt_ids(prompt, vocab=512)
    eager = impls.decode(model, "eager", ids, new_tokens, "cpu")
    torch._dynamo.reset()
    counters.clear()
    compiled = impls.decode(model, "static+compile", ids, new_tokens, "cpu")
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert compiled.tokens == eager.tokens
    assert compiled.kv_slots == slots


def test_compile_runs_on_cuda_and_on_a_cpu_only_when_asked(monkeypatch):
    monkeypatch.delenv("WORKSHOP_COMPILE", raising=False)
    assert regimes.compile_allowed("cuda") and not regimes.compile_allowed("cpu")
    assert regimes.implementations_for("cpu") == ("eager", "generate", "static")
    assert "WORKSHOP_COMPILE=1" in regimes.COMPILE_SKIPPED
    monkeypatch.setenv("WORKSHOP_COMPILE", "1")
    assert "static+compile" in regimes.implementations_for("cpu")


# ----------------------------------------------------------------------------- the bench's planner keys

def test_the_bench_planner_step_is_the_bytes_by_hand_over_the_bandwidth(tiny_config):
    spec = spec_from_config(tiny_config, "tiny")
    best = regimes.ImplResult("eager", 0.004, 10, 101, 100, 0.003, 0.75, True, None, None)
    reg = regimes.Regime("tiny", "tiny", "fp32", "cpu", spec, 0, [best], bandwidth=20e9)
    got = roofline_bench.figures_for_bench(reg, "_x")
    # by hand: every weight in fp32 but the embedding table, of which the one row the token uses (helpers.formulas.stepcost)
    # + K and V of 100 cached tokens read and of the new one written: 4 layers × 2 × 2 KV heads × 32 dims × 4 B
    params = 32000 * 256 + 256 + 4 * (256 * 256 * 2 + 2 * 256 * 64 + 3 * 256 * 896 + 2 * 256) + 256
    kv = 4 * 2 * 2 * 32 * 4 * (100 + 1)
    assert got["planner_step_s_x"] == pytest.approx((params * 4 + kv) / 20e9)
    assert got["planner_ratio_x"] == pytest.approx(0.004 / ((params * 4 + kv) / 20e9))


@pytest.mark.slow
def test_measure_regime_on_the_tiny_model(tiny):
    reg = regimes.measure_regime(tiny, bandwidth=10e9, impls=("eager", "static"),
                                 sizes={"prompt": 16, "new_tokens": 6, "rounds": 1})
    assert [r.impl for r in reg.results] == ["eager", "static"]
    assert all(r.same_tokens for r in reg.results)
    assert reg.skipped == ["generate", "static+compile"]
    assert reg.bandwidth == 10e9 and reg.bandwidth_kind == "read"     # given: used as it is
    best = reg.best
    assert best.step_s == min(r.step_s for r in reg.results)
    floor = roofline.decode_floor_s(stepcost.decode_cost(tiny.spec, 0, 1, "fp32").weight_read_bytes,
                                    kv_cache_bytes(tiny.spec, 16 + 3, 1, "fp32"), 10e9)
    assert best.floor_s == pytest.approx(floor) and best.efficiency == pytest.approx(floor / best.step_s)
    bench = roofline_bench.figures_for_bench(reg, "_small")
    assert bench["decode_efficiency_small"] == best.efficiency
    step_bytes = stepcost.decode_cost(tiny.spec, 19, 1, "fp32").bytes
    assert bench["planner_ratio_small"] == pytest.approx(best.step_s / (step_bytes / 10e9))
    frame = views.implementations_frame([reg])
    assert list(frame["implementation"]) == ["eager", "static", "generate", "static+compile"]
    assert frame["step_ms"].isna().sum() == 2
    assert list(frame["step ÷ floor"].iloc[:2]) == pytest.approx([r.step_s / r.floor_s for r in reg.results])
    views.roofline_figure([reg], 1e11, "fp32")


def test_the_floor_bandwidth_is_measured_alongside_the_steps_when_not_given(tiny, monkeypatch):
    from helpers.measure import microbench

    samples = iter([30e9, 50e9, 40e9])        # before round 1, before round 2, after the last

    class Read:
        def __init__(self):
            self.bandwidth = next(samples)

    monkeypatch.setattr(microbench, "read_benchmark", lambda device, repeats=3: Read())
    reg = regimes.measure_regime(tiny, None, impls=("eager",), sizes={"prompt": 8, "new_tokens": 3, "rounds": 2})
    assert reg.bandwidth == 50e9                                   # the best sample of the window
    floor = roofline.decode_floor_s(stepcost.decode_cost(tiny.spec, 0, 1, "fp32").weight_read_bytes,
                                    kv_cache_bytes(tiny.spec, reg.results[0].context, 1, "fp32"), 50e9)
    assert reg.results[0].floor_s == pytest.approx(floor)
    assert roofline_bench.figures_for_bench(reg, "_x")["decode_floor_bandwidth_bytes_per_s_x"] == 50e9


def test_bench_compile_off_leaves_the_compiled_step_out_of_the_active_profile(tiny, monkeypatch):
    """gpu_record.sh's bench sets WORKSHOP_BENCH_COMPILE=0: notebook 03 measured the compile (and its CUDA
    graphs) already, so the bench's active profile runs the other implementations only."""
    asked = []

    class Enough(Exception):
        pass

    def measure(loaded, bandwidth, impls=None, **kw):
        asked.append(tuple(impls))
        raise Enough

    monkeypatch.setattr(regimes, "measure_regime", measure)
    monkeypatch.setenv("WORKSHOP_COMPILE", "1")               # where the compiled step would run (a GPU)
    for setting, compiled in (("0", False), ("1", True)):
        monkeypatch.setenv("WORKSHOP_BENCH_COMPILE", setting)
        with pytest.raises(Enough):
            roofline_bench.decoding_figures(tiny, None)
        assert ("static+compile" in asked[-1]) == compiled and "eager" in asked[-1]
