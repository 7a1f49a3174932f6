// open_filterbank(): the format of a filterbank file from its first bytes, and the SIGPROC
// reader behind the FilterbankSource interface.
#include "warpbeam/io/filterbank_source.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "warpbeam/core.hpp"

namespace warpbeam::io {

namespace {

class SigprocSource final : public FilterbankSource {
 public:
  explicit SigprocSource(const std::string& path) : reader_(path) {}
  const FilterbankHeader& header() const override { return reader_.header(); }
  const std::string& path() const override { return reader_.path(); }
  std::string format() const override { return "SIGPROC filterbank"; }
  std::int64_t position() const override { return reader_.position(); }
  void seek(std::int64_t sample) override { reader_.seek(sample); }
  std::int64_t read_raw(std::int64_t nsamp, std::uint8_t* out) override {
    return reader_.read_raw(nsamp, out);
  }
  std::int64_t read(std::int64_t nsamp, float* out) override { return reader_.read(nsamp, out); }
  void set_read_threads(int threads) override { reader_.set_read_threads(threads); }

 private:
  FilterbankReader reader_;
};

}  // namespace

std::unique_ptr<FilterbankSource> open_filterbank(const std::string& path) {
  // Every supported format is recognised by its first bytes; SIGPROC is the fallback, whose
  // reader names what is wrong with a file that is not one.
  if (std::FILE* fp = std::fopen(path.c_str(), "rb")) {
    char first[9] = {};
    const std::size_t got = std::fread(first, 1, sizeof first, fp);
    std::fclose(fp);
    // A FITS file starts with the card "SIMPLE  =" (FITS standard 4.0, section 4.4.1.1).
    if (got == sizeof first && std::memcmp(first, "SIMPLE  =", sizeof first) == 0)
      return open_psrfits(path);
  }
  return std::make_unique<SigprocSource>(path);
}

}  // namespace warpbeam::io
