#pragma once
// Provenance recorded in every product (JSON side files, FITS headers, benchmark records):
// warpbeam's version and commit, the date, the host, the device and the command line.

#include <string>

#include <nlohmann/json.hpp>

namespace warpbeam {

/// Records the command line (main() calls it once); products then carry it.
void set_command_line(int argc, char** argv);
/// The recorded command line ("" when none was set, e.g. in library use).
const std::string& command_line();

/// {"warpbeam_version", "git_commit", "date_utc", "host", "command", "device"?}.
nlohmann::json provenance();

}  // namespace warpbeam
