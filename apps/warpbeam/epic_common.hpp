#pragma once
// Shared by the EPIC subcommands (image, simulate station, bench epic): the station file, the
// LWA-SV reference band and the time conversions the FITS header needs.
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"

namespace warpbeam::cli::epic_common {

/// LWA-SV's TBF band of E1: 132 channels of 25 kHz from channel 2348 (58.7 MHz).
inline constexpr int kFirstChannel = 2348;
inline constexpr int kChannels = 132;
/// The time tag of the real tbf-test.dat (2015-11-13 00:59:22 UTC): the simulator's default.
inline constexpr long long kDefaultTimeTag = 283685766952000000ll;

/// The station file: `given`, else $WARPBEAM_DATA/lwa/lwasv-ssmif.txt when it exists; "" when
/// neither.
inline std::string find_ssmif(const std::string& given) {
  if (!given.empty()) return given;
  return default_data_file("lwa/lwasv-ssmif.txt");
}

/// Julian date (UT) of a Unix time.
inline double julian_date(double unix_s) {
  return unix_s / 86400.0 + 2440587.5;
}

/// Local apparent sidereal time is approximated by the local mean sidereal time (degrees):
/// GMST = 280.46061837 + 360.98564736629 (JD - 2451545.0) (IAU 1982, Meeus eq. 12.4; the
/// T^2 terms are below 0.1 s for 2000-2030) plus the East longitude.
inline double local_sidereal_deg(double unix_s, double lon_east_deg) {
  const double d = julian_date(unix_s) - 2451545.0;
  double g = std::fmod(280.46061837 + 360.98564736629 * d + lon_east_deg, 360.0);
  return g < 0 ? g + 360 : g;
}

/// ISO 8601 UTC with milliseconds ("2015-11-13T00:59:22.000").
inline std::string iso_utc(double unix_s) {
  const auto whole = static_cast<std::time_t>(std::floor(unix_s));
  std::tm tm{};
  gmtime_r(&whole, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:06.3f}", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec + (unix_s - static_cast<double>(whole)));
}

}  // namespace warpbeam::cli::epic_common
