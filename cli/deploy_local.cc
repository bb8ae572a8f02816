// `sf deploy local up|status|down`: a whole cluster on this machine — a private PostgreSQL, the
// master and N agents — started as background processes whose pids and logs live in DIR.
//
// TLS is on unless `up --no-tls`: `up` makes a private CA and the master's certificate in
// DIR/tls (cli/cluster_certificates.h), starts the master with them and the agents with the CA,
// and records the master's URL and CA in DIR/cli.json and in the user's CLI defaults file
// (common/api/master_endpoint.h), so the plain `sf` commands that follow reach it without flags. `down`
// removes the user's defaults file when it still points at DIR.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "common/api/master_endpoint.h"
#include "cli/cluster_certificates.h"
#include "cli/deploy_local_s3.h"
#include "cli/deploy_local_slurm.h"
#include "cli/command.h"
#include "common/api/master_client.h"
#include "common/api/session_store.h"
#include "common/subprocess.h"
#include "common/local_postgres.h"
#include "common/secret_file.h"
#include "common/tls_files.h"
#include "common/value.h"

namespace sf::cli {
namespace fs = std::filesystem;
namespace {

std::string DefaultDir() {
  // As root the PostgreSQL server runs as an unprivileged user, who can't enter /root.
  if (geteuid() == 0) return "/var/lib/steadfast/local";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.steadfast/local";
}

// The flags of `up`, `status` and `down`; each uses those it needs.
struct LocalFlags {
  int agents = 1;
  int cpu_slots = 1;
  std::string dir = DefaultDir();
  int http_port = 8080;
  int grpc_port = 8090;
  bool delete_data = false;
  bool no_tls = false;
  bool no_auth = false;
  bool slurm = false;  // trials run as Slurm jobs on a local Slurm cluster, no agents
  bool s3 = false;     // checkpoints go to a local S3 server (Ceph RADOS Gateway)
  bool gpus = false;   // the agent offers this machine's GPUs (sf-agent --slots auto)
  std::string master_config;  // the master's own config file (sf-master --config), when given
};

// Where this deployment's master is and how to verify it: DIR/cli.json, written by `up`.
std::string DeploymentRecord(const std::string& dir) { return dir + "/cli.json"; }

// The master of the deployment in `dir` on `http_port`: https with DIR's CA when `up` turned TLS
// on (as DIR/cli.json says), else plain http.
api::MasterEndpoint DeploymentMaster(const std::string& dir, int http_port) {
  Result<std::optional<api::CliDefaults>> record = api::ReadCliDefaults(DeploymentRecord(dir));
  const bool tls = record.ok() && *record && (*record)->master.rfind("https://", 0) == 0;
  return {std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(http_port),
          tls ? (*record)->ca_file : ""};
}

// The sibling programs: installed side by side, or in the build tree (build/cli/sf ->
// build/master/sf-master, build/agent/sf-agent, build/trainer/sf-trainer).
std::string FindProgram(const std::string& name, const std::string& subdir) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (fs::path p : {self / name, self / ".." / subdir / name}) {
    if (fs::exists(p, ec)) return fs::weakly_canonical(p).string();
  }
  return "";
}

Result<pid_t> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log_file) {
  pid_t pid = fork();
  if (pid < 0) return Internal("fork failed");
  if (pid == 0) {
    setsid();
    int fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}


pid_t ReadPid(const std::string& file) {
  std::ifstream in(file);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

void StopPid(const std::string& pid_file, const std::string& what) {
  pid_t pid = ReadPid(pid_file);
  if (!ProcessRuns(pid)) {
    fs::remove(pid_file);
    return;
  }
  kill(pid, SIGTERM);
  for (int i = 0; i < 100 && ProcessRuns(pid); ++i) {
    waitpid(pid, nullptr, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (ProcessRuns(pid)) kill(pid, SIGKILL);
  fs::remove(pid_file);
  std::cout << "stopped " << what << " (pid " << pid << ")\n";
}

int Up(const LocalFlags& f) {
  std::string master_bin = FindProgram("sf-master", "master");
  std::string agent_bin = FindProgram("sf-agent", "agent");
  std::string trainer_bin = FindProgram("sf-trainer", "trainer");
  std::string serve_bin = FindProgram("sf-serve", "serve");  // optional: `sf serve start` needs it
  std::string task_bin = FindProgram("sf-task", "launcher");  // --slurm: each rank's launcher
  for (auto [bin, name] : {std::pair{master_bin, "sf-master"}, {agent_bin, "sf-agent"}, {trainer_bin, "sf-trainer"}}) {
    if (bin.empty()) {
      std::cerr << "sf deploy local: cannot find " << name << " next to sf (build everything first)\n";
      return kExitFailed;
    }
  }
  if (f.gpus && (f.agents != 1 || f.slurm)) {
    // Every agent would offer the same GPUs: two trials would share one.
    std::cerr << "sf deploy local: --gpus needs exactly one agent (--agents 1) and no --slurm: the agent "
                 "offers each of this machine's GPUs as a slot\n";
    return kExitUsage;
  }
  if (!f.master_config.empty() && f.slurm) {
    // --slurm writes the master's config itself (the Slurm resource manager's settings).
    std::cerr << "sf deploy local: --master-config cannot be combined with --slurm, which writes the master's "
                 "config\n";
    return kExitUsage;
  }
  if (f.slurm && task_bin.empty()) {
    std::cerr << "sf deploy local: cannot find sf-task next to sf (build everything first)\n";
    return kExitFailed;
  }
  std::error_code ec;
  fs::create_directories(f.dir + "/logs", ec);
  fs::create_directories(f.dir + "/checkpoints", ec);
  chmod(f.dir.c_str(), 0755);
  // --slurm: the Slurm cluster first; the master listens where its nodes reach the host.
  std::optional<LocalSlurm> slurm;
  if (f.slurm) {
    Result<LocalSlurm> started = StartLocalSlurm(f.dir);
    if (!started.ok()) {
      std::cerr << "sf deploy local: " << started.status().message() << "\n";
      return kExitFailed;
    }
    slurm = *started;
    std::cout << "Slurm: partition " << slurm->partition << ", nodes " << slurm->nodes << ", the master at "
              << slurm->host_addr << " for them\n";
  }
  // --s3: the S3 server, whose endpoint and keys the master and agents inherit.
  std::optional<LocalS3> s3;
  if (f.s3) {
    Result<LocalS3> started = StartLocalS3(f.dir);
    if (!started.ok()) {
      std::cerr << "sf deploy local: " << started.status().message() << "\n";
      return kExitFailed;
    }
    s3 = *started;
    std::cout << "S3: " << s3->endpoint << ", bucket " << kLocalS3Bucket << " (keys in " << s3->env_file << ")\n";
  }
  LocalPostgresOptions pg_options;
  pg_options.dir = f.dir + "/postgres";
  pg_options.database = "steadfast";
  LocalPostgres pg(pg_options);
  std::cout << "starting PostgreSQL in " << pg_options.dir << "\n" << std::flush;
  Status st = pg.Start();
  if (!st.ok()) {
    std::cerr << "sf deploy local: " << st.message() << "\n";
    return kExitFailed;
  }
  // TLS: a private CA and the master's certificate in DIR/tls, kept across restarts.
  api::MasterEndpoint master{"http://127.0.0.1:" + std::to_string(f.http_port), ""};
  ClusterCertificates certificates;
  if (!f.no_tls) {
    std::vector<std::string> names = LocalHostNames();
    if (slurm) {
      names.push_back(slurm->host_addr);
      // A certificate from an earlier `up` that does not name this address is made again.
      const ClusterCertificates existing = ClusterCertificateFiles(f.dir + "/tls");
      std::ifstream in(existing.server_cert);
      std::stringstream pem;
      pem << in.rdbuf();
      if (in && !CertificateNamesHost(pem.str(), slurm->host_addr)) fs::remove_all(f.dir + "/tls", ec);
    }
    Result<ClusterCertificates> made = EnsureClusterCertificates(f.dir + "/tls", names);
    if (!made.ok()) {
      std::cerr << "sf deploy local: TLS certificates: " << made.status().message() << "\n";
      return kExitFailed;
    }
    certificates = *made;
    master = {"https://127.0.0.1:" + std::to_string(f.http_port), certificates.ca_cert};
  }
  const std::string& url = master.url;
  auto client = api::MasterClient::Create(url, master.ca_file);
  // Agents join with a token only this user can read (docs/security.md).
  const std::string join_token_file = f.dir + "/join-token";
  if (Status made = EnsureSecretFile(join_token_file, "join token"); !made.ok()) {
    std::cerr << "sf deploy local: " << made.message() << "\n";
    return kExitFailed;
  }
  std::string admin_password;  // set when this `up` starts the master (users on)
  if (!ProcessRuns(ReadPid(f.dir + "/master.pid"))) {
    std::vector<std::string> argv = {master_bin, "--db", pg.ConnectionString(), "--bind", "127.0.0.1",
                                     "--http-port", std::to_string(f.http_port), "--grpc-port",
                                     std::to_string(f.grpc_port), "--checkpoint-root", f.dir + "/checkpoints",
                                     "--agent-join-token-file", join_token_file};
    if (slurm) {
      Result<std::string> config = WriteSlurmMasterConfig(f.dir, *slurm, task_bin, trainer_bin, serve_bin,
                                                          f.no_tls ? "" : certificates.ca_cert);
      if (!config.ok()) {
        std::cerr << "sf deploy local: " << config.status().message() << "\n";
        return kExitFailed;
      }
      // Every address (loopback for sf, the bridge for the nodes); the ranks dial the bridge's.
      argv[4] = "0.0.0.0";
      argv.insert(argv.end(), {"--config", *config, "--advertised-address",
                               slurm->host_addr + ":" + std::to_string(f.grpc_port)});
      if (f.no_tls || f.no_auth) argv.push_back("--insecure");  // asked for: plaintext or open APIs
    }
    if (!f.master_config.empty()) argv.insert(argv.end(), {"--config", fs::absolute(f.master_config).string()});
    if (s3) argv.insert(argv.end(), {"--checkpoint-storage", CheckpointStorageYaml(*s3)});
    if (!f.no_tls) {
      argv.insert(argv.end(), {"--tls-cert-file", certificates.server_cert, "--tls-key-file", certificates.server_key,
                               // The same CA issues each serving task its certificate (the hop to tasks).
                               "--task-ca-cert-file", certificates.ca_cert, "--task-ca-key-file", certificates.ca_key});
    }
    if (f.no_auth) {
      argv.push_back("--disable-auth");
    } else {
      // The admin's first password: a random one in a 0600 file the master reads and deletes
      // (it is used only when the database has no user yet).
      const std::string password_file = f.dir + "/admin-password";
      Result<std::string> password = Status::Ok();
      if (Status made = EnsureSecretFile(password_file, "admin password"); made.ok()) {
        password = ReadSecretFile(password_file, "admin password");
      } else {
        password = made;
      }
      if (!password.ok()) {
        std::cerr << "sf deploy local: " << password.status().message() << "\n";
        return kExitFailed;
      }
      admin_password = *password;
      argv.insert(argv.end(), {"--admin-password-file", password_file});
    }
    auto pid = SpawnDaemon(argv, f.dir + "/logs/master.log");
    if (!pid.ok()) {
      std::cerr << "sf deploy local: " << pid.status().message() << "\n";
      return kExitFailed;
    }
    std::ofstream(f.dir + "/master.pid") << *pid << "\n";
    std::cout << "started sf-master (pid " << *pid << ", log " << f.dir << "/logs/master.log)\n" << std::flush;
  }
  // Wait for the master to be healthy.
  bool healthy = false;
  for (int i = 0; i < 300 && !healthy; ++i) {
    auto r = client->Get("/health");
    healthy = r.ok() && r->status == 200;
    if (!healthy) {
      if (!ProcessRuns(ReadPid(f.dir + "/master.pid"))) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (!healthy) {
    std::cerr << "sf deploy local: the master did not become healthy; see " << f.dir << "/logs/master.log\n";
    return kExitFailed;
  }
  // The quickstart logs in by itself: on a new database the admin has the password made above;
  // sf keeps the session (common/api/session_store.h) and the password is shown once, here.
  std::string first_password;
  if (!admin_password.empty()) {
    auto r = client->Post("/api/v1/auth/login",
                          Value(Value::Map{{"username", "admin"}, {"password", admin_password}}).ToJson());
    // A 401 means the database had users already (the file was not used): not logged in here.
    auto v = Value::FromJson(r.ok() && r->status == 200 ? r->body : "{}");
    if (v.ok() && v->Find("token") && v->Find("token")->is_string()) {
      const std::string token = v->Find("token")->as_string();
      if (Status saved = api::SaveSession(url, api::Session{"admin", token}); !saved.ok()) {
        std::cerr << "sf deploy local: " << saved.message() << "\n";
        return kExitFailed;
      }
      client->set_token(token);
      first_password = admin_password;
    }
  }
  // The agents share this machine: split its cores between all their slots so trainers
  // running side by side don't oversubscribe it.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads_per_slot = std::max(1, cores / (std::max(1, f.agents) * f.cpu_slots));
  const int agents = slurm ? 0 : f.agents;  // with --slurm, Slurm's nodes run the trials
  for (int i = 0; i < agents; ++i) {
    std::string id = "local-agent-" + std::to_string(i);
    std::string pid_file = f.dir + "/" + id + ".pid";
    if (ProcessRuns(ReadPid(pid_file))) continue;
    fs::create_directories(f.dir + "/" + id, ec);
    std::vector<std::string> argv = {agent_bin, "--master", "127.0.0.1:" + std::to_string(f.grpc_port),
                                     "--agent-id", id, "--slots", f.gpus ? "auto" : "cpu:" + std::to_string(f.cpu_slots),
                                     "--trainer", trainer_bin, "--work-dir", f.dir + "/" + id,
                                     "--cpu-threads-per-slot", std::to_string(threads_per_slot),
                                     "--join-token-file", join_token_file, "--kill-tasks-on-exit"};
    if (!f.no_tls) argv.insert(argv.end(), {"--master-ca-file", certificates.ca_cert});
    if (!serve_bin.empty()) argv.insert(argv.end(), {"--serve", serve_bin});
    auto pid = SpawnDaemon(argv, f.dir + "/logs/" + id + ".log");
    if (!pid.ok()) {
      std::cerr << "sf deploy local: " << pid.status().message() << "\n";
      return kExitFailed;
    }
    std::ofstream(pid_file) << *pid << "\n";
    std::cout << "started sf-agent " << id << " (pid " << *pid << ")\n" << std::flush;
  }
  // Wait until every agent has registered.
  for (int i = 0; i < 300; ++i) {
    auto r = client->Get("/api/v1/agents");
    int connected = 0;
    std::vector<std::string> slot_ids;  // of the connected agents
    if (r.ok() && r->status == 401) {
      std::cout << "(not logged in to " << url << ": `sf login --username admin` to use it; agents not checked)\n";
      connected = agents;
    }
    if (r.ok() && r->status == 200) {
      auto v = Value::FromJson(r->body);
      if (v.ok() && v->Find("agents")) {
        for (const Value& a : v->Find("agents")->as_list()) {
          const Value* c = a.Find("connected");
          if (!(c && c->is_bool() && c->as_bool())) continue;
          ++connected;
          if (const Value* slots = a.Find("slots"); slots && slots->is_list()) {
            for (const Value& slot : slots->as_list()) {
              if (const Value* id = slot.Find("id"); id && id->is_string()) slot_ids.push_back(id->as_string());
            }
          }
        }
      }
    }
    if (connected >= agents) {
      // The plain `sf` commands that follow find this master through the defaults file.
      const api::CliDefaults defaults{url, master.ca_file, f.dir};
      const std::string defaults_file = api::CliDefaultsPath();
      for (const std::string& file : {DeploymentRecord(f.dir), defaults_file}) {
        if (Status written = api::WriteCliDefaults(file, defaults); !written.ok()) {
          std::cerr << "sf deploy local: " << written.message() << "\n";
          return kExitFailed;
        }
      }
      if (slurm) {
        std::cout << "local cluster is up: trials run as Slurm jobs in partition " << slurm->partition << " (nodes "
                  << slurm->nodes << "); squeue and sacct -c with SLURM_CONF=" << slurm->slurm_conf << "\n";
      } else if (f.gpus) {
        std::string listed;
        for (const std::string& id : slot_ids) listed += (listed.empty() ? "" : ", ") + id;
        std::cout << "local cluster is up: 1 agent with slots " << (listed.empty() ? "(not listed)" : listed)
                  << (listed.find("cuda") == std::string::npos ? " (no GPU found: see " + f.dir + "/logs/local-agent-0.log)" : "")
                  << "\n";
      } else {
        std::cout << "local cluster is up: " << f.agents << " agent(s) x " << f.cpu_slots << " CPU slot(s)\n";
      }
      std::cout << "dashboard: " << url << "/"
                << (master.ca_file.empty() ? "" : "  (TLS; the browser must trust the CA " + master.ca_file + ")")
                << "\n"
                << "sf commands now use it by default (" << defaults_file << "); elsewhere: sf --master " << url
                << (master.ca_file.empty() ? "" : " --ca-file " + master.ca_file) << " ...\n";
      if (s3) {
        std::cout << "checkpoints go to s3://" << kLocalS3Bucket << " at " << s3->endpoint
                  << " (for sf checkpoint download: set -a; . " << s3->env_file << "; set +a)\n";
      }
      if (!first_password.empty()) {
        std::cout << "user admin, password " << first_password
                  << "  (shown once; sf is logged in as admin: sf whoami; change it with sf user set-password admin)\n";
      } else if (f.no_auth) {
        std::cout << "authentication is off (--no-auth): every caller may do everything\n";
      }
      return kExitOk;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::cerr << "sf deploy local: agents did not register; see " << f.dir << "/logs/\n";
  return kExitFailed;
}

int StatusCmd(const LocalFlags& f) {
  bool any = false;
  std::error_code ec;
  if (!fs::exists(f.dir, ec)) {
    std::cout << "no local cluster in " << f.dir << "\n";
    return kExitFailed;
  }
  for (const auto& entry : fs::directory_iterator(f.dir, ec)) {
    if (entry.path().extension() != ".pid") continue;
    pid_t pid = ReadPid(entry.path().string());
    bool alive = ProcessRuns(pid);
    any |= alive;
    std::cout << entry.path().stem().string() << ": " << (alive ? "running" : "stopped") << " (pid " << pid << ")\n";
  }
  LocalPostgresOptions o;
  o.dir = f.dir + "/postgres";
  std::cout << "postgres: " << (LocalPostgres(o).IsRunning() || fs::exists(o.dir + "/data/postmaster.pid", ec) ? "running" : "stopped") << "\n";
  const api::MasterEndpoint master = DeploymentMaster(f.dir, f.http_port);
  auto client = api::MasterClient::Create(master.url, master.ca_file);
  auto r = client->Get("/health");
  std::cout << "master health: " << (r.ok() ? r->body : r.status().message()) << "\n";
  return any ? kExitOk : kExitFailed;
}

int Down(const LocalFlags& f) {
  std::error_code ec;
  if (fs::exists(f.dir, ec)) {
    for (const auto& entry : fs::directory_iterator(f.dir, ec)) {
      if (entry.path().extension() == ".pid" && entry.path().stem() != "master") {
        StopPid(entry.path().string(), entry.path().stem().string());
      }
    }
    StopPid(f.dir + "/master.pid", "sf-master");
    StopLocalSlurm(f.dir);
    StopLocalS3(f.dir);
    LocalPostgresOptions o;
    o.dir = f.dir + "/postgres";
    LocalPostgres pg(o);
    Status st = pg.Stop();
    if (!st.ok()) std::cerr << "sf deploy local: " << st.message() << "\n";
    else std::cout << "stopped PostgreSQL\n";
  }
  // The user's defaults no longer lead anywhere once this deployment is down.
  const std::string defaults_file = api::CliDefaultsPath();
  Result<std::optional<api::CliDefaults>> defaults = api::ReadCliDefaults(defaults_file);
  if (defaults.ok() && *defaults && (*defaults)->deployment == f.dir) {
    fs::remove(defaults_file, ec);
    std::cout << "removed " << defaults_file << "\n";
  }
  if (f.delete_data) {
    fs::remove_all(f.dir, ec);
    std::cout << "deleted " << f.dir << "\n";
  }
  return kExitOk;
}

// The flags the three share: --dir (all of them) and --port (`up` and `status`).
void AddDirFlag(CLI::App* command, LocalFlags& f) {
  command->add_option("--dir", f.dir, "where the cluster's pid files, logs and data live")
      ->type_name("DIR")
      ->default_str(DefaultDir());
}
void AddPortFlag(CLI::App* command, LocalFlags& f) {
  command->add_option("--port", f.http_port, "the master's HTTP port")
      ->type_name("HTTP")
      ->check(CLI::Range(1, 65535).description(""))
      ->capture_default_str();
}

// The selected command's action: --dir made absolute, then `run`.
CommandAction WithFlags(const std::shared_ptr<LocalFlags>& flags, int (*run)(const LocalFlags&)) {
  return [flags, run] {
    flags->dir = fs::absolute(flags->dir).string();
    return run(*flags);
  };
}

}  // namespace

void AddDeployCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* deploy = sf.add_subcommand("deploy", "run a Steadfast cluster");
  deploy->require_subcommand(1);
  CLI::App* local = deploy->add_subcommand(
      "local",
      "a whole cluster on this machine: PostgreSQL, the master and N agents, in the background");
  local->require_subcommand(1);

  auto up_flags = std::make_shared<LocalFlags>();
  CLI::App* up =
      local->add_subcommand("up", "start the local cluster and wait until every agent registered");
  up->add_option("--agents", up_flags->agents,
                 "how many agents (0 to 64; 0: the master alone, for agents of your own or bench/sim/)")
      ->type_name("N")
      ->check(CLI::Range(0, 64).description(""))
      ->capture_default_str();
  up->add_option("--cpu-slots", up_flags->cpu_slots, "CPU slots per agent (1 to 256)")
      ->type_name("K")
      ->check(CLI::Range(1, 256).description(""))
      ->capture_default_str();
  AddDirFlag(up, *up_flags);
  AddPortFlag(up, *up_flags);
  up->add_option("--grpc-port", up_flags->grpc_port, "the master's gRPC port, for the agents")
      ->type_name("GRPC")
      ->check(CLI::Range(1, 65535).description(""))
      ->capture_default_str();
  up->add_flag("--no-auth", up_flags->no_auth,
               "no users or tokens: every caller of the API may do everything (e.g. for benchmarks)");
  up->add_flag("--slurm", up_flags->slurm,
               "run trials as Slurm jobs on a local Slurm cluster (munge, slurmctld, two slurmd nodes in "
               "namespaces of their own; root) instead of on agents (docs/slurm.md)");
  up->add_flag("--s3", up_flags->s3,
               "checkpoints go to a local S3 server (a single-node Ceph with a RADOS Gateway in DIR/s3; root) "
               "instead of DIR/checkpoints (docs/object-storage.md)");
  up->add_flag("--gpus", up_flags->gpus,
               "the agent offers this machine's GPUs, one CUDA slot each, found through NVML (sf-agent --slots auto; "
               "without a GPU, one CPU slot); with --agents 1 (docs/agent.md)");
  up->add_option("--master-config", up_flags->master_config,
                 "the master's config file (sf-master --config: scheduler, pool_schedulers, retention, ...); "
                 "the flags `up` gives the master win over it (docs/cluster.md)")
      ->type_name("FILE")
      ->check(CLI::ExistingFile.description(""));
  up->add_flag("--no-tls", up_flags->no_tls,
               "plain HTTP and gRPC on loopback, without the private CA and certificates (e.g. for benchmarks)");
  OnSelected(up, action, WithFlags(up_flags, Up));

  auto status_flags = std::make_shared<LocalFlags>();
  CLI::App* status =
      local->add_subcommand("status", "show which of its processes run; exit 1 when none does");
  AddDirFlag(status, *status_flags);
  AddPortFlag(status, *status_flags);
  OnSelected(status, action, WithFlags(status_flags, StatusCmd));

  auto down_flags = std::make_shared<LocalFlags>();
  CLI::App* down =
      local->add_subcommand("down", "stop the local cluster's agents, master and PostgreSQL");
  AddDirFlag(down, *down_flags);
  down->add_flag("--delete-data", down_flags->delete_data,
                 "also delete DIR: the database, checkpoints and logs");
  OnSelected(down, action, WithFlags(down_flags, Down));
}

}  // namespace sf::cli
