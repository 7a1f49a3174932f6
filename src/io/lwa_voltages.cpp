// LWA TBF and TBX frames as a VoltageReader (include/warpbeam/io/voltages.hpp): the beamformer
// reads them like any other voltage file. TbfReader (lwa_tbf.cpp) and TbxReader (lwa_tbx.cpp)
// do the parsing and checking.
#include <algorithm>
#include <memory>

#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/voltages.hpp"

namespace warpbeam::io {
namespace {

constexpr double kUnixEpochMjd = 40587.0;  // MJD of 1970-01-01 00:00 UTC

class LwaVoltageReader final : public VoltageReader {
 public:
  LwaVoltageReader(const std::string& path, std::int64_t block_samples)
      : file_(open_lwa_voltage_file(path)) {
    const TbfInfo& t = file_->info();
    if (!t.contiguous())
      fail(ErrorCategory::unsupported,
           "{}: the {} channels are not contiguous (a filterbank needs a uniform frequency axis)",
           path, t.format);
    if (block_samples < 0)
      fail(ErrorCategory::invalid_argument, "block_samples = {} must be >= 0", block_samples);
    info_.format = t.format == "TBX" ? "lwa-tbx" : "lwa-tbf";
    info_.nchans = t.nchan();
    info_.nantennas = t.nstand;
    info_.npol = 2;
    info_.sample_type = SampleType::ci4;
    info_.fch1_hz = t.frequency_hz(0);
    info_.foff_hz = t.channel_width_hz;
    info_.tsamp_s = t.spectrum_s();
    info_.mjd_start = t.unix_time(0) / 86400.0 + kUnixEpochMjd;
    info_.block_samples = block_samples > 0 ? std::min(block_samples, t.ntime)
                                            : std::min<std::int64_t>(t.ntime, 1024);
    info_.telescope = "LWA";
    info_.source_name = t.format == "TBX" ? "tbx" : "tbf";
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
    file_->read(t0, info_.block_samples, 0, info_.nchans, out.data());
    if (mjd) *mjd = file_->info().unix_time(t0) / 86400.0 + kUnixEpochMjd;
    ++next_;
    return true;
  }

 private:
  std::unique_ptr<LwaVoltageFile> file_;
  VoltageStreamInfo info_;
  std::int64_t nblocks_ = 0, next_ = 0;
};

}  // namespace

std::unique_ptr<VoltageReader> open_lwa_voltages(const std::string& path,
                                                 std::int64_t block_samples) {
  return std::make_unique<LwaVoltageReader>(path, block_samples);
}

}  // namespace warpbeam::io
