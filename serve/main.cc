// sf-serve: a trained checkpoint answering translation requests over HTTP(S), with dynamic
// batching (docs/serving.md; the contract is serve/translation_server.h).
//
//   sf-serve (--checkpoint DIR | --model NAME [--version N] [--master URL] [--ca-file F]
//            [--token-env VAR] [--checkpoint-root DIR]) [--bind 127.0.0.1] [--port 8090] [--threads N] [--device cpu]
//            [--max-batch-tokens 4096] [--max-batch-sentences 64] [--max-wait-ms 5]
//            [--max-queue 1024] [--tls-cert-file F --tls-key-file F] [--token-file F]
//
// The first stdout line is "listening on HOST:PORT" (with --port 0 the port picked), printed
// once the socket listens and before the weights load (/ready turns 200 when they have).
// --model asks the master's registry for the version's checkpoint directory first
// (serve/registry_checkpoint.h), then loads it as --checkpoint does.
// --cluster-task: started by an agent for `sf serve start` (serve/cluster_task.h): once ready it
// publishes its URL to the master over TrialLink, and stops (exit 0) when the master asks; every
// route but /health then needs the bearer token in $SF_SERVE_TOKEN (set by the master).
// --model-label/--version-label name what it serves in /health and the metrics.
// A checkpoint on object storage (an s3:// --checkpoint, or a registry version stored there) is
// fetched and verified into a temporary directory first (common/storage/checkpoint_storage.h;
// --s3-endpoint/--s3-region, keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
// SIGINT/SIGTERM stop it (exit 0). Exit status: 1 a run-time error (cannot listen, the master
// unreachable), 2 bad usage or a checkpoint, model version, TLS file or token file that cannot be
// used.
#include <omp.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "common/command_line.h"
#include "common/log.h"
#include "common/secret_file.h"
#include "common/storage/checkpoint_storage.h"
#include "common/tls_files.h"
#include "serve/cluster_task.h"
#include "serve/registry_checkpoint.h"
#include "serve/translation_server.h"
#include "trainer/run/translation_model.h"

namespace {

// A checkpoint fetched from object storage into a temporary directory, removed with it.
struct FetchedCheckpoint {
  std::string root, dir;
  FetchedCheckpoint() = default;
  FetchedCheckpoint(FetchedCheckpoint&& o) noexcept : root(std::move(o.root)), dir(std::move(o.dir)) {
    o.root.clear();
  }
  FetchedCheckpoint& operator=(FetchedCheckpoint&&) = delete;
  ~FetchedCheckpoint() {
    if (root.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
};

sf::Result<FetchedCheckpoint> FetchCheckpoint(const std::string& url, const std::string& endpoint,
                                              const std::string& region) {
  sf::config::CheckpointStorageConfig config;
  config.type = "s3";
  config.endpoint_url = endpoint;
  config.region = region;
  SF_ASSIGN_OR_RETURN(auto store, sf::storage::CheckpointStorage::ForPath(url, config));
  std::error_code ec;
  std::string pattern = (std::filesystem::temp_directory_path(ec) / "sf-serve-XXXXXX").string();
  if (!mkdtemp(pattern.data())) return sf::Internal("cannot make a directory like " + pattern);
  FetchedCheckpoint out;
  out.root = pattern;
  out.dir = pattern + "/checkpoint";
  SF_RETURN_IF_ERROR(store->Fetch(url, out.dir).status());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Serve translations from a trained checkpoint over HTTP, batching concurrent requests.", "sf-serve");
  sf::cmdline::UseDefaults(app);
  sf::TranslationModelOptions model_options;
  sf::serve::ServeOptions o;
  int threads = 0;
  int64_t max_wait_ms = 5;
  std::string cert_file, key_file, token_file, token_env;
  sf::serve::RegistryQuery registry;
  bool cluster_task = false;
  std::string model_label, version_label;
  auto* checkpoint_flag = app.add_option("--checkpoint", model_options.checkpoint,
                                         "checkpoint directory (from sf-trainer train or a trial)");
  auto* model_flag = app.add_option("--model", registry.model,
                                    "serve this registry model (name or id), asking the master for its checkpoint")
                         ->excludes(checkpoint_flag);
  app.add_option("--version", registry.version, "the model's version (default: its latest)")
      ->check(sf::cmdline::AtLeast(1))
      ->needs(model_flag);
  app.add_option("-m,--master", registry.master, "the master's URL (default: as sf finds it, $SF_MASTER)")
      ->needs(model_flag);
  app.add_option("--ca-file", registry.ca_file, "PEM CA certificate(s) of an https:// master")->needs(model_flag);
  app.add_option("--token-env", token_env,
                 "environment variable holding the master's token (default: $SF_TOKEN or the `sf login` session)")
      ->needs(model_flag);
  app.add_option("--checkpoint-root", registry.checkpoint_root,
                 "where the cluster's checkpoint storage is mounted here (default: the path the master records)")
      ->needs(model_flag);
  app.add_flag("--cluster-task", cluster_task,
               "a task the master scheduled (sf serve start): publish the URL, stop when the master asks")
      ->needs(checkpoint_flag);
  app.add_option("--model-label", model_label, "the model's name, shown in /health and the metrics")
      ->needs(checkpoint_flag);
  app.add_option("--version-label", version_label, "the model's version, shown in /health and the metrics")
      ->needs(checkpoint_flag);
  std::string s3_endpoint, s3_region;
  app.add_option("--s3-endpoint", s3_endpoint,
                 "for a checkpoint on S3 (s3://...): the server's URL (default: $SF_S3_ENDPOINT); keys from "
                 "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY");
  app.add_option("--s3-region", s3_region, "for a checkpoint on S3: the region (default: $AWS_DEFAULT_REGION)");
  app.add_option("--bind", o.bind_address, "address to listen on");
  app.add_option("--port", o.port, "port (0: pick a free one; the first stdout line names it)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--threads", threads, "OpenMP threads of the search (0: OpenMP's default)")
      ->check(sf::cmdline::AtLeast(0));
  app.add_option("--http-threads", o.http_threads, "HTTP worker threads")->check(sf::cmdline::AtLeast(1));
  app.add_option("--device", model_options.device, "cpu, cuda (the first visible GPU), cuda:N or auto");
  app.add_option("--max-batch-tokens", o.batching.max_batch_tokens, "source tokens of one batch (EOS included)")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--max-batch-sentences", o.batching.max_batch_sentences, "sentences of one batch")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--max-wait-ms", max_wait_ms, "longest a sentence waits for its batch to fill")
      ->check(sf::cmdline::AtLeast(0));
  app.add_option("--max-queue", o.batching.max_queue, "requests waiting for a batch; beyond it 503")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--max-request-sentences", o.limits.max_sentences, "sentences of one request")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--max-body-bytes", o.max_body_bytes, "largest request body; beyond it 413")
      ->check(sf::cmdline::AtLeast(64));
  app.add_option("--tls-cert-file", cert_file, "PEM certificate chain: serve HTTPS only (with --tls-key-file)");
  app.add_option("--tls-key-file", key_file, "PEM private key of --tls-cert-file");
  app.add_option("--token-file", token_file,
                 "file (mode 600) whose first line is a bearer token every route but /health requires");
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  o.batching.max_wait = std::chrono::milliseconds(max_wait_ms);
  if (registry.model.empty() == model_options.checkpoint.empty()) {
    return sf::cmdline::UsageError(app, "give --checkpoint DIR or --model NAME", std::cerr);
  }
  if (!token_env.empty()) {
    const char* token = std::getenv(token_env.c_str());
    if (!token || !*token) return sf::cmdline::UsageError(app, "--token-env: $" + token_env + " is not set", std::cerr);
    registry.token = token;
  }
  if (cert_file.empty() != key_file.empty()) {
    return sf::cmdline::UsageError(app, "--tls-cert-file and --tls-key-file go together", std::cerr);
  }
  if (!cert_file.empty()) {
    auto cert = sf::LoadServerCertificate(cert_file, key_file);
    if (!cert.ok()) return sf::cmdline::UsageError(app, cert.status().message(), std::cerr);
    o.tls = std::move(*cert);
  }
  if (!token_file.empty()) {
    auto token = sf::ReadSecretFile(token_file, "serve token", 16);
    if (!token.ok()) return sf::cmdline::UsageError(app, token.status().message(), std::cerr);
    o.token = std::move(*token);
  }
  if (threads > 0) omp_set_num_threads(threads);
  if (!registry.model.empty()) {
    auto resolved = sf::serve::ResolveRegistryCheckpoint(registry);
    if (!resolved.ok()) {
      std::fprintf(stderr, "sf-serve: model \"%s\": %s\n", registry.model.c_str(),
                   resolved.status().message().c_str());
      return resolved.status().code() == sf::StatusCode::kUnavailable ? 1 : 2;
    }
    if (resolved->archived) {
      std::fprintf(stderr, "sf-serve: warning: model \"%s\" is archived; serving version %d anyway\n",
                   resolved->model.c_str(), resolved->version);
    }
    model_options.checkpoint = resolved->directory;
    if (s3_endpoint.empty()) s3_endpoint = resolved->s3_endpoint;
    if (s3_region.empty()) s3_region = resolved->s3_region;
    o.model_name = resolved->model;
    o.model_version = std::to_string(resolved->version);
  }
  if (!model_label.empty()) o.model_name = model_label;
  if (!version_label.empty()) o.model_version = version_label;
  o.checkpoint = model_options.checkpoint;
  // A checkpoint on object storage is fetched (and verified) into a directory of this process's
  // own, removed at exit; /health and the metrics keep naming the s3:// URL.
  std::optional<FetchedCheckpoint> fetched;
  if (sf::storage::IsS3Url(model_options.checkpoint)) {
    auto got = FetchCheckpoint(model_options.checkpoint, s3_endpoint, s3_region);
    if (!got.ok()) {
      std::fprintf(stderr, "sf-serve: checkpoint %s: %s\n", model_options.checkpoint.c_str(),
                   got.status().message().c_str());
      return got.status().code() == sf::StatusCode::kUnavailable ? 1 : 2;
    }
    fetched.emplace(std::move(*got));
    model_options.checkpoint = fetched->dir;
  }
  std::unique_ptr<sf::serve::ClusterTask> task;
  if (cluster_task) {
    auto connected = sf::serve::ClusterTask::FromEnvironment();
    if (!connected.ok()) {
      std::fprintf(stderr, "sf-serve: --cluster-task: %s\n", connected.status().message().c_str());
      return 2;
    }
    task = std::move(connected).value();
    // The bearer token the master gave this server (its clients get it from GetServing).
    if (const char* token = std::getenv("SF_SERVE_TOKEN"); token && *token) o.token = token;
    // The certificate the master issued this task (master/auth/task_certificates.h): HTTPS, and
    // only the master's proxy, proving its identity, may connect.
    const char* cert = std::getenv("SF_TASK_TLS_CERT");
    const char* key = std::getenv("SF_TASK_TLS_KEY");
    const char* ca = std::getenv("SF_TASK_TLS_CA");
    if (cert && *cert && key && *key && ca && *ca) {
      o.tls = {cert, key};
      o.clients = sf::http::PeerIdentity{ca, "urn:steadfast:master"};
    }
  }

  // SIGINT/SIGTERM are taken by sigwait below: blocked here, before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  sf::serve::TranslationServer server(o);
  if (sf::Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "sf-serve: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("listening on %s:%d\n", o.bind_address.c_str(), server.port());
  std::fflush(stdout);

  auto model = sf::TranslationModel::Load(model_options);
  if (!model.ok()) {
    std::fprintf(stderr, "sf-serve: checkpoint %s: %s\n", model_options.checkpoint.c_str(),
                 model.status().message().c_str());
    return 2;
  }
  server.SetModel(model->get());
  const sf::BeamOptions& beam = (*model)->default_beam();
  sf::log::Info("serve", {{"event", "ready"}, {"checkpoint", model_options.checkpoint},
                          {"model", o.model_name}, {"version", o.model_version},
                          {"port", std::to_string(server.port())}, {"threads", std::to_string(omp_get_max_threads())},
                          {"beam", std::to_string(beam.beam)}, {"tls", o.tls.cert_chain_pem.empty() ? "off" : "on"},
                          {"token", o.token.empty() ? "off" : "on"}});
  std::string stopped_by;
  if (task) {
    const std::string url = sf::serve::EndpointUrl(o.bind_address, server.port(), !o.tls.cert_chain_pem.empty());
    if (sf::Status published = task->Publish(url); !published.ok()) {
      std::fprintf(stderr, "sf-serve: cannot publish %s to the master: %s\n", url.c_str(), published.message().c_str());
      server.Stop();
      return 1;
    }
    // Serve until a signal, or until the master asks (a pause, a preemption).
    const timespec poll{2, 0};
    while (stopped_by.empty()) {
      int got = sigtimedwait(&stop_signals, nullptr, &poll);
      if (got > 0) {
        stopped_by = "signal " + std::to_string(got);
        break;
      }
      auto stop = task->StopRequested();
      if (!stop.ok()) {
        sf::log::Warn("serve", {{"event", "should_stop_failed"}, {"error", stop.status().message()}});
      } else if (*stop) {
        stopped_by = "master";
      }
    }
  } else {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    stopped_by = "signal " + std::to_string(signal_number);
  }
  sf::log::Info("serve", {{"event", "stopping"}, {"by", stopped_by}});
  server.Stop();  // before the model it translates with goes
  return 0;
}
