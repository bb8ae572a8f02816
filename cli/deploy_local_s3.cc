#include "cli/deploy_local_s3.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "cli/deploy_local_slurm.h"
#include "common/subprocess.h"

namespace sf::cli {
namespace fs = std::filesystem;
namespace {

Result<LocalS3> ReadEnv(const std::string& dir) {
  std::ifstream in(dir + "/s3.env");
  if (!in) return NotFound(dir + "/s3.env: the S3 server wrote no environment file");
  std::map<std::string, std::string> env;
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos && line[0] != '#') env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  for (const char* key : {"SF_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}) {
    if (env[key].empty()) return InvalidArgument(dir + "/s3.env: " + key + " is missing");
  }
  for (const auto& [key, value] : env)
    setenv(key.c_str(), value.c_str(), 1);  // for the daemons started next
  return LocalS3{dir, env["SF_S3_ENDPOINT"], dir + "/s3.env"};
}

}  // namespace

Result<LocalS3> StartLocalS3(const std::string& deploy_dir) {
  if (geteuid() != 0) {
    return FailedPrecondition(
        "--s3 needs root: the local S3 server's Ceph daemons run as root "
        "(sudo sf deploy local up --s3)");
  }
  const std::string script = DeployScript("local-s3.sh");
  if (script.empty())
    return NotFound("cannot find local-s3.sh (share/steadfast/ beside sf, or deploy/)");
  const std::string dir = deploy_dir + "/s3";
  CommandOptions o;
  o.timeout = std::chrono::minutes(5);
  std::cout << "starting a local S3 server (Ceph RADOS Gateway) in " << dir << "\n" << std::flush;
  auto up = RunCommand({script, "up", dir, "--bucket", kLocalS3Bucket}, o);
  if (!up.ok()) return up.status();
  if (up->exit_code != 0) {
    return FailedPrecondition("the local S3 server did not start (" + script + " up " + dir +
                              "):\n" + up->output);
  }
  return ReadEnv(dir);
}

void StopLocalS3(const std::string& deploy_dir) {
  const std::string dir = deploy_dir + "/s3";
  std::error_code ec;
  if (!fs::exists(dir + "/cluster.env", ec)) return;
  const std::string script = DeployScript("local-s3.sh");
  if (script.empty()) {
    std::cerr << "sf deploy local: cannot find local-s3.sh to stop the S3 server in " << dir
              << "\n";
    return;
  }
  CommandOptions o;
  o.timeout = std::chrono::minutes(3);
  auto down = RunCommand({script, "down", dir}, o);
  if (down.ok() && down->exit_code == 0) {
    std::cout << "stopped the local S3 server\n";
  } else {
    std::cerr << "sf deploy local: stopping the S3 server: "
              << (down.ok() ? down->output : down.status().message()) << "\n";
  }
}

std::string CheckpointStorageYaml(const LocalS3& s3) {
  return std::string("{type: s3, bucket: ") + kLocalS3Bucket + ", endpoint_url: '" + s3.endpoint +
         "'}";
}

}  // namespace sf::cli
