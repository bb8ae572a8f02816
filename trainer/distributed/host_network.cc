#include "trainer/distributed/host_network.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

namespace sf::dist {
namespace {

// Splits "HOST:PORT" / "[V6]:PORT" (after an optional "scheme:///" prefix) into host and port.
bool SplitHostPort(std::string target, std::string* host, std::string* port) {
  const size_t scheme = target.find(":///");
  if (scheme != std::string::npos) target = target.substr(scheme + 4);
  if (!target.empty() && target[0] == '[') {
    const size_t close = target.find(']');
    if (close == std::string::npos || close + 1 >= target.size() || target[close + 1] != ':') return false;
    *host = target.substr(1, close - 1);
    *port = target.substr(close + 2);
    return true;
  }
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || target.find(':') != colon) return false;
  *host = target.substr(0, colon);
  *port = target.substr(colon + 1);
  return !host->empty() && !port->empty();
}

bool SameAddress(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

std::string HostKey() {
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  if (boot.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    boot = name;
  }
  struct stat ns {};
  if (stat("/proc/self/ns/net", &ns) == 0) boot += "/net:" + std::to_string(ns.st_ino);
  return boot;
}

std::string RouteInterface(const std::string& host_port) {
  std::string host, port;
  if (!SplitHostPort(host_port, &host, &port)) return "";
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) return "";
  std::string name;
  for (addrinfo* a = found; a != nullptr && name.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    // connect() on a UDP socket only picks the route and the source address; nothing is sent.
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      ifaddrs* ifs = nullptr;
      if (getifaddrs(&ifs) == 0) {
        for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
          if (i->ifa_addr == nullptr || !SameAddress(i->ifa_addr, reinterpret_cast<sockaddr*>(&local))) continue;
          if ((i->ifa_flags & IFF_LOOPBACK) == 0) name = i->ifa_name;
          break;
        }
        freeifaddrs(ifs);
      }
    }
    close(fd);
  }
  freeaddrinfo(found);
  return name;
}

}  // namespace sf::dist
