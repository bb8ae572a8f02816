#include "master/api/auth_api.h"

#include <google/protobuf/util/time_util.h>

#include <cmath>

#include "common/log.h"
#include "common/utf8.h"
#include "common/value.h"

namespace sf::master {
namespace {

std::string Time(double seconds) {
  if (seconds <= 0) return "";
  using google::protobuf::util::TimeUtil;
  return TimeUtil::ToString(TimeUtil::NanosecondsToTimestamp(static_cast<int64_t>(seconds * 1e9)));
}

Value UserJson(const UserInfo& u) {
  return Value(Value::Map{{"username", u.username},
                          {"role", RoleName(u.role)},
                          {"active", u.active},
                          {"createdAt", Time(u.created_at)}});
}

Value TokenJson(const TokenInfo& t) {
  return Value(Value::Map{{"id", std::to_string(t.id)},
                          {"name", t.name},
                          {"username", t.username},
                          {"kind", t.kind},
                          {"createdAt", Time(t.created_at)},
                          {"expiresAt", Time(t.expires_at)},
                          {"lastUsedAt", Time(t.last_used_at)},
                          {"revoked", t.revoked}});
}

AuthReply Ok(Value v) { return AuthReply{Status::Ok(), v.ToJson(), "", 0}; }
AuthReply Fail(Status s) { return AuthReply{std::move(s), "", "", 0}; }

// The body as a JSON object; `fields` are the only keys allowed.
Result<Value> Body(const std::string& body, std::initializer_list<const char*> fields) {
  if (body.empty()) return Value(Value::Map{});
  auto v = Value::FromJson(body);
  if (!v.ok() || !v->is_map()) return InvalidArgument("request body is not a JSON object");
  for (const auto& [key, value] : v->as_map()) {
    bool known = false;
    for (const char* f : fields) known = known || key == f;
    if (!known)
      return InvalidArgument("request body: unknown field \"" + ReplaceInvalidUtf8(key) + "\"");
  }
  return *v;
}

Result<std::string> StringField(const Value& body, const char* key, bool required) {
  const Value* v = body.Find(key);
  if (!v || v->is_null()) {
    if (required) return InvalidArgument(std::string(key) + ": required");
    return std::string();
  }
  if (!v->is_string()) return InvalidArgument(std::string(key) + ": must be a string");
  if (!IsText(v->as_string()))
    return InvalidArgument(std::string(key) + ": is not UTF-8 text without NUL");
  return v->as_string();
}

Result<Role> RoleField(const Value& body) {
  SF_ASSIGN_OR_RETURN(std::string name, StringField(body, "role", true));
  auto role = RoleFromName(name);
  if (!role) return InvalidArgument("role: \"" + name + "\" is not a role (admin, user, viewer)");
  return *role;
}

}  // namespace

std::string AuthApi::Cookie(const std::string& token, int64_t max_age) const {
  return std::string(kCookie) + "=" + token +
         "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(max_age) +
         (secure_cookies_ ? "; Secure" : "");
}

AuthReply AuthApi::Login(const std::string& body, const std::string& peer) {
  auto b = Body(body, {"username", "password"});
  if (!b.ok()) return Fail(b.status());
  auto user = StringField(*b, "username", true);
  auto password = StringField(*b, "password", true);
  // A malformed name or password is a wrong login like any other (and is counted).
  const std::string name = user.ok() ? *user : "";
  if (Status allowed = limiter_->Allow(name, peer); !allowed.ok()) {
    AuthReply r = Fail(allowed);
    r.retry_after = 6;
    const std::string& m = allowed.message();
    if (size_t at = m.rfind("retry in "); at != std::string::npos)
      r.retry_after = std::max(1, std::atoi(m.c_str() + at + 9));
    return r;
  }
  if (!user.ok() || !password.ok()) {
    limiter_->Failed(name, peer);
    return Fail(Unauthenticated("wrong username or password"));
  }
  auto issued = accounts_->Login(*user, *password);
  if (!issued.ok()) {
    if (issued.status().code() == StatusCode::kUnauthenticated) limiter_->Failed(name, peer);
    log::Info("auth", {{"event", "login_refused"},
                       {"user", IsText(name) && name.size() <= 64 ? name : "?"},
                       {"peer", peer},
                       {"reason", issued.status().message()}});
    return Fail(issued.status());
  }
  log::Info("auth", {{"event", "login"}, {"user", *user}, {"peer", peer}});
  auto u = accounts_->GetUser(*user);
  AuthReply r =
      Ok(Value(Value::Map{{"token", issued->token}, {"user", u.ok() ? UserJson(*u) : Value()}}));
  r.set_cookie = Cookie(issued->token, Accounts::kSessionSeconds);
  return r;
}

AuthReply AuthApi::Handle(const std::string& method, const std::string& route,
                          const std::map<std::string, std::string>& params, const std::string& body,
                          bool query_all, const Principal& caller, const std::string& peer) {
  auto param = [&](const char* k) {
    auto it = params.find(k);
    return it == params.end() ? std::string() : it->second;
  };
  if (route == "/api/v1/auth/login") return Login(body, peer);
  if (route == "/api/v1/auth/logout") {
    if (Status st = accounts_->EndSession(caller); !st.ok()) return Fail(st);
    AuthReply r = Ok(Value(Value::Map{}));
    r.set_cookie = Cookie("", 0);
    return r;
  }
  if (route == "/api/v1/auth/me") {
    auto ws = accounts_->MembershipsOf(caller.user_id);
    if (!ws.ok()) return Fail(ws.status());
    Value::List list;
    for (const auto& [name, role] : *ws)
      list.push_back(Value(Value::Map{{"name", name}, {"role", role}}));
    return Ok(Value(Value::Map{{"username", caller.username},
                               {"role", RoleName(caller.role)},
                               {"workspaces", Value(std::move(list))}}));
  }
  if (route == "/api/v1/users") {
    if (method == "GET") {
      auto users = accounts_->ListUsers();
      if (!users.ok()) return Fail(users.status());
      Value::List list;
      for (const UserInfo& u : *users) list.push_back(UserJson(u));
      return Ok(Value(Value::Map{{"users", Value(std::move(list))}}));
    }
    auto b = Body(body, {"username", "password", "role"});
    if (!b.ok()) return Fail(b.status());
    auto name = StringField(*b, "username", true);
    auto password = StringField(*b, "password", true);
    auto role = b->Find("role") ? RoleField(*b) : Result<Role>(Role::kUser);
    for (const Status& st : {name.status(), password.status(), role.status()}) {
      if (!st.ok()) return Fail(st);
    }
    auto u = accounts_->CreateUser(*name, *password, *role);
    if (!u.ok()) return Fail(u.status());
    log::Info("auth", {{"event", "user_created"},
                       {"user", *name},
                       {"role", RoleName(*role)},
                       {"by", caller.username}});
    return Ok(Value(Value::Map{{"user", UserJson(*u)}}));
  }
  if (route.rfind("/api/v1/users/{username}/", 0) == 0) {
    const std::string user = param("username");
    const std::string what = route.substr(route.rfind('/') + 1);
    Status st;
    if (what == "role") {
      auto b = Body(body, {"role"});
      if (!b.ok()) return Fail(b.status());
      auto role = RoleField(*b);
      if (!role.ok()) return Fail(role.status());
      if (user == caller.username && *role != Role::kAdmin) {
        return Fail(
            FailedPrecondition("an admin may not lower their own role (ask another admin)"));
      }
      st = accounts_->SetRole(user, *role);
    } else if (what == "activate" || what == "deactivate") {
      if (what == "deactivate" && user == caller.username) {
        return Fail(FailedPrecondition("an admin may not deactivate themselves"));
      }
      st = accounts_->SetActive(user, what == "activate");
    } else {  // password
      auto b = Body(body, {"password"});
      if (!b.ok()) return Fail(b.status());
      auto password = StringField(*b, "password", true);
      if (!password.ok()) return Fail(password.status());
      st = accounts_->SetPassword(user, *password);
    }
    if (!st.ok()) return Fail(st);
    log::Info("auth", {{"event", "user_" + what}, {"user", user}, {"by", caller.username}});
    auto u = accounts_->GetUser(user);
    if (!u.ok()) return Fail(u.status());
    return Ok(Value(Value::Map{{"user", UserJson(*u)}}));
  }
  if (route == "/api/v1/tokens") {
    if (method == "GET") {
      if (query_all && caller.role != Role::kAdmin) {
        return Fail(PermissionDenied("user " + caller.username +
                                     " may not list everyone's tokens: admins only"));
      }
      auto tokens = accounts_->ListTokens(caller, query_all);
      if (!tokens.ok()) return Fail(tokens.status());
      Value::List list;
      for (const TokenInfo& t : *tokens) list.push_back(TokenJson(t));
      return Ok(Value(Value::Map{{"tokens", Value(std::move(list))}}));
    }
    auto b = Body(body, {"name", "expiresInSeconds"});
    if (!b.ok()) return Fail(b.status());
    auto name = StringField(*b, "name", true);
    if (!name.ok()) return Fail(name.status());
    int64_t expires = 0;
    if (const Value* e = b->Find("expiresInSeconds"); e && !e->is_null()) {
      if (e->is_int()) {
        expires = e->as_int();
      } else if (e->is_string()) {
        try {
          size_t used = 0;
          expires = std::stoll(e->as_string(), &used);
          if (used != e->as_string().size()) throw std::invalid_argument("x");
        } catch (...) {
          return Fail(InvalidArgument("expiresInSeconds: must be a whole number of seconds"));
        }
      } else {
        return Fail(InvalidArgument("expiresInSeconds: must be a whole number of seconds"));
      }
    }
    auto issued = accounts_->CreateApiToken(caller, *name, expires);
    if (!issued.ok()) return Fail(issued.status());
    log::Info("auth", {{"event", "token_created"},
                       {"token_id", std::to_string(issued->info.id)},
                       {"name", *name},
                       {"user", caller.username}});
    Value v = TokenJson(issued->info);
    v.as_map()["token"] = issued->token;
    return Ok(v);
  }
  if (route == "/api/v1/tokens/{id}") {
    int64_t id = 0;
    try {
      size_t used = 0;
      id = std::stoll(param("id"), &used);
      if (used != param("id").size()) throw std::invalid_argument("x");
    } catch (...) {
      return Fail(
          InvalidArgument("token id \"" + ReplaceInvalidUtf8(param("id")) + "\" is not a number"));
    }
    if (Status st = accounts_->RevokeToken(caller, id); !st.ok()) return Fail(st);
    log::Info(
        "auth",
        {{"event", "token_revoked"}, {"token_id", std::to_string(id)}, {"by", caller.username}});
    return Ok(Value(Value::Map{}));
  }
  if (route == "/api/v1/workspaces") {
    if (method == "GET") {
      auto ws = accounts_->ListWorkspaces();
      if (!ws.ok()) return Fail(ws.status());
      Value::List list;
      for (const WorkspaceInfo& w : *ws) {
        Value::List members;
        for (const auto& [user, role] : w.members) {
          members.push_back(Value(Value::Map{{"username", user}, {"role", role}}));
        }
        list.push_back(Value(Value::Map{{"id", std::to_string(w.id)},
                                        {"name", w.name},
                                        {"members", Value(std::move(members))}}));
      }
      return Ok(Value(Value::Map{{"workspaces", Value(std::move(list))}}));
    }
    auto b = Body(body, {"name"});
    if (!b.ok()) return Fail(b.status());
    auto name = StringField(*b, "name", true);
    if (!name.ok()) return Fail(name.status());
    auto w = accounts_->CreateWorkspace(*name, caller);
    if (!w.ok()) return Fail(w.status());
    return Ok(Value(Value::Map{{"id", std::to_string(w->id)}, {"name", w->name}}));
  }
  if (route == "/api/v1/workspaces/{workspace}/members/{username}") {
    Status st;
    if (method == "PUT") {
      auto b = Body(body, {"role"});
      if (!b.ok()) return Fail(b.status());
      auto role = StringField(*b, "role", true);
      if (!role.ok()) return Fail(role.status());
      st = accounts_->SetMember(param("workspace"), param("username"), *role);
    } else {
      st = accounts_->RemoveMember(param("workspace"), param("username"));
    }
    if (!st.ok()) return Fail(st);
    return Ok(Value(Value::Map{}));
  }
  (void)authorizer_;
  return Fail(NotFound("no route " + method + " " + route));
}

}  // namespace sf::master
