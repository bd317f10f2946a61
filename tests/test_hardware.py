import pytest
import torch

from helpers import hardware


def test_cpu_device_info():
    info = hardware.device_info("cpu")
    assert info.kind == "cpu" and info.total_memory and info.total_memory > 2**30
    assert info.torch_version == torch.__version__
    assert info.label.startswith("cpu: ")


def test_pick_device_respects_environment(monkeypatch):
    monkeypatch.setenv("WORKSHOP_DEVICE", "cpu")
    assert hardware.pick_device() == "cpu"
    monkeypatch.setenv("WORKSHOP_DEVICE", "gpu")
    with pytest.raises(ValueError, match="allowed"):
        hardware.pick_device()


def test_out_of_memory_is_recognised():
    assert hardware.is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert hardware.is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: out of memory"))
    assert not hardware.is_out_of_memory(RuntimeError("shape mismatch"))


def test_peak_is_none_off_cuda():
    assert hardware.peak_allocated("cpu") is None
