"""The memory hierarchy: cache sizes from the system, the measured staircase, the cited GPU figures."""
import pytest

from helpers.measure import hierarchy as h, microbench
from helpers.present import hood_figures
from helpers.formulas.gpus import catalog


def test_cache_sizes_read_like_the_kernel_writes_them(tmp_path):
    for i, (level, kind, size, shared) in enumerate([(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                                                     (2, "Unified", "1024K", "0"), (3, "Unified", "32768K", "0-1")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")
    levels = [h.CacheLevel(*row) for row in microbench.cache_rows(tmp_path)]
    assert [(c.name, c.size_bytes) for c in h.data_caches(levels)] == [("L1d", 49152), ("L2", 1048576), ("L3", 33554432)]
    assert h.fits_in(49152, h.data_caches(levels)) == "L1d" and h.fits_in(49153, h.data_caches(levels)) == "L2"
    assert h.fits_in(64 * 2**20, h.data_caches(levels)) == "DRAM"
    assert microbench.parse_size("32M") == 32 * 2**20
    with pytest.raises(ValueError, match="cache size"):
        microbench.parse_size("lots")


def test_this_machine_reports_its_caches():
    levels = h.data_caches()
    if not levels:
        pytest.skip("this system does not report its caches")
    assert levels[0].level == 1 and all(c.size_bytes >= 1024 for c in levels)


def test_read_bandwidth_is_a_rate():
    bw = h.read_bandwidth(64 * 1024, bytes_per_sample=8 * 2**20, repeats=2)
    assert 1e8 < bw < 1e13
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


# ----------------------------------------------------------------------- the staircase's levels and its table
# Fed each committed CPU record's 10/staircase (the EPYC's 32 MiB L3 reached past, the Xeon's reported 480 MiB
# L3 never reached) and synthetic curves for what neither shows (a clean staircase, a cache with no step, zero
# rates, one size, none).

MiB, KiB = 2**20, 2**10


def _caches(*sizes):
    return [h.CacheLevel(i + 1, "Data" if i == 0 else "Unified", s, "0") for i, s in enumerate(sizes)]


def _steps(levels):
    """(last size of a level, first of the next): where the curve falls."""
    return [(a.largest_bytes, b.smallest_bytes) for a, b in zip(levels, levels[1:])]


def _stairs(points, caches):
    return [h.Stair(n, bw * 1e9, h.fits_in(n, caches)) for n, bw in points]


def test_staircase_levels_on_the_epyc_record():
    from helpers import records
    from helpers.present import replay

    v, _ = replay.load("10/staircase", [records.RESULTS / "cpu-amd-epyc"])
    levels = h.levels_found(v["stairs"], v["caches"])
    assert _steps(levels) == [(32 * KiB, 64 * KiB), (512 * KiB, 4 * MiB), (8 * MiB, 64 * MiB)]
    assert [lv.reported for lv in levels] == ["L1d", "L2", "L3", "DRAM"]
    table = hood_figures.levels_frame(levels)
    assert table["÷ the last level's"].iloc[-1] == 1.0
    assert table["÷ the last level's"].iloc[0] == pytest.approx(levels[0].median_bandwidth / levels[-1].median_bandwidth)


def test_staircase_levels_on_the_xeon_record_where_no_step_is_its_l3():
    from helpers import records
    from helpers.present import replay

    v, _ = replay.load("10/staircase", [records.RESULTS / "cpu-intel-xeon"])
    assert [c.size_bytes for c in v["caches"]][-1] == 480 * MiB
    levels = h.levels_found(v["stairs"], v["caches"])
    assert levels[-2].largest_bytes == 32 * MiB and levels[-1].sizes_measured == 1    # the curve ends falling
    assert levels[-1].reported == "L3"          # the largest working set measured still fits the reported L3


def test_staircase_levels_on_synthetic_curves():
    caches = _caches(32 * KiB, 1 * MiB, 16 * MiB)
    clean = _stairs([(16 * KiB, 200), (32 * KiB, 198), (64 * KiB, 100), (512 * KiB, 101), (1 * MiB, 99),
                     (2 * MiB, 50), (8 * MiB, 51), (32 * MiB, 20), (64 * MiB, 20.5)], caches)
    levels = h.levels_found(clean, caches)
    assert _steps(levels) == [(32 * KiB, 64 * KiB), (1 * MiB, 2 * MiB), (8 * MiB, 32 * MiB)]
    assert [lv.sizes_measured for lv in levels] == [2, 3, 2, 2]
    # an L2 with no fall at its size: no step there
    flat = _stairs([(16 * KiB, 200), (64 * KiB, 100), (2 * MiB, 99), (32 * MiB, 20)], caches)
    assert _steps(h.levels_found(flat, caches)) == [(16 * KiB, 64 * KiB), (2 * MiB, 32 * MiB)]
    # a rise (noise) is not a step; a fall within 10% is not one either; two equal rates are one level
    assert len(h.levels_found(_stairs([(4 * KiB, 100), (8 * KiB, 120), (16 * KiB, 110)], caches), caches)) == 1
    # two falls in a row are one step: the size between them belongs to no level
    assert _steps(h.levels_found(_stairs([(4 * KiB, 100), (8 * KiB, 50), (16 * KiB, 20)], caches), caches)) == [
        (4 * KiB, 16 * KiB)]


@pytest.mark.parametrize("points", [[(4 * KiB, 0), (8 * KiB, 0), (16 * KiB, 0)],       # zero: a timer saw nothing
                                    [(4 * KiB, 100)],                                   # one sample
                                    [(4 * KiB, 0), (8 * KiB, 100)],                     # a rise from zero
                                    [(4 * KiB, 100), (8 * KiB, 100)],                   # two equal values
                                    []])                                                # an empty run
def test_staircase_levels_and_table_take_every_extreme(points):
    caches = _caches(32 * KiB, 1 * MiB)
    levels = h.levels_found(_stairs(points, caches), caches)
    table = hood_figures.levels_frame(levels)
    assert len(table) == len(levels) and (len(levels) >= 1) == bool(points)
    assert len(levels) <= 1 or points[0][1] > 0


def test_staircase_sizes_reach_past_the_last_cache_within_free_memory():
    assert h.staircase_sizes(_caches(48 * KiB, 2 * MiB, 480 * MiB), free_bytes=64 * 2**30)[-1] == 2048 * MiB
    assert h.staircase_sizes(_caches(48 * KiB, 1 * MiB, 32 * MiB), free_bytes=64 * 2**30)[-1] == 256 * MiB
    # little memory free: halved until it fits a quarter of it, never below 256 MiB
    assert h.staircase_sizes(_caches(48 * KiB, 480 * MiB), free_bytes=4 * 2**30)[-1] == 1024 * MiB
    assert h.staircase_sizes(_caches(48 * KiB, 480 * MiB), free_bytes=2**30)[-1] == 256 * MiB
    assert h.staircase_sizes([], free_bytes=2**30)[0] == 4 * KiB
