"""helpers.parallel: the links catalog, the collectives model and the parallel decode step, against
values worked by hand from the datasheets and NCCL's latencies."""
import csv

import pytest

from cli_run import in_process as _cli, python_m
from helpers.capacity.planner import plan
from helpers.formulas.gpus import catalog_rows
from helpers.parallel.collectives import (all_reduce_parts, all_reduce_s, all_reduce_wire_bytes, all_to_all_s,
                                          bandwidth_from_all_reduce, send_s)
from helpers.parallel.links import DATA_FILE, custom_link, get_link, links
from helpers.parallel.plan import (bubble_share, busiest_gpu_experts, flattens_at, moe_rows, parallel_step,
                                  parse_parallel, tp_scaling)

M7 = "mistral-7b-v0.1"


def test_links_file_names_catalogued_gpus_with_sources():
    names = {g["name"] for g in catalog_rows()}
    rows = list(csv.DictReader(open(DATA_FILE, encoding="utf-8")))
    assert {r["gpu"] for r in rows} == names          # every GPU has a link, no stray names
    for r in rows:
        assert r["scope"] in ("node", "cluster")
        assert "http" in r["source"], r
        assert r["unit"] in ("GB/s", "Gb/s") and r["direction"] in ("each", "both"), r
        assert float(r["figure"]) > 0 and float(r["hop_latency_us"]) > 0


def test_link_figures_against_their_sources():
    """Each kind of link, per direction or both, as its source counts it (issue 45)."""
    rows = list(csv.DictReader(open(DATA_FILE, encoding="utf-8")))
    # InfiniBand NDR: 400 Gb/s per port in each direction. NVIDIA's Quantum-2 switch (QM9700) gives 64 NDR ports
    # of 400 Gb/s and 51.2 Tb/s of aggregated bidirectional throughput: 64 × 400 × 2 = 51,200 Gb/s
    assert 64 * 400 * 2 == 51_200
    for r in rows:
        if "InfiniBand" in r["link"]:
            rate = 400 if "NDR" in r["link"] else 200           # NDR 400, HDR 200 Gb/s: the per-direction data rate
            assert (float(r["figure"]), r["unit"], r["direction"]) == (rate, "Gb/s", "each"), r
        if r["link"].startswith("NVLink"):                      # NVIDIA prints NVLink's total over both directions
            assert r["direction"] == "both", r
    ib = get_link("H100 SXM", "infiniband", 16)
    assert ib.bandwidth == 400e9 / 8 == 50e9 and "NDR" in ib.name
    # NVLink 4: 18 links × 50 GB/s (25 GB/s each way) = 900 GB/s over both directions, 450 GB/s each way
    assert get_link("H100 SXM", "nvlink").bandwidth == 18 * 25e9 == 450e9
    assert get_link("B200", "nvlink").bandwidth == 18 * 50e9            # NVLink 5: 1.8 TB/s both ways
    # PCIe 5.0 x16 (PCI-SIG): 32 GT/s per lane, 16 lanes, 128b/130b encoding: 63.0 GB/s each direction; NVIDIA's
    # "PCIe Gen5 128 GB/s" is the two directions summed, rounded
    pcie5 = 32e9 * 16 * 128 / 130 / 8
    for gpu in ("H100 SXM", "H200", "B200", "MI300X"):
        assert get_link(gpu, "pcie").bandwidth == pytest.approx(pcie5, rel=0.02)
    assert get_link("A100 80GB", "pcie").bandwidth == pytest.approx(pcie5 / 2, rel=0.02)     # PCIe 4.0: half
    # AMD MI300X: 16 lanes × 32 Gb/s per Infinity Fabric link = 64 GB/s each way, 128 GB/s both (7 links: 896)
    assert get_link("MI300X", "infinity fabric").bandwidth == 16 * 32e9 / 8 and 7 * 128 == 896


def test_datasheet_links_each_way():
    # H100 SXM datasheet: NVLink 900 GB/s, PCIe Gen5 128 GB/s (both directions): 450 and 64 each way
    assert get_link("H100 SXM").bandwidth == 450e9
    assert get_link("H100 SXM", "pcie").bandwidth == 64e9
    assert get_link("B200").bandwidth == 900e9
    assert get_link("L4").name.startswith("PCIe Gen4")
    # the H100 PCIe's NVLink bridge joins pairs only: 4 GPUs fall back to PCIe
    assert get_link("H100 PCIe", gpus=2).name.startswith("NVLink bridge")
    assert get_link("H100 PCIe", gpus=4).name.startswith("PCIe")
    assert links("H100 SXM")[0].bandwidth >= links("H100 SXM")[-1].bandwidth
    with pytest.raises(ValueError, match="no nvlink"):
        get_link("L4", "nvlink")
    with pytest.raises(ValueError, match="allowed"):
        get_link("L4", "carrier pigeon")


def test_ring_all_reduce_by_hand():
    nv = get_link("H100 SXM")                     # 450e9 B/s, 0.47 µs a hop
    # 1 GB over 4 GPUs: 2·3/4 · 1e9 / 450e9 = 3.3333 ms; latency 3.6 µs + 6 × 0.47 µs = 6.42 µs
    assert all_reduce_s(1e9, 4, nv) == pytest.approx(1.5e9 / 450e9 + 6.42e-6, rel=1e-12)
    assert all_reduce_wire_bytes(1e9, 4) == 1.5e9
    assert all_reduce_s(1e9, 1, nv) == 0.0
    # 2 GPUs send half as much as 8 over the wire per byte of message: (N−1)/N
    assert all_reduce_wire_bytes(800, 2) == 800 and all_reduce_wire_bytes(800, 8) == 1400


def test_all_reduce_parts_by_hand():
    """Notebook 09's worked example: Mistral 7B's decode message at batch 8 (8 × 4,096 × 2 B) over 8 H100 SXMs."""
    nv = get_link("H100 SXM", "nvlink", 8)
    p = all_reduce_parts(65_536, 8, nv)
    assert p.wire_bytes == 114_688                                   # 2·7/8 × 65,536
    assert p.bytes_s == pytest.approx(114_688 / 450e9)               # 0.255 µs
    assert p.hops == 14 and p.latency_s == pytest.approx(3.6e-6 + 14 * 0.47e-6)    # 10.18 µs
    assert p.total_s == pytest.approx(10.18e-6 + 114_688 / 450e9) == all_reduce_s(65_536, 8, nv)
    assert p.crossover_bytes == pytest.approx(10.18e-6 * 450e9 * 8 / 14)           # 2,617,714 B
    assert p.latency_share == pytest.approx(10.18e-6 / p.total_s) and p.message_bytes < p.crossover_bytes
    # batch 128 over PCIe Gen5 (64e9 B/s, 1.0 µs): bytes 28.67 µs against 17.6 µs latency, above the crossover
    q = all_reduce_parts(128 * 4096 * 2, 8, get_link("H100 SXM", "pcie", 8))
    assert q.bytes_s == pytest.approx(1_835_008 / 64e9) and q.latency_s == pytest.approx(17.6e-6)
    assert q.latency_share == pytest.approx(17.6 / (17.6 + 28.672)) and q.message_bytes > q.crossover_bytes


def test_bubble_share_by_hand():
    assert bubble_share(2, 4) == pytest.approx(1 / 5)          # (2−1)/(4+2−1)
    assert bubble_share(4, 4) == pytest.approx(3 / 7) and bubble_share(1, 8) == 0
    assert parallel_step(M7, "H100 SXM", pp=4, micro_batches=8, batch=32).bubble_share == pytest.approx(3 / 11)
    with pytest.raises(ValueError):
        bubble_share(0, 4)


def test_all_to_all_and_send_by_hand():
    pcie = get_link("H100 SXM", "pcie")           # 64e9 B/s, 1.0 µs a hop
    # 8 MB per GPU over 8 GPUs: 7/8 · 8e6 / 64e9 = 109.375 µs; latency 3.6 + 7 × 1.0 µs
    assert all_to_all_s(8e6, 8, pcie) == pytest.approx(109.375e-6 + 10.6e-6, rel=1e-12)
    assert send_s(64e6, pcie) == pytest.approx(1e-3 + 4.6e-6, rel=1e-12)


def test_bandwidth_from_all_reduce_inverts_the_model():
    link = custom_link("test", 10e9, 5e-6)
    t = all_reduce_s(4e6, 2, link, base_s=0.0)    # 4e6/10e9 + 2 × 5 µs = 410 µs
    assert t == pytest.approx(410e-6)
    assert bandwidth_from_all_reduce(4e6, 2, t, 10e-6) == pytest.approx(10e9)


def test_tp1_is_the_planner_step():
    s = parallel_step(M7, "H100 SXM", batch=8, context=4096)
    p = plan(M7, "H100 SXM", 1, context=4096, batch=8)
    assert s.step_s == p.step_s and s.communication_share == 0 and s.bubble_share == 0


def test_tp2_all_reduces_by_hand():
    # Mistral 7B: 32 layers, hidden 4096; batch 8 → message 8 × 4096 × 2 B = 65,536 B
    # one all-reduce over NVLink: 3.6 µs + 2 × 0.47 µs + 65,536 / 450e9 s; 64 per step
    s = parallel_step(M7, "H100 SXM", tp=2, batch=8, context=4096)
    one = 3.6e-6 + 0.94e-6 + 65536 / 450e9
    assert s.all_reduce_bytes == 65536 and s.all_reduces_per_step == 64
    assert s.all_reduce_s == pytest.approx(64 * one, rel=1e-12)
    work = plan(M7, "H100 SXM", 2, context=4096, batch=8).step_s
    assert s.step_s == pytest.approx(work + 64 * one, rel=1e-12)
    assert s.communication_share == pytest.approx(64 * one / (work + 64 * one))


@pytest.mark.parametrize("batch", [1, 8, 32, 128])
def test_pcie_flattens_before_nvlink(batch):
    """Notebook 09's prose: at every batch of section 2, PCIe's all-reduces cost more than NVLink's and its
    speed-up flattens at a smaller N (or NVLink's does not flatten)."""
    nv = tp_scaling(M7, "H100 SXM", batch=batch, context=4096)
    pc = tp_scaling(M7, "H100 SXM", batch=batch, context=4096, link="pcie")
    assert [r.tp for r in nv] == [r.tp for r in pc]
    for a, b in zip(nv[1:], pc[1:]):
        assert b.all_reduce_ms > a.all_reduce_ms and b.speed_up < a.speed_up
    # the work part halves with each doubling; communication grows with N
    assert nv[2].work_ms == pytest.approx(nv[1].work_ms / 2, rel=1e-9)
    assert nv[-1].all_reduce_ms > nv[1].all_reduce_ms
    f_nv, f_pc = flattens_at(nv), flattens_at(pc)
    assert f_nv is None or (f_pc is not None and f_pc <= f_nv)


def test_pipeline_bubble_and_memory():
    s = parallel_step(M7, "H100 SXM", tp=2, pp=2, micro_batches=2, batch=8, context=4096)
    assert s.bubble_share == pytest.approx(1 / 3)            # (2−1)/(2+2−1)
    stage = plan(M7, "H100 SXM", 2, context=4096, batch=4, pipeline_stages=2).step_s / 2
    assert s.stage_s == pytest.approx(stage)
    assert s.step_s == pytest.approx(3 * s.slot_s) and s.steady_step_s == pytest.approx(2 * s.slot_s)
    one, two = plan(M7, "H100 SXM", 2, context=4096, batch=1), plan(M7, "H100 SXM", 2, context=4096, batch=1,
                                                                     pipeline_stages=2)
    assert two.weight_bytes_per_gpu == pytest.approx(one.weight_bytes_per_gpu / 2)
    assert two.kv_bytes_per_seq_per_gpu == pytest.approx(one.kv_bytes_per_seq_per_gpu / 2)
    assert two.max_batch > one.max_batch
    with pytest.raises(ValueError, match="micro-batches"):
        parallel_step(M7, "H100 SXM", tp=2, pp=2, micro_batches=3, batch=8)
    with pytest.raises(ValueError, match="layers"):
        parallel_step(M7, "H100 SXM", pp=64, batch=8)


def _busiest_by_sampling(E, k, ep, tokens, trials, seed=0):
    """The busiest GPU's experts by sampling: each token draws k distinct experts of E, uniformly."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(trials):
        chosen = np.argpartition(rng.random((tokens, E)), k, axis=1)[:, :k]
        touched = np.zeros(E, bool)
        touched[chosen.ravel()] = True
        out.append(touched.reshape(ep, E // ep).sum(1).max())
    return float(np.mean(out)), float(np.std(out) / np.sqrt(trials))


@pytest.mark.parametrize("tokens", [1, 2, 8, 32])
def test_busiest_gpu_experts_against_sampling(tokens):
    """The exact expectation against an independent computation: sampled top-k routing (DeepSeek V3's E = 256,
    k = 8 over 8 GPUs), within four standard errors."""
    exact = busiest_gpu_experts(256, 8, 8, tokens)
    mean, se = _busiest_by_sampling(256, 8, 8, tokens, 3000)
    assert abs(exact - mean) < 4 * se + 1e-9, (exact, mean, se)


def test_busiest_gpu_experts_by_hand():
    # one token, k = 2 of E = 4 on 2 GPUs of 2: both on one GPU with probability 2/6 (max 2), else 1 each (max 1)
    assert busiest_gpu_experts(4, 2, 2, 1) == pytest.approx(2 / 6 * 2 + 4 / 6 * 1)
    assert busiest_gpu_experts(256, 8, 1, 1) == pytest.approx(8)            # one GPU holds all 8
    assert busiest_gpu_experts(256, 8, 8, 10**6) == 32                      # every expert touched
    assert busiest_gpu_experts(10, 3, 4, 1) <= 3                            # uneven blocks (3, 3, 2, 2)


def test_moe_all_to_all_share_waits_for_the_busiest_gpu():
    """DeepSeek V3, fp8, 8 H200s, batch 1: averaging the expert reads over the GPUs gives the all-to-all about 61 %
    of (all-to-all + reads); the busiest GPU, which the step waits for, reads about 2.56 experts against a mean
    of 1 and gives about 38 %."""
    (row,) = moe_rows("deepseek-v3", "H200", batches=(1,), ep=8, weight_dtype="fp8").to_dict("records")
    assert row["experts per GPU, mean"] == pytest.approx(1.0)
    assert row["experts on the busiest GPU"] == pytest.approx(2.5637, abs=1e-3)
    assert row["all-to-all share, mean GPU"] == pytest.approx(0.61, abs=0.01)
    assert row["all-to-all share, busiest GPU"] == pytest.approx(0.38, abs=0.01)
    assert row["expert reads ms, busiest GPU"] == pytest.approx(row["expert reads ms, mean GPU"]
                                                                * row["experts on the busiest GPU"] / row["experts per GPU, mean"])


def test_moe_experts_touched_and_all_to_all():
    rows = moe_rows("deepseek-v3", "H200", batches=(1, 64), ep=8, weight_dtype="fp8")
    assert rows["experts touched"][0] == pytest.approx(8 / 256)          # one token: k of E
    assert rows["experts touched"][1] == pytest.approx(1 - (1 - 8 / 256) ** 64)
    # batch 1 over 8 GPUs: 1 token × 8 experts × 7168 × 2 B per GPU, 2 all-to-alls × 58 MoE layers
    link = get_link("H200")
    assert rows["all-to-all ms"][0] == pytest.approx(2 * 58 * all_to_all_s(8 * 7168 * 2, 8, link) * 1e3)
    with pytest.raises(ValueError, match="mixture-of-experts"):
        moe_rows(M7, "H200")


def test_parse_parallel():
    assert parse_parallel("tp=4,pp=2") == {"tp": 4, "pp": 2, "mb": 1}
    assert parse_parallel(" tp = 2 , mb=4") == {"tp": 2, "pp": 1, "mb": 4}
    for bad in ("", "tp=0", "tp=two", "dp=2", "ep=2"):
        with pytest.raises(ValueError):
            parse_parallel(bad)


def test_capacity_cli_parallel():
    base = ["capacity", "--model", M7, "--gpu", "H100 SXM", "--context", "4096", "--batch", "8"]
    r = _cli(*base, "--parallel", "tp=4,pp=2,mb=2")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines() if line.strip()}
    assert lines["parallel.bubble_share"] == ["0.3333"] and "parallel.communication_share" in lines
    for bad in (["--parallel", "tp=4,pp=x"], ["--parallel", "tp=4", "--gpus", "2"], ["--link", "pcie"]):
        r = _cli(*base, *bad)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


# ----------------------------------------------------------------------------- hostile input (issue 20)

@pytest.mark.parametrize("text, needle", [
    ("tp=2,tp=4", "tp is given twice"),            # used to take the last one silently
    ("pp=2,mb=2,pp=4", "pp is given twice"),
    ("tp=\u0664", "ASCII digits"),                  # an Arabic-Indic 4: int() reads it, the CLI must not
    ("tp=\uff12", "ASCII digits"),                  # a full-width 2
    ("tp=" + "9" * 30, "from 1 to"),
    ("pp=0", "from 1 to"),
])
def test_parse_parallel_refuses_repeats_foreign_digits_and_huge_counts(text, needle):
    with pytest.raises(ValueError, match=needle):
        parse_parallel(text)


def test_pipeline_full_only_when_the_micro_batches_in_flight_fit():
    # pp=2 with one micro-batch: keeping both stages busy takes two batches in flight
    fits = parallel_step(M7, "H100 SXM", pp=2, batch=8, context=4096)
    assert fits.in_flight == 16 and fits.steady_fits
    assert fits.steady_step_s == pytest.approx(fits.slot_s) and fits.steady_tokens_per_s == pytest.approx(8 / fits.slot_s)
    top = fits.max_batch                                   # sequences whose KV fits per GPU with 2 stages
    big = top // 2 + 1                                     # one batch fits, two in flight do not
    s = parallel_step(M7, "H100 SXM", pp=2, batch=big, context=4096)
    assert s.fits and s.tokens_per_s is not None
    assert s.in_flight == 2 * big > top and s.steady_fits is False
    assert s.steady_step_s is None and s.steady_tokens_per_s is None
    assert f"{2 * big:,} sequences" in s.steady_reason and f"holds {top:,}" in s.steady_reason
    # with as many micro-batches as stages the batch itself keeps the pipeline full
    even = big + big % 2
    m = parallel_step(M7, "H100 SXM", pp=2, micro_batches=2, batch=even, context=4096)
    assert m.in_flight == even and m.steady_fits and m.steady_step_s == pytest.approx(2 * m.slot_s)
    out = _cli("capacity", "--model", M7, "--gpu", "H100 SXM", "--context", "4096", "--batch", str(big),
               "--parallel", "pp=2")
    assert out.returncode == 0, out.stderr
    assert "parallel.steady_fits             False" in out.stdout and "parallel.steady_step_s" not in out.stdout


def test_more_gpus_than_one_server_talk_over_the_cluster_link():
    from helpers.parallel.links import GPUS_PER_SERVER

    assert GPUS_PER_SERVER == 8
    assert get_link("H100 SXM", None, 8).name.startswith("NVLink")
    ib = get_link("H100 SXM", None, 16)
    assert ib.name.startswith("InfiniBand") and ib.bandwidth == 50e9
    with pytest.raises(ValueError, match="one server"):
        get_link("H100 SXM", "nvlink", 16)
    with pytest.raises(ValueError, match="no catalogued link joins 16"):
        get_link("L40S", None, 16)                         # PCIe only, no link between servers catalogued
    tp16 = parallel_step(M7, "H100 SXM", tp=16, batch=8, context=4096)
    assert tp16.link == ib.label
    assert tp16.all_reduce_s == pytest.approx(2 * 32 * all_reduce_s(8 * 4096 * 2, 16, ib))
    # tp=8 in one server on NVLink, the second stage in another: the stages send over InfiniBand
    s = parallel_step(M7, "H100 SXM", tp=8, pp=2, batch=8, context=4096)
    assert s.link == get_link("H100 SXM").label and s.pp_link == ib.label
    assert s.send_s == pytest.approx(send_s(8 * 4096 * 2, ib))
    r = _cli("capacity", "--model", M7, "--gpu", "H100 SXM", "--context", "4096", "--batch", "8",
             "--parallel", "tp=16", "--link", "nvlink")
    assert r.returncode == 2 and "one server" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_capacity_header_counts_every_gpu_it_prices():  # the real process, once; the rest in-process
    from helpers.formulas.gpus import get_gpu

    r = python_m("capacity", "--model", M7, "--gpu", "H100 SXM", "--context", "4096", "--batch", "8",
                 "--parallel", "tp=1,pp=4")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines() if line.strip()}
    assert lines["gpus"] == ["1"] and lines["pipeline_stages"] == ["4"] and lines["parallel.gpus"] == ["4"]
    assert lines["usd_per_hour_total"] == [f"{4 * get_gpu('H100 SXM').usd_per_hour:.4g}"]


@pytest.mark.parametrize("kw, needle", [
    ({"ep": 0}, "ep"), ({"ep": True}, "ep"), ({"ep": 2.5}, "ep"), ({"ep": 512}, "256 routed experts"),
    ({"batches": ()}, "non-empty"), ({"batches": (0, 8)}, "batch"), ({"batches": 8}, "non-empty"),
])
def test_moe_rows_refuses_bad_ep_and_batches(kw, needle):
    with pytest.raises(ValueError, match=needle):
        moe_rows("deepseek-v3", "H200", **{"batches": (1, 8), "ep": 8, "weight_dtype": "fp8", **kw})


def test_tp_scaling_refuses_what_it_used_to_skip():
    with pytest.raises(ValueError, match="batch"):
        tp_scaling(M7, "H100 SXM", batch=0)                # was [] without a word
    with pytest.raises(ValueError, match="tensor-parallel degree"):
        tp_scaling(M7, "H100 SXM", counts=(1, 0))
    with pytest.raises(ValueError, match="non-empty"):
        tp_scaling(M7, "H100 SXM", counts=4)
    with pytest.raises(ValueError, match="no tensor-parallel degree"):
        tp_scaling(M7, "H100 SXM", batch=10**6)            # fits at no count
    with pytest.raises(ValueError, match="batch"):
        parallel_step(M7, "H100 SXM", batch=8.5)           # was "does not split into 1 equal micro-batches"
