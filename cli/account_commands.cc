// `sf login|logout|whoami`, `sf user ...`, `sf token ...`, `sf workspace ...`: accounts on the
// master (docs/security.md). Passwords are read from the terminal without echo, or from stdin
// with --password-stdin; never from an argument (process listings show arguments).
#include <termios.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>

#include "cli/api_call.h"
#include "common/api/master_endpoint.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "common/api/session_store.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

struct AccountFlags {
  std::string master;   // --master; empty: $SF_MASTER, the defaults file, ... (common/api/master_endpoint.h)
  std::string ca_file;  // --ca-file; empty: $SF_CA_FILE, the defaults file's, the system's CAs
  bool json = false;
  bool password_stdin = false;
  bool all = false;
  std::string username, role, name, expires, workspace, id;
};

// One line from stdin; without echo when stdin is a terminal (after printing `prompt`).
Result<std::string> ReadPassword(const std::string& prompt, bool from_stdin) {
  const bool tty = !from_stdin && ::isatty(STDIN_FILENO);
  termios old{};
  if (tty) {
    std::cerr << prompt << std::flush;
    ::tcgetattr(STDIN_FILENO, &old);
    termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  std::string line;
  const bool got = static_cast<bool>(std::getline(std::cin, line));
  if (tty) {
    ::tcsetattr(STDIN_FILENO, TCSANOW, &old);
    std::cerr << "\n";
  }
  if (!got) return InvalidArgument("no password given on stdin");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

// "90d", "12h", "30m", "3600" (seconds) or "never" -> seconds (0: never).
Result<int64_t> ParseExpiry(const std::string& s) {
  if (s.empty() || s == "never") return int64_t{0};
  int64_t unit = 1;
  std::string digits = s;
  switch (s.back()) {
    case 'd':
      unit = 86400;
      digits.pop_back();
      break;
    case 'h':
      unit = 3600;
      digits.pop_back();
      break;
    case 'm':
      unit = 60;
      digits.pop_back();
      break;
    case 's':
      digits.pop_back();
      break;
    default:
      break;
  }
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("--expires: \"" + s +
                           "\" is not a duration like 90d, 12h, 30m or never");
  }
  return std::stoll(digits) * unit;
}

using AccountRun = std::function<int(const AccountFlags&, Api&)>;

struct AccountCommand {
  CLI::App* app;
  std::shared_ptr<AccountFlags> flags;
};

AccountCommand Add(CLI::App* parent, const std::string& name, const std::string& description,
                   CommandAction& action, AccountRun run) {
  AccountCommand c{parent->add_subcommand(name, description), std::make_shared<AccountFlags>()};
  AddMasterOptions(c.app, &c.flags->master, &c.flags->ca_file, &c.flags->json);
  OnSelected(c.app, action, [flags = c.flags, run = std::move(run)] {
    ApplyGlobalMasterOptions(&flags->master, &flags->ca_file, &flags->json);
    Result<Api> api = ConnectToMaster(flags->master, flags->ca_file);
    if (!api.ok()) {
      std::cerr << "sf: " << api.status().message() << "\n";
      return kExitUsage;
    }
    return run(*flags, *api);
  });
  return c;
}

// The reply's JSON with --json, else `text`.
template <class Response>
int PrintOrJson(const AccountFlags& f, const Reply<Response>& reply, const std::string& text) {
  std::cout << (f.json ? reply.json : text) << "\n";
  return kExitOk;
}

int Login(const AccountFlags& f, Api& api) {
  std::string user = f.username;
  if (user.empty()) {
    const char* env = std::getenv("USER");
    user = env && *env ? env : "admin";
  }
  auto password = ReadPassword("Password for " + user + ": ", f.password_stdin);
  if (!password.ok()) {
    std::cerr << "sf: " << password.status().message() << "\n";
    return kExitUsage;
  }
  api.client.set_token("");  // a stale session must not ride along
  v1::LoginRequest request;
  request.set_username(user);
  request.set_password(*password);
  auto r = api.Call<v1::LoginResponse>("Login", request);
  if (!r) return api.exit_code;
  if (r->message.token().empty()) {
    std::cerr << "sf: the master's login answer has no token\n";
    return kExitFailed;
  }
  if (Status st = api::SaveSession(api.client.base_url(), api::Session{user, r->message.token()}); !st.ok()) {
    std::cerr << "sf: " << st.message() << "\n";
    return kExitFailed;
  }
  std::cout << "logged in to " << api.client.base_url() << " as " << user << " (session in "
            << api::SessionFile() << ")\n";
  return kExitOk;
}

int Logout(const AccountFlags&, Api& api) {
  auto s = api::LoadSession(api.client.base_url());
  if (!s) {
    std::cout << "not logged in to " << api.client.base_url() << "\n";
    return kExitOk;
  }
  api.client.set_token(s->token);
  (void)api.Call<v1::LogoutResponse>(
      "Logout", v1::LogoutRequest());  // an expired session is still forgotten here
  if (Status st = api::RemoveSession(api.client.base_url()); !st.ok()) {
    std::cerr << "sf: " << st.message() << "\n";
    return kExitFailed;
  }
  std::cout << "logged out of " << api.client.base_url() << "\n";
  return kExitOk;
}

int WhoAmI(const AccountFlags& f, Api& api) {
  auto r = api.Call<v1::GetMeResponse>("GetMe", v1::GetMeRequest());
  if (!r) return api.exit_code;
  const v1::GetMeResponse& me = r->message;
  std::string text = me.username() + " (" + me.role() + ") on " + api.client.base_url();
  for (const v1::WorkspaceMembership& w : me.workspaces())
    text += "\n  workspace " + w.name() + ": " + w.role();
  return PrintOrJson(f, *r, text);
}

int ListUsers(const AccountFlags& f, Api& api) {
  auto r = api.Call<v1::ListUsersResponse>("ListUsers", v1::ListUsersRequest());
  if (!r) return api.exit_code;
  if (f.json) return PrintOrJson(f, *r, "");
  std::vector<std::vector<std::string>> rows;
  for (const v1::User& u : r->message.users()) {
    rows.push_back({u.username(), u.role(), u.active() ? "yes" : "no",
                    TimeText(u.has_created_at(), u.created_at())});
  }
  PrintTable({"USERNAME", "ROLE", "ACTIVE", "CREATED"}, rows);
  return kExitOk;
}

int CreateUser(const AccountFlags& f, Api& api) {
  auto password = ReadPassword("Password for the new user " + f.username + ": ", f.password_stdin);
  if (!password.ok()) {
    std::cerr << "sf: " << password.status().message() << "\n";
    return kExitUsage;
  }
  v1::CreateUserRequest request;
  request.set_username(f.username);
  request.set_password(*password);
  request.set_role(f.role.empty() ? "user" : f.role);
  auto r = api.Call<v1::UserResponse>("CreateUser", request);
  if (!r) return api.exit_code;
  return PrintOrJson(
      f, *r, "created user " + f.username + " (" + (f.role.empty() ? "user" : f.role) + ")");
}

// `sf user activate|deactivate|set-password|set-role`: `what` is activate, deactivate, password
// or role.
int UserAction(const AccountFlags& f, Api& api, const std::string& what) {
  std::optional<Reply<v1::UserResponse>> r;
  if (what == "password") {
    auto password = ReadPassword("New password for " + f.username + ": ", f.password_stdin);
    if (!password.ok()) {
      std::cerr << "sf: " << password.status().message() << "\n";
      return kExitUsage;
    }
    v1::SetUserPasswordRequest request;
    request.set_username(f.username);
    request.set_password(*password);
    r = api.Call<v1::UserResponse>("SetUserPassword", request);
  } else if (what == "role") {
    v1::SetUserRoleRequest request;
    request.set_username(f.username);
    request.set_role(f.role);
    r = api.Call<v1::UserResponse>("SetUserRole", request);
  } else {
    v1::UserNameRequest request;
    request.set_username(f.username);
    r = api.Call<v1::UserResponse>(what == "activate" ? "ActivateUser" : "DeactivateUser", request);
  }
  if (!r) return api.exit_code;
  const v1::UserResponse& u = r->message;
  return PrintOrJson(f, *r,
                     u.has_user() ? u.user().username() + ": role " + u.user().role() + ", " +
                                        (u.user().active() ? "active" : "deactivated")
                                  : "ok");
}

int CreateToken(const AccountFlags& f, Api& api) {
  auto expires = ParseExpiry(f.expires);
  if (!expires.ok()) {
    std::cerr << "sf: " << expires.status().message() << "\n";
    return kExitUsage;
  }
  v1::CreateTokenRequest request;
  request.set_name(f.name);
  request.set_expires_in_seconds(*expires);
  auto r = api.Call<v1::Token>("CreateToken", request);
  if (!r) return api.exit_code;
  if (f.json) return PrintOrJson(f, *r, "");
  // The token alone on stdout (for `TOKEN=$(sf token create ...)`); the rest on stderr.
  const v1::Token& t = r->message;
  std::cerr << "token " << t.id() << " \"" << f.name << "\""
            << (t.has_expires_at() ? ", expires " + TimeText(true, t.expires_at())
                                   : ", never expires")
            << ". It is shown once: store it now (e.g. as a CI secret, then export SF_TOKEN).\n";
  std::cout << t.token() << "\n";
  return kExitOk;
}

int ListTokens(const AccountFlags& f, Api& api) {
  v1::ListTokensRequest request;
  request.set_all(f.all);
  auto r = api.Call<v1::ListTokensResponse>("ListTokens", request);
  if (!r) return api.exit_code;
  if (f.json) return PrintOrJson(f, *r, "");
  std::vector<std::vector<std::string>> rows;
  for (const v1::Token& t : r->message.tokens()) {
    rows.push_back({std::to_string(t.id()), t.name(), t.kind(), t.username(),
                    TimeText(t.has_created_at(), t.created_at()),
                    t.has_expires_at() ? TimeText(true, t.expires_at()) : "never",
                    t.has_last_used_at() ? TimeText(true, t.last_used_at()) : "-",
                    t.revoked() ? "revoked" : "active"});
  }
  PrintTable({"ID", "NAME", "KIND", "USER", "CREATED", "EXPIRES", "LAST USED", "STATE"}, rows);
  return kExitOk;
}

int RevokeToken(const AccountFlags& f, Api& api) {
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  v1::RevokeTokenRequest request;
  request.set_id(*id);
  auto r = api.Call<v1::RevokeTokenResponse>("RevokeToken", request);
  if (!r) return api.exit_code;
  return PrintOrJson(f, *r, "revoked token " + f.id);
}

int ListWorkspaces(const AccountFlags& f, Api& api) {
  auto r = api.Call<v1::ListWorkspacesResponse>("ListWorkspaces", v1::ListWorkspacesRequest());
  if (!r) return api.exit_code;
  if (f.json) return PrintOrJson(f, *r, "");
  std::vector<std::vector<std::string>> rows;
  for (const v1::Workspace& w : r->message.workspaces()) {
    std::string members;
    for (const v1::WorkspaceMember& m : w.members()) {
      members += (members.empty() ? "" : ", ") + m.username() + " (" + m.role() + ")";
    }
    rows.push_back({std::to_string(w.id()), w.name(), members});
  }
  PrintTable({"ID", "NAME", "MEMBERS"}, rows);
  return kExitOk;
}

}  // namespace

void AddAccountCommands(CLI::App& sf, CommandAction& action) {
  auto login = Add(&sf, "login", "log in to the master; the session is kept in " + api::SessionFile(),
                   action, Login);
  login.app->add_option("-u,--username", login.flags->username, "who (default: $USER)");
  login.app->add_flag("--password-stdin", login.flags->password_stdin,
                      "read the password from stdin");
  Add(&sf, "logout", "end the session and forget it", action, Logout);
  Add(&sf, "whoami", "the user this session (or $SF_TOKEN) acts as, with its role and workspaces",
      action, WhoAmI);

  CLI::App* user = sf.add_subcommand("user", "users of the master (admins only)");
  user->require_subcommand(1);
  Add(user, "list", "list users", action, ListUsers);
  auto create = Add(user, "create",
                    "create a user (the password is asked for, or read with --password-stdin)",
                    action, CreateUser);
  create.app->add_option("USERNAME", create.flags->username, "the new user's name")->required();
  create.app->add_option("--role", create.flags->role, "admin, user (default) or viewer");
  create.app->add_flag("--password-stdin", create.flags->password_stdin,
                       "read the password from stdin");
  for (const char* what : {"activate", "deactivate"}) {
    auto c = Add(
        user, what, std::string(what) + " a user", action,
        [w = std::string(what)](const AccountFlags& f, Api& api) { return UserAction(f, api, w); });
    c.app->add_option("USERNAME", c.flags->username, "the user")->required();
  }
  auto set_password =
      Add(user, "set-password", "set a user's password (yours, or anyone's as an admin)", action,
          [](const AccountFlags& f, Api& api) { return UserAction(f, api, "password"); });
  set_password.app->add_option("USERNAME", set_password.flags->username, "the user")->required();
  set_password.app->add_flag("--password-stdin", set_password.flags->password_stdin,
                             "read the password from stdin");
  auto set_role = Add(user, "set-role", "set a user's role", action,
                      [](const AccountFlags& f, Api& api) { return UserAction(f, api, "role"); });
  set_role.app->add_option("USERNAME", set_role.flags->username, "the user")->required();
  set_role.app->add_option("ROLE", set_role.flags->role, "admin, user or viewer")->required();

  CLI::App* token =
      sf.add_subcommand("token", "API tokens for scripts and CI (Authorization: Bearer)");
  token->require_subcommand(1);
  auto token_create = Add(token, "create", "create an API token; prints it once, alone on stdout",
                          action, CreateToken);
  token_create.app->add_option("--name", token_create.flags->name, "what it is for (e.g. ci)")
      ->required();
  token_create.app->add_option("--expires", token_create.flags->expires,
                               "90d, 12h, 30m or never (default)");
  auto token_list = Add(token, "list", "your tokens and sessions (everyone's with --all, admins)",
                        action, ListTokens);
  token_list.app->add_flag("--all", token_list.flags->all, "every user's (admins only)");
  auto revoke =
      Add(token, "revoke", "revoke a token (yours, or anyone's as an admin)", action, RevokeToken);
  revoke.app->add_option("ID", revoke.flags->id, "the token's id (sf token list)")->required();

  CLI::App* workspace =
      sf.add_subcommand("workspace", "workspaces: experiments a team shares control of");
  workspace->require_subcommand(1);
  Add(workspace, "list", "list workspaces and their members", action, ListWorkspaces);
  auto ws_create = Add(workspace, "create", "create a workspace (you become its admin)", action,
                       [](const AccountFlags& f, Api& api) {
                         v1::CreateWorkspaceRequest request;
                         request.set_name(f.workspace);
                         auto r = api.Call<v1::Workspace>("CreateWorkspace", request);
                         if (!r) return api.exit_code;
                         return PrintOrJson(f, *r, "created workspace " + f.workspace);
                       });
  ws_create.app->add_option("NAME", ws_create.flags->workspace, "the workspace")->required();
  auto set_member =
      Add(workspace, "set-member", "add a member or change their role (viewer, editor, admin)",
          action, [](const AccountFlags& f, Api& api) {
            v1::SetWorkspaceMemberRequest request;
            request.set_workspace(f.workspace);
            request.set_username(f.username);
            request.set_role(f.role);
            auto r = api.Call<v1::WorkspaceMemberResponse>("SetWorkspaceMember", request);
            if (!r) return api.exit_code;
            return PrintOrJson(f, *r, f.username + " is " + f.role + " of " + f.workspace);
          });
  set_member.app->add_option("WORKSPACE", set_member.flags->workspace, "the workspace")->required();
  set_member.app->add_option("USERNAME", set_member.flags->username, "the user")->required();
  set_member.app->add_option("ROLE", set_member.flags->role, "viewer, editor or admin")->required();
  auto remove_member = Add(
      workspace, "remove-member", "remove a member", action, [](const AccountFlags& f, Api& api) {
        v1::RemoveWorkspaceMemberRequest request;
        request.set_workspace(f.workspace);
        request.set_username(f.username);
        auto r = api.Call<v1::WorkspaceMemberResponse>("RemoveWorkspaceMember", request);
        if (!r) return api.exit_code;
        return PrintOrJson(f, *r, "removed " + f.username + " from " + f.workspace);
      });
  remove_member.app->add_option("WORKSPACE", remove_member.flags->workspace, "the workspace")
      ->required();
  remove_member.app->add_option("USERNAME", remove_member.flags->username, "the user")->required();
}

}  // namespace sf::cli
