"""warpbeam.das on PyMUST's rotating-disk recording against PyMUST itself (rf2iq, then dasmtx
on the same grid, receive f-number 1.2, boxcar window), a simulated point scatterer at its
place, DasPlan reuse, and the bad-argument cases."""
import numpy as np
import pytest

import warpbeam as wb

GRID = "-12.5e-3:12.5e-3:1e-4,10e-3:35e-3:1e-4"  # bmode_PWI_disk.mat's grid: 251 x 251


def pymust_param(path):
    """PyMUST's param from the .mat. Settings that match warpbeam's das: an explicit
    param.fnumber (PyMUST's default is derived from the element width), t0 as an array (a float
    breaks PyMUST 0.1.9), Nelements as an int; dasmtx's default linear interpolation and boxcar
    receive window are warpbeam's defaults."""
    scipy_io = pytest.importorskip("scipy.io")
    pymust = pytest.importorskip("pymust")
    m = scipy_io.loadmat(str(path))
    p = m["param"][0, 0]
    param = pymust.utils.Param()
    for k in p.dtype.names:
        v = np.squeeze(p[k])
        setattr(param, k, v if v.size > 1 else float(v))
    param.t0 = np.array([param.t0])
    param.Nelements = int(param.Nelements)
    return pymust, m["RF"].astype(np.float64), param


def test_das_matches_pymust_on_pwi_disk(data):
    path = data("ultrasound/PWI_disk.mat")
    pymust, rf, param = pymust_param(path)
    param.fnumber = 1.2
    iq_ref = pymust.rf2iq(rf, param)  # [sample][element][frame]
    x = np.linspace(-12.5e-3, 12.5e-3, 251)
    z = np.linspace(10e-3, 35e-3, 251)
    xi, zi = np.meshgrid(x, z)
    M = pymust.dasmtx(1j * np.array(iq_ref.shape[:2]), xi, zi, param)
    nf = iq_ref.shape[2]
    ref = (M @ iq_ref.reshape(-1, nf, order="F")).reshape(251, 251, nf, order="F")

    d = wb.read_ultrasound(path)
    assert d.data.shape == (32, 128, 1, 334) and d.sample_type == "rf"
    iq = wb.rf_to_iq(d.data, d.fs, d.fc, d.t0, d.bandwidth)
    # warpbeam's rf_to_iq is PyMUST's rf2iq
    np.testing.assert_allclose(iq[:, :, 0, :], iq_ref.transpose(2, 1, 0),
                               atol=1e-5 * np.abs(iq_ref).max())
    out = wb.das(iq, d.elements, GRID, d.fs, d.fc, t0=d.t0, c=d.c, transmits=d.transmits,
                 fnumber=1.2)
    assert out.shape == (32, 251, 251) and out.dtype == np.complex64
    for f in range(nf):
        r = np.corrcoef(np.abs(out[f]).ravel(), np.abs(ref[:, :, f]).ravel())[0, 1]
        assert r >= 0.99, f"frame {f}: envelope correlation {r}"


def test_point_scatterer_is_where_it_is():
    elements = wb.simulate.linear_array(64, 0.3e-3)
    sim = wb.simulate.ultrasound(elements, [[1e-3, 0, 15e-3]], sample_type="iq", fs=20e6,
                                 fc=5e6, nsamples=900, frames=2, noise=0.01, seed=2)
    grid = "-4e-3:4e-3:1e-4,10e-3:20e-3:1e-4"
    img = wb.das(sim.data, sim.elements, grid, sim.fs, sim.fc, t0=sim.t0, c=sim.c,
                 fnumber=1.5)
    z, x = np.unravel_index(np.abs(img[0]).argmax(), img[0].shape)
    assert abs(-4e-3 + x * 1e-4 - 1e-3) <= 1.5e-4
    assert abs(10e-3 + z * 1e-4 - 15e-3) <= 1.5e-4
    # a plan called twice and into out=, with the mach-style tx_delays of the plane wave
    pts, shape = wb.grid_points(grid)
    plan = wb.DasPlan(sim.elements, grid, 900, sim.fs, sim.fc, batch=2, t0=sim.t0, c=sim.c,
                      tx_delays=pts[:, 2] / sim.c, fnumber=1.5)
    buf = np.full((2,) + shape, np.nan, np.complex64)
    res = plan(sim.data, out=buf)
    assert res is buf
    np.testing.assert_allclose(buf, img, rtol=1e-5, atol=1e-5 * np.abs(img).max())
    db = wb.bmode(img, 40)
    assert db.max() == 0 and db.min() >= -40


def test_rf_and_explicit_points():
    elements = wb.simulate.linear_array(32, 0.3e-3)
    sim = wb.simulate.ultrasound(elements, [[0, 0, 10e-3]], sample_type="rf", fs=40e6,
                                 fc=5e6, nsamples=800)
    pts = np.array([[0, 0, 10e-3], [2e-3, 0, 12e-3]])
    out = wb.das(sim.data, sim.elements, pts, sim.fs, sim.fc, c=sim.c)
    assert out.shape == (1, 2)
    assert abs(out[0, 0]) > 5 * abs(out[0, 1])


def test_bad_arguments():
    el = wb.simulate.linear_array(8, 0.3e-3)
    iq = np.zeros((1, 8, 1, 100), np.complex64)
    ok = dict(elements=el, grid="-1e-3:1e-3:1e-4,5e-3:6e-3:1e-4", fs=20e6, fc=5e6)
    with pytest.raises(TypeError, match="data: dtype"):
        wb.das(iq.astype(np.complex128), **ok)
    with pytest.raises(ValueError, match="data: shape"):
        wb.DasPlan(el, ok["grid"], 100, 20e6, 5e6)(np.zeros((1, 7, 1, 100), np.complex64))
    with pytest.raises(ValueError, match="C-contiguous"):
        wb.das(np.zeros((1, 8, 1, 200), np.complex64)[..., ::2], **ok)
    with pytest.raises(ValueError, match="f-number"):
        wb.das(iq, **ok, fnumber=-1)
    with pytest.raises(ValueError, match="fs"):
        wb.das(iq, **dict(ok, fs=0))
    with pytest.raises(ValueError):
        wb.das(iq, **dict(ok, grid="1:0:1,2:3:1"))
    with pytest.raises(ValueError, match="window"):
        wb.das(iq, **ok, window="hamming")
    with pytest.raises(ValueError, match="elements"):
        wb.das(iq, **dict(ok, elements=np.zeros((8, 2))))
    with pytest.raises(ValueError, match="tx_delays"):
        wb.das(iq, **ok, tx_delays=np.zeros((1, 5)))
    with pytest.raises(ValueError, match="out: shape"):
        wb.das(iq, **ok, out=np.zeros((1, 3), np.complex64))
    with pytest.raises(ValueError, match="backend"):
        wb.das(iq, **ok, backend="gpu")
    with pytest.raises(TypeError, match="RF samples"):
        wb.DasPlan(el, ok["grid"], 100, 20e6, 5e6)(np.zeros((1, 8, 1, 100), np.float32))
