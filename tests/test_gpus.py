"""The GPU catalog: the GPUs the issue names, dense figures that match the vendors' sheets, and a
source for every figure and price."""
import re

import pytest

from helpers.formulas import gpus

# Reference values (memory GB, bandwidth TB/s, dense BF16/FP16 TFLOP/s or None), from the vendors'
# datasheets as quoted in the planner issue; sparsity figures would be twice these.
REFERENCE = {
    "T4": (16, 0.32, 65),
    "L4": (24, 0.30, 121),
    "A10G": (24, 0.60, None),
    "L40S": (48, 0.864, 362),
    "A100 40GB": (40, 1.555, 312),
    "A100 80GB": (80, 2.039, 312),
    "H100 PCIe": (80, 2.0, 756),
    "H100 SXM": (80, 3.35, 989),
    "H200": (141, 4.8, 989),
    "B200": (180, 8.0, 2250),
    "RTX 4090": (24, 1.008, 165),
    "RTX 6000 Ada": (48, 0.96, 364),
    "RTX PRO 6000 Blackwell": (96, 1.792, 504),
    "MI300X": (192, 5.3, 1307),
}
NO_FP8 = {"T4", "A10G", "A100 40GB", "A100 80GB"}


def test_every_named_gpu_is_catalogued():
    assert set(REFERENCE) <= set(gpus.names())
    assert len(gpus.names()) == len(set(gpus.names()))


@pytest.mark.parametrize("name", REFERENCE)
def test_figures_match_the_reference(name):
    g = gpus.get_gpu(name)
    mem, bw, tf = REFERENCE[name]
    assert g.memory_gb == mem
    assert g.bandwidth_tbs == pytest.approx(bw, rel=0.01)
    if tf is not None:
        assert g.bf16_tflops == pytest.approx(tf, rel=0.01), "dense, not 2:4-sparse"
    assert g.memory_bytes == mem * 2**30 and g.bandwidth == pytest.approx(bw * 1e12, rel=0.01)


@pytest.mark.parametrize("g", gpus.catalog(), ids=lambda g: g.name)
def test_fp8_is_dense_and_where_it_exists(g):
    if g.name in NO_FP8:
        assert g.fp8_tflops is None
    else:
        # FP8 tensor cores run twice the 16-bit rate; a sparse figure would show as 4x.
        assert 1.95 <= g.fp8_tflops / g.bf16_tflops <= 2.05


@pytest.mark.parametrize("g", gpus.catalog(), ids=lambda g: g.name)
def test_every_figure_and_price_has_a_source(g):
    assert re.search(r"https?://", g.spec_source), g.name
    assert g.spec_note
    assert 0.1 < g.usd_per_hour < 20
    assert g.price_provider and g.price_product and g.price_note
    assert re.fullmatch(r"20\d\d(-\d\d)?", g.price_read), g.price_read
    assert re.search(r"https?://", g.price_source)


def test_peak_flops_uses_fp8_only_with_fp8_weights_on_fp8_hardware():
    h100 = gpus.get_gpu("H100 SXM")
    assert h100.peak_flops("fp8") == (1979e12, "fp8")
    assert h100.peak_flops("bf16") == (989.5e12, "bf16")
    assert h100.peak_flops("nf4")[1] == "bf16"
    assert gpus.get_gpu("A100 80GB").peak_flops("fp8") == (312e12, "bf16")
    assert gpus.get_gpu("T4").peak_flops("bf16") == (65e12, "fp16")


@pytest.mark.parametrize("text,name", [("h100 sxm", "H100 SXM"), ("H100-SXM", "H100 SXM"), ("h100_sxm5", "H100 SXM"),
                                       ("a100-80gb", "A100 80GB"), ("rtx-pro-6000", "RTX PRO 6000 Blackwell"),
                                       ("mi300x", "MI300X"), ("4090", "RTX 4090")])
def test_lookup_ignores_case_and_punctuation(text, name):
    assert gpus.get_gpu(text).name == name


def test_unknown_gpu_lists_the_choices():
    with pytest.raises(ValueError) as e:
        gpus.get_gpu("H800")
    msg = str(e.value)
    assert "unknown GPU 'H800'" in msg
    for name in gpus.names():
        assert name in msg


def test_catalog_label_and_rows():
    assert re.search(r"prices read 20\d\d-\d\d( to 20\d\d-\d\d)?$", gpus.catalog_label())
    rows = gpus.catalog_rows()
    assert {"name", "memory_gb", "bandwidth_tbs", "bf16_tflops", "fp8_tflops", "usd_per_hour",
            "price_provider", "price_read", "price_source", "spec_source"} <= set(rows[0])


# ----------------------------------------------------------------------------- the memory basis, against its sources
# helpers/data/gpu_memory.csv read here with the csv module, so the checks do not go through the code they test.

def _memory_rows() -> dict[str, dict]:
    import csv

    with open(gpus.MEMORY_FILE, newline="", encoding="utf-8") as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def test_every_catalogued_gpu_has_a_memory_row_with_its_kind():
    rows = _memory_rows()
    assert set(rows) == set(gpus.names())
    for name, r in rows.items():
        assert re.fullmatch(r"HBM2e?|HBM3e?|GDDR6X?|GDDR7", r["memory_type"]), name
        if r["reported_gib"]:
            assert r["source"].startswith("https://") and "GiB" in r["note"], name


def test_hbm_labels_are_stacks_times_the_stack_size_in_gib():
    """The datasheets' stacks × stack size is the label's number, in GiB: an H100's 80 GB is 5 × 16 GiB."""
    stacked = {n: r for n, r in _memory_rows().items() if r["stacks"]}
    assert {"A100 40GB", "A100 80GB", "H100 PCIe", "H100 SXM", "MI300X"} <= set(stacked)
    for name, r in stacked.items():
        g = gpus.get_gpu(name)
        assert r["memory_type"].startswith("HBM") and re.search(r"https?://", r["stacks_source"]), name
        assert float(r["stack_gib"]) in (8, 16, 24, 32, 36), name          # 8/12-high stacks of 8/16/24 Gbit dies
        assert int(r["stacks"]) * float(r["stack_gib"]) == g.memory_gb, name
        assert g.memory_bytes == int(r["stacks"]) * float(r["stack_gib"]) * 2**30, name
    assert gpus.get_gpu("H100 SXM").memory_bytes == 5 * 16 * 2**30 == 85_899_345_920


def test_reported_figures_are_a_little_under_the_label_in_gib_and_over_it_in_gb():
    """What CUDA reports sits just under the label read as GiB — about 1 % for HBM — and above the label read
    as 10⁹ B, which the reported figures rule out as the label's unit."""
    for name, r in _memory_rows().items():
        if not r["reported_gib"]:
            continue
        label, reported = float(gpus.get_gpu(name).memory_gb), float(r["reported_gib"])
        assert gpus.get_gpu(name).usable_memory_bytes == reported * 2**30, name
        assert reported < label, name
        if r["memory_type"].startswith("HBM"):
            assert 0.98 < reported / label < 1 and reported * 2**30 > label * 1e9, name
        else:                                  # GDDR with ECC on keeps 1/16 of it: T4 and L40S report ~92 %
            assert 0.9 < reported / label < 1, name
    h100 = gpus.get_gpu("H100 SXM")
    assert h100.usable_memory_bytes / h100.memory_bytes == pytest.approx(79.11 / 80) and 1 - 79.11 / 80 > 0.01


def test_a_gpu_without_a_reported_figure_gets_its_label_in_gib_less_the_largest_reserve_of_its_kind():
    """By hand from the csv: the smallest reported ÷ label among HBM GPUs is the A100 40GB's 39.50 ÷ 40 = 0.9875,
    among GDDR GPUs the T4's 14.75 ÷ 16 = 0.921875."""
    hbm, gddr = 39.50 / 40, 14.75 / 16
    rows = _memory_rows()
    shares = {kind: min(float(r["reported_gib"]) / gpus.get_gpu(n).memory_gb for n, r in rows.items()
                        if r["reported_gib"] and r["memory_type"].startswith(kind)) for kind in ("HBM", "GDDR")}
    assert shares == {"HBM": pytest.approx(hbm), "GDDR": pytest.approx(gddr)}
    for name, gib in (("MI300X", 192 * hbm), ("B200", 180 * hbm), ("H100 PCIe", 80 * hbm), ("L4", 24 * gddr),
                      ("A10G", 24 * gddr), ("RTX 6000 Ada", 48 * gddr), ("RTX PRO 6000 Blackwell", 96 * gddr)):
        g = gpus.get_gpu(name)
        assert not rows[name]["reported_gib"] and g.memory_reported_gib is None
        assert g.usable_memory_bytes == pytest.approx(gib * 2**30), name
        assert "no reported figure found" in g.usable_memory_note and f"{gib:,.2f} GiB" in g.usable_memory_note
    # the label read as 10⁹ B gave the HBM GPUs 6 % too little: 189.6 GiB is 203.6·10⁹ B, not 192·10⁹
    mi300x = gpus.get_gpu("MI300X").usable_memory_bytes
    assert mi300x == pytest.approx(189.6 * 2**30) and mi300x / 192e9 == pytest.approx(1.0603, abs=1e-4)
