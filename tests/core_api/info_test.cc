// sf::core::InfoFromEnvironment: what a task reads from the environment the agent set, and the
// errors that name a malformed variable.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core_api/steadfast_core.h"

namespace sf::core {
namespace {

class InfoFromEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SF_MASTER_ADDRESS", "127.0.0.1:1", 1);
    setenv("SF_TRIAL_ID", "7", 1);
    setenv("SF_CHECKPOINT_DIR", "/ckpt/7", 1);
    setenv("SF_RESTORE_CHECKPOINT", "/ckpt/7/c3", 1);
    setenv("SF_LATEST_CHECKPOINT", "c3", 1);
  }
  void TearDown() override {
    for (const char* v : {"SF_MASTER_ADDRESS", "SF_TRIAL_ID", "SF_CHECKPOINT_DIR", "SF_RESTORE_CHECKPOINT",
                          "SF_LATEST_CHECKPOINT", "SF_RESTORE_FALLBACKS"})
      unsetenv(v);
  }
};

TEST_F(InfoFromEnvironmentTest, ReadsTheCheckpointToResumeFromAndItsFallbacksNewestFirst) {
  auto none = InfoFromEnvironment();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->restore_checkpoint, "/ckpt/7/c3");
  EXPECT_EQ(none->latest_checkpoint, "c3");
  EXPECT_TRUE(none->restore_fallbacks.empty());

  setenv("SF_RESTORE_FALLBACKS", R"([{"uuid": "c2", "path": "/ckpt/7/c2"}, {"uuid": "c1", "path": "/ckpt/7/c1"}])", 1);
  auto info = InfoFromEnvironment();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->restore_fallbacks.size(), 2u);
  EXPECT_EQ(info->restore_fallbacks[0].uuid, "c2");
  EXPECT_EQ(info->restore_fallbacks[0].dir, "/ckpt/7/c2");
  EXPECT_EQ(info->restore_fallbacks[1].uuid, "c1");
  EXPECT_EQ(info->restore_fallbacks[1].dir, "/ckpt/7/c1");
}

TEST_F(InfoFromEnvironmentTest, MalformedFallbacksAreRefusedByName) {
  for (const char* bad : {"not json", R"({"uuid": "c2"})", R"([{"uuid": "c2"}])", R"([{"uuid": 2, "path": "/p"}])"}) {
    setenv("SF_RESTORE_FALLBACKS", bad, 1);
    auto info = InfoFromEnvironment();
    ASSERT_FALSE(info.ok()) << bad;
    EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(info.status().message().find("SF_RESTORE_FALLBACKS"), std::string::npos) << info.status().message();
  }
}

}  // namespace
}  // namespace sf::core
