import pytest
import torch

from helpers.measure import hardware


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


def test_a_cuda_library_that_cannot_allocate_is_a_device_limit_too():
    # the messages as torch raises them from cuBLAS, cuDNN and a kernel launched past its grid
    for msg in ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
                "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
                "CUDA error: invalid configuration argument",
                "CUDA driver error: cudaErrorMemoryAllocation"):
        assert hardware.is_device_limit(RuntimeError(msg)), msg
        assert not hardware.is_out_of_memory(RuntimeError(msg)), msg    # only the users sweep takes these
    assert hardware.is_device_limit(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not hardware.is_device_limit(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not hardware.is_device_limit(ValueError("CUBLAS_STATUS_ALLOC_FAILED"))   # not the device's
