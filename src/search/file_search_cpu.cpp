// The CPU runner of the file search: each gulp in turn is read, unpacked, cleaned (RFI),
// dedispersed and searched chunk of DM trials by chunk; its peaks go to the sink.
#include <algorithm>
#include <chrono>
#include <optional>

#include "search/file_search.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::search::detail {

namespace {

// Adds the seconds since `t` to `acc` and restarts `t`.
void lap(std::chrono::steady_clock::time_point& t, double& acc) {
  const auto now = std::chrono::steady_clock::now();
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

// Dedisperses a chunk of DM trials of the cleaned gulp, re-planning when the shape changes.
class ChunkDedisperser {
 public:
  // in: cleaned float32 [rows][nchans]; out: [ndms][L].
  void run(const dedisp::DedispersionConfig& c, const float* in, float* out) {
    if (!plan_ || plan_->config().nsamples_in != c.nsamples_in || plan_->config().dms != c.dms)
      plan_.emplace(c, Backend::cpu);
    const auto& p = *plan_;
    p.execute(View<const std::uint8_t, 2>(reinterpret_cast<const std::uint8_t*>(in),
                                          {c.nsamples_in, p.row_bytes()}),
              View<float, 2>(out, {p.ndms(), p.nsamples_out()}));
  }

 private:
  std::optional<dedisp::DedispersionPlan> plan_;
};

}  // namespace

void run_gulps_cpu(const FileSearchLayout& L, std::int64_t dm_begin, std::int64_t dm_end,
                   const PeakSink& sink, StageTimes& times, GulpSpan span) {
  const auto [g_begin, g_end] = span.resolve(L.gulps);
  const io::FilterbankHeader& h = L.header;
  io::FilterbankReader reader(L.path);
  // The largest gulp's buffers up front: growing a vector would hold two copies for a moment.
  std::vector<std::uint8_t> raw;
  std::vector<float> gulp_data, plane;
  const std::int64_t row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());
  const std::int64_t max_rows = L.plane_len + L.max_delay;
  raw.reserve(static_cast<std::size_t>(max_rows * row_bytes));
  gulp_data.reserve(static_cast<std::size_t>(max_rows * h.nchans));
  plane.reserve(static_cast<std::size_t>(L.chunk * L.plane_len));
  ChunkDedisperser dedisperser;
  std::optional<SearchPlan> search_plan;

  for (std::int64_t g = g_begin; g < g_end; ++g) {
    const GulpRange r = L.gulp_range(g);
    const std::int64_t len = r.len(), rows = len + L.max_delay;

    // Read and clean the gulp's input rows [p0, p1 + max_delay).
    auto clock = std::chrono::steady_clock::now();
    gulp_data.resize(static_cast<std::size_t>(rows * h.nchans));
    raw.resize(static_cast<std::size_t>(rows * row_bytes));
    reader.seek(r.p0);
    if (reader.read_raw(rows, raw.data()) != rows)
      fail(ErrorCategory::io, "'{}': short read at sample {}", L.path, r.p0);
    unpack_rows(h, raw.data(), rows, gulp_data.data());
    lap(clock, times.read);
    const RfiReport rep = clean_filterbank(gulp_data.data(), rows, h.nchans, L.rfi, L.threads);
    lap(clock, times.rfi);

    // Dedisperse and search the DM trials chunk by chunk.
    GulpPeaks out;
    out.gulp = g;
    out.channels_kept = rep.kept();
    out.zap_reason = rep.reason;
    for (std::int64_t d0 = dm_begin; d0 < dm_end; d0 += L.chunk) {
      const std::int64_t d1 = std::min(dm_end, d0 + L.chunk);
      plane.resize(static_cast<std::size_t>((d1 - d0) * len));
      dedisperser.run(L.chunk_dedisp(d0, d1, len), gulp_data.data(), plane.data());
      lap(clock, times.dedisp);
      if (!search_plan || search_plan->config().ndms != d1 - d0 ||
          search_plan->config().nsamples != len || L.chunk < dm_end - dm_begin)
        search_plan.emplace(L.chunk_search(d0, d1, len), Backend::cpu);
      search_plan->execute(View<const float, 2>(plane.data(), {d1 - d0, len}), r.own_begin - r.p0,
                           r.own_end - r.p0, static_cast<std::int32_t>(d0), r.p0, out.peaks);
      lap(clock, times.search);
    }
    sink(std::move(out));
  }
}

}  // namespace warpbeam::search::detail
