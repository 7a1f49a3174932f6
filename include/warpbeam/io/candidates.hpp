#pragma once
// Candidate files: heimdall's .cand text and a JSON form with provenance.
//
// .cand (heimdall, Barsdell et al. 2012): one candidate per line, tab-separated, no header:
//   snr  sample  time_s  filter  dm_trial  dm  members  begin  end  [beam]
// sample: centre sample of the best boxcar from the file start; time_s: arrival time at the top
// of the band of the boxcar's centre (s from the file start); filter: log2 of the boxcar width;
// dm_trial: index in the DM list; members: peaks in the cluster; begin/end: the cluster's first
// and last sample. The 10th column (beam) is written only when asked (multi-beam searches).
//
// JSON: {"format": "warpbeam-candidates", "format_version": 1, "file", "header" (the SIGPROC
// header), "parameters" (the search's), "dms" (the DM list), "candidates": [{snr, sample, time_s,
// mjd, filter, width_samples, width_s, dm_trial, dm, members, begin, end, beam}],
// "provenance" (version, commit, date, host, command)}. mjd = tstart + time_s / 86400: the
// arrival at the top of the band (topocentric unless the header says barycentric).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::io {

/// The .cand text of `candidates` (9 columns, or 10 with the beam).
std::string format_cand(const std::vector<search::Candidate>& candidates, bool with_beam = false);

/// Writes a .cand file atomically (no partial file on failure).
void write_cand(const std::string& path, const std::vector<search::Candidate>& candidates,
                bool with_beam = false);

/// Reads a .cand file (9 or 10 columns); throws Error(io) when it cannot be opened and
/// Error(format) naming the line of a malformed one.
std::vector<search::Candidate> read_cand(const std::string& path);

/// Arrival MJD of a candidate at the top of the band: tstart + time_s / 86400.
double candidate_mjd(const search::Candidate& c, const FilterbankHeader& header);

/// The JSON document described above (provenance() included).
nlohmann::json candidates_json(const std::vector<search::Candidate>& candidates,
                               const FilterbankHeader& header, const std::string& file,
                               const nlohmann::json& parameters, const std::vector<float>& dms);

/// Writes candidates_json(...) atomically.
void write_candidates_json(const std::string& path,
                           const std::vector<search::Candidate>& candidates,
                           const FilterbankHeader& header, const std::string& file,
                           const nlohmann::json& parameters, const std::vector<float>& dms);

}  // namespace warpbeam::io
