"""EPIC E-field direct imaging (epic.hpp; Thyagarajan et al. 2017): each stand's voltage
gridded with a prolate-spheroidal GCF, 2-D FFT to the sky, XX*, YY*, XY* accumulated over the
gulp, autocorrelations removed and the grid corrected, so the image equals the FX image of the
cross-correlations."""
from __future__ import annotations

import numpy as np

from . import _arrays
from . import _warpbeam as _wb

__all__ = ["EpicImager"]


class EpicImager:
    """An EPIC imaging plan for one station and band, called per gulp.

    Parameters
    ----------
    positions : array_like
        Stand positions (nstand, 3), metres East, North, Up.
    freqs_hz : array_like
        Channel centre frequencies (nchan,), Hz.
    ntime : int
        Spectra per gulp.
    grid_size : int, default 128
        N: images are N x N (even; the fused CUDA kernel: 64, 128, 256).
    support : int, default 2
        GCF support in cells (1..9).
    cell_m : float, default 0
        Aperture cell (m) at the highest frequency (0: lambda_min / 2, the whole sky).
    stand_ok : array_like of bool, optional
        Per stand: False = flagged.
    calibration : array_like, optional
        complex64 [nchan][nstand][2] factors applied to each voltage before gridding.
    phase_to_zenith : bool, default True
    max_stand_radius_m : float, default 150
        Stands farther than this from the centroid are not gridded.
    algorithm : {'auto', 'reference', 'multikernel', 'fused'}, default 'auto'
    backend : {'auto', 'cpu', 'cuda'}, default 'auto'
    device : int, optional
    threads : int, default 0

    Raises
    ------
    ValueError
        A parameter out of range, an aperture that does not fit the grid.
    RuntimeError
        An algorithm the backend cannot run, CUDA without a device.
    """

    def __init__(self, positions, freqs_hz, ntime: int, *, grid_size: int = 128,
                 support: int = 2, cell_m: float = 0.0, stand_ok=None, calibration=None,
                 phase_to_zenith: bool = True, max_stand_radius_m: float = 150.0,
                 algorithm: str = "auto", backend: str = "auto", device: int | None = None,
                 threads: int = 0):
        pos = np.ascontiguousarray(np.asarray(positions, dtype=np.float64))
        freqs = [float(f) for f in np.asarray(freqs_hz, dtype=np.float64).ravel()]
        ok = None if stand_ok is None else [1 if s else 0 for s in np.asarray(stand_ok).ravel()]
        cal = None if calibration is None else np.ascontiguousarray(
            np.asarray(calibration, dtype=np.complex64))
        self._p = _wb._EpicImager(freqs, pos, int(ntime), ok, cal, bool(phase_to_zenith),
                                  int(grid_size), float(cell_m), int(support),
                                  float(max_stand_radius_m), algorithm, backend, int(threads),
                                  -1 if device is None else int(device))
        self.nchan, self.nstand, self.ntime, self.grid_size = (len(freqs), pos.shape[0],
                                                               int(ntime), int(grid_size))

    backend = property(lambda self: self._p.backend)
    algorithm = property(lambda self: self._p.algorithm)
    used_stands = property(lambda self: np.asarray(self._p.used_stands),
                           doc="stands gridded (0-based)")
    cell_wavelengths = property(lambda self: self._p.cell_wavelengths,
                                doc="du: the aperture cell in wavelengths")
    grid_correction = property(lambda self: self._p.grid_correction,
                               doc="1/|T|^2, float32 [nchan][N][N] (centred)")

    def footprint(self, chan: int, stand: int):
        """The gridded kernel of a used stand at a channel: (x0, y0, wx, wy), weight(ix, iy) =
        wy[iy] wx[ix] on cell (x0 + ix, y0 + iy)."""
        x0, y0, wx, wy = self._p.footprint(int(chan), int(stand))
        return x0, y0, np.asarray(wx), np.asarray(wy)

    def lm(self):
        """Direction cosines of the pixels: l (East) along x and m (North) along y, (N,)."""
        n, du = self.grid_size, self.cell_wavelengths
        ax = (np.arange(n) - n // 2) / (n * du)
        return ax, ax

    def __call__(self, voltages, out=None, *, stream=None):
        """Images one gulp.

        Parameters
        ----------
        voltages : array (NumPy, CuPy, PyTorch, any DLPack array)
            ci4 bytes uint8 [nchan][ntime][nstand][2] (real part in the high nibble).
        out : array, optional
            float32 [nchan][4][N][N], same device.
        stream : optional
            CUDA stream (default: the caller's current one).

        Returns
        -------
        array
            float32 [nchan][4][N][N]: XX*, YY*, Re XY*, Im XY*, centred, x to the East, y to the
            North; the same kind of array as ``voltages`` on its device.
        """
        voltages = _arrays.as_input(voltages, "voltages")
        shape = (self.nchan, 4, self.grid_size, self.grid_size)
        if out is None:
            out = _arrays.empty_like_kind(voltages, shape, np.float32)
        else:
            _arrays.check_out(out, shape, np.float32)
        s = _arrays.current_stream(voltages, stream) if _arrays.device_of(voltages) >= 0 else 0
        self._p.execute(voltages, out, s)
        return _arrays.deliver(voltages, out)
