"""Notebook 07's results as tables, on every value a measurement can take (zero, nan, one sample, an empty run,
below / at / above each reference); the computed facts its static prose states, pinned; where prompt lookup's
drafts came from, by hand; and each statement about vLLM and transformers checked against their source."""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from helpers.formulas import regime, speculation
from helpers.present import plots
from helpers.serving import batching, engine_caches, engine_runs, kv_cache, paging, speculative, tables, trained_profile
from helpers.serving.naive import RequestTiming, ServeResult

ROOT = Path(__file__).resolve().parent.parent
MODEL, GPU = "mistral-7b-v0.1", "H100 SXM"


def on_off(p: int, n: int, off, on) -> kv_cache.CacheOnOff:
    steps = [kv_cache.CacheStep(i, p + i, off(p + i), on(i), p + i, p if i == 0 else 1) for i in range(n)]
    return kv_cache.CacheOnOff(steps, p, n, True, sum(s.seconds_without_cache for s in steps),
                               sum(s.seconds_with_cache for s in steps), kv_cache.work_without_cache(p, n), p + n - 1)


# ----------------------------------------------------------------------------- the KV cache on and off

@pytest.mark.parametrize("off, on, label", [
    (lambda t: 5e-3 + 1e-6 * t, lambda i: 5e-3, regime.BELOW),        # a fixed part per step: the overhead regime
    (lambda t: 1e-5 * t, lambda i: 1e-5 * (64 if i == 0 else 1), regime.AT),   # time follows the tokens
    (lambda t: 1e-7 * t * t, lambda i: 1e-7 * (64 * 64 if i == 0 else 1), regime.ABOVE),
    (lambda t: 0.0, lambda i: 0.0, regime.NONE),                     # a timer that saw nothing
])
def test_cache_ratio_frame_labels_the_time_ratio_against_the_work_ratio(off, on, label):
    r = on_off(64, 48, off, on)
    row = tables.cache_ratio_frame(r, kv_cache.step_fit(r)).iloc[0]
    assert row["work ratio (no cache ÷ cache)"] == pytest.approx(r.tokens_without_cache / r.tokens_with_cache)
    assert row["label"] == label


def test_step_fit_separates_the_fixed_part_and_says_nothing_from_one_length():
    fixed, per_token = kv_cache.step_fit(on_off(64, 48, lambda t: 5e-3 + 2e-6 * t, lambda i: 5e-3))
    assert fixed == pytest.approx(5e-3) and per_token == pytest.approx(2e-6)
    one = kv_cache.step_fit(on_off(64, 1, lambda t: 5e-3, lambda i: 5e-3))
    assert math.isnan(one[0]) and math.isnan(one[1])
    falling = kv_cache.step_fit(on_off(64, 48, lambda t: 9e-3 - 3e-5 * (t - 64), lambda i: 4e-3))
    assert falling[1] < 0                                     # a shared machine whose load eased: a number
    assert tables.cache_ratio_frame(on_off(64, 1, lambda t: 0.0, lambda i: 0.0), one).shape[0] == 1


def test_cache_on_gpu_both_ways_read_the_weights_once_below_the_ridge():
    """The prose: below the length where a no-cache step turns compute-bound, both ways take the same time; past
    it the no-cache step grows with its tokens."""
    short = kv_cache.on_gpu(MODEL, GPU, 64, 48)
    ridge = int(short["no cache compute-bound from (tokens)"].iloc[0])
    assert short.shape[0] == 2 and short["tokens of the step"].iloc[1] < ridge
    assert regime.label(regime.ratio(short["no cache (ms)"].iloc[1], short["KV cache (ms)"].iloc[1])) == regime.AT
    long_ = kv_cache.on_gpu(MODEL, GPU, ridge, 4 * ridge)
    assert kv_cache.gpu_floor(MODEL, GPU, int(long_["tokens of the step"].iloc[1])).bound == "compute"
    first, last = long_["no cache (ms)"]
    assert last > first and last > 2 * long_["KV cache (ms)"].iloc[1]


# ----------------------------------------------------------------------------- paged attention

def sim(scheme, running, steps=10):
    rows = [{"step": i, "running": running, "used": 1.0, "reserved": 2.0, "internal waste": 1.0,
             "external fragmentation": 0.0} for i in range(steps)]
    return paging.SimResult(scheme, 100, steps, rows, running, 0)


def test_simulation_frame_on_an_empty_run_and_a_zero_baseline():
    assert tables.simulation_frame([]).empty
    empty = paging.SimResult("contiguous", 0, 0)
    frame = tables.simulation_frame([empty, empty])
    assert list(frame["label"]) == [regime.NONE, regime.NONE]            # 0 ÷ 0: nothing to compare


def test_simulation_frame_labels_paging_against_contiguous():
    frame = tables.simulation_frame([sim("contiguous", 8), sim("paged", 14)])
    assert list(frame["label"]) == [regime.AT, regime.ABOVE]
    assert frame["÷ contiguous"].iloc[1] == pytest.approx(14 / 8) and frame["holding ÷ reserved"].iloc[0] == 0.5


# ----------------------------------------------------------------------------- continuous batching

def serve(mode, wall, tokens=(3, 3)):
    timings = [RequestTiming(i, 5, n, 0.0, wall / 2, wall, [1] * n) for i, n in enumerate(tokens)]
    return ServeResult(mode, timings, wall, len(tokens))


@pytest.mark.parametrize("wall, label", [(0.0, regime.NONE), (0.1, regime.ABOVE), (1.0, regime.AT), (9.0, regime.BELOW)])
def test_batching_frame_labels_each_way_against_one_after_another(wall, label):
    base = serve("one after another", 1.0)
    frame = batching.batching_frame([base, serve("x", wall)], base)
    assert frame["label"].iloc[1] == label and frame["label"].iloc[0] == regime.AT


def test_an_empty_run_and_a_zero_wall_make_numbers_not_errors():
    empty = ServeResult("nothing", [], 0.0, 0)
    row = batching.batching_frame([empty], empty).iloc[0]
    assert math.isnan(row["tokens/s"]) and math.isnan(row["median TTFT s"])
    assert math.isnan(row["same tokens as one after another"]) and row["label"] == regime.NONE
    assert math.isnan(batching.idle_share([], 0.0, 4))


def test_decode_on_gpu_batch_one_and_the_largest_batch_that_fits():
    frame = batching.decode_on_gpu(MODEL, GPU, 4096, (1, 16))
    assert list(frame["batch"])[:2] == [1, 16] and frame["batch"].iloc[-1] == 115      # memory.max_users' worked example
    assert frame["weights' share of the bytes"].is_monotonic_decreasing
    assert frame["÷ batch 1"].iloc[0] == 1 and (frame["÷ batch 1"].iloc[1:] > 1).all()


# ----------------------------------------------------------------------------- chunked prefill

def chunk_run(budget, worst, ttft, steps=1):
    return engine_runs.ChunkedRun(budget, 512, steps, min(budget, 512), worst, worst, ttft)


@pytest.mark.parametrize("worst, label", [(5.0, regime.BELOW), (50.0, regime.AT), (80.0, regime.ABOVE),
                                          (None, regime.NONE), (0.0, regime.BELOW)])
def test_chunked_frame_labels_the_others_worst_gap(worst, label):
    frame = tables.chunked_frame([chunk_run(520, 50.0, 60.0), chunk_run(64, worst, 90.0, 8)])
    assert frame["label"].iloc[1] == label
    assert tables.chunked_frame([chunk_run(520, None, 0.0)])["label"].iloc[0] == regime.NONE


def test_chunks_on_gpu_each_chunk_holds_the_others_less_than_the_whole_prefill():
    frame = batching.chunks_on_gpu(MODEL, GPU, 4096, 512)
    assert len(frame) == 1 + 4096 // 512 and frame["tokens"].iloc[0] == 4096
    assert (frame["floor (ms)"].iloc[1:] < frame["floor (ms)"].iloc[0]).all()
    assert frame["step"].iloc[1] == "chunk 1"


# ----------------------------------------------------------------------------- prefix caching

def run(cache, reused, prompt=100):
    return engine_caches.CacheRun(cache, prompt, reused, reused / prompt, 0, [reused], [prompt])


@pytest.mark.parametrize("radix, hashed, label", [(78, 64, regime.ABOVE), (64, 64, regime.AT), (0, 0, regime.NONE),
                                                  (5, 0, regime.ABOVE), (40, 64, regime.BELOW)])
def test_cache_hits_frame_labels_the_tree_against_the_hashes(radix, hashed, label):
    frame = tables.cache_hits_frame({"t": engine_caches.CacheHits(run("radix", radix), run("hash", hashed), True)})
    assert frame["label"].iloc[0] == label


@pytest.mark.parametrize("cold, warm, label", [(330.0, 10.0, regime.AT), (100.0, 10.0, regime.BELOW),
                                               (900.0, 10.0, regime.ABOVE), (0.0, 0.0, regime.NONE)])
def test_prefix_ttft_frame_labels_the_saving_against_the_token_ratio(cold, warm, label):
    ratio = cold / warm if warm else float("nan")
    r = engine_caches.PrefixTTFT(1000, 32, "radix", cold, warm, ratio, [1000], True)
    assert tables.prefix_ttft_frame(r)["label"].iloc[0] == label     # token ratio 1032 ÷ 32 = 32.25


def test_hit_on_gpu_by_hand():
    row = engine_caches.hit_on_gpu(MODEL, GPU, 1000, 32).iloc[0]
    assert row["cold (ms)"] > row["warm (ms)"] and row["warm bound"] == "memory"
    assert row["token ratio"] == pytest.approx(1032 / 32)


# ----------------------------------------------------------------------------- speculative decoding

def test_copies_from_the_prompt_by_hand():
    """prompt 1 2 3 4 5 1 2, output 3 4 5 9, k = 4: the 2-gram (1, 2) first occurs at the start, so the round
    drafts the 3 tokens after it (3 4 5; only 3 fit before the last token), all kept, all from the prompt."""
    assert speculative.copies([1, 2, 3, 4, 5, 1, 2], [3, 4, 5, 9], 4) == Counter(rounds=1, prompt_drafted=3, prompt_kept=3)


def test_copies_from_the_models_own_loop_by_hand():
    """prompt 7, output 1 2 1 2 1 2 1 2: nothing recurs for three rounds; then the 1-gram (1) copies 2 1 from the
    output (both kept), then the 3-gram (2 1 2) copies 1 (kept): 5 rounds, 3 drafts, every one from the output."""
    assert speculative.copies([7], [1, 2] * 4, 4) == Counter(rounds=5, output_drafted=3, output_kept=3)
    assert speculative.copies([7], [], 4) == Counter()
    assert speculative.copies([7], [3], 4) == Counter(rounds=1)


def test_output_loop_names_the_cycle_an_output_ends_in():
    assert speculative.output_loop([5, 6, 1, 2, 3, 1, 2, 3, 1, 2, 3]) == ((1, 2, 3), 3)
    assert speculative.output_loop([9] * 48) == ((9,), 48)
    assert speculative.output_loop([1, 2, 3, 4, 5, 6]) == ((), 0)
    assert speculative.output_loop([]) == ((), 0)
    assert speculative.output_loop([1, 2, 1, 2]) == ((), 0)                # two repeats: not yet a loop
    assert speculative._loop_text([[1, 2, 3] * 4], str) == "“(1, 2, 3)” × 4"
    assert speculative._loop_text([[1, 2, 3] * 4, [4, 5, 6, 7]], str) == "“(1, 2, 3)” in 1 of 2"


def test_copies_replay_the_engines_rounds_on_the_trained_model(tiny_trained):
    """copies() replays the loop from its output alone: as many rounds, and as many kept drafts, as the engine's
    own prompt-lookup run on each of the four prompts."""
    from helpers.engine import speculative as loop
    from helpers.engine.request import SamplingParams

    for p in speculative.prompts(tiny_trained.tokenizer):
        r = loop.generate(tiny_trained.model, [list(p.ids)], SamplingParams(max_tokens=24, ignore_eos=True), k=4,
                          drafter=loop.PromptLookup(3))
        c = speculative.copies(p.ids, r.outputs[0], 4)
        assert c["rounds"] == len(r.rounds) == r.target_passes
        assert c["prompt_kept"] + c["output_kept"] == sum(a for _, a in r.rounds)
        assert c["prompt_drafted"] + c["output_drafted"] == sum(d for d, _ in r.rounds)


def test_the_prompts_copy_edit_a_passage_of_the_novel_and_ask_open_questions(tiny):
    from helpers.measure.quality import encode

    ps = speculative.prompts(tiny.tokenizer)
    assert [p.name for p in ps] == ["copy-edit 1", "open question 1", "copy-edit 2", "open question 2"]
    assert len({p.ids for p in ps}) == 4                                  # a batch of different prompts
    passage = speculative._passages(1)[0]
    assert 0 < len(passage) <= speculative.PASSAGE_CHARS
    assert tuple(encode(tiny.tokenizer, speculative.EDIT.format(passage=passage))) == ps[0].ids
    assert trained_profile("tiny") == "tiny-trained" == trained_profile("tiny-trained")
    assert trained_profile("mistral-7b") == "mistral-7b"


def test_speculative_runs_a_row_per_drafter_its_speed_up_labelled(tiny):
    frame = speculative.speculative_runs(tiny.model, speculative.prompts(tiny.tokenizer)[:1], 8, k=2, draft_layers=1,
                                         repeats=1, library=False)
    assert list(frame["k"]) == [0, 2, 2] and frame["speed-up"].iloc[0] == 1.0 and frame["label"].iloc[0] == "–"
    assert list(frame["label"].iloc[1:]) == [regime.label(s) for s in frame["speed-up"].iloc[1:]]
    assert frame["identical to plain"].all()                              # lossless, greedy
    copied = frame["drafts from the prompt (kept of drafted)"]
    assert copied.iloc[1].count(" of ") == 1 and plots.cell_text(copied.iloc[0]) == "–"


@pytest.mark.parametrize("alpha, k, total", [(0.0, 4, 1.0), (1.0, 3, 4.0), (0.6, 0, 1.0), (0.5, 2, 1.75)])
def test_tokens_per_pass_frame_on_its_extremes(alpha, k, total):
    frame = tables.tokens_per_pass_frame(speculation.tokens_per_pass_parts(alpha, k)).set_index("term")
    assert frame.loc["E = 1 + α + … + α^k", "value"] == pytest.approx(total)
    assert frame.loc["closed form (1 − α^(k+1)) ÷ (1 − α)", "value"] == pytest.approx(total)


def test_verify_frame_measured_and_computed():
    measured = tables.verify_frame([speculation.VerifyCost(200, 1, 4, 0.0, 0.0, float("nan"))])
    assert "verify bound by" not in measured.columns
    computed = tables.verify_frame([speculation.verify_step_ratio(MODEL, 4, 512, b) for b in (1, 256)])
    assert list(computed["verify bound by"]) == ["memory", "compute"]


def test_exercise_3_a_compute_bound_verify_pass_needs_a_draft_kept_more_often():
    """The exercise's solution says the batch-256 round needs a higher α than the batch-1 round."""
    need = {b: speculation.break_even_alpha(4, speculation.round_cost(
        speculation.verify_step_ratio(MODEL, 4, 512, b).verify_over_decode, 4, 0.05)) for b in (1, 256)}
    assert need[256] > need[1] > 0


def test_log_summary_frame_on_an_engine_run_and_on_no_step(tiny):
    from helpers.engine.llm import EngineArgs
    from helpers.serving.traces import TraceRequest

    reqs = [TraceRequest(i, tuple(range(3, 40 + 10 * i)), 6) for i in range(3)]
    res, e = engine_runs.serve(tiny.model, reqs, EngineArgs(block_size=8, num_blocks=10, max_num_seqs=3,
                                                              max_batch_tokens=32))
    s = engine_runs.log_summary(e, res, reqs).iloc[0]
    assert s["blocks"] == 10 and s["blocks that prevent preemption"] == 6 + 7 + 8
    assert s["preemptions"] > 0                                           # 10 blocks < the 21 that prevent it
    assert engine_runs.blocks_without_preemption(reqs, 8) == 8              # the longest alone: 57 + 6 tokens
    nothing, e0 = engine_runs.serve(tiny.model, [], EngineArgs())
    assert engine_runs.log_summary(e0, nothing).shape[0] == 1


# ----------------------------------------------------------------------------- statements checked at their source

def test_transformers_continuous_batching_as_the_notebook_describes_it():
    """transformers' manager schedules FIFO by default: decoding requests first, then prefilling and waiting ones,
    each cut to the token budget left; without CPU offload space, a starved request is requeued from scratch."""
    import inspect

    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    from transformers.generation.continuous_batching import scheduler

    cfg = ContinuousBatchingConfig()
    assert cfg.scheduler_type == "fifo" and scheduler.SCHEDULER_MAPPING["fifo"] is scheduler.FIFOScheduler
    assert not cfg.cpu_offload_space
    src = inspect.getsource(scheduler.FIFOScheduler.schedule_batch)
    assert src.index("RequestStatus.DECODING") < src.index("RequestStatus.PREFILLING")
    assert "min(len(request_tokens), token_budget)" in inspect.getsource(scheduler.Scheduler._process_candidates)


def _vllm(path: str) -> str:
    found = sorted(ROOT.glob(f".venv-vllm/lib/python3*/site-packages/vllm/{path}"))
    if not found:
        pytest.skip("vLLM is not installed here (make setup-vllm)")
    return found[0].read_text(encoding="utf-8")


def test_vllm_as_the_notebook_describes_it():
    """Blocks of 16 tokens by default (its CPU backend takes 128); a block's hash from its parent's hash and its
    own tokens; the last running request preempted, its computed tokens reset (recompute); no admission in a
    step that preempted."""
    assert "DEFAULT_BLOCK_SIZE: ClassVar[int] = 16" in _vllm("config/cache.py") and batching.PAGE_SIZE == 16
    utils = _vllm("v1/core/kv_cache_utils.py")
    assert "parent_block_hash" in utils and "hash_function((parent_block_hash, curr_block_token_ids_tuple" in utils
    sched = _vllm("v1/core/sched/scheduler.py")
    assert "preempted_req = self.running[-1]" in sched and "request.num_computed_tokens = 0" in sched
    assert "if not preempted_reqs" in sched
