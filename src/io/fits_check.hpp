#pragma once
// Header check of a FITS file before cfitsio opens it (internal to the library).
//
// cfitsio 4.2 (Debian 12) copies some header values into fixed-size fields without checking
// their length: an unquoted 70-character TTYPEn value overflows the 70-byte column name in
// ffgtbp by one byte, which glibc's fortified strcpy turns into an abort ("buffer overflow
// detected") of `warpbeam info`, `search` and every reader of the file (issue 18: fuzz_psrfits,
// tests/test_psrfits.cpp's regression test). check_fits_headers() walks every header of the file
// first and refuses what the FITS standard forbids there, before cfitsio parses a card.
//
// Format: FITS Standard 4.0 (IAU FITS Working Group, 2018): 2880-byte blocks of 36 80-byte cards
// (§3.3, §4.1); header bytes are ASCII text 32-126 (§4.1.1); an HDU's data is
// |BITPIX| x GCOUNT x (PCOUNT + NAXIS1 x ... x NAXISn) / 8 bytes, padded to whole blocks (§4.4.1.1,
// §7.3.1; random groups leave NAXIS1 = 0 out, §6); XTENSION, EXTNAME, TTYPEn, TFORMn, TUNITn and
// TDISPn are character strings (§4.2.1.1, §7.3.1, §7.3.2): a quoted value.
#include <cstdint>
#include <string>

namespace warpbeam::io::detail {

/// Throws Error(format) naming `path`, the header (1 = primary) and the card; Error(io) when the
/// file cannot be read. `file_bytes` is the file's size. Stops at the first data that runs past
/// the end of the file (a truncated file is the caller's to report) or after 1000 headers
/// (cfitsio's MAXHDU).
void check_fits_headers(const std::string& path, std::int64_t file_bytes);

}  // namespace warpbeam::io::detail
