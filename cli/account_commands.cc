// `sf login|logout|whoami`, `sf user ...`, `sf token ...`, `sf workspace ...`: accounts on the
// master (docs/security.md). Passwords are read from the terminal without echo, or from stdin
// with --password-stdin; never from an argument (process listings show arguments).
#include <termios.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/api_call.h"
#include "cli/cli_defaults.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/session_store.h"

namespace sf::cli {
namespace {

struct AccountFlags {
  std::string master;   // --master; empty: $SF_MASTER, the defaults file, ... (cli/cli_defaults.h)
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

std::string Body(Value::Map m) { return Value(std::move(m)).ToJson(); }

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

int PrintOrJson(const AccountFlags& f, const Value& v, const std::string& text) {
  std::cout << (f.json ? v.ToJson() : text) << "\n";
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
  auto r =
      api.Call("POST", "/api/v1/auth/login", Body({{"username", user}, {"password", *password}}));
  if (!r) return api.exit_code;
  const Value* token = r->Find("token");
  if (!token || !token->is_string()) {
    std::cerr << "sf: the master's login answer has no token\n";
    return kExitFailed;
  }
  if (Status st = SaveSession(api.client.base_url(), Session{user, token->as_string()}); !st.ok()) {
    std::cerr << "sf: " << st.message() << "\n";
    return kExitFailed;
  }
  std::cout << "logged in to " << api.client.base_url() << " as " << user << " (session in "
            << SessionFile() << ")\n";
  return kExitOk;
}

int Logout(const AccountFlags&, Api& api) {
  auto s = LoadSession(api.client.base_url());
  if (!s) {
    std::cout << "not logged in to " << api.client.base_url() << "\n";
    return kExitOk;
  }
  api.client.set_token(s->token);
  (void)api.Call("POST", "/api/v1/auth/logout");  // an expired session is still forgotten here
  if (Status st = RemoveSession(api.client.base_url()); !st.ok()) {
    std::cerr << "sf: " << st.message() << "\n";
    return kExitFailed;
  }
  std::cout << "logged out of " << api.client.base_url() << "\n";
  return kExitOk;
}

int WhoAmI(const AccountFlags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/auth/me");
  if (!r) return api.exit_code;
  std::string text = Str(*r, "username") + " (" + Str(*r, "role") + ") on " + api.client.base_url();
  const Value* ws = r->Find("workspaces");
  for (const Value& w : ws && ws->is_list() ? ws->as_list() : Value::List{}) {
    text += "\n  workspace " + Str(w, "name") + ": " + Str(w, "role");
  }
  return PrintOrJson(f, *r, text);
}

int ListUsers(const AccountFlags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/users");
  if (!r) return api.exit_code;
  if (f.json) return PrintOrJson(f, *r, "");
  std::vector<std::vector<std::string>> rows;
  const Value* users = r->Find("users");
  for (const Value& u : users && users->is_list() ? users->as_list() : Value::List{}) {
    rows.push_back({Str(u, "username"), Str(u, "role"), Str(u, "active") == "true" ? "yes" : "no",
                    Str(u, "createdAt")});
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
  auto r = api.Call("POST", "/api/v1/users",
                    Body({{"username", f.username},
                          {"password", *password},
                          {"role", f.role.empty() ? "user" : f.role}}));
  if (!r) return api.exit_code;
  return PrintOrJson(
      f, *r, "created user " + f.username + " (" + (f.role.empty() ? "user" : f.role) + ")");
}

int UserAction(const AccountFlags& f, Api& api, const std::string& what) {
  std::string body = "{}";
  if (what == "password") {
    auto password = ReadPassword("New password for " + f.username + ": ", f.password_stdin);
    if (!password.ok()) {
      std::cerr << "sf: " << password.status().message() << "\n";
      return kExitUsage;
    }
    body = Body({{"password", *password}});
  } else if (what == "role") {
    body = Body({{"role", f.role}});
  }
  auto r = api.Call("POST", "/api/v1/users/" + f.username + "/" + what, body);
  if (!r) return api.exit_code;
  const Value* u = r->Find("user");
  return PrintOrJson(f, *r,
                     u ? Str(*u, "username") + ": role " + Str(*u, "role") + ", " +
                             (Str(*u, "active") == "true" ? "active" : "deactivated")
                       : "ok");
}

int CreateToken(const AccountFlags& f, Api& api) {
  auto expires = ParseExpiry(f.expires);
  if (!expires.ok()) {
    std::cerr << "sf: " << expires.status().message() << "\n";
    return kExitUsage;
  }
  auto r =
      api.Call("POST", "/api/v1/tokens", Body({{"name", f.name}, {"expiresInSeconds", *expires}}));
  if (!r) return api.exit_code;
  if (f.json) return PrintOrJson(f, *r, "");
  // The token alone on stdout (for `TOKEN=$(sf token create ...)`); the rest on stderr.
  std::cerr << "token " << Str(*r, "id") << " \"" << f.name << "\""
            << (Str(*r, "expiresAt").empty() ? ", never expires"
                                             : ", expires " + Str(*r, "expiresAt"))
            << ". It is shown once: store it now (e.g. as a CI secret, then export SF_TOKEN).\n";
  std::cout << Str(*r, "token") << "\n";
  return kExitOk;
}

int ListTokens(const AccountFlags& f, Api& api) {
  auto r = api.Call("GET", std::string("/api/v1/tokens") + (f.all ? "?all=true" : ""));
  if (!r) return api.exit_code;
  if (f.json) return PrintOrJson(f, *r, "");
  std::vector<std::vector<std::string>> rows;
  const Value* tokens = r->Find("tokens");
  for (const Value& t : tokens && tokens->is_list() ? tokens->as_list() : Value::List{}) {
    rows.push_back({Str(t, "id"), Str(t, "name"), Str(t, "kind"), Str(t, "username"),
                    Str(t, "createdAt"),
                    Str(t, "expiresAt").empty() ? "never" : Str(t, "expiresAt"),
                    Str(t, "lastUsedAt").empty() ? "-" : Str(t, "lastUsedAt"),
                    Str(t, "revoked") == "true" ? "revoked" : "active"});
  }
  PrintTable({"ID", "NAME", "KIND", "USER", "CREATED", "EXPIRES", "LAST USED", "STATE"}, rows);
  return kExitOk;
}

int RevokeToken(const AccountFlags& f, Api& api) {
  auto r = api.Call("DELETE", "/api/v1/tokens/" + f.id);
  if (!r) return api.exit_code;
  return PrintOrJson(f, *r, "revoked token " + f.id);
}

int ListWorkspaces(const AccountFlags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/workspaces");
  if (!r) return api.exit_code;
  if (f.json) return PrintOrJson(f, *r, "");
  std::vector<std::vector<std::string>> rows;
  const Value* list = r->Find("workspaces");
  for (const Value& w : list && list->is_list() ? list->as_list() : Value::List{}) {
    std::string members;
    const Value* m = w.Find("members");
    for (const Value& x : m && m->is_list() ? m->as_list() : Value::List{}) {
      members += (members.empty() ? "" : ", ") + Str(x, "username") + " (" + Str(x, "role") + ")";
    }
    rows.push_back({Str(w, "id"), Str(w, "name"), members});
  }
  PrintTable({"ID", "NAME", "MEMBERS"}, rows);
  return kExitOk;
}

}  // namespace

void AddAccountCommands(CLI::App& sf, CommandAction& action) {
  auto login = Add(&sf, "login", "log in to the master; the session is kept in " + SessionFile(),
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
  auto ws_create =
      Add(workspace, "create", "create a workspace (you become its admin)", action,
          [](const AccountFlags& f, Api& api) {
            auto r = api.Call("POST", "/api/v1/workspaces", Body({{"name", f.workspace}}));
            if (!r) return api.exit_code;
            return PrintOrJson(f, *r, "created workspace " + f.workspace);
          });
  ws_create.app->add_option("NAME", ws_create.flags->workspace, "the workspace")->required();
  auto set_member =
      Add(workspace, "set-member", "add a member or change their role (viewer, editor, admin)",
          action, [](const AccountFlags& f, Api& api) {
            auto r = api.Call("PUT", "/api/v1/workspaces/" + f.workspace + "/members/" + f.username,
                              Body({{"role", f.role}}));
            if (!r) return api.exit_code;
            return PrintOrJson(f, *r, f.username + " is " + f.role + " of " + f.workspace);
          });
  set_member.app->add_option("WORKSPACE", set_member.flags->workspace, "the workspace")->required();
  set_member.app->add_option("USERNAME", set_member.flags->username, "the user")->required();
  set_member.app->add_option("ROLE", set_member.flags->role, "viewer, editor or admin")->required();
  auto remove_member = Add(
      workspace, "remove-member", "remove a member", action, [](const AccountFlags& f, Api& api) {
        auto r = api.Call("DELETE", "/api/v1/workspaces/" + f.workspace + "/members/" + f.username);
        if (!r) return api.exit_code;
        return PrintOrJson(f, *r, "removed " + f.username + " from " + f.workspace);
      });
  remove_member.app->add_option("WORKSPACE", remove_member.flags->workspace, "the workspace")
      ->required();
  remove_member.app->add_option("USERNAME", remove_member.flags->username, "the user")->required();
}

}  // namespace sf::cli
