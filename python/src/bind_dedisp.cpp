// Incoherent dedispersion: DedispersionConfig -> DedispersionPlan -> execute, on host or CUDA
// arrays, and the DM-list rules.
#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "owned.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/unpack.hpp"

namespace wbpy {

namespace {

namespace dd = warpbeam::dedisp;

// The input dtype that holds `nbits` samples one per element (8, 16, 32), or packed bytes.
void check_input(const InArray& in, const dd::DedispersionConfig& c, std::int64_t row_bytes) {
  const char* name = "data";
  if (in.ndim() != 2)
    throw nb::value_error(
        fmt::format("data: {} dimensions, expected 2 ([time][chan])", in.ndim()).c_str());
  const auto dt = in.dtype();
  bool ok = false;
  std::int64_t cols = c.nchans;
  if (c.nbits == 32)
    ok = dt == nb::dtype<float>();
  else if (c.nbits == 16)
    ok = dt == (c.is_signed ? nb::dtype<std::int16_t>() : nb::dtype<std::uint16_t>());
  else if (c.nbits == 8)
    ok = dt == nb::dtype<std::uint8_t>() || dt == nb::dtype<std::int8_t>();
  else {
    ok = dt == nb::dtype<std::uint8_t>();
    cols = row_bytes;  // packed: nchans * nbits / 8 bytes per time sample
  }
  if (!ok)
    throw nb::type_error(fmt::format("data: dtype {} does not hold {}-bit samples (expected {})",
                                     dtype_name(dt), c.nbits,
                                     c.nbits == 32   ? "float32"
                                     : c.nbits == 16 ? (c.is_signed ? "int16" : "uint16")
                                     : c.nbits == 8
                                         ? "uint8"
                                         : "uint8 packed bytes, [time][nchans * nbits / 8]")
                             .c_str());
  require_shape(in, {-1, cols}, name);
}

// A dedispersion plan per gulp length: made on the first call (or for `nsamples` at once) and
// made again only when the gulp length changes.
class PyDedisperser {
 public:
  PyDedisperser(dd::DedispersionConfig c, const std::string& backend, int device)
      : config_(std::move(c)) {
    backend_ = warpbeam::resolve_backend(warpbeam::parse_backend(backend));
    device_ = backend_ == warpbeam::Backend::cuda ? std::max(device, 0) : -1;
    const std::int64_t wanted = config_.nsamples_in;
    {
      // Validate now (the plan itself may wait for the first gulp): delays need only the band.
      auto probe = config_;
      if (probe.nsamples_in <= 0) probe.nsamples_in = 1 << 20;
      probe.validate();
      const auto d = dd::delay_table(probe);
      for (auto v : d)
        max_delay_ = std::max(max_delay_, v);
      delays_ = d;
    }
    if (wanted > 0) plan_for(wanted);
  }
  const dd::DedispersionConfig& config() const { return config_; }
  warpbeam::Backend backend() const { return backend_; }
  int device() const { return device_; }
  std::int32_t max_delay() const { return max_delay_; }
  const std::vector<std::int32_t>& delays() const { return delays_; }
  std::int64_t row_bytes() const {
    return static_cast<std::int64_t>(warpbeam::packed_bytes(config_.nbits, config_.nchans));
  }
  std::string algorithm() const {
    return plan_ ? dd::to_string(plan_->algorithm()) : dd::to_string(config_.algorithm);
  }
  std::int64_t nsamples() const { return plan_ ? plan_->config().nsamples_in : 0; }

  void execute(const InArray& data, OutArray& out, std::uintptr_t stream_ptr) {
    check_input(data, config_, row_bytes());
    require_same_place(data, "data", out, "out");
    const std::int64_t n = static_cast<std::int64_t>(data.shape(0));
    if (n <= max_delay_)
      throw nb::value_error(fmt::format("data: {} time samples, but the largest delay is {} "
                                        "samples: a gulp needs more than that",
                                        n, max_delay_)
                                .c_str());
    const std::int64_t ndm = static_cast<std::int64_t>(config_.dms.size());
    auto vout = view_of<float, 2>(out, {ndm, n - max_delay_}, "out");
    const Space sp = vout.space;
    if (sp == Space::device) {
      if (backend_ != warpbeam::Backend::cuda)
        throw nb::value_error(
            "data: a CUDA array given to a Dedisperser made for the cpu "
            "backend");
      if (data.device_id() != device_)
        throw nb::value_error(fmt::format("data: on CUDA device {} but the Dedisperser runs on "
                                          "device {}",
                                          data.device_id(), device_)
                                  .c_str());
    }
    View<const std::uint8_t, 2> vin(static_cast<const std::uint8_t*>(data.data()), {n, row_bytes()},
                                    sp);
    nb::gil_scoped_release g;
    use_device(device_);
    plan_for(n);
    if (backend_ == warpbeam::Backend::cpu) {
      plan_->execute(vin, vout);
      return;
    }
    const warpbeam::Stream stream = borrowed_stream(stream_ptr);
    run_on_device(
        vin.data, static_cast<std::size_t>(n * row_bytes()), vout.data, sizeof(float) * vout.size(),
        sp == Space::host, sp == Space::device ? &stream : nullptr,
        [&](const void* din, void* dout, const warpbeam::Stream* s) {
          plan_->execute(View<const std::uint8_t, 2>(static_cast<const std::uint8_t*>(din),
                                                     vin.shape, Space::device),
                         View<float, 2>(static_cast<float*>(dout), vout.shape, Space::device), s);
        });
  }

 private:
  void plan_for(std::int64_t n) {
    if (plan_ && plan_->config().nsamples_in == n) return;
    auto c = config_;
    c.nsamples_in = n;
    use_device(device_);
    plan_.reset();
    plan_ = std::make_unique<dd::DedispersionPlan>(std::move(c), backend_);
  }
  dd::DedispersionConfig config_;
  warpbeam::Backend backend_ = warpbeam::Backend::cpu;
  int device_ = -1;
  std::int32_t max_delay_ = 0;
  std::vector<std::int32_t> delays_;
  std::unique_ptr<dd::DedispersionPlan> plan_;
};

}  // namespace

void bind_dedisp(nb::module_& m) {
  m.def(
      "dm_list",
      [](double dm_min, double dm_max, double pulse_width_us, double tolerance, int nchans,
         double tsamp, double fch1, double foff) {
        auto v = dd::dm_list_dedisp(dm_min, dm_max, pulse_width_us, tolerance, nchans, tsamp, fch1,
                                    foff);
        const std::size_t n = v.size();
        return to_numpy(std::move(v), {n});
      },
      nb::arg("dm_min"), nb::arg("dm_max"), nb::arg("pulse_width_us"), nb::arg("tolerance"),
      nb::arg("nchans"), nb::arg("tsamp"), nb::arg("fch1"), nb::arg("foff"));
  m.def(
      "dm_list_linear",
      [](double lo, double hi, double step) {
        auto v = dd::dm_list_linear(lo, hi, step);
        const std::size_t n = v.size();
        return to_numpy(std::move(v), {n});
      },
      nb::arg("dm_min"), nb::arg("dm_max"), nb::arg("step"));
  m.attr("DISPERSION_CONSTANT") = dd::kDispersionConstant;

  nb::class_<PyDedisperser>(m, "_Dedisperser")
      .def(
          "__init__",
          [](PyDedisperser* self, int nchans, double fch1, double foff, double tsamp,
             std::vector<float> dms, int nbits, bool is_signed, std::int64_t nsamples,
             std::optional<std::vector<std::uint8_t>> killmask, const std::string& backend,
             const std::string& algorithm, int threads, int device) {
            dd::DedispersionConfig c;
            c.nchans = nchans;
            c.fch1_mhz = fch1;
            c.foff_mhz = foff;
            c.tsamp_s = tsamp;
            c.dms = std::move(dms);
            c.nbits = nbits;
            c.is_signed = is_signed;
            c.nsamples_in = nsamples;
            if (killmask) c.killmask = *killmask;
            c.algorithm = dd::parse_algorithm(algorithm);
            c.threads = threads;
            new (self) PyDedisperser(std::move(c), backend, device);
          },
          nb::arg("nchans"), nb::arg("fch1"), nb::arg("foff"), nb::arg("tsamp"), nb::arg("dms"),
          nb::arg("nbits"), nb::arg("is_signed"), nb::arg("nsamples"), nb::arg("killmask").none(),
          nb::arg("backend"), nb::arg("algorithm"), nb::arg("threads"), nb::arg("device"))
      .def("execute", &PyDedisperser::execute, nb::arg("data"), nb::arg("out"), nb::arg("stream"))
      .def_prop_ro("max_delay", &PyDedisperser::max_delay)
      .def_prop_ro("delays",
                   [](const PyDedisperser& d) {
                     auto v = d.delays();
                     const std::size_t nch = std::size_t(d.config().nchans);
                     return nb::cast(to_numpy(std::move(v), {v.size() / nch, nch}));
                   })
      .def_prop_ro("backend",
                   [](const PyDedisperser& d) { return std::string(to_string(d.backend())); })
      .def_prop_ro("algorithm", &PyDedisperser::algorithm)
      .def_prop_ro("device", &PyDedisperser::device)
      .def_prop_ro("nsamples", &PyDedisperser::nsamples)
      .def_prop_ro("row_bytes", &PyDedisperser::row_bytes);
}

}  // namespace wbpy
