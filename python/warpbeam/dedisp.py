"""Incoherent dedispersion: a DM trial list and a plan called per gulp, [time][chan] ->
[dm][time]."""
from __future__ import annotations

import numpy as np

from . import _arrays
from . import _warpbeam as _wb

__all__ = ["dm_list", "Dedisperser", "DISPERSION_CONSTANT"]

#: k in dt = k DM (f^-2 - f_ref^-2), s MHz^2 pc^-1 cm^3 (as SIGPROC, dedisp and heimdall).
DISPERSION_CONSTANT = _wb.DISPERSION_CONSTANT


def dm_list(dm_min: float = 0.0, dm_max: float = 1000.0, *, nchans: int, tsamp: float,
            fch1: float, foff: float, pulse_width_us: float = 40.0, tolerance: float = 1.25,
            step: float | None = None) -> np.ndarray:
    """DM trials (pc cm^-3), float32, ascending.

    By dedisp's rule (Barsdell et al. 2012, after Levin 2012; heimdall's): each step keeps the
    smearing added by the DM error within ``tolerance`` of the intrinsic width
    sqrt(pulse_width^2 + tsamp^2); from ``dm_min`` to the first DM >= ``dm_max``. With ``step``, a
    plain linear list dm_min, dm_min + step, ... <= dm_max instead.

    Parameters
    ----------
    dm_min, dm_max : float
        Range (pc cm^-3).
    nchans : int
        Channels.
    tsamp : float
        Sampling time (s).
    fch1, foff : float
        Centre of channel 0 and channel step (MHz; foff may be negative).
    pulse_width_us : float, default 40
        Intrinsic pulse width the list is built for (microseconds).
    tolerance : float, default 1.25
        Allowed smearing ratio (> 1).
    step : float, optional
        Linear step (pc cm^-3) instead of dedisp's rule.

    Raises
    ------
    ValueError
        dm_min < 0, dm_max < dm_min, tolerance <= 1, widths or step <= 0.
    """
    if step is not None:
        return _wb.dm_list_linear(dm_min, dm_max, step)
    return _wb.dm_list(dm_min, dm_max, pulse_width_us, tolerance, nchans, tsamp, fch1, foff)


class Dedisperser:
    """A dedispersion plan, made once and called per gulp (as a cuFFT plan).

    Output sample t of trial d is sum over unmasked channels c of in[t + delay(d, c)][c], with
    delay(d, c) = round(k DM_d (f_c^-2 - f_hi^-2) / tsamp) samples (k =
    :data:`DISPERSION_CONSTANT`, f_hi the highest frequency; Lorimer & Kramer, Handbook of
    Pulsar Astronomy, eq. 5.1), for t < nsamples - max_delay (only valid samples).

    Parameters
    ----------
    nchans : int
        Channels.
    fch1, foff : float
        Centre of channel 0 and channel step (MHz).
    tsamp : float
        Sampling time (s).
    dms : array_like
        Trial DMs (pc cm^-3), ascending (e.g. :func:`dm_list`).
    nbits : int, default 8
        Input sample size: 1, 2, 4 (packed bytes, lowest bits first, as SIGPROC), 8 (uint8),
        16 (uint16, int16 when ``signed``) or 32 (float32).
    signed : bool, default False
        Two's complement integer samples.
    nsamples : int, optional
        Time samples per gulp: the plan is made now for it; otherwise on the first call, and
        again whenever a gulp of another length comes.
    killmask : array_like of bool, optional
        Per channel: True = use, False = zap.
    backend : {'auto', 'cpu', 'cuda'}, default 'auto'
        'auto': CUDA when a device is visible. A CUDA plan takes CUDA arrays (run on their
        device's current stream) or host arrays (staged through the device, synchronously).
    algorithm : str, default 'auto'
        CUDA kernel: 'auto', 'direct', 'tiled', 'packed' (dedisp.hpp); the CPU has one kernel.
    threads : int, default 0
        CPU threads (0: OpenMP's default).
    device : int, optional
        CUDA device (default: the current one, 0).

    Raises
    ------
    ValueError
        A parameter outside its range (the message names it).
    RuntimeError
        backend='cuda' in a build without CUDA or without a device.
    """

    def __init__(self, nchans: int, fch1: float, foff: float, tsamp: float, dms, nbits: int = 8,
                 *, signed: bool = False, nsamples: int | None = None, killmask=None,
                 backend: str = "auto", algorithm: str = "auto", threads: int = 0,
                 device: int | None = None):
        dms = [float(d) for d in np.asarray(dms, dtype=np.float64).ravel()]
        km = None if killmask is None else [1 if k else 0 for k in np.asarray(killmask).ravel()]
        self._p = _wb._Dedisperser(int(nchans), float(fch1), float(foff), float(tsamp), dms,
                                   int(nbits), bool(signed), int(nsamples or 0), km, backend,
                                   algorithm, int(threads), -1 if device is None else int(device))
        self.dms = np.asarray(dms, dtype=np.float32)
        self.nchans, self.nbits = int(nchans), int(nbits)

    @property
    def max_delay(self) -> int:
        """Largest delay (samples): the overlap between consecutive gulps."""
        return self._p.max_delay

    @property
    def delays(self) -> np.ndarray:
        """Delay table, int32 [ndm][nchans] (samples)."""
        return self._p.delays

    @property
    def backend(self) -> str:
        return self._p.backend

    @property
    def algorithm(self) -> str:
        return self._p.algorithm

    def __call__(self, data, out=None, *, stream=None):
        """Dedisperses one gulp.

        Parameters
        ----------
        data : array (NumPy, CuPy, PyTorch, any DLPack array)
            [time][chan] samples of the plan's nbits (see the class), C-contiguous.
        out : array, optional
            float32 [ndm][time - max_delay], same kind and device as ``data``.
        stream : optional
            CUDA stream (int, CuPy or PyTorch stream); default: the caller's current stream.

        Returns
        -------
        array
            float32 [ndm][time - max_delay], the same kind of array as ``data`` on its device
            (``out`` when given). On CUDA the work is queued on the stream (not waited for).

        Raises
        ------
        TypeError
            A dtype that does not hold nbits samples.
        ValueError
            A wrong shape, non-contiguous strides, a gulp not longer than max_delay, ``out``
            on another device, a CUDA array given to a cpu plan.
        """
        data = _arrays.as_input(data, "data")
        n = int(data.shape[0]) if len(data.shape) else 0
        shape = (len(self.dms), max(n - self.max_delay, 0))
        if out is None:
            out = _arrays.empty_like_kind(data, shape, np.float32)
        else:
            _arrays.check_out(out, shape, np.float32)
        s = _arrays.current_stream(data, stream) if _arrays.device_of(data) >= 0 else 0
        self._p.execute(data, out, s)
        return _arrays.deliver(data, out)
