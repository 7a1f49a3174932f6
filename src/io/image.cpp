// PNG (libpng) and FITS (cfitsio) image writers shared by the engines.
#include "warpbeam/io/image.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "warpbeam/format.hpp"
#include "warpbeam/io/output_file.hpp"

#ifdef WARPBEAM_HAVE_PNG
#include <png.h>
#endif
#ifdef WARPBEAM_HAVE_CFITSIO
#include <fitsio.h>
#endif

namespace warpbeam::io {

namespace {
// A few anchor points of matplotlib's "inferno" map (perceptually uniform), interpolated.
constexpr std::array<std::array<float, 3>, 9> kInferno = {{{0.001f, 0.000f, 0.014f},
                                                           {0.112f, 0.047f, 0.290f},
                                                           {0.316f, 0.071f, 0.485f},
                                                           {0.511f, 0.128f, 0.481f},
                                                           {0.710f, 0.212f, 0.411f},
                                                           {0.887f, 0.329f, 0.264f},
                                                           {0.981f, 0.518f, 0.077f},
                                                           {0.982f, 0.753f, 0.147f},
                                                           {0.988f, 0.998f, 0.645f}}};

std::array<std::uint8_t, 3> colour(float x, Colormap cmap) {
  x = std::clamp(x, 0.f, 1.f);
  if (cmap == Colormap::gray) {
    const auto v = static_cast<std::uint8_t>(std::lround(255 * x));
    return {v, v, v};
  }
  const float pos = x * (kInferno.size() - 1);
  const auto i = std::min<std::size_t>(static_cast<std::size_t>(pos), kInferno.size() - 2);
  const float f = pos - static_cast<float>(i);
  std::array<std::uint8_t, 3> c{};
  for (int k = 0; k < 3; ++k)
    c[k] = static_cast<std::uint8_t>(
        std::lround(255 * (kInferno[i][k] * (1 - f) + kInferno[i + 1][k] * f)));
  return c;
}
}  // namespace

bool png_supported() {
#ifdef WARPBEAM_HAVE_PNG
  return true;
#else
  return false;
#endif
}

bool fits_supported() {
#ifdef WARPBEAM_HAVE_CFITSIO
  return true;
#else
  return false;
#endif
}

void write_png(const std::string& path, const float* data, int ny, int nx, float vmin, float vmax,
               Colormap cmap, bool flip_y) {
  if (ny <= 0 || nx <= 0) fail(ErrorCategory::invalid_argument, "PNG of {} x {} pixels", nx, ny);
  if (!(vmax > vmin))
    fail(ErrorCategory::invalid_argument, "PNG range [{}, {}] is empty", vmin, vmax);
#ifndef WARPBEAM_HAVE_PNG
  (void)path, (void)data, (void)cmap, (void)flip_y;
  fail(ErrorCategory::unsupported, "this build has no libpng: cannot write '{}'", path);
#else
  OutputFile out(path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) fail(ErrorCategory::io, "cannot start PNG '{}'", path);
  std::vector<std::uint8_t> row(static_cast<std::size_t>(nx) * 3);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fail(ErrorCategory::io, "cannot write PNG '{}'", path);
  }
  png_init_io(png, out.file());
  png_set_IHDR(png, info, nx, ny, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < ny; ++y) {
    const float* src = data + static_cast<std::size_t>(flip_y ? ny - 1 - y : y) * nx;
    for (int x = 0; x < nx; ++x) {
      const float v = std::isnan(src[x]) ? 0.f : (src[x] - vmin) / (vmax - vmin);
      const auto c = colour(v, cmap);
      std::copy(c.begin(), c.end(), row.begin() + 3 * x);
    }
    png_write_row(png, row.data());
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  out.commit();
#endif
}

void write_fits_image(const std::string& path, const float* data,
                      const std::vector<std::int64_t>& naxes, const std::vector<FitsCard>& cards) {
  if (naxes.empty() || naxes.size() > 9)
    fail(ErrorCategory::invalid_argument, "a FITS image has 1 to 9 axes, not {}", naxes.size());
  for (auto n : naxes)
    if (n <= 0) fail(ErrorCategory::invalid_argument, "FITS axis of length {}", n);
#ifndef WARPBEAM_HAVE_CFITSIO
  (void)data, (void)cards;
  fail(ErrorCategory::unsupported, "this build has no cfitsio: cannot write '{}'", path);
#else
  // cfitsio writes the file itself: write to a temporary name, rename on success.
  OutputPath out(path);  // removed unless committed, and if the process is interrupted
  const std::string& tmp = out.temp();
  fitsfile* f = nullptr;
  int status = 0;
  auto check = [&](const char* what) {
    if (status) {
      char msg[FLEN_STATUS] = {};
      fits_get_errstatus(status, msg);
      int ignore = 0;
      if (f) fits_close_file(f, &ignore);
      fail(ErrorCategory::io, "cannot write FITS '{}' ({}): {}", path, what, msg);
    }
  };
  fits_create_file(&f, tmp.c_str(), &status);
  check("create");
  std::vector<long> ax(naxes.rbegin(), naxes.rend());  // FITS: fastest axis first
  fits_create_img(f, FLOAT_IMG, static_cast<int>(ax.size()), ax.data(), &status);
  check("image");
  for (const auto& c : cards) {
    char* key = const_cast<char*>(c.key.c_str());
    char* com = const_cast<char*>(c.comment.c_str());
    if (auto* i = std::get_if<std::int64_t>(&c.value)) {
      LONGLONG v = *i;
      fits_update_key(f, TLONGLONG, key, &v, com, &status);
    } else if (auto* d = std::get_if<double>(&c.value)) {
      double v = *d;
      fits_update_key(f, TDOUBLE, key, &v, com, &status);
    } else if (auto* s = std::get_if<std::string>(&c.value)) {
      if (c.key == "HISTORY") {
        fits_write_history(f, s->c_str(), &status);
      } else if (c.key == "COMMENT") {
        fits_write_comment(f, s->c_str(), &status);
      } else {
        fits_update_key_longstr(f, key, s->c_str(), com, &status);
      }
    } else {
      int v = std::get<bool>(c.value) ? 1 : 0;
      fits_update_key(f, TLOGICAL, key, &v, com, &status);
    }
    check(c.key.c_str());
  }
  const LONGLONG n = std::accumulate(naxes.begin(), naxes.end(), LONGLONG{1},
                                     [](LONGLONG a, std::int64_t b) { return a * b; });
  fits_write_img(f, TFLOAT, 1, n, const_cast<float*>(data), &status);
  check("data");
  fits_close_file(f, &status);
  f = nullptr;
  check("close");
  out.commit();
#endif
}

}  // namespace warpbeam::io
