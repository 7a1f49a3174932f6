"""CuPy and PyTorch arrays on the CUDA backend: the results equal the NumPy (CPU) ones within
DESIGN.md's tolerance (max|gpu - cpu| <= 1e-5 max|cpu| for fp32), stay on the input's device as
the input's kind of array, run on the caller's stream, and a mismatch of devices is refused.
Skipped without a CUDA device (CI); scripts/gpu-python-check runs them on the GPU machine."""
import numpy as np
import pytest

import warpbeam as wb

cuda = pytest.mark.skipif(not wb.cuda_available(), reason="no CUDA device (or a CPU-only build)")


def close(gpu, cpu, tol=1e-5):
    gpu, cpu = np.asarray(gpu), np.asarray(cpu)
    assert np.max(np.abs(gpu - cpu)) <= tol * np.max(np.abs(cpu))


def libs():
    out = []
    try:
        import cupy
        out.append(("cupy", cupy.asarray, cupy.asnumpy, cupy.ndarray))
    except ImportError:
        pass
    try:
        import torch
        if torch.cuda.is_available():
            out.append(("torch", lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda(),
                        lambda t: t.cpu().numpy(), torch.Tensor))
    except ImportError:
        pass
    return out


def each_lib():
    ls = libs()
    if not ls:
        pytest.skip("neither CuPy nor PyTorch with CUDA is installed")
    return ls


@cuda
def test_dedisperser_on_device_arrays():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (4096, 64), dtype=np.uint8)
    dms = wb.dm_list(0, 200, nchans=64, tsamp=256e-6, fch1=1500.0, foff=-2.0)
    cpu = wb.Dedisperser(64, 1500.0, -2.0, 256e-6, dms, backend="cpu")(x)
    for name, to_dev, to_host, kind in each_lib():
        dd = wb.Dedisperser(64, 1500.0, -2.0, 256e-6, dms, backend="cuda")
        out = dd(to_dev(x))
        assert isinstance(out, kind), name
        assert wb._arrays.device_of(out) == 0
        close(to_host(out), cpu)
        # host arrays through a CUDA plan are staged and give the same
        close(dd(x), cpu)


@cuda
def test_das_on_device_arrays_and_streams():
    el = wb.simulate.linear_array(64, 0.3e-3)
    sim = wb.simulate.ultrasound(el, [[0, 0, 15e-3]], sample_type="iq", nsamples=900,
                                 frames=16, noise=0.1, seed=4)
    grid = "-4e-3:4e-3:1e-4,10e-3:20e-3:1e-4"
    cpu = wb.das(sim.data, el, grid, sim.fs, sim.fc, t0=sim.t0, c=sim.c, fnumber=1.5)
    for name, to_dev, to_host, kind in each_lib():
        for storage, tol in (("fp32", 1e-5), ("fp16", 1e-2)):
            out = wb.das(to_dev(sim.data), el, grid, sim.fs, sim.fc, t0=sim.t0, c=sim.c,
                         fnumber=1.5, storage=storage)
            assert isinstance(out, kind), name
            close(to_host(out), cpu, tol)
    cupy = pytest.importorskip("cupy")
    plan = wb.DasPlan(el, grid, 900, sim.fs, sim.fc, batch=16, t0=sim.t0, c=sim.c, fnumber=1.5,
                      backend="cuda")
    d = cupy.asarray(sim.data)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        out = plan(d)  # queued on the current (non-default) stream
    s.synchronize()
    close(cupy.asnumpy(out), cpu)
    buf = cupy.full(plan.output_shape, cupy.nan, dtype=cupy.complex64)
    plan(d, out=buf, stream=s)
    s.synchronize()
    close(cupy.asnumpy(buf), cpu)
    with pytest.raises(ValueError, match="device"):
        plan(sim.data, out=buf)  # host data into a device out=


@cuda
def test_device_mismatch_is_refused():
    cupy = pytest.importorskip("cupy")
    if wb.device_count() < 2:
        pytest.skip("one device")
    el = wb.simulate.linear_array(8, 0.3e-3)
    plan = wb.DasPlan(el, "-1e-3:1e-3:1e-4,5e-3:6e-3:1e-4", 100, 20e6, 5e6, backend="cuda",
                      device=0)
    with cupy.cuda.Device(1):
        d = cupy.zeros((1, 8, 1, 100), cupy.complex64)
    with pytest.raises(ValueError, match="device"):
        plan(d)


@cuda
def test_epic_and_beamformer_on_device_arrays():
    rng = np.random.default_rng(2)
    pos = np.zeros((16, 3))
    pos[:, :2] = rng.uniform(-8, 8, (16, 2))
    freqs = 60e6 + 25e3 * np.arange(4)
    volts, _ = wb.simulate.station(pos, freqs, 32, seed=3)
    cpu = wb.EpicImager(pos, freqs, 32, grid_size=64, backend="cpu")(volts)
    w = wb.beam_weights(pos, freqs, np.radians([[0, 90], [90, 45]]), 2)
    cpu_b = wb.Beamformer(w, 32, backend="cpu")(volts)
    for name, to_dev, to_host, kind in each_lib():
        img = wb.EpicImager(pos, freqs, 32, grid_size=64, algorithm="multikernel",
                            backend="cuda")(to_dev(volts))
        assert isinstance(img, kind)
        close(to_host(img), cpu, 1e-4)
        b = wb.Beamformer(w, 32, algorithm="register-stream", backend="cuda")(to_dev(volts))
        assert isinstance(b, kind)
        close(to_host(b), cpu_b)


@cuda
def test_search_on_cuda_gives_the_cpu_candidates(tmp_path):
    wb.simulate.filterbank(tmp_path / "s.fil", bursts=[(100.0, 20.0, 1e-3, 2.0)], nchans=64,
                           duration=4.0)
    a = wb.search(tmp_path / "s.fil", dm_max=200, backend="cpu", gulp=4096)
    b = wb.search(tmp_path / "s.fil", dm_max=200, backend="cuda", gulp=4096)
    assert np.array_equal(a["sample"], b["sample"]) and np.array_equal(a["dm_trial"],
                                                                       b["dm_trial"])
    np.testing.assert_allclose(a["snr"], b["snr"], rtol=1e-3)
