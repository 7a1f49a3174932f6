// DedispersionPlan: validation, the delay table, and the choice of executor (cpu_tiled.cpp and
// cpu_direct.cpp; cuda_dispatch.cpp).
#include <algorithm>
#include <cmath>

#include "dedisp/executor.hpp"
#include "dedisp/method_tables.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp {

void DedispersionConfig::validate() const {
  require_range("nchans", nchans, 1, 1 << 20);
  if (!(fch1_mhz > 0) || !std::isfinite(fch1_mhz))
    fail(ErrorCategory::invalid_argument, "fch1 = {} MHz must be > 0", fch1_mhz);
  if (!(foff_mhz != 0) || !std::isfinite(foff_mhz))
    fail(ErrorCategory::invalid_argument, "foff = {} MHz must be non-zero", foff_mhz);
  const double flow = std::min(fch1_mhz, fch1_mhz + (nchans - 1) * foff_mhz);
  if (!(flow > 0))
    fail(ErrorCategory::invalid_argument, "the band reaches {} MHz: fch1/foff/nchans disagree",
         flow);
  if (!(tsamp_s > 0) || !std::isfinite(tsamp_s))
    fail(ErrorCategory::invalid_argument, "tsamp = {} s must be > 0", tsamp_s);
  if (!supported_nbits(nbits))
    fail(ErrorCategory::invalid_argument, "nbits = {} is not one of 1, 2, 4, 8, 16, 32", nbits);
  if (dms.empty()) fail(ErrorCategory::invalid_argument, "the DM list is empty");
  for (std::size_t i = 0; i < dms.size(); ++i) {
    if (!(dms[i] >= 0) || !std::isfinite(dms[i]))
      fail(ErrorCategory::invalid_argument, "DM trial {} = {} must be >= 0", i, dms[i]);
    if (i && dms[i] < dms[i - 1])
      fail(ErrorCategory::invalid_argument, "the DM list must be ascending (trial {})", i);
  }
  if (!killmask.empty() && static_cast<int>(killmask.size()) != nchans)
    fail(ErrorCategory::invalid_argument, "killmask has {} entries for {} channels",
         killmask.size(), nchans);
  if (nsamples_in <= 0)
    fail(ErrorCategory::invalid_argument, "nsamples_in = {} must be > 0", nsamples_in);
  require_range("threads", threads, 0, 4096);
  require_range("cpu_tuning.dms_per_tile", cpu_tuning.dms_per_tile, 0, 4096);
  require_range("cpu_tuning.samples_per_tile", cpu_tuning.samples_per_tile, 0, 1 << 20);
  if (subband.subbands < 0 || subband.subbands > nchans)
    fail(ErrorCategory::invalid_argument,
         "subband.subbands = {} must be 0 (automatic) or 1 .. {} (no more sub-bands than channels)",
         subband.subbands, nchans);
  if (!(subband.coarse_dm_step >= 0) || !std::isfinite(subband.coarse_dm_step))
    fail(ErrorCategory::invalid_argument,
         "subband.coarse_dm_step = {} pc cm^-3 must be >= 0 (0: automatic)",
         subband.coarse_dm_step);
  if (!(subband.smearing > 0 && subband.smearing <= 4))
    fail(ErrorCategory::invalid_argument,
         "subband.smearing = {} is outside the allowed range (0, 4] (a fraction of the width)",
         subband.smearing);
  if (!(subband.min_snr_fraction >= 0 && subband.min_snr_fraction <= 1))
    fail(ErrorCategory::invalid_argument,
         "subband.min_snr_fraction = {} is outside the allowed range [0, 1]",
         subband.min_snr_fraction);
  require_range("subband.phases", subband.phases, 0, 4);
  if (!subband.trial_coarse_dms.empty() || !subband.trial_phases.empty()) {
    if (subband.trial_coarse_dms.size() != dms.size() || subband.trial_phases.size() != dms.size())
      fail(ErrorCategory::invalid_argument,
           "subband.trial_coarse_dms and trial_phases have {} and {} entries for {} DM trials",
           subband.trial_coarse_dms.size(), subband.trial_phases.size(), dms.size());
    if (subband.subbands < 1 || subband.coarse_dm_step != 0)
      fail(ErrorCategory::invalid_argument,
           "an explicit sub-band grid needs subband.subbands > 0 and coarse_dm_step 0");
    for (std::size_t i = 0; i < dms.size(); ++i) {
      const float dm = subband.trial_coarse_dms[i];
      if (!(dm >= 0) || !std::isfinite(dm))
        fail(ErrorCategory::invalid_argument, "subband.trial_coarse_dms[{}] = {} must be >= 0", i,
             dm);
      require_range("subband.trial_phases", subband.trial_phases[i], 1, 4);
    }
  }
  if (!(pulse_width_us > 0) || !std::isfinite(pulse_width_us))
    fail(ErrorCategory::invalid_argument, "pulse_width_us = {} must be > 0", pulse_width_us);
  require_range("fdmt.block", fdmt.block, std::int64_t{0}, std::int64_t{1} << 30);
  if (channel_major) {
    if (nbits != 32)
      fail(ErrorCategory::invalid_argument,
           "channel_major input must be float32 (nbits 32), not {}", nbits);
    if (std::count(killmask.begin(), killmask.end(), 0) > 0)
      fail(ErrorCategory::invalid_argument,
           "channel_major input takes no killmask: zero the zapped channels' rows instead");
    if (algorithm != Algorithm::automatic && algorithm != Algorithm::tiled &&
        algorithm != Algorithm::subband && algorithm != Algorithm::fdmt)
      fail(ErrorCategory::invalid_argument,
           "channel_major input runs the tiled kernel, subband or fdmt, not {}",
           to_string(algorithm));
  }
}

std::vector<std::int32_t> delay_table(const DedispersionConfig& c) {
  const double f_hi = std::max(c.fch1_mhz, c.fch1_mhz + (c.nchans - 1) * c.foff_mhz);
  std::vector<std::int32_t> d(c.dms.size() * static_cast<std::size_t>(c.nchans));
  for (std::size_t i = 0; i < c.dms.size(); ++i)
    for (int ch = 0; ch < c.nchans; ++ch) {
      const double f = c.fch1_mhz + ch * c.foff_mhz;
      const double dt = dispersion_delay_s(c.dms[i], f, f_hi) / c.tsamp_s;
      if (dt > 2e9)
        fail(ErrorCategory::invalid_argument, "DM {} gives a delay of {} samples", c.dms[i], dt);
      d[i * c.nchans + ch] = static_cast<std::int32_t>(std::lround(dt));
    }
  return d;
}

DedispersionPlan::DedispersionPlan(DedispersionConfig config, Backend backend)
    : config_(std::move(config)), backend_(resolve_backend(backend)) {
  config_.validate();
  delays_ = delay_table(config_);
  max_delay_ = delays_.empty() ? 0 : *std::max_element(delays_.begin(), delays_.end());
  if (config_.nsamples_in <= max_delay_)
    fail(ErrorCategory::invalid_argument,
         "nsamples_in = {} must exceed the largest delay, {} samples (DM {})", config_.nsamples_in,
         max_delay_, config_.dms.back());
  tables_ = detail::cached_method_tables(config_, backend_, delays_, nsamples_out());
  const detail::PlanData data{config_, delays_, max_delay_, nsamples_out(), tables_.get()};
  if (backend_ == Backend::cuda) {
#ifdef WARPBEAM_HAVE_CUDA
    exec_ = detail::make_cuda_executor(data);
#endif
  } else {
    exec_ = detail::make_cpu_executor(data);
  }
}

bool DedispersionPlan::accepts_shorter_input(const DedispersionConfig& config, Backend) {
  // Sub-band: the tables do not depend on the length, the executors take the length of each
  // execute() (cpu_subband.cpp, cuda_subband.cpp) and every output sample is the same sum in
  // the same order wherever it falls in the gulp.
  return config.algorithm == Algorithm::subband;
}

namespace {
// The input rows of an execute() given `rows` (the view's): the planned nsamples_in, or fewer
// where the plan accepts shorter input (more than max_delay). Anything else is left to
// require_view() to refuse with the planned shape.
std::int64_t input_rows(const DedispersionPlan& plan, std::int64_t rows) {
  if (plan.accepts_shorter_input() && rows > plan.max_delay() && rows < plan.config().nsamples_in)
    return rows;
  return plan.config().nsamples_in;
}
}  // namespace

DedispersionPlan::~DedispersionPlan() = default;
DedispersionPlan::DedispersionPlan(DedispersionPlan&&) noexcept = default;
DedispersionPlan& DedispersionPlan::operator=(DedispersionPlan&&) noexcept = default;

std::int64_t DedispersionPlan::row_bytes() const {
  return static_cast<std::int64_t>(packed_bytes(config_.nbits, config_.nchans));
}

void DedispersionPlan::execute(View<const std::uint8_t, 2> in, View<float, 2> out,
                               const Stream* stream) const {
  const Space space = backend_ == Backend::cuda ? Space::device : Space::host;
  const std::int64_t rows = input_rows(*this, in.shape[0]);
  require_view(in, {rows, row_bytes()}, space, "dedispersion input");
  require_view(out, {ndms(), rows - max_delay_}, space, "dedispersion output");
  if (config_.channel_major)
    fail(ErrorCategory::invalid_argument,
         "this plan takes channel-major float32 input: call execute_channel_major()");
  const detail::PlanData data{config_, delays_, max_delay_, rows - max_delay_, tables_.get()};
  exec_->execute(data, in.data, out.data, stream);
}

void DedispersionPlan::execute_channel_major(View<const float, 2> in, View<float, 2> out,
                                             const Stream* stream) const {
  if (!config_.channel_major)
    fail(ErrorCategory::invalid_argument,
         "execute_channel_major() needs a plan made with config.channel_major");
  if (backend_ != Backend::cuda)
    fail(ErrorCategory::unsupported, "channel-major input is a CUDA path");
  if (in.space != Space::device || in.data == nullptr)
    fail(ErrorCategory::invalid_argument, "channel-major input: device memory expected");
  const std::int64_t rows = input_rows(*this, in.shape[1]);
  if (in.shape[0] != config_.nchans || in.shape[1] != rows || in.strides[1] != 1 ||
      in.strides[0] < rows)
    fail(ErrorCategory::invalid_argument,
         "channel-major input has shape [{}][{}] and strides {{{}, {}}}; expected [{}][{}] with "
         "strides {{>= {}, 1}}",
         in.shape[0], in.shape[1], in.strides[0], in.strides[1], config_.nchans, rows, rows);
  require_view(out, {ndms(), rows - max_delay_}, Space::device, "dedispersion output");
  const detail::PlanData data{config_, delays_, max_delay_, rows - max_delay_, tables_.get()};
  exec_->execute_channel_major(data, in.data, in.strides[0], out.data, stream);
}

namespace {
// Quantised output: the CUDA executor writes it directly; otherwise (CPU) quantise a float32
// result computed into a temporary (this path allocates; it exists for comparisons).
template <class T>
void execute_quantised(const DedispersionPlan& plan, detail::Executor& exec,
                       const detail::PlanData& data, View<const std::uint8_t, 2> in, View<T, 2> out,
                       const OutputScaling& scaling, const Stream* stream) {
  if (plan.config().channel_major)
    fail(ErrorCategory::invalid_argument,
         "this plan takes channel-major float32 input: call execute_channel_major()");
  const Space space = plan.backend() == Backend::cuda ? Space::device : Space::host;
  constexpr int out_nbits = 8 * sizeof(T);
  const std::int64_t rows = input_rows(plan, in.shape[0]);
  require_view(in, {rows, plan.row_bytes()}, space, "dedispersion input");
  require_view(out, {plan.ndms(), rows - plan.max_delay()}, space, "dedispersion output");
  if (!std::isfinite(scaling.scale) || !std::isfinite(scaling.offset))
    fail(ErrorCategory::invalid_argument, "output scaling {} x + {} must be finite", scaling.scale,
         scaling.offset);
  const detail::PlanData run{data.config, data.delays, data.max_delay, rows - plan.max_delay(),
                             data.tables};
  if (exec.execute_scaled(run, in.data, out.data, out_nbits, scaling, stream)) return;
  if (space != Space::host)
    fail(ErrorCategory::unsupported, "this backend has no {}-bit output", out_nbits);
  std::vector<float> tmp(static_cast<std::size_t>(out.size()));
  exec.execute(run, in.data, tmp.data(), stream);
  for (std::size_t i = 0; i < tmp.size(); ++i)
    out.data[i] = static_cast<T>(quantise_output(tmp[i], scaling, out_nbits));
}
}  // namespace

void DedispersionPlan::execute(View<const std::uint8_t, 2> in, View<std::uint8_t, 2> out,
                               const OutputScaling& scaling, const Stream* stream) const {
  const detail::PlanData data{config_, delays_, max_delay_, nsamples_out(), tables_.get()};
  execute_quantised(*this, *exec_, data, in, out, scaling, stream);
}

void DedispersionPlan::execute(View<const std::uint8_t, 2> in, View<std::uint16_t, 2> out,
                               const OutputScaling& scaling, const Stream* stream) const {
  const detail::PlanData data{config_, delays_, max_delay_, nsamples_out(), tables_.get()};
  execute_quantised(*this, *exec_, data, in, out, scaling, stream);
}

Algorithm DedispersionPlan::algorithm() const {
  return exec_->algorithm({config_, delays_, max_delay_, nsamples_out(), tables_.get()});
}

CudaTuning DedispersionPlan::tuning() const {
  return exec_->tuning({config_, delays_, max_delay_, nsamples_out(), tables_.get()});
}

std::string DedispersionPlan::kernel_description() const {
  return exec_->description({config_, delays_, max_delay_, nsamples_out(), tables_.get()});
}

const TrialReport& DedispersionPlan::trials() const {
  return tables_->report;
}

Workspace DedispersionPlan::workspace() const {
  Workspace w = exec_->workspace();
  w.host_bytes += detail::method_table_bytes(*tables_);
  return w;
}

PlanPreview DedispersionPlan::preview(const DedispersionConfig& config, Backend backend) {
  config.validate();
  const Backend b = resolve_backend(backend);
  const auto delays = delay_table(config);
  const std::int32_t max_delay =
      delays.empty() ? 0 : *std::max_element(delays.begin(), delays.end());
  if (config.nsamples_in <= max_delay)
    fail(ErrorCategory::invalid_argument,
         "nsamples_in = {} must exceed the largest delay, {} samples (DM {})", config.nsamples_in,
         max_delay, config.dms.back());
  const std::int64_t nout = config.nsamples_in - max_delay;
  const auto t = detail::cached_method_tables(config, b, delays, nout);
  PlanPreview p;
  p.operations = detail::count_operations(config, *t, nout);
  p.workspace = detail::estimate_method_workspace(config, b, *t, nout);
  p.trials = t->report;
  return p;
}

Workspace DedispersionPlan::estimate_workspace(const DedispersionConfig& config, Backend backend) {
  if (config.algorithm == Algorithm::subband || config.algorithm == Algorithm::fdmt)
    return preview(config, backend).workspace;  // the tables decide the buffers
  return resolve_backend(backend) == Backend::cuda ? detail::estimate_cuda_workspace(config)
                                                   : detail::estimate_cpu_workspace(config);
}

OperationCount DedispersionPlan::operations() const {
  return detail::count_operations(config_, *tables_, nsamples_out());
}

}  // namespace warpbeam::dedisp
