"""The single-pulse search (RFI cleaning, dedispersion, baseline, boxcars, friends-of-friends
clustering as heimdall; search.hpp defines every stage) and its candidates."""
from __future__ import annotations

import json
import os
import tempfile

import numpy as np

from . import _warpbeam as _wb
from .io import write_filterbank

__all__ = ["search", "Candidates", "read_cand", "CANDIDATE_DTYPE"]

#: heimdall's .cand columns, then the beam.
CANDIDATE_DTYPE = np.dtype([("snr", np.float32), ("sample", np.int64), ("time_s", np.float64),
                            ("filter", np.int32), ("dm_trial", np.int32), ("dm", np.float32),
                            ("members", np.int64), ("begin", np.int64), ("end", np.int64),
                            ("beam", np.int32)])

_OPTIONS = {"dm_min", "dm_max", "dm_tolerance", "pulse_width_us", "boxcar_max", "snr_min",
            "baseline_s", "zap_channels", "zap_sigma", "zero_dm", "time_tol", "filter_tol",
            "dm_tol", "gulp", "memory_bytes", "threads", "beam", "progress",
            "device_memory_bytes", "device", "gpu_streams", "autotune", "read_threads"}


class Candidates(np.ndarray):
    """Candidates of a search: a NumPy structured array of :data:`CANDIDATE_DTYPE` (heimdall's
    columns ``snr sample time_s filter dm_trial dm members begin end`` and ``beam``), sorted by
    S/N (descending).

    ``sample``: centre sample of the best boxcar from the file start; ``time_s``: arrival at the
    top of the band of the boxcar's centre (s); ``filter``: log2 of the boxcar width (samples);
    ``dm`` in pc cm^-3; ``members``: peaks clustered; ``begin``/``end``: the cluster's first and
    last sample.

    Attributes
    ----------
    header : dict
        The searched file's SIGPROC header.
    dms : numpy.ndarray
        The DM trials (pc cm^-3).
    parameters : dict
        The search's options (as the JSON product records them).
    result : dict
        How it ran: gulps, max_delay, stage times (s), backend, memory.
    file : str
        The searched file ('' for an array searched through a temporary file).
    """

    header: dict
    dms: np.ndarray
    parameters: dict
    result: dict
    file: str

    def __new__(cls, columns: dict, header=None, dms=None, parameters=None, result=None,
                file=""):
        n = len(columns["snr"])
        arr = np.empty(n, dtype=CANDIDATE_DTYPE).view(cls)
        for name in CANDIDATE_DTYPE.names:
            arr[name] = columns[name]
        arr.header = header or {}
        arr.dms = np.asarray(dms if dms is not None else [], dtype=np.float32)
        arr.parameters = parameters or {}
        arr.result = result or {}
        arr.file = file
        return arr

    def __array_finalize__(self, obj):
        for a, default in (("header", {}), ("dms", None), ("parameters", {}), ("result", {}),
                           ("file", "")):
            setattr(self, a, getattr(obj, a, default))

    def _columns(self) -> dict:
        base = np.asarray(self).view(np.ndarray)
        return {n: np.ascontiguousarray(base[n]) for n in CANDIDATE_DTYPE.names}

    @property
    def width_s(self) -> np.ndarray:
        """Boxcar width of each candidate (s): 2**filter * tsamp."""
        return (2.0 ** np.asarray(self["filter"])) * self.header.get("tsamp", 0.0)

    def format_cand(self, with_beam: bool = False) -> str:
        """The .cand text (tab-separated heimdall columns, one line per candidate)."""
        return _wb.format_cand(self._columns(), with_beam)

    def to_cand(self, path, with_beam: bool = False) -> None:
        """Writes heimdall's .cand file atomically: the bytes ``warpbeam search --output``
        writes. ``with_beam`` adds the 10th column. Raises OSError when it cannot be written."""
        _wb.write_cand(os.fspath(path), self._columns(), with_beam)

    def to_json(self, path) -> None:
        """Writes the JSON product (header, parameters, DM list, candidates with arrival MJD,
        provenance; docs/FORMATS.md) atomically, as ``warpbeam search --json``. Raises OSError."""
        _wb.write_candidates_json(os.fspath(path), self._columns(), json.dumps(self.header),
                                  self.file, json.dumps(self.parameters),
                                  [float(d) for d in self.dms])

    def to_pandas(self):
        """A pandas DataFrame of the columns (ImportError without pandas)."""
        import pandas as pd
        return pd.DataFrame(self._columns())


def read_cand(path) -> Candidates:
    """Reads a .cand file (9 or 10 columns). Raises OSError, warpbeam.FormatError (naming the
    line)."""
    return Candidates(_wb.read_cand(os.fspath(path)))


def search(path_or_array, header: dict | None = None, *, backend: str = "auto",
           **options) -> Candidates:
    """Searches a filterbank for dispersed single pulses.

    Parameters
    ----------
    path_or_array : str, os.PathLike or array_like
        A filterbank file (read in gulps with bounded memory), or host data [time][chan]
        (float32, or the packed samples of ``header['nbits']``) with its ``header``: written to
        a temporary SIGPROC file that is searched and removed.
    header : dict, optional
        SIGPROC keywords for an array (nchans, nbits, fch1, foff (MHz), tsamp (s), tstart, ...).
    backend : {'auto', 'cpu', 'cuda'}, default 'auto'
        'cuda' runs RFI cleaning, dedispersion and the search on the GPU; the candidates are the
        same (S/N within 1e-3).
    **options
        As ``warpbeam search``'s options (defaults in parentheses): dm_min (0), dm_max (2000)
        pc cm^-3; dm_tolerance (1.25), pulse_width_us (40) for the DM list; boxcar_max (4096
        samples, a power of 2); snr_min (6); baseline_s (2.0 s); zap_channels (list of
        channel indices); zap_sigma (5; 0: no outlier zapping); zero_dm (True); time_tol (3),
        filter_tol (3), dm_tol (200) for the clustering; gulp (0: from the memory budget);
        memory_bytes (2 GiB); threads (0); read_threads (0: half the hardware threads, at
        most 8, per read of a gulp); beam (0); progress (False); device (0),
        device_memory_bytes (0: 80 % of free), gpu_streams (2), autotune (False) for CUDA.

    Returns
    -------
    Candidates
        Sorted by S/N; ``.to_cand(path)`` writes the CLI's .cand byte for byte.

    Raises
    ------
    TypeError
        An unknown option.
    ValueError
        An option out of range (named), a file shorter than the largest DM delay (dm_max).
    OSError
        The file cannot be read.
    warpbeam.FormatError
        A malformed file.
    """
    unknown = set(options) - _OPTIONS
    if unknown:
        raise TypeError(f"search() got unknown option(s): {', '.join(sorted(unknown))}")
    opts = dict(options)
    if "zap_channels" in opts:
        opts["zap_channels"] = [int(c) for c in opts["zap_channels"]]
    if isinstance(path_or_array, (str, os.PathLike)):
        if header is not None:
            raise ValueError("header: give a header only with an array (a file has its own)")
        path = os.fspath(path_or_array)
        r = _wb.search_file(path, json.dumps(opts), backend)
        return Candidates(r["candidates"], r["header"], r["dms"], r["parameters"], r["result"],
                          path)
    if header is None:
        raise ValueError("header: an array needs its SIGPROC header (nchans, nbits, fch1, foff, "
                         "tsamp)")
    fd, tmp = tempfile.mkstemp(suffix=".fil", prefix="warpbeam-search-")
    os.close(fd)
    try:
        write_filterbank(tmp, header, path_or_array)
        r = _wb.search_file(tmp, json.dumps(opts), backend)
    finally:
        os.remove(tmp)
    return Candidates(r["candidates"], r["header"], r["dms"], r["parameters"], r["result"], "")
