"""One memory basis for a GPU: what the device reports to CUDA (helpers.formulas.gpus' usable_memory_bytes, from
helpers/data/gpu_memory.csv), never its label. The 80 GB H100's users at 4,096 tokens (Mistral 7B v0.1, bf16)
is one number wherever the workshop says it: computed here as each place computes it — notebook 02's table
(the notebook run, its defs read back), the capacity planner notebooks 04 and 06 call, the deck's and the
report's key figures, on_gpu.gpu_users that notebooks 01 and 02 quote, the users notebook 02 asks the learner to
predict — against a worked example by hand."""
import importlib.util
import math
from pathlib import Path

import pytest

from helpers import capacity
from helpers.formulas import gpus, memory
import sys
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import keyfigures  # noqa: E402  (scripts/keyfigures.py)
from helpers.present import expected, on_gpu  # noqa: E402

from helpers.measure.sweeps import sweep_sizes  # noqa: E402

GPU_SIZES = sweep_sizes("mistral-7b", "cuda")   # notebook 01's sizes on a GPU

ROOT = Path(__file__).resolve().parent.parent

# Worked by hand from the published figures (no helper): the H100 SXM reports 79.11 GiB to CUDA (vLLM's log,
# vllm-project/vllm#27508); Mistral 7B v0.1 has 7,241,732,096 parameters (14,483,464,192 B in bf16) and caches
# 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B per token.
REPORTED = 79.11 * 2**30                      # 84,943,715,696.64 B, against the label's 80 GiB = 85.9·10⁹ B
WEIGHTS = 14_483_464_192
PER_TOKEN = 131_072
CONTEXT = 4096
# the whole memory, nothing reserved (the brief's worked example: what a bare PyTorch sweep has)
WHOLE = math.floor((REPORTED - WEIGHTS) / PER_TOKEN / CONTEXT)
# vLLM's reserve: 8 % of the reported memory (gpu_memory_utilization 0.92, vLLM 0.32) + 1.5·10⁹ B of activations and context
RESERVE = 0.08 * REPORTED + 1.5e9
USERS = math.floor((REPORTED - RESERVE - WEIGHTS) / PER_TOKEN / CONTEXT)


def test_the_worked_examples():
    assert REPORTED == pytest.approx(84.94e9, rel=1e-4) and REPORTED > 80e9
    assert (WHOLE, USERS) == (131, 115)
    # on the label's bytes the same equation gives another number: the one this basis replaces
    assert math.floor((80e9 - (0.08 * 80e9 + 1.5e9) - WEIGHTS) / PER_TOKEN / CONTEXT) == 107


def test_every_place_plans_with_what_the_device_reports():
    h100 = gpus.get_gpu("H100 SXM")
    assert h100.usable_memory_bytes == REPORTED and h100.memory_gb == 80
    assert capacity.plan("mistral-7b-v0.1", "H100 SXM", context=CONTEXT).memory_bytes_per_gpu == REPORTED
    assert on_gpu.gpu_expectations(GPU_SIZES)["memory_bytes"] == REPORTED                    # notebook 01's GPU half
    assert "vllm-project/vllm/issues/27508" in h100.memory_source                      # the report, cited
    assert h100.memory_bytes == 80 * 2**30 and REPORTED / h100.memory_bytes == pytest.approx(0.989, abs=1e-3)


@pytest.fixture(scope="module")
def notebook_02(tmp_path_factory):
    """Notebook 02 run as marimo runs it (tiny profile, its defaults), its definitions read back."""
    import os

    old = {k: os.environ.get(k) for k in ("WORKSHOP_PROFILE", "HF_HUB_OFFLINE", "MPLBACKEND")}
    os.environ.update(WORKSHOP_PROFILE="tiny", HF_HUB_OFFLINE="1", MPLBACKEND="Agg")
    try:
        spec = importlib.util.spec_from_file_location("nb02", ROOT / "notebooks" / "02_memory_equation.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _, defs = module.app.run()
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return defs


def test_users_at_4096_is_one_number_in_every_place(notebook_02):
    reserve = memory.runtime_reserve_bytes(gpus.get_gpu("H100 SXM").usable_memory_bytes)
    places = {
        "notebook 02's table": int(notebook_02["max_users_table"].set_index("context").loc[CONTEXT, "max users"]),
        "notebook 02's prediction, derived (its worked example)": notebook_02["users_example"],
        "on_gpu.gpu_users with vLLM's reserve (notebook 02's GPU half)":
            on_gpu.gpu_users("mistral-7b-v0.1", "H100 SXM", CONTEXT, reserve),
        "capacity.plan (notebook 04)": capacity.plan("mistral-7b-v0.1", "H100 SXM", context=CONTEXT).max_batch,
        "capacity.max_batch (notebook 06's table)": capacity.max_batch("mistral-7b-v0.1", "H100 SXM", context=CONTEXT),
        "on_gpu.gpu_plan (notebook 02's planner sentence)": on_gpu.gpu_plan(context=CONTEXT).max_batch,
        "the deck's max_users_gpu": keyfigures.foundations()["max_users_gpu"].value,
        "the deck's decode_batch_fit": keyfigures.roofline_figures()["decode_batch_fit"].value,
    }
    assert places == dict.fromkeys(places, USERS), places
    assert notebook_02["gpu_bytes"] == REPORTED                   # its default GPU on the reported basis
    assert "labelled 80 GB" in notebook_02["gpu_name"]            # the label shown beside it


def test_notebook_02_offers_only_gpus_whose_reported_memory_is_catalogued():
    from helpers import preflight

    (control,) = [c for c in preflight.controls() if c.name == "WORKSHOP_MEMORY_GPU"]
    assert control.notebook == "02" and "H100 SXM" in control.allowed
    assert all(gpus.get_gpu(name).memory_reported_gib for name in control.allowed), control.allowed


def test_the_whole_memory_is_the_same_basis_without_the_reserve():
    # notebook 01's users figure: the whole reported memory, no reserve (a bare PyTorch sweep)
    assert on_gpu.gpu_users("mistral-7b-v0.1", "H100 SXM", CONTEXT) == WHOLE
    assert on_gpu.gpu_expectations(GPU_SIZES)["users_fit"] == math.floor((REPORTED - WEIGHTS) / PER_TOKEN / 1024) == 524


def test_notebook_02s_self_check_answers_are_the_equation_at_its_controls(notebook_02):
    """Its defaults (an H100 SXM, vLLM's reserve, 4,096 tokens): int8 weights, an fp8 cache, by hand."""
    _, users_int8, users_fp8 = notebook_02["check_questions"]
    assert users_fp8.answer == math.floor((REPORTED - RESERVE - WEIGHTS) / (PER_TOKEN // 2) / CONTEXT) == 231
    int8 = memory.weight_bytes("mistral-7b-v0.1", "int8").bytes
    assert users_int8.answer == math.floor((REPORTED - RESERVE - int8) / PER_TOKEN / CONTEXT)
    assert users_int8.answer > USERS                       # smaller weights leave more for the cache
