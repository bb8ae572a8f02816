// `sf deploy local up` keeps the one-command experience with TLS on (docs/security.md, "TLS"):
// it makes a private CA and the master's certificate (keys mode 600), starts the master with
// TLS and the agent with the CA, and writes sf's defaults file (mode 600) so that a plain
// `sf master info` reaches the HTTPS master without flags; `status` finds it too; `down`
// removes the defaults file. `up --gpus` gives the agent the machine's GPUs as slots;
// `up --master-config` gives the master its config file (and is refused with --slurm). The real
// sf, sf-master, sf-agent and a private PostgreSQL.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;

unsigned Mode(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_mode & 0777 : 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DeployLocal, UpTurnsTlsOnAndPlainSfCommandsReachTheMaster) {
  TempDir scratch;
  scratch.RemoveEvenIfProcessDies();
  LocalDeployment local(scratch, std::chrono::seconds(180));
  auto sf = [&](std::vector<std::string> args) { return local.Sf(std::move(args)); };
  const std::string& dir = local.dir();
  const std::string http_port = std::to_string(*PickFreePort());
  const std::string grpc_port = std::to_string(*PickFreePort());
  CommandResult up = sf({"deploy", "local", "up", "--dir", dir, "--agents", "1", "--port", http_port,
                         "--grpc-port", grpc_port});
  ASSERT_EQ(up.exit_code, 0) << up.output << ReadAll(dir + "/logs/master.log");
  const std::string url = "https://127.0.0.1:" + http_port;
  EXPECT_TRUE(Contains(up.output, "dashboard: " + url + "/")) << up.output;

  // The CA and the master's certificate, keys for their owner only.
  for (const char* file : {"ca.pem", "server.pem", "ca-key.pem", "server-key.pem"}) {
    EXPECT_TRUE(fs::exists(dir + "/tls/" + file)) << file;
  }
  EXPECT_EQ(Mode(dir + "/tls/ca-key.pem"), 0600u);
  EXPECT_EQ(Mode(dir + "/tls/server-key.pem"), 0600u);

  // sf's defaults file points at the HTTPS master and its CA.
  const std::string defaults = scratch.path() + "/config/steadfast/cli.json";
  EXPECT_EQ(Mode(defaults), 0600u);
  auto json = Value::FromJson(ReadAll(defaults));
  ASSERT_TRUE(json.ok()) << ReadAll(defaults);
  EXPECT_EQ(json->Find("master")->as_string(), url);
  EXPECT_EQ(json->Find("ca_file")->as_string(), dir + "/tls/ca.pem");

  // Authentication is on, and `up` logged in by itself: the admin's password is shown once
  // (in up's output only: not in any log, and its file is gone), the session is kept 0600.
  const size_t at = up.output.find("user admin, password ");
  ASSERT_NE(at, std::string::npos) << up.output;
  const std::string password = up.output.substr(at + 21, up.output.find_first_of(" \n", at + 21) - (at + 21));
  EXPECT_GE(password.size(), 16u);
  EXPECT_FALSE(fs::exists(dir + "/admin-password"));
  EXPECT_FALSE(Contains(ReadAll(dir + "/logs/master.log"), password));
  EXPECT_EQ(Mode(scratch.path() + "/config/steadfast/sessions.json"), 0600u);
  CommandResult who = sf({"whoami"});
  EXPECT_EQ(who.exit_code, 0) << who.output;
  EXPECT_TRUE(Contains(who.output, "admin (admin) on " + url)) << who.output;

  // Plain commands, no flags: over HTTPS, verified.
  CommandResult info = sf({"master", "info"});
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_TRUE(Contains(info.output, "connectedAgents: 1")) << info.output;
  CommandResult status = sf({"deploy", "local", "status", "--dir", dir, "--port", http_port});
  EXPECT_TRUE(Contains(status.output, "master health: {\"status\":\"ok\"")) << status.output;
  // The master speaks nothing but TLS.
  CommandResult plain = sf({"master", "info", "--master", "http://127.0.0.1:" + http_port});
  EXPECT_EQ(plain.exit_code, 1) << plain.output;

  // down removes the defaults file that points at this deployment.
  CommandResult stopped = sf({"deploy", "local", "down", "--dir", dir});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_FALSE(fs::exists(defaults));
}

// `up --gpus` on a machine with GPUs (the fake NVML of tests/agent/fake_nvml.cc, through
// SF_NVML_LIBRARY, which the agent inherits): the one agent offers each GPU as a CUDA slot, and
// up says which. More than one agent with --gpus is refused: each would offer the same GPUs.
TEST(DeployLocal, GpusMakesTheMachinesGpusTheAgentsSlots) {
  TempDir scratch;
  scratch.RemoveEvenIfProcessDies();
  LocalDeployment local(scratch, std::chrono::seconds(180));
  local.options().env["SF_NVML_LIBRARY"] = SF_FAKE_NVML_PATH;
  local.options().env["SF_FAKE_NVML_GPUS"] = "2";
  const std::string& dir = local.dir();
  const std::string http_port = std::to_string(*PickFreePort());
  const std::string grpc_port = std::to_string(*PickFreePort());

  CommandResult two = local.Sf({"deploy", "local", "up", "--dir", dir, "--agents", "2", "--gpus", "--port",
                                http_port, "--grpc-port", grpc_port, "--no-tls"});
  EXPECT_EQ(two.exit_code, 2) << two.output;
  EXPECT_TRUE(Contains(two.output, "--gpus needs exactly one agent")) << two.output;
  EXPECT_FALSE(fs::exists(dir + "/master.pid")) << "nothing is started for a refused command";

  CommandResult up = local.Sf({"deploy", "local", "up", "--dir", dir, "--gpus", "--port", http_port,
                               "--grpc-port", grpc_port, "--no-tls"});
  ASSERT_EQ(up.exit_code, 0) << up.output << ReadAll(dir + "/logs/local-agent-0.log");
  EXPECT_TRUE(Contains(up.output, "local cluster is up: 1 agent with slots cuda0, cuda1\n")) << up.output;
  CommandResult agents = local.Sf({"agent", "list"});
  EXPECT_EQ(agents.exit_code, 0) << agents.output;
  EXPECT_TRUE(Contains(agents.output, "Steadfast Fake GPU 1")) << agents.output;
  EXPECT_FALSE(Contains(agents.output, "cpu0")) << agents.output;
  CommandResult stopped = local.Sf({"deploy", "local", "down", "--dir", dir});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
}

TEST(DeployLocal, MasterConfigGivesTheMasterItsSettings) {
  TempDir scratch;
  scratch.RemoveEvenIfProcessDies();
  LocalDeployment local(scratch, std::chrono::seconds(180));
  const std::string& dir = local.dir();
  const std::string http_port = std::to_string(*PickFreePort());
  const std::string grpc_port = std::to_string(*PickFreePort());
  const std::string config = scratch.path() + "/master.yaml";
  std::ofstream(config) << "pool_schedulers: {default: fair_share}\n";

  CommandResult slurm = local.Sf({"deploy", "local", "up", "--dir", dir, "--slurm", "--master-config", config,
                                  "--port", http_port, "--grpc-port", grpc_port});
  EXPECT_EQ(slurm.exit_code, 2) << slurm.output;
  EXPECT_TRUE(Contains(slurm.output, "--master-config cannot be combined with --slurm")) << slurm.output;
  EXPECT_FALSE(fs::exists(dir + "/master.pid")) << "nothing is started for a refused command";

  CommandResult up = local.Sf({"deploy", "local", "up", "--dir", dir, "--master-config", config, "--port",
                               http_port, "--grpc-port", grpc_port, "--no-tls"});
  ASSERT_EQ(up.exit_code, 0) << up.output << ReadAll(dir + "/logs/master.log");
  CommandResult pools = local.Sf({"resource-pool", "list"});
  EXPECT_EQ(pools.exit_code, 0) << pools.output;
  // The file's mode for the pool, where the master's default is priority.
  EXPECT_TRUE(Contains(pools.output, "fair_share")) << pools.output;
  EXPECT_FALSE(Contains(pools.output, "priority")) << pools.output;
  CommandResult stopped = local.Sf({"deploy", "local", "down", "--dir", dir});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
}

}  // namespace
}  // namespace sf::testing
