// TLS on every channel against a real cluster (docs/security.md, "TLS"): PostgreSQL, an
// sf-master serving REST (HTTPS only) and gRPC over TLS with a certificate from the cluster's
// private CA (made with openssl, as `sf deploy local up` makes it), an sf-agent and its
// sf-trainer processes verifying the master with that CA.
//   - a trial trains to completion (AgentLink and TrialLink over TLS);
//   - a plaintext HTTP request and a plaintext gRPC channel to the master fail, and an agent
//     with another CA never registers;
//   - `sf --ca-file` (and $SF_CA_FILE) work, log follows included; a client with the wrong CA,
//     or none, fails with a message naming the certificate verification failure;
//   - across network namespaces, the master on a non-loopback address needs no --insecure with
//     TLS, and agents and trainers elsewhere verify it by the address its certificate names.
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "cli/cluster_certificates.h"
#include "common/subprocess.h"
#include "common/tls_files.h"
#include "steadfast/v1/api.grpc.pb.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/netns.h"

namespace sf::testing {
namespace {
namespace v1 = steadfast::v1;
using std::chrono::seconds;

struct SfRun {
  int exit_code = -1;
  std::string out, err;
};

// `sf args...` with `env` added; stdout and stderr apart.
SfRun RunSf(const std::vector<std::string>& args, const TempDir& scratch,
            const std::map<std::string, std::string>& env = {}) {
  const std::string err_file = scratch.path() + "/stderr.txt";
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>" + err_file,
                                   Cluster::Binary("sf")};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  options.env = env;
  options.env["XDG_CONFIG_HOME"] = scratch.path();  // no defaults file of the user's
  options.timeout = std::chrono::seconds(120);
  auto r = RunCommand(argv, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  std::ifstream in(err_file);
  return {r->exit_code, r->output,
          std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One GetExperiments call on `credentials`; its status.
grpc::Status CallApi(const std::string& address,
                     const std::shared_ptr<grpc::ChannelCredentials>& credentials, const std::string& token = "") {
  auto stub = v1::Api::NewStub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  context.set_deadline(std::chrono::system_clock::now() + seconds(10));
  v1::GetExperimentsRequest request;
  v1::GetExperimentsResponse response;
  return stub->GetExperiments(&context, request, &response);
}

std::shared_ptr<grpc::ChannelCredentials> TrustingCa(const std::string& ca_file) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = LoadCaCertificates(ca_file).value();
  return grpc::SslCredentials(ssl);
}

TEST(TlsEndToEnd, EveryChannelIsTlsAndClientsVerifyTheMaster) {
  ClusterLayout layout;
  layout.tls = true;
  Cluster cluster(1, 1, layout);
  TempDir scratch;
  ASSERT_EQ(cluster.url().rfind("https://", 0), 0u) << cluster.url();

  // A trial trains to completion: the agent registered over TLS, and its trainer reported over
  // TLS (the master's gRPC port speaks nothing else).
  const int64_t id = cluster.Submit(TinyExperiment(1, 20, 10, "tls"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", seconds(300)))
      << cluster.ExperimentState(id);
  const Value trials = cluster.Trials(id);
  ASSERT_EQ(trials.as_list().size(), 1u);
  const int64_t trial = Id(trials.as_list()[0]);
  EXPECT_GT(
      Count(cluster.db(), "SELECT count(*) FROM metrics WHERE trial_id = " + std::to_string(trial)),
      0);

  // Plaintext HTTP to the HTTPS port gets no answer, and the error says why it may be.
  const std::string plain_url = "http" + cluster.url().substr(5);
  auto plain = api::MasterClient::Create(plain_url)->Get("/health");
  ASSERT_FALSE(plain.ok()) << "a plaintext request to the HTTPS port got an answer";
  EXPECT_TRUE(Contains(plain.status().message(), "use an https:// URL"))
      << plain.status().message();

  // A plaintext gRPC channel fails; the same call with the cluster's CA succeeds.
  grpc::Status insecure = CallApi(cluster.grpc_address(), grpc::InsecureChannelCredentials());
  EXPECT_FALSE(insecure.ok());
  EXPECT_EQ(insecure.error_code(), grpc::StatusCode::UNAVAILABLE) << insecure.error_message();
  grpc::Status verified = CallApi(cluster.grpc_address(), TrustingCa(cluster.ca_file()), cluster.admin_token());
  EXPECT_TRUE(verified.ok()) << verified.error_message();
  EXPECT_EQ(CallApi(cluster.grpc_address(), TrustingCa(cluster.ca_file())).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // sf with the CA: --ca-file, or $SF_CA_FILE; the log follow (server-sent events) too.
  SfRun info =
      RunSf({"master", "info", "--master", cluster.url(), "--ca-file", cluster.ca_file()}, scratch);
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_TRUE(Contains(info.out, "version")) << info.out;
  SfRun list = RunSf({"experiment", "list", "--master", cluster.url()}, scratch,
                     {{"SF_CA_FILE", cluster.ca_file()}});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(Contains(list.out, "tls")) << list.out;
  SfRun logs = RunSf({"trial", "logs", std::to_string(trial), "-f", "--master", cluster.url(),
                      "--ca-file", cluster.ca_file()},
                     scratch);
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(Contains(logs.out, "step 10 loss")) << logs.out;

  // The wrong CA, or none (the system's CAs do not know this one), fails verification, and the
  // message says so, with the URL.
  auto other = cli::EnsureClusterCertificates(scratch.path() + "/other-ca", {"127.0.0.1"});
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  for (const std::vector<std::string>& ca_args :
       {std::vector<std::string>{"--ca-file", other->ca_cert}, std::vector<std::string>{}}) {
    std::vector<std::string> args = {"master", "info", "--master", cluster.url()};
    args.insert(args.end(), ca_args.begin(), ca_args.end());
    SfRun wrong = RunSf(args, scratch);
    EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
    EXPECT_TRUE(Contains(wrong.err, "cannot reach the master at " + cluster.url())) << wrong.err;
    EXPECT_TRUE(Contains(wrong.err, "certificate verify failed")) << wrong.err;
  }
  SfRun wrong_follow = RunSf({"trial", "logs", std::to_string(trial), "-f", "--master",
                              cluster.url(), "--ca-file", other->ca_cert},
                             scratch);
  EXPECT_NE(wrong_follow.exit_code, 0);
  EXPECT_TRUE(Contains(wrong_follow.err, "certificate verify failed")) << wrong_follow.err;
  EXPECT_FALSE(CallApi(cluster.grpc_address(), TrustingCa(other->ca_cert)).ok());

  // An agent that trusts another CA never registers, and says why in its log.
  const std::string stranger_log = scratch.path() + "/stranger.log";
  Daemon stranger(
      {Cluster::Binary("sf-agent"), "--master", cluster.grpc_address(), "--agent-id", "stranger",
       "--slots", "cpu:1", "--work-dir", scratch.path() + "/stranger", "--join-token-file",
       cluster.join_token_file(), "--master-ca-file", other->ca_cert},
      stranger_log);
  ASSERT_TRUE(stranger.Start());
  EXPECT_TRUE(cluster.WaitFor(
      [&] {
        std::ifstream in(stranger_log);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return Contains(text, "connect_failed");
      },
      seconds(30)));
  auto [code, agents] = cluster.Get("/api/v1/agents");
  ASSERT_EQ(code, 200);
  for (const Value& a : agents.Find("agents")->as_list())
    EXPECT_NE(a.Find("id")->as_string(), "stranger");
  stranger.Stop();

  // CI, as a pipeline does it: an API token from `sf token create`, then curl with
  // Authorization: Bearer over HTTPS creates an experiment and reads a trial's metrics.
  SfRun made = RunSf({"token", "create", "--name", "ci", "--expires", "1d", "--master", cluster.url(), "--ca-file",
                      cluster.ca_file()},
                     scratch, {{"SF_TOKEN", cluster.admin_token()}});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::string token = made.out;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  ASSERT_EQ(token.rfind("sfa_", 0), 0u) << "stdout holds the token alone: " << made.out;
  EXPECT_TRUE(Contains(made.err, "shown once")) << made.err;
  auto curl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"curl", "-sS", "--cacert", cluster.ca_file(), "-w", "\n%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunCommand(argv);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->output : std::string();
  };
  const std::string body =
      Value(Value::Map{{"configYaml", TinyExperiment(1, 10, 10, "ci")}, {"activate", false}}).ToJson();
  const std::string created = curl({"-H", "Authorization: Bearer " + token, "-H", "Content-Type: application/json",
                                    "--data-binary", body, cluster.url() + "/api/v1/experiments"});
  EXPECT_TRUE(Contains(created, "\"experiment\"") && created.substr(created.size() - 3) == "200") << created;
  const std::string metrics = curl({"-H", "Authorization: Bearer " + token,
                                    cluster.url() + "/api/v1/trials/" + std::to_string(trial) + "/metrics"});
  EXPECT_TRUE(Contains(metrics, "\"batches\"") && metrics.substr(metrics.size() - 3) == "200") << metrics;
  const std::string anonymous = curl({cluster.url() + "/api/v1/experiments"});
  EXPECT_EQ(anonymous.substr(anonymous.size() - 3), "401") << anonymous;
  // No log of the run holds the token, the admin's password or its session.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cluster.dir())) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const std::string& secret : {token.substr(4), cluster.admin_password(), cluster.admin_token().substr(4)}) {
      EXPECT_FALSE(Contains(text, secret)) << entry.path() << " holds a secret";
    }
  }
}

// A TLS master on `net`'s bridge address and each agent in a network namespace of its own.
ClusterLayout TlsAcrossNamespaces(const TestNetwork& net) {
  ClusterLayout layout;
  layout.tls = true;
  layout.master_host = net.bridge_address();
  layout.agent_netns = net.namespaces();
  return layout;
}

TEST(TlsEndToEnd, AMasterOnTheNetworkNeedsNoInsecureWithTls) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  TestNetwork net(1);
  ASSERT_TRUE(net.ok()) << net.why();
  const ClusterLayout layout = TlsAcrossNamespaces(net);
  Cluster cluster(1, 1, layout);
  // The master listens on the bridge address with TLS and without --insecure.
  std::ifstream cmdline("/proc/" + std::to_string(cluster.master_pid()) + "/cmdline");
  const std::string argv((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(Contains(argv, "--tls-cert-file"));
  EXPECT_FALSE(Contains(argv, "--insecure"));
  // The agent (in its own namespace) and its trainer dial the bridge address over TLS.
  const int64_t id = cluster.Submit(TinyExperiment(1, 20, 10, "tls-netns"));
  ASSERT_GT(id, 0);
  EXPECT_TRUE(cluster.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", seconds(300)))
      << cluster.ExperimentState(id);
}

TEST(TlsEndToEnd, TheHopToATaskOnAnotherHostIsMutualTls) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  TestNetwork net(1);
  ASSERT_TRUE(net.ok()) << net.why();
  const ClusterLayout layout = TlsAcrossNamespaces(net);
  Cluster cluster(1, 2, layout);
  TempDir scratch;
  const std::map<std::string, std::string> as_admin = {{"SF_TOKEN", cluster.admin_token()}};
  SfRun started = RunSf({"shell", "start", "--idle-timeout", "600", "--wait-seconds", "120",
                         "--master", cluster.url(), "--ca-file", cluster.ca_file()},
                        scratch, as_admin);
  ASSERT_EQ(started.exit_code, 0) << started.out << started.err;
  std::smatch m;
  const std::string said = started.out + started.err;
  ASSERT_TRUE(std::regex_search(said, m, std::regex(R"(sf shell open (\d+))"))) << said;
  const std::string id = m[1];

  // It serves TLS on its host's address (the namespace's, not the master's loopback).
  const std::string url = Text(cluster.db(), "SELECT url FROM tasks WHERE id = " + id);
  ASSERT_TRUE(std::regex_match(url, m, std::regex(R"(https://([0-9.]+):(\d+)/proxy/\d+/)"))) << url;
  const std::string host = m[1], port = m[2];
  EXPECT_NE(host, "127.0.0.1");

  // Through the proxy: a terminal runs and exits with its status, both hops TLS.
  CommandOptions session;
  session.env = as_admin;
  session.env["XDG_CONFIG_HOME"] = scratch.path();
  // The task's key is its service's alone: the terminal's shell does not get it.
  session.stdin_data = "echo via-$SF_TASK_KIND key=${SF_TASK_TLS_KEY:-none}; exit 4\n";
  session.timeout = seconds(120);
  auto opened = RunCommand({Cluster::Binary("sf"), "shell", "open", id, "--master", cluster.url(),
                            "--ca-file", cluster.ca_file()},
                           session);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->exit_code, 4) << opened->output;
  EXPECT_TRUE(Contains(opened->output, "via-SHELL key=none")) << opened->output;

  // Straight to the task: plain HTTP gets nothing, nor TLS without the master's certificate.
  CommandOptions curl;
  curl.timeout = seconds(30);
  auto plain = RunCommand(
      {"curl", "-sS", "-m", "10", "http://" + host + ":" + port + "/proxy/" + id + "/"}, curl);
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->exit_code, 0) << plain->output;
  auto anonymous =
      RunCommand({"curl", "-sS", "-m", "10", "--cacert", cluster.ca_file(), "-H",
                  "Authorization: Bearer x", "https://" + host + ":" + port + "/proxy/" + id + "/"},
                 curl);
  ASSERT_TRUE(anonymous.ok());
  EXPECT_NE(anonymous->exit_code, 0) << anonymous->output;
  EXPECT_FALSE(Contains(anonymous->output, "sessions")) << anonymous->output;

  // A notebook likewise: https:// on its host, and Jupyter answers through the proxy.
  auto [code, created] = cluster.Post("/api/v1/notebooks", R"({"idleTimeoutSeconds": 600})");
  ASSERT_EQ(code, 200) << created.ToJson();
  const std::string notebook = std::to_string(Id(*created.Find("task")));
  ASSERT_TRUE(cluster.WaitFor(
      [&] { return cluster.Get("/proxy/" + notebook + "/api/status").first == 200; }, seconds(180)))
      << cluster.Get("/proxy/" + notebook + "/api/status").second.ToJson();
  EXPECT_EQ(Text(cluster.db(), "SELECT url FROM tasks WHERE id = " + notebook)
                .rfind("https://" + host + ":", 0),
            0u);
}

}  // namespace
}  // namespace sf::testing
