"""Notebook 01's results as numbers: the growth fit and its exponents (helpers.measure.growth), the tables and
figures that show them (helpers.present.sweep_figures), each fed the values a measurement can produce on some
machine — both committed CPU records, zero times, one sample, equal values, a point that ran out of memory,
nothing that ran — and every table rendered. Also the computed facts 01's static prose states (issue 44 §11)."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from helpers import records
from helpers.formulas import regime
from helpers.formulas.memory import kv_bytes_per_token, kv_cache_bytes
from helpers.formulas.specs import get_spec
from helpers.formulas.stepcost import decode_cost, forward_cost
from helpers.measure import growth
from helpers.measure.sweeps import sweep_sizes
from helpers.present import on_gpu, plots, replay, sweep_figures
from helpers.serving import naive

CPUS = ("cpu-intel-xeon", "cpu-amd-epyc")
GPU = on_gpu.gpu_expectations(sweep_sizes("mistral-7b", "cuda"))


def recorded(key: str, record: str):
    (on, value), _ = replay.load(key, [records.RESULTS / record])
    return on, value


def frame(rows: list[dict], oom_at=None) -> pd.DataFrame:
    df = pd.DataFrame([{**r, "oom": r.get("oom", False)} for r in rows])
    df.attrs["oom_at"] = oom_at
    return df


def renders(df) -> str:
    """The table as a notebook shows it (plots.table), rendered to HTML: a table that cannot render fails here."""
    return plots.table(df, "test").to_html()


# ----------------------------------------------------------------------------- the growth fit and its exponents

def test_the_fit_needs_two_distinct_positive_times():
    assert growth.fit_growth([], []) is None
    assert growth.fit_growth([16], [0.01]) is None                                  # one sample
    assert growth.fit_growth([16, 32, 64], [0.0, 0.0, 0.0]) is None                  # a timer that saw nothing
    assert growth.fit_growth([16, 16], [0.01, 0.02]) is None                         # one length twice
    assert growth.fit_growth([16, 32], [-0.01, 0.02]) is None                        # a negative time is left out
    assert growth.fit_growth([16, 32, 64], [float("nan"), 0.02, float("inf")]) is None
    two = growth.fit_growth([16, 32], [0.01, 0.02])                                  # two points: a law through them
    assert two.predict(32) == pytest.approx(0.02) and two.exponent == pytest.approx(1) and math.isnan(two.r2)


def test_the_fit_of_equal_times_is_flat():
    fit = growth.fit_growth([16, 32, 64, 128], [0.05] * 4)
    assert (fit.a, fit.b, fit.c) == pytest.approx((0.05, 0, 0)) and fit.exponent == pytest.approx(0)
    assert fit.fixed_share == pytest.approx(1) and fit.quadratic_share == pytest.approx(0)


@pytest.mark.parametrize("law, t, p", [
    ("a fixed cost only", lambda n: 0.05, 0.0),
    ("the weights' work only", lambda n: 1e-5 * n, 1.0),
    ("attention only", lambda n: 1e-9 * n * n, 2.0),
])
def test_exponents_of_the_three_laws(law, t, p):
    ns = [256, 512, 1024, 2048, 4096]
    df = frame([{"tokens": n, "ttft_s": t(n)} for n in ns])
    assert growth.fit_or_none(df).exponent == pytest.approx(p, abs=1e-6), law
    d = growth.last_doubling(df)
    assert (d.n0, d.n1) == (2048, 4096) and d.exponent == pytest.approx(p, abs=1e-9) and d.ratio == pytest.approx(2**p)


def test_local_exponent_on_every_edge():
    assert growth.local_exponent(1024, 0.01, 2048, 0.04) == pytest.approx(2)
    for args in ((1024, 0.0, 2048, 0.04), (1024, 0.01, 2048, 0.0), (1024, 0.0, 2048, 0.0), (1024, 0.01, 1024, 0.02),
                 (1024, -0.01, 2048, 0.02), (1024, float("nan"), 2048, 0.02)):
        assert math.isnan(growth.local_exponent(*args)), args


def test_the_doubling_skips_what_ran_out_of_memory_and_needs_a_pair():
    df = frame([{"tokens": 128, "ttft_s": 0.1}, {"tokens": 256, "ttft_s": 0.25}, {"tokens": 384, "ttft_s": 0.4},
                {"tokens": 512, "oom": True}], oom_at=512)
    d = growth.last_doubling(df)
    assert (d.n0, d.n1, d.ratio) == (128, 256, pytest.approx(2.5))      # 384's half never ran; 512 ran out
    assert growth.last_doubling(frame([{"tokens": 100, "ttft_s": 0.1}, {"tokens": 300, "ttft_s": 0.3}])) is None
    assert growth.last_doubling(frame([{"tokens": 100, "oom": True}], oom_at=100)) is None
    assert growth.last_doubling(frame([{"tokens": 16, "ttft_s": 0.0}, {"tokens": 32, "ttft_s": 0.0}])) is None
    assert growth.last_doubling(frame([{"tokens": 16, "ttft_s": 0.0}, {"tokens": 32, "ttft_s": 0.01}])) is None
    fell = growth.last_doubling(frame([{"tokens": 16, "ttft_s": 0.01}, {"tokens": 32, "ttft_s": 0.0}]))
    assert fell.ratio == 0 and math.isnan(fell.exponent)                          # a time of zero at 2n: ratio 0


@pytest.mark.parametrize("record", CPUS)
def test_the_growth_table_on_both_cpu_records(record):
    on, ttft = recorded("01/ttft", record)
    fit, d = growth.fit_or_none(ttft), growth.last_doubling(ttft)
    table = sweep_figures.growth_table(fit, d, on.spec, GPU["ttft_floors_s"], GPU["model"], GPU["gpu"])
    fitted, doubling, gpu = table.to_dict("records")
    assert fitted["exponent"] == fit.exponent and fitted["to (tokens)"] == fit.n_max == 2048
    assert fitted["n² term at 'to' (%)"] == pytest.approx(100 * fit.quadratic_share)
    assert doubling["time ratio"] == pytest.approx(d.ratio) and doubling["exponent"] == pytest.approx(math.log2(d.ratio))
    n0, n1 = sorted(GPU["ttft_floors_s"])[-2:]
    assert (gpu["from (tokens)"], gpu["to (tokens)"]) == (n0, n1)
    assert gpu["time ratio"] == pytest.approx(GPU["ttft_floors_s"][n1] / GPU["ttft_floors_s"][n0])
    from helpers.formulas.compute_share import flop_terms

    split = flop_terms(on.spec, 2048)
    assert fitted["attention's FLOPs at 'to' (%)"] == pytest.approx(100 * split.attention_context / split.total)
    assert "exponent" in renders(table)


def test_the_growth_table_with_nothing_to_fit():
    spec = get_spec("mistral-7b-v0.1")
    table = sweep_figures.growth_table(None, None, spec)
    assert len(table) == 2 and table["exponent"].isna().all()
    html = renders(table)
    assert "no fit" in html and "no prompt ran beside its half" in html
    one = sweep_figures.growth_table(None, None, spec, {128: 0.004})            # one floor: no computed row
    assert len(one) == 2


def test_the_ttft_figure_takes_zero_times_and_one_sample():
    zero = frame([{"tokens": n, "ttft_s": 0.0, "ttft_p90_s": 0.0} for n in (16, 32, 64)])
    assert sweep_figures.ttft_figure(zero, growth.fit_or_none(zero), "test").axes
    one = frame([{"tokens": 16, "ttft_s": 0.01, "ttft_p90_s": 0.01}])
    assert sweep_figures.ttft_figure(one, growth.fit_or_none(one), "test").axes


def test_the_ttft_figure_has_slope_guides_through_the_longest_point():
    _, ttft = recorded("01/ttft", "cpu-intel-xeon")
    ax = sweep_figures.ttft_figure(ttft, growth.fit_or_none(ttft), "test").axes[0]
    guides = {ln.get_label(): ln for ln in ax.get_lines() if ln.get_label().startswith("slope")}
    assert set(guides) == {"slope 1 through the longest prompt: ∝ n, linear",
                           "slope 2 through the longest prompt: ∝ n², quadratic"}
    ok = ttft[~ttft["oom"]]
    for k, line in zip((1, 2), guides.values()):
        (x0, x1), (y0, y1) = line.get_xdata(), line.get_ydata()
        assert (x0, x1) == (2048 / 8, 2048) and y1 == pytest.approx(float(ok["ttft_s"].iloc[-1]) * 1e3)
        assert math.log(y1 / y0) / math.log(x1 / x0) == pytest.approx(k)     # the slope it is labelled with


# ----------------------------------------------------------------------------- the ITL against the bytes it reads

H100 = 3.35e12


def _itl(spec, contexts, step_of_bytes):
    return frame([{"context": c, "itl_s": step_of_bytes(decode_cost(spec, c, 1, "bf16").bytes)} for c in contexts])


@pytest.mark.parametrize("case, step_of_bytes, label", [
    ("bandwidth: the step is its bytes at 90 % of the datasheet", lambda b: b / H100 / 0.9, regime.AT),
    ("overhead: a fixed cost 9× the shortest step's bytes", lambda b: 9 * 14.3e9 / H100 + b / H100, regime.BELOW),
    ("above: the step grows as the square of its bytes", lambda b: (b / 14.3e9) ** 20 * 1e-3, regime.ABOVE),
    ("equal steps", lambda b: 0.004, regime.BELOW),
])
def test_the_itl_table_labels_the_step_against_its_bytes(case, step_of_bytes, label):
    spec = get_spec("mistral-7b-v0.3")                         # no window: the cache grows to 32,768 tokens
    table = sweep_figures.itl_table(_itl(spec, [128, 1024, 8192, 32768], step_of_bytes), spec, "bf16")
    last = table.iloc[-1]
    assert last["step growth ÷ bytes growth"] == pytest.approx(last["step ÷ first"] / last["bytes ÷ first"])
    assert last["step growth ÷ bytes growth label"] == label, case
    assert table.iloc[0]["step growth ÷ bytes growth label"] == regime.AT       # the first row against itself
    renders(table)


@pytest.mark.parametrize("record", CPUS)
def test_the_itl_table_on_both_cpu_records_with_the_gpu_floor(record):
    on, itl = recorded("01/itl", record)
    table = sweep_figures.itl_table(itl, on.spec, on.dtype, lambda c: on_gpu.gpu_plan(context=c).step_floor_s, "floor")
    ok = itl[~itl["oom"]]
    assert list(table["context"]) == [int(c) for c in ok["context"]]
    assert table["bytes read"].iloc[-1] == decode_cost(on.spec, int(ok["context"].iloc[-1]), 1, on.dtype).bytes
    assert table["floor"].iloc[0] == pytest.approx(on_gpu.gpu_plan(context=int(ok["context"].iloc[0])).step_floor_s * 1e3)
    renders(table)


def test_the_itl_table_on_zero_one_sample_and_nothing():
    spec = get_spec("mistral-7b-v0.1")
    zero = sweep_figures.itl_table(frame([{"context": c, "itl_s": 0.0} for c in (16, 64)]), spec, "bf16")
    assert zero["step growth ÷ bytes growth label"].tolist() == [regime.NONE, regime.NONE]
    one = sweep_figures.itl_table(frame([{"context": 16, "itl_s": 0.003}]), spec, "bf16")
    assert len(one) == 1 and one["step growth ÷ bytes growth label"].iloc[0] == regime.AT
    nothing = sweep_figures.itl_table(frame([{"context": 16, "oom": True}], oom_at=16), spec, "bf16")
    assert nothing.empty
    for t in (zero, one, nothing):
        renders(t)


# ----------------------------------------------------------------------------- serving one after another, then together

def comparison(tokens: list[int], seq_prefill: float, seq_step: float, bat_prefill: float, bat_step: float):
    """A synthetic ServingComparison: requests of `tokens` new tokens each, one after another and together."""
    seq, t = [], 0.0
    for i, k in enumerate(tokens):
        first = t + seq_prefill
        seq.append(naive.RequestTiming(i, 100, k, t, first, first + (k - 1) * seq_step, [1] * k))
        t = first + (k - 1) * seq_step
    bat = [naive.RequestTiming(i, 100, k, 0.0, bat_prefill, bat_prefill + (k - 1) * bat_step, [1] * k)
           for i, k in enumerate(tokens)]
    return naive.ServingComparison(
        naive.ServeResult("one after another", seq, t, sum(tokens)),
        naive.ServeResult("together (one batch)", bat, bat_prefill + (max(tokens) - 1) * bat_step, max(tokens)))


@pytest.mark.parametrize("record", CPUS)
def test_the_batching_table_on_both_cpu_records(record):
    _, served = recorded("01/serving", record)
    table = sweep_figures.batching_table(naive.latency_cost(served)).set_index("figure")
    r = served.batched.tokens_per_s / served.sequential.tokens_per_s
    assert table.loc["throughput (tokens/s)", "together ÷ one after another"] == pytest.approx(r)
    assert table.loc["throughput (tokens/s)", "together ÷ one after another label"] == regime.label(r)
    same = sweep_figures.same_tokens(served)
    assert same["requests"].iloc[0] == len(served.batched.timings)
    renders(table.reset_index()), renders(same)


@pytest.mark.parametrize("case, c, throughput, step", [
    ("a GPU-like batch: the step costs the same", comparison([40] * 8, 0.015, 0.004, 0.020, 0.004), regime.ABOVE, regime.AT),
    ("the batch slower than one by one", comparison([10] * 4, 0.01, 0.01, 0.30, 0.08), regime.BELOW, regime.ABOVE),
    ("equal modes", comparison([10], 0.01, 0.01, 0.01, 0.01), regime.AT, regime.AT),
])
def test_the_batching_table_on_synthetic_regimes(case, c, throughput, step):
    table = sweep_figures.batching_table(naive.latency_cost(c)).set_index("figure")
    assert table.loc["throughput (tokens/s)", "together ÷ one after another label"] == throughput, case
    assert table.loc["median decode step (ms)", "together ÷ one after another label"] == step, case


def test_serving_tables_take_a_wall_time_of_zero_and_a_mode_that_ran_out():
    c = comparison([3, 3], 0.0, 0.0, 0.0, 0.0)
    assert math.isinf(c.sequential.tokens_per_s) and math.isinf(c.batched.tokens_per_s)
    table = sweep_figures.batching_table(naive.latency_cost(c))
    assert table.set_index("figure").loc["median decode step (ms)", "together ÷ one after another label"] == regime.NONE
    renders(table)
    half = naive.ServingComparison(c.sequential, None, "batched: OutOfMemoryError")
    assert sweep_figures.batching_table(naive.latency_cost(half)).empty
    assert sweep_figures.same_tokens(half).empty
    renders(sweep_figures.batching_table(naive.latency_cost(half)))


def test_same_tokens_counts_the_requests_that_agree():
    c = comparison([2, 2, 2], 0.01, 0.01, 0.02, 0.01)
    c.batched.timings[1].tokens = [1, 2]
    same = sweep_figures.same_tokens(c).iloc[0]
    assert (same["requests"], same["same greedy tokens both ways"]) == (3, 2)


# ----------------------------------------------------------------------------- the users sweep and the budget

@pytest.mark.parametrize("record", CPUS)
def test_the_budget_table_on_both_cpu_records(record):
    on, result = recorded("01/users", record)
    users, context = result["users"], result["context"]
    per = kv_cache_bytes(on.spec, context + 1, 1, "fp32")                       # 257 × 2,048 B = 526,336 B
    inside = growth.users_in_budget(users, 8 * 2**20, context)                  # 8 MiB: within the sweep
    assert (inside.per_sequence_bytes, inside.users, inside.largest_batch) == (per, 15, 16)
    assert sweep_figures.budget_table(inside)["users ÷ largest batch label"].iloc[0] == regime.AT
    past = growth.users_in_budget(users, 64 * 2**20, context)
    assert past.users == 127 and sweep_figures.budget_table(past)["users ÷ largest batch label"].iloc[0] == regime.ABOVE
    none = growth.users_in_budget(users, 2**19, context)                        # 512 KiB: not one sequence
    assert none.users == 0 and sweep_figures.budget_table(none)["users ÷ largest batch label"].iloc[0] == regime.BELOW
    for fit in (inside, past, none):
        renders(sweep_figures.budget_table(fit))


def test_the_budget_when_nothing_ran_or_nothing_was_counted():
    assert growth.users_in_budget(frame([{"batch": 1, "oom": True}], oom_at=1), 1e9, 100) is None
    assert sweep_figures.budget_table(None).empty
    zero = growth.users_in_budget(frame([{"batch": 4, "cache_bytes": 0, "formula_bytes": 400}]), 1e9, 100)
    assert zero.users == 0 and zero.per_sequence_bytes == 0
    renders(sweep_figures.budget_table(zero))
    df = frame([{"batch": b, "cache_bytes": b * 1000, "formula_bytes": b * 1000} for b in (1, 2, 4)]
               + [{"batch": 8, "oom": True}], oom_at=8)
    fit = growth.users_in_budget(df, 10_500, 100)                                # the largest batch that ran
    assert (fit.per_sequence_bytes, fit.users, fit.largest_batch) == (1000.0, 10, 4)


def test_the_users_figure_answers_its_question_against_the_budget():
    _, result = recorded("01/users", "cpu-amd-epyc")
    users = result["users"]
    for budget, users_fit in ((8 * 2**20, 15), (64 * 2**20, 127)):
        fit = growth.users_in_budget(users, budget, result["context"])
        ax = sweep_figures.users_figure(users, "test", budget=fit).axes[0]
        assert ax.get_title() == f"How many users fit? {users_fit} of 256 tokens in {budget // 2**20} MiB"


def test_the_gpu_tables_are_the_planners():
    table = on_gpu.gpu_users_table(GPU).set_index("quantity")["value"]
    assert table["sequences whose cache fits beside the weights"] == GPU["users_fit"]
    assert table["memory as CUDA reports it (bytes)"] == GPU["memory_bytes"]
    renders(on_gpu.gpu_users_table(GPU).astype({"value": "object"}))
    for batch in (1, 64, 256):
        t = on_gpu.gpu_batch_table(batch).set_index("row")
        one = on_gpu.gpu_plan(context=1024, batch=1)
        assert t.loc["batch 1", "step floor (ms)"] == pytest.approx(one.step_floor_s * 1e3)
        many = on_gpu.gpu_plan(context=1024, batch=batch)
        if many.fits:
            assert t.loc["your batch ÷ batch 1", "step floor (ms)"] == pytest.approx(many.step_floor_s / one.step_floor_s)
        renders(t.reset_index())


def test_the_budgets_notebook_01_offers_are_powers_of_two_named_as_fmt_iec_names_them():
    from helpers import preflight
    from helpers.formulas.units import fmt_iec

    found = {c.name: c for c in preflight.controls()}
    budget = found["WORKSHOP_USERS_BUDGET"]
    assert budget.notebook == "01" and budget.allowed == [fmt_iec(2**k) for k in range(20, 39)]
    assert found["WORKSHOP_USERS_CONTEXT"].notebook == "01"


# ----------------------------------------------------------------------------- computed facts 01 and 02 state in prose

def test_the_computed_facts_the_static_prose_states():
    mistral = get_spec("mistral-7b-v0.1")
    assert kv_bytes_per_token(mistral, "bf16") == 2 * 32 * 8 * 128 * 2 == 131_072
    # v0.1's window caps a sequence's cache: transformers keeps window − 1 slots per layer
    assert kv_cache_bytes(mistral, 16384, 1, "bf16", window_slots=4095) == 4095 * 131_072
    # 01 §4: a decode step of Mistral 7B at batch 1 and 1,024 tokens is under the H100's ridge point: memory-bound
    assert forward_cost("mistral-7b-v0.1", 1, 1023).intensity < GPU["peak_flops"] / GPU["bandwidth"]
    assert on_gpu.gpu_plan(context=1024, batch=1).bound == "memory"
    # 02: the talk's "80 users at 4k ≈ 43 GB" is 42.9·10⁹ B, 40 GiB
    assert 80 * 4096 * 131_072 == 40 * 2**30 and round(80 * 4096 * 131_072 / 1e9, 1) == 42.9


def test_the_memory_basis_02_states():
    """An H100's "80 GB" is 80 GiB of HBM3 (five 16 GiB stacks); CUDA reports about 1 % less (issue 45)."""
    from helpers.formulas.gpus import get_gpu

    h100 = get_gpu("H100 SXM")
    assert h100.memory_gb == 80 and 5 * 16 == 80
    assert 0.98 < h100.memory_reported_gib / 80 < 1.0                         # 79.11 GiB: 1.1 % less than 80 GiB
    assert round(80 * 2**30 / 1e9, 1) == 85.9


def test_the_installed_transformers_keeps_window_minus_one_slots():
    """02 and 01 say a sliding-window layer keeps window − 1 tokens between steps: the installed library's code."""
    import inspect

    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    src = inspect.getsource(DynamicSlidingWindowLayer.update)
    assert "-self.sliding_window + 1" in src
    assert "[batch_size, num_heads, seq_len, head_dim]" in inspect.getdoc(DynamicLayer)


def _vllm_file(relative: str):
    """A file of the vLLM that `make engines` installs (.venv-vllm), or a skip where it is not installed."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = sorted(root.glob(f".venv-vllm/lib/python3*/site-packages/vllm/{relative}"))
    if not found:
        pytest.skip("vLLM is not installed here (.venv-vllm)")
    return found[0].read_text()


def test_what_02_says_of_vllms_memory_at_its_source():
    """02 §3: vLLM's default gpu_memory_utilization is 0.92 (0.9 before), its cache gets ⌈total × utilization⌉
    less what start-up consumed and the profiling run's transient peak."""
    assert "gpu_memory_utilization: float = Field(default=0.92" in _vllm_file("config/cache.py")
    assert "init_snapshot.total_memory * cache_config.gpu_memory_utilization" in _vllm_file("v1/worker/utils.py")
    mem = _vllm_file("utils/mem_utils.py")
    assert "result.non_kv_cache_memory = result.total_consumed + result.transient_peak_headroom" in mem
