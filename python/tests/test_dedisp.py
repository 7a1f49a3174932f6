"""Dedisperser against a plain NumPy loop on random data (8-bit, 2-bit packed, float32), the
DM list against dedisp's rule, and the bad-argument cases."""
import numpy as np
import pytest

import warpbeam as wb

K = 4.148808e3


def numpy_dedisperse(x, dms, fch1, foff, tsamp, killmask=None):
    """out[d][t] = sum_c x[t + delay(d, c)][c], delay = round(k DM (f_c^-2 - f_hi^-2) / tsamp)."""
    nt, nch = x.shape
    f = fch1 + foff * np.arange(nch)
    fhi = f.max()
    delays = np.rint(K * np.asarray(dms, np.float64)[:, None] * (f ** -2 - fhi ** -2) / tsamp)
    delays = delays.astype(np.int64)
    nout = nt - delays.max()
    out = np.zeros((len(dms), nout))
    for d in range(len(dms)):
        for c in range(nch):
            if killmask is None or killmask[c]:
                out[d] += x[delays[d, c]:delays[d, c] + nout, c]
    return out, delays


def unpack2(raw, nch):
    """2-bit samples, lowest bits first (SIGPROC)."""
    b = raw[:, :, None] >> (2 * np.arange(4)) & 3
    return b.reshape(raw.shape[0], -1)[:, :nch]


@pytest.mark.parametrize("nbits", [8, 32, 2])
def test_dedisperser_equals_numpy_loop(nbits):
    rng = np.random.default_rng(nbits)
    nch, nt, fch1, foff, tsamp = 64, 3000, 1500.0, -2.0, 256e-6
    dms = wb.dm_list(0, 300, nchans=nch, tsamp=tsamp, fch1=fch1, foff=foff)
    assert len(dms) > 10
    if nbits == 8:
        x = rng.integers(0, 256, size=(nt, nch), dtype=np.uint8)
        xv = x.astype(np.float64)
    elif nbits == 32:
        x = rng.standard_normal((nt, nch)).astype(np.float32)
        xv = x.astype(np.float64)
    else:
        x = rng.integers(0, 256, size=(nt, nch // 4), dtype=np.uint8)
        xv = unpack2(x, nch).astype(np.float64)
    killmask = np.ones(nch, bool)
    killmask[[3, 40]] = False
    dd = wb.Dedisperser(nch, fch1, foff, tsamp, dms, nbits=nbits, killmask=killmask,
                        backend="cpu")
    out = dd(x)
    want, delays = numpy_dedisperse(xv, dms, fch1, foff, tsamp, killmask)
    assert dd.max_delay == delays.max()
    assert np.array_equal(dd.delays, delays)
    assert out.shape == want.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-3 if nbits == 32 else 0)
    # the same plan on a gulp of another length (made again), and into out=
    buf = np.full((len(dms), nt - 500 - dd.max_delay), np.nan, np.float32)
    dd(x[500:], out=buf)
    np.testing.assert_allclose(buf, numpy_dedisperse(xv[500:], dms, fch1, foff, tsamp,
                                                     killmask)[0], rtol=1e-6, atol=1e-3)


def test_dm_list_follows_dedisps_rule():
    nch, tsamp, fch1, foff, w, tol = 1024, 64e-6, 1500.0, -0.29296875, 40.0, 1.25
    dms = wb.dm_list(0, 1000, nchans=nch, tsamp=tsamp, fch1=fch1, foff=foff,
                     pulse_width_us=w, tolerance=tol)
    assert len(dms) == 1122  # DESIGN.md's D1
    assert dms[0] == 0 and dms[-1] >= 1000 and np.all(np.diff(dms) > 0)
    lin = wb.dm_list(0, 10, nchans=nch, tsamp=tsamp, fch1=fch1, foff=foff, step=2.5)
    assert np.array_equal(lin, np.array([0, 2.5, 5, 7.5, 10], np.float32))


def test_bad_arguments():
    args = dict(nchans=16, fch1=1500.0, foff=-1.0, tsamp=1e-3, dms=[0, 10, 20])
    with pytest.raises(ValueError, match="nchans"):
        wb.Dedisperser(**dict(args, nchans=0))
    with pytest.raises(ValueError, match="nbits"):
        wb.Dedisperser(**args, nbits=3)
    with pytest.raises(ValueError):
        wb.Dedisperser(**args, algorithm="fastest")
    with pytest.raises(ValueError):
        wb.dm_list(10, 5, nchans=16, tsamp=1e-3, fch1=1500, foff=-1)
    dd = wb.Dedisperser(**args, backend="cpu")
    with pytest.raises(TypeError, match="data: dtype float64"):
        dd(np.zeros((1000, 16)))
    with pytest.raises(ValueError, match=r"data: shape \(1000, 15\)"):
        dd(np.zeros((1000, 15), np.uint8))
    with pytest.raises(ValueError, match="C-contiguous"):
        dd(np.zeros((1000, 32), np.uint8)[:, ::2])
    with pytest.raises(ValueError, match="largest delay"):
        dd(np.zeros((dd.max_delay, 16), np.uint8))
    with pytest.raises(ValueError, match="out: shape"):
        dd(np.zeros((1000, 16), np.uint8), out=np.zeros((3, 10), np.float32))
    with pytest.raises(TypeError, match="out: dtype"):
        dd(np.zeros((1000, 16), np.uint8), out=np.zeros((3, 1000 - dd.max_delay), np.float64))


@pytest.mark.skipif(wb.cuda_available(), reason="checks the CPU-only refusal")
def test_cuda_backend_without_a_device_raises_runtime_error():
    with pytest.raises(RuntimeError):
        wb.Dedisperser(16, 1500.0, -1.0, 1e-3, [0, 10], backend="cuda")
