// The master's proxy to the services tasks run (docs/tasks.md, "The proxy"): a request to
// /proxy/TASK_ID/REST on the master's HTTP port goes to the URL the task reported
// (TrialLink ReportEndpoint: a scheduled sf-serve today, notebooks next), and the answer comes
// back through the master. The client needs nothing but its master credentials, and a task's
// service is reachable wherever the master is.
//
// Contract:
// - Parse(target): "/proxy/<id>" or "/proxy/<id>/<rest>[?query]" with <id> a task id (1-18
//   digits); anything else under /proxy/ is kNotFound. The path after the id is forwarded as
//   written (percent-encoding kept); a "." or ".." segment, a backslash, or an encoded "/", "\"
//   or "." anywhere in it is kInvalidArgument: a forwarded path never climbs above the task's
//   own URL.
// - Access is the HTTP layer's (master/api/rest_router.h, GateProxy): the master's own
//   authentication, then the task access rule of the policy (owner, the editors and admins of
//   its workspace, cluster admins; a viewer may not open a task's service). Forward() is called
//   only for requests that passed it.
// - Endpoint: the task's reported URL while the allocation that reported it is the task's
//   newest and still runs; otherwise the client gets 503 naming the task and its state (404 for
//   an id that names no task).
// - Forwarding: one upstream connection per request (common/http/client.h, Relay), the request
//   line's target = the endpoint's path + <rest> + query; the client's headers are kept except
//   the hop-by-hop ones (Connection, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding,
//   Upgrade), Host, and the client's master credentials (Authorization and the session
//   cookie), which never reach a task. X-Forwarded-For/-Proto/-Host and X-Forwarded-Prefix
//   (/proxy/<id>) are added. A server's requests carry the server's own bearer token
//   (TaskTokens::IssueServing), a shell's too, a notebook's the same secret as its Jupyter token
//   (`Authorization: token ...`), so the proxy is a client the service accepts and the user
//   never sees or types that secret.
// - The request's body streams to the service as the client sends it, when the HTTP layer hands
//   the request over at its header (http::Handler::StreamsBody, as the master's does): it is
//   pulled piece by piece (Exchange::ReadBody) only as fast as the service takes it, with the
//   client's Content-Length, else chunked; no more than `max_body_bytes` (413). A body that does
//   not arrive whole (the client left, stalled past the read timeout, or sent too much) never
//   reaches the service as complete: the upstream connection closes mid-body. A client's
//   `Expect: 100-continue` is answered by the master's side.
// - The answer streams back as it arrives (status line and headers first, the body in pieces;
//   no whole-body buffering), with the upstream's hop-by-hop headers dropped. The client's
//   connection stays open for its next request (Exchange::FinishStream) when the client keeps it
//   (HTTP/1.1) and the answer frames its own end: the service's Content-Length, its chunked body
//   (chunked again by the proxy), or no body (HEAD, 1xx, 204, 304); an answer the service ends by
//   closing goes out with `Connection: close`, and one cut short (the service closed mid-body)
//   ends the client's connection, so the client sees it incomplete. A browser loading a page of
//   many files through the proxy so reuses a few connections instead of handshaking one per file
//   (a notebook's page in Chromium: 8-50 TLS connections instead of 140-200).
// - A protocol switch (a WebSocket: a notebook's kernels, a shell's terminal) is forwarded with
//   its Upgrade header; when the service answers 101, the client's connection and the service's
//   become one tunnel of raw bytes both ways (common/http: Exchange::OpenTunnel,
//   Client::Upgrade) until either side closes, with no idle timeout; over http:// or https://.
// - The hop: with `certificates` (the cluster CA), only to https:// services that prove the
//   task's identity, the master presenting its own client certificate (mutual TLS); a plain
//   service or one proving another identity gets 502 naming why.
// - A tunnel lives no longer than its task's service: every `tunnel_check_interval` the proxy
//   reads the endpoint of each task with an open tunnel, and closes the tunnels of a task that
//   no longer serves (stopped, failed, queued again after its agent was lost, or restarted
//   elsewhere), so a host that died without closing its connections holds no thread and no
//   client for longer than the master takes to notice (its agent's reconnect grace). A failed
//   read (the database) closes nothing. The client's connection ends; it may ask GetTask why.
//   Stopping the proxy closes every tunnel.
// - Limits: at most `max_streams` requests in flight and `max_tunnels` protocol switches open (a
//   tunnel lasts as long as its session: a notebook's kernel, a terminal), each counted apart,
//   one thread each (a tunnel two, three over TLS); one more gets 503 with Retry-After; the upstream must connect and answer with its header within
//   `upstream_timeout` (else 504); each piece written to the client must be taken within the
//   server's read_timeout (else the upstream connection is dropped). A slow or dead task holds
//   only its own request's thread, never an API worker.
// - Errors the proxy makes are JSON ({"code", "message"}) like every other error of the master,
//   and name the task: "task 7's service at http://10.0.0.5:41234 did not answer: connect:
//   Connection refused" (502).
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/http/client.h"
#include "common/http/server.h"
#include "common/status.h"
#include "master/auth/task_certificates.h"
#include "master/auth/task_tokens.h"
#include "master/db/database.h"

namespace sf::master {

struct TaskProxyOptions {
  int max_streams = 64;    // requests in flight, protocol switches apart
  int max_tunnels = 256;   // protocol switches (WebSockets) open at once
  // A request body's limit (413 beyond it); streamed, so nothing near it is held in memory.
  size_t max_body_bytes = size_t{1} << 30;
  std::chrono::milliseconds upstream_timeout{30000};
  std::chrono::milliseconds tunnel_check_interval{5000};
  bool tls = false;  // the master's own HTTP side speaks TLS (X-Forwarded-Proto)
  std::string
      ca_file;  // an https:// service's certificate is verified by it; empty: the system's CAs
  // The cluster CA (master/auth/task_certificates.h): with it, a task's service is reached over
  // TLS only, the master showing its client certificate and the service proving it is that
  // task (its certificate names the task's id); a service on plain http:// gets nothing (502).
  // None: as the task reported it, an https:// one verified by ca_file and its host name.
  const TaskCertificates* certificates = nullptr;
  // The master's error answer (its JSON error body) with this HTTP status; required.
  std::function<http::Response(int http_status, const Status& st, const http::Request& req)>
      error_response;
};

// A request's target under /proxy/, parsed.
struct ProxyTarget {
  int64_t task_id = 0;
  std::string rest;   // the path after /proxy/<id>, "" or starting with "/"
  std::string query;  // without "?"; "" when none
};

class TaskProxy {
 public:
  static constexpr const char* kPrefix = "/proxy/";

  // `db` and `tokens` outlive the proxy; `tokens` may be null (no server token is added).
  TaskProxy(Database* db, const TaskTokens* tokens, TaskProxyOptions options);
  ~TaskProxy();  // waits for requests in flight
  TaskProxy(const TaskProxy&) = delete;
  TaskProxy& operator=(const TaskProxy&) = delete;

  static bool Matches(std::string_view target);
  static Result<ProxyTarget> Parse(std::string_view target);

  // Forwards `req` (allowed already) and answers through `exchange`, from a thread of its own.
  void Forward(http::Request req, ProxyTarget target, std::shared_ptr<http::Exchange> exchange);

  // Requests in flight now.
  int in_flight() const;
  size_t max_body_bytes() const { return options_.max_body_bytes; }

 private:
  struct Endpoint {
    std::string url;   // as reported
    std::string kind;  // SERVER, COMMAND, ...
  };
  Result<Endpoint> EndpointOf(int64_t task_id);
  // Moves `req`'s body into the upstream request.
  void Relay(http::Request& req, const ProxyTarget& target, const Endpoint& endpoint,
             const std::shared_ptr<http::Exchange>& exchange);
  void Tunnel(int64_t task_id, http::Pipe& pipe, const std::shared_ptr<http::Exchange>& exchange);
  // The watchdog's loop: closes the tunnels of tasks that no longer serve (above).
  void CheckTunnels();

  Database* db_;
  const TaskTokens* tokens_;
  TaskProxyOptions options_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::condition_variable idle_;
  int in_flight_ = 0;  // every request, tunnels included
  int tunnels_in_flight_ = 0;
  std::map<http::Pipe*, int64_t> tunnels_;  // open tunnels, by their upstream side; task ids
  std::condition_variable wake_;            // the watchdog's: stopping
  std::thread watchdog_;
};

}  // namespace sf::master
