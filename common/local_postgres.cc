#include "common/local_postgres.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/subprocess.h"

namespace sf {
namespace fs = std::filesystem;

Result<int> PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Internal("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return Internal("bind() on 127.0.0.1 failed");
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

LocalPostgres::LocalPostgres(LocalPostgresOptions options) : options_(std::move(options)) {}

Result<std::string> LocalPostgres::FindBinDir() {
  std::error_code ec;
  // A server outside Debian's layout (a relocated copy, e.g. the one bench/gpu_bundle.sh carries
  // to a machine without PostgreSQL): used as it is, or refused with the reason.
  if (const char* dir = std::getenv("SF_POSTGRES_BIN_DIR"); dir != nullptr && *dir != '\0') {
    for (const char* tool : {"initdb", "pg_ctl", "postgres", "psql"}) {
      const std::string path = std::string(dir) + "/" + tool;
      if (access(path.c_str(), X_OK) != 0) {
        return NotFound("SF_POSTGRES_BIN_DIR=" + std::string(dir) + " has no executable " + tool);
      }
    }
    return std::string(dir);
  }
  std::string best;
  int best_version = -1;
  if (fs::is_directory("/usr/lib/postgresql", ec)) {
    for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
      std::string bin = entry.path().string() + "/bin";
      int version = std::atoi(entry.path().filename().c_str());
      if (fs::exists(bin + "/initdb", ec) && fs::exists(bin + "/pg_ctl", ec) && version > best_version) {
        best = bin;
        best_version = version;
      }
    }
  }
  if (best.empty()) {
    return NotFound(
        "no PostgreSQL server found under /usr/lib/postgresql (run deploy/install-deps.sh)");
  }
  return best;
}

std::optional<std::string> LocalPostgres::ServerUser() const {
  if (geteuid() != 0) return std::nullopt;
  if (getpwnam("postgres")) return std::string("postgres");
  return std::string("nobody");
}

std::string LocalPostgres::ConnectionString() const { return ConnectionString(options_.database); }

std::string LocalPostgres::ConnectionString(const std::string& database) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=" + database +
         " connect_timeout=10";
}

bool LocalPostgres::IsRunning() const {
  std::error_code ec;
  return fs::exists(DataDir() + "/postmaster.pid", ec) && !bin_dir_.empty() && [&] {
    CommandOptions o;
    o.run_as_user = ServerUser();
    o.timeout = std::chrono::seconds(10);
    auto r = RunCommand({bin_dir_ + "/pg_ctl", "status", "-D", DataDir()}, o);
    return r.ok() && r->exit_code == 0;
  }();
}

Status LocalPostgres::Start() {
  SF_ASSIGN_OR_RETURN(bin_dir_, FindBinDir());
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) return Internal("cannot create " + options_.dir + ": " + ec.message());
  std::optional<std::string> user = ServerUser();
  if (user) {
    struct passwd* pw = getpwnam(user->c_str());
    // The server user must be able to reach and own its directory.
    if (chown(options_.dir.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      return Internal("cannot hand " + options_.dir + " to user " + *user);
    }
    for (fs::path p = fs::path(options_.dir).parent_path(); p != p.root_path(); p = p.parent_path()) {
      auto perms = fs::status(p, ec).permissions();
      if ((perms & fs::perms::others_exec) == fs::perms::none) {
        return FailedPrecondition("PostgreSQL runs as user " + *user + ", who cannot enter " +
                                  p.string() + "; choose a directory it can reach");
      }
    }
  }
  CommandOptions as_server;
  as_server.run_as_user = user;
  as_server.timeout = std::chrono::minutes(2);

  if (!fs::exists(DataDir() + "/PG_VERSION", ec)) {
    auto r = RunCommand({bin_dir_ + "/initdb", "-D", DataDir(), "-U", "postgres", "--auth=trust",
                         "--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions"},
                        as_server);
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) return Internal("initdb failed:\n" + r->output);
  }

  // The port is fixed in the data directory's config so `status`/`down` find the same server.
  std::string port_file = options_.dir + "/port";
  if (options_.port != 0) {
    port_ = options_.port;
  } else if (std::ifstream in(port_file); in && (in >> port_) && port_ > 0) {
    // reuse the recorded port
  } else {
    SF_ASSIGN_OR_RETURN(port_, PickFreePort());
  }
  std::ofstream(port_file) << port_ << "\n";

  if (!IsRunning()) {
    std::string server_options = "-p " + std::to_string(port_) +
                                 " -c listen_addresses=127.0.0.1 -k " + options_.dir +
                                 " -c max_connections=200";
    // Not durable: nothing is flushed to disk, so an OS crash may lose data. A crash of the
    // server alone (`pg_ctl stop -m immediate`, a killed postmaster) loses nothing committed:
    // each commit still writes its WAL to the kernel before it returns (synchronous_commit
    // stays on), which the chaos tests rely on.
    if (!options_.durable) server_options += " -c fsync=off -c full_page_writes=off";
    auto r = RunCommand({bin_dir_ + "/pg_ctl", "start", "-D", DataDir(), "-w", "-t", "60", "-l",
                         options_.dir + "/postgres.log", "-o", server_options},
                        as_server);
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) {
      std::ifstream log(options_.dir + "/postgres.log");
      std::string tail((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
      return Unavailable("pg_ctl start failed:\n" + r->output + "\n" + tail);
    }
  }
  // Create the database when missing.
  std::string check_sql = "SELECT 1 FROM pg_database WHERE datname = '" + options_.database + "'";
  CommandOptions psql_opts;
  psql_opts.timeout = std::chrono::seconds(60);
  auto r = RunCommand({bin_dir_ + "/psql", "-h", "127.0.0.1", "-p", std::to_string(port_), "-U",
                       "postgres", "-d", "postgres", "-tAc", check_sql},
                      psql_opts);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Unavailable("cannot connect to PostgreSQL: " + r->output);
  if (r->output.find('1') == std::string::npos) {
    SF_RETURN_IF_ERROR(RunSql("postgres", "CREATE DATABASE \"" + options_.database + "\""));
  }
  return Status::Ok();
}

Status LocalPostgres::RunSql(const std::string& database, const std::string& sql) const {
  CommandOptions o;
  o.timeout = std::chrono::seconds(60);
  auto r = RunCommand({bin_dir_ + "/psql", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                       std::to_string(port_), "-U", "postgres", "-d", database, "-qc", sql},
                      o);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Internal("psql: " + r->output);
  return Status::Ok();
}

Status LocalPostgres::Stop(StopMode mode) {
  if (bin_dir_.empty()) {
    auto bin = FindBinDir();
    if (!bin.ok()) return Status::Ok();
    bin_dir_ = *bin;
  }
  std::error_code ec;
  if (!fs::exists(DataDir() + "/postmaster.pid", ec)) return Status::Ok();
  CommandOptions o;
  o.run_as_user = ServerUser();
  o.timeout = std::chrono::minutes(1);
  auto r = RunCommand({bin_dir_ + "/pg_ctl", "stop", "-D", DataDir(), "-m", mode == StopMode::kImmediate ? "immediate" : "fast", "-w"}, o);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Internal("pg_ctl stop failed: " + r->output);
  return Status::Ok();
}

}  // namespace sf
