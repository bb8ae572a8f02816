// sf-master's scheduling settings (master/master_config.h): as scalars and flags, as the
// mappings the issue writes (`scheduler: {type: fair_share}`), and the errors that name the key;
// the safe default for a non-loopback bind; the TLS files (real certificates made with openssl).
#include "master/master_config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "cli/cluster_certificates.h"

#include "tests/support/testing.h"

namespace sf::master {
namespace {

class MasterConfigTest : public ::testing::Test {
 protected:
  Result<MasterConfig> Load(const std::string& yaml, std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {"--config", dir_.WriteFile("master.yaml", yaml)};
    args.insert(args.end(), flags.begin(), flags.end());
    return LoadMasterConfig(args);
  }
  sf::testing::TempDir dir_;
};

TEST_F(MasterConfigTest, SchedulingSettingsHaveTheirDefaults) {
  auto c = Load("cluster_name: x\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler, SchedulingMode::kPriority);
  EXPECT_TRUE(c->pool_schedulers.empty());
  EXPECT_EQ(c->preemption_grace_seconds, 300);
  EXPECT_EQ(c->min_run_seconds, 60);
}

TEST_F(MasterConfigTest, SchedulingSettingsAsScalarsAndFlags) {
  auto c = Load(
      "scheduler: fair_share\npool_schedulers: gpu=fair_share,cpu=priority\n"
      "preemption_grace_seconds: 30\nmin_run_seconds: 0\n",
      {"--pool-schedulers", "gpu=priority"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler, SchedulingMode::kFairShare);
  // The flag replaces the file's whole list.
  EXPECT_EQ(c->pool_schedulers, (std::map<std::string, SchedulingMode>{{"gpu", SchedulingMode::kPriority}}));
  EXPECT_EQ(c->preemption_grace_seconds, 30);
  EXPECT_EQ(c->min_run_seconds, 0);
}

TEST_F(MasterConfigTest, SchedulingSettingsAsMappings) {
  auto c = Load("scheduler: {type: fair_share}\npool_schedulers: {gpu: {type: fair_share}, cpu: priority}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler, SchedulingMode::kFairShare);
  EXPECT_EQ(c->pool_schedulers, (std::map<std::string, SchedulingMode>{{"cpu", SchedulingMode::kPriority},
                                                                       {"gpu", SchedulingMode::kFairShare}}));
}

TEST_F(MasterConfigTest, ResourcePoolsComeFromTheFileWithTheirManagers) {
  auto c = Load("resource_pools:\n  - name: hpc\n    manager: slurm\n    partition: gpu\n    qos: normal\n"
                "  - name: default\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->resource_pools.size(), 2u);
  EXPECT_EQ(c->resource_pools[0].name, "hpc");
  EXPECT_EQ(c->resource_pools[0].manager, "slurm");
  EXPECT_EQ(c->resource_pools[0].slurm.qos, "normal");
  EXPECT_EQ(c->resource_pools[1].manager, "agents");
  auto bad = Load("resource_pools:\n  - name: hpc\n    manager: slurm\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("master.yaml:2: resource_pools: hpc: a slurm pool needs a partition"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(MasterConfigTest, BadSchedulingSettingsNameTheKey) {
  auto bad_type = Load("scheduler: {type: lottery}\n");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("scheduler: \"lottery\" must be priority or fair_share"),
            std::string::npos)
      << bad_type.status().message();
  auto bad_pool = Load("pool_schedulers: {gpu: [fair_share]}\n");
  ASSERT_FALSE(bad_pool.ok());
  EXPECT_NE(bad_pool.status().message().find("pool_schedulers: gpu: expected {type: priority|fair_share}"),
            std::string::npos)
      << bad_pool.status().message();
  auto bad_grace = Load("preemption_grace_seconds: 0\n");
  ASSERT_FALSE(bad_grace.ok());
  EXPECT_NE(bad_grace.status().message().find("preemption_grace_seconds"), std::string::npos);
  // Other settings stay scalars.
  auto map_port = Load("http_port: {type: 8080}\n");
  ASSERT_FALSE(map_port.ok());
  EXPECT_NE(map_port.status().message().find("http_port: expected a value"), std::string::npos)
      << map_port.status().message();
}

TEST_F(MasterConfigTest, TheDefaultCheckpointStorageIsAMappingCheckedLikeAnExperimentsSection) {
  auto none = Load("cluster_name: x\n");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->checkpoint_storage, "") << "shared_fs under checkpoint_root";
  auto file = Load("checkpoint_storage: {type: s3, bucket: ckpts, endpoint_url: 'http://h:7480'}\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const YAML::Node back = YAML::Load(file->checkpoint_storage);  // flow YAML, for submissions
  EXPECT_EQ(back["type"].as<std::string>(), "s3") << file->checkpoint_storage;
  EXPECT_EQ(back["endpoint_url"].as<std::string>(), "http://h:7480") << file->checkpoint_storage;
  auto flag = Load("cluster_name: x\n", {"--checkpoint-storage", "{type: s3, bucket: other}"});
  ASSERT_TRUE(flag.ok()) << flag.status().ToString();
  EXPECT_EQ(flag->checkpoint_storage, "{type: s3, bucket: other}");
  auto bad = Load("checkpoint_storage: {type: s3}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("checkpoint_storage.bucket: required field is missing"), std::string::npos)
      << bad.status().message();
}

// Safe default (docs/security.md): loopback unless told otherwise, and a non-loopback address only
// with --insecure while the API is neither authenticated nor encrypted.
TEST_F(MasterConfigTest, ANonLoopbackBindNeedsInsecure) {
  auto defaults = Load("cluster_name: x\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->bind_address, "127.0.0.1");
  EXPECT_FALSE(defaults->insecure);
  for (std::string address : {"0.0.0.0", "10.1.2.3", "::"}) {
    auto refused = Load("cluster_name: x\n", {"--bind", address});
    ASSERT_FALSE(refused.ok()) << address;
    EXPECT_NE(refused.status().message().find("bind: " + address + " is not a loopback address"), std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find("--insecure"), std::string::npos);
  }
  auto flag = Load("cluster_name: x\n", {"--bind", "0.0.0.0", "--insecure"});
  ASSERT_TRUE(flag.ok()) << flag.status().ToString();
  EXPECT_TRUE(flag->insecure);
  auto file = Load("bind: 10.1.2.3\ninsecure: true\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto off = Load("bind: 10.1.2.3\ninsecure: true\n", {"--insecure=false"});
  EXPECT_FALSE(off.ok());
  for (std::string address : {"127.0.0.1", "127.0.1.1", "::1", "localhost"}) {
    EXPECT_TRUE(Load("cluster_name: x\n", {"--bind", address}).ok()) << address;
  }
  EXPECT_FALSE(Load("insecure: maybe\n").ok());
}

// A cluster CA and a master certificate in `dir`/name, made as `sf deploy local up` makes them.
cli::ClusterCertificates MakeCertificates(const sf::testing::TempDir& dir, const std::string& name) {
  auto made = cli::EnsureClusterCertificates(dir.path() + "/" + name, {"127.0.0.1", "localhost"});
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? *made : cli::ClusterCertificates{};
}

TEST_F(MasterConfigTest, TlsFilesAreReadAndANonLoopbackBindNeedsNoInsecureWithThem) {
  const cli::ClusterCertificates files = MakeCertificates(dir_, "tls");
  auto off = Load("cluster_name: x\n");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->tls_enabled());
  for (std::string address : {"0.0.0.0", "10.1.2.3"}) {
    auto on = Load("cluster_name: x\n",
                   {"--bind", address, "--tls-cert-file", files.server_cert, "--tls-key-file", files.server_key});
    ASSERT_TRUE(on.ok()) << on.status().ToString();
    EXPECT_TRUE(on->tls_enabled());
    EXPECT_FALSE(on->insecure);
    EXPECT_NE(on->tls.cert_chain_pem.find("BEGIN CERTIFICATE"), std::string::npos);
    EXPECT_NE(on->tls.private_key_pem.find("PRIVATE KEY"), std::string::npos);
  }
  // The same from the config file.
  auto file = Load("bind: 0.0.0.0\ntls_cert_file: " + files.server_cert + "\ntls_key_file: " + files.server_key + "\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file->tls_enabled());
  // What the master checks against its advertised_address (trainers dial it).
  EXPECT_TRUE(CertificateNamesHost(file->tls.cert_chain_pem, "127.0.0.1"));
  EXPECT_TRUE(CertificateNamesHost(file->tls.cert_chain_pem, "localhost"));
  EXPECT_FALSE(CertificateNamesHost(file->tls.cert_chain_pem, "10.1.2.3"));
  EXPECT_FALSE(CertificateNamesHost(file->tls.cert_chain_pem, "master.example.com"));
  // TLS on loopback is fine too.
  EXPECT_TRUE(Load("cluster_name: x\n", {"--tls-cert-file", files.server_cert, "--tls-key-file", files.server_key})
                  .ok());
}

TEST_F(MasterConfigTest, ACertificateWithoutItsKeyIsRefusedNamingBoth) {
  const cli::ClusterCertificates files = MakeCertificates(dir_, "tls");
  auto cert_only = Load("cluster_name: x\n", {"--tls-cert-file", files.server_cert});
  ASSERT_FALSE(cert_only.ok());
  EXPECT_NE(cert_only.status().message().find("tls_cert_file: " + files.server_cert + " is given without tls_key_file"),
            std::string::npos)
      << cert_only.status().message();
  EXPECT_NE(cert_only.status().message().find("--tls-key-file"), std::string::npos);
  auto key_only = Load("cluster_name: x\n", {"--tls-key-file", files.server_key});
  ASSERT_FALSE(key_only.ok());
  EXPECT_NE(key_only.status().message().find("tls_key_file: " + files.server_key + " is given without tls_cert_file"),
            std::string::npos)
      << key_only.status().message();
  // The cluster CA for the hop to tasks likewise: both files or neither (read by the master).
  auto ca_only = Load("cluster_name: x\n", {"--task-ca-cert-file", files.ca_cert});
  ASSERT_FALSE(ca_only.ok());
  EXPECT_NE(ca_only.status().message().find("task_ca_cert_file: " + files.ca_cert + " is given without task_ca_key_file"),
            std::string::npos)
      << ca_only.status().message();
  auto both = Load("cluster_name: x\n", {"--task-ca-cert-file", files.ca_cert, "--task-ca-key-file", files.ca_key});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->task_ca_key_file, files.ca_key);
  // A non-loopback bind without TLS still needs --insecure, and the message offers TLS.
  auto plain = Load("cluster_name: x\n", {"--bind", "0.0.0.0"});
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("--tls-cert-file"), std::string::npos) << plain.status().message();
}

TEST_F(MasterConfigTest, UnreadableOrMismatchedTlsFilesAreNamed) {
  const cli::ClusterCertificates files = MakeCertificates(dir_, "tls");
  const cli::ClusterCertificates other = MakeCertificates(dir_, "other");
  const std::string missing = dir_.path() + "/missing.pem";
  auto no_cert = Load("cluster_name: x\n", {"--tls-cert-file", missing, "--tls-key-file", files.server_key});
  ASSERT_FALSE(no_cert.ok());
  EXPECT_NE(no_cert.status().message().find("TLS certificate file " + missing + ": cannot read it"), std::string::npos)
      << no_cert.status().message();
  auto no_key = Load("cluster_name: x\n", {"--tls-cert-file", files.server_cert, "--tls-key-file", missing});
  ASSERT_FALSE(no_key.ok());
  EXPECT_NE(no_key.status().message().find("TLS key file " + missing + ": cannot read it"), std::string::npos)
      << no_key.status().message();
  // Not PEM: the file is named.
  const std::string junk = dir_.WriteFile("junk.pem", "not a certificate\n");
  auto not_pem = Load("cluster_name: x\n", {"--tls-cert-file", junk, "--tls-key-file", files.server_key});
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find(junk + ": no PEM certificate"), std::string::npos)
      << not_pem.status().message();
  auto key_not_pem = Load("cluster_name: x\n", {"--tls-cert-file", files.server_cert, "--tls-key-file", junk});
  ASSERT_FALSE(key_not_pem.ok());
  EXPECT_NE(key_not_pem.status().message().find("TLS key file " + junk + ": no PEM private key"), std::string::npos)
      << key_not_pem.status().message();
  // Another certificate's key.
  auto mismatch = Load("cluster_name: x\n", {"--tls-cert-file", files.server_cert, "--tls-key-file", other.server_key});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("TLS key file " + other.server_key +
                                             ": the key does not match the certificate in " + files.server_cert),
            std::string::npos)
      << mismatch.status().message();
  // The key material itself never appears in a message.
  EXPECT_EQ(mismatch.status().message().find("BEGIN"), std::string::npos);
}

}  // namespace
}  // namespace sf::master
