// The multi-beam pipeline's CPU store: the beamformer's CPU plan, a host buffer of beam rows, and
// per gulp and beam the search's CPU GulpSearcher (src/search/gulp_searcher_cpu.cpp), which
// reads the beam's float32 rows in place.
#include <algorithm>
#include <cstring>

#include "pipeline/store.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::pipeline::detail {

namespace {

class CpuStore final : public BeamStore {
 public:
  CpuStore(const StoreSetup& s, const std::vector<std::complex<float>>& weights)
      : search_(*s.plan),
        plan_(s.beamform, Backend::cpu),
        nchans_(search_.header().nchans),
        nsub_(s.beamform.nchans),
        nbeams_(s.stored_beams),
        cap_(s.capacity_rows),
        nb_(s.beamform.nsamples_out()) {
    set_weights(weights);
    out_.resize(static_cast<std::size_t>(std::int64_t{s.beamform.nbeams} * nb_ * nsub_));
    buffer_.resize(static_cast<std::size_t>(nbeams_ * cap_ * nchans_));
    searcher_ = search::GulpSearcher::make(search_, 0, search_.ndms(), -1);
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

  void zero_block() override { std::fill(out_.begin(), out_.end(), 0.f); }

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
    const search::GulpSink to_sink = [&](search::GulpPeaks&& gp) {
      sink(static_cast<int>(gp.tag), std::move(gp));
    };
    for (int b = 0; b < nbeams_; ++b)  // the beam's rows are read in place
      searcher_->submit(
          g, b, rows,
          [&](search::GulpInput&) { return reinterpret_cast<const std::uint8_t*>(row(b, 0)); },
          to_sink);
    searcher_->flush(to_sink);
  }

  void shift(std::int64_t drop, std::int64_t keep) override {
    if (drop == 0 || keep <= 0) return;
    for (std::int64_t b = 0; b < nbeams_; ++b)
      std::memmove(row(b, 0), row(b, drop), static_cast<std::size_t>(keep * nchans_) * 4);
  }

  StoreCounters counters() const override { return {}; }
  search::StageTimes search_times() const override {
    search::StageTimes t = past_times_;
    return t += searcher_->times();
  }
  void renew_searcher() override {
    past_times_ += searcher_->times();
    searcher_.reset();  // its buffers go before the new one's come
    searcher_ = search::GulpSearcher::make(search_, 0, search_.ndms(), -1);
  }
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

  const search::FileSearchPlan& search_;
  beamform::BeamformPlan plan_;
  int nchans_, nsub_, nbeams_;  // every channel, this store's sub-band, stored beams
  std::int64_t cap_, nb_;
  std::vector<float> out_, buffer_;
  std::unique_ptr<search::GulpSearcher> searcher_;
  search::StageTimes past_times_;  // of the searchers renew_searcher() replaced
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
