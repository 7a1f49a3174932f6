// UDP sockets, pacing and fault injection (src/stream/udp.hpp).
#include "stream/udp.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "warpbeam/format.hpp"

namespace warpbeam::stream::detail {

namespace {

// The socket address of an endpoint ("localhost" is 127.0.0.1).
socklen_t to_sockaddr(const Endpoint& e, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  const std::string host = e.host == "localhost" ? "127.0.0.1" : e.host;
  auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<std::uint16_t>(e.port));
    return sizeof(sockaddr_in);
  }
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<std::uint16_t>(e.port));
    return sizeof(sockaddr_in6);
  }
  fail(ErrorCategory::invalid_argument, "'{}' is not an IP address", e.host);
}

void set_buffer(int fd, int option, int mib, const Endpoint& e) {
  int want = mib << 20;
  // SO_RCVBUFFORCE / SO_SNDBUFFORCE pass net.core.*mem_max when the process may (root,
  // CAP_NET_ADMIN), as capture tools do; otherwise the capped request.
  const int force = option == SO_RCVBUF ? SO_RCVBUFFORCE : SO_SNDBUFFORCE;
  if (setsockopt(fd, SOL_SOCKET, force, &want, sizeof want) != 0)
    setsockopt(fd, SOL_SOCKET, option, &want, sizeof want);
  int got = 0;
  socklen_t len = sizeof got;
  getsockopt(fd, SOL_SOCKET, option, &got, &len);
  // Linux reports twice the size granted (the bookkeeping overhead).
  if (got / 2 < want / 2)
    warnf(
        "{}: the kernel granted a {} MiB socket buffer of the {} MiB asked for (raise "
        "net.core.{}mem_max for a loss-free capture at high rates)",
        e.to_string(), got / 2 >> 20, mib, option == SO_RCVBUF ? "r" : "w");
}

}  // namespace

int bind_udp(const Endpoint& at, int buffer_mib, int* port) {
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(at, ss);
  const int fd = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(ErrorCategory::io, "cannot open a UDP socket: {}", std::strerror(errno));
  set_buffer(fd, SO_RCVBUF, buffer_mib, at);
  timeval tv{0, 100000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    const int e = errno;
    ::close(fd);
    fail(ErrorCategory::io, "cannot listen on {}: {}", at.to_string(), std::strerror(e));
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  *port = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return fd;
}

int connect_udp(const Endpoint& to, int buffer_mib) {
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(to, ss);
  const int fd = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(ErrorCategory::io, "cannot open a UDP socket: {}", std::strerror(errno));
  set_buffer(fd, SO_SNDBUF, buffer_mib, to);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    const int e = errno;
    ::close(fd);
    fail(ErrorCategory::io, "cannot send to {}: {}", to.to_string(), std::strerror(e));
  }
  return fd;
}

void send_all(int fd, const std::vector<const std::uint8_t*>& data,
              const std::vector<std::size_t>& sizes) {
  const std::size_t n = data.size();
  std::vector<iovec> iov(n);
  std::vector<mmsghdr> msgs(n);
  for (std::size_t i = 0; i < n; ++i) {
    iov[i] = {const_cast<std::uint8_t*>(data[i]), sizes[i]};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  std::size_t done = 0;
  while (done < n) {
    const int k = ::sendmmsg(fd, msgs.data() + done, static_cast<unsigned>(n - done), 0);
    if (k < 0) {
      // ECONNREFUSED: nobody listens yet on loopback (an ICMP error of an earlier datagram):
      // the datagram is gone, as on a real network; carry on.
      if (errno == EINTR || errno == ECONNREFUSED) continue;
      if (errno == ENOBUFS || errno == EAGAIN) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      fail(ErrorCategory::io, "sendmmsg failed: {}", std::strerror(errno));
    }
    done += static_cast<std::size_t>(k);
  }
}

void Pacer::wait(std::size_t bytes) {
  if (rate_ <= 0) return;
  due_s_ += static_cast<double>(bytes) / rate_;
  const auto due = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(due_s_));
  if (due > std::chrono::steady_clock::now()) std::this_thread::sleep_until(due);
}

FaultInjector::FaultInjector(const Faults& f, SendRecord& record)
    : f_(f),
      r_(record),
      rng_(f.seed),
      passthrough_(f.drop == 0 && f.reorder == 0 && f.duplicate == 0) {}

void FaultInjector::release_due(std::vector<Packet>& out) {
  // Held packets are kept in order of their due position.
  while (!held_.empty() && held_.front().due <= position_) {
    out.push_back(std::move(held_.front().p));
    held_.pop_front();
    ++position_;
  }
}

void FaultInjector::feed(Packet&& p, std::vector<Packet>& out) {
  ++r_.packets;
  // Three draws per packet, always, so that a packet's fate depends on the seed and its index
  // alone.
  const double ud = u_(rng_), ur = u_(rng_), uu = u_(rng_);
  std::uniform_int_distribution<int> disp(1, f_.max_displacement);
  const int dr = disp(rng_), du = disp(rng_);
  if (ud < f_.drop) {
    ++r_.dropped;
    r_.dropped_packets.push_back(p.key);
    return;
  }
  auto hold = [&](std::int64_t due, Packet&& q) {
    auto it = std::upper_bound(held_.begin(), held_.end(), due,
                               [](std::int64_t d, const Held& h) { return d < h.due; });
    held_.insert(it, Held{due, std::move(q)});
  };
  if (uu < f_.duplicate) {
    ++r_.duplicated;
    hold(position_ + du, Packet{p.bytes, p.key});
  }
  if (ur < f_.reorder) {
    ++r_.reordered;
    hold(position_ + dr, std::move(p));
  } else {
    out.push_back(std::move(p));
    ++position_;
  }
  release_due(out);
}

void FaultInjector::flush(std::vector<Packet>& out) {
  while (!held_.empty()) {
    out.push_back(std::move(held_.front().p));
    held_.pop_front();
  }
}

}  // namespace warpbeam::stream::detail
