// Dedispersion on the GPU against the CPU path (random inputs, output poisoned first).
#include <cmath>

#include "test_util.hpp"
#include "warpbeam/dedisp.hpp"

using namespace warpbeam;
using namespace warpbeam::dedisp;

namespace {
std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b)
    x = static_cast<std::uint8_t>(rng());
  return b;
}
}  // namespace

TEST(DedispGpu, MatchesCpuOnRandomInput) {
  WB_REQUIRE_GPU();
  for (int nbits : {1, 2, 4, 8, 32}) {
    DedispersionConfig c;
    c.nchans = 77;
    c.fch1_mhz = 1500;
    c.foff_mhz = -1.3;
    c.tsamp_s = 256e-6;
    c.nbits = nbits;
    c.dms = dm_list_linear(0, 300, 7.3);
    c.nsamples_in = 3001;
    DedispersionPlan cpu(c, Backend::cpu), gpu(c, Backend::cuda);
    const std::int64_t nin = c.nsamples_in * cpu.row_bytes();
    auto in = random_bytes(static_cast<std::size_t>(nin), 5 + nbits);
    if (nbits == 32) {
      auto f = wbtest::random_floats(static_cast<std::size_t>(nin / 4), 9, 0, 10);
      std::memcpy(in.data(), f.data(), in.size());
    }
    std::vector<float> ref(cpu.ndms() * cpu.nsamples_out()), got(ref.size());
    cpu.execute(View<const std::uint8_t, 2>(in.data(), {c.nsamples_in, cpu.row_bytes()}),
                View<float, 2>(ref.data(), {cpu.ndms(), cpu.nsamples_out()}));
    DeviceArray<std::uint8_t> d_in(in.size());
    DeviceArray<float> d_out(got.size());
    copy_bytes(d_in.data(), in.data(), in.size());
    device_memset(d_out.data(), 0xFF, d_out.bytes());
    gpu.execute(
        View<const std::uint8_t, 2>(d_in.data(), {c.nsamples_in, gpu.row_bytes()}, Space::device),
        View<float, 2>(d_out.data(), {gpu.ndms(), gpu.nsamples_out()}, Space::device));
    copy_bytes(got.data(), d_out.data(), d_out.bytes());
    for (std::int64_t d = 0; d < cpu.ndms(); ++d) {
      float maxref = 0, maxerr = 0;
      for (std::int64_t t = 0; t < cpu.nsamples_out(); ++t) {
        const auto i = d * cpu.nsamples_out() + t;
        maxref = std::max(maxref, std::abs(ref[i]));
        maxerr = std::max(maxerr, std::isnan(got[i]) ? INFINITY : std::abs(got[i] - ref[i]));
      }
      ASSERT_LE(maxerr, 1e-5f * maxref) << "nbits " << nbits << " dm trial " << d;
    }
  }
}
