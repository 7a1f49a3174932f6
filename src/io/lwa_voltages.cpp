// LWA TBF frames as a VoltageReader (include/warpbeam/io/voltages.hpp): the beamformer reads
// them like any other voltage file. TbfReader (lwa_tbf.cpp) does the parsing and checking.
#include <algorithm>
#include <memory>

#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/voltages.hpp"

namespace warpbeam::io {
namespace {

constexpr double kUnixEpochMjd = 40587.0;  // MJD of 1970-01-01 00:00 UTC

class TbfVoltageReader final : public VoltageReader {
 public:
  TbfVoltageReader(const std::string& path, std::int64_t block_samples) : tbf_(path) {
    const TbfInfo& t = tbf_.info();
    if (!t.contiguous())
      fail(ErrorCategory::unsupported,
           "{}: the TBF channels are not contiguous (a filterbank needs a uniform frequency axis)",
           path);
    if (block_samples < 0)
      fail(ErrorCategory::invalid_argument, "block_samples = {} must be >= 0", block_samples);
    info_.format = "lwa-tbf";
    info_.nchans = t.nchan();
    info_.nantennas = t.nstand;
    info_.npol = 2;
    info_.sample_type = SampleType::ci4;
    info_.fch1_hz = t.frequency_hz(0);
    info_.foff_hz = kLwaChannelWidthHz;
    info_.tsamp_s = 1.0 / kLwaChannelWidthHz;
    info_.mjd_start = t.unix_time(0) / 86400.0 + kUnixEpochMjd;
    info_.block_samples = block_samples > 0 ? std::min(block_samples, t.ntime)
                                            : std::min<std::int64_t>(t.ntime, 1024);
    info_.telescope = "LWA";
    info_.source_name = "tbf";
    nblocks_ = t.ntime / info_.block_samples;
    if (const std::int64_t left = t.ntime - nblocks_ * info_.block_samples; left > 0)
      warnf("{}: the last {} of {} spectra do not fill a block of {}: dropped", path, left, t.ntime,
            info_.block_samples);
  }

  const VoltageStreamInfo& info() const override { return info_; }

  bool read_block(std::vector<std::uint8_t>& out, double* mjd) override {
    if (next_ >= nblocks_) return false;
    const std::int64_t t0 = next_ * info_.block_samples;
    out.resize(static_cast<std::size_t>(info_.block_bytes()));
    tbf_.read(t0, info_.block_samples, 0, info_.nchans, out.data());
    if (mjd) *mjd = tbf_.info().unix_time(t0) / 86400.0 + kUnixEpochMjd;
    ++next_;
    return true;
  }

 private:
  TbfReader tbf_;
  VoltageStreamInfo info_;
  std::int64_t nblocks_ = 0, next_ = 0;
};

}  // namespace

std::unique_ptr<VoltageReader> open_tbf_voltages(const std::string& path,
                                                 std::int64_t block_samples) {
  return std::make_unique<TbfVoltageReader>(path, block_samples);
}

}  // namespace warpbeam::io
