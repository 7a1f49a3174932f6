#include "warpbeam/provenance.hpp"

#include <unistd.h>

#include <ctime>

#include "warpbeam/core.hpp"
#include "warpbeam/device.hpp"

namespace warpbeam {

namespace {
std::string g_command_line;
}

void set_command_line(int argc, char** argv) {
  g_command_line.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) g_command_line += ' ';
    g_command_line += argv[i];
  }
}

const std::string& command_line() {
  return g_command_line;
}

nlohmann::json provenance() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json j = {{"warpbeam_version", std::string(version())},
                      {"git_commit", std::string(git_commit())},
                      {"date_utc", date},
                      {"host", host},
                      {"command", g_command_line}};
  if (cuda_available()) j["device"] = device_description(0);
  return j;
}

}  // namespace warpbeam
