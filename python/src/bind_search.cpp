// The single-pulse search of a filterbank file and the candidate files (.cand, JSON). The
// options arrive as a JSON object of FileSearchConfig's and RunOptions' field names
// (warpbeam/search.py checks the keywords); the candidates go out and come back as columns
// (warpbeam/candidates.py makes the structured array).
#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nlohmann/json.hpp>

#include "arrays.hpp"
#include "bindings.hpp"
#include "header.hpp"
#include "owned.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/search.hpp"

namespace wbpy {

namespace {

namespace sr = warpbeam::search;

// The physics (FileSearchConfig) and the run options (RunOptions) from one object of keywords.
struct SearchOptions {
  sr::FileSearchConfig config;
  sr::RunOptions run;
};

SearchOptions config_from_json(const nlohmann::json& j) {
  SearchOptions o;
  sr::FileSearchConfig& c = o.config;
  sr::RunOptions& r = o.run;
  r.progress = false;
  for (const auto& [k, v] : j.items()) {
    if (k == "dm_min")
      c.dm_min = v.get<double>();
    else if (k == "dm_max")
      c.dm_max = v.get<double>();
    else if (k == "dm_tolerance")
      c.dm_tolerance = v.get<double>();
    else if (k == "pulse_width_us")
      c.pulse_width_us = v.get<double>();
    else if (k == "boxcar_max")
      c.boxcar_max = v.get<int>();
    else if (k == "snr_min")
      c.snr_min = v.get<float>();
    else if (k == "baseline_s")
      c.baseline_s = v.get<double>();
    else if (k == "zap_channels")
      c.zap = sr::ChannelMask(v.get<std::vector<int>>());
    else if (k == "zap_sigma")
      c.zap_sigma = v.get<double>();
    else if (k == "zero_dm")
      c.zero_dm = v.get<bool>();
    else if (k == "time_tol")
      c.cluster.time_tol = v.get<std::int64_t>();
    else if (k == "filter_tol")
      c.cluster.filter_tol = v.get<std::int32_t>();
    else if (k == "dm_tol")
      c.cluster.dm_tol = v.get<std::int32_t>();
    else if (k == "gulp")
      r.gulp = v.get<std::int64_t>();
    else if (k == "memory_bytes")
      r.memory_bytes = v.get<std::int64_t>();
    else if (k == "threads")
      r.threads = v.get<int>();
    else if (k == "beam")
      c.beam = v.get<int>();
    else if (k == "progress")
      r.progress = v.get<bool>();
    else if (k == "device_memory_bytes")
      r.device_memory_bytes = v.get<std::int64_t>();
    else if (k == "device")
      r.device = v.get<int>();
    else if (k == "gpu_streams")
      r.gpu_streams = v.get<int>();
    else if (k == "autotune")
      r.autotune = v.get<bool>();
    else if (k == "read_threads")
      r.read_threads = v.get<int>();
    else
      throw nb::value_error(fmt::format("search: unknown option '{}'", k).c_str());
  }
  return o;
}

// Candidates as columns, in the order of heimdall's .cand (plus beam).
nb::dict columns(const std::vector<sr::Candidate>& cs) {
  const std::size_t n = cs.size();
  std::vector<float> snr(n), dm(n);
  std::vector<std::int64_t> sample(n), members(n), begin(n), end(n);
  std::vector<double> time_s(n);
  std::vector<std::int32_t> filter(n), dm_trial(n), beam(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& c = cs[i];
    snr[i] = c.snr;
    sample[i] = c.sample;
    time_s[i] = c.time_s;
    filter[i] = c.filter;
    dm_trial[i] = c.dm_trial;
    dm[i] = c.dm;
    members[i] = c.members;
    begin[i] = c.begin;
    end[i] = c.end;
    beam[i] = c.beam;
  }
  nb::dict d;
  d["snr"] = to_numpy(std::move(snr), {n});
  d["sample"] = to_numpy(std::move(sample), {n});
  d["time_s"] = to_numpy(std::move(time_s), {n});
  d["filter"] = to_numpy(std::move(filter), {n});
  d["dm_trial"] = to_numpy(std::move(dm_trial), {n});
  d["dm"] = to_numpy(std::move(dm), {n});
  d["members"] = to_numpy(std::move(members), {n});
  d["begin"] = to_numpy(std::move(begin), {n});
  d["end"] = to_numpy(std::move(end), {n});
  d["beam"] = to_numpy(std::move(beam), {n});
  return d;
}

template <class T>
const T* column(const nb::dict& d, const char* name, std::size_t n) {
  if (!d.contains(name))
    throw nb::value_error(fmt::format("candidates: no '{}' column", name).c_str());
  auto a = nb::cast<nb::ndarray<nb::ro, T, nb::ndim<1>, nb::c_contig, nb::device::cpu>>(d[name]);
  if (a.shape(0) != n)
    throw nb::value_error(
        fmt::format("candidates: column '{}' has {} rows, expected {}", name, a.shape(0), n)
            .c_str());
  return a.data();
}

std::vector<sr::Candidate> from_columns(const nb::dict& d) {
  if (!d.contains("snr")) throw nb::value_error("candidates: no 'snr' column");
  const std::size_t n = nb::len(nb::object(d["snr"]));
  const float* snr = column<float>(d, "snr", n);
  const std::int64_t* sample = column<std::int64_t>(d, "sample", n);
  const double* time_s = column<double>(d, "time_s", n);
  const std::int32_t* filter = column<std::int32_t>(d, "filter", n);
  const std::int32_t* dm_trial = column<std::int32_t>(d, "dm_trial", n);
  const float* dm = column<float>(d, "dm", n);
  const std::int64_t* members = column<std::int64_t>(d, "members", n);
  const std::int64_t* begin = column<std::int64_t>(d, "begin", n);
  const std::int64_t* end = column<std::int64_t>(d, "end", n);
  const std::int32_t* beam = column<std::int32_t>(d, "beam", n);
  std::vector<sr::Candidate> cs(n);
  for (std::size_t i = 0; i < n; ++i)
    cs[i] = {snr[i], sample[i],  time_s[i], filter[i], dm_trial[i],
             dm[i],  members[i], begin[i],  end[i],    beam[i]};
  return cs;
}

}  // namespace

void bind_search(nb::module_& m) {
  m.def(
      "search_file",
      [](const std::string& path, const std::string& options_json, const std::string& backend) {
        const auto o = config_from_json(nlohmann::json::parse(options_json));
        o.config.validate();
        o.run.validate();
        const auto b = warpbeam::parse_backend(backend);
        sr::SearchResult r;
        {
          nb::gil_scoped_release g;
          r = sr::search_filterbank(path, o.config, o.run, b);
        }
        nb::dict out;
        out["candidates"] = columns(r.candidates);
        out["header"] = json_to_python(warpbeam::io::to_json(r.header).dump());
        out["result"] = json_to_python(r.to_json().dump());
        nlohmann::json params = o.config.to_json();
        params.update(o.run.to_json());
        out["parameters"] = json_to_python(params.dump());
        auto dms = r.dms;
        const std::size_t n = dms.size();
        out["dms"] = to_numpy(std::move(dms), {n});
        return out;
      },
      nb::arg("path"), nb::arg("options_json"), nb::arg("backend"));
  m.def(
      "format_cand",
      [](const nb::dict& cols, bool with_beam) {
        return warpbeam::io::format_cand(from_columns(cols), with_beam);
      },
      nb::arg("columns"), nb::arg("with_beam") = false);
  m.def(
      "write_cand",
      [](const std::string& path, const nb::dict& cols, bool with_beam) {
        warpbeam::io::write_cand(path, from_columns(cols), with_beam);
      },
      nb::arg("path"), nb::arg("columns"), nb::arg("with_beam") = false);
  m.def(
      "read_cand", [](const std::string& path) { return columns(warpbeam::io::read_cand(path)); },
      nb::arg("path"));
  m.def(
      "write_candidates_json",
      [](const std::string& path, const nb::dict& cols, const std::string& header_json,
         const std::string& file, const std::string& params_json, std::vector<float> dms) {
        const auto h = header_from_json(nlohmann::json::parse(header_json), true);
        warpbeam::io::write_candidates_json(path, from_columns(cols), h, file,
                                            nlohmann::json::parse(params_json), dms);
      },
      nb::arg("path"), nb::arg("columns"), nb::arg("header_json"), nb::arg("file"),
      nb::arg("parameters_json"), nb::arg("dms"));
}

}  // namespace wbpy
