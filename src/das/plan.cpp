// DasPlan: validation, the transmit delay table, and the choice of executor (cpu.cpp, cuda_*.cu).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>

#include "das/executor.hpp"
#include "warpbeam/das.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::das {

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "auto";
    case Algorithm::baseline:
      return "bl";
    case Algorithm::batch_inner:
      return "bi";
    case Algorithm::tensor_core:
      return "tc";
    case Algorithm::tensor_core_window:
      return "tcw";
  }
  return "?";
}
std::string_view to_string(Storage s) {
  return s == Storage::fp16 ? "fp16" : "fp32";
}
std::string_view to_string(Window w) {
  switch (w) {
    case Window::boxcar:
      return "boxcar";
    case Window::hann:
      return "hann";
    case Window::tukey:
      return "tukey";
  }
  return "?";
}
std::string_view to_string(Signal t) {
  return t == Signal::iq ? "iq" : "rf";
}

Algorithm parse_algorithm(std::string_view s) {
  if (s == "auto" || s == "automatic") return Algorithm::automatic;
  if (s == "bl" || s == "baseline") return Algorithm::baseline;
  if (s == "bi" || s == "batch_inner") return Algorithm::batch_inner;
  if (s == "tc" || s == "tensor_core") return Algorithm::tensor_core;
  if (s == "tcw" || s == "tensor_core_window") return Algorithm::tensor_core_window;
  fail(ErrorCategory::invalid_argument, "algorithm '{}' is not one of auto, bl, bi, tc, tcw", s);
}
Storage parse_storage(std::string_view s) {
  if (s == "fp32") return Storage::fp32;
  if (s == "fp16") return Storage::fp16;
  fail(ErrorCategory::invalid_argument, "storage '{}' is not fp32 or fp16", s);
}
Window parse_window(std::string_view s) {
  if (s == "boxcar") return Window::boxcar;
  if (s == "hann") return Window::hann;
  if (s == "tukey") return Window::tukey;
  fail(ErrorCategory::invalid_argument, "window '{}' is not one of boxcar, hann, tukey", s);
}

std::int64_t DasConfig::ntx() const {
  if (!transmits.empty()) return static_cast<std::int64_t>(transmits.size());
  if (voxels.empty()) return 0;
  return static_cast<std::int64_t>(tx_delays.size() / voxels.size());
}

namespace {
bool finite3(const Vec3& v) {
  return std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[2]);
}
}  // namespace

void DasConfig::validate() const {
  require_range<std::int64_t>("batch", batch, 1, std::int64_t{1} << 17);
  require_range<std::int64_t>("nsamples", nsamples, 2, std::int64_t{1} << 30);
  if (!(fs > 0) || !std::isfinite(fs))
    fail(ErrorCategory::invalid_argument, "fs = {} Hz must be > 0", fs);
  if (!std::isfinite(t0)) fail(ErrorCategory::invalid_argument, "t0 = {} s must be finite", t0);
  if (!(c > 0) || !std::isfinite(c))
    fail(ErrorCategory::invalid_argument, "sound speed c = {} m/s must be > 0", c);
  if (signal == Signal::iq && (!(fc > 0) || !std::isfinite(fc)))
    fail(ErrorCategory::invalid_argument, "IQ data need the centre frequency fc > 0 Hz, not {}",
         fc);
  if (probe.positions.empty()) fail(ErrorCategory::invalid_argument, "the probe has no elements");
  if (probe.positions.size() > (1u << 20))
    fail(ErrorCategory::invalid_argument, "the probe has {} elements (at most 2^20)",
         probe.positions.size());
  if (!probe.kinds.empty() && probe.kinds.size() != probe.positions.size())
    fail(ErrorCategory::invalid_argument, "probe: {} element kinds for {} elements",
         probe.kinds.size(), probe.positions.size());
  for (std::size_t m = 0; m < probe.positions.size(); ++m)
    if (!finite3(probe.positions[m]))
      fail(ErrorCategory::invalid_argument, "probe element {} has a non-finite position", m);
  if (voxels.empty()) fail(ErrorCategory::invalid_argument, "the grid has zero voxels");
  if (voxels.size() > static_cast<std::size_t>(INT32_MAX))
    fail(ErrorCategory::invalid_argument, "{} voxels (at most 2^31 - 1)", voxels.size());
  for (std::size_t n = 0; n < voxels.size(); ++n)
    if (!finite3(voxels[n]))
      fail(ErrorCategory::invalid_argument, "voxel {} has a non-finite position", n);
  if (transmits.empty() == tx_delays.empty())
    fail(ErrorCategory::invalid_argument,
         "give either transmit models or a transmit delay table [ntx][nvoxels], {}",
         transmits.empty() ? "neither was given" : "not both");
  if (!tx_delays.empty()) {
    if (tx_delays.size() % voxels.size() != 0)
      fail(ErrorCategory::invalid_argument,
           "the transmit delay table has {} values, not a multiple of {} voxels", tx_delays.size(),
           voxels.size());
    for (std::size_t i = 0; i < tx_delays.size(); ++i)
      if (!std::isfinite(tx_delays[i]))
        fail(ErrorCategory::invalid_argument, "transmit delay {} is not finite", i);
  }
  for (std::size_t q = 0; q < transmits.size(); ++q) {
    const Transmit& t = transmits[q];
    if (!std::isfinite(t.delay))
      fail(ErrorCategory::invalid_argument, "transmit {}: delay is not finite", q);
    switch (t.kind) {
      case Transmit::Kind::plane_wave:
        if (!(std::abs(t.azimuth) < M_PI / 2) || !(std::abs(t.elevation) < M_PI / 2))
          fail(ErrorCategory::invalid_argument,
               "transmit {}: steering angles ({}, {}) rad must be within (-pi/2, pi/2)", q,
               t.azimuth, t.elevation);
        break;
      case Transmit::Kind::diverging_wave:
        if (!finite3(t.source))
          fail(ErrorCategory::invalid_argument, "transmit {}: virtual source is not finite", q);
        break;
      case Transmit::Kind::element_delays: {
        const std::size_t ne =
            t.element_positions.empty() ? probe.positions.size() : t.element_positions.size();
        if (t.element_delays.size() != ne)
          fail(ErrorCategory::invalid_argument, "transmit {}: {} element delays for {} elements", q,
               t.element_delays.size(), ne);
        if (std::all_of(t.element_delays.begin(), t.element_delays.end(),
                        [](double d) { return std::isnan(d); }))
          fail(ErrorCategory::invalid_argument, "transmit {}: no element fires (all NaN)", q);
        break;
      }
    }
  }
  const std::int64_t nt = ntx();
  if (nt < 1) fail(ErrorCategory::invalid_argument, "no transmits");
  if (!tx_weights.empty()) {
    if (static_cast<std::int64_t>(tx_weights.size()) != nt * nvoxels())
      fail(ErrorCategory::invalid_argument, "tx_weights has {} values, expected {} x {}",
           tx_weights.size(), nt, nvoxels());
    for (std::size_t i = 0; i < tx_weights.size(); ++i)
      if (!std::isfinite(tx_weights[i]))
        fail(ErrorCategory::invalid_argument, "tx weight {} is not finite", i);
  }
  if (fnumber && (!(*fnumber > 0) || !std::isfinite(*fnumber)))
    fail(ErrorCategory::invalid_argument, "f-number = {} must be > 0 (omit it for full aperture)",
         *fnumber);
  if (!(tukey_alpha > 0 && tukey_alpha <= 1))
    fail(ErrorCategory::invalid_argument, "tukey_alpha = {} must be in (0, 1]", tukey_alpha);
  if (tuning.batch_tile != 0 && tuning.batch_tile != 4 && tuning.batch_tile != 8 &&
      tuning.batch_tile != 16)
    fail(ErrorCategory::invalid_argument, "tuning.batch_tile = {} must be 4, 8 or 16",
         tuning.batch_tile);
  if (tuning.bi_repeats != 0 && tuning.bi_repeats != 1 && tuning.bi_repeats != 2 &&
      tuning.bi_repeats != 4 && tuning.bi_repeats != 8)
    fail(ErrorCategory::invalid_argument, "tuning.bi_repeats = {} must be 1, 2, 4 or 8",
         tuning.bi_repeats);
  if (tuning.threads_per_block != 0 &&
      (tuning.threads_per_block < 64 || tuning.threads_per_block > 256 ||
       tuning.threads_per_block % 32 != 0))
    fail(ErrorCategory::invalid_argument,
         "tuning.threads_per_block = {} must be a multiple of 32 in [64, 256]",
         tuning.threads_per_block);
  if (tuning.warp_frames != 0 && tuning.warp_frames != 32 && tuning.warp_frames != 64 &&
      tuning.warp_frames != 128)
    fail(ErrorCategory::invalid_argument, "tuning.warp_frames = {} must be 32, 64 or 128",
         tuning.warp_frames);
  if (tuning.rx_split != 0 && tuning.rx_split != 1 && tuning.rx_split != 2 &&
      tuning.rx_split != 4 && tuning.rx_split != 8)
    fail(ErrorCategory::invalid_argument, "tuning.rx_split = {} must be 1, 2, 4 or 8",
         tuning.rx_split);
  if (tuning.rx_split > 1 && tuning.threads_per_block != 0 &&
      tuning.threads_per_block / 32 % tuning.rx_split != 0)
    fail(ErrorCategory::invalid_argument,
         "tuning.rx_split = {} does not divide the {} warps of tuning.threads_per_block = {}",
         tuning.rx_split, tuning.threads_per_block / 32, tuning.threads_per_block);
  if (tuning.delay_bits != 0 && tuning.delay_bits != 32 && tuning.delay_bits != 64)
    fail(ErrorCategory::invalid_argument, "tuning.delay_bits = {} must be 32 or 64",
         tuning.delay_bits);
  require_range("threads", threads, 0, 4096);
}

namespace detail {

DelayParams make_delay_params(const DasConfig& c) {
  DelayParams p;
  p.inv_c = 1.0 / c.c;
  p.fs = c.fs;
  p.t0 = c.t0;
  p.fc = c.fc;
  p.two_fnum = c.fnumber ? 2.0 * *c.fnumber : 0.0;
  p.last_index = static_cast<double>(c.nsamples - 1);
  p.window = c.window == Window::hann ? 1 : c.window == Window::tukey ? 2 : 0;
  p.tukey_alpha = static_cast<float>(c.tukey_alpha);
  p.iq = c.signal == Signal::iq ? 1 : 0;
  return p;
}

std::vector<Element> make_elements(const DasConfig& c) {
  std::vector<Element> e(c.probe.size());
  for (std::size_t m = 0; m < c.probe.size(); ++m) {
    const auto& p = c.probe.positions[m];
    const ElementKind k = c.probe.kinds.empty() ? ElementKind::point : c.probe.kinds[m];
    e[m] = {p[0], p[1], p[2], k == ElementKind::line_x ? 0.0 : 1.0,
            k == ElementKind::line_y ? 0.0 : 1.0};
  }
  return e;
}

std::vector<std::int32_t> locality_order(const std::vector<Vec3>& voxels) {
  Vec3 lo = voxels[0], hi = voxels[0];
  for (const auto& v : voxels)
    for (int a = 0; a < 3; ++a) {
      lo[a] = std::min(lo[a], v[a]);
      hi[a] = std::max(hi[a], v[a]);
    }
  // Spread 10 bits of each quantised coordinate into a 30-bit Morton key (x lowest).
  auto spread = [](std::uint32_t v) {
    std::uint64_t x = v & 0x3ff;
    x = (x | (x << 16)) & 0x30000ff;
    x = (x | (x << 8)) & 0x300f00f;
    x = (x | (x << 4)) & 0x30c30c3;
    x = (x | (x << 2)) & 0x9249249;
    return x;
  };
  std::vector<std::uint64_t> key(voxels.size());
  for (std::size_t n = 0; n < voxels.size(); ++n) {
    std::uint64_t k = 0;
    for (int a = 0; a < 3; ++a) {
      const double span = hi[a] - lo[a];
      const auto q =
          span > 0 ? static_cast<std::uint32_t>((voxels[n][a] - lo[a]) / span * 1023.0 + 0.5) : 0u;
      k |= spread(q) << a;
    }
    key[n] = k;
  }
  std::vector<std::int32_t> order(voxels.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return key[a] < key[b]; });
  return order;
}

}  // namespace detail

Algorithm automatic_algorithm(const DasConfig& c) {
  // The storage is the caller's precision choice; within it, the fastest variant measured on the
  // H200 (docs/PERFORMANCE.md). Batch-inner and the tensor-core window kernel work on blocks of
  // 32 frames (fp16 IQ) and waste most of a block on a few frames: BL below 8 frames.
  // fp32 (round 1, U1 and U2): BI over BL by 1.6x and 1.15x. fp16 (round 1): BI fastest of
  // BL, BI, TC; TCW is new in round 2, chosen on its predicted cost (3-6x fewer L1 bytes and
  // instructions per point than BI) until measured.
  if (c.batch < 8) return Algorithm::baseline;
  if (c.storage == Storage::fp16 && c.batch >= 16) return Algorithm::tensor_core_window;
  return Algorithm::batch_inner;
}

DasPlan::DasPlan(DasConfig config, Backend backend)
    : config_(std::move(config)), backend_(resolve_backend(backend)) {
  config_.validate();
  if (backend_ == Backend::cpu) {
    if (config_.algorithm != Algorithm::automatic)
      fail(ErrorCategory::invalid_argument,
           "algorithm '{}' is a CUDA variant: use the cuda backend (the cpu has one reference "
           "implementation)",
           to_string(config_.algorithm));
    if (config_.storage != Storage::fp32)
      fail(ErrorCategory::invalid_argument, "fp16 storage needs the cuda backend");
  }
  tx_delays_ = transmit_delays(config_);
  params_ = std::make_unique<detail::DelayParams>(detail::make_delay_params(config_));
  elements_ = detail::make_elements(config_);
  const detail::PlanData data{config_, tx_delays_, *params_, elements_};
  if (backend_ == Backend::cuda) {
    algorithm_ = config_.algorithm;
    if (algorithm_ == Algorithm::automatic) algorithm_ = automatic_algorithm(config_);
#ifdef WARPBEAM_HAVE_CUDA
    switch (algorithm_) {
      case Algorithm::baseline:
        exec_ = detail::make_baseline_executor(data);
        break;
      case Algorithm::batch_inner:
        exec_ = detail::make_batch_inner_executor(data);
        break;
      case Algorithm::tensor_core:
        exec_ = detail::make_tensor_core_executor(data);
        break;
      case Algorithm::tensor_core_window:
        exec_ = detail::make_tensor_core_window_executor(data);
        break;
      case Algorithm::automatic:
        break;
    }
#endif
  } else {
    exec_ = detail::make_cpu_executor(data);
  }
}

DasPlan::~DasPlan() = default;
DasPlan::DasPlan(DasPlan&&) noexcept = default;
DasPlan& DasPlan::operator=(DasPlan&&) noexcept = default;

std::array<std::int64_t, 4> DasPlan::input_shape() const {
  return {config_.batch, config_.nrx(), config_.ntx(), config_.nsamples};
}
std::array<std::int64_t, 2> DasPlan::output_shape() const {
  return {config_.batch, config_.nvoxels()};
}
double DasPlan::points() const {
  return static_cast<double>(config_.nvoxels()) * static_cast<double>(config_.nrx()) *
         static_cast<double>(config_.ntx()) * static_cast<double>(config_.batch);
}

namespace {

// The checks of execute(): sample type, shapes and memory spaces.
template <class T>
void check_views(const DasPlan& plan, const View<T, 4>& in,
                 const View<std::complex<float>, 2>& out) {
  constexpr bool iq = std::is_same_v<std::remove_const_t<T>, std::complex<float>>;
  if (iq && plan.config().signal != Signal::iq)
    fail(ErrorCategory::invalid_argument, "this plan is for RF data: pass real samples");
  if (!iq && plan.config().signal != Signal::rf)
    fail(ErrorCategory::invalid_argument, "this plan is for IQ data: pass complex samples");
  const Space space = plan.backend() == Backend::cuda ? Space::device : Space::host;
  require_view(in, plan.input_shape(), space, iq ? "DAS input (IQ)" : "DAS input (RF)");
  require_view(out, plan.output_shape(), space, "DAS output");
}

}  // namespace

void DasPlan::execute(View<const float, 4> rf, View<std::complex<float>, 2> out,
                      const Stream* stream) const {
  check_views(*this, rf, out);
  run(rf.data, out.data, stream);
}

void DasPlan::execute(View<const std::complex<float>, 4> iq, View<std::complex<float>, 2> out,
                      const Stream* stream) const {
  check_views(*this, iq, out);
  run(iq.data, out.data, stream);
}

DasPlan::Timing DasPlan::execute_timed(View<const float, 4> rf, View<std::complex<float>, 2> out,
                                       const Stream* stream) const {
  check_views(*this, rf, out);
  return run_timed(rf.data, out.data, stream);
}

DasPlan::Timing DasPlan::execute_timed(View<const std::complex<float>, 4> iq,
                                       View<std::complex<float>, 2> out,
                                       const Stream* stream) const {
  check_views(*this, iq, out);
  return run_timed(iq.data, out.data, stream);
}

void DasPlan::run(const void* in, std::complex<float>* out, const Stream* stream,
                  Event* layout_done) const {
  if (!exec_) fail(ErrorCategory::unsupported, "this build has no CUDA backend");
  const detail::PlanData data{config_, tx_delays_, *params_, elements_};
  exec_->execute(data, in, out, stream, layout_done);
}

DasPlan::Timing DasPlan::run_timed(const void* in, std::complex<float>* out,
                                   const Stream* stream) const {
  if (backend_ != Backend::cuda)
    fail(ErrorCategory::unsupported, "execute_timed() times CUDA events: use the cuda backend");
  Event start, layout, end;
  start.record(stream);
  run(in, out, stream, &layout);
  end.record(stream);
  end.synchronize();
  return {layout.elapsed_ms_since(start), end.elapsed_ms_since(layout)};
}

}  // namespace warpbeam::das
