// The diagnostic plot of a candidate cutout, drawn with PLplot (Debian's libplplot, pngcairo
// driver): the frequency-averaged profile, the dedispersed waterfall and the DM-time bowtie,
// as your's plot_h5 lays them out, with axes, units and the candidate in the title.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "warpbeam/format.hpp"
#include "warpbeam/io/candidate_cutout.hpp"
#include "warpbeam/io/output_file.hpp"

#ifdef WARPBEAM_HAVE_PLPLOT
#include <plplot.h>
#endif

namespace warpbeam::io {

#ifndef WARPBEAM_HAVE_PLPLOT

bool candidate_plot_supported() {
  return false;
}
void write_candidate_png(const std::string& path, const CandidateCutout&) {
  fail(ErrorCategory::unsupported, "{}: this build has no PLplot (candidate plots)", path);
}

#else

namespace {

constexpr const char* kDevice = "pngcairo";

// The q-quantile of v (v copied).
double quantile(std::vector<float> v, double q) {
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// A perceptually ordered map from dark blue through green to yellow (viridis's anchors).
void viridis() {
  const PLFLT pos[] = {0.0, 0.25, 0.5, 0.75, 1.0};
  const PLFLT r[] = {0.267, 0.229, 0.128, 0.369, 0.993};
  const PLFLT g[] = {0.005, 0.322, 0.567, 0.789, 0.906};
  const PLFLT b[] = {0.329, 0.546, 0.551, 0.383, 0.144};
  plscmap1l(1, 5, pos, r, g, b, nullptr);
}

// An image [ny][nx] (row y, column x; y rising with the index) over the world box.
void image(const std::vector<float>& v, int nx, int ny, double x0, double x1, double y0, double y1,
           double zmin, double zmax) {
  std::vector<PLFLT> cells(static_cast<std::size_t>(nx) * ny);
  std::vector<const PLFLT*> cols(static_cast<std::size_t>(nx));
  // Values outside [zmin, zmax] are clamped: plimage leaves them undrawn (white) otherwise.
  for (int x = 0; x < nx; ++x) {
    for (int y = 0; y < ny; ++y)
      cells[static_cast<std::size_t>(x) * ny + y] =
          std::clamp<double>(v[static_cast<std::size_t>(y) * nx + x], zmin, zmax);
    cols[x] = cells.data() + static_cast<std::size_t>(x) * ny;
  }
  plimage(cols.data(), nx, ny, x0, x1, y0, y1, zmin, zmax, x0, x1, y0, y1);
}

}  // namespace

bool candidate_plot_supported() {
  // plgDevs fills the caller's arrays, at most n entries (n in: their size; out: the count).
  std::vector<const char*> menu(256), names(256);
  const char** m = menu.data();
  const char** d = names.data();
  int n = static_cast<int>(names.size());
  plgDevs(&m, &d, &n);
  for (int i = 0; i < n && i < static_cast<int>(names.size()); ++i)
    if (std::string(names[i]) == kDevice) return true;
  return false;
}

void write_candidate_png(const std::string& path, const CandidateCutout& c) {
  if (!candidate_plot_supported())
    fail(ErrorCategory::unsupported,
         "{}: PLplot's {} driver is not installed (Debian: plplot-driver-cairo)", path, kDevice);
  const int nt = c.time_size, nf = c.frequency_size, nd = c.dm_size;
  const FilterbankHeader& h = c.header;
  // Time from the candidate (ms), as plot_h5: sample i at (i - nt/2) tsamp f.
  const double dt_ms = c.cutout_tsamp_s() * 1e3;
  const double t0 = -nt / 2.0 * dt_ms, t1 = nt / 2.0 * dt_ms;
  std::vector<PLFLT> t(static_cast<std::size_t>(nt)), profile(t.size());
  for (int i = 0; i < nt; ++i) {
    t[i] = (i - nt / 2.0 + 0.5) * dt_ms;
    double s = 0;
    for (int j = 0; j < nf; ++j)
      s += c.freq_time[static_cast<std::size_t>(i) * nf + j];
    profile[i] = s / nf;
  }
  // The waterfall with frequency rising upwards (the rows are in the file's channel order).
  const double f_first = h.fch1 - h.foff / 2, f_last = h.fch1 + (h.nchans - 0.5) * h.foff;
  std::vector<float> wf(static_cast<std::size_t>(nt) * nf);
  for (int j = 0; j < nf; ++j)
    for (int i = 0; i < nt; ++i)
      wf[static_cast<std::size_t>(h.foff < 0 ? nf - 1 - j : j) * nt + i] =
          c.freq_time[static_cast<std::size_t>(i) * nf + j];

  // Drawn into a temporary file beside the target (checked writable first: PLplot exits the
  // process when it cannot open its output), renamed when complete.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  TempFileGuard guard(tmp);
  if (std::FILE* f = std::fopen(tmp.c_str(), "wb"))
    std::fclose(f);
  else
    fail(ErrorCategory::io, "cannot write '{}'", tmp);

  plsdev(kDevice);
  plsfnam(tmp.c_str());
  plspage(0, 0, 900, 1150, 0, 0);
  plscolbg(255, 255, 255);
  plinit();
  plscol0(1, 0, 0, 0);  // black axes and text
  viridis();
  pladv(0);
  plschr(0, 0.85);

  // Profile.
  const auto [pmin, pmax] = std::minmax_element(profile.begin(), profile.end());
  const double pad = 0.08 * (*pmax - *pmin + 1e-12);
  // The three panels share the time axis: numbers under the lowest only; the gaps leave room
  // for the lower panels' labels above their frames.
  plvpor(0.12, 0.95, 0.72, 0.88);
  plwind(t0, t1, *pmin - pad, *pmax + pad);
  plcol0(1);
  plbox("bcst", 0, 0, "bcnstv", 0, 0);
  plline(nt, t.data(), profile.data());
  pllab("", "Mean flux (arb.)", "");
  const std::string title1 =
      fmt::format("DM {:.2f} pc cm#u-3#d   S/N {:.2f}   width {} samples ({:.3f} ms)", c.dm, c.snr,
                  c.width, c.width * h.tsamp * 1e3);
  const std::string title2 =
      fmt::format("t#dcand#u {:.6f} s (MJD {:.8f})   {}", c.tcand_s, h.tstart + c.tcand_s / 86400.0,
                  std::filesystem::path(c.file.empty() ? c.cand_id : c.file).filename().string());
  plmtex("t", 3.2, 0.5, 0.5, title1.c_str());
  plmtex("t", 1.6, 0.5, 0.5, title2.c_str());

  // Dedispersed waterfall.
  plvpor(0.12, 0.95, 0.40, 0.665);
  const double y0 = std::min(f_first, f_last), y1 = std::max(f_first, f_last);
  plwind(t0, t1, y0, y1);
  image(wf, nt, nf, t0, t1, y0, y1, quantile(wf, 0.01), quantile(wf, 0.995));
  plcol0(1);
  plbox("bcst", 0, 0, "bcnstv", 0, 0);
  pllab("", "Frequency (MHz)", "");
  plmtex("t", 0.9, 0.0, 0.0, fmt::format("dedispersed at DM {:.2f}", c.dm).c_str());

  // DM-time bowtie.
  plvpor(0.12, 0.95, 0.07, 0.335);
  const double ddm = nd > 1 ? (c.dm_max - c.dm_min) / (nd - 1) : 1;
  const double d0 = c.dm_min - ddm / 2, d1 = c.dm_max + ddm / 2;
  plwind(t0, t1, d0, d1);
  image(c.dm_time, nt, nd, t0, t1, d0, d1, quantile(c.dm_time, 0.01), quantile(c.dm_time, 0.999));
  plcol0(1);
  plbox("bcnst", 0, 0, "bcnstv", 0, 0);
  pllab("Time from the candidate (ms)", "DM (pc cm#u-3#d)", "");
  plmtex("t", 0.9, 0.0, 0.0, "DM - time");
  plend();

  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    fail(ErrorCategory::io, "cannot rename '{}' to '{}'", tmp, path);
  }
}

#endif  // WARPBEAM_HAVE_PLPLOT

}  // namespace warpbeam::io
