// File I/O: filterbanks (any format open_filterbank() reads; SIGPROC written) and ultrasound
// channel data (.mat, UFF). The Python layer (warpbeam/io.py) memory-maps SIGPROC data of 8 bits
// and more itself and calls FilterbankFile for the rest and for gulped reads.
#include <complex>
#include <memory>

#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nlohmann/json.hpp>

#include "arrays.hpp"
#include "bindings.hpp"
#include "header.hpp"
#include "owned.hpp"
#include "warpbeam/das.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/io/ultrasound.hpp"

namespace wbpy {

using warpbeam::io::FilterbankHeader;

// The header from a dict of SIGPROC keywords (as read_filterbank returns them); header_bytes and
// nsamples describe a file, not what is written: read only when asked.
FilterbankHeader header_from_json(const nlohmann::json& j, bool with_sizes) {
  FilterbankHeader h;
  for (const auto& [key, v] : j.items()) {
    if (key == "source_name")
      h.source_name = v.get<std::string>();
    else if (key == "rawdatafile")
      h.rawdatafile = v.get<std::string>();
    else if (key == "telescope_id")
      h.telescope_id = v.get<int>();
    else if (key == "machine_id")
      h.machine_id = v.get<int>();
    else if (key == "data_type")
      h.data_type = v.get<int>();
    else if (key == "nchans")
      h.nchans = v.get<int>();
    else if (key == "nbits")
      h.nbits = v.get<int>();
    else if (key == "nifs")
      h.nifs = v.get<int>();
    else if (key == "nbeams")
      h.nbeams = v.get<int>();
    else if (key == "ibeam")
      h.ibeam = v.get<int>();
    else if (key == "barycentric")
      h.barycentric = v.get<int>();
    else if (key == "pulsarcentric")
      h.pulsarcentric = v.get<int>();
    else if (key == "signed")
      h.is_signed = v.get<bool>();
    else if (key == "fch1")
      h.fch1 = v.get<double>();
    else if (key == "foff")
      h.foff = v.get<double>();
    else if (key == "tstart")
      h.tstart = v.get<double>();
    else if (key == "tsamp")
      h.tsamp = v.get<double>();
    else if (key == "src_raj")
      h.src_raj = v.get<double>();
    else if (key == "src_dej")
      h.src_dej = v.get<double>();
    else if (key == "az_start")
      h.az_start = v.get<double>();
    else if (key == "za_start")
      h.za_start = v.get<double>();
    else if (key == "refdm")
      h.refdm = v.get<double>();
    else if (key == "period")
      h.period = v.get<double>();
    else if (key == "header_bytes")
      h.header_bytes = with_sizes ? v.get<std::int64_t>() : 0;
    else if (key == "nsamples")
      h.nsamples = with_sizes ? v.get<std::int64_t>() : 0;
    else if (key == "format")
      continue;
    else
      throw nb::value_error(fmt::format("header: unknown SIGPROC keyword '{}'", key).c_str());
  }
  return h;
}

namespace {

// A filterbank opened for gulped reads (any format open_filterbank() knows).
class FilterbankFile {
 public:
  explicit FilterbankFile(const std::string& path) : src_(warpbeam::io::open_filterbank(path)) {}
  std::string header_json() const {
    auto j = warpbeam::io::to_json(src_->header());
    j["format"] = src_->format();
    return j.dump();
  }
  std::int64_t position() const { return src_->position(); }
  void seek(std::int64_t s) { src_->seek(s); }
  nb::ndarray<nb::numpy, float> read(std::int64_t n) {
    const auto& h = src_->header();
    n = clamp(n);
    std::vector<float> out(static_cast<std::size_t>(n) * h.nchans);
    std::int64_t got = 0;
    {
      nb::gil_scoped_release g;
      got = src_->read(n, out.data());
    }
    out.resize(static_cast<std::size_t>(got) * h.nchans);
    return to_numpy(std::move(out), {static_cast<std::size_t>(got), std::size_t(h.nchans)});
  }
  nb::ndarray<nb::numpy, std::uint8_t> read_raw(std::int64_t n) {
    const std::size_t row = src_->header().bytes_per_sample();
    n = clamp(n);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * row);
    std::int64_t got = 0;
    {
      nb::gil_scoped_release g;
      got = src_->read_raw(n, out.data());
    }
    out.resize(static_cast<std::size_t>(got) * row);
    return to_numpy(std::move(out), {static_cast<std::size_t>(got), row});
  }

 private:
  std::int64_t clamp(std::int64_t n) const {
    if (n < 0) throw nb::value_error(fmt::format("nsamples = {} must be >= 0", n).c_str());
    return std::min(n, src_->header().nsamples - src_->position());
  }
  std::unique_ptr<warpbeam::io::FilterbankSource> src_;
};

void write_filterbank(const std::string& path, const std::string& header_json,
                      const InArray& data) {
  FilterbankHeader h = header_from_json(nlohmann::json::parse(header_json));
  h.validate();
  if (space_of(data, "data") != Space::host)
    throw nb::value_error("data: write_filterbank needs a host array (copy a device array first)");
  if (data.ndim() != 2)
    throw nb::value_error(
        fmt::format("data: {} dimensions, expected 2 ([time][chan])", data.ndim()).c_str());
  const std::int64_t nsamp = static_cast<std::int64_t>(data.shape(0));
  const bool is_float = data.dtype() == nb::dtype<float>();
  if (is_float) {
    require_shape(data, {-1, h.nchans}, "data");
  } else {
    // Packed samples as stored: one row of bytes_per_sample() bytes per time sample, in the
    // file's integer type (uint8 rows of packed bits below 8 bits, uint16/int16 for 16 bits).
    const std::size_t item = data.itemsize();
    const std::int64_t cols = static_cast<std::int64_t>(data.shape(1));
    require_shape(data, {-1, cols}, "data");
    const bool ok =
        (h.nbits < 8 && item == 1 && static_cast<std::size_t>(cols) == h.bytes_per_sample()) ||
        (h.nbits >= 8 && cols == h.nchans && item * 8 == std::size_t(h.nbits));
    if (!ok)
      throw nb::type_error(fmt::format("data: dtype {} with {} columns does not hold {}-bit "
                                       "samples of {} channels: give float32 [time][{}] or the "
                                       "packed samples",
                                       dtype_name(data.dtype()), cols, h.nbits, h.nchans, h.nchans)
                               .c_str());
  }
  nb::gil_scoped_release g;
  warpbeam::io::FilterbankWriter w(path, h);
  if (is_float)
    w.write(static_cast<const float*>(data.data()), nsamp);
  else
    w.write_raw(static_cast<const std::uint8_t*>(data.data()), data.nbytes());
  w.commit();
}

}  // namespace

nb::dict ultrasound_to_dict(warpbeam::io::UltrasoundData&& d) {
  nb::dict r;
  const bool iq = d.signal == warpbeam::das::Signal::iq;
  r["sample_type"] = iq ? "iq" : "rf";
  const std::initializer_list<std::size_t> shape = {std::size_t(d.batch), std::size_t(d.nrx),
                                                    std::size_t(d.ntx), std::size_t(d.nsamples)};
  if (iq)
    r["data"] = to_numpy(std::move(d.iq), shape);
  else
    r["data"] = to_numpy(std::move(d.rf), shape);
  r["fs"] = d.fs;
  r["fc"] = d.fc;
  r["c"] = d.c;
  r["t0"] = d.t0;
  r["bandwidth"] = d.bandwidth;
  r["prf"] = d.prf;
  std::vector<double> pos;
  for (const auto& p : d.probe.positions)
    pos.insert(pos.end(), p.begin(), p.end());
  r["elements"] = to_numpy(std::move(pos), {d.probe.size(), std::size_t(3)});
  nb::list kinds;
  for (auto k : d.probe.kinds)
    kinds.append(k == warpbeam::das::ElementKind::point    ? "point"
                 : k == warpbeam::das::ElementKind::line_x ? "line_x"
                                                           : "line_y");
  r["element_kinds"] = kinds;
  r["pitch"] = d.probe.pitch;
  r["element_width"] = d.probe.element_width;
  r["transmits"] = nb::cast(d.transmits);
  return r;
}

void bind_io(nb::module_& m) {
  nb::class_<FilterbankFile>(m, "FilterbankFile")
      .def(nb::init<const std::string&>(), nb::arg("path"))
      .def("header_json", &FilterbankFile::header_json)
      .def_prop_ro("position", &FilterbankFile::position)
      .def("seek", &FilterbankFile::seek, nb::arg("sample"))
      .def("read", &FilterbankFile::read, nb::arg("nsamples"))
      .def("read_raw", &FilterbankFile::read_raw, nb::arg("nsamples"));
  m.def("write_filterbank", &write_filterbank, nb::arg("path"), nb::arg("header_json"),
        nb::arg("data"));
  m.def(
      "read_ultrasound",
      [](const std::string& path) {
        warpbeam::io::UltrasoundData d;
        {
          nb::gil_scoped_release g;
          d = warpbeam::io::read_ultrasound(path);
        }
        return ultrasound_to_dict(std::move(d));
      },
      nb::arg("path"));
  m.def("mat_supported", &warpbeam::io::mat_supported);
  m.def("uff_supported", &warpbeam::io::uff_supported);
}

}  // namespace wbpy
