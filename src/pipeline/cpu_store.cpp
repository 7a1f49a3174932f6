// The multi-beam pipeline's CPU store: the beamformer's CPU plan, a host buffer of beam rows, and
// per gulp and beam the file search's CPU stages (clean_filterbank, the dedispersion plan on
// float32 rows, SearchPlan), as search/cpu_store.cpp runs them on a file's gulp.
#include <algorithm>
#include <cstring>
#include <map>

#include "pipeline/store.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::pipeline::detail {

namespace {

class CpuStore final : public BeamStore {
 public:
  CpuStore(const StoreSetup& s, const std::vector<std::complex<float>>& weights)
      : L_(*s.layout),
        plan_(s.beamform, Backend::cpu),
        nchans_(L_.header.nchans),
        nsub_(s.beamform.nchans),
        nbeams_(s.stored_beams),
        cap_(s.capacity_rows),
        nb_(s.beamform.nsamples_out()) {
    set_weights(weights);
    out_.resize(static_cast<std::size_t>(std::int64_t{s.beamform.nbeams} * nb_ * nsub_));
    buffer_.resize(static_cast<std::size_t>(nbeams_ * cap_ * nchans_));
    gulp_.reserve(static_cast<std::size_t>((L_.plane_len + L_.max_delay) * nchans_));
    plane_.reserve(static_cast<std::size_t>(L_.chunk * L_.plane_len));
  }

  beamform::Algorithm algorithm() const override { return plan_.algorithm(); }
  std::int64_t formed_rows() const override { return nb_; }
  int subband_channels() const override { return nsub_; }

  void form_block(const std::uint8_t* block, std::size_t bytes,
                  const std::vector<std::complex<float>>* weights) override {
    if (weights) set_weights(*weights);
    const auto& c = plan_.config();
    (void)bytes;
    plan_.execute(View<const std::uint8_t, 3>(block, c.input_shape()),
                  View<float, 4>(out_.data(), c.output_shape()));
  }

  // Another CPU store (an MPI rank's own, or the one store of a run) reads the rows in place.
  void send_rows(BeamStore& dest, int f0, int f1, int s0, int c0, std::int64_t at) override {
    dest.import_rows(out_.data() + static_cast<std::size_t>(f0) * nb_ * nsub_, s0, s0 + f1 - f0, c0,
                     nsub_, at);
  }

  void export_rows(int f0, int f1, float* out) override {
    const std::size_t n = static_cast<std::size_t>(nb_ * nsub_);
    std::memcpy(out, out_.data() + static_cast<std::size_t>(f0) * n,
                static_cast<std::size_t>(f1 - f0) * n * sizeof(float));
  }

  void import_rows(const float* in, int s0, int s1, int c0, int nch, std::int64_t at) override {
    if (at + nb_ > cap_)
      fail(ErrorCategory::invalid_argument, "beam buffer overflow: rows {} + {} > {}", at, nb_,
           cap_);
    for (int b = s0; b < s1; ++b)
      for (std::int64_t t = 0; t < nb_; ++t, in += nch)
        std::memcpy(row(b, at + t) + c0, in, static_cast<std::size_t>(nch) * sizeof(float));
  }

  void search_gulp(std::int64_t g, std::int64_t rows, const BeamPeakSink& sink) override {
    const search::detail::GulpRange r = L_.gulp_range(g);
    const std::int64_t len = r.len();
    for (int b = 0; b < nbeams_; ++b) {
      gulp_.assign(row(b, 0), row(b, 0) + rows * nchans_);
      const search::RfiReport rep =
          search::clean_filterbank(gulp_.data(), rows, nchans_, L_.rfi, L_.threads);
      search::detail::GulpPeaks out;
      out.gulp = g;
      out.channels_kept = rep.kept();
      for (std::int64_t d0 = 0, k = 0; d0 < L_.ndms(); d0 += L_.chunk, ++k) {
        const std::int64_t d1 = std::min(L_.ndms(), d0 + L_.chunk);
        plane_.resize(static_cast<std::size_t>((d1 - d0) * len));
        const auto& dp = dedisp_plan(k, d0, d1, len);
        dp.execute(View<const std::uint8_t, 2>(reinterpret_cast<const std::uint8_t*>(gulp_.data()),
                                               {dp.config().nsamples_in, dp.row_bytes()}),
                   View<float, 2>(plane_.data(), {d1 - d0, len}));
        search_plan(k, d0, d1, len)
            .execute(View<const float, 2>(plane_.data(), {d1 - d0, len}), r.own_begin - r.p0,
                     r.own_end - r.p0, static_cast<std::int32_t>(d0), r.p0, out.peaks);
      }
      sink(b, std::move(out));
    }
  }

  void shift(std::int64_t drop, std::int64_t keep) override {
    if (drop == 0 || keep <= 0) return;
    for (std::int64_t b = 0; b < nbeams_; ++b)
      std::memmove(row(b, 0), row(b, drop), static_cast<std::size_t>(keep * nchans_) * 4);
  }

  StoreCounters counters() const override { return {}; }
  std::int64_t buffer_bytes() const override {
    return static_cast<std::int64_t>(buffer_.size()) * 4;
  }

 private:
  float* row(std::int64_t beam, std::int64_t t) {
    return buffer_.data() + (beam * cap_ + t) * nchans_;
  }
  void set_weights(const std::vector<std::complex<float>>& w) {
    const auto& c = plan_.config();
    plan_.set_weights(
        View<const std::complex<float>, 4>(w.data(), {c.nchans, c.npol, c.nbeams, c.nantennas}));
  }
  // Plans per (DM chunk, plane length), made on first use: a search has at most a few lengths.
  const dedisp::DedispersionPlan& dedisp_plan(std::int64_t k, std::int64_t d0, std::int64_t d1,
                                              std::int64_t len) {
    auto it = dedisp_.find({k, len});
    if (it == dedisp_.end())
      it = dedisp_
               .emplace(std::make_pair(k, len),
                        dedisp::DedispersionPlan(L_.chunk_dedisp(d0, d1, len), Backend::cpu))
               .first;
    return it->second;
  }
  const search::SearchPlan& search_plan(std::int64_t k, std::int64_t d0, std::int64_t d1,
                                        std::int64_t len) {
    auto it = search_.find({k, len});
    if (it == search_.end())
      it = search_
               .emplace(std::make_pair(k, len),
                        search::SearchPlan(L_.chunk_search(d0, d1, len), Backend::cpu))
               .first;
    return it->second;
  }

  const search::detail::FileSearchLayout& L_;
  beamform::BeamformPlan plan_;
  int nchans_, nsub_, nbeams_;  // every channel, this store's sub-band, stored beams
  std::int64_t cap_, nb_;
  std::vector<float> out_, buffer_, gulp_, plane_;
  std::map<std::pair<std::int64_t, std::int64_t>, dedisp::DedispersionPlan> dedisp_;
  std::map<std::pair<std::int64_t, std::int64_t>, search::SearchPlan> search_;
};

}  // namespace

void BeamStore::send_rows(BeamStore& dest, int f0, int f1, int s0, int c0, std::int64_t at) {
  std::vector<float> rows(
      static_cast<std::size_t>(std::int64_t{f1 - f0} * formed_rows() * subband_channels()));
  export_rows(f0, f1, rows.data());
  dest.import_rows(rows.data(), s0, s0 + f1 - f0, c0, subband_channels(), at);
}

std::unique_ptr<BeamStore> make_cpu_store(const StoreSetup& setup,
                                          const std::vector<std::complex<float>>& weights) {
  return std::make_unique<CpuStore>(setup, weights);
}

#ifndef WARPBEAM_HAVE_CUDA
std::unique_ptr<BeamStore> make_cuda_store(const StoreSetup&,
                                           const std::vector<std::complex<float>>&) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
#endif

}  // namespace warpbeam::pipeline::detail
