// Users, their credentials, and workspaces: who may call the master's API (docs/security.md).
//
// Contract:
// - A user has a name (1-64 of [A-Za-z0-9._-], starting with a letter or digit), a role
//   (admin, user, viewer) and an active flag. Passwords are stored as libsodium
//   crypto_pwhash_str strings (argon2id with its salt and cost inside); clear text never leaves
//   the call that hashes or checks it.
// - Bootstrap() runs at every master start: when no user exists it creates `admin` with the
//   password given (or a random one it returns, for the caller to print once).
// - A token is "sfs_" (a login session, 7 days) or "sfa_" (an API token: named, optional
//   expiry, for CI) followed by 64 hex digits of randomness (libsodium's randombytes). Only its
//   SHA-256 is stored; Authenticate() looks the hash up, so a token is never compared in clear,
//   and the cached entry is compared with SecretEquals (constant time).
// - Authenticate() answers kUnauthenticated with a one-line reason ("token expired", "token
//   revoked", "unknown token", "user bob is deactivated") that never contains the token. It
//   caches an answer for at most kCacheSeconds; every change that could alter an answer
//   (revoke, logout, deactivate, role or password change) empties the cache, so this master
//   refuses a revoked token at once. (Several masters on one database do not exist.)
// - Workspaces: experiments belong to one (default 1, "Uncategorized"); members have a
//   workspace role (viewer, editor, admin) that access_policy.h reads.
// - Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "master/auth/principal.h"
#include "master/db/database.h"

namespace sf::master {

struct UserInfo {
  int64_t id = 0;
  std::string username;
  Role role = Role::kViewer;
  bool active = true;
  double created_at = 0;  // seconds since the epoch
};

struct TokenInfo {
  int64_t id = 0;
  std::string name, username, kind;  // kind "session" or "api"
  double created_at = 0, expires_at = 0, last_used_at = 0;  // 0: none
  bool revoked = false;
};

struct IssuedToken {
  std::string token;  // shown once
  TokenInfo info;
};

struct WorkspaceInfo {
  int64_t id = 0;
  std::string name;
  std::vector<std::pair<std::string, std::string>> members;  // username, workspace role
};

class Accounts {
 public:
  static constexpr int kCacheSeconds = 5;
  static constexpr int64_t kSessionSeconds = 7 * 24 * 3600;
  static constexpr size_t kMaxTokenBytes = 512;
  static constexpr size_t kMinPasswordBytes = 8;
  static constexpr size_t kMaxPasswordBytes = 1024;
  static constexpr int64_t kDefaultWorkspace = 1;

  explicit Accounts(Database* db);

  // At start: creates `admin` (role admin) when there is no user yet. Returns the password it
  // set when it made one up (empty `password` given), "" otherwise.
  Result<std::string> Bootstrap(const std::string& password);

  Result<UserInfo> CreateUser(const std::string& username, const std::string& password, Role role);
  Result<std::vector<UserInfo>> ListUsers();
  Result<UserInfo> GetUser(const std::string& username);
  Status SetActive(const std::string& username, bool active);
  Status SetRole(const std::string& username, Role role);
  Status SetPassword(const std::string& username, const std::string& password);

  // A new session for `username` when `password` is right and the user is active;
  // kUnauthenticated "wrong username or password" otherwise (the same words for both).
  Result<IssuedToken> Login(const std::string& username, const std::string& password);
  Result<IssuedToken> CreateApiToken(const Principal& owner, const std::string& name, int64_t expires_in_seconds);
  // The caller's tokens (sessions included), or everyone's when `all`.
  Result<std::vector<TokenInfo>> ListTokens(const Principal& caller, bool all);
  // Revokes token `id`: the caller's own, or anyone's for an admin (kPermissionDenied else).
  Status RevokeToken(const Principal& caller, int64_t id);
  Status EndSession(const Principal& caller);  // logout: revokes the token the caller used

  Result<Principal> Authenticate(std::string_view token);

  // Workspaces.
  Result<std::vector<WorkspaceInfo>> ListWorkspaces();
  Result<WorkspaceInfo> CreateWorkspace(const std::string& name, const Principal& creator);
  Result<int64_t> WorkspaceId(const std::string& name);
  Status SetMember(const std::string& workspace, const std::string& username, const std::string& role);
  Status RemoveMember(const std::string& workspace, const std::string& username);
  // The user's role in the workspace ("" when not a member).
  Result<std::string> WorkspaceRole(int64_t user_id, int64_t workspace_id);
  // Every workspace the user is a member of: name -> role.
  Result<std::vector<std::pair<std::string, std::string>>> MembershipsOf(int64_t user_id);

  // Whether `name` is a valid user name (the rule above); the reason when not.
  static Status CheckUsername(std::string_view name);

 private:
  Result<IssuedToken> Issue(int64_t user_id, const std::string& username, const std::string& kind,
                            const std::string& name, int64_t expires_in_seconds);
  void ForgetCached();

  Database* db_;
  std::mutex mu_;
  struct Cached {
    std::string hash;
    Principal principal;
    double until = 0;  // steady seconds
  };
  std::map<std::string, Cached> cache_;  // by token hash
};

// Role names as stored and shown: "admin", "user", "viewer".
const char* RoleName(Role role);
std::optional<Role> RoleFromName(std::string_view name);

}  // namespace sf::master
