// sf-master's scheduling settings (master/master_config.h): as scalars and flags, as the
// mappings the issue writes (`scheduler: {type: fair_share}`), and the errors that name the key.
#include "master/master_config.h"

#include <gtest/gtest.h>

#include "tests/support/testing.h"

namespace sf::master {
namespace {

class MasterConfigTest : public ::testing::Test {
 protected:
  Result<MasterConfig> Load(const std::string& yaml, std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {"--config", dir_.WriteFile("master.yaml", yaml)};
    args.insert(args.end(), flags.begin(), flags.end());
    return LoadMasterConfig(args);
  }
  sf::testing::TempDir dir_;
};

TEST_F(MasterConfigTest, SchedulingSettingsHaveTheirDefaults) {
  auto c = Load("cluster_name: x\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler, SchedulingMode::kPriority);
  EXPECT_TRUE(c->pool_schedulers.empty());
  EXPECT_EQ(c->preemption_grace_seconds, 300);
  EXPECT_EQ(c->min_run_seconds, 60);
}

TEST_F(MasterConfigTest, SchedulingSettingsAsScalarsAndFlags) {
  auto c = Load(
      "scheduler: fair_share\npool_schedulers: gpu=fair_share,cpu=priority\n"
      "preemption_grace_seconds: 30\nmin_run_seconds: 0\n",
      {"--pool-schedulers", "gpu=priority"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler, SchedulingMode::kFairShare);
  // The flag replaces the file's whole list.
  EXPECT_EQ(c->pool_schedulers, (std::map<std::string, SchedulingMode>{{"gpu", SchedulingMode::kPriority}}));
  EXPECT_EQ(c->preemption_grace_seconds, 30);
  EXPECT_EQ(c->min_run_seconds, 0);
}

TEST_F(MasterConfigTest, SchedulingSettingsAsMappings) {
  auto c = Load("scheduler: {type: fair_share}\npool_schedulers: {gpu: {type: fair_share}, cpu: priority}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler, SchedulingMode::kFairShare);
  EXPECT_EQ(c->pool_schedulers, (std::map<std::string, SchedulingMode>{{"cpu", SchedulingMode::kPriority},
                                                                       {"gpu", SchedulingMode::kFairShare}}));
}

TEST_F(MasterConfigTest, BadSchedulingSettingsNameTheKey) {
  auto bad_type = Load("scheduler: {type: lottery}\n");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("scheduler: \"lottery\" must be priority or fair_share"),
            std::string::npos)
      << bad_type.status().message();
  auto bad_pool = Load("pool_schedulers: {gpu: [fair_share]}\n");
  ASSERT_FALSE(bad_pool.ok());
  EXPECT_NE(bad_pool.status().message().find("pool_schedulers: gpu: expected {type: priority|fair_share}"),
            std::string::npos)
      << bad_pool.status().message();
  auto bad_grace = Load("preemption_grace_seconds: 0\n");
  ASSERT_FALSE(bad_grace.ok());
  EXPECT_NE(bad_grace.status().message().find("preemption_grace_seconds"), std::string::npos);
  // Other settings stay scalars.
  auto map_port = Load("http_port: {type: 8080}\n");
  ASSERT_FALSE(map_port.ok());
  EXPECT_NE(map_port.status().message().find("http_port: expected a value"), std::string::npos)
      << map_port.status().message();
}

// Safe default (docs/security.md): loopback unless told otherwise, and a non-loopback address only
// with --insecure while the API is neither authenticated nor encrypted.
TEST_F(MasterConfigTest, ANonLoopbackBindNeedsInsecure) {
  auto defaults = Load("cluster_name: x\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->bind_address, "127.0.0.1");
  EXPECT_FALSE(defaults->insecure);
  for (std::string address : {"0.0.0.0", "10.1.2.3", "::"}) {
    auto refused = Load("cluster_name: x\n", {"--bind", address});
    ASSERT_FALSE(refused.ok()) << address;
    EXPECT_NE(refused.status().message().find("bind: " + address + " is not a loopback address"), std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find("--insecure"), std::string::npos);
  }
  auto flag = Load("cluster_name: x\n", {"--bind", "0.0.0.0", "--insecure"});
  ASSERT_TRUE(flag.ok()) << flag.status().ToString();
  EXPECT_TRUE(flag->insecure);
  auto file = Load("bind: 10.1.2.3\ninsecure: true\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto off = Load("bind: 10.1.2.3\ninsecure: true\n", {"--insecure=false"});
  EXPECT_FALSE(off.ok());
  for (std::string address : {"127.0.0.1", "127.0.1.1", "::1", "localhost"}) {
    EXPECT_TRUE(Load("cluster_name: x\n", {"--bind", address}).ok()) << address;
  }
  EXPECT_FALSE(Load("insecure: maybe\n").ok());
}

}  // namespace
}  // namespace sf::master
