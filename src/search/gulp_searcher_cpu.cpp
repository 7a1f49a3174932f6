// The CPU GulpSearcher: each gulp in turn is unpacked, cleaned (RFI), dedispersed and searched
// chunk of DM trials by chunk; its peaks go to the sink before submit() returns.
#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>

#include "search/gulp_searcher.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::search {

namespace {

using Clock = std::chrono::steady_clock;

// Adds the seconds since `t` to `acc` and restarts `t`.
void lap(Clock::time_point& t, double& acc) {
  const auto now = Clock::now();
  acc += std::chrono::duration<double>(now - t).count();
  t = now;
}

// Unpacks `rows` time samples to float32 [rows][nchans]; each row starts on a byte boundary.
void unpack_rows(const io::FilterbankHeader& h, const std::uint8_t* raw, std::int64_t rows,
                 float* out) {
  const auto nchans = static_cast<std::size_t>(h.nchans);
  const auto row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());
  if ((nchans * h.nbits) % 8 == 0) {
    unpack_samples(raw, h.nbits, static_cast<std::size_t>(rows) * nchans, out, h.is_signed);
    return;
  }
  for (std::int64_t t = 0; t < rows; ++t)
    unpack_samples(raw + t * row_bytes, h.nbits, nchans, out + t * h.nchans, h.is_signed);
}

class CpuGulpSearcher final : public GulpSearcher {
 public:
  CpuGulpSearcher(const FileSearchPlan& plan, std::int64_t dm_begin, std::int64_t dm_end,
                  bool host_input)
      : plan_(plan), rfi_(plan.rfi()), dm_begin_(dm_begin), dm_end_(dm_end) {
    const auto t0 = Clock::now();
    const io::FilterbankHeader& h = plan.header();
    // The largest gulp's buffers up front: growing a vector would hold two copies for a moment.
    const std::int64_t max_rows = plan.plane_samples() + plan.max_delay();
    if (host_input)
      raw_.reserve(
          static_cast<std::size_t>(max_rows * static_cast<std::int64_t>(h.bytes_per_sample())));
    gulp_.reserve(static_cast<std::size_t>(max_rows * h.nchans));
    plane_.reserve(static_cast<std::size_t>(std::min(plan.dm_chunk(), dm_end - dm_begin) *
                                            plan.plane_samples()));
    // A plan that runs shorter gulps is made once per chunk, for the longest plane.
    one_length_ = dedisp::DedispersionPlan::accepts_shorter_input(
        plan.dedispersion_config(dm_begin, std::min(dm_end, dm_begin + plan.dm_chunk()),
                                 plan.plane_samples()),
        Backend::cpu);
    times_.setup = std::chrono::duration<double>(Clock::now() - t0).count();
  }

  void submit(std::int64_t g, std::int64_t tag, std::int64_t rows, const GulpLoader& load,
              const GulpSink& sink) override {
    const io::FilterbankHeader& h = plan_.header();
    const GulpRange r = plan_.gulp_range(g);
    const std::int64_t len = r.len();
    const auto row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());

    // Read and clean the gulp's input rows [p0, p1 + max_delay).
    auto clock = Clock::now();
    GulpInput in;
    in.rows = rows;
    in.row_bytes = row_bytes;
    in.host = [&] {
      raw_.resize(static_cast<std::size_t>(rows * row_bytes));
      return raw_.data();
    };
    const std::uint8_t* src = load(in);
    lap(clock, times_.read_wait);
    gulp_.resize(static_cast<std::size_t>(rows * h.nchans));
    unpack_rows(h, src, rows, gulp_.data());
    lap(clock, times_.unpack);
    const RfiReport rep = clean_filterbank(gulp_.data(), rows, h.nchans, rfi_, plan_.threads());
    lap(clock, times_.rfi);

    // Dedisperse and search the DM trials chunk by chunk.
    GulpPeaks out;
    out.gulp = g;
    out.tag = tag;
    out.channels_kept = rep.kept();
    out.zap_reason = rep.reason;
    for (std::int64_t d0 = dm_begin_; d0 < dm_end_; d0 += plan_.dm_chunk()) {
      const std::int64_t d1 = std::min(dm_end_, d0 + plan_.dm_chunk());
      plane_.resize(static_cast<std::size_t>((d1 - d0) * len));
      const auto& dp = dedispersion_plan(d0, d1, len);
      const auto& sp = search_plan(d0, d1, len);
      lap(clock, times_.gulp_plans);
      // The plane's rows (fewer than the plan's where it was made for a longer plane).
      dp.execute(View<const std::uint8_t, 2>(reinterpret_cast<const std::uint8_t*>(gulp_.data()),
                                             {len + dp.max_delay(), dp.row_bytes()}),
                 View<float, 2>(plane_.data(), {d1 - d0, len}));
      lap(clock, times_.dedisp);
      sp.execute(View<const float, 2>(plane_.data(), {d1 - d0, len}), r.own_begin - r.p0,
                 r.own_end - r.p0, static_cast<std::int32_t>(d0), r.p0, out.peaks);
      lap(clock, times_.search);
    }
    sink(std::move(out));
  }

  void flush(const GulpSink&) override {}  // every gulp is finished in submit()
  const StageTimes& times() const override { return times_; }

  Workspace workspace() const override {
    Workspace w{static_cast<std::int64_t>(raw_.capacity() +
                                          (gulp_.capacity() + plane_.capacity()) * sizeof(float)),
                0};
    w += clean_filterbank_workspace(plan_.plane_samples() + plan_.max_delay(), plan_.threads());
    if (dedisp_) w += dedisp_->workspace();
    if (search_) w += search_->workspace();
    return w;
  }

 private:
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t>;  // d0, d1, plane length

  // One plan of each kind at a time, made again when the chunk or the plane length changes
  // (a CPU dedispersion plan holds a gulp-sized scratch: one is all the budget counts); a
  // dedispersion plan that accepts shorter input is made for the longest plane and runs every
  // gulp of its chunk.
  const dedisp::DedispersionPlan& dedispersion_plan(std::int64_t d0, std::int64_t d1,
                                                    std::int64_t len) {
    const std::int64_t plan_len = one_length_ ? plan_.plane_samples() : len;
    if (!dedisp_ || dedisp_key_ != Key{d0, d1, plan_len}) {
      dedisp_.reset();
      dedisp_.emplace(plan_.dedispersion_config(d0, d1, plan_len), Backend::cpu);
      dedisp_key_ = {d0, d1, plan_len};
      ++times_.dedisp_plans;
    }
    return *dedisp_;
  }
  const SearchPlan& search_plan(std::int64_t d0, std::int64_t d1, std::int64_t len) {
    if (!search_ || search_key_ != Key{d0, d1, len}) {
      search_.reset();
      search_.emplace(plan_.search_config(d0, d1, len), Backend::cpu);
      search_key_ = {d0, d1, len};
    }
    return *search_;
  }

  const FileSearchPlan& plan_;
  RfiConfig rfi_;
  std::int64_t dm_begin_, dm_end_;
  std::vector<std::uint8_t> raw_;
  std::vector<float> gulp_, plane_;
  std::optional<dedisp::DedispersionPlan> dedisp_;
  std::optional<SearchPlan> search_;
  Key dedisp_key_{}, search_key_{};
  bool one_length_ = false;  // the dedispersion plans accept shorter input
  StageTimes times_;
};

}  // namespace

std::unique_ptr<GulpSearcher> make_cpu_gulp_searcher(const FileSearchPlan& plan,
                                                     std::int64_t dm_begin, std::int64_t dm_end,
                                                     bool host_input) {
  return std::make_unique<CpuGulpSearcher>(plan, dm_begin, dm_end, host_input);
}

}  // namespace warpbeam::search
