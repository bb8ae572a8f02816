#include "common/api/master_endpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/env.h"
#include "common/value.h"

namespace sf::api {
namespace fs = std::filesystem;

namespace {

}  // namespace

std::string ConfigDir() {
  std::string base = Env("XDG_CONFIG_HOME");
  if (base.empty() || base[0] != '/')
    base = Env("HOME").empty() ? "/tmp/.config" : Env("HOME") + "/.config";
  return base + "/steadfast";
}

std::string CliDefaultsPath() { return ConfigDir() + "/cli.json"; }

Result<std::optional<CliDefaults>> ReadCliDefaults(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<CliDefaults>();
    return InvalidArgument("sf defaults file " + path +
                           ": cannot read it: " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  Result<Value> json = Value::FromJson(text.str());
  if (!json.ok() || !json->is_map()) {
    return InvalidArgument(
        "sf defaults file " + path +
        ": not a JSON object like {\"master\": \"https://127.0.0.1:8080\", \"ca_file\": \"...\"}");
  }
  CliDefaults out;
  for (auto [key, field] : {std::pair{"master", &out.master},
                            {"ca_file", &out.ca_file},
                            {"deployment", &out.deployment}}) {
    const Value* v = json->Find(key);
    if (!v || v->is_null()) continue;
    if (!v->is_string())
      return InvalidArgument("sf defaults file " + path + ": \"" + key + "\" must be a string");
    *field = v->as_string();
  }
  return std::optional<CliDefaults>(std::move(out));
}

Status WriteCliDefaults(const std::string& path, const CliDefaults& defaults) {
  Value::Map json{{"master", defaults.master}, {"ca_file", defaults.ca_file}};
  if (!defaults.deployment.empty()) json["deployment"] = defaults.deployment;
  const std::string text = Value(std::move(json)).ToJson() + "\n";
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec)
      return Internal("sf defaults file " + path + ": cannot create " + dir.string() + ": " +
                      ec.message());
    chmod(dir.c_str(), 0700);
  }
  const std::string temporary = path + ".tmp";
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return Internal("sf defaults file " + path + ": cannot write it: " + std::strerror(errno));
  const bool written = fchmod(fd, 0600) == 0 &&
                       write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written || rename(temporary.c_str(), path.c_str()) != 0) {
    unlink(temporary.c_str());
    return Internal("sf defaults file " + path + ": cannot write it: " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<MasterEndpoint> ResolveMasterEndpoint(const std::string& master_flag,
                                             const std::string& ca_file_flag) {
  MasterEndpoint out;
  out.url = !master_flag.empty() ? master_flag : Env("SF_MASTER");
  std::string file_ca;
  if (out.url.empty()) {
    const std::string path = CliDefaultsPath();
    SF_ASSIGN_OR_RETURN(std::optional<CliDefaults> defaults, ReadCliDefaults(path));
    if (defaults && !defaults->master.empty()) {
      out.url = defaults->master;
      file_ca = defaults->ca_file;
    }
  }
  if (out.url.empty()) out.url = "http://127.0.0.1:8080";
  out.ca_file = !ca_file_flag.empty()        ? ca_file_flag
                : !Env("SF_CA_FILE").empty() ? Env("SF_CA_FILE")
                                             : file_ca;
  return out;
}

}  // namespace sf::api
