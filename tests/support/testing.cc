#include "tests/support/testing.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace sf::testing {
namespace fs = std::filesystem;

std::string SourceDir() { return SF_SOURCE_DIR; }
std::string BinaryDir() { return SF_BINARY_DIR; }
std::string SharedDataDir() {
  if (const char* d = std::getenv("SF_SHARED_DATA")) return d;
  return (fs::path(SourceDir()).parent_path() / "shared" / "data").string();
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
  fs::remove_all(path_, ec);
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
  Status st = s->postgres_->Start();
  if (!st.ok()) {
    ADD_FAILURE() << "could not start a test PostgreSQL: " << st.ToString();
    (void)s->postgres_->Stop();
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
  (void)g_server->postgres_->Stop();
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

}  // namespace sf::testing
