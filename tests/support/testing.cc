#include "tests/support/testing.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "tests/support/cleanup_watchdog.h"

namespace sf::testing {
namespace fs = std::filesystem;

std::string SourceDir() { return SF_SOURCE_DIR; }
std::string BinaryDir() {
  if (const char* d = std::getenv("SF_BINARY_DIR"); d != nullptr && *d != '\0') return d;
  return SF_BINARY_DIR;
}
namespace {
std::string SharedDataRoot() {
  if (const char* d = std::getenv("SF_SHARED_DATA")) return d;
  return (fs::path(SourceDir()).parent_path() / "shared" / "data").string();
}

// Copies the regular files of <shared>/<name> into `to` (created) with owner-writable modes.
bool CopyCorpus(const std::string& name, const std::string& to) {
  std::error_code ec;
  const fs::path from = fs::path(SharedDataRoot()) / name;
  if (!fs::is_directory(from, ec)) {
    ADD_FAILURE() << "test data " << from.string() << " is missing";
    return false;
  }
  fs::create_directories(to, ec);
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    if (!entry.is_regular_file()) continue;
    const fs::path target = fs::path(to) / entry.path().filename();
    fs::copy_file(entry.path(), target, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      ADD_FAILURE() << "cannot copy " << entry.path().string() << ": " << ec.message();
      return false;
    }
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                fs::perms::others_read, ec);
  }
  return true;
}

std::mutex g_data_mu;
}  // namespace

std::string DataCopy(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_data_mu);
  static TempDir root;  // one directory for the process, removed at exit
  root.RemoveEvenIfProcessDies();  // a no-op after the first call
  const std::string dir = root.path() + "/" + name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) CopyCorpus(name, dir);
  return dir;
}

std::string ReadOnlyDataCopy(const std::string& name, const TempDir& owner) {
  const std::string dir = owner.path() + "/" + name;
  if (!CopyCorpus(name, dir)) return dir;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    fs::permissions(entry.path(), fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read, ec);
  }
  ::chmod(dir.c_str(), 0555);
  return dir;
}

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "sf-test-XXXXXX").string();
  char* made = mkdtemp(tmpl.data());
  if (!made) {
    ADD_FAILURE() << "mkdtemp failed";
    return;
  }
  path_ = made;
  chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  // Read-only directories inside (ReadOnlyDataCopy) get their write bit back first, so the
  // removal works for an unprivileged user too.
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
  }
  fs::remove_all(path_, ec);
  // Forgotten only now that it is gone: a death in between leaves the watchdog a no-op.
  if (watched_) {
    if (CleanupWatchdog* watchdog = CleanupWatchdog::Get()) watchdog->ForgetDirectory(path_);
  }
}

void TempDir::RemoveEvenIfProcessDies() {
  if (path_.empty() || watched_) return;
  CleanupWatchdog* watchdog = CleanupWatchdog::Get();
  if (!watchdog) return;
  watchdog->WatchDirectory(path_);
  watched_ = true;
}

std::string TempDir::WriteFile(const std::string& name, const std::string& content) const {
  std::string p = path_ + "/" + name;
  fs::create_directories(fs::path(p).parent_path());
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

namespace {
std::mutex g_mu;
PostgresServer* g_server = nullptr;
}  // namespace

PostgresServer* PostgresServer::Get() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_server) return g_server;
  auto* s = new PostgresServer();
  s->dir_ = std::make_unique<TempDir>();
  LocalPostgresOptions o;
  o.dir = s->dir_->path() + "/pg";
  o.database = "postgres";
  o.durable = false;
  s->postgres_ = std::make_unique<LocalPostgres>(o);
  // Registered before the start, so there is no moment when a killed test leaves it running.
  CleanupWatchdog* watchdog = CleanupWatchdog::Get();
  if (!watchdog) {
    delete s;
    return nullptr;
  }
  s->dir_->RemoveEvenIfProcessDies();
  watchdog->WatchPostgres(s->postgres_->DataDir());
  Status st = s->postgres_->Start();
  if (!st.ok()) {
    ADD_FAILURE() << "could not start a test PostgreSQL: " << st.ToString();
    if (s->postgres_->Stop().ok()) watchdog->ForgetPostgres(s->postgres_->DataDir());
    delete s;
    return nullptr;
  }
  g_server = s;
  std::atexit(&PostgresServer::Shutdown);
  return g_server;
}

void PostgresServer::Shutdown() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_server) return;
  // A failed stop stays registered: the watchdog shuts the server down when we are gone.
  if (g_server->postgres_->Stop().ok()) {
    if (CleanupWatchdog* watchdog = CleanupWatchdog::Get()) {
      watchdog->ForgetPostgres(g_server->postgres_->DataDir());
    }
  }
  delete g_server;
  g_server = nullptr;
}

std::string PostgresServer::NewDatabase() {
  std::string name = "test_" + std::to_string(getpid()) + "_" + std::to_string(next_database_++);
  Status st = postgres_->RunSql("postgres", "CREATE DATABASE " + name);
  if (!st.ok()) ADD_FAILURE() << st.ToString();
  return postgres_->ConnectionString(name);
}

void PostgresTest::SetUp() {
  server_ = PostgresServer::Get();
  if (!server_) GTEST_FAIL() << "no PostgreSQL server";
  connection_string_ = server_->NewDatabase();
}

std::string RunShellCommand(const std::string& command, int* status) {
  std::string out;
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  if (!f) {
    *status = -1;
    return "popen failed";
  }
  char buf[4096];
  while (fgets(buf, sizeof(buf), f)) out += buf;
  *status = pclose(f);
  return out;
}

}  // namespace sf::testing
