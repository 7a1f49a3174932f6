#pragma once
// Ultrasound channel data on disk: Verasonics/PyMUST-style MATLAB .mat files (matio) and USTB's
// ultrasound file format UFF (HDF5), plus volume products (NumPy .npy, HDF5). Layouts and the
// subset of each format are described in docs/FORMATS.md. Every writer is atomic (temporary
// file renamed on success).

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/das.hpp"

namespace warpbeam::io {

/// Channel data [batch][rx][tx][sample] with what a beamformer needs to know about them.
struct UltrasoundData {
  das::Signal signal = das::Signal::rf;
  std::int64_t batch = 0, nrx = 0, ntx = 0, nsamples = 0;
  std::vector<float> rf;                 // [batch][rx][tx][sample] (signal rf)
  std::vector<std::complex<float>> iq;   // [batch][rx][tx][sample] (signal iq)
  double fs = 0;                         ///< sampling frequency (Hz)
  double fc = 0;                         ///< centre / demodulation frequency (Hz)
  double c = 1540;                       ///< sound speed (m/s)
  double t0 = 0;                         ///< time of sample 0 (s)
  double bandwidth = 0;                  ///< fractional -6 dB bandwidth (0.15 = 15 %); 0 = unknown
  double prf = 0;                        ///< pulse repetition frequency (Hz); 0 = unknown
  das::Probe probe;                      ///< receive elements [nrx]
  std::vector<das::Transmit> transmits;  ///< [ntx]
};

/// Reads a Verasonics/PyMUST-style .mat (v5 or v7.3): a variable `RF` (real) or `IQ` (complex),
/// [nsamples][nelements] or [nsamples][nelements][nshots], any numeric class, and a struct
/// `param` with fs (Hz, required), fc, c, t0, pitch (or elements), width, Nelements, TXdelay
/// ([ntx][nelements] s, default all 0), bandwidth (%), PRF. Shots are frames x transmits with the
/// transmit fastest. Throws io when the file cannot be opened, format for a missing RF/IQ or
/// param, a missing fs, or mismatched shapes (naming the field).
UltrasoundData read_mat(const std::string& path);
/// Writes the same layout (RF as single, param as doubles, elements [3][nelements]), with the
/// provenance JSON in a char variable `provenance`. Transmits must be element delays, plane or
/// diverging waves (converted to per-element TXdelay). Throws unsupported without matio.
void write_mat(const std::string& path, const UltrasoundData& data,
               const nlohmann::json& provenance);

/// Reads the channel_data group of a UFF file (USTB v0.0.1 conventions; the subset warpbeam
/// writes, see docs/FORMATS.md). Throws io / format / unsupported (no HDF5 in this build).
UltrasoundData read_uff(const std::string& path);
/// Writes a UFF file with one channel_data group. Transmits must be plane or diverging waves.
void write_uff(const std::string& path, const UltrasoundData& data,
               const nlohmann::json& provenance);

/// Reads any real numeric variable `name` of a .mat as doubles in MATLAB (column-major) order,
/// with its dimensions (e.g. the uint8 B-mode `I` of PyMUST's bmode_PWI_disk.mat).
std::vector<double> read_mat_array(const std::string& path, const std::string& name,
                                   std::vector<std::size_t>* dims);

/// read_mat for *.mat, read_uff for *.uff / *.h5 / *.hdf5; format error otherwise.
UltrasoundData read_ultrasound(const std::string& path);

bool mat_supported();
bool uff_supported();

/// Writes a float32 NumPy .npy array (C order) of `shape`.
void write_npy(const std::string& path, const float* data, const std::vector<std::int64_t>& shape);
/// Writes a float32 HDF5 dataset `name` of `shape` with string attribute "provenance" and numeric
/// attributes `attrs` (e.g. axis start and step). Throws unsupported without HDF5.
void write_hdf5_volume(const std::string& path, const std::string& name, const float* data,
                       const std::vector<std::int64_t>& shape,
                       const std::vector<std::pair<std::string, double>>& attrs,
                       const nlohmann::json& provenance);

}  // namespace warpbeam::io
