// The coherent multi-beam beamformer: BeamformConfig -> BeamformPlan -> set_weights, execute.
#include <fmt/format.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "owned.hpp"
#include "warpbeam/beamform.hpp"

namespace wbpy {

namespace {

namespace bf = warpbeam::beamform;

class PyBeamformer {
 public:
  PyBeamformer(bf::BeamformConfig c, const std::string& backend, int device) {
    const auto b = warpbeam::resolve_backend(warpbeam::parse_backend(backend));
    device_ = b == warpbeam::Backend::cuda ? std::max(device, 0) : -1;
    use_device(device_);
    plan_ = std::make_unique<bf::BeamformPlan>(std::move(c), b);
  }
  const bf::BeamformPlan& plan() const { return *plan_; }
  int device() const { return device_; }

  void set_weights(const InArray& w) {
    const auto& c = plan_->config();
    auto v = view_of<const std::complex<float>, 4>(w, {c.nchans, c.npol, c.nbeams, c.nantennas},
                                                   "weights");
    if (v.space != Space::host) throw nb::value_error("weights: give a host array");
    nb::gil_scoped_release g;
    use_device(device_);
    plan_->set_weights(v);
  }

  void execute(const InArray& in, OutArray& out, std::uintptr_t stream_ptr) const {
    const auto& c = plan_->config();
    require_same_place(in, "voltages", out, "out");
    // Any dtype whose trailing axes hold one time row (antennas x pols x sample bytes).
    if (in.ndim() < 2)
      throw nb::value_error("voltages: expected [chan][time][...] (at least 2 dimensions)");
    std::vector<std::int64_t> any(in.ndim(), -1);
    require_shape(in, any, "voltages");
    std::int64_t row = static_cast<std::int64_t>(in.itemsize());
    for (std::size_t i = 2; i < in.ndim(); ++i)
      row *= static_cast<std::int64_t>(in.shape(i));
    if (static_cast<std::int64_t>(in.shape(0)) != c.nchans ||
        static_cast<std::int64_t>(in.shape(1)) != c.nsamples || row != c.row_bytes())
      throw nb::value_error(
          fmt::format("voltages: shape {} with {}-byte items: expected {} channels x {} samples "
                      "x {} bytes per time row ({} antennas x {} pols, {})",
                      nb::cast<std::string>(nb::str(nb::cast(in).attr("shape"))), in.itemsize(),
                      c.nchans, c.nsamples, c.row_bytes(), c.nantennas, c.npol,
                      warpbeam::to_string(c.sample_type))
              .c_str());
    auto vout = view_of<float, 4>(out, c.output_shape(), "out");
    const Space sp = vout.space;
    const bool cuda = plan_->backend() == warpbeam::Backend::cuda;
    if (sp == Space::device && !cuda)
      throw nb::value_error(
          "voltages: a CUDA array given to a Beamformer made for the cpu "
          "backend");
    if (sp == Space::device && in.device_id() != device_)
      throw nb::value_error(fmt::format("voltages: on CUDA device {} but the Beamformer runs on "
                                        "device {}",
                                        in.device_id(), device_)
                                .c_str());
    const View<const std::uint8_t, 3> vin(static_cast<const std::uint8_t*>(in.data()),
                                          c.input_shape(), sp);
    nb::gil_scoped_release g;
    use_device(device_);
    if (!cuda) {
      plan_->execute(vin, vout);
      return;
    }
    const warpbeam::Stream stream = borrowed_stream(stream_ptr);
    run_on_device(
        vin.data, static_cast<std::size_t>(vin.size()), vout.data, sizeof(float) * vout.size(),
        sp == Space::host, sp == Space::device ? &stream : nullptr,
        [&](const void* din, void* dout, const warpbeam::Stream* s) {
          plan_->execute(View<const std::uint8_t, 3>(static_cast<const std::uint8_t*>(din),
                                                     vin.shape, Space::device),
                         View<float, 4>(static_cast<float*>(dout), vout.shape, Space::device), s);
        });
  }

 private:
  int device_ = -1;
  std::unique_ptr<bf::BeamformPlan> plan_;
};

}  // namespace

void bind_beamform(nb::module_& m) {
  nb::class_<PyBeamformer>(m, "_Beamformer")
      .def(
          "__init__",
          [](PyBeamformer* self, int nchans, int nantennas, int npol, int nbeams,
             std::int64_t nsamples, const std::string& sample_type, const std::string& output,
             bool sum_pols, int integration, const std::string& algorithm,
             const std::string& backend, int threads, int device) {
            bf::BeamformConfig c;
            c.nchans = nchans;
            c.nantennas = nantennas;
            c.npol = npol;
            c.nbeams = nbeams;
            c.nsamples = nsamples;
            c.sample_type = warpbeam::parse_sample_type(sample_type);
            if (output != "power" && output != "voltage")
              throw nb::value_error(
                  fmt::format("output '{}': expected 'power' or 'voltage'", output).c_str());
            c.output = output == "power" ? bf::OutputKind::power : bf::OutputKind::voltage;
            c.sum_pols = sum_pols;
            c.integration = integration;
            c.algorithm = bf::parse_algorithm(algorithm);
            c.threads = threads;
            new (self) PyBeamformer(std::move(c), backend, device);
          },
          nb::arg("nchans"), nb::arg("nantennas"), nb::arg("npol"), nb::arg("nbeams"),
          nb::arg("nsamples"), nb::arg("sample_type"), nb::arg("output"), nb::arg("sum_pols"),
          nb::arg("integration"), nb::arg("algorithm"), nb::arg("backend"), nb::arg("threads"),
          nb::arg("device"))
      .def("set_weights", &PyBeamformer::set_weights, nb::arg("weights"))
      .def("execute", &PyBeamformer::execute, nb::arg("voltages"), nb::arg("out"),
           nb::arg("stream"))
      .def_prop_ro("output_shape",
                   [](const PyBeamformer& b) { return b.plan().config().output_shape(); })
      .def_prop_ro("backend",
                   [](const PyBeamformer& b) { return std::string(to_string(b.plan().backend())); })
      .def_prop_ro(
          "algorithm",
          [](const PyBeamformer& b) { return std::string(bf::to_string(b.plan().algorithm())); })
      .def_prop_ro("device", &PyBeamformer::device)
      .def_prop_ro("effective_weights", [](const PyBeamformer& b) {
        const auto& c = b.plan().config();
        auto w = b.plan().effective_weights();
        return nb::cast(to_numpy(std::move(w), {std::size_t(c.nchans), std::size_t(c.npol),
                                                std::size_t(c.nbeams), std::size_t(c.nantennas)}));
      });

  m.def(
      "beam_weights",
      [](const InArray& positions, const InArray& freqs_hz, const InArray& azel, int npol) {
        const auto p = view_of<const double, 2>(positions, {-1, 3}, "positions");
        const auto f = view_of<const double, 1>(freqs_hz, {-1}, "freqs_hz");
        const auto d = view_of<const double, 2>(azel, {-1, 2}, "directions");
        for (auto s : {p.space, f.space, d.space})
          if (s != Space::host) throw nb::value_error("beam_weights takes host arrays");
        bf::ArrayGeometry g;
        for (std::int64_t i = 0; i < p.shape[0]; ++i)
          g.enu_m.push_back({p.data[3 * i], p.data[3 * i + 1], p.data[3 * i + 2]});
        std::vector<bf::Pointing> beams;
        for (std::int64_t i = 0; i < d.shape[0]; ++i)
          beams.push_back({bf::Frame::azel, d.data[2 * i], d.data[2 * i + 1], ""});
        std::vector<double> freqs(f.data, f.data + f.shape[0]);
        auto w = bf::compute_weights(g, beams, freqs, npol);
        return to_numpy(std::move(w),
                        {freqs.size(), std::size_t(npol), beams.size(), std::size_t(p.shape[0])});
      },
      nb::arg("positions"), nb::arg("freqs_hz"), nb::arg("directions"), nb::arg("npol") = 1);
  m.attr("SPEED_OF_LIGHT") = bf::kSpeedOfLight;
}

}  // namespace wbpy
