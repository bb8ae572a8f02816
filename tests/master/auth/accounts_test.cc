// Users, sessions, API tokens and workspaces against a real PostgreSQL (master/auth/accounts.h),
// the REST route matching of the access policy (access_policy.h), and the login rate limiter's
// bounds (login_limiter.h).
#include "master/auth/accounts.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/sha256.h"
#include "master/auth/access_policy.h"
#include "master/auth/login_limiter.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {

class AccountsTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    accounts_ = std::make_unique<Accounts>(db_.get());
  }
  int64_t Count(const std::string& sql) {
    int64_t n = -1;
    EXPECT_TRUE(db_->Transact("count",
                              [&](pqxx::work& tx) {
                                n = tx.exec1(sql)[0].as<int64_t>();
                                return Status::Ok();
                              })
                    .ok());
    return n;
  }
  std::unique_ptr<Accounts> accounts_;
};

TEST_F(AccountsTest, TheFirstStartMakesAnAdminOnceAndStoresNoPasswordInClear) {
  auto made = accounts_->Bootstrap("");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ASSERT_GE(made->size(), 16u);
  EXPECT_EQ(Count("SELECT count(*) FROM users WHERE username = 'admin' AND role = 'admin'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM users WHERE password_hash LIKE '$argon2id$%'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM users WHERE strpos(password_hash, '" + *made + "') > 0"),
            0);
  auto again = accounts_->Bootstrap("");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, "") << "a second start makes no new admin";
  EXPECT_TRUE(accounts_->Login("admin", *made).ok());
}

TEST_F(AccountsTest, LoginsSessionsAndApiTokensAuthenticateUntilRevokedExpiredOrDeactivated) {
  ASSERT_TRUE(accounts_->CreateUser("alice", "alice-password", Role::kUser).ok());
  EXPECT_EQ(accounts_->CreateUser("alice", "another-password", Role::kUser).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(accounts_->CreateUser("bad name", "long-enough", Role::kUser).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(accounts_->CreateUser("bob", "short", Role::kUser).status().code(),
            StatusCode::kInvalidArgument);
  // Wrong password and unknown user say the same.
  auto wrong = accounts_->Login("alice", "nope-nope");
  auto unknown = accounts_->Login("nobody", "nope-nope");
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong.status().message(), unknown.status().message());
  EXPECT_EQ(accounts_->Login("\xff\xfe", "x").status().code(), StatusCode::kUnauthenticated);

  auto session = accounts_->Login("alice", "alice-password");
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ(session->token.rfind("sfs_", 0), 0u);
  auto who = accounts_->Authenticate(session->token);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->username, "alice");
  EXPECT_EQ(who->role, Role::kUser);
  // Only the hash is stored.
  EXPECT_EQ(Count("SELECT count(*) FROM auth_tokens WHERE token_sha256 = '" +
                  Sha256Hex(session->token) + "'"),
            1);
  EXPECT_EQ(Count("SELECT count(*) FROM auth_tokens WHERE strpos(token_sha256, '" +
                  session->token.substr(4, 32) + "') > 0"),
            0);

  auto api = accounts_->CreateApiToken(*who, "ci", 0);
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(api->token.rfind("sfa_", 0), 0u);
  EXPECT_TRUE(accounts_->Authenticate(api->token).ok());
  auto short_lived = accounts_->CreateApiToken(*who, "brief", 1);
  ASSERT_TRUE(short_lived.ok());

  // Someone else may not revoke alice's token; alice may.
  ASSERT_TRUE(accounts_->CreateUser("bob", "bob-password", Role::kUser).ok());
  auto bob = accounts_->Authenticate(accounts_->Login("bob", "bob-password")->token);
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ(accounts_->RevokeToken(*bob, api->info.id).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(accounts_->RevokeToken(*who, api->info.id).ok());
  auto revoked = accounts_->Authenticate(api->token);
  EXPECT_EQ(revoked.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(revoked.status().message(), "token revoked") << "refused at once, not after the cache";

  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(accounts_->Authenticate(short_lived->token).status().message(), "token expired");
  EXPECT_EQ(accounts_->Authenticate("sfa_" + std::string(64, '0')).status().message(),
            "unknown token");
  EXPECT_EQ(accounts_->Authenticate("Bearer").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(accounts_->Authenticate(std::string(100000, 'a')).status().code(),
            StatusCode::kUnauthenticated);

  // Deactivation ends sessions and refuses API tokens; a new password ends sessions.
  auto api2 = accounts_->CreateApiToken(*who, "ci2", 0);
  ASSERT_TRUE(accounts_->SetActive("alice", false).ok());
  EXPECT_EQ(accounts_->Authenticate(session->token).status().message(), "token revoked");
  EXPECT_EQ(accounts_->Authenticate(api2->token).status().message(), "user alice is deactivated");
  EXPECT_EQ(accounts_->Login("alice", "alice-password").status().message(),
            "user alice is deactivated");
  ASSERT_TRUE(accounts_->SetActive("alice", true).ok());
  EXPECT_TRUE(accounts_->Authenticate(api2->token).ok());
  auto s2 = accounts_->Login("alice", "alice-password");
  ASSERT_TRUE(accounts_->SetPassword("alice", "new-alice-password").ok());
  EXPECT_EQ(accounts_->Authenticate(s2->token).status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(accounts_->Login("alice", "new-alice-password").ok());
  // A role change shows at once.
  ASSERT_TRUE(accounts_->SetRole("alice", Role::kViewer).ok());
  EXPECT_EQ(accounts_->Authenticate(api2->token)->role, Role::kViewer);
}

TEST_F(AccountsTest, WorkspaceMembersShareControlOfTheirExperiments) {
  ASSERT_TRUE(accounts_->CreateUser("alice", "alice-password", Role::kUser).ok());
  ASSERT_TRUE(accounts_->CreateUser("bob", "bob-password", Role::kUser).ok());
  ASSERT_TRUE(accounts_->CreateUser("vic", "vic-password", Role::kViewer).ok());
  auto alice = *accounts_->Authenticate(accounts_->Login("alice", "alice-password")->token);
  auto bob = *accounts_->Authenticate(accounts_->Login("bob", "bob-password")->token);
  auto vic = *accounts_->Authenticate(accounts_->Login("vic", "vic-password")->token);
  auto ws = accounts_->CreateWorkspace("nlp", alice);
  ASSERT_TRUE(ws.ok()) << ws.status().ToString();
  EXPECT_EQ(accounts_->CreateWorkspace("nlp", alice).status().code(), StatusCode::kAlreadyExists);
  Authorizer authz(accounts_.get(), db_.get());
  EXPECT_TRUE(authz.WorkspaceForNewExperiment(alice, "nlp").ok());
  EXPECT_EQ(authz.WorkspaceForNewExperiment(bob, "nlp").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(authz.WorkspaceForNewExperiment(vic, "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(*authz.WorkspaceForNewExperiment(bob, ""), Accounts::kDefaultWorkspace);
  EXPECT_EQ(authz.WorkspaceForNewExperiment(bob, "nope").status().code(), StatusCode::kNotFound);

  Store store(db_.get());
  NewExperiment e;
  e.name = "x";
  e.config_yaml = "name: x";
  e.searcher = "single";
  e.metric = "validation_loss";
  e.state = "PAUSED";
  e.owner = "alice";
  e.workspace_id = ws->id;
  auto id = store.CreateExperiment(e);
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(authz.MayActOnExperiment(alice, *id, "kill").ok());
  Status bob_kill = authz.MayActOnExperiment(bob, *id, "kill");
  EXPECT_EQ(bob_kill.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(bob_kill.message(),
            "user bob may not kill experiment " + std::to_string(*id) +
                ": it belongs to alice and bob is not an editor of workspace nlp");
  EXPECT_EQ(authz.MayManageWorkspace(bob, "nlp").code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(accounts_->SetMember("nlp", "bob", "editor").ok());
  EXPECT_TRUE(authz.MayActOnExperiment(bob, *id, "kill").ok());
  EXPECT_EQ(authz.MayManageWorkspace(bob, "nlp").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(authz.MayActOnExperiment(vic, *id, "kill").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(accounts_->SetMember("nlp", "bob", "owner").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(accounts_->RemoveMember("nlp", "bob").ok());
  EXPECT_EQ(authz.MayActOnExperiment(bob, *id, "kill").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(authz.Check(Principal(), Need::kSignedIn, "read", {}).code(),
            StatusCode::kUnauthenticated);
}

TEST(AccessPolicyTest, LiteralRoutesWinOverTemplatesAndUnknownRoutesMatchNothing) {
  auto kill_all = MatchRest("POST", "/api/v1/experiments/kill");
  ASSERT_TRUE(kill_all);
  EXPECT_EQ(kill_all->rule->need, Need::kExperiments);
  auto kill_one = MatchRest("POST", "/api/v1/experiments/12/kill");
  ASSERT_TRUE(kill_one);
  EXPECT_EQ(kill_one->rule->need, Need::kExperiment);
  EXPECT_EQ(kill_one->params.at("id"), "12");
  bool known = false;
  EXPECT_FALSE(MatchRest("PATCH", "/api/v1/experiments/12", &known));
  EXPECT_TRUE(known) << "the path exists with other methods: 405, not 404";
  EXPECT_FALSE(MatchRest("GET", "/api/v1/nothing", &known));
  EXPECT_FALSE(known);
  EXPECT_FALSE(MatchRest("GET", "/api/v1/experiments//trials"));
  // Each (method, route) once.
  std::set<std::pair<std::string, std::string>> seen;
  for (const RestRule& r : RestPolicy())
    EXPECT_TRUE(seen.insert({r.method, r.route}).second) << r.route;
}

TEST(LoginLimiterTest, BurstThenWaitAndBoundedMemory) {
  LoginLimiter limiter(LoginLimiter::Options{3, 0.2, 100});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.Allow("alice", "10.0.0.1").ok()) << i;
    limiter.Failed("alice", "10.0.0.1");
  }
  Status refused = limiter.Allow("alice", "10.0.0.2");
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("for alice; retry in"), std::string::npos) << refused.message();
  EXPECT_EQ(limiter.Allow("bob", "10.0.0.1").code(), StatusCode::kResourceExhausted)
      << "per address too";
  EXPECT_TRUE(limiter.Allow("bob", "10.0.0.3").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_TRUE(limiter.Allow("alice", "10.0.0.2").ok()) << "refilled";
  // A flood of made-up names from made-up addresses stays within max_keys per table.
  for (int i = 0; i < 5000; ++i) {
    std::string n = std::to_string(i);
    if (limiter.Allow("u" + n, "a" + n).ok()) limiter.Failed("u" + n, "a" + n);
  }
  EXPECT_LE(limiter.keys(), 200u);
}

}  // namespace
}  // namespace sf::master
