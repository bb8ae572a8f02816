#include "tests/e2e/cluster_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <thread>

#include <pqxx/pqxx>

#include "cli/cluster_certificates.h"
#include "common/local_postgres.h"
#include "common/secret_file.h"
#include "tests/support/cleanup_watchdog.h"
#include "tests/support/read_file.h"

namespace sf::testing {
namespace fs = std::filesystem;

Daemon::Daemon(std::vector<std::string> argv, std::string log_file)
    : argv_(std::move(argv)), log_file_(std::move(log_file)) {}

Daemon::~Daemon() { Stop(SIGTERM, std::chrono::seconds(5)); }

bool Daemon::Start() {
  // Everything the child needs is prepared before fork: it calls only async-signal-safe
  // functions until exec.
  std::vector<char*> args;
  for (auto& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    setpgid(0, 0);
    // Die with the test process, even when it crashes, so no daemon outlives its test. (The
    // signal comes when the forking *thread* exits: gtest runs tests on the main thread.)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the test died before prctl
    int fd = open(log_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  setpgid(pid_, pid_);  // also here, so the group exists before either side runs on
  if (CleanupWatchdog* watchdog = CleanupWatchdog::Get()) watchdog->WatchProcessGroup(pid_);
  return true;
}

void Daemon::Reaped() {
  // Forgotten only after the wait: until then the group id cannot be reused.
  if (CleanupWatchdog* watchdog = CleanupWatchdog::Get()) watchdog->ForgetProcessGroup(pid_);
  pid_ = 0;
}

bool Daemon::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    Reaped();
    return false;
  }
  return kill(pid_, 0) == 0;
}

void Daemon::Stop(int sig, std::chrono::milliseconds wait) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      Reaped();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  Reaped();
}

static bool IsLoopbackHost(const std::string& host) { return host.rfind("127.", 0) == 0 || host == "localhost"; }

std::string Cluster::Binary(const std::string& name) {
  std::string sub = name == "sf"          ? "cli"
                    : name == "sf-master" ? "master"
                    : name == "sf-agent"  ? "agent"
                    : name == "sf-task"   ? "launcher"
                    : name == "sf-serve"  ? "serve"
                                          : "trainer";
  return BinaryDir() + "/" + sub + "/" + name;
}

Cluster::Cluster(int agents, int cpu_slots, ClusterLayout layout)
    : agents_(agents), cpu_slots_(cpu_slots), network_(std::move(layout)) {
  PostgresServer* pg = PostgresServer::Get();
  if (!pg) return;
  db_ = pg->NewDatabase();
  http_port_ = *PickFreePort();
  grpc_port_ = *PickFreePort();
  // If the test process dies, the watchdog kills this cluster's trainers (they run in sessions
  // of their own and outlive a SIGKILLed agent) and removes the directory.
  dir_.RemoveEvenIfProcessDies();
  if (CleanupWatchdog* watchdog = CleanupWatchdog::Get()) {
    watchdog->WatchEnvironment(TrainerEnvironment());
  }
  fs::create_directories(checkpoint_root());
  // Agents join with the cluster's token (docs/security.md), as `sf deploy local` sets it up.
  EXPECT_TRUE(EnsureSecretFile(join_token_file(), "join token").ok());
  if (network_.tls) {
    auto made = cli::EnsureClusterCertificates(dir_.path() + "/tls", {network_.master_host, "127.0.0.1", "localhost"});
    EXPECT_TRUE(made.ok()) << made.status().ToString();
  }
  StartMaster();
  StartAgents();
  EXPECT_TRUE(WaitForAgents(agents_)) << "agents did not register";
}

Cluster::~Cluster() {
  if (::testing::Test::HasFailure()) DumpLogs();
  for (auto& a : agent_daemons_) {
    if (a) a->Stop(SIGTERM);
  }
  if (master_) master_->Stop(SIGTERM);
  // Trainers and user-trial processes of this cluster (agents kill them on exit; make sure).
  for (pid_t p : TaskPids({TrainerEnvironment()})) kill(p, SIGKILL);
  if (!db_.empty()) {
    if (CleanupWatchdog* watchdog = CleanupWatchdog::Get()) {
      watchdog->ForgetEnvironment(TrainerEnvironment());
    }
  }
}

std::string Cluster::TrainerEnvironment() const { return "SF_MASTER_ADDRESS=" + grpc_address(); }

pid_t Cluster::master_pid() const { return master_ ? master_->pid() : 0; }

std::vector<pid_t> Cluster::agent_pids() const {
  std::vector<pid_t> out;
  for (const auto& a : agent_daemons_) out.push_back(a ? a->pid() : 0);
  return out;
}

void Cluster::StartMaster() {
  std::vector<std::string> argv{Binary("sf-master"), "--db", db_, "--bind", network_.master_host, "--http-port",
                                std::to_string(http_port_), "--grpc-port", std::to_string(grpc_port_),
                                "--checkpoint-root", checkpoint_root(), "--agent-join-token-file",
                                join_token_file()};
  // A test that loses an agent on purpose may ask for a shorter grace in its master flags.
  if (std::find(network_.master_flags.begin(), network_.master_flags.end(), "--agent-reconnect-grace-seconds") ==
      network_.master_flags.end()) {
    argv.insert(argv.end(), {"--agent-reconnect-grace-seconds", "60"});
  }
  if (network_.tls) {
    argv.insert(argv.end(), {"--tls-cert-file", dir_.path() + "/tls/server.pem", "--tls-key-file",
                             dir_.path() + "/tls/server-key.pem", "--task-ca-cert-file", dir_.path() + "/tls/ca.pem",
                             "--task-ca-key-file", dir_.path() + "/tls/ca-key.pem"});
  } else if (!IsLoopbackHost(network_.master_host)) {
    // A plaintext master on a test network's bridge address (not loopback) must be told it may
    // listen there.
    argv.push_back("--insecure");
  }
  argv.insert(argv.end(), network_.master_flags.begin(), network_.master_flags.end());
  const bool auth = std::find(argv.begin(), argv.end(), "--disable-auth") == argv.end();
  if (auth && master_starts_ == 0) {
    // The admin's first password, as `sf deploy local` sets it: a 0600 file the master reads
    // and deletes on its first start.
    const std::string file = dir_.path() + "/admin-password";
    EXPECT_TRUE(EnsureSecretFile(file, "admin password").ok());
    auto password = ReadSecretFile(file, "admin password");
    EXPECT_TRUE(password.ok());
    admin_password_ = password.ok() ? *password : "";
    argv.insert(argv.end(), {"--admin-password-file", file});
  }
  master_ = std::make_unique<Daemon>(argv, dir_.path() + "/master-" + std::to_string(master_starts_++) + ".log");
  ASSERT_TRUE(master_->Start());
  EXPECT_TRUE(WaitFor([&] { return Get("/health").first == 200; }, std::chrono::seconds(60)))
      << "master did not become healthy";
  if (auth && admin_token_.empty()) {
    admin_token_ = Login("admin", admin_password_);
    EXPECT_FALSE(admin_token_.empty()) << "the fixture could not log in as admin";
    // `sf` and HttpClient in this test process (and its children) act as the admin.
    setenv("SF_TOKEN", admin_token_.c_str(), 1);
  }
}

std::string Cluster::Login(const std::string& username, const std::string& password) {
  auto client = api::MasterClient::Create(url(), ca_file());
  if (!client.ok()) return "";
  client->set_token("");
  auto r = client->Post("/api/v1/auth/login",
                        Value(Value::Map{{"username", username}, {"password", password}}).ToJson());
  if (!r.ok() || r->status != 200) return "";
  auto v = Value::FromJson(r->body);
  const Value* token = v.ok() ? v->Find("token") : nullptr;
  return token && token->is_string() ? token->as_string() : "";
}

void Cluster::StopMaster(int sig) {
  if (master_) master_->Stop(sig);
}

void Cluster::StartAgents() {
  for (int i = 0; i < agents_; ++i) StartAgent(i);
}

void Cluster::StopAgent(int i, int sig) {
  if (static_cast<size_t>(i) < agent_daemons_.size() && agent_daemons_[static_cast<size_t>(i)]) {
    agent_daemons_[static_cast<size_t>(i)]->Stop(sig);
  }
}

void Cluster::StartAgent(int i) {
  std::string id = "e2e-agent-" + std::to_string(i);
  fs::create_directories(dir_.path() + "/" + id);
  const size_t k = static_cast<size_t>(i);
  const std::string trainer = k < network_.agent_trainer.size() && !network_.agent_trainer[k].empty()
                                  ? network_.agent_trainer[k]
                                  : Binary("sf-trainer");
  const std::string slots = k < network_.agent_slots.size() && !network_.agent_slots[k].empty()
                                ? network_.agent_slots[k]
                                : "cpu:" + std::to_string(cpu_slots_);
  std::vector<std::string> argv{Binary("sf-agent"), "--master", grpc_address(), "--agent-id", id, "--slots",
                                slots, "--trainer", trainer,
                                "--work-dir", dir_.path() + "/" + id, "--join-token-file", join_token_file(),
                                "--kill-tasks-on-exit"};
  if (network_.tls) argv.insert(argv.end(), {"--master-ca-file", ca_file()});
  if (k < network_.agent_flags.size()) {
    argv.insert(argv.end(), network_.agent_flags[k].begin(), network_.agent_flags[k].end());
  }
  if (k < network_.agent_netns.size()) {
    argv.insert(argv.begin(), {"/usr/sbin/ip", "netns", "exec", network_.agent_netns[k]});
  }
  auto d = std::make_unique<Daemon>(argv, dir_.path() + "/" + id + ".log");
  ASSERT_TRUE(d->Start());
  if (agent_daemons_.size() <= k) agent_daemons_.resize(k + 1);
  agent_daemons_[k] = std::move(d);
}

bool Cluster::WaitForAgents(int n, std::chrono::seconds timeout) {
  return WaitFor(
      [&] {
        auto [code, v] = Get("/api/v1/agents");
        if (code != 200 || !v.Find("agents")) return false;
        int connected = 0;
        for (const Value& a : v.Find("agents")->as_list()) {
          const Value* c = a.Find("connected");
          connected += c && c->is_bool() && c->as_bool();
        }
        return connected >= n;
      },
      timeout);
}

bool Cluster::WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return cond();
}

std::pair<int, Value> Cluster::Call(const std::string& method, const std::string& path, const std::string& body) {
  auto client = api::MasterClient::Create(url(), ca_file());
  if (!admin_token_.empty()) client->set_token(admin_token_);
  auto r = method == "GET" ? client->Get(path) : method == "POST" ? client->Post(path, body) : client->Delete(path);
  if (!r.ok()) return {0, Value()};
  auto v = Value::FromJson(r->body);
  return {r->status, v.ok() ? *v : Value(r->body)};
}

std::pair<int, Value> Cluster::Get(const std::string& path) { return Call("GET", path, ""); }
std::pair<int, Value> Cluster::Post(const std::string& path, const std::string& body) { return Call("POST", path, body); }
std::pair<int, Value> Cluster::Delete(const std::string& path) { return Call("DELETE", path, ""); }

int64_t Cluster::Submit(const std::string& yaml) {
  auto [code, v] = Post("/api/v1/experiments", Value(Value::Map{{"configYaml", yaml}}).ToJson());
  EXPECT_EQ(code, 200) << v.ToJson();
  if (code != 200) return 0;
  return std::stoll(v.Find("experiment")->Find("id")->as_string());
}

std::string Cluster::ExperimentState(int64_t id) {
  auto [code, v] = Get("/api/v1/experiments/" + std::to_string(id));
  const Value* e = code == 200 ? v.Find("experiment") : nullptr;
  const Value* state = e ? e->Find("state") : nullptr;
  return state && state->is_string() ? state->as_string() : "";
}

bool Cluster::WaitForState(int64_t id, const std::string& state, std::chrono::seconds timeout) {
  return WaitFor([&] { return ExperimentState(id) == state; }, timeout);
}

Value Cluster::Trials(int64_t experiment_id) {
  auto [code, v] = Get("/api/v1/experiments/" + std::to_string(experiment_id) + "/trials");
  const Value* t = code == 200 ? v.Find("trials") : nullptr;
  return t && t->is_list() ? *t : Value(Value::List{});
}

void Cluster::DumpLogs() {
  auto dump = [](const fs::path& file, const std::string& title, size_t keep) {
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.size() > keep) text = "...\n" + text.substr(text.size() - keep);
    std::cerr << "===== " << title << "\n" << text << "\n";
  };
  for (const auto& entry : fs::directory_iterator(dir_.path())) {
    if (entry.path().extension() != ".log") continue;
    dump(entry.path(), entry.path().filename().string(), 20000);
  }
  // Each task's own output (<agent work dir>/<task>/stdout.log, stderr.log): why a trainer hung
  // or failed is there, not in the daemons' logs.
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir_.path(), ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it.depth() > 3 || (name != "stdout.log" && name != "stderr.log")) continue;
    dump(it->path(), fs::relative(it->path(), dir_.path(), ec).string(), 4000);
  }
}

std::vector<pid_t> TrainerPids(const std::vector<std::string>& env) {
  return TaskPids(env, [](const std::string& c) {
    return c.find("sf-trainer") != std::string::npos && c.find("cluster") != std::string::npos;
  });
}

std::vector<pid_t> TaskPids(const std::vector<std::string>& env, const std::function<bool(const std::string&)>& program) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::stoi(name) == getpid()) continue;
    const std::string c = ReadFileOrEmpty((entry.path() / "cmdline").string());
    if (program && !program(c)) continue;
    const std::string e = ReadFileOrEmpty((entry.path() / "environ").string());
    // Entries are NUL-separated; match whole entries only.
    std::vector<std::string> entries;
    for (size_t pos = 0; pos < e.size();) {
      size_t end = e.find('\0', pos);
      if (end == std::string::npos) end = e.size();
      entries.push_back(e.substr(pos, end - pos));
      pos = end + 1;
    }
    bool all = true;
    for (const std::string& want : env) {
      all = all && std::find(entries.begin(), entries.end(), want) != entries.end();
    }
    if (all) out.push_back(std::stoi(name));
  }
  return out;
}

int64_t Count(const std::string& db, const std::string& sql) {
  pqxx::connection conn(db);
  pqxx::work tx(conn);
  return tx.exec1(sql)[0].as<int64_t>();
}

std::string Text(const std::string& db, const std::string& sql) {
  pqxx::connection conn(db);
  pqxx::work tx(conn);
  auto r = tx.exec1(sql);
  return r[0].is_null() ? "" : r[0].as<std::string>();
}

int64_t Id(const Value& v) { return std::stoll(v.Find("id")->as_string()); }

std::vector<pid_t> Cluster::TrainerPids(int64_t trial_id) const {
  std::vector<std::string> env = {TrainerEnvironment()};
  if (trial_id != 0) env.push_back("SF_TRIAL_ID=" + std::to_string(trial_id));
  return ::sf::testing::TrainerPids(env);
}

std::string TinyExperiment(int trials, int64_t batches, int64_t unit, const std::string& name) {
  std::string data = DataCopy("multi30k-de-en-tiny");
  std::string dropouts;
  for (int i = 0; i < trials; ++i) dropouts += (i ? ", " : "") + std::to_string(0.05 * i);
  return "name: " + name + "\n"
         "data:\n"
         "  train: {src: " + data + "/train.de, tgt: " + data + "/train.en}\n"
         "  valid: {src: " + data + "/valid.de, tgt: " + data + "/valid.en}\n"
         "hyperparameters:\n"
         "  arch: transformer_tiny\n"
         "  d_model: 32\n  heads: 2\n  encoder_layers: 1\n  decoder_layers: 1\n  ffn_dim: 64\n"
         "  dropout: {type: categorical, vals: [" + dropouts + "]}\n"
         "  lr: 0.002\n"
         "  lr_schedule: {type: inverse_sqrt, warmup: 10}\n"
         "  max_tokens: 512\n"
         "searcher:\n"
         "  name: grid\n"
         "  metric: validation_loss\n"
         "  max_length: {batches: " + std::to_string(batches) + "}\n"
         "  max_concurrent_trials: 4\n"
         "scheduling_unit: " + std::to_string(unit) + "\n"
         "min_checkpoint_period: {batches: " + std::to_string(unit * 2) + "}\n"
         "max_restarts: 2\n";
}

int64_t TotalBatches(Cluster& cluster, int64_t id) {
  Value t = cluster.Trials(id);
  if (t.as_list().size() != 1) return -1;
  return std::stoll(t.as_list()[0].Find("totalBatches")->as_string());
}

void ExpectDashboardViews(Cluster& cluster, const std::vector<std::string>& views, const std::string& artifacts) {
  ASSERT_TRUE(fs::exists(SourceDir() + "/webui/dist/index.html"))
      << "the web UI is not built: run tests/webui/run.sh (deploy/test.sh does)";
  ASSERT_TRUE(fs::exists(SourceDir() + "/webui/node_modules/playwright-core")) << "run npm ci in webui/";
  CommandOptions o;
  o.working_dir = SourceDir() + "/webui";
  o.env["SF_MASTER_URL"] = cluster.url();
  if (!cluster.ca_file().empty()) o.env["NODE_EXTRA_CA_CERTS"] = cluster.ca_file();
  o.env["SF_ARTIFACTS_DIR"] = BinaryDir() + "/" + artifacts;
  o.env["SF_E2E_USERNAME"] = "admin";
  o.env["SF_E2E_PASSWORD"] = cluster.admin_password();
  o.timeout = std::chrono::minutes(4);
  std::vector<std::string> argv = {"node", "e2e/views.e2e.mjs"};
  argv.insert(argv.end(), views.begin(), views.end());
  auto r = RunCommand(argv, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::cout << r->output;  // each check, passed or not: what the run proved
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_NE(r->output.find(" passed, 0 failed"), std::string::npos);
}

LocalDeployment::LocalDeployment(const TempDir& scratch, std::chrono::seconds timeout)
    : dir_(scratch.path() + "/local") {
  options_.env = {{"XDG_CONFIG_HOME", scratch.path() + "/config"}, {"SF_MASTER", ""}, {"SF_CA_FILE", ""},
                  {"SF_TOKEN", ""}};
  options_.timeout = timeout;
}

LocalDeployment::~LocalDeployment() { Sf({"deploy", "local", "down", "--dir", dir_, "--delete-data"}); }

CommandResult LocalDeployment::Sf(std::vector<std::string> args) {
  args.insert(args.begin(), Cluster::Binary("sf"));
  auto run = RunCommand(args, options_);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? *run : CommandResult{};
}

}  // namespace sf::testing
