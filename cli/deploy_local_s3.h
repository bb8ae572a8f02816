// `sf deploy local up --s3` (docs/object-storage.md): the local cluster's checkpoints go to a
// real S3 server on this machine (deploy/local-s3.sh: a single-node Ceph with a RADOS Gateway)
// instead of DIR/checkpoints. Root only (the Ceph daemons). Its state lives in DIR/s3; `down`
// stops it too.
//
// Contract: StartLocalS3 brings the server up in DIR/s3 (or finds it running), with the bucket
// kBucket, and puts its endpoint and keys into this process's environment (SF_S3_ENDPOINT,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION), so the master and agents that
// `up` starts next inherit them; DIR/s3/s3.env holds the same lines for a shell (`sf checkpoint
// download` needs them). The master is given CheckpointStorageYaml as its default
// checkpoint_storage.
#pragma once

#include <string>

#include "common/status.h"

namespace sf::cli {

inline constexpr char kLocalS3Bucket[] = "steadfast-checkpoints";

struct LocalS3 {
  std::string dir;       // DIR/s3
  std::string endpoint;  // http://127.0.0.1:PORT
  std::string env_file;  // DIR/s3/s3.env
};

Result<LocalS3> StartLocalS3(const std::string& deploy_dir);
// Stops it if DIR/s3 has one; says so on stdout.
void StopLocalS3(const std::string& deploy_dir);
// The master's default checkpoint_storage for it (flow YAML, no keys: they are in the env).
std::string CheckpointStorageYaml(const LocalS3& s3);

}  // namespace sf::cli
