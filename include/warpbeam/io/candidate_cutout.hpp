#pragma once
// Candidate products for classification and inspection: per candidate, the arrays that
// your_candmaker (PyPI `your`, Aggarwal et al. 2020) writes and FETCH (Agarwal et al. 2020)
// classifies, in your's HDF5 layout, and a diagnostic PNG (PLplot). docs/FORMATS.md,
// "Candidate cutouts", lists every dataset and attribute.
//
// The recipe, as your's Candidate.get_chunk / dmtime / dedisperse and your_candmaker's CPU path:
//   delay   = k DM (fmin^-2 - fmax^-2)           (k = 4.148808e3 s MHz^2, the band's extremes)
//   window  = [tcand - delay - w tsamp, tcand + delay + w tsamp], w = boxcar width (samples);
//             nstart = trunc(start / tsamp), nsamp = trunc(length / tsamp); widened about its
//             centre to min_samp * w / 2 samples (w > 2) or min_samp (otherwise) when shorter
//   outside the file: each channel's median of what was read
//   data_freq_time: the window dedispersed at DM (each channel advanced by its delay to the
//             highest frequency, rounded to the nearest sample), averaged in time by
//             f = max(1, w / 2) (the end padded with each channel's median), the central
//             time_size samples kept, the channels resampled to frequency_size (skimage's
//             resize: a Gaussian of sigma (n_in / n_out - 1) / 2, truncated at 4 sigma, then
//             linear interpolation at (o + 0.5) n_in / n_out - 0.5, zero outside), then
//             normalised: minus its median, over its standard deviation
//   data_dm_time: the window dedispersed (dedisp::DedispersionPlan, CPU) at dm_size DMs evenly
//             from DM - R to DM + R, R = DM (your's range; R = 1 below DM 1, never below DM 0),
//             averaged in time by f as above, the same central samples, normalised likewise.
// Unlike your, channels are shifted by reading past the window (your rolls them around it), and
// delays are always relative to the highest frequency (your's: to the first channel, which is
// the same for the usual descending band).

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/io/sigproc.hpp"

namespace warpbeam::io {

/// One candidate to cut out, in the search's terms.
struct CutoutConfig {
  double dm = 0;                        ///< pc cm^-3
  double tcand_s = 0;                   ///< arrival at the highest frequency, s from the file start
  int width = 1;                        ///< boxcar width (samples)
  double snr = 0;                       ///< the search's S/N
  int label = -1;                       ///< your's label: -1 unknown
  int time_size = 256;                  ///< your_candmaker's --time_size
  int frequency_size = 256;             ///< your_candmaker's --frequency_size
  int dm_size = 256;                    ///< your's dmsteps
  int min_samp = 256;                   ///< your's Candidate.min_samp
  std::vector<std::uint8_t> kill_mask;  ///< [nchans] 1 = channel zapped by the search (optional)
  nlohmann::json search;  ///< the search's view of the candidate (stored as an attribute)

  /// Throws invalid_argument naming the field (dm >= 0, width >= 1, sizes 2 to 8192).
  void validate() const;
};

/// The products of one candidate.
struct CandidateCutout {
  std::string cand_id;      ///< your's: cand_tstart_%.12f_tcand_%.7f_dm_%.5f_snr_%.5f
  std::string file;         ///< the filterbank it was cut from
  std::string file_format;  ///< "fil" or "fits" (your's `format`)
  FilterbankHeader header;
  double tcand_s = 0, dm = 0, snr = 0;
  int width = 1, label = -1;
  int time_decimation = 1;                       ///< f above
  double dm_min = 0, dm_max = 0;                 ///< the rows of data_dm_time span dm_min .. dm_max
  std::int64_t nstart_read = 0, nsamp_read = 0;  ///< the window, samples from the file start
  int time_size = 0, frequency_size = 0, dm_size = 0;
  std::vector<float> freq_time;  ///< data_freq_time [time_size][frequency_size], channel order kept
  std::vector<float> dm_time;    ///< data_dm_time [dm_size][time_size]
  std::vector<std::uint8_t> kill_mask;  ///< [header.nchans]
  nlohmann::json search;                ///< CutoutConfig::search
  nlohmann::json provenance;            ///< warpbeam's provenance() when made

  /// Seconds per sample of the arrays: tsamp x time_decimation.
  double cutout_tsamp_s() const { return header.tsamp * time_decimation; }
};

/// your's candidate id for these values (also the file stem of the products).
std::string candidate_id(double tstart_mjd, double tcand_s, double dm, double snr);

/// Cuts out one candidate (CPU; reads the window through `source`, which is left wherever the
/// reads end). Throws invalid_argument for a bad config or a window that misses the file
/// entirely, and what `source` throws.
CandidateCutout make_candidate_cutout(FilterbankSource& source, const CutoutConfig& config);

/// True when this build writes and reads HDF5 (HDF5 was found at configure time).
bool candidate_h5_supported();
/// Writes `c` in your's layout (docs/FORMATS.md), atomically. Throws io on failure,
/// unsupported without HDF5.
void write_candidate_h5(const std::string& path, const CandidateCutout& c);
/// Reads a candidate file written by write_candidate_h5 or by your_candmaker (attributes it
/// lacks take your's defaults: decimation w / 2, DM range 0 .. 2 DM, no channel killed). Throws io
/// when it cannot be opened, format when data_freq_time or data_dm_time or a needed attribute is
/// missing or malformed.
CandidateCutout read_candidate_h5(const std::string& path);

/// True when this build draws PNGs with PLplot and its pngcairo driver is installed.
bool candidate_plot_supported();
/// The diagnostic plot (PLplot, pngcairo): frequency-averaged profile, dedispersed waterfall
/// (frequency in MHz against time in ms from the candidate) and DM-time bowtie, with the
/// candidate's parameters in the title. Written atomically. Throws unsupported when
/// candidate_plot_supported() is false, io on failure.
void write_candidate_png(const std::string& path, const CandidateCutout& c);

}  // namespace warpbeam::io
