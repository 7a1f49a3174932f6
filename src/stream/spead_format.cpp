// The SPEAD voltage stream's description (warpbeam/stream/spead.hpp), as JSON.
#include "warpbeam/format.hpp"
#include "warpbeam/stream/spead.hpp"

namespace warpbeam::stream::spead {

nlohmann::json StreamDescription::to_json() const {
  return {{"format", "warpbeam-spead-voltages"},
          {"version", 1},
          {"nchans", info.nchans},
          {"nantennas", info.nantennas},
          {"npol", info.npol},
          {"sample_type", std::string(to_string(info.sample_type))},
          {"fch1_hz", info.fch1_hz},
          {"foff_hz", info.foff_hz},
          {"tsamp_s", info.tsamp_s},
          {"mjd_start", info.mjd_start},
          {"block_samples", info.block_samples},
          {"heap_samples", heap_samples},
          {"timestamp0", timestamp0},
          {"source_name", info.source_name},
          {"telescope", info.telescope}};
}

StreamDescription StreamDescription::from_json(const nlohmann::json& j) {
  StreamDescription d;
  auto get = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key))
      fail(ErrorCategory::format, "the SPEAD stream's description has no '{}'", key);
    return j.at(key);
  };
  try {
    if (get("format") != "warpbeam-spead-voltages" || get("version") != 1)
      fail(ErrorCategory::format, "the SPEAD stream's description is of format {} version {}",
           j.at("format").dump(), j.at("version").dump());
    auto& i = d.info;
    i.format = "spead";
    i.nchans = get("nchans").get<int>();
    i.nantennas = get("nantennas").get<int>();
    i.npol = get("npol").get<int>();
    i.sample_type = parse_sample_type(get("sample_type").get<std::string>());
    i.fch1_hz = get("fch1_hz").get<double>();
    i.foff_hz = get("foff_hz").get<double>();
    i.tsamp_s = get("tsamp_s").get<double>();
    i.mjd_start = get("mjd_start").get<double>();
    i.block_samples = get("block_samples").get<std::int64_t>();
    d.heap_samples = get("heap_samples").get<std::int64_t>();
    d.timestamp0 = get("timestamp0").get<std::int64_t>();
    i.source_name = j.value("source_name", "");
    i.telescope = j.value("telescope", "");
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCategory::format, "the SPEAD stream's description is malformed: {}", e.what());
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::format) throw;
    fail(ErrorCategory::format, "the SPEAD stream's description: {}", e.what());
  }
  const auto& i = d.info;
  if (i.nchans < 1 || i.nchans > 1 << 20 || i.nantennas < 1 || i.nantennas > 1 << 16 ||
      (i.npol != 1 && i.npol != 2) || !(i.tsamp_s > 0) || i.block_samples < 1 ||
      d.heap_samples < 1 || i.block_samples % d.heap_samples != 0 || d.timestamp0 < 0 ||
      d.heap_bytes() > (1 << 20))
    fail(ErrorCategory::format,
         "the SPEAD stream's description is inconsistent: {} channels, {} antennas, {} pols, "
         "tsamp {} s, blocks of {} samples, heaps of {} samples ({} bytes)",
         i.nchans, i.nantennas, i.npol, i.tsamp_s, i.block_samples, d.heap_samples, d.heap_bytes());
  return d;
}

}  // namespace warpbeam::stream::spead
