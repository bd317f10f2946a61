"""helpers.parallel measured on this machine: the two-process tensor-parallel forward of the tiny
model equals the single-process one up to the rounding of a sum taken in another order; the offload
bytes and times computed."""
import pytest

from helpers.formulas import regime
from helpers.parallel.disagg import offload_steps


def test_tensor_parallel_forward_equals_single_process():
    from helpers.parallel.tp_demo import run_tp

    r = run_tp(world=2, tokens=8, reps=1)
    assert r.same_argmax and r.logit_scale > 0
    # a sum split over two processes rounds differently: the difference is a few fp32 units at the logits' scale
    assert r.diff_epsilons == regime.epsilons(r.max_abs_diff, r.logit_scale, "fp32") and r.diff_epsilons < 100
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
    from helpers.parallel.views import tp_parts_frame

    assert list(tp_parts_frame(r)["part"])[:2] == ["one process: the whole model", "two processes: the forward"]


def test_tensor_parallel_bad_input():
    from helpers.parallel.tp_demo import run_tp

    with pytest.raises(ValueError, match="at least 2"):
        run_tp(world=1)


def test_offload_steps_by_hand():
    # Llama 3.1 8B at 32k tokens: 32 layers × 2 × 8 KV heads × 128 × 2 B × 32,768 = 4.295 GB;
    # over PCIe Gen5 (64 GB/s each way) 67.1 ms, from HBM (3.35 TB/s) 1.28 ms
    (row,) = offload_steps("llama-3.1-8b", "H100 SXM", contexts=(32768,)).to_dict("records")
    kv = 32 * 2 * 8 * 128 * 2 * 32768
    assert row["KV cache GB"] == pytest.approx(kv / 1e9)
    assert row["over PCIe ms"] == pytest.approx(kv / 64e9 * 1e3)
    assert row["PCIe ÷ HBM time"] == pytest.approx(3.35e12 / 64e9)
