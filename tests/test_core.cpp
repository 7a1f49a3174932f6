// Core: errors, backends, views, unpacking (CPU against a naive bit loop; CUDA against CPU).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/host_array.hpp"
#include "warpbeam/unpack.hpp"

using namespace warpbeam;

TEST(Core, BackendParsing) {
  EXPECT_EQ(parse_backend("cpu"), Backend::cpu);
  EXPECT_EQ(parse_backend("cuda"), Backend::cuda);
  EXPECT_EQ(parse_backend("auto"), Backend::automatic);
  try {
    parse_backend("fpga");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("fpga"), std::string::npos);
  }
  // automatic always resolves to something that exists here.
  const Backend b = resolve_backend(Backend::automatic);
  EXPECT_EQ(b, cuda_available() ? Backend::cuda : Backend::cpu);
}

TEST(Core, RequireRangeNamesField) {
  try {
    require_range("nchans", 0, 1, 10);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nchans"), std::string::npos);
  }
  EXPECT_NO_THROW(require_range("nchans", 5, 1, 10));
}

TEST(Core, ViewChecks) {
  std::vector<float> a(12);
  View<float, 2> v(a.data(), {3, 4});
  EXPECT_EQ(v.size(), 12);
  EXPECT_TRUE(v.contiguous());
  EXPECT_EQ(v.strides[0], 4);
  EXPECT_NO_THROW(require_view(v, {3, 4}, Space::host, "in"));
  EXPECT_THROW(require_view(v, {4, 3}, Space::host, "in"), Error);
  EXPECT_THROW(require_view(v, {3, 4}, Space::device, "in"), Error);
  v.strides[0] = 8;
  EXPECT_FALSE(v.contiguous());
}

namespace {
// Independent reference: extract bits one at a time, lowest bits first.
std::vector<float> naive_unpack(const std::vector<std::uint8_t>& in, int nbits, std::size_t n,
                                bool is_signed) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (nbits == 32) {
      std::memcpy(&out[i], in.data() + 4 * i, 4);
      continue;
    }
    std::uint64_t v = 0;
    for (int b = 0; b < nbits; ++b) {
      const std::size_t bit = i * nbits + b;
      v |= static_cast<std::uint64_t>((in[bit / 8] >> (bit % 8)) & 1u) << b;
    }
    long long s = static_cast<long long>(v);
    if (is_signed && nbits > 1 && (v >> (nbits - 1)) & 1u) s -= (1LL << nbits);
    out[i] = static_cast<float>(s);
  }
  return out;
}

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b)
    x = static_cast<std::uint8_t>(rng());
  return b;
}
}  // namespace

namespace {
// The VmFlags of the mapping of this process that holds p (/proc/self/smaps), "" if none.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8);
    }
  }
  return "";
}
}  // namespace

// HostArray: zeroed, writable, 64-byte aligned, 2 MiB aligned from NumPy's 4 MiB threshold on;
// a large one's mapping carries the kernel's "hg" flag (MADV_HUGEPAGE advised) wherever the
// kernel has transparent huge pages (/sys/kernel/mm/transparent_hugepage), a small one's not.
TEST(Core, HostArrayIsZeroedAlignedAndLargeOnesAdvisedHugePages) {
  const std::size_t small_n = 1000, large_n = (std::size_t{24} << 20) / sizeof(float) + 3;
  HostArray<float> small(small_n), large(large_n), none;
  EXPECT_EQ(none.size(), 0u);
  EXPECT_TRUE(none.empty());
  ASSERT_EQ(small.size(), small_n);
  ASSERT_EQ(large.bytes(), large_n * sizeof(float));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.data()) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.data()) % (std::size_t{2} << 20), 0u);
  for (const auto* a : {&small, &large}) {
    std::size_t nonzero = 0;
    for (float x : *a)
      nonzero += x != 0.0f;
    EXPECT_EQ(nonzero, 0u);
  }
  large[large_n - 1] = 3.0f;
  small[0] = 1.0f;
  EXPECT_EQ(large[large_n - 1], 3.0f);
  HostArray<float> moved = std::move(large);
  EXPECT_EQ(moved[large_n - 1], 3.0f);
  EXPECT_EQ(moved.size(), large_n);
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    const std::string flags = vm_flags_of(moved.data() + large_n / 2);
    ASSERT_FALSE(flags.empty()) << "no mapping found in /proc/self/smaps";
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  } else {
    std::printf("(no transparent huge pages in this kernel: the advice is not checked)\n");
  }
}

TEST(Unpack, MatchesNaiveBitLoop) {
  for (int nbits : {1, 2, 4, 8, 16}) {
    for (bool sgn : {false, true}) {
      const std::size_t n = 1001;
      auto in = random_bytes(packed_bytes(nbits, n), 7 + nbits);
      std::vector<float> out(n, -999.f);
      unpack_samples(in.data(), nbits, n, out.data(), sgn);
      EXPECT_EQ(out, naive_unpack(in, nbits, n, sgn && nbits > 1)) << nbits << " " << sgn;
    }
  }
  EXPECT_THROW(unpack_samples(nullptr, 3, 1, nullptr), Error);
}

TEST(UnpackGpu, MatchesCpu) {
  WB_REQUIRE_GPU();
  for (int nbits : {1, 2, 4, 8, 16, 32}) {
    for (bool sgn : {false, true}) {
      const std::size_t n = 100003;  // not a multiple of the block size
      auto in = random_bytes(packed_bytes(nbits, n), 11 + nbits);
      if (nbits == 32) {  // keep the floats finite so that == compares them
        auto f = wbtest::random_floats(n, 3);
        std::memcpy(in.data(), f.data(), 4 * n);
      }
      std::vector<float> cpu(n), gpu(n);
      unpack_samples(in.data(), nbits, n, cpu.data(), sgn);
      DeviceArray<std::uint8_t> d_in(in.size());
      DeviceArray<float> d_out(n);
      copy_bytes(d_in.data(), in.data(), in.size());
      device_memset(d_out.data(), 0xFF, d_out.bytes());  // poison: NaNs
      unpack_samples_cuda(d_in.data(), nbits, n, d_out.data(), sgn);
      copy_bytes(gpu.data(), d_out.data(), d_out.bytes());
      EXPECT_EQ(cpu, gpu) << "nbits " << nbits << " signed " << sgn;
    }
  }
}

// Pinned host memory: a freed block is cached and handed out again for a request of about its
// size (page-locking is slow and serialised by the driver), a much smaller or larger request
// gets a block of its own; a registered pageable buffer counts as pinned until it is released.
TEST(PinnedGpu, FreedBlocksAreReusedAndRegistrationPinsInPlace) {
  WB_REQUIRE_GPU();
  void* first = nullptr;
  {
    PinnedArray<std::uint8_t> a(3 << 20);
    first = a.data();
    EXPECT_TRUE(is_pinned_host(first));
  }
  {
    PinnedArray<std::uint8_t> same(3 << 20);
    EXPECT_EQ(same.data(), first) << "the cached block";
    PinnedArray<std::uint8_t> second(3 << 20);  // the first is in use: a new one
    EXPECT_NE(second.data(), first);
    EXPECT_TRUE(is_pinned_host(second.data()));
    PinnedArray<std::uint8_t> tiny(1 << 10);  // far smaller than any cached block
    EXPECT_NE(tiny.data(), first);
    tiny[0] = 1;
  }
  std::vector<std::uint8_t> pageable(1 << 20, 7);
  EXPECT_FALSE(is_pinned_host(pageable.data()));
  {
    HostRegistration reg(pageable.data(), pageable.size());
    EXPECT_TRUE(is_pinned_host(pageable.data()));
    EXPECT_TRUE(is_pinned_host(pageable.data() + 4096));
    // A copy from the registered buffer to the device and back.
    DeviceArray<std::uint8_t> d(pageable.size());
    copy_bytes(d.data(), pageable.data(), pageable.size());
    std::vector<std::uint8_t> back(pageable.size(), 0);
    copy_bytes(back.data(), d.data(), d.bytes());
    EXPECT_EQ(back, pageable);
  }
  EXPECT_FALSE(is_pinned_host(pageable.data()));
}
