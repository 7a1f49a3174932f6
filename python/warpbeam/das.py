"""Ultrasound delay-and-sum beamforming (DAS) on host or CUDA arrays.

Model (Perrot et al., "So you think you can DAS?", Ultrasonics 111, 106309, 2021; das.hpp):
for voxel p_n, transmit q and receiver m,
tau = tau_tx(q, n) + |p_n - r_m| / c, the sample at i = (tau - t0) fs linearly interpolated,
weighted by the receive apodization (f-number and window) and, for IQ data, rotated by
exp(2 pi i fc tau); summed over receivers and transmits.

Switching from other packages
-----------------------------
``mach.beamform`` (PyPI mach-beamform)::

    mach.beamform(channel_data, rx_coords_m, scan_coords_m, tx_wave_arrivals_s,
                  rx_start_s=t0, sampling_freq_hz=fs, f_number=F, sound_speed_m_s=c,
                  modulation_freq_hz=fc, tukey_alpha=a)                      # (n_scan, n_frames)
    # is
    warpbeam.das(xp.ascontiguousarray(channel_data.transpose(2, 0, 1))[:, :, None, :],
                 rx_coords_m, scan_coords_m, fs, fc, t0=t0, c=c,
                 tx_delays=tx_wave_arrivals_s, fnumber=F, window="tukey",
                 tukey_alpha=a).T                                             # (n_scan, n_frames)

  (channel_data (n_rx, n_samples, n_frames) -> [frame][rx][tx=1][sample]; tx_wave_arrivals_s is
  warpbeam's tau_tx of one transmit; mach's tukey_alpha 0 is window="boxcar".)

PyMUST (``pymust.dasmtx`` / ``pymust.das`` after ``pymust.rf2iq``)::

    IQ = pymust.rf2iq(RF, param)                  # RF [samples][elements][frames]
    M = pymust.dasmtx(1j * np.array(IQ.shape[:2]), x, z, param); IQb = M @ IQ...
    # is
    iq = warpbeam.rf_to_iq(np.ascontiguousarray(RF.transpose(2, 1, 0), dtype=np.float32),
                           param.fs, param.fc, param.t0, param.bandwidth / 100)
    warpbeam.das(iq[:, :, None, :], elements, "x0:x1:dx,z0:z1:dz", param.fs, param.fc,
                 t0=param.t0, c=param.c,
                 transmits=[warpbeam.Transmit.element_delays(param.TXdelay)],
                 fnumber=param.fnumber, window="boxcar")                     # [frame][z][x]

  with elements = (x_e, 0, 0) for x_e = ((0 .. N-1) - (N-1)/2) pitch (PyMUST's centred linear
  array). PyMUST's 'fnumber' is warpbeam's receive ``fnumber``; its default window is boxcar.
  :func:`warpbeam.read_ultrasound` reads PyMUST's .mat files into this layout directly.
"""
from __future__ import annotations

import numpy as np

from . import _arrays
from . import _warpbeam as _wb

Transmit = _wb.Transmit

__all__ = ["das", "DasPlan", "Transmit", "grid_points", "rf_to_iq", "bmode"]


def grid_points(grid):
    """Voxel positions of ``grid`` and the shape the output takes.

    Parameters
    ----------
    grid : str, tuple or array_like
        ``"x0:x1:dx,z0:z1:dz"`` (2-D) or ``"x0:x1:dx,y0:y1:dy,z0:z1:dz"`` in metres (as the
        CLI's --grid); or a tuple of 2 or 3 axes ``(start, stop, step)`` in the same order; or
        explicit points, array (nvoxels, 3) of (x, y, z) metres.

    Returns
    -------
    points : numpy.ndarray
        float64 (nvoxels, 3), ordered [z][y][x] (x fastest) for regular grids.
    shape : tuple
        (nz, nx) for 2-D grids, (nz, ny, nx) for 3-D, (nvoxels,) for explicit points.

    Raises
    ------
    ValueError
        A malformed spec, step <= 0, stop < start, points not of shape (n, 3).
    """
    if isinstance(grid, str):
        x, y, z, is2d = _wb._grid(grid)
        pts, shp = _wb._grid_voxels(x, y, z)
        return pts, ((shp[0], shp[2]) if is2d else tuple(shp))
    if isinstance(grid, tuple) and len(grid) in (2, 3) and all(
            np.ndim(a) == 1 and len(a) == 3 for a in grid):
        axes = [tuple(float(v) for v in a) for a in grid]
        if len(axes) == 2:
            pts, shp = _wb._grid_voxels(axes[0], (0.0, 0.0, 1.0), axes[1])
            return pts, (shp[0], shp[2])
        pts, shp = _wb._grid_voxels(*axes)
        return pts, tuple(shp)
    pts = np.ascontiguousarray(np.asarray(grid, dtype=np.float64))
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"grid: points of shape {pts.shape}, expected (nvoxels, 3)")
    return pts, (pts.shape[0],)


def _sample_type(data) -> str:
    dt = str(data.dtype).replace("torch.", "")
    if dt == "float32":
        return "rf"
    if dt == "complex64":
        return "iq"
    raise TypeError(f"data: dtype {dt}, expected float32 (RF) or complex64 (IQ)")


def _f64(a, name, ncols=None):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
    if ncols is not None and (a.ndim != 2 or a.shape[1] != ncols):
        raise ValueError(f"{name}: shape {a.shape}, expected (n, {ncols})")
    return a


class DasPlan:
    """A delay-and-sum plan for one acquisition geometry and grid, made once and called per
    batch of frames (transmit delays, voxel order and scratch precomputed).

    Parameters
    ----------
    elements : array_like
        Receive element positions (nrx, 3), metres (x along the array, z the depth).
    grid : str, tuple or array_like
        Where to beamform; see :func:`grid_points`.
    nsamples : int
        Samples per (frame, rx, tx).
    fs : float
        Sampling frequency of the samples (Hz).
    fc : float
        Centre (demodulation) frequency (Hz); required for IQ data.
    batch : int, default 1
        Frames per call.
    sample_type : {'iq', 'rf'}, default 'iq'
        complex64 baseband samples or float32 RF.
    t0 : float, default 0
        Time of sample 0 (s) after the wave passed the probe's origin.
    c : float, default 1540
        Sound speed (m/s).
    tx_delays : array_like, optional
        Transmit delays tau_tx (s), (ntx, nvoxels) or (nvoxels,) for one transmit (mach's
        ``tx_wave_arrivals_s``). Exclusive with ``transmits``.
    transmits : list of Transmit, optional
        Transmit models (plane, diverging, element delays); default one unsteered plane wave.
    fnumber : float, optional
        Receive f-number (> 0); None: the full aperture.
    window : {'boxcar', 'hann', 'tukey'}, default 'boxcar'
        Receive apodization window over the f-number aperture.
    tukey_alpha : float, default 0.5
        Tukey taper fraction, (0, 1].
    tx_weights : array_like, optional
        Transmit apodization (ntx, nvoxels), float32.
    element_kinds : list of str, optional
        Per element 'point' (default), 'line_x' or 'line_y' (row-column arrays).
    storage : {'fp32', 'fp16'}, default 'fp32'
        CUDA channel-data storage (sums stay fp32).
    algorithm : str, default 'auto'
        CUDA variant: 'auto', 'bl', 'bi', 'tc', 'tcw' (das.hpp); the CPU has the reference.
    backend : {'auto', 'cpu', 'cuda'}, default 'auto'
    device : int, optional
        CUDA device (default 0).
    threads : int, default 0
        CPU threads (0: OpenMP's default).

    Raises
    ------
    ValueError
        A parameter out of range (named), e.g. fs <= 0, f-number <= 0, IQ without fc, table
        sizes that do not match, a CUDA algorithm asked of the CPU.
    RuntimeError
        backend='cuda' without CUDA.
    """

    def __init__(self, elements, grid, nsamples: int, fs: float, fc: float = 0.0, *,
                 batch: int = 1, sample_type: str = "iq", t0: float = 0.0, c: float = 1540.0,
                 tx_delays=None, transmits=None, fnumber: float | None = None,
                 window: str = "boxcar", tukey_alpha: float = 0.5, tx_weights=None,
                 element_kinds=None, storage: str = "fp32", algorithm: str = "auto",
                 backend: str = "auto", device: int | None = None, threads: int = 0):
        pts, self.grid_shape = grid_points(grid)
        nvox = pts.shape[0]
        if tx_delays is not None and transmits is not None:
            raise ValueError("give tx_delays or transmits, not both")
        if tx_delays is not None:
            tx_delays = _f64(tx_delays, "tx_delays")
            if tx_delays.ndim == 1:
                tx_delays = tx_delays.reshape(1, -1)
            transmits = []
        elif transmits is None:
            transmits = [Transmit.plane(0.0)]
        if tx_weights is not None:
            tx_weights = np.ascontiguousarray(np.asarray(tx_weights, dtype=np.float32))
            if tx_weights.ndim == 1:
                tx_weights = tx_weights.reshape(1, -1)
        self._p = _wb._DasPlan(sample_type, int(batch), int(nsamples), float(fs), float(fc),
                               float(t0), float(c), _f64(elements, "elements", 3),
                               list(element_kinds or []), pts, list(transmits), tx_delays,
                               tx_weights, None if fnumber is None else float(fnumber), window,
                               float(tukey_alpha), algorithm, storage, backend, int(threads),
                               -1 if device is None else int(device))
        self.nvoxels = nvox
        self.sample_type = sample_type

    input_shape = property(lambda self: tuple(self._p.input_shape),
                           doc="(batch, nrx, ntx, nsamples)")
    output_shape = property(lambda self: (self._p.input_shape[0],) + tuple(self.grid_shape),
                            doc="(batch,) + the grid's shape")
    backend = property(lambda self: self._p.backend)
    algorithm = property(lambda self: self._p.algorithm, doc="the CUDA variant that runs")
    points = property(lambda self: self._p.points, doc="voxels x receivers x transmits x frames")
    tx_delays = property(lambda self: self._p.tx_delays, doc="tau_tx (s), (ntx, nvoxels)")

    def __call__(self, data, out=None, *, stream=None):
        """Beamforms one batch.

        Parameters
        ----------
        data : array (NumPy, CuPy, PyTorch, any DLPack array)
            [batch][rx][tx][sample], float32 (RF) or complex64 (IQ) as the plan's sample_type,
            C-contiguous; [rx][tx][sample] when batch is 1.
        out : array, optional
            complex64 of :attr:`output_shape` (or (batch, nvoxels)), same device as ``data``.
        stream : optional
            CUDA stream (int, CuPy or PyTorch stream); default: the caller's current stream.

        Returns
        -------
        array
            complex64 (batch,) + grid shape, the same kind of array as ``data`` on its device.
            On CUDA the work is queued on the stream (not waited for).

        Raises
        ------
        TypeError
            A dtype other than the plan's sample type.
        ValueError
            A wrong shape or strides, ``out`` on another device, a CUDA array given to a cpu
            plan or one on another device than the plan's.
        """
        data = _arrays.as_input(data, "data")
        st = _sample_type(data)
        if st != self.sample_type:
            raise TypeError(f"data: {st.upper()} samples ({data.dtype}) given to a plan made for "
                            f"{self.sample_type.upper()}")
        if len(data.shape) == 3:
            data = data[None]
        shape = self.output_shape
        flat = (shape[0], self.nvoxels)
        if out is None:
            out = _arrays.empty_like_kind(data, shape, np.complex64)
        elif tuple(int(s) for s in out.shape) not in (tuple(shape), flat):
            raise ValueError(f"out: shape {tuple(out.shape)}, expected {shape} or {flat}")
        else:
            _arrays.check_out(out, tuple(int(s) for s in out.shape), np.complex64)
        s = _arrays.current_stream(data, stream) if _arrays.device_of(data) >= 0 else 0
        self._p.execute(data, out.reshape(flat), s)
        return _arrays.deliver(data, out)


def das(data, elements, grid, fs: float, fc: float = 0.0, t0: float = 0.0, c: float = 1540.0,
        tx_delays=None, fnumber: float | None = None, window: str = "boxcar",
        storage: str = "fp32", algorithm: str = "auto", out=None, *, transmits=None,
        tukey_alpha: float = 0.5, tx_weights=None, element_kinds=None, backend: str = "auto",
        stream=None, threads: int = 0):
    """Delay-and-sum beamforming in one call (a :class:`DasPlan` made and used once; make a plan
    for repeated calls).

    Parameters
    ----------
    data : array (NumPy, CuPy, PyTorch, any DLPack array)
        Channel data [batch][rx][tx][sample] ([rx][tx][sample] for one frame): float32 RF or
        complex64 IQ (baseband w.r.t. absolute time, as PyMUST's rf2iq makes it). CUDA arrays
        run on the CUDA backend on their own device, host arrays on the CPU (backend='auto').
    elements : array_like
        Receive element positions (nrx, 3), metres.
    grid : str, tuple or array_like
        See :func:`grid_points`.
    fs, fc : float
        Sampling and centre (demodulation) frequency (Hz).
    t0 : float, default 0
        Time of sample 0 (s).
    c : float, default 1540
        Sound speed (m/s).
    tx_delays, transmits, fnumber, window, tukey_alpha, tx_weights, element_kinds, storage,
    algorithm
        As :class:`DasPlan`.
    out : array, optional
        complex64 (batch,) + grid shape (or (batch, nvoxels)), same device as ``data``.
    backend : {'auto', 'cpu', 'cuda'}, default 'auto'
        'auto' follows the data; 'cuda' with host data stages it through the device.
    stream : optional
        CUDA stream (default: the caller's current stream). The call waits for it before
        returning (its plan is freed on return).

    Returns
    -------
    array
        complex64 [batch] + grid shape ([batch][nz][nx] for a 2-D grid): the same kind of array
        as ``data`` on its device. B-mode: :func:`bmode`.

    Raises
    ------
    TypeError, ValueError, RuntimeError
        As :class:`DasPlan` and :meth:`DasPlan.__call__`.
    """
    data = _arrays.as_input(data, "data")
    if len(data.shape) == 3:
        data = data[None]
    if len(data.shape) != 4:
        raise ValueError(f"data: shape {tuple(data.shape)}, expected [batch][rx][tx][sample]")
    dev = _arrays.device_of(data)
    b = _arrays.backend_for(data, backend)
    batch, nrx, ntx, ns = (int(s) for s in data.shape)
    plan = DasPlan(elements, grid, ns, fs, fc, batch=batch, sample_type=_sample_type(data),
                   t0=t0, c=c, tx_delays=tx_delays, transmits=transmits, fnumber=fnumber,
                   window=window, tukey_alpha=tukey_alpha, tx_weights=tx_weights,
                   element_kinds=element_kinds, storage=storage, algorithm=algorithm, backend=b,
                   device=dev if dev >= 0 else None, threads=threads)
    result = plan(data, out, stream=stream)
    if dev >= 0:
        _wb.synchronize(_arrays.current_stream(data, stream))
    return result


def rf_to_iq(rf, fs: float, fc: float, t0: float = 0.0, bandwidth: float = 0.0) -> np.ndarray:
    """I/Q demodulation of RF lines (host): down-mixing by exp(-2 pi i fc t), a zero-phase
    5th-order Butterworth low-pass of normalised cut-off bandwidth * fc / fs (or min(2 fc / fs,
    0.5) when bandwidth <= 0) and a factor 2: MUST/PyMUST's rf2iq (Madiena et al., IEEE TUFFC
    65:795, 2018).

    Parameters
    ----------
    rf : numpy.ndarray
        float32 [..., sample], C-contiguous; sample n at t0 + n / fs.
    fs, fc : float
        Sampling and centre frequency (Hz).
    t0 : float, default 0
        Time of sample 0 (s).
    bandwidth : float, default 0
        Fractional bandwidth (0.15 = 15 %; PyMUST's param.bandwidth / 100).

    Returns
    -------
    numpy.ndarray
        complex64, the shape of ``rf``.

    Raises
    ------
    TypeError
        A dtype other than float32.
    ValueError
        A device array, a cut-off outside (0, 1).
    """
    return _wb.rf_to_iq(_arrays.as_input(rf, "rf"), float(fs), float(fc), float(t0),
                        float(bandwidth))


def bmode(beamformed, dynamic_range: float = 30.0):
    """Log-compressed envelope 20 log10(|x| / max|x|) clipped to [-dynamic_range, 0] dB, with
    the maximum over the whole array (all frames), in the input's array library."""
    if dynamic_range <= 0:
        raise ValueError(f"dynamic_range = {dynamic_range} dB must be > 0")
    env = abs(beamformed)
    k = _arrays.kind(beamformed)
    if k == "cupy":
        import cupy as xp
    elif k == "torch":
        import torch as xp
    else:
        xp, env = np, np.asarray(env)
    db = 20 * xp.log10(env / env.max() + 1e-30)
    return db.clip(-dynamic_range, 0)
