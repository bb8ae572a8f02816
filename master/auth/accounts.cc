#include "master/auth/accounts.h"

#include <sodium.h>

#include <chrono>
#include <regex>

#include "common/secret_file.h"
#include "common/sha256.h"
#include "common/utf8.h"

namespace sf::master {

namespace {

double SteadyNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Status CheckPassword(const std::string& password) {
  if (password.size() < Accounts::kMinPasswordBytes) {
    return InvalidArgument("password: must be at least " +
                           std::to_string(Accounts::kMinPasswordBytes) + " characters");
  }
  if (password.size() > Accounts::kMaxPasswordBytes) {
    return InvalidArgument("password: must be at most " +
                           std::to_string(Accounts::kMaxPasswordBytes) + " bytes");
  }
  if (!IsText(password)) return InvalidArgument("password: is not UTF-8 text without NUL");
  return Status::Ok();
}

// argon2id at libsodium's "interactive" cost (64 MiB, 2 passes): ~0.1 s on one core here.
Result<std::string> HashPassword(const std::string& password) {
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str(out, password.data(), password.size(), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                        crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
    return ResourceExhausted("password hashing ran out of memory");
  }
  return std::string(out);
}

// A hash to check wrong user names against, so an unknown name costs the same time as a
// known one with a wrong password.
const std::string& DummyHash() {
  static const std::string hash = [] {
    auto h = HashPassword("not-a-password-anyone-has");
    return h.ok() ? *h : std::string();
  }();
  return hash;
}

bool VerifyPassword(const std::string& hash, const std::string& password) {
  return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

void EndSessionsOf(pqxx::work& tx, int64_t user_id) {
  tx.exec_params(
      "UPDATE auth_tokens SET revoked_at = now() WHERE user_id = $1 AND kind = 'session' AND revoked_at IS NULL",
      user_id);
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  return ToHex(raw);
}

Status CheckWorkspaceRole(const std::string& role) {
  if (role == "viewer" || role == "editor" || role == "admin") return Status::Ok();
  return InvalidArgument("role: \"" + ReplaceInvalidUtf8(role) +
                         "\" is not a workspace role (viewer, editor, admin)");
}

Status CheckWorkspaceName(std::string_view name) {
  static const std::regex kName("^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$");
  if (!IsText(name) || !std::regex_match(name.begin(), name.end(), kName)) {
    return InvalidArgument(
        "workspace name: 1-64 letters, digits, spaces, '.', '_' or '-', starting with a letter or "
        "digit");
  }
  return Status::Ok();
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kUser:
      return "user";
    case Role::kViewer:
      return "viewer";
  }
  return "viewer";
}

std::optional<Role> RoleFromName(std::string_view name) {
  if (name == "admin") return Role::kAdmin;
  if (name == "user") return Role::kUser;
  if (name == "viewer") return Role::kViewer;
  return std::nullopt;
}

Status Accounts::CheckUsername(std::string_view name) {
  static const std::regex kName("^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
  if (!IsText(name) || !std::regex_match(name.begin(), name.end(), kName)) {
    return InvalidArgument(
        "username: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit");
  }
  return Status::Ok();
}

Accounts::Accounts(Database* db) : db_(db) {
  if (sodium_init() < 0) std::abort();  // libsodium cannot run without a random source
}

Result<std::string> Accounts::Bootstrap(const std::string& password) {
  std::string made = password.empty() ? RandomHex(12) : password;
  SF_RETURN_IF_ERROR(CheckPassword(made));
  SF_ASSIGN_OR_RETURN(std::string hash, HashPassword(made));
  bool created = false;
  Status st = db_->Transact("bootstrap admin", [&](pqxx::work& tx) {
    tx.exec("LOCK TABLE users IN EXCLUSIVE MODE");
    if (tx.exec1("SELECT count(*) FROM users")[0].as<int64_t>() > 0) return Status::Ok();
    tx.exec_params(
        "INSERT INTO users (username, password_hash, role) VALUES ('admin', $1, 'admin')", hash);
    created = true;
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (!created) return std::string();
  return password.empty() ? made : std::string();
}

Result<UserInfo> Accounts::CreateUser(const std::string& username, const std::string& password,
                                      Role role) {
  SF_RETURN_IF_ERROR(CheckUsername(username));
  SF_RETURN_IF_ERROR(CheckPassword(password));
  SF_ASSIGN_OR_RETURN(std::string hash, HashPassword(password));
  UserInfo u;
  Status st = db_->Transact("create user", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "INSERT INTO users (username, password_hash, role) VALUES ($1, $2, $3) ON CONFLICT "
        "(username) DO NOTHING "
        "RETURNING id, extract(epoch FROM created_at)::float8",
        username, hash, RoleName(role));
    if (r.empty()) return AlreadyExists("user " + username + " already exists");
    u = UserInfo{r[0][0].as<int64_t>(), username, role, true, r[0][1].as<double>()};
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return u;
}

Result<std::vector<UserInfo>> Accounts::ListUsers() {
  std::vector<UserInfo> out;
  Status st = db_->Transact("list users", [&](pqxx::work& tx) {
    for (const auto& row : tx.exec("SELECT id, username, role, active, extract(epoch FROM "
                                   "created_at)::float8 FROM users ORDER BY id")) {
      out.push_back(UserInfo{row[0].as<int64_t>(), row[1].as<std::string>(),
                             RoleFromName(row[2].as<std::string>()).value_or(Role::kViewer),
                             row[3].as<bool>(), row[4].as<double>()});
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<UserInfo> Accounts::GetUser(const std::string& username) {
  SF_RETURN_IF_ERROR(CheckUsername(username));
  std::optional<UserInfo> u;
  Status st = db_->Transact("get user", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT id, username, role, active, extract(epoch FROM created_at)::float8 FROM users "
        "WHERE username = $1",
        username);
    if (!r.empty()) {
      u = UserInfo{r[0][0].as<int64_t>(), r[0][1].as<std::string>(),
                   RoleFromName(r[0][2].as<std::string>()).value_or(Role::kViewer),
                   r[0][3].as<bool>(), r[0][4].as<double>()};
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (!u) return NotFound("no user " + username);
  return *u;
}

Status Accounts::SetActive(const std::string& username, bool active) {
  SF_RETURN_IF_ERROR(CheckUsername(username));
  Status st = db_->Transact("set user active", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("UPDATE users SET active = $2 WHERE username = $1 RETURNING id",
                                    username, active);
    if (r.empty()) return NotFound("no user " + username);
    if (!active) {
      // Deactivating ends the user's sessions; API tokens stay (and are refused while inactive).
      EndSessionsOf(tx, r[0][0].as<int64_t>());
    }
    return Status::Ok();
  });
  ForgetCached();
  return st;
}

Status Accounts::SetRole(const std::string& username, Role role) {
  SF_RETURN_IF_ERROR(CheckUsername(username));
  Status st = db_->Transact("set user role", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("UPDATE users SET role = $2 WHERE username = $1 RETURNING id",
                                    username, RoleName(role));
    if (r.empty()) return NotFound("no user " + username);
    return Status::Ok();
  });
  ForgetCached();
  return st;
}

Status Accounts::SetPassword(const std::string& username, const std::string& password) {
  SF_RETURN_IF_ERROR(CheckUsername(username));
  SF_RETURN_IF_ERROR(CheckPassword(password));
  SF_ASSIGN_OR_RETURN(std::string hash, HashPassword(password));
  Status st = db_->Transact("set password", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "UPDATE users SET password_hash = $2 WHERE username = $1 RETURNING id", username, hash);
    if (r.empty()) return NotFound("no user " + username);
    // A new password ends every login session made with the old one.
    EndSessionsOf(tx, r[0][0].as<int64_t>());
    return Status::Ok();
  });
  ForgetCached();
  return st;
}

Result<IssuedToken> Accounts::Login(const std::string& username, const std::string& password) {
  const Status wrong = Unauthenticated("wrong username or password");
  if (!CheckUsername(username).ok() || password.size() > kMaxPasswordBytes) return wrong;
  std::optional<UserInfo> user;
  std::string hash;
  Status st = db_->Transact("login", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT id, role, active, password_hash FROM users WHERE username = $1", username);
    if (!r.empty()) {
      user = UserInfo{r[0][0].as<int64_t>(), username,
                      RoleFromName(r[0][1].as<std::string>()).value_or(Role::kViewer),
                      r[0][2].as<bool>(), 0};
      hash = r[0][3].as<std::string>();
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (!user) {
    (void)VerifyPassword(DummyHash(), password);
    return wrong;
  }
  if (!VerifyPassword(hash, password)) return wrong;
  if (!user->active) return Unauthenticated("user " + username + " is deactivated");
  return Issue(user->id, username, "session", "login", kSessionSeconds);
}

Result<IssuedToken> Accounts::CreateApiToken(const Principal& owner, const std::string& name,
                                             int64_t expires_in_seconds) {
  if (name.empty() || name.size() > 100 || !IsText(name)) {
    return InvalidArgument("name: 1-100 characters of UTF-8 text");
  }
  if (expires_in_seconds < 0 || expires_in_seconds > 10LL * 365 * 24 * 3600) {
    return InvalidArgument("expiresInSeconds: must be 0 (never) to 10 years");
  }
  return Issue(owner.user_id, owner.username, "api", name, expires_in_seconds);
}

Result<IssuedToken> Accounts::Issue(int64_t user_id, const std::string& username,
                                    const std::string& kind, const std::string& name,
                                    int64_t expires_in_seconds) {
  IssuedToken out;
  out.token = (kind == "session" ? "sfs_" : "sfa_") + RandomHex(32);
  Status st = db_->Transact("issue token", [&](pqxx::work& tx) {
    pqxx::row r = tx.exec_params1(
        "INSERT INTO auth_tokens (user_id, kind, name, token_sha256, expires_at) "
        "VALUES ($1, $2, $3, $4, CASE WHEN $5::bigint > 0 THEN now() + make_interval(secs => "
        "$5::bigint) END) "
        "RETURNING id, extract(epoch FROM created_at)::float8, COALESCE(extract(epoch FROM "
        "expires_at)::float8, 0)",
        user_id, kind, name, Sha256Hex(out.token), expires_in_seconds);
    out.info = TokenInfo{r[0].as<int64_t>(), name, username, kind, r[1].as<double>(),
                         r[2].as<double>(),  0,    false};
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::vector<TokenInfo>> Accounts::ListTokens(const Principal& caller, bool all) {
  std::vector<TokenInfo> out;
  Status st = db_->Transact("list tokens", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT t.id, t.name, u.username, t.kind, extract(epoch FROM t.created_at)::float8, "
        "COALESCE(extract(epoch FROM t.expires_at)::float8, 0), COALESCE(extract(epoch FROM "
        "t.last_used_at)::float8, 0), "
        "t.revoked_at IS NOT NULL FROM auth_tokens t JOIN users u ON u.id = t.user_id "
        "WHERE ($1 OR t.user_id = $2) AND (t.kind = 'api' OR (t.revoked_at IS NULL AND "
        "t.expires_at > now())) "
        "ORDER BY t.id LIMIT 10000",
        all, caller.user_id);
    for (const auto& row : r) {
      out.push_back(TokenInfo{row[0].as<int64_t>(), row[1].as<std::string>(),
                              row[2].as<std::string>(), row[3].as<std::string>(),
                              row[4].as<double>(), row[5].as<double>(), row[6].as<double>(),
                              row[7].as<bool>()});
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Status Accounts::RevokeToken(const Principal& caller, int64_t id) {
  Status st = db_->Transact("revoke token", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("SELECT user_id FROM auth_tokens WHERE id = $1", id);
    if (r.empty()) return NotFound("no token " + std::to_string(id));
    if (r[0][0].as<int64_t>() != caller.user_id && caller.role != Role::kAdmin) {
      return PermissionDenied("token " + std::to_string(id) +
                              " belongs to another user; only an admin may revoke it");
    }
    tx.exec_params("UPDATE auth_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1",
                   id);
    return Status::Ok();
  });
  ForgetCached();
  return st;
}

Status Accounts::EndSession(const Principal& caller) {
  Status st = db_->Transact("end session", [&](pqxx::work& tx) {
    tx.exec_params(
        "UPDATE auth_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 AND kind = "
        "'session'",
        caller.token_id);
    return Status::Ok();
  });
  ForgetCached();
  return st;
}

Result<Principal> Accounts::Authenticate(std::string_view token) {
  if (token.size() > kMaxTokenBytes)
    return Unauthenticated("token longer than " + std::to_string(kMaxTokenBytes) + " bytes");
  if (!(token.rfind("sfs_", 0) == 0 || token.rfind("sfa_", 0) == 0) || token.size() != 68) {
    return Unauthenticated("not a Steadfast token (sfs_… or sfa_…, 68 characters)");
  }
  const std::string hash = Sha256Hex(token);
  const double now = SteadyNow();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(hash);
    if (it != cache_.end() && it->second.until > now && SecretEquals(it->second.hash, hash))
      return it->second.principal;
  }
  Principal p;
  Status refused = Status::Ok();
  Status st = db_->Transact("authenticate", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT t.id, t.revoked_at IS NOT NULL, t.expires_at IS NOT NULL AND t.expires_at <= "
        "now(), u.id, u.username, "
        "u.role, u.active FROM auth_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_sha256 "
        "= $1",
        hash);
    if (r.empty()) {
      refused = Unauthenticated("unknown token");
      return Status::Ok();
    }
    if (r[0][1].as<bool>()) {
      refused = Unauthenticated("token revoked");
    } else if (r[0][2].as<bool>()) {
      refused = Unauthenticated("token expired");
    } else if (!r[0][6].as<bool>()) {
      refused = Unauthenticated("user " + r[0][4].as<std::string>() + " is deactivated");
    } else {
      p.token_id = r[0][0].as<int64_t>();
      p.user_id = r[0][3].as<int64_t>();
      p.username = r[0][4].as<std::string>();
      p.role = RoleFromName(r[0][5].as<std::string>()).value_or(Role::kViewer);
      tx.exec_params("UPDATE auth_tokens SET last_used_at = now() WHERE id = $1", p.token_id);
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (!refused.ok()) return refused;
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() >= 10000) cache_.clear();  // bounded; refilled from the database
  cache_[hash] = Cached{hash, p, now + kCacheSeconds};
  return p;
}

void Accounts::ForgetCached() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
}

Result<std::vector<WorkspaceInfo>> Accounts::ListWorkspaces() {
  std::vector<WorkspaceInfo> out;
  Status st = db_->Transact("list workspaces", [&](pqxx::work& tx) {
    std::map<int64_t, size_t> index;
    for (const auto& row : tx.exec("SELECT id, name FROM workspaces ORDER BY id")) {
      index[row[0].as<int64_t>()] = out.size();
      out.push_back(WorkspaceInfo{row[0].as<int64_t>(), row[1].as<std::string>(), {}});
    }
    for (const auto& row :
         tx.exec("SELECT m.workspace_id, u.username, m.role FROM workspace_members m "
                 "JOIN users u ON u.id = m.user_id ORDER BY u.username")) {
      auto it = index.find(row[0].as<int64_t>());
      if (it != index.end())
        out[it->second].members.emplace_back(row[1].as<std::string>(), row[2].as<std::string>());
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<WorkspaceInfo> Accounts::CreateWorkspace(const std::string& name, const Principal& creator) {
  SF_RETURN_IF_ERROR(CheckWorkspaceName(name));
  WorkspaceInfo w;
  Status st = db_->Transact("create workspace", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "INSERT INTO workspaces (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING id",
        name);
    if (r.empty()) return AlreadyExists("workspace " + name + " already exists");
    w.id = r[0][0].as<int64_t>();
    w.name = name;
    if (creator.user_id > 0) {
      tx.exec_params(
          "INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, 'admin')",
          w.id, creator.user_id);
      w.members.emplace_back(creator.username, "admin");
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return w;
}

Result<int64_t> Accounts::WorkspaceId(const std::string& name) {
  if (!IsText(name)) return InvalidArgument("workspace: is not UTF-8 text");
  std::optional<int64_t> id;
  Status st = db_->Transact("workspace id", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("SELECT id FROM workspaces WHERE name = $1", name);
    if (!r.empty()) id = r[0][0].as<int64_t>();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (!id) return NotFound("no workspace " + name);
  return *id;
}

Status Accounts::SetMember(const std::string& workspace, const std::string& username,
                           const std::string& role) {
  SF_RETURN_IF_ERROR(CheckWorkspaceRole(role));
  SF_ASSIGN_OR_RETURN(int64_t ws, WorkspaceId(workspace));
  if (ws == kDefaultWorkspace) return FailedPrecondition("workspace Uncategorized has no members");
  SF_ASSIGN_OR_RETURN(UserInfo user, GetUser(username));
  return db_->Transact("set workspace member", [&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, $3) "
        "ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = EXCLUDED.role",
        ws, user.id, role);
    return Status::Ok();
  });
}

Status Accounts::RemoveMember(const std::string& workspace, const std::string& username) {
  SF_ASSIGN_OR_RETURN(int64_t ws, WorkspaceId(workspace));
  SF_ASSIGN_OR_RETURN(UserInfo user, GetUser(username));
  return db_->Transact("remove workspace member", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "DELETE FROM workspace_members WHERE workspace_id = $1 AND user_id = $2 RETURNING 1", ws,
        user.id);
    if (r.empty()) return NotFound(username + " is not a member of workspace " + workspace);
    return Status::Ok();
  });
}

Result<std::string> Accounts::WorkspaceRole(int64_t user_id, int64_t workspace_id) {
  std::string role;
  Status st = db_->Transact("workspace role", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT role FROM workspace_members WHERE workspace_id = $1 AND user_id = $2", workspace_id,
        user_id);
    if (!r.empty()) role = r[0][0].as<std::string>();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return role;
}

Result<std::vector<std::pair<std::string, std::string>>> Accounts::MembershipsOf(int64_t user_id) {
  std::vector<std::pair<std::string, std::string>> out;
  Status st = db_->Transact("memberships", [&](pqxx::work& tx) {
    for (const auto& row :
         tx.exec_params("SELECT w.name, m.role FROM workspace_members m JOIN workspaces w "
                        "ON w.id = m.workspace_id WHERE m.user_id = $1 ORDER BY w.name",
                        user_id)) {
      out.emplace_back(row[0].as<std::string>(), row[1].as<std::string>());
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace sf::master
