"""Arrays in and out: which library an array belongs to, where it lives, the caller's CUDA
stream, and new arrays of the same kind on the same device.

Inputs reach the compiled module through DLPack (``__dlpack__``) without a copy. Outputs are
allocated here with the input's own library (NumPy, CuPy, PyTorch), so that CuPy in gives CuPy
out on the same device and the memory comes from that library's pool.
"""
from __future__ import annotations

import numpy as np

# DLPack device types (dlpack.h): 1 CPU, 2 CUDA, 3 CUDA page-locked host, 13 CUDA managed.
_HOST = (1, 3)
_CUDA = (2, 13)


def kind(x) -> str:
    """'numpy', 'cupy', 'torch', 'jax' or 'other' (any object with __dlpack__)."""
    mod = type(x).__module__.split(".")[0]
    if isinstance(x, np.ndarray):
        return "numpy"
    if mod in ("cupy", "torch", "jax", "jaxlib"):
        return "jax" if mod == "jaxlib" else mod
    return "other"


def device_of(x) -> int:
    """The CUDA device of ``x``, or -1 for host memory."""
    if isinstance(x, np.ndarray):
        return -1
    if hasattr(x, "__dlpack_device__"):
        dev_type, dev_id = x.__dlpack_device__()
        dev_type = int(dev_type)
        if dev_type in _CUDA:
            return int(dev_id)
        if dev_type in _HOST:
            return -1
        raise TypeError(f"arrays on DLPack device type {dev_type} are not supported "
                        "(host or CUDA only)")
    return -1


def as_input(x, name: str):
    """``x`` itself when it speaks DLPack or the buffer protocol; a NumPy array of a list or
    scalar otherwise (its dtype is then NumPy's choice, which the engine checks)."""
    if hasattr(x, "__dlpack__") or isinstance(x, np.ndarray):
        return x
    if x is None:
        raise TypeError(f"{name}: an array is required, got None")
    return np.asarray(x)


def current_stream(x, stream=None) -> int:
    """The cudaStream_t (as an int) to run on for device array ``x``: ``stream`` when given (an
    int, a CuPy Stream (.ptr), a PyTorch Stream (.cuda_stream)), else the caller's current
    stream of x's library (CuPy, PyTorch), else 0 (the legacy default stream)."""
    if stream is not None:
        for attr in ("ptr", "cuda_stream"):
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        return int(stream)
    k = kind(x)
    if k == "cupy":
        import cupy
        return int(cupy.cuda.get_current_stream().ptr)
    if k == "torch":
        import torch
        return int(torch.cuda.current_stream(x.device).cuda_stream)
    return 0


def empty_like_kind(x, shape, dtype):
    """A new C-contiguous array of ``shape`` and NumPy ``dtype`` of x's kind, on x's device."""
    dev = device_of(x)
    k = kind(x)
    if dev < 0:
        if k == "torch":
            import torch
            return torch.empty(tuple(shape), dtype=_torch_dtype(dtype))
        return np.empty(shape, dtype=dtype)
    if k == "torch":
        import torch
        return torch.empty(tuple(shape), dtype=_torch_dtype(dtype), device=x.device)
    try:
        import cupy
    except ImportError:  # e.g. JAX without CuPy: PyTorch's allocator, handed over by DLPack
        import torch
        out = torch.empty(tuple(shape), dtype=_torch_dtype(dtype), device=f"cuda:{dev}")
    else:
        with cupy.cuda.Device(dev):
            out = cupy.empty(shape, dtype=dtype)
    return out


def deliver(x, out):
    """``out`` as x's kind of array (JAX arrays are immutable: JAX gets a DLPack import)."""
    if kind(x) == "jax":
        import jax.dlpack
        return jax.dlpack.from_dlpack(out)
    return out


def _torch_dtype(dtype):
    import torch
    return {np.dtype(np.float32): torch.float32, np.dtype(np.complex64): torch.complex64,
            np.dtype(np.uint8): torch.uint8, np.dtype(np.float64): torch.float64}[np.dtype(dtype)]


def check_out(out, shape, dtype, name="out"):
    """ValueError/TypeError unless ``out`` has ``shape`` and ``dtype`` (the engine checks
    strides and device)."""
    got = tuple(int(s) for s in out.shape)
    if got != tuple(shape):
        raise ValueError(f"{name}: shape {got}, expected {tuple(shape)}")
    dt = str(out.dtype).replace("torch.", "")
    if dt != np.dtype(dtype).name:
        raise TypeError(f"{name}: dtype {dt}, expected {np.dtype(dtype).name}")


def backend_for(x, backend: str) -> str:
    """The backend a one-call function uses: 'auto' follows the data (CUDA arrays -> cuda,
    host arrays -> cpu); 'cpu' with a CUDA array is refused (device arrays never go through the
    host)."""
    dev = device_of(x)
    if backend not in ("auto", "cpu", "cuda"):
        raise ValueError(f"backend '{backend}': expected 'auto', 'cpu' or 'cuda'")
    if backend == "auto":
        return "cuda" if dev >= 0 else "cpu"
    if backend == "cpu" and dev >= 0:
        raise ValueError("backend 'cpu' with a CUDA array: device arrays never make a round trip "
                         "through the host; use backend='cuda' (or 'auto')")
    return backend
