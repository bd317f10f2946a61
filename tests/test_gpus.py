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
    assert g.memory_bytes == mem * 1e9 and g.bandwidth == pytest.approx(bw * 1e12, rel=0.01)


@pytest.mark.parametrize("g", gpus.catalog(), ids=lambda g: g.name)
def test_fp8_is_dense_and_where_it_exists(g):
    if g.name in NO_FP8:
        assert g.fp8_tflops is None and not g.has_fp8
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


def test_catalog_date_and_rows():
    assert re.fullmatch(r"20\d\d-\d\d( to 20\d\d-\d\d)?", gpus.catalog_date())
    rows = gpus.catalog_rows()
    assert {"name", "memory_gb", "bandwidth_tbs", "bf16_tflops", "fp8_tflops", "usd_per_hour",
            "price_provider", "price_read", "price_source", "spec_source"} <= set(rows[0])
