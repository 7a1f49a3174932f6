// Candidate files: heimdall's .cand text and the JSON form (see the header for the columns).
#include "warpbeam/io/candidates.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::io {

std::string format_cand(const std::vector<search::Candidate>& cands, bool with_beam) {
  std::string s;
  for (const auto& c : cands) {
    s += fmt::format("{:.4f}\t{}\t{:.9f}\t{}\t{}\t{:.4f}\t{}\t{}\t{}", c.snr, c.sample, c.time_s,
                     c.filter, c.dm_trial, c.dm, c.members, c.begin, c.end);
    if (with_beam) s += fmt::format("\t{}", c.beam);
    s += '\n';
  }
  return s;
}

void write_cand(const std::string& path, const std::vector<search::Candidate>& cands,
                bool with_beam) {
  write_text_file(path, format_cand(cands, with_beam));
}

std::vector<search::Candidate> read_cand(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail(ErrorCategory::io, "cannot open '{}': {}", path, std::strerror(errno));
  std::vector<search::Candidate> out;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream ss(line);
    search::Candidate c;
    if (!(ss >> c.snr >> c.sample >> c.time_s >> c.filter >> c.dm_trial >> c.dm >> c.members >>
          c.begin >> c.end))
      fail(ErrorCategory::format, "'{}' line {}: not a .cand line (9 or 10 columns)", path, lineno);
    if (!(ss >> c.beam)) c.beam = 0;
    std::string extra;
    if (ss.clear(), ss >> extra)
      fail(ErrorCategory::format, "'{}' line {}: more than 10 columns", path, lineno);
    // The boxcar is 2^filter samples (Candidate::width()): a filter of 40 shifted past int32.
    if (c.filter < 0 || c.filter > 30)
      fail(ErrorCategory::format, "'{}' line {}: filter {} is not log2 of a boxcar width (0-30)",
           path, lineno, c.filter);
    if (c.dm_trial < 0 || c.beam < 0 || c.members < 0)
      fail(ErrorCategory::format, "'{}' line {}: a negative DM trial, beam or member count", path,
           lineno);
    out.push_back(c);
  }
  return out;
}

double candidate_mjd(const search::Candidate& c, const FilterbankHeader& h) {
  return h.tstart + c.time_s / 86400.0;
}

nlohmann::json candidates_json(const std::vector<search::Candidate>& cands,
                               const FilterbankHeader& h, const std::string& file,
                               const nlohmann::json& parameters, const std::vector<float>& dms) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : cands)
    list.push_back({{"snr", c.snr},
                    {"sample", c.sample},
                    {"time_s", c.time_s},
                    {"mjd", candidate_mjd(c, h)},
                    {"filter", c.filter},
                    {"width_samples", c.width()},
                    {"width_s", c.width() * h.tsamp},
                    {"dm_trial", c.dm_trial},
                    {"dm", c.dm},
                    {"members", c.members},
                    {"begin", c.begin},
                    {"end", c.end},
                    {"beam", c.beam}});
  return {{"format", "warpbeam-candidates"},
          {"format_version", 1},
          {"file", file},
          {"header", to_json(h)},
          {"parameters", parameters},
          {"dms", dms},
          {"candidates", list},
          {"provenance", provenance()}};
}

void write_candidates_json(const std::string& path, const std::vector<search::Candidate>& cands,
                           const FilterbankHeader& h, const std::string& file,
                           const nlohmann::json& parameters, const std::vector<float>& dms) {
  write_text_file(path, candidates_json(cands, h, file, parameters, dms).dump(2) + "\n");
}

}  // namespace warpbeam::io
