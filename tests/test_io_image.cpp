// PNG and FITS writers: read back with libpng's signature and cfitsio-independent header parsing.
#include "test_util.hpp"
#include "warpbeam/io/image.hpp"

using namespace warpbeam;

TEST(Image, PngHasSignatureAndSize) {
  if (!io::png_supported()) GTEST_SKIP() << "no libpng in this build";
  wbtest::TempDir t;
  std::vector<float> img(6 * 5);
  for (std::size_t i = 0; i < img.size(); ++i) img[i] = static_cast<float>(i);
  io::write_png(t.file("a.png"), img.data(), 6, 5, 0, 29, io::Colormap::inferno);
  const std::string b = wbtest::slurp(t.file("a.png"));
  ASSERT_GT(b.size(), 33u);
  EXPECT_EQ(b.substr(1, 3), "PNG");
  // IHDR: width and height big-endian at bytes 16..23.
  auto be32 = [&](int o) {
    return (static_cast<unsigned char>(b[o]) << 24) | (static_cast<unsigned char>(b[o + 1]) << 16) |
           (static_cast<unsigned char>(b[o + 2]) << 8) | static_cast<unsigned char>(b[o + 3]);
  };
  EXPECT_EQ(be32(16), 5);
  EXPECT_EQ(be32(20), 6);
  EXPECT_THROW(io::write_png(t.file("b.png"), img.data(), 6, 5, 1, 1), Error);
  EXPECT_EQ(t.files().size(), 1u);  // the failed one left nothing
}

TEST(Image, FitsHeaderAndData) {
  if (!io::fits_supported()) GTEST_SKIP() << "no cfitsio in this build";
  wbtest::TempDir t;
  std::vector<float> img(2 * 3 * 4);
  for (std::size_t i = 0; i < img.size(); ++i) img[i] = 0.5f * static_cast<float>(i);
  io::write_fits_image(t.file("a.fits"), img.data(), {2, 3, 4},
                       {{"CTYPE1", std::string("RA---SIN"), "x axis"},
                        {"CRPIX1", 2.5, ""},
                        {"NCHAN", std::int64_t{2}, ""},
                        {"HISTORY", std::string("made by a test"), ""}});
  const std::string b = wbtest::slurp(t.file("a.fits"));
  ASSERT_EQ(b.size() % 2880, 0u);
  auto card = [&](const std::string& key) {
    for (std::size_t o = 0; o < 2880; o += 80)
      if (b.compare(o, key.size(), key) == 0 && (b[o + key.size()] == ' ' || b[o + key.size()] == '='))
        return b.substr(o, 80);
    return std::string();
  };
  EXPECT_NE(card("NAXIS1").find(" 4"), std::string::npos);
  EXPECT_NE(card("NAXIS3").find(" 2"), std::string::npos);
  EXPECT_NE(card("CTYPE1").find("RA---SIN"), std::string::npos);
  EXPECT_NE(b.find("made by a test"), std::string::npos);
  // Data: big-endian float32 after the header block(s); first header block is enough here.
  const std::size_t data0 = b.find("END" + std::string(77, ' ')) / 2880 * 2880 + 2880;
  auto be_float = [&](std::size_t i) {
    std::uint32_t u = 0;
    for (int k = 0; k < 4; ++k) u = (u << 8) | static_cast<unsigned char>(b[data0 + 4 * i + k]);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  for (std::size_t i = 0; i < img.size(); ++i) ASSERT_EQ(be_float(i), img[i]);
  EXPECT_THROW(io::write_fits_image(t.file("b.fits"), img.data(), {0, 3}, {}), Error);
}
