// A real cluster for end-to-end tests: a private PostgreSQL database, an sf-master process and
// N sf-agent processes (each with K CPU slots) running real sf-trainer processes, on loopback
// ports picked at start. Logs go to files in a temp directory and are printed when a test fails.
//
// Cleanup. Normally ~Cluster stops the agents (SIGTERM; they run with --kill-tasks-on-exit, so
// they stop their trainers), then the master, SIGKILLs any trainer of the cluster still running,
// and removes its directory; the shared PostgreSQL server stops when the binary exits
// (tests/support/testing.h). A test process that is SIGKILLed or crashes runs none of that, so
// nothing may depend on it alone:
//   - the master and the agents are our children, each in a process group of its own, with a
//     parent-death signal (SIGKILL when the test process dies);
//   - those groups, the cluster's trainers (grandchildren in sessions of their own, which
//     outlive a SIGKILLed agent; found by their SF_MASTER_ADDRESS), the cluster's directory and
//     the PostgreSQL server (a daemon started by pg_ctl, not our child) are registered with the
//     CleanupWatchdog (tests/support/cleanup_watchdog.h), a detached process that notices the
//     test process's death by end-of-file on a socket and then kills and removes them.
// tests/e2e/no_leak_test.cc SIGKILLs a test process running a cluster and checks that nothing
// is left.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/api/master_client.h"
#include "common/subprocess.h"
#include "common/value.h"
#include "tests/support/testing.h"

namespace sf::testing {

// A background process with its output in a log file: our child, in a process group of its
// own, killed by the kernel when the test process dies (PR_SET_PDEATHSIG) and also by the
// CleanupWatchdog. Not thread-safe.
class Daemon {
 public:
  Daemon(std::vector<std::string> argv, std::string log_file);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  bool Start();
  // Sends `sig` and waits up to `wait` for the exit; SIGKILL after that.
  void Stop(int sig = 15, std::chrono::milliseconds wait = std::chrono::seconds(10));
  bool Alive();
  pid_t pid() const { return pid_; }
  const std::string& log_file() const { return log_file_; }

 private:
  // After waitpid: the watchdog forgets the group; pid() becomes 0.
  void Reaped();
  std::vector<std::string> argv_;
  std::string log_file_;
  pid_t pid_ = 0;
};

// Where and how the cluster's processes run. By default everything is on loopback. With
// `agent_netns` set, agent i (and so its trainers) runs inside network namespace agent_netns[i]
// (through `ip netns exec`), and the master listens on `master_host`, an address those
// namespaces can reach (tests/e2e/netns.h builds such a network). `agent_trainer[i]`, when
// set and not empty, is the program agent i starts instead of sf-trainer; `agent_slots[i]`, when
// set and not empty, is agent i's --slots instead of cpu:<cpu_slots> (e.g. "auto"), and
// `agent_flags[i]` are appended to agent i's command line (e.g. --nvml-library). `master_flags` are
// appended to sf-master's command line at every start (e.g. {"--utilization-sample-seconds", "1"}).
// With `tls`, the cluster makes a private CA and a certificate for master_host (and 127.0.0.1,
// localhost) in its directory with openssl, as `sf deploy local up` does; the master serves REST
// (HTTPS only) and gRPC over TLS with it, the agents and their trainers verify it with the CA,
// and url() and the REST helpers use https with the CA.
struct ClusterLayout {
  std::string master_host = "127.0.0.1";
  std::vector<std::string> agent_netns;
  std::vector<std::string> agent_trainer;
  std::vector<std::string> agent_slots;
  std::vector<std::vector<std::string>> agent_flags;
  std::vector<std::string> master_flags;
  bool tls = false;
};

class Cluster {
 public:
  Cluster(int agents, int cpu_slots, ClusterLayout layout = {});
  ~Cluster();

  // Starts the master (again, after StopMaster) and waits for /health.
  void StartMaster();
  void StopMaster(int sig = 15);
  void StartAgents();
  // Agent i alone (0-based): started again after StopAgent, or stopped with `sig` (SIGKILL: as
  // if it crashed; its trainers live on, and it adopts them when started again).
  void StartAgent(int i);
  void StopAgent(int i, int sig = 15);
  // Waits until `n` agents are connected.
  bool WaitForAgents(int n, std::chrono::seconds timeout = std::chrono::seconds(60));

  std::string url() const {
    return (network_.tls ? "https://" : "http://") + network_.master_host + ":" + std::to_string(http_port_);
  }
  // The cluster's CA certificate (PEM) with `tls`; empty without.
  std::string ca_file() const { return network_.tls ? dir_.path() + "/tls/ca.pem" : ""; }
  std::string grpc_address() const { return network_.master_host + ":" + std::to_string(grpc_port_); }
  const std::string& db() const { return db_; }
  const std::string& dir() const { return dir_.path(); }
  std::string checkpoint_root() const { return dir_.path() + "/checkpoints"; }
  // The cluster's agent join token (mode 600), given to the master and every agent.
  std::string join_token_file() const { return dir_.path() + "/join-token"; }

  // Authentication (docs/security.md): the master starts with users on (unless master_flags
  // has --disable-auth), its admin's first password made by the fixture; the fixture logs in
  // as admin, and Get/Post, HttpClient and `sf` in this process ($SF_TOKEN) act as the admin.
  const std::string& admin_password() const { return admin_password_; }
  const std::string& admin_token() const { return admin_token_; }
  // A session token for `username` (POST /api/v1/auth/login); "" when refused.
  std::string Login(const std::string& username, const std::string& password);

  // REST helpers (as the admin): the parsed JSON body and the HTTP status.
  std::pair<int, Value> Get(const std::string& path);
  std::pair<int, Value> Post(const std::string& path, const std::string& body);
  std::pair<int, Value> Delete(const std::string& path);
  // Submits an experiment (YAML text); returns its id, or 0 with a test failure.
  int64_t Submit(const std::string& yaml);
  std::string ExperimentState(int64_t id);
  // Polls until the experiment is in `state` (e.g. "EXPERIMENT_STATE_COMPLETED").
  bool WaitForState(int64_t id, const std::string& state, std::chrono::seconds timeout);
  bool WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout);
  Value Trials(int64_t experiment_id);

  // Prints every log (master, agents) to stderr; called on failure.
  void DumpLogs();

  static std::string Binary(const std::string& name);
  // This cluster's trainer processes (of one trial, or all when trial_id is 0). Tests run in
  // parallel, each with its own cluster, so trial ids alone are not unique on the machine.
  std::vector<pid_t> TrainerPids(int64_t trial_id = 0) const;
  // The master's and the agents' pids (0 for one that was stopped).
  pid_t master_pid() const;
  std::vector<pid_t> agent_pids() const;

 private:
  // One REST call as the admin (method GET, POST or DELETE).
  std::pair<int, Value> Call(const std::string& method, const std::string& path, const std::string& body);
  // The environment entry every trainer of this cluster has ("SF_MASTER_ADDRESS=host:port").
  std::string TrainerEnvironment() const;

  int agents_, cpu_slots_;
  ClusterLayout network_;
  TempDir dir_;
  std::string db_;
  int http_port_ = 0, grpc_port_ = 0;
  std::unique_ptr<Daemon> master_;
  std::vector<std::unique_ptr<Daemon>> agent_daemons_;
  int master_starts_ = 0;
  std::string admin_password_, admin_token_;
};

// The one number `sql` selects from database `db` (e.g. "SELECT count(*) FROM metrics ...").
int64_t Count(const std::string& db, const std::string& sql);
// The one value `sql` selects, as text ("" for NULL).
std::string Text(const std::string& db, const std::string& sql);
// The id of an experiment or trial as the REST API returns it (a JSON string).
int64_t Id(const Value& v);

// pids of running `sf-trainer cluster` processes whose environment has every one of `env`
// ("NAME=value" entries).
std::vector<pid_t> TrainerPids(const std::vector<std::string>& env);
// pids of any process (other than this one) whose environment has every one of `env` and whose
// NUL-separated command line `program` accepts (any, when it is empty): user trials' processes.
std::vector<pid_t> TaskPids(const std::vector<std::string>& env,
                            const std::function<bool(const std::string&)>& program = {});

// A small grid experiment over the tiny corpus: `trials` trials (grid over dropout), each
// trained to `batches` batches of a very small model, metrics every `unit` batches.
std::string TinyExperiment(int trials, int64_t batches, int64_t unit, const std::string& name = "e2e");

// The batches the one trial of experiment `id` has trained (its totalBatches); -1 unless the
// experiment has exactly one trial.
int64_t TotalBatches(Cluster& cluster, int64_t id);

// Runs webui/e2e/views.e2e.mjs (issue 49's dashboard views in Debian's Chromium) against the
// cluster's master, logged in as its admin, with `views` as its VIEW=EXPERIMENT_ID arguments and
// its screenshots in <build>/<artifacts>. Fails the test (with the script's output) unless the
// built dashboard and playwright-core are there, the script ran, and every check passed.
void ExpectDashboardViews(Cluster& cluster, const std::vector<std::string>& views, const std::string& artifacts);

// A cluster that `sf deploy local up` makes in `<scratch>/local`, driven the way a new user
// drives it: Sf() runs the real sf with its own XDG_CONFIG_HOME and no SF_MASTER, SF_CA_FILE or
// SF_TOKEN from the test's environment (options() adds to that); a run that cannot start fails
// the test. Whatever happens, the deployment goes down with its data when this goes out of scope.
class LocalDeployment {
 public:
  explicit LocalDeployment(const TempDir& scratch, std::chrono::seconds timeout = std::chrono::seconds(300));
  ~LocalDeployment();
  LocalDeployment(const LocalDeployment&) = delete;
  LocalDeployment& operator=(const LocalDeployment&) = delete;

  CommandResult Sf(std::vector<std::string> args);
  const std::string& dir() const { return dir_; }
  CommandOptions& options() { return options_; }

 private:
  std::string dir_;
  CommandOptions options_;
};

}  // namespace sf::testing
