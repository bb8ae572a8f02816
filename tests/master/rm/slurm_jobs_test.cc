// The Slurm resource manager's pure parts (master/rm/slurm/slurm_jobs.h, master/rm/pool_config.h):
// sbatch's arguments and script for a gang, squeue/sacct/sbatch output as Slurm 22.05 prints it,
// job states as allocation events, and the pools' config with its errors.
#include <gtest/gtest.h>

#include <algorithm>

#include "master/rm/pool_config.h"
#include "master/rm/slurm/slurm_jobs.h"

namespace sf::master::rm::slurm {
namespace {

bool Has(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

GangLaunch Gang(int ranks) {
  GangLaunch g;
  g.allocation_id = "t7-r1-a3";
  g.trial_id = 7;
  g.experiment_id = 2;
  g.ranks.resize(ranks);
  return g;
}

TEST(SlurmJobs, SbatchArgumentsDescribeTheGangAndExperimentRequestsWinOverThePool) {
  SlurmPoolConfig pool;
  pool.partition = "gpu";
  pool.slots_per_node = 4;
  pool.cpus_per_slot = 8;
  pool.gpus_per_slot = 1;
  pool.account = "pool-acct";
  pool.qos = "normal";
  pool.cluster_name = "lab";
  pool.sbatch_args = {"--exclusive"};
  GangLaunch g = Gang(6);
  g.requests.time = "1:30:00";
  g.requests.qos = "high";
  g.requests.sbatch_args = {"--constraint=a100"};
  auto argv = SbatchArgv(pool, g, "/shared/jobs/t7-r1-a3", "/shared/jobs/t7-r1-a3/job.sh");
  EXPECT_EQ(argv.front(), "sbatch");
  EXPECT_EQ(argv.back(), "/shared/jobs/t7-r1-a3/job.sh");
  for (const char* want : {"--parsable", "--no-requeue", "--job-name=sf-t7-r1-a3", "--comment=steadfast:lab:t7-r1-a3",
                           "--partition=gpu", "--nodes=2", "--ntasks=6", "--ntasks-per-node=4", "--cpus-per-task=8",
                           "--gpus-per-task=1", "--account=pool-acct", "--qos=high", "--time=1:30:00",
                           "--exclusive", "--constraint=a100", "--export=ALL"}) {
    EXPECT_TRUE(Has(argv, want)) << want;
  }
  EXPECT_FALSE(Has(argv, "--qos=normal"));
  // The experiment's own arguments come after the pool's.
  EXPECT_LT(std::find(argv.begin(), argv.end(), "--exclusive"), std::find(argv.begin(), argv.end(), "--constraint=a100"));
}

TEST(SlurmJobs, ShapeSpreadsRanksOverNodesBySlotsPerNode) {
  EXPECT_EQ(ShapeOf(1, 1).nodes, 1);
  EXPECT_EQ(ShapeOf(2, 1).nodes, 2);
  EXPECT_EQ(ShapeOf(2, 1).tasks_per_node, 1);
  EXPECT_EQ(ShapeOf(3, 2).nodes, 2);
  EXPECT_EQ(ShapeOf(3, 2).tasks_per_node, 2);
  EXPECT_EQ(ShapeOf(2, 8).nodes, 1);
  EXPECT_EQ(ShapeOf(2, 8).tasks_per_node, 2);
}

TEST(SlurmJobs, TheJobScriptRunsOneSfTaskPerRankWithQuotedPaths) {
  SlurmPoolConfig pool;
  pool.sf_task = "/opt/sf/bin/sf-task";
  pool.sf_trainer = "/opt/sf it's/sf-trainer";
  pool.master_ca_file = "/shared/ca.pem";
  const std::string script = JobScript(pool, Gang(2), "/shared/jobs/t7-r1-a3");
  EXPECT_EQ(script.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(script.find("exec srun --kill-on-bad-exit=1 '/opt/sf/bin/sf-task' --slurm-job '/shared/jobs/t7-r1-a3'"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("--trainer '/opt/sf it'\\''s/sf-trainer'"), std::string::npos) << script;
  EXPECT_NE(script.find("--master-ca-file '/shared/ca.pem'"), std::string::npos) << script;
  EXPECT_EQ(script.find("SF_TASK_TOKENS="), std::string::npos) << "no token in the script";
}

TEST(SlurmJobs, SqueueAndSacctOutputAsSlurmPrintsIt) {
  auto q = ParseSqueue("12|PENDING|Resources||steadfast:lab:t1-r0-a1\n"
                       "13|RUNNING|None|node[1-2]|steadfast:lab:t2-r0-a1\n"
                       "14|CANCELLED by 0|None|node1|a|comment|with|bars\n"
                       "garbage line\n");
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].id, "12");
  EXPECT_EQ(q[0].state, "PENDING");
  EXPECT_EQ(q[0].reason, "Resources");
  EXPECT_EQ(q[1].nodes, "node[1-2]");
  EXPECT_EQ(q[2].state, "CANCELLED");
  EXPECT_EQ(q[2].comment, "a|comment|with|bars");
  auto a = ParseSacct("1|FAILED|3:0|node1\n2|COMPLETED|0:0|node[1-2]\n");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].exit_code, "3:0");
  EXPECT_EQ(a[1].state, "COMPLETED");
  EXPECT_EQ(*ParseSbatchJobId("sbatch: warning: something\n42\n"), "42");
  EXPECT_EQ(*ParseSbatchJobId("43;cluster2\n"), "43");
  EXPECT_FALSE(ParseSbatchJobId("sbatch: error: Batch job submission failed: Invalid partition name specified\n").ok());
  EXPECT_EQ(*AllocationOfComment("lab", "steadfast:lab:t1-r0-a1"), "t1-r0-a1");
  EXPECT_FALSE(AllocationOfComment("lab", "steadfast:other:t1-r0-a1"));
  EXPECT_FALSE(AllocationOfComment("lab", "a user's job"));
}

TEST(SlurmJobs, EndedJobsBecomeExitsWithOneLineReasons) {
  auto exited = [](const std::string& state, const std::string& code, bool killed = false) {
    JobStatus j;
    j.id = "9";
    j.state = state;
    j.exit_code = code;
    j.nodes = "node2";
    return ExitedEvent("t1-r0-a1", j, killed, 2);
  };
  auto ok = exited("COMPLETED", "0:0");
  EXPECT_EQ(ok.exit_codes, (std::map<int, int>{{0, 0}, {1, 0}}));
  EXPECT_TRUE(ok.reason.empty());
  auto failed = exited("FAILED", "3:0");
  EXPECT_EQ(failed.exit_codes.at(1), 3);
  EXPECT_NE(failed.reason.find("Slurm job 9 FAILED on node2 (exit 3:0)"), std::string::npos) << failed.reason;
  EXPECT_NE(exited("CANCELLED", "0:15").reason.find("cancelled outside Steadfast"), std::string::npos);
  EXPECT_TRUE(exited("CANCELLED", "0:15", true).cancelled);
  EXPECT_NE(exited("CANCELLED", "0:15", true).reason.find("cancelled by Steadfast"), std::string::npos);
  EXPECT_NE(exited("NODE_FAIL", "0:0").reason.find("NODE_FAIL"), std::string::npos);
  EXPECT_EQ(exited("NODE_FAIL", "0:0").exit_codes.at(0), -1);
  EXPECT_NE(exited("TIMEOUT", "0:0").reason.find("time limit"), std::string::npos);
  EXPECT_TRUE(exited("PREEMPTED", "0:0").preempted);
  JobStatus pending;
  pending.id = "5";
  pending.reason = "Priority";
  EXPECT_EQ(PendingReason(pending), "Slurm: Priority (job 5)");
  pending.reason = "None";
  EXPECT_EQ(PendingReason(pending), "Slurm: submitted, not yet scheduled (job 5)");
  EXPECT_TRUE(IsTerminalState("OUT_OF_MEMORY"));
  EXPECT_FALSE(IsTerminalState("PENDING"));
  EXPECT_TRUE(IsRunningState("COMPLETING"));
}

TEST(PoolConfig, SlurmPoolsParseAndMistakesNameThePoolAndKey) {
  auto pools = ParsePoolConfigs(YAML::Load("- {name: hpc, manager: slurm, partition: gpu, slots_per_node: 4, "
                                           "gpus_per_slot: 1, sbatch_args: [--exclusive], poll_seconds: 0.5}\n"
                                           "- {name: cpu}\n"),
                                "master.yaml");
  ASSERT_TRUE(pools.ok()) << pools.status().ToString();
  ASSERT_EQ(pools->size(), 2u);
  EXPECT_EQ((*pools)[0].manager, "slurm");
  EXPECT_EQ((*pools)[0].slurm.partition, "gpu");
  EXPECT_EQ((*pools)[0].slurm.slots_per_node, 4);
  EXPECT_EQ((*pools)[0].slurm.gpus_per_slot, 1);
  EXPECT_EQ((*pools)[0].slurm.sbatch_args, std::vector<std::string>{"--exclusive"});
  EXPECT_DOUBLE_EQ((*pools)[0].slurm.poll_seconds, 0.5);
  EXPECT_EQ((*pools)[1].manager, "agents");
  auto error = [](const std::string& yaml) {
    auto r = ParsePoolConfigs(YAML::Load(yaml), "master.yaml");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(error("- {name: hpc, manager: slurm}").find("hpc: a slurm pool needs a partition"), std::string::npos);
  EXPECT_NE(error("- {name: hpc, manager: pbs, partition: x}").find("manager: \"pbs\" is not agents or slurm"),
            std::string::npos);
  EXPECT_NE(error("- {name: hpc, manager: slurm, partition: x, slots_per_node: 0}").find("slots_per_node"),
            std::string::npos);
  EXPECT_NE(error("- {name: hpc, manager: slurm, partition: x, partiton: y}").find("unknown key \"partiton\""),
            std::string::npos);
  EXPECT_NE(error("- {name: a}\n- {name: a}").find("listed twice"), std::string::npos);
  EXPECT_NE(error("{name: a}").find("expected a list"), std::string::npos);
  EXPECT_NE(error("- {name: hpc, manager: slurm, partition: x}\n- {manager: slurm}").find("master.yaml:2"),
            std::string::npos)
      << "errors say where";
}

}  // namespace
}  // namespace sf::master::rm::slurm

#include "launcher/slurm_task.h"

namespace sf::launcher {
namespace {

TEST(SlurmTask, TasksPerNodeExpandsSlurmsCompressedForm) {
  EXPECT_EQ(ParseTasksPerNode("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(ParseTasksPerNode("4"), (std::vector<int>{4}));
  EXPECT_TRUE(ParseTasksPerNode("2(x").empty());
  EXPECT_TRUE(ParseTasksPerNode("a").empty());
}

}  // namespace
}  // namespace sf::launcher

namespace sf::master::rm::slurm {
namespace {

// `sinfo -h -N -p PART -o '%N|%t'`: the nodes that take jobs count, with slots_per_node each.
TEST(SlurmJobs, SinfoNodesThatTakeJobsAreThePoolsSize) {
  const std::string out =
      "node1|idle\n"
      "node2|mix\n"
      "node3|alloc\n"
      "node4|down*\n"     // not responding
      "node5|drain\n"
      "node6|idle*\n"     // not responding
      "node7|idle~\n"     // powered off
      "node8|comp\n"
      "node9|resv$\n"     // in a maintenance reservation: still takes reserved jobs
      "node2|mix\n"       // listed again (another partition line): counted once
      "garbage line\n";
  const PoolSize s = ParseSinfoNodes(out, 4);
  EXPECT_TRUE(s.known);
  EXPECT_EQ(s.nodes, 5);  // node1, 2, 3, 8, 9
  EXPECT_EQ(s.slots, 20);
  EXPECT_EQ(ParseSinfoNodes("", 2).nodes, 0);
  EXPECT_TRUE(ParseSinfoNodes("", 2).known);
}

// NODE_FAIL of a job on node[1-2]: the reason names the node that failed, with Slurm's reason.
TEST(SlurmJobs, ANodeFailNamesTheNodeThatFailed) {
  EXPECT_EQ(FailedNodes("node1|alloc|none\nnode2|down*|Not responding\nnode2|down*|Not responding\n"),
            "node2 (Not responding)");
  EXPECT_EQ(FailedNodes("node1|idle|none\nnode2|mix|none\n"), "");
  EXPECT_EQ(FailedNodes("node3|idle*|none\nnode4|fail|bad disk\n"), "node3, node4 (bad disk)");
  JobStatus j;
  j.id = "9";
  j.state = "NODE_FAIL";
  j.nodes = "node[1-2]";
  EXPECT_EQ(ExitedEvent("t1-r0-a1", j, false, 2, "node2 (Not responding)").reason,
            "Slurm job 9 NODE_FAIL: node2 (Not responding) failed (the job ran on node[1-2])");
  // Without sinfo's answer: the job's node list, as before.
  EXPECT_EQ(ExitedEvent("t1-r0-a1", j, false, 2).reason, "Slurm job 9 NODE_FAIL: a node it ran on (node[1-2]) failed");
}

TEST(SlurmJobs, ASuspendedOrStoppedJobIsHeldWithAReason) {
  JobStatus j;
  j.id = "12";
  j.state = "SUSPENDED";
  EXPECT_EQ(HeldReason(j).rfind("Slurm: SUSPENDED (job 12): ", 0), 0u) << HeldReason(j);
  j.state = "STOPPED";
  EXPECT_EQ(HeldReason(j).rfind("Slurm: STOPPED (job 12): ", 0), 0u) << HeldReason(j);
  for (const char* running : {"RUNNING", "COMPLETING", "CONFIGURING"}) {
    j.state = running;
    EXPECT_EQ(HeldReason(j), "") << running;
  }
}

}  // namespace
}  // namespace sf::master::rm::slurm
