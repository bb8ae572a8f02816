#include "common/api/session_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/api/master_endpoint.h"
#include "common/value.h"

namespace sf::api {
namespace {

// The file's sessions by master URL; empty when the file is missing or not JSON.
Value::Map Read() {
  std::ifstream in(SessionFile());
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  Result<Value> j = Value::FromJson(text.str());
  const Value* sessions = j.ok() ? j->Find("sessions") : nullptr;
  return sessions && sessions->is_map() ? sessions->as_map() : Value::Map{};
}

Status Write(Value::Map sessions) {
  namespace fs = std::filesystem;
  const fs::path file = SessionFile();
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  ::chmod(file.parent_path().c_str(), 0700);
  const std::string tmp = file.string() + ".tmp";
  {
    const mode_t old = ::umask(077);
    std::ofstream out(tmp, std::ios::trunc);
    ::umask(old);
    if (!out) return Unavailable("cannot write " + tmp);
    out << Value(Value::Map{{"sessions", Value(std::move(sessions))}}).ToJson() << "\n";
    if (!out) return Unavailable("cannot write " + tmp);
  }
  ::chmod(tmp.c_str(), 0600);
  fs::rename(tmp, file, ec);
  if (ec) return Unavailable("cannot write " + file.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

std::string SessionFile() { return ConfigDir() + "/sessions.json"; }

std::optional<Session> LoadSession(const std::string& master_url) {
  const Value::Map sessions = Read();
  auto it = sessions.find(master_url);
  if (it == sessions.end()) return std::nullopt;
  const Value* token = it->second.Find("token");
  if (!token || !token->is_string()) return std::nullopt;
  const Value* username = it->second.Find("username");
  return Session{username && username->is_string() ? username->as_string() : "", token->as_string()};
}

Status SaveSession(const std::string& master_url, const Session& session) {
  Value::Map sessions = Read();
  sessions[master_url] = Value::Map{{"username", session.username}, {"token", session.token}};
  return Write(std::move(sessions));
}

Status RemoveSession(const std::string& master_url) {
  Value::Map sessions = Read();
  if (sessions.erase(master_url) == 0) return Status::Ok();
  return Write(std::move(sessions));
}

std::string TokenFor(const std::string& master_url) {
  const char* env = std::getenv("SF_TOKEN");
  if (env && *env) return env;
  auto s = LoadSession(master_url);
  return s ? s->token : "";
}

}  // namespace sf::api
