#pragma once
// Image products shared by the engines: PNG quick-looks (libpng) and FITS images (cfitsio).
// Both are written atomically (temporary name, renamed on success). A build without libpng or
// cfitsio throws Error(unsupported) from the matching writer.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace warpbeam::io {

/// Colour map of a PNG quick-look.
enum class Colormap { gray, inferno };

/// Writes a 2-D float image data[ny][nx] (row 0 = top of the picture unless flip_y) as an 8-bit
/// PNG, mapping [vmin, vmax] linearly to the colour map (values outside are clipped; NaN -> 0).
/// Throws invalid_argument for an empty image or vmax <= vmin, io on write failure.
void write_png(const std::string& path, const float* data, int ny, int nx, float vmin, float vmax,
               Colormap cmap = Colormap::gray, bool flip_y = false);

/// One FITS header card: keyword (<= 8 characters), value, comment.
struct FitsCard {
  std::string key;
  std::variant<std::int64_t, double, std::string, bool> value;
  std::string comment;
};

/// Writes a float32 FITS primary image of shape `naxes` given slowest first (as C arrays are
/// stored; the FITS NAXIS1 is the last, fastest axis) with extra header cards (WCS, provenance).
/// Throws unsupported without cfitsio, invalid_argument for a size mismatch, io on failure.
void write_fits_image(const std::string& path, const float* data,
                      const std::vector<std::int64_t>& naxes, const std::vector<FitsCard>& cards);

/// True when this build can write PNG / FITS.
bool png_supported();
bool fits_supported();

}  // namespace warpbeam::io
