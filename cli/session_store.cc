#include "cli/session_store.h"

#include "cli/cli_defaults.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace sf::cli {
namespace {

nlohmann::json Read() {
  std::ifstream in(SessionFile());
  if (!in) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

Status Write(const nlohmann::json& j) {
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
    out << j.dump(2) << "\n";
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
  nlohmann::json j = Read();
  if (!j.contains("sessions") || !j["sessions"].is_object() || !j["sessions"].contains(master_url))
    return std::nullopt;
  const nlohmann::json& s = j["sessions"][master_url];
  if (!s.is_object() || !s.contains("token") || !s["token"].is_string()) return std::nullopt;
  return Session{s.value("username", ""), s["token"].get<std::string>()};
}

Status SaveSession(const std::string& master_url, const Session& session) {
  nlohmann::json j = Read();
  if (!j.contains("sessions") || !j["sessions"].is_object())
    j["sessions"] = nlohmann::json::object();
  j["sessions"][master_url] = {{"username", session.username}, {"token", session.token}};
  return Write(j);
}

Status RemoveSession(const std::string& master_url) {
  nlohmann::json j = Read();
  if (!j.contains("sessions") || !j["sessions"].is_object() ||
      !j["sessions"].contains(master_url)) {
    return Status::Ok();
  }
  j["sessions"].erase(master_url);
  return Write(j);
}

std::string TokenFor(const std::string& master_url) {
  const char* env = std::getenv("SF_TOKEN");
  if (env && *env) return env;
  auto s = LoadSession(master_url);
  return s ? s->token : "";
}

}  // namespace sf::cli
