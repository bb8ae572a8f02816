// host_network.h: which host a rank is on, and which interface reaches a given address.
#include "trainer/distributed/host_network.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/e2e/netns.h"

namespace sf::dist {
namespace {

TEST(HostNetwork, HostKeyNamesThisBootAndNetworkNamespace) {
  const std::string key = HostKey();
  EXPECT_EQ(key, HostKey());
  EXPECT_NE(key.find("/net:"), std::string::npos) << key;
  EXPECT_GT(key.size(), 10u) << key;
}

TEST(HostNetwork, LoopbackAndUnreadableTargetsGiveNoInterface) {
  EXPECT_EQ(RouteInterface("127.0.0.1:4000"), "");
  EXPECT_EQ(RouteInterface("dns:///localhost:4000"), "");
  EXPECT_EQ(RouteInterface("[::1]:4000"), "");
  EXPECT_EQ(RouteInterface("no-port"), "");
  EXPECT_EQ(RouteInterface("a:b:c"), "");
  EXPECT_EQ(RouteInterface("host.invalid:80"), "");
}

TEST(HostNetwork, RouteInterfaceIsTheOneTheKernelWouldSendThrough) {
  sf::testing::TestNetwork net(1);
  if (!net.ok()) GTEST_SKIP() << "needs CAP_NET_ADMIN and iproute2: " << net.why();
  // An address on the bridge's subnet is reached through the bridge, whatever other
  // interfaces this host has.
  const std::string bridge = "sfbr" + std::to_string(getpid());
  EXPECT_EQ(RouteInterface(net.address(0) + ":7000"), bridge);
}

}  // namespace
}  // namespace sf::dist
