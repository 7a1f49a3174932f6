// UDP sockets, pacing and fault injection (src/stream/udp.hpp).
#include "stream/udp.hpp"

#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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

}  // namespace

std::int64_t set_socket_buffer(int fd, int option, int mib, const Endpoint& e) {
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
  return got / 2;
}

std::int64_t socket_drops(int fd) {
  std::uint32_t info[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof info;
  if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &len) != 0 ||
      len < (SK_MEMINFO_DROPS + 1) * sizeof(std::uint32_t))
    return -1;
  return info[SK_MEMINFO_DROPS];
}

void require_core(int core) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (core < 0 || core >= CPU_SETSIZE || sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
      !CPU_ISSET(core, &allowed))
    fail(ErrorCategory::invalid_argument,
         "--capture-core {}: not a core this process may run on (see taskset -p, nproc)", core);
}

bool pin_this_thread(int core) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(core, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

void leave_core(int core) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) != 0 || core < 0 ||
      core >= CPU_SETSIZE || !CPU_ISSET(core, &mask) || CPU_COUNT(&mask) < 2)
    return;  // the engine keeps the capture's core when there is no other
  CPU_CLR(core, &mask);
  pthread_setaffinity_np(pthread_self(), sizeof mask, &mask);
}

int bind_udp(const Endpoint& at, int buffer_mib, int* port, std::int64_t* granted) {
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(at, ss);
  const int fd = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(ErrorCategory::io, "cannot open a UDP socket: {}", std::strerror(errno));
  const std::int64_t g = set_socket_buffer(fd, SO_RCVBUF, buffer_mib, at);
  if (granted) *granted = g;
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
  set_socket_buffer(fd, SO_SNDBUF, buffer_mib, to);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    const int e = errno;
    ::close(fd);
    fail(ErrorCategory::io, "cannot send to {}: {}", to.to_string(), std::strerror(e));
  }
  return fd;
}

namespace {

// Whether this kernel takes UDP_SEGMENT (generic segmentation offload: one send of up to
// kGsoSegments equal datagrams, segmented by the kernel or the NIC; Linux >= 4.18). Cleared on
// the first refusal, after which every datagram goes alone.
std::atomic<bool> gso_works{true};
constexpr std::size_t kGsoSegments = 64;  // the kernel's UDP_MAX_SEGMENTS (include/linux/udp.h)
constexpr std::size_t kGsoBytes = 65000;  // a UDP datagram's payload is at most 65,507 bytes

// The messages of sendmmsg: runs of consecutive datagrams of one size, each run one GSO send
// (a UDP_SEGMENT control message) when gso; *counts: the datagrams of each message.
void build_messages(const std::vector<const std::uint8_t*>& data,
                    const std::vector<std::size_t>& sizes, bool gso, std::vector<iovec>& iov,
                    std::vector<mmsghdr>& msgs, std::vector<std::size_t>& counts,
                    std::vector<std::uint8_t>& control) {
  const std::size_t n = data.size();
  constexpr std::size_t kControl = CMSG_SPACE(sizeof(std::uint16_t));
  iov.resize(n);
  msgs.clear();
  counts.clear();
  control.assign(kControl * n, 0);
  for (std::size_t i = 0; i < n;) {
    std::size_t k = 1;
    if (gso)
      while (i + k < n && k < kGsoSegments && sizes[i + k] == sizes[i] &&
             (k + 1) * sizes[i] <= kGsoBytes)
        ++k;
    mmsghdr m{};
    for (std::size_t j = 0; j < k; ++j)
      iov[i + j] = {const_cast<std::uint8_t*>(data[i + j]), sizes[i + j]};
    m.msg_hdr.msg_iov = &iov[i];
    m.msg_hdr.msg_iovlen = k;
    if (k > 1) {
      std::uint8_t* c = control.data() + kControl * msgs.size();
      m.msg_hdr.msg_control = c;
      m.msg_hdr.msg_controllen = kControl;
      cmsghdr* cm = CMSG_FIRSTHDR(&m.msg_hdr);
      cm->cmsg_level = IPPROTO_UDP;
      cm->cmsg_type = UDP_SEGMENT;
      cm->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
      const auto seg = static_cast<std::uint16_t>(sizes[i]);
      std::memcpy(CMSG_DATA(cm), &seg, sizeof seg);
    }
    msgs.push_back(m);
    counts.push_back(k);
    i += k;
  }
}

}  // namespace

void send_all(int fd, const std::vector<const std::uint8_t*>& data,
              const std::vector<std::size_t>& sizes) {
  std::vector<iovec> iov;
  std::vector<mmsghdr> msgs;
  std::vector<std::size_t> counts;
  std::vector<std::uint8_t> control;
  std::size_t first = 0;  // the first datagram not sent yet
  bool gso = gso_works.load(std::memory_order_relaxed);
  build_messages(data, sizes, gso, iov, msgs, counts, control);
  std::size_t done = 0;
  while (done < msgs.size()) {
    const int k = ::sendmmsg(fd, msgs.data() + done, static_cast<unsigned>(msgs.size() - done), 0);
    if (k < 0) {
      // ECONNREFUSED: nobody listens yet on loopback (an ICMP error of an earlier datagram):
      // the datagram is gone, as on a real network; carry on.
      if (errno == EINTR || errno == ECONNREFUSED) continue;
      if (errno == ENOBUFS || errno == EAGAIN) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      if (gso && counts[done] > 1 &&
          (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT || errno == EMSGSIZE)) {
        // No segmentation offload here (an old kernel, or a path whose MTU is below a
        // datagram): the rest goes one datagram per message.
        gso_works = gso = false;
        const std::vector<const std::uint8_t*> rest(data.begin() + static_cast<long>(first),
                                                    data.end());
        const std::vector<std::size_t> rest_sizes(sizes.begin() + static_cast<long>(first),
                                                  sizes.end());
        send_all(fd, rest, rest_sizes);
        return;
      }
      fail(ErrorCategory::io, "sendmmsg failed: {}", std::strerror(errno));
    }
    for (int j = 0; j < k; ++j)
      first += counts[done + static_cast<std::size_t>(j)];
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
