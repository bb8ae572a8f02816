// `sf deploy local up --s3` (docs/object-storage.md): the embedded cluster with its checkpoints on
// a real local S3 server (deploy/local-s3.sh: Ceph's RADOS Gateway in DIR/s3). An experiment that
// names no checkpoint_storage gets the master's default, so its checkpoints are s3:// objects;
// `sf checkpoint download` fetches one with the keys from DIR/s3/s3.env; `down` stops the S3
// server with the rest. Root only (the Ceph daemons); label s3.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;

std::map<std::string, std::string> EnvFile(const std::string& path) {
  std::map<std::string, std::string> env;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos && line[0] != '#') env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

TEST(DeployLocalS3, CheckpointsOfAnExperimentWithoutStorageGoToTheLocalS3Server) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the Ceph daemons of deploy/local-s3.sh)";
  TempDir scratch;
  scratch.RemoveEvenIfProcessDies();
  LocalDeployment local(scratch);
  // No keys of the test's own: sf must get them from DIR/s3/s3.env.
  for (const char* key : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "SF_S3_ENDPOINT"}) local.options().env[key] = "";
  auto sf = [&](std::vector<std::string> args) { return local.Sf(std::move(args)); };
  const std::string& dir = local.dir();
  const std::string http_port = std::to_string(*PickFreePort());
  const std::string grpc_port = std::to_string(*PickFreePort());
  CommandResult up = sf({"deploy", "local", "up", "--s3", "--no-tls", "--no-auth", "--dir", dir,
                         "--agents", "1", "--port", http_port, "--grpc-port", grpc_port});
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("checkpoints go to s3://steadfast-checkpoints at http://127.0.0.1:"),
            std::string::npos)
      << up.output;

  // An experiment that says nothing of checkpoint storage.
  const std::string config = scratch.path() + "/tiny.yaml";
  std::ofstream(config) << TinyExperiment(1, 60, 30, "local-s3");
  CommandResult created = sf({"experiment", "create", config, "--follow"});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  CommandResult listed = sf({"checkpoint", "list", "1", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  auto json = Value::FromJson(listed.output);
  ASSERT_TRUE(json.ok() && json->Find("checkpoints")) << listed.output;
  std::string uuid;
  for (const Value& ck : json->Find("checkpoints")->as_list()) {
    EXPECT_EQ(
        ck.Find("path")->as_string().rfind("s3://steadfast-checkpoints/experiment-1/trial-1/", 0),
        0u)
        << ck.ToJson();
    if (ck.Find("state")->as_string() == "ACTIVE") uuid = ck.Find("uuid")->as_string();
  }
  ASSERT_FALSE(uuid.empty()) << listed.output;
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/experiment-1")) << "nothing on the local disk";

  // The stored config names the storage (what its trials and retention read).
  CommandResult described = sf({"experiment", "describe", "1", "--json"});
  EXPECT_NE(described.output.find("steadfast-checkpoints"), std::string::npos) << described.output;

  // Without keys sf cannot read it; with DIR/s3/s3.env it can.
  CommandResult refused = sf({"checkpoint", "download", uuid, scratch.path() + "/no-keys"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  for (const auto& [key, value] : EnvFile(dir + "/s3/s3.env")) local.options().env[key] = value;
  CommandResult got = sf({"checkpoint", "download", uuid, scratch.path() + "/ck"});
  EXPECT_EQ(got.exit_code, 0) << got.output;
  EXPECT_TRUE(fs::exists(scratch.path() + "/ck/model.safetensors"));

  // `down` stops the S3 server too.
  std::ifstream pid_in(dir + "/s3/run/client.rgw.local.pid");
  pid_t gateway = 0;
  pid_in >> gateway;
  ASSERT_GT(gateway, 0);
  CommandResult stopped = sf({"deploy", "local", "down", "--dir", dir});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_NE(stopped.output.find("stopped the local S3 server"), std::string::npos)
      << stopped.output;
  EXPECT_NE(kill(gateway, 0), 0) << "radosgw still runs";
}

}  // namespace
}  // namespace sf::testing
