// The account half of the method table (api_methods.h): sessions, users, API tokens and
// workspaces (docs/security.md). What each method needs is already checked by the access policy
// from its proto option; these add the per-object rules ("only your own tokens", "an admin may
// not deactivate themself") and the login rate limit.
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cstdlib>

#include "common/log.h"
#include "common/utf8.h"
#include "master/api/api_methods.h"

namespace sf::master {
namespace {

namespace v1 = steadfast::v1;
using google::protobuf::util::TimeUtil;

void SetTime(double seconds, google::protobuf::Timestamp* out) {
  *out = TimeUtil::NanosecondsToTimestamp(static_cast<int64_t>(seconds * 1e9));
}

v1::User UserMessage(const UserInfo& u) {
  v1::User out;
  out.set_username(u.username);
  out.set_role(RoleName(u.role));
  out.set_active(u.active);
  if (u.created_at > 0) SetTime(u.created_at, out.mutable_created_at());
  return out;
}

v1::UserResponse UserReply(const UserInfo& u) {
  v1::UserResponse out;
  *out.mutable_user() = UserMessage(u);
  return out;
}

v1::Token TokenMessage(const TokenInfo& t) {
  v1::Token out;
  out.set_id(t.id);
  out.set_name(t.name);
  out.set_username(t.username);
  out.set_kind(t.kind);
  if (t.created_at > 0) SetTime(t.created_at, out.mutable_created_at());
  if (t.expires_at > 0) SetTime(t.expires_at, out.mutable_expires_at());
  if (t.last_used_at > 0) SetTime(t.last_used_at, out.mutable_last_used_at());
  out.set_revoked(t.revoked);
  return out;
}

// A text field a request must carry: not empty, UTF-8 without NUL.
Status Required(const std::string& value, const char* field) {
  if (value.empty()) return InvalidArgument(std::string(field) + ": required");
  if (!IsText(value)) return InvalidArgument(std::string(field) + ": is not UTF-8 text without NUL");
  return Status::Ok();
}

Result<Role> RoleOf(const std::string& name) {
  SF_RETURN_IF_ERROR(Required(name, "role"));
  auto role = RoleFromName(name);
  if (!role) return InvalidArgument("role: \"" + ReplaceInvalidUtf8(name) + "\" is not a role (admin, user, viewer)");
  return *role;
}

}  // namespace

void ApiMethods::AddAccountMethods() {
  Accounts* accounts = deps_.accounts;
  LoginLimiter* limiter = deps_.login_limiter;
  // Without accounts (--disable-auth) every account method is NOT_FOUND, naming why.
  auto need = [accounts]() -> Status {
    return accounts ? Status::Ok() : NotFound("this master runs without authentication (--disable-auth)");
  };

  Add<v1::LoginRequest>("Login", [accounts, limiter, need](const v1::LoginRequest& r,
                                                          const Principal& caller) -> Result<v1::LoginResponse> {
    SF_RETURN_IF_ERROR(need());
    // A malformed name or password is a wrong login like any other (and is counted).
    const std::string name = IsText(r.username()) ? r.username() : "";
    if (limiter) SF_RETURN_IF_ERROR(limiter->Allow(name, caller.peer));
    if (!Required(r.username(), "username").ok() || !Required(r.password(), "password").ok()) {
      if (limiter) limiter->Failed(name, caller.peer);
      return Unauthenticated("wrong username or password");
    }
    auto issued = accounts->Login(r.username(), r.password());
    if (!issued.ok()) {
      if (limiter && issued.status().code() == StatusCode::kUnauthenticated) limiter->Failed(name, caller.peer);
      log::Info("auth", {{"event", "login_refused"},
                         {"user", name.size() <= 64 ? name : "?"},
                         {"peer", caller.peer},
                         {"reason", issued.status().message()}});
      return issued.status();
    }
    log::Info("auth", {{"event", "login"}, {"user", r.username()}, {"peer", caller.peer}});
    v1::LoginResponse out;
    out.set_token(issued->token);
    if (auto u = accounts->GetUser(r.username()); u.ok()) *out.mutable_user() = UserMessage(*u);
    return out;
  });
  Add<v1::LogoutRequest>("Logout", [accounts, need](const v1::LogoutRequest&,
                                                    const Principal& caller) -> Result<v1::LogoutResponse> {
    SF_RETURN_IF_ERROR(need());
    SF_RETURN_IF_ERROR(accounts->EndSession(caller));
    return v1::LogoutResponse();
  });
  Add<v1::GetMeRequest>("GetMe", [accounts, need](const v1::GetMeRequest&,
                                                  const Principal& caller) -> Result<v1::GetMeResponse> {
    SF_RETURN_IF_ERROR(need());
    SF_ASSIGN_OR_RETURN(auto memberships, accounts->MembershipsOf(caller.user_id));
    v1::GetMeResponse out;
    out.set_username(caller.username);
    out.set_role(RoleName(caller.role));
    for (const auto& [name, role] : memberships) {
      auto* m = out.add_workspaces();
      m->set_name(name);
      m->set_role(role);
    }
    return out;
  });

  Add<v1::ListUsersRequest>("ListUsers", [accounts, need](const v1::ListUsersRequest&,
                                                          const Principal&) -> Result<v1::ListUsersResponse> {
    SF_RETURN_IF_ERROR(need());
    SF_ASSIGN_OR_RETURN(auto users, accounts->ListUsers());
    v1::ListUsersResponse out;
    for (const UserInfo& u : users) *out.add_users() = UserMessage(u);
    return out;
  });
  Add<v1::CreateUserRequest>("CreateUser", [accounts, need](const v1::CreateUserRequest& r,
                                                            const Principal& caller) -> Result<v1::UserResponse> {
    SF_RETURN_IF_ERROR(need());
    SF_RETURN_IF_ERROR(Required(r.username(), "username"));
    SF_RETURN_IF_ERROR(Required(r.password(), "password"));
    Role role = Role::kUser;
    if (!r.role().empty()) {
      SF_ASSIGN_OR_RETURN(role, RoleOf(r.role()));
    }
    SF_ASSIGN_OR_RETURN(UserInfo u, accounts->CreateUser(r.username(), r.password(), role));
    log::Info("auth", {{"event", "user_created"}, {"user", r.username()}, {"role", RoleName(role)}, {"by", caller.username}});
    return UserReply(u);
  });
  // The user methods answer the user as it is afterwards.
  auto changed = [accounts](const std::string& username, const std::string& what,
                            const Principal& caller) -> Result<v1::UserResponse> {
    log::Info("auth", {{"event", "user_" + what}, {"user", username}, {"by", caller.username}});
    SF_ASSIGN_OR_RETURN(UserInfo u, accounts->GetUser(username));
    return UserReply(u);
  };
  Add<v1::SetUserRoleRequest>("SetUserRole", [accounts, need, changed](const v1::SetUserRoleRequest& r,
                                                                       const Principal& caller) -> Result<v1::UserResponse> {
    SF_RETURN_IF_ERROR(need());
    SF_ASSIGN_OR_RETURN(Role role, RoleOf(r.role()));
    if (r.username() == caller.username && role != Role::kAdmin) {
      return FailedPrecondition("an admin may not lower their own role (ask another admin)");
    }
    SF_RETURN_IF_ERROR(accounts->SetRole(r.username(), role));
    return changed(r.username(), "role", caller);
  });
  for (const bool activate : {true, false}) {
    Add<v1::UserNameRequest>(activate ? "ActivateUser" : "DeactivateUser",
                             [accounts, need, changed, activate](const v1::UserNameRequest& r,
                                                                 const Principal& caller) -> Result<v1::UserResponse> {
                               SF_RETURN_IF_ERROR(need());
                               if (!activate && r.username() == caller.username) {
                                 return FailedPrecondition("an admin may not deactivate themselves");
                               }
                               SF_RETURN_IF_ERROR(accounts->SetActive(r.username(), activate));
                               return changed(r.username(), activate ? "activate" : "deactivate", caller);
                             });
  }
  Add<v1::SetUserPasswordRequest>("SetUserPassword",
                                  [accounts, need, changed](const v1::SetUserPasswordRequest& r,
                                                            const Principal& caller) -> Result<v1::UserResponse> {
                                    SF_RETURN_IF_ERROR(need());
                                    SF_RETURN_IF_ERROR(Required(r.password(), "password"));
                                    SF_RETURN_IF_ERROR(accounts->SetPassword(r.username(), r.password()));
                                    return changed(r.username(), "password", caller);
                                  });

  Add<v1::ListTokensRequest>("ListTokens", [accounts, need](const v1::ListTokensRequest& r,
                                                            const Principal& caller) -> Result<v1::ListTokensResponse> {
    SF_RETURN_IF_ERROR(need());
    if (r.all() && caller.role != Role::kAdmin) {
      return PermissionDenied("user " + caller.username + " may not list everyone's tokens: admins only");
    }
    SF_ASSIGN_OR_RETURN(auto tokens, accounts->ListTokens(caller, r.all()));
    v1::ListTokensResponse out;
    for (const TokenInfo& t : tokens) *out.add_tokens() = TokenMessage(t);
    return out;
  });
  Add<v1::CreateTokenRequest>("CreateToken", [accounts, need](const v1::CreateTokenRequest& r,
                                                              const Principal& caller) -> Result<v1::Token> {
    SF_RETURN_IF_ERROR(need());
    SF_RETURN_IF_ERROR(Required(r.name(), "name"));
    SF_ASSIGN_OR_RETURN(IssuedToken issued, accounts->CreateApiToken(caller, r.name(), r.expires_in_seconds()));
    log::Info("auth", {{"event", "token_created"},
                       {"token_id", std::to_string(issued.info.id)},
                       {"name", r.name()},
                       {"user", caller.username}});
    v1::Token out = TokenMessage(issued.info);
    out.set_token(issued.token);
    return out;
  });
  Add<v1::RevokeTokenRequest>("RevokeToken", [accounts, need](const v1::RevokeTokenRequest& r,
                                                              const Principal& caller) -> Result<v1::RevokeTokenResponse> {
    SF_RETURN_IF_ERROR(need());
    SF_RETURN_IF_ERROR(accounts->RevokeToken(caller, r.id()));
    log::Info("auth", {{"event", "token_revoked"}, {"token_id", std::to_string(r.id())}, {"by", caller.username}});
    return v1::RevokeTokenResponse();
  });

  Add<v1::ListWorkspacesRequest>("ListWorkspaces", [accounts, need](const v1::ListWorkspacesRequest&,
                                                                    const Principal&) -> Result<v1::ListWorkspacesResponse> {
    SF_RETURN_IF_ERROR(need());
    SF_ASSIGN_OR_RETURN(auto workspaces, accounts->ListWorkspaces());
    v1::ListWorkspacesResponse out;
    for (const WorkspaceInfo& w : workspaces) {
      auto* o = out.add_workspaces();
      o->set_id(w.id);
      o->set_name(w.name);
      for (const auto& [user, role] : w.members) {
        auto* m = o->add_members();
        m->set_username(user);
        m->set_role(role);
      }
    }
    return out;
  });
  Add<v1::CreateWorkspaceRequest>("CreateWorkspace", [accounts, need](const v1::CreateWorkspaceRequest& r,
                                                                      const Principal& caller) -> Result<v1::Workspace> {
    SF_RETURN_IF_ERROR(need());
    SF_RETURN_IF_ERROR(Required(r.name(), "name"));
    SF_ASSIGN_OR_RETURN(WorkspaceInfo w, accounts->CreateWorkspace(r.name(), caller));
    v1::Workspace out;
    out.set_id(w.id);
    out.set_name(w.name);
    return out;
  });
  Add<v1::SetWorkspaceMemberRequest>(
      "SetWorkspaceMember",
      [accounts, need](const v1::SetWorkspaceMemberRequest& r, const Principal&) -> Result<v1::WorkspaceMemberResponse> {
        SF_RETURN_IF_ERROR(need());
        SF_RETURN_IF_ERROR(Required(r.role(), "role"));
        SF_RETURN_IF_ERROR(accounts->SetMember(r.workspace(), r.username(), r.role()));
        return v1::WorkspaceMemberResponse();
      });
  Add<v1::RemoveWorkspaceMemberRequest>(
      "RemoveWorkspaceMember",
      [accounts, need](const v1::RemoveWorkspaceMemberRequest& r, const Principal&) -> Result<v1::WorkspaceMemberResponse> {
        SF_RETURN_IF_ERROR(need());
        SF_RETURN_IF_ERROR(accounts->RemoveMember(r.workspace(), r.username()));
        return v1::WorkspaceMemberResponse();
      });
}

}  // namespace sf::master
