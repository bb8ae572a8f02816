// sf-master's own configuration: a YAML file (--config), then environment variables, then
// flags, each overriding the one before. Unknown keys and bad values are errors naming the key.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tls_files.h"
#include "master/rm/pool_config.h"
#include "master/scheduler/scheduler.h"

namespace sf::master {

struct MasterConfig {
  // Pools with a resource manager of their own (master/rm/pool_config.h): config file only.
  std::vector<rm::PoolConfig> resource_pools;
  std::string db = "host=127.0.0.1 port=5432 user=postgres dbname=steadfast";  // libpq string
  int db_pool_size = 8;  // the coordinator's and accounts' connections (every write but ingestion)
  // The API's reads have their own connections (master/db/database.h); a read that finds none
  // free within db_read_wait_ms is answered 503 with Retry-After.
  int db_read_pool_size = 4;
  int db_read_wait_ms = 250;
  // How long a page of the experiment list may be served from memory while nothing was written
  // (master/db/snapshot_cache.h); 0: every request reads PostgreSQL.
  int experiment_list_cache_ms = 1000;
  std::string bind_address = "127.0.0.1";  // loopback unless told otherwise (docs/security.md)
  // Listen on a non-loopback address although the APIs are not protected (TLS off).
  bool insecure = false;
  // TLS on REST and gRPC (docs/security.md): the server's PEM certificate chain and private key.
  // Both or neither; when given, the master serves HTTPS only and gRPC over TLS only.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Read from tls_cert_file and tls_key_file by LoadMasterConfig, which checks that the key
  // matches the certificate; empty when TLS is off. Never logged.
  ServerCertificate tls;
  bool tls_enabled() const { return !tls_cert_file.empty(); }
  // The cluster's CA (its PEM certificate and unencrypted key), from which the master issues each
  // task that serves something a certificate, and itself the client certificate its proxy shows
  // them (master/auth/task_certificates.h; docs/security.md, "The hop to tasks"). Both or
  // neither; without them tasks serve plain HTTP to the proxy.
  std::string task_ca_cert_file;
  std::string task_ca_key_file;
  int grpc_port = 8090;
  int http_port = 8080;
  std::string advertised_address;  // what trainers dial for TrialLink; default 127.0.0.1:<grpc_port>
  std::string checkpoint_root = "/var/lib/steadfast/checkpoints";
  // The checkpoint_storage section given to experiments whose config has none, as flow YAML
  // (`{type: s3, bucket: b, endpoint_url: 'http://...'}`); empty: shared_fs under checkpoint_root.
  std::string checkpoint_storage;
  std::string webui_dir;           // built dashboard assets; default: <prefix>/share/steadfast/webui or webui/dist
  std::string log_level = "info";
  std::string cluster_name = "steadfast";
  int agent_reconnect_grace_seconds = 30;
  // A file holding the cluster's agent join token (docs/security.md); empty: agents are not
  // authenticated. The token itself never goes on a command line or into a log.
  std::string agent_join_token_file;
  // Users and tokens (docs/security.md): every API call is authenticated unless disable_auth
  // (loopback only). On the first start the admin's password is read from
  // admin_password_file (which is then deleted), else made up and printed once.
  bool disable_auth = false;
  std::string admin_password_file;
  bool metrics_require_auth = false;  // /metrics with a token too (Prometheus bearer_token_file)
  int utilization_sample_seconds = 10;    // how often the utilisation history is sampled
  int utilization_retention_hours = 168;  // rows older than this are deleted
  // Ended tasks' delivery records and finished trials' older allocation rows older than this are
  // deleted (master/housekeeping/bookkeeping_retention.h).
  int bookkeeping_retention_hours = 168;
  // The HTTP server (master/api/http_server.h).
  int http_threads = 0;                // worker threads; 0: max(4, 2 x hardware threads)
  int http_max_connections = 512;      // open connections; beyond: 503 with Retry-After
  int http_read_timeout_seconds = 30;  // a request must arrive, a response be taken, within this
  int http_max_streams = 64;           // concurrent log follows (SSE), one thread each
  int proxy_max_tunnels = 256;         // WebSocket sessions through /proxy/ at once (master/proxy)
  int proxy_max_body_mib = 1024;       // a request body through /proxy/ (streamed, not held)
  // Scheduling (docs/scheduling.md): the mode of every pool not named in pool_schedulers, the
  // per-pool modes, how long a preempted trial may take to checkpoint and stop before it is
  // killed, and how long a trial runs before it may be preempted.
  SchedulingMode scheduler = SchedulingMode::kPriority;
  std::map<std::string, SchedulingMode> pool_schedulers;
  int preemption_grace_seconds = 300;
  int min_run_seconds = 60;
  // An unmanaged trial (docs/core-api.md) whose script has made no TrialLink call for this long
  // ends in ERROR: its process died without ending it.
  int unmanaged_timeout_seconds = 300;
  // Webhooks (docs/webhooks.md, master/webhooks/webhooks.h): attempts per delivery before it is
  // given up, the first retry's delay (doubling up to webhook_retry_max_seconds), one attempt's
  // timeout, the CA certificates https:// receivers are verified by (empty: the system's), and
  // how many deliveries are in flight at once.
  int webhook_max_attempts = 8;
  int webhook_retry_first_ms = 1000;
  int webhook_retry_max_seconds = 600;
  int webhook_timeout_seconds = 10;
  std::string webhook_ca_file;
  int webhook_senders = 4;
  int webhook_keep_days = 30;  // finished deliveries older than this are deleted (0: kept)
};

// Parses argv (without argv[0]) and the environment (SF_DB, SF_GRPC_PORT, SF_HTTP_PORT,
// SF_CHECKPOINT_ROOT, SF_LOG_LEVEL, SF_WEBUI_DIR) with CLI11: one flag per setting
// (--grpc-port for grpc_port, ...). `--help`/`-h` and `--version` yield kCancelled with the text
// to print (exit 0); bad flags and values are InvalidArgument naming the flag. With
// tls_cert_file/tls_key_file it reads both files (errors name the file: unreadable, not PEM, a
// key that does not match the certificate). A non-loopback `bind` is refused unless TLS is on
// or --insecure is given.
Result<MasterConfig> LoadMasterConfig(const std::vector<std::string>& args);
// 127.0.0.0/8, ::1 or "localhost".
bool IsLoopback(const std::string& address);
std::string MasterUsage();

}  // namespace sf::master
