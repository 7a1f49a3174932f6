#pragma once
// Conversions shared by the binding files (defined in bind_io.cpp): a SIGPROC header from its JSON
// form (the dict read_filterbank returns) and ultrasound channel data to a dict.
#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

#include "warpbeam/io/ultrasound.hpp"

#include "warpbeam/io/sigproc.hpp"

namespace wbpy {
/// Unknown keys raise ValueError; header_bytes and nsamples are read when `with_sizes`.
warpbeam::io::FilterbankHeader header_from_json(const nlohmann::json& j, bool with_sizes = false);
/// Channel data and their description as a dict (data: NumPy array owning the samples).
nanobind::dict ultrasound_to_dict(warpbeam::io::UltrasoundData&& d);
}  // namespace wbpy
