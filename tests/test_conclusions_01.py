"""The rules notebook 01 says its conclusions with (helpers.measure.growth's growth, order, memory, ITL and users rules,
helpers.serving.naive.batching_verdicts, helpers.measure.tensor_bytes.bytes_match), each fed every regime it can
meet — the two committed CPU records (Intel Xeon, AMD EPYC), a floor-dominated GPU-like run, a fixed-cost-dominated
one, weights read from cache above the copy bandwidth, a quadratic prefill, a window, an out-of-memory point — and
its words checked against the numbers it says it read."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from helpers import records
from helpers.formulas.specs import get_spec
from helpers.formulas.stepcost import decode_cost
from helpers.formulas.memory import kv_cache_bytes
from helpers.formulas.verdicts import change_verdict, factor, share_band
from helpers.measure import growth
from helpers.measure.tensor_bytes import bytes_match
from helpers.formulas import compute_share
from helpers.present import expected, on_gpu, replay
from helpers.serving import naive

from helpers.measure.sweeps import sweep_sizes  # noqa: E402

GPU_SIZES = sweep_sizes("mistral-7b", "cuda")   # notebook 01's sizes on a GPU

CPUS = ("cpu-intel-xeon", "cpu-amd-epyc")
H100 = 3.35e12                                   # B/s, the H100 SXM's datasheet bandwidth


def recorded(key: str, record: str):
    (on, value), _ = replay.load(key, [records.RESULTS / record])
    return on, value


def frame(rows: list[dict], oom_at=None) -> pd.DataFrame:
    df = pd.DataFrame([{**r, "oom": r.get("oom", False)} for r in rows])
    df.attrs["oom_at"] = oom_at
    return df


# ----------------------------------------------------------------------------- the growth law of TTFT

@pytest.mark.parametrize("p, law", [
    (0.0, "slower than linear"), (0.90, "slower than linear"), (0.91, "linear"), (1.0, "linear"), (1.10, "linear"),
    (1.11, "between linear and quadratic"), (1.45, "between linear and quadratic"),
    (1.81, "between linear and quadratic"), (1.82, "quadratic"), (2.0, "quadratic"),
])
def test_growth_law_names_the_exponent_at_each_threshold(p, law):
    # linear within the 10 % change margin of 1, quadratic within it of 2
    assert growth.growth_law(p) == law


def _growth_words_match_the_fit(fit):
    law, quad, fixed = growth.growth_verdicts(fit)
    assert law.evidence["exponent"] == fit.exponent and f"n^{fit.exponent:,.2f}" in law.words
    assert law.words.endswith(growth.growth_law(fit.exponent))
    if fit.c > 0:
        assert quad.evidence["fraction"] == pytest.approx(fit.c * fit.n_max**2 / fit.predict(fit.n_max))
        assert f"({share_band(quad.evidence['fraction'])})" in quad.words
    else:
        assert "no n² term" in quad.words
    if fit.a > 0:
        assert fixed.evidence["fraction"] == pytest.approx(fit.a / fit.predict(fit.n_min))
        assert f"({share_band(fixed.evidence['fraction'])})" in fixed.words
    return law, quad, fixed


@pytest.mark.parametrize("record", CPUS)
def test_ttft_words_on_both_cpu_records(record):
    _, ttft = recorded("01/ttft", record)
    fit = growth.fit_or_none(ttft)
    law, quad, fixed = _growth_words_match_the_fit(fit)
    # both CPUs: n^1.45 / n^1.47 at 2,048 tokens, about half of it the n² term, most of 16 tokens' time fixed cost
    assert law.words.endswith("between linear and quadratic") and "about half" in quad.words and "(most)" in fixed.words
    assert "each longer prompt took at least as long" in growth.order_verdict(ttft, "tokens", "ttft_s", "prompt").words


def test_ttft_words_on_a_gpu_like_run_of_floors():
    floors = on_gpu.gpu_expectations(GPU_SIZES)["ttft_floors_s"]        # the planner's floors, 128 … 16,384 tokens
    ns = list(floors)
    measured = [1 / 0.9 * floors[n] for n in ns]                 # a GPU-like run: each at 90 % of its floor's speed
    df = frame([{"tokens": n, "ttft_s": t} for n, t in zip(ns, measured)])
    _growth_words_match_the_fit(growth.fit_or_none(df))
    local = growth.local_growth_verdict(ns[-2], floors[ns[-2]], ns[-1], floors[ns[-1]], "the floor")
    assert local.evidence["exponent"] == pytest.approx(math.log(floors[ns[-1]] / floors[ns[-2]]) / math.log(2))
    assert local.words.endswith(": linear") and f"grows {factor(floors[ns[-1]] / floors[ns[-2]])}" in local.words


def test_ttft_words_when_a_fixed_cost_dominates():
    ns = [16, 32, 64, 128, 256, 512, 1024, 2048]
    df = frame([{"tokens": n, "ttft_s": 0.050 + 1e-7 * n} for n in ns])       # 50 ms a forward, whatever the prompt
    law, quad, fixed = _growth_words_match_the_fit(growth.fit_or_none(df))
    assert law.words.endswith("slower than linear") and "(nearly all)" in fixed.words


def test_ttft_words_when_attention_dominates():
    ns = [256, 512, 1024, 2048, 4096, 8192]
    df = frame([{"tokens": n, "ttft_s": 1e-4 + 1e-9 * n * n} for n in ns])
    law, quad, _ = _growth_words_match_the_fit(growth.fit_or_none(df))
    assert law.words.endswith(": quadratic") and "(nearly all)" in quad.words


def test_order_names_a_longer_prompt_that_took_less_time():
    # the live run on a busy machine: 16 tokens 314.5 ms, 32 tokens 203.9 ms
    df = frame([{"tokens": 16, "ttft_s": 0.3145}, {"tokens": 32, "ttft_s": 0.2039}, {"tokens": 64, "ttft_s": 0.21}])
    v = growth.order_verdict(df, "tokens", "ttft_s", "prompt")
    assert v.evidence == {"steps": 2, "falls": 1}
    assert "at 1 of 2 steps a longer prompt took less time (16 → 32 tokens: 314.5 → 203.9 ms)" in v.words
    # within the margin (0.21 against 0.2039, 1.03×) is not a fall
    assert change_verdict(0.21 / 0.2039) == "about equal"


# ----------------------------------------------------------------------------- memory growth and the users sweep

@pytest.mark.parametrize("record", CPUS)
def test_memory_words_on_both_cpu_records(record):
    on, mem = recorded("01/memory", record)
    match, per = growth.memory_verdicts(mem, on.spec, on.dtype)
    assert match.words == "equal to the formula at every point (8 of 8)" and match.evidence["largest_gap_bytes"] == 0
    assert per.evidence["bytes_per_token"] == 2048 and per.words.endswith("a straight line through zero")


def test_memory_words_with_a_window_and_an_allocator_peak():
    spec = get_spec("mistral-7b-v0.1")
    ns = [1024, 2048, 4096, 8192, 16384]
    cache = [kv_cache_bytes(spec, n, 1, "bf16", window_slots=4095) for n in ns]
    df = frame([{"tokens": n, "cache_bytes": c, "formula_bytes": c, "peak_above_weights_bytes": 3 * c}
                for n, c in zip(ns, cache)])
    match, per, peak = growth.memory_verdicts(df, spec, "bf16")
    assert "every point (5 of 5)" in match.words
    assert per.evidence["from_tokens"] == 2048 and "131,072 B = 128 KiB = 131 kB per token up to 2,048 tokens" in per.words
    assert f"grows {factor(cache[-1] / cache[1])} for {factor(16384 / 2048)} the tokens" in per.words
    assert "4,096-token window" in per.words
    assert "3.0× the cache" in peak.words and peak.evidence["peak_bytes"] == 3 * cache[-1]


def test_bytes_match_names_a_gap():
    assert bytes_match([10, 20], [10, 20]).words == "equal to the formula at every point (2 of 2)"
    assert bytes_match([79_176_704], [79_176_704], "the count").words == "equal to the count, to the byte"
    v = bytes_match([100, 210, 300], [100, 200, 300])
    assert v.evidence == {"points": 3, "equal": 2, "largest_gap_bytes": 10}
    assert v.words == "equal to the formula at 2 of 3 points; the largest gap is 10 B (5.00 % of the formula)"


@pytest.mark.parametrize("record", CPUS)
def test_users_words_on_both_cpu_records(record):
    _, result = recorded("01/users", record)
    ran, match = growth.users_verdicts(result["users"])
    assert ran.words == "5 of 5 batches ran, none out of memory" and "every point (5 of 5)" in match.words


def test_users_words_where_the_device_ran_out():
    df = frame([{"batch": b, "cache_bytes": b * 10, "formula_bytes": b * 10} for b in (128, 256)]
               + [{"batch": 512, "oom": True}], oom_at=512)
    ran, match = growth.users_verdicts(df)
    assert ran.words == "2 of 3 batches ran; the device ran out of memory at 512 sequences"
    assert ran.evidence["oom_at"] == 512 and "(2 of 2)" in match.words
    only = growth.users_verdicts(frame([{"batch": 8, "oom": True}], oom_at=8))
    assert [v.words for v in only] == ["0 of 1 batches ran; the device ran out of memory at 8 sequences"]


# ----------------------------------------------------------------------------- ITL against the context

def _itl_words_match(verdicts_, lo_s, hi_s, growth_bytes):
    step, cache, order = verdicts_
    assert step.evidence["step_growth"] == pytest.approx(hi_s / lo_s)
    assert step.evidence["bytes_growth"] == pytest.approx(growth_bytes)
    way = change_verdict(step.evidence["ratio"])
    said = {"higher": "grew more than its bytes", "about equal": "grew with its bytes",
            "lower": "got shorter while its bytes grew" if change_verdict(hi_s / lo_s) == "lower" else "grew less than its bytes"}
    assert said[way] in step.words and f"({factor(hi_s / lo_s)})" in step.words
    assert f"({share_band(cache.evidence['fraction'])})" in cache.words
    return way


@pytest.mark.parametrize("record, way", [("cpu-intel-xeon", "higher"), ("cpu-amd-epyc", "about equal")])
def test_itl_words_on_both_cpu_records(record, way):
    # Xeon: 2.83 → 3.43 ms (1.21×) for 1.09× the bytes, 1.11×: more; EPYC: 4.55 → 5.40 ms (1.19×), 1.09×: with them
    on, itl = recorded("01/itl", record)
    ok = itl[~itl["oom"]]
    grew = decode_cost(on.spec, 2048, 1, on.dtype).bytes / decode_cost(on.spec, 16, 1, on.dtype).bytes
    assert _itl_words_match(growth.itl_verdicts(itl, on.spec, on.dtype), ok["itl_s"].iloc[0], ok["itl_s"].iloc[-1],
                            grew) == way


def _itl_frame(spec, contexts, step_of_bytes):
    return frame([{"context": c, "itl_s": step_of_bytes(decode_cost(spec, c, 1, "bf16").bytes)} for c in contexts])


@pytest.mark.parametrize("regime, step_of_bytes, way", [
    ("floor-dominated, GPU-like: 90 % of the floor's speed", lambda b: b / H100 / 0.9, "about equal"),
    ("weights resident in cache: read at 1.7× the copy bandwidth", lambda b: b / (1.7 * H100), "about equal"),
    ("fixed-cost-dominated: a step 10× its floor at the shortest context", None, "lower"),
])
def test_itl_words_on_synthetic_regimes(regime, step_of_bytes, way):
    spec = get_spec("mistral-7b-v0.3")                        # no window: the cache grows to 32,768 tokens
    contexts = [128, 1024, 8192, 32768]
    lo, hi = (decode_cost(spec, c, 1, "bf16").bytes for c in (contexts[0], contexts[-1]))
    if step_of_bytes is None:
        fixed = 9 * lo / H100
        step_of_bytes = lambda b: fixed + b / H100          # noqa: E731
    df = _itl_frame(spec, contexts, step_of_bytes)
    assert _itl_words_match(growth.itl_verdicts(df, spec, "bf16"), step_of_bytes(lo), step_of_bytes(hi), hi / lo) == way, regime


def test_itl_words_when_the_step_fell_on_a_busy_machine():
    # the live run on a loaded 2-core machine: 36.08 ms at 16 tokens, 15.30 ms at 2,048
    on, _ = recorded("01/itl", "cpu-intel-xeon")
    df = frame([{"context": 16, "itl_s": 0.03608}, {"context": 64, "itl_s": 0.0262}, {"context": 2048, "itl_s": 0.01530}])
    grew = decode_cost(on.spec, 2048, 1, on.dtype).bytes / decode_cost(on.spec, 16, 1, on.dtype).bytes
    assert _itl_words_match(growth.itl_verdicts(df, on.spec, on.dtype), 0.03608, 0.01530, grew) == "lower"
    assert "grew less" not in growth.itl_verdicts(df, on.spec, on.dtype)[0].words


def test_bytes_growth_on_the_gpu_is_flat_by_the_margin():
    grow, cache = growth.bytes_growth_verdicts("mistral-7b-v0.1", "bf16", 128, 16384)
    assert grow.evidence["growth"] == pytest.approx(14_758_330_368 / 14_238_236_672)
    assert "grow 1.04× from 128 to 16,384 tokens" in grow.words and "flat by the change margin" in grow.words
    assert cache.words == "the cache read is 4 % of the bytes at 16,384 tokens (a small part)"


# ----------------------------------------------------------------------------- serving one after another, then together

def comparison(n: int, tokens: list[int], seq_prefill: float, seq_step: float, bat_prefill: float, bat_step: float):
    """A synthetic ServingComparison: n requests of `tokens` new tokens each, served with the given prefill and
    step times one after another and together."""
    seq, t = [], 0.0
    for i, k in enumerate(tokens):
        first = t + seq_prefill
        seq.append(naive.RequestTiming(i, 100, k, t, first, first + (k - 1) * seq_step))
        t = first + (k - 1) * seq_step
    bat = [naive.RequestTiming(i, 100, k, 0.0, bat_prefill, bat_prefill + (k - 1) * bat_step)
           for i, k in enumerate(tokens)]
    return naive.ServingComparison(
        naive.ServeResult("one after another", seq, t, sum(tokens)),
        naive.ServeResult("together (one batch)", bat, bat_prefill + (max(tokens) - 1) * bat_step, max(tokens)))


def _serving_words_match(c):
    v = naive.batching_verdicts(c)
    r = c.batched.tokens_per_s / c.sequential.tokens_per_s
    assert v["throughput"].evidence["ratio"] == pytest.approx(r)
    assert ("(fewer)" in v["throughput"].words) == (change_verdict(r) == "lower")
    assert f"({share_band(r / len(c.batched.timings))})" in v["of_batch"].words
    assert v["step"].rule == "speed" and ("longer" in v["step"].words) == (change_verdict(v["step"].evidence["ratio"]) == "lower")
    wait = sum(t.start_s for t in c.sequential.timings) / sum(t.first_token_s for t in c.sequential.timings)
    assert f"({share_band(wait)})" in v["waiting"].words
    idle = sum(max(t.new_tokens for t in c.batched.timings) - t.new_tokens for t in c.batched.timings)
    assert v["idle"].evidence["row_steps"] == idle
    return v


@pytest.mark.parametrize("record", CPUS)
def test_serving_words_on_both_cpu_records(record):
    _, served = recorded("01/serving", record)
    v = _serving_words_match(served)
    # Xeon 2.2× (304 → 683 tokens/s), EPYC 2.6×: both less than half of the batch of 8; each step longer
    assert v["throughput"].words.endswith("the tokens per second") and "(less than half)" in v["of_batch"].words
    assert v["step"].words.endswith("longer") and v["ttft"].words.endswith("sooner")
    assert "(nearly all)" in v["waiting"].words and v["idle"].evidence["row_steps"] == 128


def test_serving_words_on_a_gpu_like_batch():
    # the planner's floors at 1,024 tokens: a step of 8 sequences 1.07× the step of one
    steps = on_gpu.gpu_expectations(GPU_SIZES)["batched_step_s"]
    v = _serving_words_match(comparison(8, [40] * 8, 0.015, steps[1], 0.020, steps[8]))
    assert "(nearly all)" in v["of_batch"].words and v["step"].words.startswith("as long")


def test_serving_words_when_the_batch_is_slower_than_one_after_another():
    v = _serving_words_match(comparison(4, [10, 10, 10, 10], 0.01, 0.01, 0.30, 0.08))
    assert v["throughput"].words.endswith("(fewer)") and "(a small part)" not in v["throughput"].words


def test_no_verdicts_when_a_mode_ran_out_of_memory():
    c = comparison(2, [3, 3], 0.01, 0.01, 0.02, 0.02)
    assert naive.batching_verdicts(naive.ServingComparison(c.sequential, None, "batched: OOM")) is None


# ----------------------------------------------------------------------------- the attention share said

def test_attention_share_words_follow_the_flop_split():
    from helpers.measure.local_models import TINY_CONFIG
    from helpers.formulas.specs import spec_from_config

    tiny = spec_from_config(TINY_CONFIG, "tiny")
    for model, n, band in ((tiny, 2048, "less than half"), ("mistral-7b-v0.1", 16384, "less than half"),
                           ("mistral-7b-v0.1", 4096, "a small part"), (tiny, 8192, "most")):
        v = compute_share.attention_share_verdict(model, n)
        split = compute_share.flop_terms(model, n)
        assert v.evidence["fraction"] == pytest.approx(split.attention_context / split.total)
        assert v.words.endswith(f"({band})") and share_band(v.evidence["fraction"]) == band


# ----------------------------------------------------------------------------- the predictions' results and §5's budget

@pytest.mark.parametrize("record", CPUS)
def test_the_doubling_the_learner_predicts_on_both_cpu_records(record):
    _, ttft = recorded("01/ttft", record)
    d = growth.last_doubling(ttft)
    ok = ttft[~ttft["oom"]].set_index("tokens")["ttft_s"]
    assert (d.n0, d.n1) == (1024, 2048)                       # the sweep's last doubling, 16 … 2,048 tokens
    assert d.ratio == pytest.approx(ok[2048] / ok[1024])
    v = d.reading()
    p = math.log2(ok[2048] / ok[1024])
    assert v.rule == "growth_law" and v.evidence["exponent"] == pytest.approx(p)
    assert v.words == (f"from 1,024 to 2,048 tokens the TTFT grows {factor(d.ratio)}, like n^{p:,.2f}: "
                       f"{growth.growth_law(p)}")
    assert 2 < d.ratio < 4                                     # both CPUs: more than linear work, less than all n²


@pytest.mark.parametrize("law, t, ratio, name", [
    ("a fixed cost only", lambda n: 0.05, 1.0, "slower than linear"),
    ("the weights' work only", lambda n: 1e-5 * n, 2.0, "linear"),
    ("attention only", lambda n: 1e-9 * n * n, 4.0, "quadratic"),
    ("a mix", lambda n: 0.01 + 1e-5 * n + 1e-9 * n * n, None, None),
])
def test_the_doubling_on_synthetic_laws(law, t, ratio, name):
    ns = [256, 512, 1024, 2048, 4096]
    d = growth.last_doubling(frame([{"tokens": n, "ttft_s": t(n)} for n in ns]))
    assert (d.n0, d.n1) == (2048, 4096) and d.ratio == pytest.approx(t(4096) / t(2048)), law
    if ratio is not None:
        assert d.ratio == pytest.approx(ratio) and d.reading().words.endswith(f": {name}")


def test_the_doubling_skips_what_ran_out_of_memory_and_needs_a_pair():
    df = frame([{"tokens": 128, "ttft_s": 0.1}, {"tokens": 256, "ttft_s": 0.25}, {"tokens": 384, "ttft_s": 0.4},
                {"tokens": 512, "oom": True}], oom_at=512)
    d = growth.last_doubling(df)
    assert (d.n0, d.n1, d.ratio) == (128, 256, pytest.approx(2.5))      # 384's half never ran; 512 ran out
    assert growth.last_doubling(frame([{"tokens": 100, "ttft_s": 0.1}, {"tokens": 300, "ttft_s": 0.3}])) is None
    assert growth.last_doubling(frame([{"tokens": 100, "oom": True}], oom_at=100)) is None


@pytest.mark.parametrize("record", CPUS)
def test_the_users_that_fit_a_budget_on_both_cpu_records(record):
    _, result = recorded("01/users", record)
    users, context = result["users"], result["context"]
    per = kv_cache_bytes(get_spec_of(record), context + 1, 1, "fp32")         # 257 × 2,048 B = 526,336 B
    assert per == 526_336
    inside = growth.users_in_budget(users, 8 * 2**20, context)                 # 8 MiB, notebook 01's default here
    assert inside.per_sequence_bytes == per and inside.users == 8 * 2**20 // per == 15 and inside.largest_batch == 16
    assert inside.reading().words == ("15 sequences of 256 tokens fit in 8,388,608 B = 8 MiB = 8.39 MB: each holds "
                                      "526,336 B = 514 KiB = 526 kB of cache (measured), ⌊8,388,608 ÷ 526,336⌋ = 15, "
                                      "within the 16 sequences the sweep measured")
    past = growth.users_in_budget(users, 64 * 2**20, context)
    assert past.users == 64 * 2**20 // per == 127
    assert f"the measured line carried {factor(127 / 16)} past the 16 sequences the sweep ran" in past.reading().words
    none = growth.users_in_budget(users, 2**19, context)                       # 512 KiB: less than one sequence
    assert none.users == 0 and none.reading().words.startswith("not one sequence of 256 tokens fits in")


def get_spec_of(record: str):
    on, _ = recorded("01/users", record)
    return on.spec


def test_the_budget_reads_the_largest_batch_that_ran():
    df = frame([{"batch": b, "cache_bytes": b * 1000 + (7 if b == 2 else 0), "formula_bytes": b * 1000}
                for b in (1, 2, 4)] + [{"batch": 8, "oom": True}], oom_at=8)
    fit = growth.users_in_budget(df, 10_500, 100)
    assert (fit.per_sequence_bytes, fit.users, fit.largest_batch) == (1000.0, 10, 4)
    assert fit.cache_bytes() == 10_000 and fit.cache_bytes(3) == 3000
    assert growth.users_in_budget(frame([{"batch": 1, "oom": True}], oom_at=1), 1e9, 100) is None


def test_the_ttft_figure_has_slope_guides_through_the_longest_point():
    from helpers.present import plots, sweep_figures

    _, ttft = recorded("01/ttft", "cpu-intel-xeon")
    fig = sweep_figures.ttft_figure(ttft, growth.fit_or_none(ttft), "test")
    ax = fig.axes[0]
    guides = {ln.get_label(): ln for ln in ax.get_lines() if ln.get_label().startswith("slope")}
    assert set(guides) == {"slope 1 through the longest prompt: ∝ n, linear",
                           "slope 2 through the longest prompt: ∝ n², quadratic"}
    ok = ttft[~ttft["oom"]]
    for k, line in zip((1, 2), guides.values()):
        (x0, x1), (y0, y1) = line.get_xdata(), line.get_ydata()
        assert (x0, x1) == (2048 / 8, 2048) and y1 == pytest.approx(float(ok["ttft_s"].iloc[-1]) * 1e3)
        assert math.log(y1 / y0) / math.log(x1 / x0) == pytest.approx(k)     # the slope it is labelled with
        assert line.get_color() == plots.GUIDE
    assert {t.get_text() for t in ax.texts} >= {"slope 1", "slope 2"}
    short = frame([{"tokens": 16, "ttft_s": 0.01, "ttft_p90_s": 0.01}, {"tokens": 32, "ttft_s": 0.02, "ttft_p90_s": 0.02}])
    (line,) = [ln for ln in sweep_figures.ttft_figure(short, None, "test").axes[0].get_lines()
               if ln.get_label().startswith("slope 1")]
    assert tuple(line.get_xdata()) == (16, 32)                               # never left of the first point


def test_the_users_figure_answers_its_question_against_the_budget():
    from helpers.present import plots, sweep_figures

    _, result = recorded("01/users", "cpu-amd-epyc")
    users = result["users"]
    for budget, users_fit, past in ((8 * 2**20, 15, False), (64 * 2**20, 127, True)):
        fit = growth.users_in_budget(users, budget, result["context"])
        ax = sweep_figures.users_figure(users, "test", budget=fit).axes[0]
        assert ax.get_title() == f"How many users fit? {users_fit} of 256 tokens in {budget // 2**20} MiB"
        labels = [ln.get_label() for ln in ax.get_lines()] + [c.get_label() for c in ax.collections]
        assert f"your budget for the cache: {budget // 2**20} MiB" in labels
        assert f"{users_fit} fit: the most whose measured cache ≤ the budget" in labels
        assert ("measured bytes per sequence × users, past the sweep" in labels) == past
        assert (users_fit in ax.get_xticks()) == past                     # inside the sweep: labelled beside its point
        assert str(users_fit) in {t.get_text() for t in ax.texts}
    assert sweep_figures.users_figure(users, "test").axes[0].get_title() == "How many users fit?"


def test_the_budgets_notebook_01_offers_are_powers_of_two_named_as_fmt_iec_names_them():
    from helpers import preflight
    from helpers.formulas.units import fmt_iec

    found = {c.name: c for c in preflight.controls()}
    budget = found["WORKSHOP_USERS_BUDGET"]
    assert budget.notebook == "01" and budget.allowed == [fmt_iec(2**k) for k in range(20, 39)]
    assert budget.allowed[0] == "1 MiB" and budget.allowed[-1] == "256 GiB"
    assert found["WORKSHOP_USERS_CONTEXT"].notebook == "01"
