// Dedispersion on the CPU: DM lists, delays, and the plan against a naive loop written here.
#include <cmath>

#include "test_util.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/io/sigproc.hpp"

using namespace warpbeam;
using namespace warpbeam::dedisp;

TEST(DmList, D1HasDedispsTrialCount) {
  // D1 (DESIGN.md): 1024 ch, fch1 1500 MHz, foff -0.29296875 MHz, tsamp 64 us, DM 0-1000,
  // pulse width 40 us, tolerance 1.25: dedisp's rule gives 1122 trials (issue 3).
  auto dms = dm_list_dedisp(0, 1000, 40, 1.25, 1024, 64e-6, 1500, -0.29296875);
  EXPECT_EQ(dms.size(), 1122u);
  EXPECT_EQ(dms.front(), 0.f);
  EXPECT_GE(dms.back(), 1000.f);
  EXPECT_LT(dms[dms.size() - 2], 1000.f);
  for (std::size_t i = 1; i < dms.size(); ++i)
    EXPECT_GT(dms[i], dms[i - 1]);
}

TEST(DmList, LinearAndBadArguments) {
  auto dms = dm_list_linear(10, 20, 2.5);
  EXPECT_EQ(dms, (std::vector<float>{10, 12.5, 15, 17.5, 20}));
  EXPECT_THROW(dm_list_linear(20, 10, 1), Error);
  EXPECT_THROW(dm_list_linear(0, 10, 0), Error);
  EXPECT_THROW(dm_list_dedisp(0, 100, 40, 1.0, 64, 64e-6, 1500, -1), Error);
  EXPECT_THROW(dm_list_dedisp(-1, 100, 40, 1.25, 64, 64e-6, 1500, -1), Error);
}
