"""Simulators that make realistic inputs for every engine, for tests and tutorials:
``filterbank`` (dispersed bursts in Gaussian noise), ``ultrasound`` (point scatterers seen by a
probe), ``station`` (sky sources seen by an antenna array, ci4 voltages)."""
from __future__ import annotations

import os

import numpy as np

from . import _warpbeam as _wb
from .das import Transmit
from .io import UltrasoundData

__all__ = ["filterbank", "ultrasound", "station", "linear_array"]


def filterbank(path, *, bursts=((300.0, 20.0, 1e-3, 5.0),), nchans: int = 256,
               fch1: float = 1500.0, foff: float = -1.0, tsamp: float = 256e-6, nbits: int = 8,
               duration: float = 10.0, seed: int = 1, tstart: float = 60000.0,
               noise_mean: float = -1.0, noise_rms: float = -1.0,
               source_name: str = "warpbeam_sim") -> dict:
    """Writes a SIGPROC filterbank of Gaussian noise with dispersed bursts (sim/filterbank.hpp:
    Gaussian profiles smeared within each channel, flat spectrum, injected matched-filter S/N),
    and a JSON side file ``path + '.json'``; as ``warpbeam simulate filterbank``.

    Parameters
    ----------
    path : str or os.PathLike
    bursts : sequence of (dm, snr, width_s, time_s)
        DM (pc cm^-3), injected S/N, FWHM (s) and arrival at the top of the band (s).
    nchans, fch1, foff, tsamp, nbits, duration, seed, tstart
        Channels, MHz, MHz, s, bits (1, 2, 4, 8, 16, 32), s, seed, MJD.
    noise_mean, noise_rms : float
        < 0: the defaults for nbits (8 bits: 96 and 16).

    Returns
    -------
    dict
        The side file's content: parameters, seed, every burst with its amplitude, provenance.

    Raises
    ------
    ValueError
        A parameter out of range (named), a burst outside the file. OSError when it cannot be
        written.
    """
    b = [tuple(float(v) for v in x) for x in bursts]
    return _wb.simulate_filterbank(os.fspath(path), int(nchans), float(fch1), float(foff),
                                   float(tsamp), int(nbits), float(duration), int(seed),
                                   float(tstart), float(noise_mean), float(noise_rms),
                                   source_name, b)


def linear_array(n: int, pitch: float) -> np.ndarray:
    """Element positions (n, 3) of a linear array along x centred on 0 (PyMUST's convention)."""
    x = (np.arange(n) - (n - 1) / 2) * pitch
    return np.stack([x, np.zeros(n), np.zeros(n)], axis=1)


def ultrasound(elements, scatterers, *, amplitudes=None, transmits=None,
               sample_type: str = "rf", fc: float = 5e6, bandwidth: float = 0.6,
               fs: float = 20e6, c: float = 1540.0, t0: float = 0.0, nsamples: int = 1024,
               frames: int = 1, noise: float = 0.0, seed: int = 1) -> UltrasoundData:
    """Channel data of point scatterers (sim/ultrasound.hpp: linear acoustics, first-order
    scattering, Gaussian pulse of fractional -6 dB bandwidth, UFF transmit conventions).

    Parameters
    ----------
    elements : array_like
        Element positions (nrx, 3), metres (e.g. :func:`linear_array`).
    scatterers : array_like
        (n, 3) positions, metres.
    amplitudes : array_like, optional
        (n,), default 1.
    transmits : list of Transmit, optional
        Default one unsteered plane wave.
    sample_type : {'rf', 'iq'}
    fc, bandwidth, fs, c, t0, nsamples, frames, noise, seed
        Hz, fraction, Hz, m/s, s, samples, frames (differing by noise), noise rms relative to
        the largest amplitude, seed.

    Returns
    -------
    UltrasoundData
        As :func:`warpbeam.read_ultrasound`: ``data`` [frames][rx][tx][sample].
    """
    f64 = lambda a: np.ascontiguousarray(np.asarray(a, dtype=np.float64))  # noqa: E731
    amps = [] if amplitudes is None else [float(a) for a in np.ravel(amplitudes)]
    tx = [Transmit.plane(0.0)] if transmits is None else list(transmits)
    return UltrasoundData(_wb.simulate_ultrasound(
        f64(elements), tx, f64(scatterers).reshape(-1, 3), amps, sample_type, float(fc),
        float(bandwidth), float(fs), float(c), float(t0), int(nsamples), int(frames),
        float(noise), int(seed)))


def station(positions, freqs_hz, ntime: int = 1000, *, sources=((0.0, 0.0, 1.0),),
            ndiffuse: int = 0, diffuse_flux: float = 0.0, receiver_noise: float = 1.0,
            rms: float = 2.0, constant_power: bool = False, seed: int = 1, threads: int = 0):
    """ci4 voltages of an antenna array observing point sources (sim/station.hpp).

    Parameters
    ----------
    positions : array_like
        Stand positions (nstand, 3), metres East, North, Up.
    freqs_hz : array_like
        (nchan,) Hz.
    ntime : int
        Spectra.
    sources : sequence of (l, m, flux[, q, u, v])
        Direction cosines (East, North), Stokes I and fractional Q, U, V.
    ndiffuse, diffuse_flux, receiver_noise, rms, constant_power, seed, threads
        See sim/station.hpp.

    Returns
    -------
    voltages : numpy.ndarray
        uint8 [nchan][ntime][nstand][2] ci4 (real in the high nibble).
    scale : float
        ci4 levels per unit voltage.
    """
    src = [tuple(float(v) for v in (tuple(s) + (0.0,) * (6 - len(s)))) for s in sources]
    v, scale, _ = _wb.simulate_station(
        np.ascontiguousarray(np.asarray(positions, dtype=np.float64)),
        [float(f) for f in np.ravel(freqs_hz)], int(ntime), src, int(ndiffuse),
        float(diffuse_flux), float(receiver_noise), float(rms), bool(constant_power), int(seed),
        int(threads))
    return v, scale
