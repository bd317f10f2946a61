"""helpers.parallel measured on this machine: the two-process tensor-parallel forward of the tiny
model equals the single-process one; the eviction keeps exactly sinks + window tokens."""
import pytest

from helpers.formulas.memory import kv_cache_bytes
from helpers.parallel.collectives import all_reduce_s
from helpers.parallel.kv_offload import context_use, eviction_quality, measure_offloaded
from helpers.parallel.offload import offload_steps
from helpers.parallel.links import get_link


def test_tensor_parallel_forward_equals_single_process():
    from helpers.parallel.tp_demo import run_tp

    r = run_tp(world=2, tokens=8, reps=1)
    assert r.max_abs_diff < 1e-4 and r.same_argmax
    assert r.all_reduces == 8                          # 2 per layer × 4 layers of the tiny model
    assert r.message_bytes == 8 * 256 * 4              # tokens × hidden × fp32
    assert r.link_bandwidth > 0 and r.link_latency_s > 0
    # the prediction is the collectives model over the measured link, 8 all-reduces
    assert r.predicted_all_reduce_s == pytest.approx(
        8 * (r.link_latency_s + r.message_bytes / r.link_bandwidth), rel=1e-9)
    # where the forward went, measured: every part timed, the shard's compute what is left of the forward
    # after its waiting and all-reduces, the same message timed alone and right after a matmul
    for v in (r.single_forward_s, r.compute_s, r.compute_alone_s, r.message_all_reduce_s, r.after_compute_all_reduce_s):
        assert v > 0
    assert r.wait_s >= 0 and r.compute_s < r.forward_s
    assert [b["part"] for b in r.breakdown()][:2] == ["one process: the whole model", "two processes: the forward"]
    # the output head is not split: by hand 2 × 256 × 32,000 FLOPs per position against 2 × 3,407,872 for the
    # layers' linear weights (attention over 8 tokens is a rounding error), so ~70 % of the forward is replicated
    head, layers = 2 * 256 * 32000, 2 * 3_407_872
    assert r.replicated_flop_share == pytest.approx(head / (head + layers), rel=0.01)
    assert r.expected_compute_ratio == pytest.approx(r.replicated_flop_share + (1 - r.replicated_flop_share) / 2)


def test_tensor_parallel_bad_input():
    from helpers.parallel.tp_demo import run_tp

    with pytest.raises(ValueError, match="at least 2"):
        run_tp(world=1)


@pytest.fixture(scope="module")
def tiny():
    from helpers.measure.models import load

    return load("tiny")


def test_eviction_keeps_sinks_and_window(tiny):
    r = eviction_quality(tiny, prompt_tokens=64, new_tokens=16, sinks=4, window=28)
    assert r["kv_bytes_kept"] == kv_cache_bytes(tiny.spec, 32, 1, "fp32")     # the real tensors
    assert r["kv_bytes_full"] == kv_cache_bytes(tiny.spec, 79, 1, "fp32")
    assert r["saved"] == pytest.approx(1 - 32 / 79)
    # a window that holds everything changes nothing: the eviction path is exact
    same = eviction_quality(tiny, prompt_tokens=64, new_tokens=16, sinks=4, window=200)
    assert same["top1_agreement"] == 1.0 and same["kl_max"] < 1e-5
    with pytest.raises(ValueError):
        eviction_quality(tiny, sinks=-1)


def test_offload_steps_by_hand():
    # Llama 3.1 8B at 32k tokens: 32 layers × 2 × 8 KV heads × 128 × 2 B × 32,768 = 4.295 GB;
    # over PCIe Gen5 (64 GB/s each way) 67.1 ms, from HBM (3.35 TB/s) 1.28 ms
    (row,) = offload_steps("llama-3.1-8b", "H100 SXM", contexts=(32768,))
    kv = 32 * 2 * 8 * 128 * 2 * 32768
    assert row.kv_gb == pytest.approx(kv / 1e9)
    assert row.over_pcie_ms == pytest.approx(kv / 64e9 * 1e3)
    assert row.slower == pytest.approx(3.35e12 / 64e9)


def test_offloaded_cache_reports_what_ran(tiny):
    r = measure_offloaded(tiny, context=16, steps=2)
    assert r["plain_step_s"] > 0
    assert (r["offloaded_step_s"] is None) == (r["offloaded_error"] is not None)


def test_a_random_model_does_not_read_its_context(tiny):
    """The passage twice: random weights cannot copy, so the second copy is no better predicted than the first
    (a model that reads its context, such as Mistral 7B, predicts a repeat far better: ratio well under 0.5)."""
    r = context_use(tiny, tokens=48, skip=16)
    assert 0.8 < r["second_over_first"] < 1.25 and not r["uses_context"]
    assert r["second_over_first"] == pytest.approx(r["second_copy_perplexity"] / r["first_copy_perplexity"])
    with pytest.raises(ValueError, match="skip"):
        context_use(tiny, tokens=48, skip=47)
