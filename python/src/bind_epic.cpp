// EPIC E-field direct imaging: EpicConfig -> EpicPlan -> execute.
#include <optional>

#include <fmt/format.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "owned.hpp"
#include "warpbeam/epic.hpp"

namespace wbpy {

namespace {

namespace ep = warpbeam::epic;

class PyEpic {
 public:
  PyEpic(ep::EpicConfig c, const std::string& backend, int device) {
    const auto b = warpbeam::resolve_backend(warpbeam::parse_backend(backend));
    device_ = b == warpbeam::Backend::cuda ? std::max(device, 0) : -1;
    use_device(device_);
    nb::gil_scoped_release g;
    plan_ = std::make_unique<ep::EpicPlan>(std::move(c), b);
  }
  const ep::EpicPlan& plan() const { return *plan_; }
  int device() const { return device_; }

  void execute(const InArray& in, OutArray& out, std::uintptr_t stream_ptr) const {
    const auto& c = plan_->config();
    require_same_place(in, "voltages", out, "out");
    const auto vin =
        view_of<const std::uint8_t, 4>(in, {c.nchan, c.ntime, c.nstand, 2}, "voltages");
    auto vout = view_of<float, 4>(out, {c.nchan, 4, c.grid_size, c.grid_size}, "out");
    const bool cuda = plan_->backend() == warpbeam::Backend::cuda;
    if (vin.space == Space::device && !cuda)
      throw nb::value_error(
          "voltages: a CUDA array given to an EpicImager made for the cpu "
          "backend");
    if (vin.space == Space::device && in.device_id() != device_)
      throw nb::value_error(fmt::format("voltages: on CUDA device {} but the imager runs on "
                                        "device {}",
                                        in.device_id(), device_)
                                .c_str());
    nb::gil_scoped_release g;
    use_device(device_);
    if (!cuda) {
      plan_->execute(vin, vout);
      return;
    }
    const warpbeam::Stream stream = borrowed_stream(stream_ptr);
    run_on_device(
        vin.data, static_cast<std::size_t>(vin.size()), vout.data, sizeof(float) * vout.size(),
        vin.space == Space::host, vin.space == Space::device ? &stream : nullptr,
        [&](const void* din, void* dout, const warpbeam::Stream* s) {
          plan_->execute(View<const std::uint8_t, 4>(static_cast<const std::uint8_t*>(din),
                                                     vin.shape, Space::device),
                         View<float, 4>(static_cast<float*>(dout), vout.shape, Space::device), s);
        });
  }

 private:
  int device_ = -1;
  std::unique_ptr<ep::EpicPlan> plan_;
};

}  // namespace

void bind_epic(nb::module_& m) {
  nb::class_<PyEpic>(m, "_EpicImager")
      .def(
          "__init__",
          [](PyEpic* self, std::vector<double> freqs_hz, const InArray& positions,
             std::int64_t ntime, std::optional<std::vector<std::uint8_t>> stand_ok,
             std::optional<InArray> calibration, bool phase_to_zenith, int grid_size, double cell_m,
             int support, double max_stand_radius_m, const std::string& algorithm,
             const std::string& backend, int threads, int device) {
            ep::EpicConfig c;
            c.nchan = static_cast<int>(freqs_hz.size());
            c.freqs_hz = std::move(freqs_hz);
            const auto p = view_of<const double, 2>(positions, {-1, 3}, "positions");
            if (p.space != Space::host) throw nb::value_error("positions: give a host array");
            c.nstand = static_cast<int>(p.shape[0]);
            for (std::int64_t i = 0; i < p.shape[0]; ++i)
              c.stand_xyz_m.push_back({p.data[3 * i], p.data[3 * i + 1], p.data[3 * i + 2]});
            c.ntime = ntime;
            if (stand_ok) c.stand_ok = *stand_ok;
            if (calibration) {
              const auto v = view_of<const std::complex<float>, 3>(
                  *calibration, {c.nchan, c.nstand, 2}, "calibration");
              if (v.space != Space::host) throw nb::value_error("calibration: give a host array");
              c.calibration.assign(v.data, v.data + v.size());
            }
            c.phase_to_zenith = phase_to_zenith;
            c.grid_size = grid_size;
            c.cell_m = cell_m;
            c.support = support;
            c.max_stand_radius_m = max_stand_radius_m;
            c.algorithm = ep::parse_algorithm(algorithm);
            c.threads = threads;
            new (self) PyEpic(std::move(c), backend, device);
          },
          nb::arg("freqs_hz"), nb::arg("positions"), nb::arg("ntime"), nb::arg("stand_ok").none(),
          nb::arg("calibration").none(), nb::arg("phase_to_zenith"), nb::arg("grid_size"),
          nb::arg("cell_m"), nb::arg("support"), nb::arg("max_stand_radius_m"),
          nb::arg("algorithm"), nb::arg("backend"), nb::arg("threads"), nb::arg("device"))
      .def("execute", &PyEpic::execute, nb::arg("voltages"), nb::arg("out"), nb::arg("stream"))
      .def_prop_ro("backend",
                   [](const PyEpic& e) { return std::string(to_string(e.plan().backend())); })
      .def_prop_ro("algorithm", [](const PyEpic& e) { return ep::to_string(e.plan().algorithm()); })
      .def_prop_ro("device", &PyEpic::device)
      .def_prop_ro("cell_wavelengths", [](const PyEpic& e) { return e.plan().geometry().du; })
      .def_prop_ro("used_stands", [](const PyEpic& e) { return e.plan().used_stands(); })
      .def_prop_ro(
          "grid_correction",
          [](const PyEpic& e) {
            auto g = e.plan().grid_correction();
            const auto& c = e.plan().config();
            return nb::cast(to_numpy(std::move(g), {std::size_t(c.nchan), std::size_t(c.grid_size),
                                                    std::size_t(c.grid_size)}));
          })
      .def(
          "footprint",
          [](const PyEpic& e, int chan, int stand) {
            const auto f = e.plan().footprint(chan, stand);
            return nb::make_tuple(f.x0, f.y0, f.wx, f.wy);
          },
          nb::arg("chan"), nb::arg("stand"));
}

}  // namespace wbpy
