"""`make bench`: scripts/roofline_bench.py returns the roofline figures; scripts/bench.py writes them as JSON with
where they were measured (measured_on), keeps going past a failed section, and refuses unknown sections."""
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench as bench_script  # noqa: E402  (scripts/bench.py)

import machine  # noqa: E402  (scripts/machine.py)
import roofline_bench  # noqa: E402  (scripts/roofline_bench.py)


def test_roofline_figures_on_the_tiny_model(tiny):
    r = roofline_bench.roofline_figures(tiny, repeats=2, with_sizes=False, with_decoding=False)
    assert r["profile"] == "tiny" and r["dtype"] == "fp32" and r["device"] == "cpu"
    assert r["bandwidth_bytes_per_s"] > 1e8
    assert r["copy_bandwidth_bytes_per_s"] > 1e8
    assert r["peak_flops"]["dtype"] == "fp32" and r["peak_flops"]["flops_per_s"] > 1e8
    assert set(r["prefill_tokens_per_s"]) == {"128", "512", "2048"}
    assert all(v > 0 for v in r["prefill_tokens_per_s"].values())
    assert r["decode_floor_s"] == pytest.approx(
        (r["decode_weight_bytes"] + r["decode_kv_bytes"]) / r["bandwidth_bytes_per_s"])
    assert r["decode_efficiency"] == pytest.approx(r["decode_floor_s"] / r["decode_step_s"])
    assert 0 < r["decode_efficiency"]
    assert r["ridge_flop_per_byte"] == pytest.approx(r["peak_flops"]["flops_per_s"] / r["bandwidth_bytes_per_s"])
    json.dumps(r)  # plain data


def test_script_writes_each_section_with_the_machine(tmp_path, monkeypatch):
    def broken():
        raise RuntimeError("no such device")

    def big():
        block = np.ones(300 * 2**20 // 8)   # 300 MiB, touched
        return {"sum": float(block.sum())}

    monkeypatch.setattr(bench_script, "SECTIONS", {"fake": lambda: {"decode_efficiency": 0.5, "nan": float("nan")},
                                                   "broken": broken, "big": big})
    rc = bench_script.run(["big", "fake", "broken"], tmp_path)
    assert rc == 1  # a failed section is reported, the others are still written
    fake = json.loads((tmp_path / "fake.json").read_text())
    assert fake["ok"] and fake["decode_efficiency"] == 0.5 and fake["nan"] is None
    big_peak = json.loads((tmp_path / "big.json").read_text())["peak_rss_bytes"]
    assert big_peak > 300 * 2**20
    if fake["peak_rss_method"] != "process peak so far":      # each section's own peak, not the process's
        assert fake["peak_rss_bytes"] < big_peak - 250 * 2**20
    where = fake["measured_on"]                  # the same for every section of one run
    assert where["device"]["kind"] and where["versions"]["torch"] and where["host"]["torch_threads"] >= 1
    assert json.loads((tmp_path / "big.json").read_text())["measured_on"] == where and "machine" not in fake
    bad = json.loads((tmp_path / "broken.json").read_text())
    assert not bad["ok"] and "no such device" in bad["error"]


def _touch(mib: int) -> float:
    return float(np.ones(mib * 2**20 // 8).sum())


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc/self/status")
def test_peak_memory_is_each_blocks_own_peak():
    gc.collect()   # an earlier test's garbage, collected inside a block, would lower the RSS the block raises
    with machine.PeakMemory() as first:
        _touch(400)
    with machine.PeakMemory() as second:
        _touch(50)
    assert first.method in ("VmHWM reset", "sampled VmRSS") and second.method == first.method
    base = machine._status_bytes("VmRSS")
    assert first.peak_bytes >= base + 390 * 2**20            # the 400 MiB array was resident at once
    assert second.peak_bytes < first.peak_bytes - 300 * 2**20  # reset: the first block's peak is not carried over


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc/self/status")
def test_peak_memory_samples_where_the_reset_is_refused(monkeypatch):
    class Refused:
        def write_text(self, _):
            raise PermissionError("clear_refs not writable")

    monkeypatch.setattr(machine, "_CLEAR_REFS", Refused())
    gc.collect()   # an earlier test's garbage (seen in a test worker: models), collected inside the block, would
    #                lower the RSS by as much as the block raises it
    base = machine._status_bytes("VmRSS")
    with machine.PeakMemory(interval_s=0.005) as mem:
        block = np.ones(200 * 2**20 // 8)
        deadline = time.monotonic() + 10                    # held until a sample has seen it: the sampler's
        while (mem.peak_bytes or 0) < base + 190 * 2**20 and time.monotonic() < deadline:   # thread runs late
            time.sleep(0.005)                                                                # on a loaded machine
        del block
    assert mem.method == "sampled VmRSS" and mem.peak_bytes >= base + 190 * 2**20


def test_script_refuses_unknown_sections(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["bench.py", "nonsense"])
    assert bench_script.main() == 2
    err = capsys.readouterr().err
    assert "unknown section(s) nonsense" in err and "roofline" in err


def test_roofline_is_a_section():
    assert "roofline" in bench_script.SECTIONS


@pytest.mark.slow
def test_bench_capacity_reports_predicted_measured_and_ratio():
    r = bench_script._capacity()
    assert r["profile"] == "tiny" and r["predicted_step_ms"] > 0 and r["measured_step_ms"] > 0
    assert r["ratio_measured_over_predicted"] == pytest.approx(r["measured_step_ms"] / r["predicted_step_ms"])
    json.dumps(r, allow_nan=False)   # make bench writes it as JSON


@pytest.mark.slow
def test_bench_attention_times_both_kernels_at_every_length_on_the_cpu():
    r = bench_script._attention()
    assert r["device"] == "cpu" and r["shape"] == {"batch": 1, "heads": 8, "head_dim": 32, "dtype": "fp32", "causal": True}
    assert [row["tokens"] for row in r["rows"]] == [256, 512, 1024, 2048] and r["oom_at"] is None
    json.dumps(r, allow_nan=False)

