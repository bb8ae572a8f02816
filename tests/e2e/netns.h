// A private network for end-to-end tests: a bridge in the test's namespace and N network
// namespaces, each joined to the bridge by a veth pair, so processes in different namespaces
// talk over a (virtual) network with their own addresses and no shared loopback. Addresses
// are 10.251.S.0/24, S picked from the test's pid; the bridge is .1, namespace i is .(i+2).
// Everything is removed by the destructor. Needs root (CAP_NET_ADMIN) and iproute2; ok() is
// false with why() otherwise.
#pragma once

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace sf::testing {

class TestNetwork {
 public:
  explicit TestNetwork(int namespaces) {
    const int tag = static_cast<int>(getpid() % 200) + 20;
    prefix_ = "10.251." + std::to_string(tag) + ".";
    bridge_ = "sfbr" + std::to_string(getpid());
    if (!Ip({"link", "add", bridge_, "type", "bridge"})) return;
    if (!Ip({"addr", "add", prefix_ + "1/24", "dev", bridge_}) || !Ip({"link", "set", bridge_, "up"})) return;
    for (int i = 0; i < namespaces; ++i) {
      const std::string ns = "sf" + std::to_string(getpid()) + "n" + std::to_string(i);
      const std::string host = "sfv" + std::to_string(getpid()) + "h" + std::to_string(i);
      const std::string peer = "sfv" + std::to_string(getpid()) + "p" + std::to_string(i);
      if (!Ip({"netns", "add", ns})) return;
      namespaces_.push_back(ns);
      if (!Ip({"link", "add", host, "type", "veth", "peer", "name", peer}) ||
          !Ip({"link", "set", host, "master", bridge_}) || !Ip({"link", "set", host, "up"}) ||
          !Ip({"link", "set", peer, "netns", ns}) ||
          !Ip({"-n", ns, "addr", "add", address(i) + "/24", "dev", peer}) ||
          !Ip({"-n", ns, "link", "set", peer, "up"}) || !Ip({"-n", ns, "link", "set", "lo", "up"})) {
        return;
      }
      host_links_.push_back(host);
    }
    ok_ = true;
  }
  ~TestNetwork() {
    for (const auto& ns : namespaces_) Ip({"netns", "del", ns});
    for (const auto& l : host_links_) Ip({"link", "del", l});
    Ip({"link", "del", bridge_});
  }
  TestNetwork(const TestNetwork&) = delete;
  TestNetwork& operator=(const TestNetwork&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  std::string bridge_address() const { return prefix_ + "1"; }
  std::string address(int i) const { return prefix_ + std::to_string(i + 2); }
  const std::vector<std::string>& namespaces() const { return namespaces_; }
  // Cuts namespace i off (its veth's host end down: packets both ways are dropped, TCP
  // connections stay open but silent) or restores it.
  bool SetConnected(int i, bool connected) {
    return Ip({"link", "set", host_links_.at(static_cast<size_t>(i)), connected ? "up" : "down"});
  }
  // Bytes namespace i has sent into the bridge (its veth's far end received them).
  int64_t SentBytes(int i) const {
    std::ifstream in("/sys/class/net/" + host_links_.at(static_cast<size_t>(i)) + "/statistics/rx_bytes");
    int64_t n = 0;
    in >> n;
    return n;
  }

 private:
  bool Ip(const std::vector<std::string>& args) {
    std::vector<std::string> argv{"/usr/sbin/ip"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunCommand(argv);
    if (r.ok() && r->exit_code == 0) return true;
    if (why_.empty()) why_ = JoinCommand(argv) + ": " + (r.ok() ? r->output : r.status().message());
    return false;
  }

  bool ok_ = false;
  std::string why_, prefix_, bridge_;
  std::vector<std::string> namespaces_, host_links_;
};

}  // namespace sf::testing
