// EpicPlan: validation, the choice of algorithm and executor, and the shared accessors.
#include <algorithm>
#include <cmath>

#include "epic/fused_config.hpp"
#include "epic/tables.hpp"
#include "warpbeam/epic.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::epic {

std::string to_string(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "auto";
    case Algorithm::reference:
      return "reference";
    case Algorithm::multikernel:
      return "multikernel";
    case Algorithm::fused:
      return "fused";
  }
  return "unknown";
}

Algorithm parse_algorithm(const std::string& s) {
  if (s == "auto" || s == "automatic") return Algorithm::automatic;
  if (s == "reference" || s == "cpu") return Algorithm::reference;
  if (s == "multikernel") return Algorithm::multikernel;
  if (s == "fused") return Algorithm::fused;
  fail(ErrorCategory::invalid_argument,
       "EPIC algorithm '{}' is not one of auto, reference, multikernel, fused", s);
}

double EpicConfig::max_frequency_hz() const {
  return freqs_hz.empty() ? 0.0 : *std::max_element(freqs_hz.begin(), freqs_hz.end());
}

double EpicConfig::cell_wavelengths() const {
  if (du_override > 0) return du_override;
  const double lambda_min = kSpeedOfLight / max_frequency_hz();
  return (cell_m > 0 ? cell_m : lambda_min / 2) / lambda_min;
}

void EpicConfig::validate() const {
  require_range("nchan", nchan, 1, 65535);  // a CUDA grid dimension
  require_range("nstand", nstand, 1, 4096);
  require_range<std::int64_t>("ntime", ntime, 1, std::int64_t{1} << 30);
  if (static_cast<int>(freqs_hz.size()) != nchan)
    fail(ErrorCategory::invalid_argument, "freqs_hz has {} entries for {} channels",
         freqs_hz.size(), nchan);
  for (int c = 0; c < nchan; ++c)
    if (!(freqs_hz[c] > 0) || !std::isfinite(freqs_hz[c]))
      fail(ErrorCategory::invalid_argument, "freqs_hz[{}] = {} Hz must be > 0", c, freqs_hz[c]);
  if (static_cast<int>(stand_xyz_m.size()) != nstand)
    fail(ErrorCategory::invalid_argument, "stand_xyz_m has {} entries for {} stands",
         stand_xyz_m.size(), nstand);
  for (int s = 0; s < nstand; ++s)
    for (double v : stand_xyz_m[s])
      if (!std::isfinite(v) || std::abs(v) > 1e6)
        fail(ErrorCategory::invalid_argument, "stand {} has position component {} m", s, v);
  if (!stand_ok.empty() && static_cast<int>(stand_ok.size()) != nstand)
    fail(ErrorCategory::invalid_argument, "stand_ok has {} entries for {} stands", stand_ok.size(),
         nstand);
  if (!calibration.empty() && calibration.size() != static_cast<std::size_t>(nchan) * nstand * 2)
    fail(ErrorCategory::invalid_argument, "calibration has {} entries, not nchan*nstand*2 = {}",
         calibration.size(), static_cast<std::size_t>(nchan) * nstand * 2);
  for (const auto& g : calibration)
    if (!std::isfinite(g.real()) || !std::isfinite(g.imag()))
      fail(ErrorCategory::invalid_argument, "calibration holds a non-finite factor");
  if (grid_size < 16 || grid_size > 1024 || grid_size % 2)
    fail(ErrorCategory::invalid_argument,
         "grid_size = {} is not supported: the image size must be even and in [16, 1024] "
         "(the fused CUDA imager: 64, 128 or 256)",
         grid_size);
  require_range("support", support, 1, 9);
  const double lambda_min = kSpeedOfLight / max_frequency_hz();
  if (!(cell_m >= 0) || !std::isfinite(cell_m) || cell_m > lambda_min / 2 * (1 + 1e-9))
    fail(ErrorCategory::invalid_argument,
         "cell_m = {} m must be in (0, lambda/2 = {:.4f} m] at the highest frequency ({:.4f} MHz),"
         " or 0 for lambda/2: a larger cell aliases the sky",
         cell_m, lambda_min / 2, max_frequency_hz() / 1e6);
  if (!(du_override >= 0) || du_override > 0.5 * (1 + 1e-9))
    fail(ErrorCategory::invalid_argument,
         "du_override = {} wavelengths must be in (0, 0.5], or 0 for cell_m: a larger cell "
         "aliases the sky",
         du_override);
  if (!(max_stand_radius_m > 0))
    fail(ErrorCategory::invalid_argument, "max_stand_radius_m = {} must be > 0",
         max_stand_radius_m);
  require_range("fused.xy_in_shared", fused.xy_in_shared, -1, 1);
  require_range("fused.spectra_per_pass", fused.spectra_per_pass, 0, 3);
  require_range("fused.time_split", fused.time_split, 0, 64);
  require_range("multikernel.batch", multikernel.batch, 0, 1 << 20);
  require_range("threads", threads, 0, 4096);
}

std::vector<FusedTuning> fused_variants(int n) {
  // Round 1 (H200): two spectra per pass beat one by 20-25 % at every size; three only fit
  // N = 256 with XY* in registers. (2, XY* shared) does not fit N = 64 or 128 (it is listed for
  // N = 256 only). Keep in step with the instantiations in cuda_fused.cu.
  std::vector<FusedTuning> v;
  auto add = [&](int xys, int spb) {
    FusedTuning t;
    t.xy_in_shared = xys;
    t.spectra_per_pass = spb;
    v.push_back(t);
  };
  add(0, 1);
  add(1, 1);
  add(0, 2);
  if (n == 256) {
    add(1, 2);
    add(0, 3);
  }
  return v;
}

namespace detail {

bool fused_supports(const EpicConfig& c, const PlanTables& t, std::string* why) {
  auto no = [&](std::string w) {
    if (why) *why = std::move(w);
    return false;
  };
  if (!fused_size_supported(c.grid_size))
    return no(
        fmt::format("the fused imager supports 64, 128 and 256 pixel images, not {}", c.grid_size));
  if (c.nstand > kFusedMaxStands)
    return no(
        fmt::format("the fused imager takes at most {} stands, not {}", kFusedMaxStands, c.nstand));
  const int a = fused_aperture(c.grid_size);
  for (int ch = 0; ch < c.nchan; ++ch)
    if (t.rows[ch] > a || t.cols[ch] > a)
      return no(fmt::format(
          "at {:.4f} MHz the aperture spans {} x {} cells; the fused imager holds {} x {}",
          c.freqs_hz[ch] / 1e6, t.cols[ch], t.rows[ch], a, a));
  return true;
}

}  // namespace detail

EpicPlan::EpicPlan(EpicConfig config, Backend backend)
    : config_(std::move(config)), backend_(resolve_backend(backend)) {
  config_.validate();
  tables_ = std::make_unique<detail::PlanTables>(detail::build_tables(config_));
  algorithm_ = config_.algorithm;
  if (backend_ == Backend::cpu) {
    if (algorithm_ == Algorithm::automatic) algorithm_ = Algorithm::reference;
    if (algorithm_ != Algorithm::reference)
      fail(ErrorCategory::invalid_argument, "the {} EPIC algorithm runs on CUDA, not on the CPU",
           to_string(algorithm_));
    exec_ = detail::make_cpu_executor(config_, *tables_);
    return;
  }
#ifdef WARPBEAM_HAVE_CUDA
  std::string why;
  const bool fused_ok = detail::fused_supports(config_, *tables_, &why);
  if (algorithm_ == Algorithm::automatic)
    algorithm_ = fused_ok ? Algorithm::fused : Algorithm::multikernel;
  if (algorithm_ == Algorithm::reference)
    fail(ErrorCategory::unsupported, "the reference EPIC algorithm runs on the CPU backend");
  if (algorithm_ == Algorithm::fused && !fused_ok) fail(ErrorCategory::unsupported, "{}", why);
  if (algorithm_ == Algorithm::fused) {
    try {
      exec_ = detail::make_fused_executor(config_, *tables_);
    } catch (const Error& e) {
      // `automatic` falls back to the multi-kernel path when the device cannot hold the fused
      // kernel (shared memory, cluster occupancy); an explicit `fused` request fails.
      if (config_.algorithm != Algorithm::automatic || e.category() != ErrorCategory::unsupported)
        throw;
      warnf("EPIC: {}; using the multi-kernel path", e.what());
      algorithm_ = Algorithm::multikernel;
    }
  }
  if (algorithm_ == Algorithm::multikernel)
    exec_ = detail::make_multikernel_executor(config_, *tables_);
#endif
}

FusedProfile EpicPlan::fused_profile() const {
  return exec_ ? exec_->profile() : FusedProfile{};
}

EpicPlan::~EpicPlan() = default;
EpicPlan::EpicPlan(EpicPlan&&) noexcept = default;
EpicPlan& EpicPlan::operator=(EpicPlan&&) noexcept = default;

ImageGeometry EpicPlan::geometry() const {
  return {config_.grid_size, tables_->du};
}

const std::vector<int>& EpicPlan::used_stands() const {
  return tables_->used;
}

const std::vector<int>& EpicPlan::distant_stands() const {
  return tables_->distant;
}

Footprint EpicPlan::footprint(int chan, int stand) const {
  const auto& t = *tables_;
  require_range("chan", chan, 0, t.nchan - 1);
  const auto it = std::lower_bound(t.used.begin(), t.used.end(), stand);
  if (it == t.used.end() || *it != stand)
    fail(ErrorCategory::invalid_argument, "stand {} is not gridded", stand);
  const std::size_t a = t.ant(chan, static_cast<int>(it - t.used.begin()));
  Footprint f;
  f.x0 = t.x0[a];
  f.y0 = t.y0[a];
  f.u = t.u[a];
  f.v = t.v[a];
  f.wx.assign(t.wx.begin() + a * t.taps(), t.wx.begin() + (a + 1) * t.taps());
  f.wy.assign(t.wy.begin() + a * t.taps(), t.wy.begin() + (a + 1) * t.taps());
  return f;
}

std::array<int, 2> EpicPlan::aperture_cells(int chan) const {
  require_range("chan", chan, 0, tables_->nchan - 1);
  return {tables_->rows[chan], tables_->cols[chan]};
}

std::vector<float> EpicPlan::grid_correction() const {
  const auto& t = *tables_;
  const int n = t.n;
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  std::vector<float> out(t.corr.size());
  for (int c = 0; c < t.nchan; ++c)
    for (int q = 0; q < n; ++q)
      for (int p = 0; p < n; ++p)
        out[c * nn + static_cast<std::size_t>((q + n / 2) % n) * n + (p + n / 2) % n] =
            t.corr[c * nn + static_cast<std::size_t>(q) * n + p];
  return out;
}

void EpicPlan::execute(View<const std::uint8_t, 4> in, View<float, 4> out,
                       const Stream* stream) const {
  const Space space = backend_ == Backend::cuda ? Space::device : Space::host;
  const auto& c = config_;
  require_view(in, {c.nchan, c.ntime, c.nstand, 2}, space, "EPIC input (ci4 voltages)");
  require_view(out, {c.nchan, 4, c.grid_size, c.grid_size}, space, "EPIC output (images)");
  exec_->execute(in.data, out.data, stream);
}

#ifndef WARPBEAM_HAVE_CUDA
double cufft_reference_time_s(int, std::int64_t, bool) {
  fail(ErrorCategory::unsupported, "cuFFT timings need the CUDA backend");
}
#endif

void to_stokes(const float* products, float* stokes, std::int64_t nchan, int n) {
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  for (std::int64_t c = 0; c < nchan; ++c) {
    const float* a = products + c * 4 * nn;
    float* o = stokes + c * 4 * nn;
    for (std::size_t i = 0; i < nn; ++i) {
      const float xx = a[i], yy = a[nn + i], u = a[2 * nn + i], v = a[3 * nn + i];
      o[i] = 0.5f * (xx + yy);
      o[nn + i] = 0.5f * (xx - yy);
      o[2 * nn + i] = u;
      o[3 * nn + i] = v;
    }
  }
}

}  // namespace warpbeam::epic
