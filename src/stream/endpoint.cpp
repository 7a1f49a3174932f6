// Stream addresses: udp://HOST:PORT and spead://HOST:PORT.
#include <arpa/inet.h>

#include <cstdlib>

#include "warpbeam/format.hpp"
#include "warpbeam/stream.hpp"

namespace warpbeam::stream {

std::string Endpoint::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}", scheme, v6 ? "[" : "", host, v6 ? "]" : "", port);
}

bool Endpoint::is_loopback() const {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

Endpoint parse_endpoint(const std::string& address, const std::string& scheme,
                        const std::string& what, bool any_port) {
  const std::string prefix = scheme + "://";
  if (address.rfind(prefix, 0) != 0)
    fail(ErrorCategory::invalid_argument, "{} '{}' is not {}HOST:PORT", what, address, prefix);
  std::string rest = address.substr(prefix.size());
  Endpoint e;
  e.scheme = scheme;
  std::string port;
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:PORT
    const auto close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      fail(ErrorCategory::invalid_argument, "{} '{}': write an IPv6 host as [ADDR]:PORT", what,
           address);
    e.host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos)
      fail(ErrorCategory::invalid_argument, "{} '{}' has no port ({}HOST:PORT)", what, address,
           prefix);
    e.host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != 0 || p < (any_port ? 0 : 1) || p > 65535)
    fail(ErrorCategory::invalid_argument, "{} '{}': the port must be {} .. 65535", what, address,
         any_port ? "0 (any free port)" : "1");
  e.port = static_cast<int>(p);
  in_addr a4{};
  in6_addr a6{};
  if (e.host != "localhost" && inet_pton(AF_INET, e.host.c_str(), &a4) != 1 &&
      inet_pton(AF_INET6, e.host.c_str(), &a6) != 1)
    fail(ErrorCategory::invalid_argument,
         "{} '{}': the host must be an IP address (e.g. 127.0.0.1, 0.0.0.0) or localhost", what,
         address);
  return e;
}

void require_loopback(const Endpoint& e, const std::string& what) {
  if (!e.is_loopback())
    fail(ErrorCategory::invalid_argument,
         "{} {}: test senders send to this machine only (127.0.0.0/8, localhost or ::1)", what,
         e.to_string());
}

}  // namespace warpbeam::stream
