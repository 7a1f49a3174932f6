"""EpicImager against a NumPy FX image (visibilities of the calibrated voltages gridded with
the cross-correlation of the two stands' kernels, FFT, grid correction), and the Beamformer
against a NumPy weighted sum."""
import numpy as np
import pytest

import warpbeam as wb

C = wb.SPEED_OF_LIGHT


def ci4(v):
    """Real and imaginary parts of ci4 bytes (high and low nibble, two's complement)."""
    re = (v.astype(np.int8) >> 4).astype(np.float64)
    im = ((v << 4).astype(np.int8) >> 4).astype(np.float64)
    return re + 1j * im


def numpy_fx_image(imager, volts, freqs, pos):
    n = imager.grid_size
    used = imager.used_stands
    corr = imager.grid_correction
    out = np.zeros((len(freqs), 4, n, n))
    for ch, f in enumerate(freqs):
        e = ci4(volts[ch][:, used, :])  # [time][stand][pol]
        e = e * np.exp(-2j * np.pi * pos[used, 2] * f / C)[None, :, None]  # phase to zenith
        fps = [imager.footprint(ch, s) for s in used]
        grids = np.zeros((3, n, n), complex)
        for i in range(len(used)):
            for j in range(len(used)):
                if i == j:
                    continue
                v = [np.sum(e[:, i, 0] * np.conj(e[:, j, 0])),
                     np.sum(e[:, i, 1] * np.conj(e[:, j, 1])),
                     np.sum(e[:, i, 0] * np.conj(e[:, j, 1]))]
                (ax0, ay0, awx, awy), (bx0, by0, bwx, bwy) = fps[i], fps[j]
                wa = np.outer(awy, awx)
                wbk = np.outer(bwy, bwx)
                t = len(awx)
                for ay in range(t):
                    for ax in range(t):
                        for by in range(t):
                            for bx in range(t):
                                w = wa[ay, ax] * wbk[by, bx]
                                dx = (ax0 + ax - bx0 - bx) % n
                                dy = (ay0 + ay - by0 - by) % n
                                grids[:, dy, dx] += w * np.array(v)
        img = np.fft.fftshift(np.fft.fft2(grids), axes=(1, 2)) * corr[ch][None]
        out[ch, 0], out[ch, 1] = img[0].real, img[1].real
        out[ch, 2], out[ch, 3] = img[2].real, img[2].imag
    return out


def test_epic_imager_equals_numpy_fx_image():
    rng = np.random.default_rng(5)
    nstand, n = 10, 32
    pos = np.zeros((nstand, 3))
    pos[:, 0], pos[:, 1] = rng.uniform(-8, 8, nstand), rng.uniform(-10, 10, nstand)
    pos[:, 2] = rng.uniform(-1, 1, nstand)
    freqs = 60e6 + 25e3 * 37 * np.arange(2)
    volts, _ = wb.simulate.station(pos, freqs, 8, sources=[(0.3, -0.2, 4.0)], seed=21)
    assert volts.shape == (2, 8, nstand, 2) and volts.dtype == np.uint8
    imager = wb.EpicImager(pos, freqs, 8, grid_size=n, support=2, backend="cpu")
    got = imager(volts)
    want = numpy_fx_image(imager, volts, freqs, pos)
    assert got.shape == (2, 4, n, n)
    for ch in range(2):
        for k in range(4):
            err = np.linalg.norm(got[ch, k] - want[ch, k]) / np.linalg.norm(want[ch, k])
            assert err <= 1e-4, (ch, k, err)


def test_epic_bad_arguments():
    pos = np.zeros((4, 3))
    pos[:, 0] = np.arange(4)
    with pytest.raises(ValueError, match="grid_size"):
        wb.EpicImager(pos, [60e6], 4, grid_size=31)
    im = wb.EpicImager(pos, [60e6], 4, grid_size=32, backend="cpu")
    with pytest.raises(ValueError, match="voltages: shape"):
        im(np.zeros((1, 5, 4, 2), np.uint8))
    with pytest.raises(TypeError, match="voltages: dtype"):
        im(np.zeros((1, 4, 4, 2), np.int16))


def test_beamformer_equals_numpy_weighted_sum():
    rng = np.random.default_rng(3)
    nch, nt, nant, npol, nbeams = 4, 64, 8, 2, 3
    pos = rng.uniform(-5, 5, (nant, 3))
    freqs = 400e6 + 1e6 * np.arange(nch)
    azel = np.radians([[0, 90], [30, 60], [200, 45]])
    w = wb.beam_weights(pos, freqs, azel, npol)
    assert w.shape == (nch, npol, nbeams, nant)
    # the weight's definition: exp(-2 pi i f r.s / c), s the beam's unit vector (ENU)
    s = np.stack([np.sin(azel[:, 0]) * np.cos(azel[:, 1]),
                  np.cos(azel[:, 0]) * np.cos(azel[:, 1]), np.sin(azel[:, 1])], axis=1)
    want_w = np.exp(-2j * np.pi * freqs[:, None, None] * (s @ pos.T)[None] / C)
    np.testing.assert_allclose(w[:, 0], want_w, atol=1e-5)
    volts = rng.integers(0, 256, (nch, nt, nant, npol), dtype=np.uint8)
    bf = wb.Beamformer(w, nt, sample_type="ci4", backend="cpu")
    p = bf(volts)
    assert p.shape == (nbeams, npol, nt, nch)
    x = ci4(volts)  # [c][t][a][p]
    v = np.einsum("cpba,ctap->bptc", w.astype(np.complex128), x)
    np.testing.assert_allclose(p, np.abs(v) ** 2, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match="voltages"):
        bf(volts[:, :10])
    with pytest.raises(ValueError, match="integration"):
        wb.Beamformer(w, nt, integration=7)


def test_beamformer_algorithm_names():
    """Every algorithm name parses: the CPU takes register-tiled (and auto), the CUDA-only ones
    (tensor-int8 and tensor-int8-stream included) are refused for the CPU naming the backend,
    not as unknown names."""
    w = np.ones((2, 1, 3, 4), dtype=np.complex64)
    for name in ("auto", "register-tiled"):
        bf = wb.Beamformer(w, 64, sample_type="ci4", algorithm=name, backend="cpu")
        assert bf.algorithm == "register-tiled"
    for name in ("register-stream", "tensor-core", "cublas-fp16", "tensor-int8",
                 "tensor-int8-stream"):
        with pytest.raises(RuntimeError, match="needs the CUDA backend"):
            wb.Beamformer(w, 64, sample_type="ci4", algorithm=name, backend="cpu")
    with pytest.raises(ValueError, match="tensor-int8"):
        wb.Beamformer(w, 64, sample_type="ci4", algorithm="fastest", backend="cpu")
