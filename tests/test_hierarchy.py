"""The memory hierarchy: cache sizes from the system, the measured staircase, the cited GPU figures."""
import pytest

from helpers.measure import hierarchy as h
from helpers.formulas.gpus import catalog


def test_cache_sizes_read_like_the_kernel_writes_them(tmp_path):
    for i, (level, kind, size, shared) in enumerate([(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                                                     (2, "Unified", "1024K", "0"), (3, "Unified", "32768K", "0-1")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")
    levels = h.cpu_caches(tmp_path)
    assert [(c.name, c.size_bytes) for c in h.data_caches(levels)] == [("L1d", 49152), ("L2", 1048576), ("L3", 33554432)]
    assert h.fits_in(49152, h.data_caches(levels)) == "L1d" and h.fits_in(49153, h.data_caches(levels)) == "L2"
    assert h.fits_in(64 * 2**20, h.data_caches(levels)) == "DRAM"
    assert h.parse_size("32M") == 32 * 2**20
    with pytest.raises(ValueError, match="cache size"):
        h.parse_size("lots")


def test_this_machine_reports_its_caches():
    levels = h.data_caches()
    if not levels:
        pytest.skip("this system does not report its caches")
    assert levels[0].level == 1 and all(c.size_bytes >= 1024 for c in levels)


def test_read_bandwidth_is_a_rate_and_rejects_bad_sizes():
    bw = h.read_bandwidth(64 * 1024, bytes_per_sample=8 * 2**20, repeats=2)
    assert 1e8 < bw < 1e13
    with pytest.raises(ValueError, match="nbytes must be a whole number ≥ 1,024, got 10"):
        h.read_bandwidth(10)
    assert h.working_set_sizes(4096, 32768, 1) == [4096, 8192, 16384, 32768]


def test_gpu_onchip_file_is_complete_and_cited():
    names = {g.name for g in catalog()}
    rows = h.onchip_rows()
    assert {r["name"] for r in rows} == names
    for r in rows:
        assert r["smem_per_sm_kib"] and r["size_source"].strip()
        if r["onchip_bandwidth_tbs"] is not None:
            assert r["bandwidth_source"].strip()


def test_gpu_hierarchy_against_published_figures():
    rows = {r.gpu: r for r in h.gpu_hierarchy()}
    h100 = rows["H100 SXM"]
    # FlashAttention-3, Table 1: SMEM 228 KiB per SM, 31 TB/s per GPU; GMEM 3.35 TB/s. 132 SMs × 228 KiB
    assert h100.smem_total_bytes == 132 * 228 * 1024
    assert h100.onchip_over_hbm_bandwidth == pytest.approx(31 / 3.35)
    # FlashAttention: A100, 192 KB of SRAM per SM (L1 + shared) on 108 SMs, about 19 TB/s; HBM 1.5–2.0 TB/s
    a100 = rows["A100 80GB"]
    assert a100.sms == 108 and a100.onchip_bandwidth == 19e12
    assert 1.5e12 <= a100.hbm_bandwidth <= 2.1e12


def test_staircase_plateaus_by_hand():
    stairs = [h.Stair(4096, 100e9, "L1d"), h.Stair(8192, 120e9, "L1d"), h.Stair(2**26, 10e9, "DRAM"),
              h.Stair(2**27, 30e9, "DRAM")]
    l1, dram = h.plateaus(stairs)
    assert (l1.level, l1.sizes_measured, l1.median_bandwidth, l1.over_dram) == ("L1d", 2, 110e9, 5.5)
    assert (dram.level, dram.median_bandwidth, dram.over_dram) == ("DRAM", 20e9, 1.0)
    assert h.plateaus(stairs[:2])[0].over_dram is None


def test_cpu_threads_sets_and_restores():
    import torch

    before = torch.get_num_threads()
    with h.cpu_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with h.cpu_threads(1, "cuda"):      # a GPU device leaves the CPU threads alone
        assert torch.get_num_threads() == before


def test_bench_sections_are_registered():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import bench as bench_script

    assert {"hierarchy", "attention"} <= set(bench_script.SECTIONS)
