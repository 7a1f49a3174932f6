"""Coherent multi-beam beamforming of channelised antenna voltages (beamform.hpp):
v[b][p][t][c] = sum_a w[c][p][b][a] x[c][t][a][p] (Magro et al. 2013, eq. 1), output as power
|v|^2 (optionally summed over pols and integrated) or voltage, [beam][pol][time][chan]."""
from __future__ import annotations

import numpy as np

from . import _arrays
from . import _warpbeam as _wb

__all__ = ["Beamformer", "beam_weights", "SPEED_OF_LIGHT"]

SPEED_OF_LIGHT = _wb.SPEED_OF_LIGHT


def beam_weights(positions, freqs_hz, directions, npol: int = 1) -> np.ndarray:
    """Phasing weights w[c][p][b][a] = exp(-2 pi i f_c (r_a . s_b) / c0) for beams at fixed
    (azimuth, elevation).

    Parameters
    ----------
    positions : array_like
        Antenna positions (nant, 3), metres East, North, Up.
    freqs_hz : array_like
        Channel centre frequencies (nchans,), Hz.
    directions : array_like
        (nbeams, 2): azimuth (from North through East) and elevation, radians.
    npol : int, default 1

    Returns
    -------
    numpy.ndarray
        complex64 [nchans][npol][nbeams][nant].

    Raises
    ------
    ValueError
        Shapes, non-finite positions, a direction below the horizon.
    """
    f64 = lambda a: np.ascontiguousarray(np.asarray(a, dtype=np.float64))  # noqa: E731
    return _wb.beam_weights(f64(positions), f64(freqs_hz).ravel(), f64(directions), int(npol))


class Beamformer:
    """A beamforming plan: weights and scratch for one shape, called per block of samples.

    Parameters
    ----------
    weights : array_like
        complex64 [nchans][npol][nbeams][nantennas] (e.g. :func:`beam_weights`); replace them
        with :meth:`set_weights` (tracking beams).
    nsamples : int
        Time samples per channel per call.
    sample_type : {'ci4', 'ci8', 'cf16', 'cf32'}, default 'ci4'
        Voltage samples: ci4 1 byte (real in the high nibble), ci8 2 bytes, cf16, cf32.
    output : {'power', 'voltage'}, default 'power'
    sum_pols : bool, default False
        Power summed over the polarisations.
    integration : int, default 1
        Samples summed into one output sample (power; divides nsamples).
    algorithm : str, default 'auto'
        'auto', 'register-tiled', 'register-stream', 'tensor-core', 'cublas-fp16',
        'tensor-int8', 'tensor-int8-stream' (CUDA only; int8 weights, see
        docs/PERFORMANCE.md; the stream variant: ci4, <= 32 antennas, pols not summed).
    backend : {'auto', 'cpu', 'cuda'}, default 'auto'
    device : int, optional
    threads : int, default 0

    Raises
    ------
    ValueError
        A parameter out of range (named).
    RuntimeError
        A CUDA-only algorithm on the CPU, CUDA without a device.
    """

    def __init__(self, weights, nsamples: int, *, sample_type: str = "ci4",
                 output: str = "power", sum_pols: bool = False, integration: int = 1,
                 algorithm: str = "auto", backend: str = "auto", device: int | None = None,
                 threads: int = 0):
        w = np.ascontiguousarray(np.asarray(weights, dtype=np.complex64))
        if w.ndim != 4:
            raise ValueError(f"weights: shape {w.shape}, expected [nchans][npol][nbeams][nant]")
        nchans, npol, nbeams, nant = w.shape
        self._p = _wb._Beamformer(nchans, nant, npol, nbeams, int(nsamples), sample_type, output,
                                  bool(sum_pols), int(integration), algorithm, backend,
                                  int(threads), -1 if device is None else int(device))
        self._p.set_weights(w)

    def set_weights(self, weights) -> None:
        """New weights, complex64 [nchans][npol][nbeams][nantennas] (host)."""
        self._p.set_weights(np.ascontiguousarray(np.asarray(weights, dtype=np.complex64)))

    output_shape = property(lambda self: tuple(self._p.output_shape),
                            doc="(nbeams, pols out, time out, nchans or 2 nchans for voltage)")
    backend = property(lambda self: self._p.backend)
    algorithm = property(lambda self: self._p.algorithm)
    effective_weights = property(lambda self: self._p.effective_weights,
                                 doc="the weights as applied (fp16-rounded for tensor cores)")

    def __call__(self, voltages, out=None, *, stream=None):
        """Forms the beams of one block.

        Parameters
        ----------
        voltages : array (NumPy, CuPy, PyTorch, any DLPack array)
            [chan][time][...], C-contiguous, whose trailing axes hold one time row (antennas x
            pols of the sample type, e.g. uint8 [chan][time][ant][pol] for ci4, complex64 for
            cf32).
        out : array, optional
            float32 :attr:`output_shape`, same device.
        stream : optional
            CUDA stream (default: the caller's current one).

        Returns
        -------
        array
            float32 [beam][pol][time][chan] (voltage output: re, im interleaved along chan),
            the same kind of array as ``voltages`` on its device.

        Raises
        ------
        ValueError
            A shape that does not hold the plan's rows, strides, devices.
        """
        voltages = _arrays.as_input(voltages, "voltages")
        shape = self.output_shape
        if out is None:
            out = _arrays.empty_like_kind(voltages, shape, np.float32)
        else:
            _arrays.check_out(out, shape, np.float32)
        s = _arrays.current_stream(voltages, stream) if _arrays.device_of(voltages) >= 0 else 0
        self._p.execute(voltages, out, s)
        return _arrays.deliver(voltages, out)
