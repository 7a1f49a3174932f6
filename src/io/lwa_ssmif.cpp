// SSMIF (Station Static MIB Initialization File, LWA memo MCS0031) reader: stand positions,
// antenna -> stand/polarisation/status, cables (delay and loss) and the digitiser input order.
// Lines are "KEYWORD[i][j] value # comment"; '#' starts a comment; keywords without an index set
// a default for every entry (RPD_VF 85.0, for example). Unknown keywords are ignored.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

#include "warpbeam/format.hpp"
#include "warpbeam/io/lwa.hpp"

namespace warpbeam::io {

namespace {

constexpr double kSpeedOfLight = 299792458.0;

struct Entry {
  std::string key;
  std::vector<int> idx;  // 1-based indices as written
  std::string value;
  int line = 0;
};

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a])))
    ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])))
    --b;
  return s.substr(a, b - a);
}

class Parser {
 public:
  explicit Parser(std::string path) : path_(std::move(path)) {}

  std::vector<Entry> read() {
    std::ifstream in(path_);
    if (!in) fail(ErrorCategory::io, "cannot open SSMIF '{}'", path_);
    std::vector<Entry> out;
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (auto h = line.find('#'); h != std::string::npos) line.erase(h);
      line = trim(line);
      if (line.empty()) continue;
      std::size_t sp = 0;
      while (sp < line.size() && !std::isspace(static_cast<unsigned char>(line[sp])))
        ++sp;
      Entry e;
      e.line = n;
      e.value = trim(line.substr(sp));
      const std::string head = line.substr(0, sp);
      const std::size_t br = head.find('[');
      e.key = head.substr(0, br);
      for (char c : e.key)
        if (!(std::isupper(static_cast<unsigned char>(c)) ||
              std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
          fail(ErrorCategory::format, "SSMIF '{}' line {}: '{}' is not a keyword", path_, n, head);
      std::size_t p = br;
      while (p != std::string::npos && p < head.size()) {
        const std::size_t close = head.find(']', p);
        if (head[p] != '[' || close == std::string::npos)
          fail(ErrorCategory::format, "SSMIF '{}' line {}: malformed index in '{}'", path_, n,
               head);
        e.idx.push_back(to_int(head.substr(p + 1, close - p - 1), e));
        p = close + 1;
      }
      out.push_back(std::move(e));
    }
    if (in.bad()) fail(ErrorCategory::io, "cannot read SSMIF '{}'", path_);
    return out;
  }

  int to_int(const std::string& s, const Entry& e) const {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size())
      fail(ErrorCategory::format, "SSMIF '{}' line {}: '{}' is not an integer ({})", path_, e.line,
           s, e.key);
    return v;
  }
  double to_double(const std::string& s, const Entry& e) const {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size() || !std::isfinite(v))
      fail(ErrorCategory::format, "SSMIF '{}' line {}: '{}' is not a number ({})", path_, e.line, s,
           e.key);
    return v;
  }
  /// The 0-based index of entry e's `which`-th index, checked against [1, n].
  int index(const Entry& e, int n, std::size_t which = 0) const {
    if (e.idx.size() <= which)
      fail(ErrorCategory::format, "SSMIF '{}' line {}: {} needs an index", path_, e.line, e.key);
    const int i = e.idx[which];
    if (i < 1 || i > n)
      fail(ErrorCategory::format, "SSMIF '{}' line {}: {} index {} is outside 1 .. {}", path_,
           e.line, e.key, i, n);
    return i - 1;
  }

 private:
  std::string path_;
};

}  // namespace

double SsmifCable::delay_s(double f_hz) const {
  const double len = length_m * stretch;
  return len / (velocity_factor * kSpeedOfLight) +
         dispersion_s * (len / 100.0) / std::sqrt(f_hz / ref_freq_hz);
}

double SsmifCable::gain(double f_hz) const {
  const double len = length_m * stretch;
  return std::exp(-(2 * a0 * len * std::sqrt(f_hz / ref_freq_hz) + a1 * len * f_hz / ref_freq_hz));
}

int Ssmif::tbf_antenna(int s, int p) const {
  const int input = 2 * s + p;
  if (s < 0 || p < 0 || p > 1 || input >= static_cast<int>(input_antenna.size()))
    fail(ErrorCategory::invalid_argument, "TBF input (stand index {}, pol {}) is not in SSMIF '{}'",
         s, p, path);
  return input_antenna[input];
}

TbfStationModel tbf_station_model(const Ssmif& ssmif, int tbf_nstand, bool subset) {
  // Real data need the real cables and input order; defaults would beamform silently wrong.
  if (!ssmif.cable_lengths_given || !ssmif.input_map_given)
    fail(ErrorCategory::format,
         "SSMIF '{}' has no {}: cannot model the station's inputs (a truncated file?)", ssmif.path,
         !ssmif.cable_lengths_given ? "cable table (N_RPD and RPD_LENG)"
                                    : "digitiser input map (N_SNAP, N_SNAPCH and SNAP_ANT, or "
                                      "the ROACH or DP1 equivalents)");
  if (tbf_nstand > ssmif.nstand() || (!subset && tbf_nstand != ssmif.nstand()))
    fail(ErrorCategory::format,
         "the TBF data hold {} stands but SSMIF '{}' describes {} (N_STD): wrong station file?",
         tbf_nstand, ssmif.path, ssmif.nstand());
  TbfStationModel m;
  for (int s = 0; s < tbf_nstand; ++s) {
    const int ax = ssmif.tbf_antenna(s, 0), ay = ssmif.tbf_antenna(s, 1);
    const SsmifAntenna& x = ssmif.antennas.at(ax - 1);
    const SsmifAntenna& y = ssmif.antennas.at(ay - 1);
    if (x.stand != y.stand || x.pol != 0 || y.pol != 1)
      fail(ErrorCategory::format,
           "SSMIF '{}': TBF stand {} has antennas {} (stand {}, pol {}) and {} (stand {}, pol {}), "
           "not the X and Y of one stand",
           ssmif.path, s, ax, x.stand, x.pol, ay, y.stand, y.pol);
    m.xyz_m.push_back(ssmif.stand_xyz_m.at(x.stand - 1));
    m.stand_number.push_back(x.stand);
    m.ok.push_back(x.status >= kSuspect && y.status >= kSuspect ? 1 : 0);
    m.cables.push_back(ssmif.cables.at(x.cable - 1));
    m.cables.push_back(ssmif.cables.at(y.cable - 1));
  }
  return m;
}

Ssmif read_ssmif(const std::string& path) {
  Parser parser(path);
  const std::vector<Entry> entries = parser.read();
  std::map<std::string, const Entry*> scalars;  // the last unindexed value of each keyword
  for (const auto& e : entries)
    if (e.idx.empty()) scalars[e.key] = &e;
  auto scalar_int = [&](const char* key, int def) {
    auto it = scalars.find(key);
    return it == scalars.end() ? def : parser.to_int(it->second->value, *it->second);
  };

  Ssmif s;
  s.path = path;
  if (!scalars.count("N_STD"))
    fail(ErrorCategory::format, "'{}' is not an SSMIF: it has no N_STD", path);
  const int nstd = scalar_int("N_STD", 0);
  if (nstd < 1 || nstd > 4096)
    fail(ErrorCategory::format, "SSMIF '{}': N_STD = {} is outside 1 .. 4096", path, nstd);
  const int nant = 2 * nstd;
  const int nrpd = scalar_int("N_RPD", nant);
  if (nrpd < 0 || nrpd > 8192)
    fail(ErrorCategory::format, "SSMIF '{}': N_RPD = {} is outside 0 .. 8192", path, nrpd);
  s.format_version = scalar_int("FORMAT_VERSION", 0);
  if (auto it = scalars.find("STATION_ID"); it != scalars.end()) s.station_id = it->second->value;

  s.stand_xyz_m.assign(static_cast<std::size_t>(nstd), {0, 0, 0});
  s.antennas.resize(static_cast<std::size_t>(nant));
  for (int n = 0; n < nant; ++n) {  // MCS0031 defaults
    s.antennas[n].stand = n / 2 + 1;
    s.antennas[n].pol = n % 2;
    s.antennas[n].cable = n + 1;
  }
  s.cables.resize(static_cast<std::size_t>(nrpd));
  for (int n = 0; n < nrpd; ++n)
    s.cables[n].id = "UNK";

  // Digitiser boards: (count keyword, channels keyword, antenna keyword), newest first.
  struct Digitiser {
    const char *nboard, *nchan, *ant;
  };
  const Digitiser kinds[] = {{"N_SNAP", "N_SNAPCH", "SNAP_ANT"},
                             {"N_ROACH", "N_ROACHCH", "ROACH_ANT"},
                             {"N_DP1", "N_DP1CH", "DP1_ANT"}};
  const Digitiser* digi = nullptr;
  for (const auto& d : kinds)
    if (scalars.count(d.nboard) && scalars.count(d.nchan)) {
      digi = &d;
      break;
    }
  int nboard = 0, nboardch = 0;
  if (digi) {
    nboard = scalar_int(digi->nboard, 0);
    nboardch = scalar_int(digi->nchan, 0);
    // In 64 bits: N_SNAP 65536 x N_SNAPCH 65537 wrapped in int, passed the check and the map
    // below was written past its end (issue 18).
    const std::int64_t inputs = std::int64_t{nboard} * nboardch;
    if (nboard < 0 || nboardch < 0 || inputs > 65536)
      fail(ErrorCategory::format,
           "SSMIF '{}': {} = {} boards of {} = {} inputs: at most 65536 inputs in all", path,
           digi->nboard, nboard, digi->nchan, nboardch);
  }
  const int ninputs = nboard * nboardch;  // <= 65536: checked above
  std::vector<int> digi_ant(static_cast<std::size_t>(ninputs), 0);
  for (int k = 0; k < ninputs; ++k)
    digi_ant[k] = k + 1;
  // Which entries of the cable lengths and the input map the file gives: a station file cut
  // short (a truncated download) must not beamform with default cables and input order.
  std::vector<std::uint8_t> length_given(static_cast<std::size_t>(nrpd), 0);
  std::vector<std::uint8_t> input_given(static_cast<std::size_t>(ninputs), 0);

  for (const auto& e : entries) {
    const std::string& k = e.key;
    auto num = [&] { return parser.to_double(e.value, e); };
    auto integer = [&] { return parser.to_int(e.value, e); };
    if (k == "GEO_N") {
      s.lat_deg = num();
    } else if (k == "GEO_E") {
      s.lon_deg = num();
    } else if (k == "GEO_EL") {
      s.elevation_m = num();
    } else if (k == "STD_LX" || k == "STD_LY" || k == "STD_LZ") {
      s.stand_xyz_m[parser.index(e, nstd)][k == "STD_LX" ? 0 : k == "STD_LY" ? 1 : 2] = num();
    } else if (k == "ANT_STD") {
      const int st = integer();
      if (st < 1 || st > nstd)
        fail(ErrorCategory::format, "SSMIF '{}' line {}: ANT_STD {} is outside 1 .. {}", path,
             e.line, st, nstd);
      s.antennas[parser.index(e, nant)].stand = st;
    } else if (k == "ANT_ORIE") {
      s.antennas[parser.index(e, nant)].pol = integer() ? 1 : 0;
    } else if (k == "ANT_STAT") {
      s.antennas[parser.index(e, nant)].status = integer();
    } else if (k.rfind("RPD_", 0) == 0 && nrpd > 0) {
      // An unindexed RPD_* value is the default of every cable; indexed ones override it.
      auto apply = [&](SsmifCable& c) {
        if (k == "RPD_ID") c.id = e.value;
        if (k == "RPD_STAT") c.status = integer();
        if (k == "RPD_LENG") c.length_m = num();
        if (k == "RPD_VF") c.velocity_factor = num() / 100.0;
        if (k == "RPD_DD") c.dispersion_s = num() * 1e-9;
        if (k == "RPD_A0") c.a0 = num();
        if (k == "RPD_A1") c.a1 = num();
        if (k == "RPD_FREF") c.ref_freq_hz = num();
        if (k == "RPD_STR") c.stretch = num();
      };
      if (k == "RPD_ANT") {
        const int a = std::abs(integer());
        if (a < 1 || a > nant)
          fail(ErrorCategory::format, "SSMIF '{}' line {}: RPD_ANT {} is outside 1 .. {}", path,
               e.line, a, nant);
        s.antennas[a - 1].cable = parser.index(e, nrpd) + 1;
      } else if (e.idx.empty()) {
        for (auto& c : s.cables)
          apply(c);
        if (k == "RPD_LENG") std::fill(length_given.begin(), length_given.end(), 1);
      } else {
        const int i = parser.index(e, nrpd);
        apply(s.cables[i]);
        if (k == "RPD_LENG") length_given[i] = 1;
      }
    } else if (digi && k == digi->ant) {
      const int b = parser.index(e, nboard, 0), ch = parser.index(e, nboardch, 1);
      digi_ant[b * nboardch + ch] = integer();
      input_given[b * nboardch + ch] = 1;
    }
  }
  // Every table the file declares must be complete (MCS0031 lists every entry).
  const auto first_missing = [](const std::vector<std::uint8_t>& given) {
    return std::find(given.begin(), given.end(), 0) - given.begin();
  };
  if (scalars.count("N_RPD") && nrpd > 0) {
    const auto m = first_missing(length_given);
    if (m < nrpd)
      fail(ErrorCategory::format,
           "SSMIF '{}': N_RPD = {} cables but no RPD_LENG for cable {} ({} of {} given): the file "
           "is truncated or incomplete",
           path, nrpd, m + 1, std::count(length_given.begin(), length_given.end(), 1), nrpd);
    s.cable_lengths_given = true;
  }
  if (digi) {
    const auto m = first_missing(input_given);
    if (m < ninputs)
      fail(ErrorCategory::format,
           "SSMIF '{}': {} x {} = {} inputs but no {} for board {} input {} ({} given): the file "
           "is truncated or incomplete",
           path, digi->nboard, digi->nchan, ninputs, digi->ant, m / nboardch + 1, m % nboardch + 1,
           std::count(input_given.begin(), input_given.end(), 1));
    s.input_map_given = true;
  }
  for (std::size_t i = 0; i < s.stand_xyz_m.size(); ++i)
    for (double v : s.stand_xyz_m[i])
      if (!std::isfinite(v))
        fail(ErrorCategory::format, "SSMIF '{}': stand {} has no finite position", path, i + 1);

  // Input order: the digitiser map when it covers every antenna, else identity.
  s.input_antenna.resize(static_cast<std::size_t>(nant));
  for (int n = 0; n < nant; ++n)
    s.input_antenna[n] = n + 1;
  if (digi && static_cast<int>(digi_ant.size()) >= nant) {
    for (int n = 0; n < nant; ++n) {
      const int a = digi_ant[n];
      if (a < 1 || a > nant)
        fail(ErrorCategory::format, "SSMIF '{}': {} maps input {} to antenna {} (outside 1 .. {})",
             path, digi->ant, n + 1, a, nant);
      s.input_antenna[n] = a;
    }
  }
  for (const auto& a : s.antennas)
    if (a.cable < 1 || a.cable > nrpd) {
      // MCS0031: cable n serves antenna n; a station with fewer cables than antennas is odd.
      fail(ErrorCategory::format, "SSMIF '{}': an antenna uses cable {} of {}", path, a.cable,
           nrpd);
    }
  return s;
}

}  // namespace warpbeam::io
