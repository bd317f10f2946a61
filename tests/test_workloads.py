"""helpers.measure.sweeps: the pain-point sweeps on the tiny model with small sizes, the growth-law fit on
hand-made data, out-of-memory as a result, and the batched server really batching."""
from types import SimpleNamespace

import pytest
import torch

from helpers.serving import naive
from helpers.present import sweep_figures
from helpers.measure import growth, sweeps, timing
from helpers.formulas.memory import kv_cache_bytes
from helpers.measure.local_models import tiny_model
from helpers.formulas.specs import get_spec, spec_from_config


# ----------------------------------------------------------------------------- sizes

def test_tiny_sizes_are_small_and_cuda_sizes_reach_out_of_memory():
    tiny = sweeps.sweep_sizes("tiny", "cpu")
    assert max(tiny.ttft_tokens) <= 2048 and max(tiny.memory_tokens) <= 2048 and tiny.requests <= 8
    big = sweeps.sweep_sizes("mistral-7b-random", "cuda")
    assert big.ttft_tokens[0] == 128 and big.ttft_tokens[-1] == 16384
    # the users sweep must go past the memory of the largest GPU in use (H200, 141 GB) to end in an OOM
    mistral = get_spec("mistral-7b-v0.1")
    assert kv_cache_bytes(mistral, big.users_context, big.users_batches[-1]) > 141e9
    assert list(big.users_batches) == sorted(big.users_batches)


# ----------------------------------------------------------------------------- memory

def test_memory_growth_equals_the_formula(tiny):
    df = sweeps.memory_growth(tiny, (8, 33, 100))
    assert list(df["tokens"]) == [8, 33, 100] and not df["oom"].any()
    assert list(df["cache_bytes"]) == list(df["formula_bytes"]) == [n * 2048 for n in (8, 33, 100)]
    assert df["peak_above_weights_bytes"].isna().all()  # no allocator statistics on a CPU
    assert sweep_figures.memory_figure(df, tiny).axes


def test_memory_growth_with_a_sliding_window(tiny_config):
    """A windowed layer holds window − 1 tokens after a prefill, as the formula says."""
    cfg = {**tiny_config, "sliding_window": 16}
    loaded = SimpleNamespace(model=tiny_model(cfg), device="cpu", dtype="fp32", spec=spec_from_config(cfg, "w16"))
    df = sweeps.memory_growth(loaded, (8, 40))
    assert list(df["cache_bytes"]) == list(df["formula_bytes"]) == [8 * 2048, 15 * 2048]


def test_users_sweep_cache_equals_formula(tiny):
    df = sweeps.users_sweep(tiny, 8, (1, 3))
    # after the prefill and one decode step each sequence holds context + 1 tokens
    assert list(df["cache_bytes"]) == list(df["formula_bytes"]) == [9 * 2048, 3 * 9 * 2048]
    assert list(df["tokens"]) == [8, 24]
    assert sweep_figures.users_figure(df, tiny).axes


def test_users_sweep_ends_at_a_cuda_allocation_failure_and_reraises_a_bug(tiny, monkeypatch):
    real = sweeps.timed_generate
    refusal = "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"

    def generate(model, ids, *a, **k):
        if ids.shape[0] >= 3:
            raise RuntimeError(refusal)
        return real(model, ids, *a, **k)

    monkeypatch.setattr(sweeps, "timed_generate", generate)
    df = sweeps.users_sweep(tiny, 8, (1, 3, 6))
    assert df["batch"].tolist() == [1, 3] and df["oom"].tolist() == [False, True]
    assert df.attrs["oom_at"] == 3 and df.attrs["oom_message"] == "RuntimeError: " + refusal
    assert df["cache_bytes"].iloc[0] == 9 * 2048

    def broken(model, ids, *a, **k):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(sweeps, "timed_generate", broken)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        sweeps.users_sweep(tiny, 8, (1,))


# ----------------------------------------------------------------------------- out of memory is a result

def test_guarded_sweep_stops_at_out_of_memory():
    ran = []

    def point(p):
        ran.append(p)
        if p >= 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return {"value": p * 10}

    df = sweeps.guarded_sweep([1, 2, 3, 4, 5], point, "cpu", "batch")
    assert ran == [1, 2, 3] and df.attrs["oom_at"] == 3
    assert df.to_dict("records")[:2] == [{"batch": 1, "value": 10, "oom": False}, {"batch": 2, "value": 20, "oom": False}]
    assert df["batch"].iloc[2] == 3 and df["oom"].tolist() == [False, False, True]
    assert "OutOfMemoryError" in df.attrs["oom_message"]


def test_guarded_sweep_treats_runtime_oom_as_result_and_reraises_other_errors():
    def oom(p):
        raise RuntimeError("CUDA error: out of memory")

    assert sweeps.guarded_sweep([7], oom, "cpu", "tokens").attrs["oom_at"] == 7

    def broken(p):
        raise ValueError("a real bug")

    with pytest.raises(ValueError, match="a real bug"):
        sweeps.guarded_sweep([1], broken, "cpu", "tokens")


def test_a_real_sweep_marks_its_out_of_memory_point(tiny, monkeypatch):
    real = timing.prefill

    def prefill(model, ids, *a, **k):
        if ids.shape[1] > 50:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(model, ids, *a, **k)

    monkeypatch.setattr(sweeps, "prefill", prefill)
    df = sweeps.memory_growth(tiny, (16, 32, 64, 128))
    assert df["tokens"].tolist() == [16, 32, 64] and df["oom"].tolist() == [False, False, True]
    assert df.attrs["oom_at"] == 64
    fig = sweep_figures.memory_figure(df, tiny)
    assert any("out of memory at 64" in t.get_text() for t in fig.axes[0].texts)


# ----------------------------------------------------------------------------- TTFT and the growth law

def test_ttft_sweep(tiny):
    df = sweeps.ttft_sweep(tiny, (8, 64), repeats=2)
    assert df["tokens"].tolist() == [8, 64]
    assert (df["ttft_s"] > 0).all() and (df["ttft_p90_s"] >= df["ttft_s"]).all()
    assert df["tokens_per_s"].tolist() == pytest.approx((df["tokens"] / df["ttft_s"]).tolist())


def test_fit_recovers_a_quadratic():
    ns = [16, 32, 64, 128, 256, 512, 1024, 2048]
    ts = [0.002 + 1e-5 * n + 3e-9 * n * n for n in ns]
    fit = growth.fit_growth(ns, ts)
    assert (fit.a, fit.b, fit.c) == pytest.approx((0.002, 1e-5, 3e-9), rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.predict(4096) == pytest.approx(0.002 + 1e-5 * 4096 + 3e-9 * 4096**2)
    assert fit.quadratic_share == pytest.approx(3e-9 * 2048**2 / ts[-1])
    assert fit.fixed_share == pytest.approx(0.002 / ts[0])


def test_fit_keeps_coefficients_non_negative():
    ns = [10, 20, 40, 80, 160]
    fit = growth.fit_growth(ns, [0.01 + 2e-4 * n for n in ns])   # linear: no quadratic term
    assert fit.c == 0 and fit.a == pytest.approx(0.01) and fit.b == pytest.approx(2e-4)


def test_fit_local_exponent():
    ns = [64, 128, 256, 512, 1024]
    assert growth.fit_growth(ns, [3e-9 * n * n for n in ns]).exponent == pytest.approx(2)     # quadratic
    assert growth.fit_growth(ns, [2e-6 * n for n in ns]).exponent == pytest.approx(1)         # linear
    # a + b·n with a = b·1024: at n = 1024 half the time grows with n, exponent 1/2
    assert growth.fit_growth(ns, [1e-3 * (1 + n / 1024) for n in ns]).exponent == pytest.approx(0.5)


# ----------------------------------------------------------------------------- throughput and the timeline

@pytest.fixture(scope="module")
def served(tiny):
    reqs = naive.make_requests(4, (5, 20), (2, 6), vocab=32000, seed=1)
    shapes = []
    hook = tiny.model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)),
                                                with_kwargs=True)
    try:
        seq = naive.serve_sequential(tiny.model, reqs)
        n_seq = len(shapes)
        bat = naive.serve_batched(tiny.model, reqs)
    finally:
        hook.remove()
    return reqs, seq, bat, shapes[:n_seq], shapes[n_seq:]


def test_make_requests_spreads_lengths():
    reqs = naive.make_requests(5, (10, 50), (4, 8), vocab=100, seed=0)
    assert sorted(len(r.prompt) for r in reqs) == [10, 20, 30, 40, 50]
    assert sorted(r.max_new_tokens for r in reqs) == [4, 5, 6, 7, 8]
    assert all(3 <= t < 100 for r in reqs for t in r.prompt)
    assert reqs == naive.make_requests(5, (10, 50), (4, 8), vocab=100, seed=0)


def test_timeline_ordering(served):
    reqs, seq, bat, _, _ = served
    for res in (seq, bat):
        for t in res.timings:
            assert 0 <= t.start_s <= t.first_token_s <= t.finish_s <= res.wall_s
    # one after another: each request starts after the previous one finished
    for prev, nxt in zip(seq.timings, seq.timings[1:]):
        assert nxt.start_s >= prev.finish_s
    # together: all start at once and get their first token from the same prefill
    assert {t.start_s for t in bat.timings} == {0.0}
    assert len({t.first_token_s for t in bat.timings}) == 1


def test_batched_really_batches(served):
    reqs, seq, bat, seq_shapes, bat_shapes = served
    n, longest = len(reqs), max(r.max_new_tokens for r in reqs)
    assert seq.forward_calls == len(seq_shapes) == sum(r.max_new_tokens for r in reqs)
    assert bat.forward_calls == len(bat_shapes) == longest           # one forward per step for all requests
    assert all(s[0] == n for s in bat_shapes)                         # every forward carries all N sequences
    assert bat_shapes[0] == (n, max(len(r.prompt) for r in reqs))     # the padded prefill
    assert all(s == (n, 1) for s in bat_shapes[1:])                   # then one token each per step
    assert all(s[0] == 1 for s in seq_shapes)


def test_batched_outputs_equal_sequential(served):
    reqs, seq, bat, _, _ = served
    for r, a, b in zip(reqs, seq.timings, bat.timings):
        assert len(a.tokens) == len(b.tokens) == r.max_new_tokens
        assert a.tokens == b.tokens   # left padding, mask and positions are right
    assert seq.new_tokens == bat.new_tokens == sum(r.max_new_tokens for r in reqs)
    assert bat.tokens_per_s == pytest.approx(bat.new_tokens / bat.wall_s)


def test_timeline_table_and_figure(served, tiny):
    _, seq, bat, _, _ = served
    from helpers.serving import tables

    df = tables.requests_frame([seq])
    assert list(df.columns) == ["mode", "request", "prompt tokens", "new tokens", "start s", "first token s (TTFT)",
                                "finish s"]
    assert tables.serve_summary_frame([seq])["forward calls"].tolist() == [seq.forward_calls]
    fig = sweep_figures.timeline_figure([seq, bat], tiny)
    assert len(fig.axes) == 2


# ----------------------------------------------------------------------------- inter-token latency

def test_itl_sweep(tiny):
    df = sweeps.itl_sweep(tiny, (4, 32), steps=3)
    assert df["context"].tolist() == [4, 32] and (df["itl_s"] > 0).all()
    assert sweep_figures.itl_figure(df, tiny, lambda c: 1e-3).axes


def test_decode_batch_sweep(tiny):
    df = sweeps.decode_batch_sweep(tiny, 8, (1, 4), steps=2)
    assert df["batch"].tolist() == [1, 4]
    assert df["tokens_per_s"].tolist() == pytest.approx((df["batch"] / df["step_s"]).tolist())


def test_prompt_ids_are_ordinary_tokens():
    ids = timing.prompt_ids(50, batch=2, vocab=1000, seed=3)
    assert ids.shape == (2, 50) and int(ids.min()) >= 3 and int(ids.max()) < 1000
    assert torch.equal(ids, timing.prompt_ids(50, batch=2, vocab=1000, seed=3))


# ----------------------------------------------------------------------------- the memory equation (notebook 02)

def test_max_users_worked_example():
    from helpers.formulas.memory import kv_budget_bytes, max_users, weight_bytes

    w = weight_bytes("mistral-7b-v0.1", "bf16").bytes
    assert w == 14_483_464_192
    # (80e9 − 14,483,464,192 − 8e9) / (131,072 × 4,096) = 107.1 → 107 users at 4k
    assert kv_budget_bytes(80e9, w, 8e9) == 80e9 - w - 8e9
    assert max_users(80e9, w, 8e9, 131_072, 4096) == 107
    assert max_users(80e9, w, 8e9, 131_072, 8192) == 53     # half the context, half the users
    assert max_users(10e9, w, 0, 131_072, 4096) == 0          # the weights alone do not fit


def test_context_users_grid():
    from helpers.formulas.memory import context_users_grid

    grid = context_users_grid(131_072, [1024, 4096], [1, 80])
    assert grid == [[131_072 * 1024, 131_072 * 4096], [80 * 131_072 * 1024, 80 * 131_072 * 4096]]
    assert grid[1][1] == 42_949_672_960   # the talk's "80 users at 4k ≈ 43 GB"


@pytest.mark.parametrize("args", [(-1, 0, 0, 1, 1), (80e9, 1e9, 1e9, 0, 1), (80e9, 1e9, 1e9, 1, 0)])
def test_max_users_rejects_bad_input(args):
    from helpers.formulas.memory import max_users

    with pytest.raises(ValueError):
        max_users(*args)


def test_heatmap_masks_what_does_not_fit():
    from helpers.present import plots

    fig, ax = plots.figure()
    plots.heatmap(ax, [[1, 2], [3, 4]], ["a", "b"], ["x", "y"], mask=[[False, False], [False, True]],
                  colorbar_label="GB")
    assert [t.get_text() for t in ax.texts] == ["1.0", "2.0", "3.0", "4.0"]
    assert len(ax.patches) == 1   # the hatched cell
    assert plots.finish(fig, "computed from test", title="heatmap test") is fig


def test_small_gpus_get_smaller_sweeps():
    small = sweeps.sweep_sizes("mistral-7b", "cuda", free_bytes=2 * 10**9)     # a 16 GB card after 14.5 GB
    big = sweeps.sweep_sizes("mistral-7b", "cuda", free_bytes=120 * 10**9)
    assert max(small.ttft_tokens) == 4096 and max(big.ttft_tokens) == 16384
    assert small.users_batches[0] == 1   # the users sweep starts at one sequence and doubles to OOM


def test_compare_serving_records_out_of_memory(tiny, monkeypatch):
    reqs = naive.make_requests(3, (4, 8), (2, 3), seed=2)

    def boom(model, requests, device=None):
        if len(requests) > 2:   # the warm-up (two requests) runs, the real batch does not fit
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return naive.ServeResult("together (one batch)", [], 0.0, 0)

    monkeypatch.setattr(naive, "serve_batched", boom)
    cmp = naive.compare_serving(tiny.model, reqs, "cpu")
    assert cmp.batched is None and cmp.sequential is not None and cmp.results == [cmp.sequential]
    assert cmp.oom_message.startswith("batched: OutOfMemoryError")
    assert sweep_figures.timeline_figure(cmp.results, tiny).axes
    assert sweep_figures.timeline_figure([], tiny).axes
