#include "agent/agent_config.h"

#include <gtest/gtest.h>

#include <map>

#include "cli/cluster_certificates.h"
#include "tests/support/testing.h"

namespace sf::agent {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Result<ParsedCommandLine> Parse(std::vector<std::string> args,
                                std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), "sf-agent");
  return ParseCommandLine(args, FakeEnv(std::move(env)), "/opt/steadfast/bin/sf-agent");
}

TEST(AgentConfigTest, DefaultsWhenNothingIsGiven) {
  auto parsed = Parse({});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const AgentConfig& c = parsed->config;
  EXPECT_EQ(c.master, "127.0.0.1:8090");
  EXPECT_FALSE(c.agent_id.empty());  // the hostname
  EXPECT_EQ(c.resource_pool, "default");
  EXPECT_TRUE(c.slots.auto_detect);
  EXPECT_EQ(c.work_dir, "/tmp/steadfast-agent-" + c.agent_id);
  EXPECT_EQ(c.trainer, "sf-trainer");  // nothing next to the (fake) binary: PATH lookup
  EXPECT_FALSE(c.kill_tasks_on_exit);
}

TEST(AgentConfigTest, FlagsInBothSpellings) {
  auto parsed = Parse({"--master", "m:1", "--agent-id=a1", "--resource-pool", "gpu",
                       "--slots=cpu:2", "--trainer", "/x/t", "--work-dir", "/w",
                       "--log-level=debug", "--kill-tasks-on-exit", "--kill-grace-ms", "250",
                       "--cpu-threads-per-slot=3"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const AgentConfig& c = parsed->config;
  EXPECT_EQ(c.master, "m:1");
  EXPECT_EQ(c.agent_id, "a1");
  EXPECT_EQ(c.resource_pool, "gpu");
  EXPECT_FALSE(c.slots.auto_detect);
  EXPECT_EQ(c.slots.cpu_slots, 2);
  EXPECT_EQ(c.trainer, "/x/t");
  EXPECT_EQ(c.work_dir, "/w");
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_TRUE(c.kill_tasks_on_exit);
  EXPECT_EQ(c.kill_grace_ms, 250);
  EXPECT_EQ(c.cpu_threads_per_slot, 3);
}

// The spelling, --pool, names the same setting as --resource-pool.
TEST(AgentConfigTest, PoolIsAnAliasOfResourcePool) {
  auto parsed = Parse({"--master", "m:1", "--pool", "gpu"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->config.resource_pool, "gpu");
  EXPECT_FALSE(Parse({"--master", "m:1", "--pool", ""}).ok());
}

TEST(AgentConfigTest, FlagsBeatEnvironmentBeatsConfigFile) {
  testing::TempDir dir;
  std::string file = dir.WriteFile("agent.yaml",
                                   "master: file:1\n"
                                   "agent_id: from-file\n"
                                   "slots: {cpu: 3}\n"
                                   "kill_tasks_on_exit: true\n");
  auto from_file = Parse({"--config", file});
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->config.master, "file:1");
  EXPECT_EQ(from_file->config.agent_id, "from-file");
  EXPECT_EQ(from_file->config.slots.cpu_slots, 3);
  EXPECT_TRUE(from_file->config.kill_tasks_on_exit);

  auto from_env = Parse({"--config", file}, {{"SF_MASTER", "env:2"}});
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->config.master, "env:2");

  auto from_flag = Parse({"--config", file, "--master", "flag:3"}, {{"SF_MASTER", "env:2"}});
  ASSERT_TRUE(from_flag.ok());
  EXPECT_EQ(from_flag->config.master, "flag:3");
}

TEST(AgentConfigTest, ErrorsNameTheFlagOrKey) {
  auto bad_slots = Parse({"--slots", "gpu:2"});
  ASSERT_FALSE(bad_slots.ok());
  EXPECT_NE(bad_slots.status().message().find("--slots"), std::string::npos);
  EXPECT_NE(bad_slots.status().message().find("gpu:2"), std::string::npos);

  EXPECT_FALSE(Parse({"--slots", "cpu:0"}).ok());
  EXPECT_FALSE(Parse({"--slots", "cpu:x"}).ok());
  EXPECT_FALSE(Parse({"--bogus"}).ok());
  EXPECT_FALSE(Parse({"--master"}).ok());
  EXPECT_FALSE(Parse({"--log-level", "loud"}).ok());
  EXPECT_FALSE(Parse({"stray"}).ok());
  auto bad_threads = Parse({"--cpu-threads-per-slot", "-2"});
  ASSERT_FALSE(bad_threads.ok());
  EXPECT_NE(bad_threads.status().message().find("--cpu-threads-per-slot"), std::string::npos)
      << bad_threads.status().message();

  testing::TempDir dir;
  std::string file = dir.WriteFile("agent.yaml", "mastr: x:1\n");
  auto unknown = Parse({"--config", file});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find(file + ": unknown setting \"mastr\" (did you mean \"master\"?)"),
            std::string::npos)
      << unknown.status().message();
  auto missing = Parse({"--config", dir.path() + "/nope.yaml"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.yaml"), std::string::npos);
}

// NVML for `auto` slots: the loader's libnvidia-ml.so.1 unless the flag, SF_NVML_LIBRARY or the
// config file name another (non-standard installs, tests).
TEST(AgentConfigTest, NvmlLibraryFromFlagEnvironmentOrFile) {
  EXPECT_EQ(Parse({})->config.nvml_library, "");
  EXPECT_EQ(Parse({}, {{"SF_NVML_LIBRARY", "/env/libnvidia-ml.so.1"}})->config.nvml_library,
            "/env/libnvidia-ml.so.1");
  EXPECT_EQ(Parse({"--nvml-library", "/flag/nvml.so"}, {{"SF_NVML_LIBRARY", "/env/nvml.so"}})->config.nvml_library,
            "/flag/nvml.so");
  testing::TempDir dir;
  std::string file = dir.WriteFile("agent.yaml", "nvml_library: /file/nvml.so\n");
  EXPECT_EQ(Parse({"--config", file})->config.nvml_library, "/file/nvml.so");
  auto empty = Parse({"--nvml-library", ""});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("--nvml-library"), std::string::npos) << empty.status().message();
}

TEST(AgentConfigTest, HelpAndVersion) {
  EXPECT_EQ(Parse({"--help"})->action, CommandLineAction::kHelp);
  EXPECT_EQ(Parse({"--version"})->action, CommandLineAction::kVersion);
}

TEST(AgentConfigTest, RelativePathsBecomeAbsolute) {
  auto parsed = Parse({"--work-dir", "work", "--trainer", "./bin/trainer"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->config.work_dir.front(), '/');
  EXPECT_EQ(parsed->config.trainer.front(), '/');
}

// TLS to the master: the CA file from the flag, the config file or SF_MASTER_CA_FILE, made
// absolute (trainers get the path) and read at start, so a bad file stops the agent there.
TEST(AgentConfigTest, MasterCaFileIsReadAtStartFromFlagFileOrEnvironment) {
  testing::TempDir dir;
  auto ca = cli::EnsureClusterCertificates(dir.path() + "/tls", {"127.0.0.1"});
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  auto none = Parse({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->config.master_ca_file.empty());
  EXPECT_TRUE(none->config.master_ca_pem.empty());

  auto flag = Parse({"--master-ca-file", ca->ca_cert});
  ASSERT_TRUE(flag.ok()) << flag.status().ToString();
  EXPECT_EQ(flag->config.master_ca_file, ca->ca_cert);
  EXPECT_NE(flag->config.master_ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  auto env = Parse({}, {{"SF_MASTER_CA_FILE", ca->ca_cert}});
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->config.master_ca_file, ca->ca_cert);
  auto file = Parse({"--config", dir.WriteFile("agent.yaml", "master_ca_file: " + ca->ca_cert + "\n")});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_FALSE(file->config.master_ca_pem.empty());

  const std::string missing = dir.path() + "/missing.pem";
  auto unreadable = Parse({"--master-ca-file", missing});
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.status().message().find("master CA file " + missing + ": cannot read it"), std::string::npos)
      << unreadable.status().message();
  auto not_pem = Parse({"--master-ca-file", dir.WriteFile("junk.pem", "junk\n")});
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find("no PEM certificate"), std::string::npos) << not_pem.status().message();
}

TEST(SlotSpecTest, AutoAndCpu) {
  EXPECT_TRUE(ParseSlotSpec("auto")->auto_detect);
  auto cpu = ParseSlotSpec("cpu:4");
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->auto_detect);
  EXPECT_EQ(cpu->cpu_slots, 4);
  EXPECT_FALSE(ParseSlotSpec("cpu:").ok());
  EXPECT_FALSE(ParseSlotSpec("cpu:-1").ok());
}

}  // namespace
}  // namespace sf::agent
