import pytest

from helpers.formulas import units


def test_kv_bytes_shown_three_ways():
    # The talk quoted "128 KB" and "131 KB" for the same number; both are right in their unit.
    assert units.fmt_bytes(131_072) == "131,072 B = 128 KiB = 131 kB"


def test_gb_and_gib_differ():
    assert units.fmt_si(14_483_464_192) == "14.48 GB"
    assert units.fmt_iec(14_483_464_192) == "13.49 GiB"


@pytest.mark.parametrize("alias,canonical", [("bfloat16", "bf16"), ("torch.float16", "fp16"),
                                             ("float32", "fp32"), ("FP8", "fp8")])
def test_dtype_aliases(alias, canonical):
    assert units.normalize_dtype(alias) == canonical


def test_dtype_bytes():
    assert units.dtype_bytes("bf16") == 2 and units.dtype_bytes("int4") == 0.5 and units.dtype_bytes("fp32") == 4


def test_unknown_dtype_says_what_is_allowed():
    with pytest.raises(ValueError, match="allowed: .*bf16"):
        units.normalize_dtype("fp7")
