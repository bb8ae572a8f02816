// End to end through Slurm (docs/slurm.md): a real local Slurm cluster (deploy/local-slurm.sh:
// munged, slurmctld and two slurmd nodes in network and UTS namespaces of their own), a master
// whose default pool is its partition (manager: slurm), real sf-task and sf-trainer processes
// started by srun on the nodes. No agent runs anywhere. Skipped without root or Slurm.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr char kCompleted[] = "EXPERIMENT_STATE_COMPLETED";

// A local Slurm cluster for one test, in a directory of its own; `down` at the end.
class LocalSlurm {
 public:
  LocalSlurm() {
    if (geteuid() != 0) {
      skip = "needs root (network namespaces, slurmd as root)";
      return;
    }
    for (const char* tool : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/sbin/munged"}) {
      if (!fs::exists(tool)) {
        skip = std::string(tool) + " is not installed (deploy/install-deps.sh installs slurm-wlm and munge)";
        return;
      }
    }
    CommandOptions o;
    o.timeout = 120s;
    auto probe = RunCommand({"ip", "netns", "add", "sfslurmprobe" + std::to_string(getpid())}, o);
    if (!probe.ok() || probe->exit_code != 0) {
      skip = "'ip netns add' is not permitted here";
      return;
    }
    (void)RunCommand({"ip", "netns", "delete", "sfslurmprobe" + std::to_string(getpid())}, o);
    auto up = RunCommand({std::string(SF_SOURCE_DIR) + "/deploy/local-slurm.sh", "up", dir.path() + "/slurm"}, o);
    if (!up.ok() || up->exit_code != 0) {
      ADD_FAILURE() << "local-slurm.sh up failed: " << (up.ok() ? up->output : up.status().ToString());
      return;
    }
    std::ifstream in(dir.path() + "/slurm/env");
    std::string line;
    while (std::getline(in, line)) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    ok = !env["SLURM_CONF"].empty() && !env["SF_SLURM_HOST_ADDR"].empty();
  }
  ~LocalSlurm() {
    if (ok && ::testing::Test::HasFailure()) {
      for (const char* log : {"slurmctld.log", "slurmd-node1.log", "slurmd-node2.log"}) {
        std::ifstream in(dir.path() + "/slurm/log/" + log);
        std::stringstream s;
        s << in.rdbuf();
        const std::string text = s.str();
        std::cerr << "==== " << log << " (tail)\n" << text.substr(text.size() > 4000 ? text.size() - 4000 : 0) << "\n";
      }
      // Each job's own output file (srun's and sf-task's messages, the trainers' lines).
      std::error_code ec;
      for (auto it = fs::recursive_directory_iterator(dir.path() + "/jobs", ec); !ec && it != fs::recursive_directory_iterator(); ++it) {
        if (it->path().filename().string().rfind("slurm-", 0) != 0) continue;
        std::ifstream in(it->path());
        std::stringstream s;
        s << in.rdbuf();
        const std::string text = s.str();
        std::cerr << "==== " << it->path().string() << " (tail)\n" << text.substr(text.size() > 3000 ? text.size() - 3000 : 0) << "\n";
      }
    }
    CommandOptions o;
    o.timeout = 120s;
    (void)RunCommand({std::string(SF_SOURCE_DIR) + "/deploy/local-slurm.sh", "down", dir.path() + "/slurm"}, o);
  }
  // A Slurm client tool's output (stdout and stderr).
  std::string Tool(std::vector<std::string> argv) {
    CommandOptions o;
    o.env = {{"SLURM_CONF", env["SLURM_CONF"]}};
    o.timeout = 60s;
    auto r = RunCommand(argv, o);
    return r.ok() ? r->output : r.status().ToString();
  }
  void Script(const std::string& verb, const std::string& node) {
    CommandOptions o;
    o.timeout = 120s;
    auto r = RunCommand({std::string(SF_SOURCE_DIR) + "/deploy/local-slurm.sh", verb, dir.path() + "/slurm", node}, o);
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << verb << " " << node << ": " << (r.ok() ? r->output : "");
  }

  // The master's config file: the default pool is the local partition, managed by Slurm.
  std::string MasterConfig(const std::string& extra = "", const std::string& partition = "",
                           const std::string& pool = "default") {
    const std::string file = dir.path() + "/master.yaml";
    std::ofstream out(file);
    out << "resource_pools:\n"
        << "  - name: " << pool << "\n"
        << "    manager: slurm\n"
        << "    partition: " << (partition.empty() ? env["SF_SLURM_PARTITION"] : partition) << "\n"
        << "    slots_per_node: 1\n"
        << "    cpus_per_slot: 1\n"
        << "    job_dir: " << dir.path() << "/jobs\n"
        << "    sf_task: " << Cluster::Binary("sf-task") << "\n"
        << "    sf_trainer: " << Cluster::Binary("sf-trainer") << "\n"
        << "    slurm_conf: " << env["SLURM_CONF"] << "\n"
        << "    poll_seconds: 0.5\n"
        << extra;
    return file;
  }
  ClusterLayout Layout(const std::string& config_file) {
    ClusterLayout layout;
    layout.master_host = env["SF_SLURM_HOST_ADDR"];  // the nodes reach the host only there
    layout.master_flags = {"--config", config_file};
    return layout;
  }

  TempDir dir;
  std::string skip;
  bool ok = false;
  std::map<std::string, std::string> env;
};

#define SLURM_OR_SKIP(slurm)                          \
  LocalSlurm slurm;                                   \
  if (!slurm.skip.empty()) GTEST_SKIP() << slurm.skip; \
  ASSERT_TRUE(slurm.ok)

Value TrialOf(Cluster& c, int64_t experiment) {
  Value trials = c.Trials(experiment);
  return trials.as_list().empty() ? Value() : trials.as_list()[0];
}
std::string Field(const Value& v, const std::string& key) {
  const Value* f = v.is_map() ? v.Find(key) : nullptr;
  return f && f->is_string() ? f->as_string() : "";
}
// The Slurm job ids the master stored for a trial's allocations, oldest first.
std::vector<std::string> JobIds(Cluster& c, int64_t trial) {
  pqxx::connection conn(c.db());
  pqxx::work tx(conn);
  std::vector<std::string> out;
  for (const auto& row : tx.exec("SELECT external_id FROM allocations WHERE trial_id = " + std::to_string(trial) +
                                 " AND external_id <> '' ORDER BY start_time, id")) {
    out.push_back(row[0].as<std::string>());
  }
  return out;
}

TEST(Slurm, GridCompletesWithOneJobPerTrialAndTheTrainersLogs) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  // The same YAML the agent tests run.
  const int64_t id = c.Submit(TinyExperiment(2, 20, 10, "slurm-grid"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitForState(id, kCompleted, 240s)) << c.ExperimentState(id);
  std::set<std::string> jobs;
  const Value trials = c.Trials(id);
  ASSERT_EQ(trials.as_list().size(), 2u) << trials.ToJson();
  for (const Value& t : trials.as_list()) {
    ASSERT_NE(t.Find("id"), nullptr) << t.ToJson();
    EXPECT_EQ(Field(t, "state"), "TRIAL_STATE_COMPLETED");
    EXPECT_EQ(Field(t, "totalBatches"), "20");
    const int64_t tid = Id(t);
    auto ids = JobIds(c, tid);
    ASSERT_EQ(ids.size(), 1u) << "one Slurm job per trial";
    jobs.insert(ids[0]);
    // The trainer's own output, shipped by sf-task (no agent), is in the trial's logs.
    EXPECT_GE(Count(c.db(), "SELECT count(*) FROM task_logs WHERE trial_id=" + std::to_string(tid)), 3);
    EXPECT_GE(Count(c.db(), "SELECT count(*) FROM metrics WHERE kind='validation' AND trial_id=" + std::to_string(tid)), 1);
  }
  EXPECT_EQ(jobs.size(), 2u);
  // Slurm's accounting agrees: each job COMPLETED, named after its allocation.
  const std::string acct = slurm.Tool({"sacct", "-c", "-n", "-X", "-P", "-o", "jobid,jobname,state"});
  for (const std::string& job : jobs) {
    EXPECT_NE(acct.find(job + "|sf-t"), std::string::npos) << acct;
  }
  EXPECT_EQ(std::count(acct.begin(), acct.end(), '\n'), 2) << acct;
  EXPECT_NE(acct.find("|COMPLETED"), std::string::npos) << acct;
}

TEST(Slurm, TwoRankTrialOverTlsSpansBothNodesAndTheRanksMeet) {
  SLURM_OR_SKIP(slurm);
  ClusterLayout layout = slurm.Layout(slurm.MasterConfig());
  layout.tls = true;
  Cluster c(0, 0, layout);
  // The CA exists now: the nodes verify the master with it.
  c.StopMaster();
  std::ofstream(slurm.dir.path() + "/master.yaml", std::ios::app) << "    master_ca_file: " << c.ca_file() << "\n";
  c.StartMaster();
  const int64_t id = c.Submit(TinyExperiment(1, 30, 10, "slurm-2rank") + "resources: {slots_per_trial: 2}\n");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitForState(id, kCompleted, 300s)) << c.ExperimentState(id);
  const Value t = TrialOf(c, id);
  const std::string tid = std::to_string(Id(t));
  EXPECT_EQ(Field(t, "totalBatches"), "30");
  // Both ranks ran, each on its own node (slots_per_node: 1), and allreduced.
  EXPECT_EQ(Count(c.db(), "SELECT count(DISTINCT rank) FROM task_logs WHERE trial_id=" + tid), 2);
  EXPECT_EQ(Count(c.db(), "SELECT count(DISTINCT agent_id) FROM task_logs WHERE trial_id=" + tid), 2)
      << Text(c.db(), "SELECT string_agg(DISTINCT agent_id, ',') FROM task_logs WHERE trial_id=" + tid);
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM metrics WHERE kind='training' AND trial_id=" + tid +
                              " AND (vals->>'world_size')::float = 2"),
            3);
  const std::vector<std::string> jobs = JobIds(c, Id(t));
  ASSERT_EQ(jobs.size(), 1u);
  const std::string nodes = slurm.Tool({"sacct", "-c", "-n", "-X", "-P", "-j", jobs[0], "-o", "nodelist"});
  EXPECT_NE(nodes.find("node[1-2]"), std::string::npos) << nodes;
  // The trial says so itself (REST `hosts`, kept after it ended): the job's node list.
  const Value* hosts = t.Find("hosts");
  ASSERT_NE(hosts, nullptr) << t.ToJson();
  ASSERT_EQ(hosts->as_list().size(), 1u) << t.ToJson();
  EXPECT_EQ(hosts->as_list()[0].as_string(), "slurm:node[1-2]") << t.ToJson();
  CommandOptions o;
  o.timeout = 60s;
  auto describe = RunCommand(
      {Cluster::Binary("sf"), "trial", "describe", tid, "--master", c.url(), "--ca-file", c.ca_file()}, o);
  ASSERT_TRUE(describe.ok());
  EXPECT_NE(describe->output.find("hosts: slurm:node[1-2]\n"), std::string::npos) << describe->output;
  EXPECT_NE(Text(c.db(), "SELECT string_agg(DISTINCT agent_id, ',' ORDER BY agent_id) FROM task_logs WHERE trial_id=" + tid)
                .find("slurm:node1,slurm:node2"),
            std::string::npos);
}

TEST(Slurm, GangLargerThanThePartitionWaitsWithSlurmsReasonUntilKilled) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const int64_t id = c.Submit(TinyExperiment(1, 20, 10, "slurm-too-big") + "resources: {slots_per_trial: 3}\n");
  ASSERT_GT(id, 0);
  std::string reason;
  EXPECT_TRUE(c.WaitFor(
      [&] {
        reason = Field(TrialOf(c, id), "pendingReason");
        return reason.find("Slurm: PartitionNodeLimit") != std::string::npos ||
               reason.find("Slurm: PartitionConfig") != std::string::npos;
      },
      60s))
      << reason;
  // sf trial describe shows it as the user sees it.
  CommandOptions o;
  o.timeout = 60s;
  auto describe = RunCommand({Cluster::Binary("sf"), "trial", "describe", std::to_string(Id(TrialOf(c, id))),
                              "--master", c.url()},
                             o);
  ASSERT_TRUE(describe.ok());
  EXPECT_NE(describe->output.find("Slurm: Partition"), std::string::npos) << describe->output;
  // And which Slurm job it is, for squeue and scontrol.
  EXPECT_NE(describe->output.find("jobId: " + JobIds(c, Id(TrialOf(c, id))).at(0) + "\n"), std::string::npos)
      << describe->output;
  // The pool shows the partition's size from sinfo (two nodes, one slot each) and its queue.
  auto pools = RunCommand({Cluster::Binary("sf"), "resource-pool", "list", "--master", c.url()}, o);
  ASSERT_TRUE(pools.ok());
  std::string row;
  for (std::istringstream lines(pools->output); std::getline(lines, row);) {
    if (row.rfind("default ", 0) == 0) break;
  }
  std::string squeezed;
  for (char ch : row) {
    if (ch != ' ' || (!squeezed.empty() && squeezed.back() != ' ')) squeezed += ch;
  }
  while (!squeezed.empty() && squeezed.back() == ' ') squeezed.pop_back();
  EXPECT_EQ(squeezed, "default slurm - 2 2 0 0 1 3") << pools->output;
  EXPECT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/kill", "{}").first, 200);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_CANCELED", 60s)) << c.ExperimentState(id);
  // The pending job is gone from Slurm's queue.
  const std::vector<std::string> jobs = JobIds(c, Id(TrialOf(c, id)));
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_TRUE(c.WaitFor([&] { return slurm.Tool({"squeue", "-h", "-j", jobs[0], "-o", "%T"}).find("PENDING") == std::string::npos; }, 30s));
}

// A job Slurm suspends (scontrol suspend) is still the trial's allocation, but it does not run:
// the running trial says so in its reason until Slurm resumes it, then completes.
TEST(Slurm, ASuspendedJobSaysSoAndTheTrialContinuesWhenResumed) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const int64_t id = c.Submit(TinyExperiment(1, 60, 10, "slurm-suspend"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitFor([&] { return TotalBatches(c, id) >= 10; }, 180s)) << "it never reported";
  const int64_t tid = Id(TrialOf(c, id));
  const std::string job = JobIds(c, tid).at(0);
  slurm.Tool({"scontrol", "suspend", job});
  std::string reason;
  EXPECT_TRUE(c.WaitFor(
      [&] {
        reason = Field(TrialOf(c, id), "pendingReason");
        return reason.find("SUSPENDED") != std::string::npos;
      },
      30s))
      << reason;
  EXPECT_NE(reason.find("Slurm: SUSPENDED (job " + job + ")"), std::string::npos) << reason;
  EXPECT_EQ(Field(TrialOf(c, id), "state"), "TRIAL_STATE_RUNNING");
  slurm.Tool({"scontrol", "resume", job});
  EXPECT_TRUE(c.WaitFor([&] { return Field(TrialOf(c, id), "pendingReason").empty(); }, 30s))
      << Field(TrialOf(c, id), "pendingReason");
  ASSERT_TRUE(c.WaitForState(id, kCompleted, 300s)) << c.ExperimentState(id);
  EXPECT_EQ(TrialOf(c, id).Find("restarts")->as_int(), 0);
}

TEST(Slurm, PauseCheckpointsAndActivateResumesThenKillCancelsTheJob) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const int64_t id = c.Submit(TinyExperiment(1, 400, 10, "slurm-pause"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitFor([&] { return std::stoll("0" + Field(TrialOf(c, id), "totalBatches")) >= 20; }, 180s));
  EXPECT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/pause", "{}").first, 200);
  ASSERT_TRUE(c.WaitFor([&] { return Field(TrialOf(c, id), "state") == "TRIAL_STATE_PAUSED"; }, 120s))
      << Field(TrialOf(c, id), "state");
  const int64_t tid = Id(TrialOf(c, id));
  const int64_t paused_at = std::stoll(Field(TrialOf(c, id), "totalBatches"));
  // The job ended on its own (the trainer checkpointed and exited 0): COMPLETED, not cancelled.
  const std::vector<std::string> first = JobIds(c, tid);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(c.WaitFor([&] { return slurm.Tool({"sacct", "-c", "-n", "-X", "-P", "-j", first[0], "-o", "state"}).find("COMPLETED") != std::string::npos; }, 30s));
  EXPECT_GE(Count(c.db(), "SELECT count(*) FROM checkpoints WHERE trial_id=" + std::to_string(tid)), 1);
  EXPECT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/activate", "{}").first, 200);
  ASSERT_TRUE(c.WaitFor([&] { return std::stoll("0" + Field(TrialOf(c, id), "totalBatches")) > paused_at; }, 180s));
  EXPECT_EQ(JobIds(c, tid).size(), 2u) << "a new job resumed it";
  EXPECT_EQ(c.Post("/api/v1/experiments/" + std::to_string(id) + "/kill", "{}").first, 200);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_CANCELED", 120s)) << c.ExperimentState(id);
  const std::string second = JobIds(c, tid).back();
  EXPECT_TRUE(c.WaitFor([&] { return slurm.Tool({"sacct", "-c", "-n", "-X", "-P", "-j", second, "-o", "state"}).find("CANCELLED") != std::string::npos; }, 60s));
  EXPECT_EQ(Count(c.db(), "SELECT restarts FROM trials WHERE id=" + std::to_string(tid)), 0);
}

TEST(Slurm, ScancelFromOutsideFailsTheRunWithAReasonAndItRestartsFromItsCheckpoint) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const int64_t id = c.Submit(TinyExperiment(1, 120, 10, "slurm-scancel"));
  ASSERT_GT(id, 0);
  int64_t tid = 0;
  ASSERT_TRUE(c.WaitFor([&] { return Count(c.db(), "SELECT count(*) FROM checkpoints") >= 1; }, 180s));
  tid = Id(TrialOf(c, id));
  const std::vector<std::string> jobs = JobIds(c, tid);
  ASSERT_EQ(jobs.size(), 1u);
  slurm.Tool({"scancel", jobs[0]});  // an administrator
  ASSERT_TRUE(c.WaitForState(id, kCompleted, 300s)) << c.ExperimentState(id);
  const Value t = TrialOf(c, id);
  EXPECT_EQ(t.Find("restarts")->as_int(), 1);
  const std::string why = Text(c.db(), "SELECT error FROM trials WHERE id=" + std::to_string(tid));
  EXPECT_NE(why.find("cancelled outside Steadfast"), std::string::npos) << why;
  EXPECT_EQ(JobIds(c, tid).size(), 2u);
  // It resumed from the checkpoint: the second run's first training report is past batch 10.
  EXPECT_GE(Count(c.db(), "SELECT min(batches) FROM metrics WHERE kind='training' AND restart=1 AND trial_id=" +
                              std::to_string(tid)),
            20);
}

TEST(Slurm, ALostNodeFailsTheJobAndTheTrialRestartsOnTheOtherNode) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const int64_t id = c.Submit(TinyExperiment(1, 150, 10, "slurm-node-fail"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitFor([&] { return Count(c.db(), "SELECT count(*) FROM checkpoints") >= 1; }, 180s));
  const int64_t tid = Id(TrialOf(c, id));
  const std::string job = JobIds(c, tid).at(0);
  std::string node = slurm.Tool({"squeue", "-h", "-j", job, "-o", "%N"});
  while (!node.empty() && (node.back() == '\n' || node.back() == ' ')) node.pop_back();
  ASSERT_TRUE(node == "node1" || node == "node2") << node;
  slurm.Script("kill-node", node);
  ASSERT_TRUE(c.WaitForState(id, kCompleted, 300s)) << c.ExperimentState(id);
  EXPECT_EQ(TrialOf(c, id).Find("restarts")->as_int(), 1);
  const std::string why = Text(c.db(), "SELECT error FROM trials WHERE id=" + std::to_string(tid));
  EXPECT_NE(why.find("NODE_FAIL: " + node + " ("), std::string::npos) << "names the node that failed: " << why;
  const std::string other = node == "node1" ? "node2" : "node1";
  const std::string second = JobIds(c, tid).back();
  EXPECT_NE(slurm.Tool({"sacct", "-c", "-n", "-X", "-P", "-j", second, "-o", "nodelist"}).find(other), std::string::npos);
}

TEST(Slurm, AMasterRestartKeepsTheRunningJobAndItsMetricsWithNoRowLostOrDuplicated) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const int64_t id = c.Submit(TinyExperiment(1, 200, 10, "slurm-master-restart"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitFor([&] { return std::stoll("0" + Field(TrialOf(c, id), "totalBatches")) >= 30; }, 180s));
  const int64_t tid = Id(TrialOf(c, id));
  c.StopMaster(SIGKILL);
  // A job of this master's whose trial no longer exists (tagged as the master tags its jobs):
  // the restarted master cancels it.
  std::string orphan = slurm.Tool({"sbatch", "--parsable", "--comment=steadfast:steadfast:t999-r0-a1",
                                   "--output=/dev/null", "--wrap", "sleep 600"});
  while (!orphan.empty() && (orphan.back() == '\n' || orphan.back() == ' ')) orphan.pop_back();
  ASSERT_FALSE(orphan.empty());
  std::this_thread::sleep_for(3s);
  c.StartMaster();
  EXPECT_TRUE(c.WaitFor([&] { return slurm.Tool({"squeue", "-h", "-t", "all", "-j", orphan, "-o", "%T"}).find("CANCELLED") != std::string::npos; }, 30s))
      << slurm.Tool({"squeue", "-h", "-t", "all", "-j", orphan, "-o", "%T"});
  ASSERT_TRUE(c.WaitForState(id, kCompleted, 300s)) << c.ExperimentState(id);
  EXPECT_EQ(TrialOf(c, id).Find("restarts")->as_int(), 0);
  EXPECT_EQ(JobIds(c, tid).size(), 1u) << "the job was adopted, not submitted again";
  const std::string t = std::to_string(tid);
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM metrics WHERE kind='training' AND trial_id=" + t), 20);
  EXPECT_EQ(Count(c.db(), "SELECT count(DISTINCT batches) FROM metrics WHERE kind='training' AND trial_id=" + t), 20);
}

TEST(Slurm, BadInputIsAClearErrorNeverASilentQueue) {
  SLURM_OR_SKIP(slurm);
  // A pool naming a partition Slurm does not have: the master refuses to start, saying so.
  {
    CommandOptions o;
    o.timeout = 60s;
    auto run = RunCommand({Cluster::Binary("sf-master"), "--config", slurm.MasterConfig("", "nosuch"), "--db",
                           "host=/nonexistent dbname=x"},
                          o);
    ASSERT_TRUE(run.ok());
    EXPECT_NE(run->exit_code, 0);
    EXPECT_NE(run->output.find("Slurm has no partition \"nosuch\""), std::string::npos) << run->output;
    EXPECT_NE(run->output.find("debug"), std::string::npos) << "it names the partitions there are: " << run->output;
    // No Slurm tools where the master looks for them (PATH): it says which and what to install.
    CommandOptions no_tools = o;
    no_tools.env = {{"PATH", slurm.dir.path()}};
    run = RunCommand({Cluster::Binary("sf-master"), "--config", slurm.MasterConfig(), "--db", "host=/nonexistent dbname=x"},
                     no_tools);
    ASSERT_TRUE(run.ok());
    EXPECT_NE(run->exit_code, 0);
    EXPECT_NE(run->output.find("the Slurm tool sbatch does not run"), std::string::npos) << run->output;
    EXPECT_NE(run->output.find("slurm-wlm"), std::string::npos) << run->output;
  }
  // sbatch refusing a job: the trial fails at once with Slurm's message, no restart.
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const int64_t id = c.Submit(TinyExperiment(1, 20, 10, "slurm-refused") + "slurm: {sbatch_args: [\"--gres=gpu:1\"]}\n");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitForState(id, "EXPERIMENT_STATE_ERROR", 60s) || c.ExperimentState(id) == "EXPERIMENT_STATE_COMPLETED")
      << c.ExperimentState(id);
  const int64_t tid = Id(TrialOf(c, id));
  EXPECT_EQ(Field(TrialOf(c, id), "state"), "TRIAL_STATE_ERROR");
  const std::string why = Text(c.db(), "SELECT error FROM trials WHERE id=" + std::to_string(tid));
  EXPECT_NE(why.find("Slurm refused the job"), std::string::npos) << why;
  EXPECT_NE(why.find("gres"), std::string::npos) << why;
  EXPECT_EQ(Count(c.db(), "SELECT restarts FROM trials WHERE id=" + std::to_string(tid)), 0);
  // A reserved sbatch option in the experiment is refused at submit.
  auto [status, reply] = c.Post("/api/v1/experiments",
                                Value(Value::Map{{"configYaml", TinyExperiment(1, 20, 10, "slurm-reserved") +
                                                                    "slurm: {sbatch_args: [\"--output=/etc/x\"]}\n"}})
                                    .ToJson());
  EXPECT_EQ(status, 400) << reply.ToJson();
  EXPECT_NE(reply.ToJson().find("slurm.sbatch_args[0]"), std::string::npos) << reply.ToJson();
}

// One master drives its own agents and a Slurm partition side by side: the default pool is an
// agent's, pool "hpc" is Slurm's, and the same experiment runs in each.
TEST(Slurm, OneMasterDrivesAgentsAndASlurmPartitionSideBySide) {
  SLURM_OR_SKIP(slurm);
  Cluster c(1, 1, slurm.Layout(slurm.MasterConfig("    job_dir_keep_hours: 0\n", "", "hpc")));
  const int64_t on_agents = c.Submit(TinyExperiment(1, 20, 10, "side-agents"));
  const int64_t on_slurm = c.Submit(TinyExperiment(1, 20, 10, "side-slurm") + "resources: {resource_pool: hpc}\n");
  ASSERT_GT(on_agents, 0);
  ASSERT_GT(on_slurm, 0);
  ASSERT_TRUE(c.WaitForState(on_agents, kCompleted, 240s)) << c.ExperimentState(on_agents);
  ASSERT_TRUE(c.WaitForState(on_slurm, kCompleted, 240s)) << c.ExperimentState(on_slurm);
  const std::string agent_trial = std::to_string(Id(TrialOf(c, on_agents)));
  const std::string slurm_trial = std::to_string(Id(TrialOf(c, on_slurm)));
  EXPECT_TRUE(JobIds(c, Id(TrialOf(c, on_agents))).empty()) << "the agent's trial is no Slurm job";
  EXPECT_EQ(JobIds(c, Id(TrialOf(c, on_slurm))).size(), 1u);
  EXPECT_EQ(Text(c.db(), "SELECT string_agg(DISTINCT agent_id, ',') FROM task_logs WHERE trial_id=" + agent_trial)
                .rfind("slurm:", 0),
            std::string::npos);
  EXPECT_EQ(Text(c.db(), "SELECT string_agg(DISTINCT agent_id, ',') FROM task_logs WHERE trial_id=" + slurm_trial)
                .rfind("slurm:node", 0),
            0u);
  // With job_dir_keep_hours: 0 the ended job's directory goes at the manager's next pass.
  const std::string job_dir = slurm.dir.path() + "/jobs/t" + slurm_trial + "-r0-a1";
  EXPECT_TRUE(c.WaitFor([&] { return !fs::exists(job_dir); }, 30s)) << job_dir;
  // A pool that is neither is refused at submit, naming both kinds.
  auto [status, reply] = c.Post("/api/v1/experiments",
                                Value(Value::Map{{"configYaml", TinyExperiment(1, 20, 10, "nowhere") +
                                                                    "resources: {resource_pool: gpu}\n"}})
                                    .ToJson());
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.ToJson().find("hpc (slurm)"), std::string::npos) << reply.ToJson();
}

// `sf experiment create --follow` of a user trial: `script` as train.py in its context
// directory, run by `/usr/bin/python3 train.py` with the config lines `extra`.
CommandResult RunUserTrial(Cluster& c, const std::string& name, const std::string& script, const std::string& extra = "") {
  TempDir code;
  code.WriteFile("train.py", script);
  const std::string file = code.WriteFile("exp.yaml", "name: " + name + "\n"
                                                      "entrypoint: /usr/bin/python3 train.py\n"
                                                      "context_directory: .\n" + extra +
                                                      "searcher: {name: single, metric: loss, max_length: {batches: 3}}\n");
  CommandOptions o;
  o.timeout = 180s;
  auto run = RunCommand({Cluster::Binary("sf"), "experiment", "create", file, "--follow", "--master", c.url()}, o);
  EXPECT_TRUE(run.ok());
  return run.ok() ? *run : CommandResult{};
}

// The dashboard in Debian's Chromium (webui/e2e/views.e2e.mjs): a trial that ran as a Slurm job
// shows its job id and the nodes it ran on, as the master reports them, and those are the job's
// own in Slurm's job completion log.
TEST(Slurm, TrialPageShowsItsJobIdAndNodesInChromium) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const int64_t id = c.Submit(TinyExperiment(1, 10, 10, "slurm-dashboard"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(c.WaitForState(id, kCompleted, 240s)) << c.ExperimentState(id);
  const Value trial = TrialOf(c, id);
  const auto jobs = JobIds(c, Id(trial));
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(Field(trial, "jobId"), jobs[0]) << trial.ToJson();
  const Value* hosts = trial.Find("hosts");
  ASSERT_TRUE(hosts && hosts->is_list() && hosts->as_list().size() == 1) << trial.ToJson();
  std::string nodes = slurm.Tool({"sacct", "-c", "-j", jobs[0], "-n", "-X", "-P", "-o", "NodeList"});
  nodes.erase(nodes.find_last_not_of(" \n") + 1);
  EXPECT_EQ(hosts->as_list()[0].as_string(), "slurm:" + nodes) << trial.ToJson();

  ExpectDashboardViews(c, {"slurm=" + std::to_string(id)}, "webui-views-slurm");
}

// A user's own script (the Core API, an entrypoint with a context directory) runs through Slurm
// as it runs on agents: sf-task fetches the context from the master and starts the entrypoint.
TEST(Slurm, AnEntrypointWithItsContextRunsAsASlurmJob) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const CommandResult run = RunUserTrial(c, "slurm-user-code",
                                         "import socket\nimport steadfast\n"
                                         "print('user code on', socket.gethostname(), flush=True)\n"
                                         "with steadfast.core.init() as ctx:\n"
                                         "    for op in ctx.searcher.operations():\n"
                                         "        ctx.train.report_validation_metrics(steps_completed=op.length, metrics={'loss': 0.5})\n"
                                         "        op.report_completed(0.5)\n");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(": COMPLETED"), std::string::npos) << run.output;
  // Its output arrives (sf-task sends what is left after the script ends) and it ended cleanly.
  EXPECT_TRUE(c.WaitFor([&] { return Count(c.db(), "SELECT count(*) FROM task_logs WHERE message LIKE 'user code on node%'") >= 1; }, 30s));
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM task_logs WHERE message LIKE '%Traceback%'"), 0);
}

// A rank that fails says why, as on agents: the trial's error names the rank, its node and the
// Python exception, and the Slurm job.
TEST(Slurm, AFailingRankSaysWhyInTheTrialsError) {
  SLURM_OR_SKIP(slurm);
  Cluster c(0, 0, slurm.Layout(slurm.MasterConfig()));
  const CommandResult run =
      RunUserTrial(c, "slurm-fails", "import steadfast\nraise ValueError('bad shape (4, 3)')\n", "max_restarts: 0\n");
  EXPECT_NE(run.output.find(": ERROR"), std::string::npos) << run.output;
  const std::string why = Text(c.db(), "SELECT error FROM trials ORDER BY id LIMIT 1");
  EXPECT_NE(why.find("rank 0 on slurm:node"), std::string::npos) << why;
  EXPECT_NE(why.find("ValueError: bad shape (4, 3)"), std::string::npos) << why;
  EXPECT_NE(why.find("(Slurm job "), std::string::npos) << why;
}

// `sf deploy local up --slurm`, as a user types it: the quickstart grid runs as Slurm jobs (the
// same experiments/quickstart.yaml the agents' quickstart runs), `sf trial logs` shows a rank's
// output, and `down` stops the Slurm cluster with the rest.
TEST(Slurm, DeployLocalUpSlurmRunsTheQuickstartAsSlurmJobs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!fs::exists("/usr/sbin/slurmctld")) GTEST_SKIP() << "slurm-wlm is not installed";
  TempDir scratch;
  scratch.RemoveEvenIfProcessDies();
  LocalDeployment local(scratch);  // sf as a new user has it: no master, CA or token of this process
  auto sf = [&](std::vector<std::string> args) { return local.Sf(std::move(args)); };
  const std::string& dir = local.dir();
  CommandResult up = sf({"deploy", "local", "up", "--slurm", "--dir", dir, "--port", std::to_string(*PickFreePort()),
                         "--grpc-port", std::to_string(*PickFreePort())});
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("trials run as Slurm jobs in partition debug"), std::string::npos) << up.output;
  CommandResult run = sf({"experiment", "create", std::string(SF_SOURCE_DIR) + "/experiments/quickstart.yaml", "--follow"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(": COMPLETED"), std::string::npos) << run.output;
  CommandOptions slurm_env;
  slurm_env.env = {{"SLURM_CONF", dir + "/slurm/slurm.conf"}};
  auto acct = RunCommand({"sacct", "-c", "-n", "-X", "-P", "-o", "jobname,state"}, slurm_env);
  ASSERT_TRUE(acct.ok());
  EXPECT_EQ(std::count(acct->output.begin(), acct->output.end(), '\n'), 4) << acct->output;
  EXPECT_EQ(acct->output.find("FAILED"), std::string::npos) << acct->output;
  CommandResult logs = sf({"trial", "logs", "1"});
  EXPECT_NE(logs.output.find("trainer event=start"), std::string::npos) << logs.output;
  CommandResult stopped = sf({"deploy", "local", "down", "--dir", dir});
  EXPECT_NE(stopped.output.find("stopped the local Slurm cluster"), std::string::npos) << stopped.output;
}

}  // namespace
}  // namespace sf::testing
