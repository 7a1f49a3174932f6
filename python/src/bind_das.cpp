// Ultrasound delay-and-sum: DasConfig -> DasPlan -> execute, on host or CUDA arrays.
#include <chrono>
#include <complex>
#include <optional>

#include <fmt/format.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "owned.hpp"
#include "warpbeam/das.hpp"

namespace wbpy {

namespace {

namespace das = warpbeam::das;

std::vector<das::Vec3> points_of(const InArray& a, const char* name) {
  const auto v = view_of<const double, 2>(a, {-1, 3}, name);
  if (v.space != Space::host) throw nb::value_error(fmt::format("{}: host array", name).c_str());
  std::vector<das::Vec3> p(static_cast<std::size_t>(v.shape[0]));
  for (std::size_t i = 0; i < p.size(); ++i)
    p[i] = {v.data[3 * i], v.data[3 * i + 1], v.data[3 * i + 2]};
  return p;
}

template <class T>
std::vector<T> values_of(const InArray& a, std::int64_t rows, std::int64_t cols, const char* name) {
  const auto v = view_of<const T, 2>(a, {rows, cols}, name);
  if (v.space != Space::host) throw nb::value_error(fmt::format("{}: host array", name).c_str());
  return std::vector<T>(v.data, v.data + v.size());
}

// A plan with the device it was made on (CUDA plans run on that device only).
class PyDasPlan {
 public:
  PyDasPlan(das::DasConfig c, const std::string& backend, int device) : device_(device) {
    const auto b = warpbeam::parse_backend(backend);
    const auto resolved = warpbeam::resolve_backend(b);
    if (resolved == warpbeam::Backend::cuda) {
      if (device_ < 0) device_ = 0;
      use_device(device_);
    } else {
      device_ = -1;
    }
    nb::gil_scoped_release g;
    plan_ = std::make_unique<das::DasPlan>(std::move(c), resolved);
  }
  const das::DasPlan& plan() const { return *plan_; }
  int device() const { return device_; }

  void execute(const InArray& data, OutArray& out, std::uintptr_t stream) const {
    const auto& c = plan_->config();
    const auto in_shape = plan_->input_shape();
    const auto out_shape = plan_->output_shape();
    require_same_place(data, "data", out, "out");
    const auto vout = view_of<std::complex<float>, 2>(out, out_shape, "out");
    const Space sp = vout.space;
    const bool cuda = plan_->backend() == warpbeam::Backend::cuda;
    if (sp == Space::device) {
      if (!cuda)
        throw nb::value_error("data: a CUDA array given to a DasPlan made for the cpu backend");
      if (data.device_id() != device_)
        throw nb::value_error(fmt::format("data: on CUDA device {} but the plan was made on "
                                          "device {}",
                                          data.device_id(), device_)
                                  .c_str());
    }
    const bool staged = cuda && sp == Space::host;
    if (c.signal == das::Signal::rf) {
      const auto v = view_of<const float, 4>(data, in_shape, "data");
      run(v, vout, staged, stream, sp);
    } else {
      const auto v = view_of<const std::complex<float>, 4>(data, in_shape, "data");
      run(v, vout, staged, stream, sp);
    }
  }

  /// `repeats` plan executions on already checked device arrays (no staging), as the C++ API
  /// caller would make them; for the call-overhead benchmark. Called without the GIL.
  void execute_unchecked(const InArray& data, OutArray& out, std::uintptr_t stream_ptr,
                         int repeats) const {
    const warpbeam::Stream stream = borrowed_stream(stream_ptr);
    const bool dev = plan_->backend() == warpbeam::Backend::cuda;
    const Space sp = dev ? Space::device : Space::host;
    View<std::complex<float>, 2> vout(static_cast<std::complex<float>*>(out.data()),
                                      plan_->output_shape(), sp);
    for (int i = 0; i < repeats; ++i) {
      if (plan_->config().signal == das::Signal::rf)
        plan_->execute(
            View<const float, 4>(static_cast<const float*>(data.data()), plan_->input_shape(), sp),
            vout, dev ? &stream : nullptr);
      else
        plan_->execute(
            View<const std::complex<float>, 4>(static_cast<const std::complex<float>*>(data.data()),
                                               plan_->input_shape(), sp),
            vout, dev ? &stream : nullptr);
    }
  }

 private:
  template <class T>
  void run(View<const T, 4> in, View<std::complex<float>, 2> out, bool staged,
           std::uintptr_t stream_ptr, Space sp) const {
    nb::gil_scoped_release g;
    use_device(device_);
    if (plan_->backend() == warpbeam::Backend::cpu) {
      plan_->execute(in, out);
      return;
    }
    const warpbeam::Stream stream = borrowed_stream(stream_ptr);
    run_on_device(in.data, sizeof(T) * in.size(), out.data, sizeof(out.data[0]) * out.size(),
                  staged, sp == Space::device ? &stream : nullptr,
                  [&](const void* din, void* dout, const warpbeam::Stream* s) {
                    plan_->execute(
                        View<const T, 4>(static_cast<const T*>(din), in.shape, Space::device),
                        View<std::complex<float>, 2>(static_cast<std::complex<float>*>(dout),
                                                     out.shape, Space::device),
                        s);
                  });
  }
  int device_ = -1;
  std::unique_ptr<das::DasPlan> plan_;
};

}  // namespace

void bind_das(nb::module_& m) {
  nb::class_<das::Transmit>(m, "Transmit",
                            "One transmit event of an ultrasound acquisition (UFF conventions: "
                            "time zero when the wave passes the probe's origin).")
      .def_static(
          "plane",
          [](double az, double el, double delay) {
            auto t = das::Transmit::plane(az, el);
            t.delay = delay;
            return t;
          },
          nb::arg("azimuth") = 0.0, nb::arg("elevation") = 0.0, nb::arg("delay") = 0.0,
          "A plane wave steered by `azimuth` (x-z plane) and `elevation` (towards y), radians; "
          "`delay` (s) is added to every transmit delay.")
      .def_static(
          "diverging",
          [](std::array<double, 3> s, double delay) {
            auto t = das::Transmit::diverging(s);
            t.delay = delay;
            return t;
          },
          nb::arg("source"), nb::arg("delay") = 0.0,
          "A diverging wave from the virtual source (x, y, z) in metres (z < 0: behind the "
          "probe).")
      .def_static(
          "element_delays",
          [](std::vector<double> delays, std::optional<std::vector<std::array<double, 3>>> pos,
             double delay) {
            das::Transmit t;
            t.kind = das::Transmit::Kind::element_delays;
            t.element_delays = std::move(delays);
            if (pos) t.element_positions = *pos;
            t.delay = delay;
            return t;
          },
          nb::arg("delays"), nb::arg("positions") = nb::none(), nb::arg("delay") = 0.0,
          "Elements fired with `delays` (s, NaN = off; PyMUST's TXdelay), at `positions` "
          "(n, 3) in metres (None: the receive elements).")
      .def_prop_ro("kind",
                   [](const das::Transmit& t) {
                     return t.kind == das::Transmit::Kind::plane_wave       ? "plane"
                            : t.kind == das::Transmit::Kind::diverging_wave ? "diverging"
                                                                            : "element_delays";
                   })
      .def_ro("azimuth", &das::Transmit::azimuth)
      .def_ro("elevation", &das::Transmit::elevation)
      .def_ro("source", &das::Transmit::source)
      .def_ro("element_delays_s", &das::Transmit::element_delays)
      .def_ro("delay", &das::Transmit::delay)
      .def("__repr__", [](const das::Transmit& t) {
        if (t.kind == das::Transmit::Kind::plane_wave)
          return fmt::format("Transmit.plane(azimuth={}, elevation={}, delay={})", t.azimuth,
                             t.elevation, t.delay);
        if (t.kind == das::Transmit::Kind::diverging_wave)
          return fmt::format("Transmit.diverging(source=({}, {}, {}), delay={})", t.source[0],
                             t.source[1], t.source[2], t.delay);
        return fmt::format("Transmit.element_delays(<{} delays>, delay={})",
                           t.element_delays.size(), t.delay);
      });

  m.def(
      "_grid",
      [](std::string spec) {
        const das::Grid g = das::parse_grid(spec);
        return nb::make_tuple(nb::make_tuple(g.x.start, g.x.stop, g.x.step),
                              nb::make_tuple(g.y.start, g.y.stop, g.y.step),
                              nb::make_tuple(g.z.start, g.z.stop, g.z.step), g.is_2d());
      },
      nb::arg("spec"));
  m.def(
      "_grid_voxels",
      [](std::array<double, 3> x, std::array<double, 3> y, std::array<double, 3> z) {
        das::Grid g{{x[0], x[1], x[2]}, {y[0], y[1], y[2]}, {z[0], z[1], z[2]}};
        for (const auto* a : {&g.x, &g.y, &g.z})
          if (!(a->step > 0) || a->stop < a->start)
            throw nb::value_error(fmt::format("grid: axis ({}, {}, {}) needs step > 0 and stop "
                                              ">= start",
                                              a->start, a->stop, a->step)
                                      .c_str());
        const auto s = g.shape();
        std::vector<double> v;
        v.reserve(static_cast<std::size_t>(3 * g.size()));
        for (const auto& p : g.voxels())
          v.insert(v.end(), p.begin(), p.end());
        return nb::make_tuple(to_numpy(std::move(v), {std::size_t(g.size()), std::size_t(3)}),
                              nb::make_tuple(s[0], s[1], s[2]));
      },
      nb::arg("x"), nb::arg("y"), nb::arg("z"));

  nb::class_<PyDasPlan>(m, "_DasPlan")
      .def(
          "__init__",
          [](PyDasPlan* self, const std::string& sample_type, std::int64_t batch,
             std::int64_t nsamples, double fs, double fc, double t0, double c,
             const InArray& elements, std::vector<std::string> kinds, const InArray& voxels,
             std::vector<das::Transmit> transmits, std::optional<InArray> tx_delays,
             std::optional<InArray> tx_weights, std::optional<double> fnumber,
             const std::string& window, double tukey_alpha, const std::string& algorithm,
             const std::string& storage, const std::string& backend, int threads, int device) {
            das::DasConfig cfg;
            if (sample_type != "rf" && sample_type != "iq")
              throw nb::value_error(
                  fmt::format("sample_type '{}': expected 'rf' or 'iq'", sample_type).c_str());
            cfg.signal = sample_type == "rf" ? das::Signal::rf : das::Signal::iq;
            cfg.batch = batch;
            cfg.nsamples = nsamples;
            cfg.fs = fs;
            cfg.fc = fc;
            cfg.t0 = t0;
            cfg.c = c;
            cfg.probe.positions = points_of(elements, "elements");
            for (const auto& k : kinds) {
              if (k == "point")
                cfg.probe.kinds.push_back(das::ElementKind::point);
              else if (k == "line_x")
                cfg.probe.kinds.push_back(das::ElementKind::line_x);
              else if (k == "line_y")
                cfg.probe.kinds.push_back(das::ElementKind::line_y);
              else
                throw nb::value_error(
                    fmt::format("element_kinds: '{}' (point, line_x or line_y)", k).c_str());
            }
            cfg.voxels = points_of(voxels, "grid");
            cfg.transmits = std::move(transmits);
            if (tx_delays)
              cfg.tx_delays = values_of<double>(*tx_delays, -1, cfg.nvoxels(), "tx_delays");
            if (tx_weights)
              cfg.tx_weights = values_of<float>(*tx_weights, -1, cfg.nvoxels(), "tx_weights");
            cfg.fnumber = fnumber;
            cfg.window = das::parse_window(window);
            cfg.tukey_alpha = tukey_alpha;
            cfg.algorithm = das::parse_algorithm(algorithm);
            cfg.storage = das::parse_storage(storage);
            cfg.threads = threads;
            new (self) PyDasPlan(std::move(cfg), backend, device);
          },
          nb::arg("sample_type"), nb::arg("batch"), nb::arg("nsamples"), nb::arg("fs"),
          nb::arg("fc"), nb::arg("t0"), nb::arg("c"), nb::arg("elements"), nb::arg("element_kinds"),
          nb::arg("voxels"), nb::arg("transmits"), nb::arg("tx_delays").none(),
          nb::arg("tx_weights").none(), nb::arg("fnumber").none(), nb::arg("window"),
          nb::arg("tukey_alpha"), nb::arg("algorithm"), nb::arg("storage"), nb::arg("backend"),
          nb::arg("threads"), nb::arg("device"))
      .def("execute", &PyDasPlan::execute, nb::arg("data"), nb::arg("out"), nb::arg("stream"))
      .def(
          "bench_execute",
          [](const PyDasPlan& p, const InArray& data, OutArray& out, std::uintptr_t stream,
             int repeats) {
            // The C++ side of the call-overhead benchmark: `repeats` execute() calls from C++
            // (arguments checked once), then one wait for the stream; wall seconds per call.
            p.execute(data, out, stream);  // checks and warm-up
            if ((p.plan().backend() == warpbeam::Backend::cuda) !=
                (space_of(data, "data") == Space::device))
              throw nb::value_error("data: bench_execute needs the plan's own memory space");
            nb::gil_scoped_release g;
            const warpbeam::Stream s = borrowed_stream(stream);
            if (p.plan().backend() == warpbeam::Backend::cuda) s.synchronize();
            const auto t0 = std::chrono::steady_clock::now();
            p.execute_unchecked(data, out, stream, repeats);
            if (p.plan().backend() == warpbeam::Backend::cuda) s.synchronize();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                   repeats;
          },
          nb::arg("data"), nb::arg("out"), nb::arg("stream"), nb::arg("repeats"))
      .def_prop_ro("backend",
                   [](const PyDasPlan& p) { return std::string(to_string(p.plan().backend())); })
      .def_prop_ro(
          "algorithm",
          [](const PyDasPlan& p) { return std::string(das::to_string(p.plan().algorithm())); })
      .def_prop_ro("device", &PyDasPlan::device)
      .def_prop_ro("input_shape", [](const PyDasPlan& p) { return p.plan().input_shape(); })
      .def_prop_ro("output_shape", [](const PyDasPlan& p) { return p.plan().output_shape(); })
      .def_prop_ro("points", [](const PyDasPlan& p) { return p.plan().points(); })
      .def_prop_ro("tx_delays", [](const PyDasPlan& p) {
        auto v = p.plan().tx_delays();
        const auto n = std::size_t(p.plan().config().nvoxels());
        return nb::cast(to_numpy(std::move(v), {v.size() / n, n}));
      });

  m.def(
      "rf_to_iq",
      [](const InArray& rf, double fs, double fc, double t0, double bandwidth) {
        if (space_of(rf, "rf") != Space::host)
          throw nb::value_error("rf: rf_to_iq runs on the host: give a host array");
        require_dtype<float>(rf, "rf");
        if (rf.ndim() < 1) throw nb::value_error("rf: needs at least one dimension (samples)");
        std::vector<std::int64_t> any(rf.ndim(), -1);
        require_shape(rf, any, "rf");
        const std::int64_t ns = rf.shape(rf.ndim() - 1);
        const std::int64_t lines = ns ? static_cast<std::int64_t>(rf.size()) / ns : 0;
        std::vector<std::complex<float>> iq;
        {
          nb::gil_scoped_release g;
          iq =
              das::rf_to_iq(static_cast<const float*>(rf.data()), lines, ns, fs, fc, t0, bandwidth);
        }
        std::vector<std::size_t> shape(rf.ndim());
        for (std::size_t i = 0; i < rf.ndim(); ++i)
          shape[i] = rf.shape(i);
        return to_numpy(std::move(iq), shape);
      },
      nb::arg("rf"), nb::arg("fs"), nb::arg("fc"), nb::arg("t0") = 0.0, nb::arg("bandwidth") = 0.0);
}

}  // namespace wbpy
