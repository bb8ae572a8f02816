// sf-master: the Steadfast master daemon.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <thread>

#include "common/log.h"
#include "common/secret_file.h"
#include "master/api/grpc_api_service.h"
#include "master/auth/task_certificates.h"
#include "master/api/grpc_services.h"
#include "master/api/trial_link_service.h"
#include "master/api/http_server.h"
#include "master/api/rest_router.h"
#include "master/core/utilization_recorder.h"
#include "master/housekeeping/bookkeeping_retention.h"
#include "master/master_config.h"
#include "master/rm/agents/agent_manager.h"
#include "master/rm/slurm/slurm_manager.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

std::string FindWebUi(const std::string& configured) {
  namespace fs = std::filesystem;
  if (!configured.empty()) return configured;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  // Installed layout, then the build tree (build/master/sf-master -> webui/dist).
  for (fs::path candidate : {exe.parent_path() / "../share/steadfast/webui",
                             exe.parent_path() / "../../webui/dist", fs::path(SF_SOURCE_DIR) / "webui/dist"}) {
    if (fs::exists(candidate / "index.html", ec)) return fs::weakly_canonical(candidate).string();
  }
  return "";
}

// The first start's admin (Accounts::Bootstrap): with `password_file`, its content is the
// password and the file is deleted once read, so the clear text does not stay on disk. Returns
// the password made up when there was no file and no user yet ("" otherwise).
sf::Result<std::string> BootstrapAdmin(sf::master::Accounts& accounts, const std::string& password_file) {
  namespace fs = std::filesystem;
  std::string password;
  std::error_code ec;
  if (!password_file.empty() && fs::exists(password_file, ec)) {
    auto read = sf::ReadSecretFile(password_file, "admin password", sf::master::Accounts::kMinPasswordBytes);
    if (!read.ok()) return read.status();
    password = *read;
    fs::remove(password_file, ec);
  }
  auto made = accounts.Bootstrap(password);
  if (!made.ok()) return made.status();
  return *made;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace sf;
  using namespace sf::master;
  auto config = LoadMasterConfig(std::vector<std::string>(argv + 1, argv + argc));
  if (!config.ok()) {
    if (config.status().code() == StatusCode::kCancelled) {
      std::cout << config.status().message();
      return 0;
    }
    std::cerr << "sf-master: " << config.status().message() << "\n";
    return 2;
  }
  log::Level level;
  log::ParseLevel(config->log_level, level);
  log::SetLevel(level);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);

  if (config->tls_enabled()) {
    // Trainers dial advertised_address and check that the certificate names its host.
    std::string host = config->advertised_address.substr(0, config->advertised_address.rfind(':'));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (!CertificateNamesHost(config->tls.cert_chain_pem, host)) {
      log::Warn("master", {{"event", "certificate_does_not_name_advertised_address"},
                           {"advertised_address", config->advertised_address},
                           {"tls_cert_file", config->tls_cert_file},
                           {"why", "trainers dial this address and will refuse the certificate: add the host to "
                                   "its subject alternative names, or set --advertised-address"}});
    }
  }
  // Pools another resource manager places (docs/slurm.md): each checked before anything runs.
  std::vector<std::unique_ptr<rm::ResourceManager>> managers;
  std::map<std::string, rm::ResourceManager*> external_pools;
  std::map<std::string, std::string> external_addresses;
  for (rm::PoolConfig pool : config->resource_pools) {
    if (pool.manager != "slurm") continue;
    rm::SlurmPoolConfig& slurm = pool.slurm;
    slurm.cluster_name = config->cluster_name;
    if (slurm.master_address.empty()) slurm.master_address = config->advertised_address;
    if (slurm.job_dir.empty()) {
      slurm.job_dir = (std::filesystem::path(config->checkpoint_root).parent_path() / "slurm-jobs").string();
    }
    auto manager = std::make_unique<rm::slurm::SlurmManager>(pool.name, slurm);
    Status checked = manager->Check();
    if (!checked.ok()) {
      log::Error("master", {{"event", "resource_pool_failed"}, {"pool", pool.name}, {"error", checked.message()}});
      std::cerr << "sf-master: " << checked.message() << "\n";
      return 1;
    }
    log::Info("master", {{"event", "resource_pool"}, {"pool", pool.name}, {"manager", "slurm"},
                         {"partition", slurm.partition}, {"job_dir", slurm.job_dir},
                         {"master_address", slurm.master_address}});
    external_pools[pool.name] = manager.get();
    external_addresses[pool.name] = slurm.master_address;
    managers.push_back(std::move(manager));
  }
  auto db = Database::Open(config->db, config->db_pool_size, std::chrono::seconds(60));
  if (!db.ok()) {
    log::Error("master", {{"event", "db_open_failed"}, {"error", db.status().message()}});
    return 1;
  }
  Status migrated = (*db)->Migrate();
  if (!migrated.ok()) {
    log::Error("master", {{"event", "migration_failed"}, {"error", migrated.message()}});
    return 1;
  }
  Result<TaskTokens> task_tokens = TaskTokens::Load(db->get());
  if (!task_tokens.ok()) {
    log::Error("master", {{"event", "task_token_secret_failed"}, {"error", task_tokens.status().message()}});
    return 1;
  }
  // The cluster CA for the hop to tasks' services (master/auth/task_certificates.h).
  std::unique_ptr<TaskCertificates> task_certificates;
  if (!config->task_ca_cert_file.empty()) {
    auto loaded = TaskCertificates::Load(config->task_ca_cert_file, config->task_ca_key_file);
    if (!loaded.ok()) {
      log::Error("master", {{"event", "task_ca_failed"}, {"error", loaded.status().message()}});
      return 2;
    }
    task_certificates = std::move(loaded).value();
  }
  if (config->insecure) {
    // Loudly: the operator accepted plaintext APIs on the network (or asked to).
    const bool exposed = !IsLoopback(config->bind_address) && (!config->tls_enabled() || config->disable_auth);
    for (int i = 0; i < (exposed ? 3 : 1); ++i) {
      log::Warn("master", {{"event", "INSECURE"},
                           {"bind", config->bind_address},
                           {"tls", config->tls_enabled() ? "on" : "off"},
                           {"why", exposed ? "--insecure: the REST and gRPC APIs go in plaintext on a non-loopback "
                                             "address; anyone who reaches these ports can act on the cluster"
                                           : "--insecure given, though not needed: the bind address is loopback "
                                             "or TLS is on"}});
    }
  }
  std::string join_token;
  if (!config->agent_join_token_file.empty()) {
    Result<std::string> token = ReadSecretFile(config->agent_join_token_file, "join token");
    if (!token.ok()) {
      log::Error("master", {{"event", "join_token_failed"}, {"error", token.status().message()}});
      return 1;
    }
    join_token = std::move(token).value();
  } else {
    log::Warn("master", {{"event", "agents_not_authenticated"},
                         {"why", "no agent_join_token_file: any process that reaches the gRPC port can join as an agent"}});
  }
  // Three pools (master/db/database.h): the coordinator's, ingestion's (metric writer, log
  // writer: one connection each) and the API reads' (bounded wait, then 503).
  auto ingest_db = Database::Open(config->db, 2, std::chrono::seconds(60));
  auto read_db = ingest_db.ok() ? Database::Open(config->db, config->db_read_pool_size, std::chrono::seconds(60))
                                : Result<std::unique_ptr<Database>>(ingest_db.status());
  if (!read_db.ok()) {
    log::Error("master", {{"event", "db_open_failed"}, {"error", read_db.status().message()}});
    return 1;
  }
  (*read_db)->SetAcquireTimeout(std::chrono::milliseconds(config->db_read_wait_ms));
  MasterMetrics metrics;
  for (Database* d : {db->get(), ingest_db->get(), read_db->get()}) {
    d->SetLatencyObserver([&](const std::string& what, double s) { metrics.ObserveQuery(what, s); });
  }
  Store store(db->get());
  Store read_store(read_db->get());
  // The agents' resource manager: every pool not configured to another manager. AgentLink's
  // connections end in it; the coordinator starts and stops it.
  rm::AgentManagerOptions agent_options;
  agent_options.reconnect_grace = std::chrono::seconds(config->agent_reconnect_grace_seconds);
  agent_options.default_scheduler = config->scheduler;
  agent_options.pool_schedulers = config->pool_schedulers;
  agent_options.min_run = std::chrono::seconds(config->min_run_seconds);
  agent_options.pass_observer = [&metrics](double seconds) { metrics.ObserveSchedulingPass(seconds); };
  rm::AgentManager agents(agent_options);
  ClusterOptions options;
  options.checkpoint_root = config->checkpoint_root;
  options.default_checkpoint_storage = config->checkpoint_storage;
  options.trial_link_address = config->advertised_address;
  options.preemption_grace = std::chrono::seconds(config->preemption_grace_seconds);
  options.unmanaged_timeout = std::chrono::seconds(config->unmanaged_timeout_seconds);
  options.default_manager = &agents;
  options.task_tokens = &*task_tokens;
  options.task_certificates = task_certificates.get();
  options.ingest_db = ingest_db->get();
  options.external_pools = external_pools;
  options.external_trial_link_address = external_addresses;
  Cluster cluster(&store, options);
  Status recovered = cluster.Recover();
  if (!recovered.ok()) {
    log::Error("master", {{"event", "recovery_failed"}, {"error", recovered.message()}});
    return 1;
  }
  cluster.Start();
  UtilizationStore utilization_store(db->get());
  UtilizationRecorder utilization(&utilization_store, [&cluster] { return cluster.Agents(); },
                                  {std::chrono::seconds(config->utilization_sample_seconds),
                                   std::chrono::hours(config->utilization_retention_hours)});
  utilization.Start();
  BookkeepingPruner bookkeeping(db->get(), std::chrono::hours(config->bookkeeping_retention_hours));
  bookkeeping.Start();
  ApiHandlers handlers(&read_store, &cluster,
                       MasterInfo{SF_VERSION, "master-" + std::to_string(getpid()), config->cluster_name});
  handlers.SetWriteDatabase(db->get());
  if (config->experiment_list_cache_ms > 0) {
    handlers.CacheExperimentPages(db->get(), std::chrono::milliseconds(config->experiment_list_cache_ms));
  }
  metrics.AddCountSource("steadfast_api_reads_total",
                         "API reads since the start, by outcome: busy (answered 503, no database connection in "
                         "time), list_cache_hit, list_cache_miss",
                         [&handlers, reads = read_db->get()] {
                           const SnapshotCacheStats pages = handlers.experiment_page_cache_stats();
                           return MasterMetrics::Counts{{"busy", reads->busy_refusals()},
                                                        {"list_cache_hit", pages.hits},
                                                        {"list_cache_miss", pages.misses}};
                         });
  AuditLog audit(db->get());  // REST and gRPC Api mutations are recorded here
  // Users and tokens (docs/security.md).
  Accounts accounts(db->get());
  Authorizer authorizer(&accounts, db->get());
  LoginLimiter login_limiter;
  AgentRevocations revocations(db->get());
  if (Status st = revocations.Load(); !st.ok()) {
    log::Error("master", {{"event", "revocations_failed"}, {"error", st.message()}});
    return 1;
  }
  // Webhooks (docs/webhooks.md): their own two connections, and one more that LISTENs for the
  // outbox trigger, so sending deliveries takes nothing from the coordinator.
  auto webhook_db = Database::Open(config->db, 2, std::chrono::seconds(60));
  if (!webhook_db.ok()) {
    log::Error("master", {{"event", "db_open_failed"}, {"error", webhook_db.status().message()}});
    return 1;
  }
  webhooks::WebhookOptions webhook_options;
  webhook_options.retry.max_attempts = config->webhook_max_attempts;
  webhook_options.retry.first = std::chrono::milliseconds(config->webhook_retry_first_ms);
  webhook_options.retry.cap = std::chrono::seconds(config->webhook_retry_max_seconds);
  webhook_options.timeout = std::chrono::seconds(config->webhook_timeout_seconds);
  webhook_options.ca_file = config->webhook_ca_file;
  webhook_options.senders = config->webhook_senders;
  webhook_options.keep_finished = std::chrono::hours(24 * config->webhook_keep_days);
  webhook_options.listen_connection = config->db;
  webhooks::Webhooks hooks(webhook_db->get(), webhook_options);
  hooks.Start();
  metrics.AddCountSource("steadfast_webhook_deliveries_total",
                         "Webhook delivery attempts since the start, by outcome: delivered, retry (failed, sent "
                         "again later), given_up (the last attempt failed); pruned: finished deliveries deleted",
                         [&hooks] {
                           const webhooks::DeliveryCounts n = hooks.Counts();
                           return MasterMetrics::Counts{{"delivered", n.delivered},
                                                        {"retry", n.attempts_failed},
                                                        {"given_up", n.given_up},
                                                        {"pruned", n.pruned}};
                         });
  if (config->disable_auth) {
    log::Warn("master", {{"event", "AUTH_DISABLED"},
                         {"why", "--disable-auth: every caller of the REST and gRPC APIs may do everything"}});
  } else {
    Result<std::string> admin_password = BootstrapAdmin(accounts, config->admin_password_file);
    if (!admin_password.ok()) {
      log::Error("master", {{"event", "admin_bootstrap_failed"}, {"error", admin_password.status().message()}});
      return 1;
    }
    if (!admin_password->empty()) {
      // Once, on the first start, to the terminal that started it (never into the structured log).
      std::fprintf(stderr,
                   "\nsf-master: created user \"admin\" with password %s\n"
                   "  Log in with `sf login --username admin` and change it: `sf user set-password admin`.\n"
                   "  It is not shown again.\n\n",
                   admin_password->c_str());
    }
  }
  ApiGrpcService api(&handlers, [&](const std::string& route, double s, int code) {
    metrics.ObserveRequest(route, s, code);
  });
  api.SetAuditLog(&audit);
  api.SetAuth(config->disable_auth ? nullptr : &accounts, &authorizer, &login_limiter);
  DeliveryLedger delivery_ledger(db->get());
  AgentLinkGrpcService agent_link(&agents, &cluster, &store, &delivery_ledger, join_token);
  agent_link.SetRevocations(&revocations);
  api.SetRevocations(&revocations);
  api.SetWebhooks(&hooks);
  TrialLinkGrpcService trial_link(&cluster, &*task_tokens);

  grpc::ServerBuilder builder;
  int grpc_port = 0;
  std::shared_ptr<grpc::ServerCredentials> grpc_credentials = grpc::InsecureServerCredentials();
  if (config->tls_enabled()) {
    // TLS only on this port: agents, trainers and Api clients verify the certificate with the
    // cluster's CA (docs/security.md); the master asks no client for one.
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({config->tls.private_key_pem, config->tls.cert_chain_pem});
    grpc_credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(config->bind_address + ":" + std::to_string(config->grpc_port), grpc_credentials,
                           &grpc_port);
  builder.RegisterService(&api);
  builder.RegisterService(&agent_link);
  builder.RegisterService(&trial_link);
  builder.SetMaxReceiveMessageSize(160 << 20);  // an experiment may carry a 96 MiB context
  // Dead peers (an agent or trainer cut off by the network) are found by HTTP/2 pings: every
  // 10 s, 5 s to answer, then the stream breaks and the agent counts as disconnected. Agents
  // and trainers ping us every 5 s (agent/master_link.cc); allow it without strikes.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 4000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // Sync handlers that wait (GetNextOperation's long poll, Rendezvous, AgentLink streams, API
  // calls) run dozens at once; keep that many threads instead of starting one per call (gRPC's
  // default keeps 2). ReportMetrics is a callback method and holds no thread while it waits.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 256);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || grpc_port == 0) {
    log::Error("master", {{"event", "grpc_listen_failed"}, {"port", std::to_string(config->grpc_port)}});
    return 1;
  }
  // Tasks' services through the master (/proxy/TASK_ID/...); destroyed after the HTTP server.
  TaskProxyOptions proxy_options;
  proxy_options.max_streams = config->http_max_streams;
  proxy_options.max_tunnels = config->proxy_max_tunnels;
  proxy_options.max_body_bytes = static_cast<size_t>(config->proxy_max_body_mib) << 20;
  proxy_options.tls = config->tls_enabled();
  proxy_options.error_response = JsonError;
  proxy_options.certificates = task_certificates.get();
  TaskProxy proxy(read_db->get(), &*task_tokens, proxy_options);
  HttpOptions http_options;
  http_options.proxy = &proxy;
  http_options.bind_address = config->bind_address;
  http_options.audit = &audit;
  http_options.accounts = config->disable_auth ? nullptr : &accounts;
  http_options.authorizer = &authorizer;
  http_options.login_limiter = &login_limiter;
  http_options.revocations = &revocations;
  http_options.webhooks = &hooks;
  http_options.metrics_public = !config->metrics_require_auth;
  http_options.port = config->http_port;
  http_options.webui_dir = FindWebUi(config->webui_dir);
  http_options.threads = config->http_threads;
  http_options.max_connections = config->http_max_connections;
  http_options.read_timeout = std::chrono::seconds(config->http_read_timeout_seconds);
  http_options.max_streams = config->http_max_streams;
  http_options.tls = config->tls;  // empty: plain HTTP
  http_options.secure_cookies = config->tls_enabled();
  HttpServer http(&handlers, &metrics, http_options);
  Status http_started = http.Start();
  if (!http_started.ok()) {
    log::Error("master", {{"event", "http_listen_failed"}, {"error", http_started.message()}});
    return 1;
  }
  log::Info("master", {{"event", "serving"}, {"grpc_port", std::to_string(grpc_port)},
                       {"http_port", std::to_string(http.port())}, {"tls", config->tls_enabled() ? "on" : "off"},
                       {"webui", http_options.webui_dir},
                       {"schema_version", std::to_string((*db)->SchemaVersion())}});
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  log::Info("master", {{"event", "stopping"}});
  http.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  utilization.Stop();
  bookkeeping.Stop();
  hooks.Stop();
  cluster.Stop();
  return 0;
}
