"""File I/O: SIGPROC filterbanks (read, memory-mapped or in gulps; written atomically) and
ultrasound channel data (Verasonics/PyMUST .mat, USTB UFF)."""
from __future__ import annotations

import json
import os

import numpy as np

from . import _warpbeam as _wb

__all__ = ["read_filterbank", "open_filterbank", "FilterbankFile", "write_filterbank",
           "read_ultrasound", "UltrasoundData"]


def _header(f: "_wb.FilterbankFile") -> dict:
    return json.loads(f.header_json())


class FilterbankFile:
    """A filterbank opened for reading in gulps (any format warpbeam reads: SIGPROC now).

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Attributes
    ----------
    header : dict
        SIGPROC keywords (``nchans``, ``nbits``, ``fch1`` and ``foff`` in MHz, ``tsamp`` in s,
        ``tstart`` MJD, ...) plus ``nsamples``, ``header_bytes`` and ``format``.

    Raises
    ------
    OSError
        The file cannot be opened or read.
    warpbeam.FormatError
        The file is not a filterbank warpbeam knows, or its header is malformed.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._f = _wb.FilterbankFile(self.path)
        self.header = _header(self._f)

    @property
    def position(self) -> int:
        """Index of the next time sample :meth:`read` returns."""
        return self._f.position

    def seek(self, sample: int) -> None:
        """Moves to time sample ``sample`` (0 <= sample <= nsamples; ValueError outside)."""
        self._f.seek(int(sample))

    def read(self, nsamples: int) -> np.ndarray:
        """Up to ``nsamples`` time samples as float32 [time][chan] (fewer at the end)."""
        return self._f.read(int(nsamples))

    def read_raw(self, nsamples: int) -> np.ndarray:
        """Up to ``nsamples`` time samples as packed bytes, uint8 [time][bytes per sample]."""
        return self._f.read_raw(int(nsamples))

    def gulps(self, nsamples: int):
        """Iterates over the rest of the file in float32 gulps of ``nsamples`` time samples."""
        while True:
            g = self.read(nsamples)
            if g.shape[0] == 0:
                return
            yield g


def open_filterbank(path) -> FilterbankFile:
    """Opens a filterbank for gulped reads; see :class:`FilterbankFile`."""
    return FilterbankFile(path)


_MMAP_DTYPES = {8: (np.uint8, np.int8), 16: (np.uint16, np.int16), 32: (np.float32, np.float32)}


def read_filterbank(path, start: int = 0, nsamples: int | None = None, mmap: bool | None = None):
    """Reads a filterbank's header and samples.

    Parameters
    ----------
    path : str or os.PathLike
        A SIGPROC filterbank file (``.fil``).
    start : int, default 0
        First time sample.
    nsamples : int, optional
        Time samples to return (default: to the end of the file).
    mmap : bool, optional
        Memory-map the data (no read, no copy; the pages are read when touched). Possible for
        8-, 16- and 32-bit SIGPROC files, where the default is True. Samples of 1, 2 and 4 bits
        are unpacked (read in gulps), so mmap=True is refused for them.

    Returns
    -------
    header : dict
        SIGPROC keywords (MHz, s, MJD as in SIGPROC) plus ``nsamples``, ``header_bytes`` and
        ``format``.
    data : numpy.ndarray
        [time][chan]: memory-mapped, read-only, in the file's type (uint8, int8, uint16, int16 or
        float32); or float32 when unpacked from 1, 2 or 4 bits. Channel i has the frequency
        fch1 + i * foff (MHz).

    Raises
    ------
    OSError
        The file cannot be opened or read.
    warpbeam.FormatError
        The file is not a filterbank or its header is malformed.
    ValueError
        ``start`` or ``nsamples`` outside the file; ``mmap=True`` for sub-byte samples.
    """
    f = FilterbankFile(path)
    h = f.header
    total = h["nsamples"]
    start = int(start)
    if start < 0 or start > total:
        raise ValueError(f"start = {start} is outside [0, {total}]")
    n = total - start if nsamples is None else int(nsamples)
    if n < 0 or start + n > total:
        raise ValueError(f"nsamples = {n} from start {start} is outside the file's {total} "
                         "samples")
    can_map = h.get("format", "").startswith("SIGPROC") and h["nbits"] in _MMAP_DTYPES
    if mmap is None:
        mmap = can_map
    if mmap and not can_map:
        raise ValueError(f"mmap=True: {h['nbits']}-bit samples are unpacked, not mapped "
                         "(give mmap=False)")
    if mmap:
        dtype = _MMAP_DTYPES[h["nbits"]][1 if h.get("signed") else 0]
        if n == 0:
            return h, np.empty((0, h["nchans"]), dtype=dtype)
        row = h["nchans"] * np.dtype(dtype).itemsize
        data = np.memmap(f.path, dtype=dtype, mode="r", offset=h["header_bytes"] + start * row,
                         shape=(n, h["nchans"]))
        return h, data
    f.seek(start)
    return h, f.read(n)


def write_filterbank(path, header: dict, data) -> None:
    """Writes a SIGPROC filterbank atomically (a temporary file renamed on success: a failure
    leaves no file).

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    header : dict
        SIGPROC keywords: at least ``nchans``, ``nbits``, ``fch1``, ``foff`` (MHz), ``tsamp``
        (s); optional ``tstart`` (MJD), ``source_name``, ``telescope_id``, ... (``nsamples``,
        ``header_bytes`` and ``format`` are ignored).
    data : array_like
        Host array [time][chan]: float32 (rounded to nearest and clipped to ``nbits``), or the
        packed samples as stored (uint8 [time][nchans * nbits / 8] below 8 bits, the integer
        type of ``nbits`` otherwise).

    Raises
    ------
    ValueError
        An unknown keyword, a shape that does not match ``nchans``, a device array.
    TypeError
        A dtype that holds neither float32 nor ``nbits`` samples.
    warpbeam.FormatError
        Header values no filterbank has (nchans 0, nbits 3, tsamp <= 0, ...).
    OSError
        The file cannot be written.
    """
    if not isinstance(header, dict):
        raise TypeError(f"header: a dict of SIGPROC keywords, got {type(header).__name__}")
    _wb.write_filterbank(os.fspath(path), json.dumps(header), data)


class UltrasoundData(dict):
    """Channel data with what a beamformer needs to know about them (a dict with attribute
    access). Keys: ``data`` [batch][rx][tx][sample] (float32 RF or complex64 IQ),
    ``sample_type`` ('rf' or 'iq'), ``fs``, ``fc`` (Hz), ``c`` (m/s), ``t0`` (s), ``bandwidth``
    (fraction), ``prf`` (Hz), ``elements`` (nrx, 3) metres, ``element_kinds``, ``pitch``,
    ``element_width`` (m), ``transmits`` (list of :class:`warpbeam.Transmit`)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def read_ultrasound(path) -> UltrasoundData:
    """Reads ultrasound channel data: a Verasonics/PyMUST-style MATLAB ``.mat`` (``RF`` or ``IQ``
    [samples][elements][shots] and ``param``) or a UFF file (``.uff``, ``.h5``).

    Returns
    -------
    UltrasoundData
        ``data`` is [batch][rx][tx][sample] (frames x transmits from the shots, transmit
        fastest), ready for :func:`warpbeam.das`.

    Raises
    ------
    OSError
        The file cannot be opened.
    warpbeam.FormatError
        A missing RF/IQ or param, a missing fs, mismatched shapes, an unknown extension.
    RuntimeError
        This build has no matio (.mat) or HDF5 (UFF).
    """
    return UltrasoundData(_wb.read_ultrasound(os.fspath(path)))
