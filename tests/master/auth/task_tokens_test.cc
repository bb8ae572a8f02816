// TrialLink's per-task tokens: a token verifies only for the claims it was issued for (each
// field matters), malformed or missing tokens are refused with a reason that never repeats the
// token, and the secret lives in the database: every master of a cluster, and a master after a
// restart, issues and accepts the same tokens.
#include "master/auth/task_tokens.h"

#include <gtest/gtest.h>

#include <future>

#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {

const std::string kSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

TEST(TaskTokensTest, ATokenVerifiesOnlyForTheClaimsItWasIssuedFor) {
  auto tokens = TaskTokens::FromHexSecret(kSecret);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  const TaskClaims claims{12, 1, 3, "t12-r3-a5.1"};
  const std::string token = tokens->Issue(claims);
  EXPECT_EQ(token.rfind("sft1_", 0), 0u) << token;
  EXPECT_TRUE(tokens->Verify(token, claims).ok());
  const TaskClaims others[] = {{13, 1, 3, "t12-r3-a5.1"},  // another trial
                               {12, 0, 3, "t12-r3-a5.1"},  // another rank
                               {12, 1, 2, "t12-r3-a5.1"},  // an earlier restart
                               {12, 1, 3, "t12-r3-a4.1"},  // an earlier allocation
                               {12, 1, 3, ""}};
  for (const TaskClaims& other : others) {
    Status st = tokens->Verify(token, other);
    EXPECT_EQ(st.code(), StatusCode::kUnauthenticated) << other.task_id;
    EXPECT_EQ(st.message().find(token.substr(5)), std::string::npos) << "the reason repeats the token";
  }
  // Another cluster's secret makes other tokens.
  auto foreign = TaskTokens::FromHexSecret(std::string(64, '7'));
  ASSERT_TRUE(foreign.ok());
  EXPECT_NE(foreign->Issue(claims), token);
  EXPECT_EQ(tokens->Verify(foreign->Issue(claims), claims).code(), StatusCode::kUnauthenticated);
}

TEST(TaskTokensTest, MissingMalformedAndTruncatedTokensAreRefusedWithAReason) {
  auto tokens = TaskTokens::FromHexSecret(kSecret);
  ASSERT_TRUE(tokens.ok());
  const TaskClaims claims{7, 0, 0, "t7-r0-a1.0"};
  const std::string good = tokens->Issue(claims);
  Status none = tokens->Verify("", claims);
  EXPECT_EQ(none.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(none.message().find("x-sf-task-token"), std::string::npos) << none.message();
  for (const std::string& bad : {std::string("Bearer x"), std::string("sft1_zz"), good.substr(0, good.size() - 2),
                                 good + "00", "sft2_" + good.substr(5)}) {
    EXPECT_EQ(tokens->Verify(bad, claims).code(), StatusCode::kUnauthenticated) << bad;
  }
}

TEST(TaskTokensTest, ASecretMustBeSixtyFourHexDigits) {
  EXPECT_EQ(TaskTokens::FromHexSecret("abc").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TaskTokens::FromHexSecret(std::string(64, 'g')).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(TaskTokens::FromHexSecret(std::string(64, 'A')).ok());
}

class TaskTokenSecretTest : public testing::MigratedDatabaseTest {};

TEST_F(TaskTokenSecretTest, MastersOfOneDatabaseShareTheSecretAcrossRestarts) {
  // Two masters starting at once, then a third later (a restart): one secret for all.
  auto a = std::async(std::launch::async, [&] { return TaskTokens::Load(db_.get()); });
  auto b = std::async(std::launch::async, [&] { return TaskTokens::Load(db_.get()); });
  Result<TaskTokens> first = a.get(), second = b.get();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto restarted = TaskTokens::Load(db_.get());
  ASSERT_TRUE(restarted.ok());
  const TaskClaims claims{1, 0, 0, "t1-r0-a1.0"};
  const std::string token = first->Issue(claims);
  EXPECT_TRUE(second->Verify(token, claims).ok());
  EXPECT_TRUE(restarted->Verify(token, claims).ok());
  // A fresh database gets a secret of its own.
  sf::testing::PostgresServer* server = sf::testing::PostgresServer::Get();
  auto other_db = Database::Open(server->NewDatabase(), 1, std::chrono::seconds(10));
  ASSERT_TRUE(other_db.ok());
  ASSERT_TRUE((*other_db)->Migrate().ok());
  auto other = TaskTokens::Load(other_db->get());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->Verify(token, claims).code(), StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace sf::master
