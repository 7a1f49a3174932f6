"""warpbeam: real-time signal processing for sensor arrays, from Python.

Every engine of the C++ library (dedispersion and single-pulse search, multi-beam beamforming,
EPIC imaging, ultrasound delay-and-sum) on NumPy, CuPy and PyTorch arrays (any ``__dlpack__``
object), without copies: a CUDA array runs on the CUDA backend on its own device and the
caller's current stream, and the result comes back as the same kind of array on the same
device. Plan objects (:class:`Dedisperser`, :class:`DasPlan`, :class:`Beamformer`,
:class:`EpicImager`) are made once and called per gulp; one-call functions (:func:`das`,
:func:`search`) cover the common case. The GIL is released while a plan runs.

Errors: a bad argument raises ValueError (TypeError for a wrong dtype or type), a malformed file
:class:`FormatError`, an unreadable or unwritable file OSError, a CUDA failure (or CUDA asked of
a build or machine without it) RuntimeError.
"""
from . import _warpbeam
from ._warpbeam import FormatError, cuda_available, cuda_built, device_count
from .beamform import SPEED_OF_LIGHT, Beamformer, beam_weights
from .das import DasPlan, Transmit, bmode, das, grid_points, rf_to_iq
from .dedisp import DISPERSION_CONSTANT, Dedisperser, dm_list
from .epic import EpicImager
from .io import (FilterbankFile, UltrasoundData, open_filterbank, read_filterbank,
                 read_ultrasound, write_filterbank)
from .search import CANDIDATE_DTYPE, Candidates, read_cand, search
from . import simulate

__version__ = _warpbeam.version()
__git_commit__ = _warpbeam.git_commit()

FormatError.__module__ = "warpbeam"

__all__ = ["FormatError", "cuda_available", "cuda_built", "device_count", "Beamformer",
           "beam_weights", "SPEED_OF_LIGHT", "DasPlan", "Transmit", "das", "grid_points",
           "rf_to_iq", "bmode", "Dedisperser", "dm_list", "DISPERSION_CONSTANT", "EpicImager",
           "FilterbankFile", "UltrasoundData", "open_filterbank", "read_filterbank",
           "read_ultrasound", "write_filterbank", "Candidates", "CANDIDATE_DTYPE", "read_cand",
           "search", "simulate"]
