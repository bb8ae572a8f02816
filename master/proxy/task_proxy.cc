#include "master/proxy/task_proxy.h"

#include <algorithm>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstdio>
#include <set>
#include <thread>
#include <utility>

#include "common/http/client.h"
#include "common/log.h"
#include "master/auth/session_cookie.h"

namespace sf::master {
namespace bhttp = boost::beast::http;

namespace {

// Headers that belong to one connection, not to the message (RFC 9110 7.6.1), and Host: the
// proxy's own connections set them.
bool HopByHop(bhttp::field f, std::string_view name) {
  switch (f) {
    case bhttp::field::connection:
    case bhttp::field::keep_alive:
    case bhttp::field::proxy_authenticate:
    case bhttp::field::proxy_authorization:
    case bhttp::field::proxy_connection:
    case bhttp::field::te:
    case bhttp::field::trailer:
    case bhttp::field::transfer_encoding:
    case bhttp::field::upgrade:
    case bhttp::field::host:
      return true;
    default:
      return name.size() >= 6 &&
             boost::beast::iequals(boost::beast::string_view(name.data(), 6), "proxy-");
  }
}

bool Lower(char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; }

// Whether `path` holds an encoded '/', '\' or '.' ("%2f", "%5c", "%2e", any case).
bool HasEncodedSeparator(std::string_view path) {
  for (size_t i = 0; i + 2 < path.size(); ++i) {
    if (path[i] != '%') continue;
    const char a = path[i + 1], b = path[i + 2];
    if ((a == '2' && (Lower(b, 'f') || Lower(b, 'e'))) || (a == '5' && Lower(b, 'c'))) return true;
  }
  return false;
}

// "http://host:port/base/" -> ("http://host:port", "/base"); the base has no trailing '/'.
std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (slash == std::string::npos) return {url, ""};
  std::string base = url.substr(slash);
  while (!base.empty() && base.back() == '/') base.pop_back();
  return {url.substr(0, slash), base};
}

// Whether the client's header announces a body (chunked, or a Content-Length above 0).
bool HasBody(const http::Request& req) {
  if (req.chunked()) return true;
  auto length = req.find(bhttp::field::content_length);
  if (length == req.end()) return false;
  const std::string_view digits(length->value().data(), length->value().size());
  return digits.find_first_not_of('0') != std::string_view::npos;
}

// Whether the answer's body is chunked (its last transfer coding).
bool Chunked(const http::ResponseHeader& h) {
  auto te = h.find(bhttp::field::transfer_encoding);
  if (te == h.end()) return false;
  boost::beast::string_view last;
  for (auto coding : bhttp::token_list{te->value()}) last = coding;
  return boost::beast::iequals(last, "chunked");
}

}  // namespace

TaskProxy::TaskProxy(Database* db, const TaskTokens* tokens, TaskProxyOptions options)
    : db_(db), tokens_(tokens), options_(std::move(options)) {
  watchdog_ = std::thread([this] { CheckTunnels(); });
}

TaskProxy::~TaskProxy() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;  // upstream calls end within about 100 ms (ClientOptions::cancel)
  wake_.notify_all();
  for (const auto& [pipe, task] : tunnels_) pipe->Close();  // a tunnel waits on neither
  lock.unlock();
  watchdog_.join();
  lock.lock();
  idle_.wait(lock, [&] { return in_flight_ == 0; });
}

void TaskProxy::CheckTunnels() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, options_.tunnel_check_interval, [&] { return stopping_.load(); })) {
    std::set<int64_t> tasks;
    for (const auto& [pipe, task] : tunnels_) tasks.insert(task);
    lock.unlock();
    std::map<int64_t, Status> ended;
    for (int64_t task : tasks) {
      Result<Endpoint> endpoint = EndpointOf(task);
      const StatusCode code = endpoint.status().code();
      if (code == StatusCode::kNotFound || code == StatusCode::kUnavailable)
        ended.emplace(task, endpoint.status());
    }
    lock.lock();
    for (const auto& [pipe, task] : tunnels_) {
      auto why = ended.find(task);
      if (why == ended.end()) continue;
      log::Info("proxy", {{"event", "tunnel_closed"},
                          {"task", std::to_string(task)},
                          {"reason", why->second.message()}});
      pipe->Close();
    }
  }
}

bool TaskProxy::Matches(std::string_view target) { return target.rfind(kPrefix, 0) == 0; }

Result<ProxyTarget> TaskProxy::Parse(std::string_view target) {
  ProxyTarget t;
  const size_t q = target.find('?');
  if (q != std::string_view::npos) t.query = std::string(target.substr(q + 1));
  std::string_view path = target.substr(0, q);
  if (!Matches(path)) return NotFound("not a proxy path");
  path.remove_prefix(std::char_traits<char>::length(kPrefix));
  const size_t slash = path.find('/');
  const std::string_view id = path.substr(0, slash);
  if (id.empty() || id.size() > 18 ||
      !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return NotFound("no task service at /proxy/" + std::string(id.substr(0, 32)) +
                    "/: the path after /proxy/ must start with a task id");
  }
  t.task_id = std::stoll(std::string(id));
  if (slash != std::string_view::npos) t.rest = std::string(path.substr(slash));
  if (t.rest.find('\\') != std::string::npos || HasEncodedSeparator(t.rest)) {
    return InvalidArgument(
        "the path of a proxied request must not hold a backslash or an encoded '/', '\\' or '.'");
  }
  for (size_t i = 0; i < t.rest.size();) {
    size_t end = t.rest.find('/', i + 1);
    if (end == std::string::npos) end = t.rest.size();
    const std::string_view seg = std::string_view(t.rest).substr(i + 1, end - i - 1);
    if (seg == "." || seg == "..") {
      return InvalidArgument(
          "the path of a proxied request must not hold a \".\" or \"..\" segment");
    }
    i = end;
  }
  return t;
}

int TaskProxy::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

Result<TaskProxy::Endpoint> TaskProxy::EndpointOf(int64_t task_id) {
  Endpoint e;
  bool found = false;
  std::string state, url, url_allocation, allocation, allocation_state;
  SF_RETURN_IF_ERROR(db_->Transact("proxy endpoint", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT t.kind, t.state, COALESCE(t.url, ''), COALESCE(t.url_allocation, ''), a.id, "
        "a.state "
        "FROM tasks t LEFT JOIN LATERAL (SELECT id, state FROM allocations WHERE task_id = t.id "
        "  ORDER BY start_time DESC, id DESC LIMIT 1) a ON true WHERE t.id = $1",
        task_id);
    if (r.empty()) return Status::Ok();
    found = true;
    e.kind = r[0][0].as<std::string>();
    state = r[0][1].as<std::string>();
    url = r[0][2].as<std::string>();
    url_allocation = r[0][3].as<std::string>();
    if (!r[0][4].is_null()) {
      allocation = r[0][4].as<std::string>();
      allocation_state = r[0][5].as<std::string>();
    }
    return Status::Ok();
  }));
  const std::string task = "task " + std::to_string(task_id);
  if (!found) return NotFound(task + " does not exist");
  if (state != "RUNNING" || allocation.empty() || allocation_state == "TERMINATED") {
    return Unavailable(task + " has no service to reach: it is " + state);
  }
  if (url.empty() || url_allocation != allocation) {
    return Unavailable(task +
                       " has no service to reach yet: it runs, but has not reported its URL");
  }
  e.url = url;
  return e;
}

void TaskProxy::Forward(http::Request req, ProxyTarget target,
                        std::shared_ptr<http::Exchange> exchange) {
  const bool upgrade = req.find(bhttp::field::upgrade) != req.end();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool full = upgrade ? tunnels_in_flight_ >= options_.max_tunnels
                              : in_flight_ - tunnels_in_flight_ >= options_.max_streams;
    if (full) {
      const std::string what = upgrade ? "proxied WebSocket sessions open (" + std::to_string(options_.max_tunnels)
                                       : "proxied requests in flight (" + std::to_string(options_.max_streams);
      http::Response res = options_.error_response(503, Unavailable("too many " + what + ")"), req);
      res.set(bhttp::field::retry_after, "1");
      return exchange->Reply(std::move(res), true);
    }
    ++in_flight_;
    if (upgrade) ++tunnels_in_flight_;
  }
  std::thread([this, upgrade, req = std::move(req), target = std::move(target),
               exchange = std::move(exchange)]() mutable {
    try {
      Result<Endpoint> endpoint = EndpointOf(target.task_id);
      if (!endpoint.ok()) {
        const int status = endpoint.status().code() == StatusCode::kNotFound ? 404 : 503;
        exchange->Reply(options_.error_response(status, endpoint.status(), req), true);
      } else {
        Relay(req, target, *endpoint, exchange);
      }
    } catch (const std::exception& e) {
      log::Error(
          "proxy",
          {{"event", "failed"}, {"task", std::to_string(target.task_id)}, {"error", e.what()}});
    }
    exchange.reset();
    std::lock_guard<std::mutex> lock(mu_);  // last: the destructor may run right after
    --in_flight_;
    if (upgrade) --tunnels_in_flight_;
    idle_.notify_all();
  }).detach();
}

void TaskProxy::Relay(http::Request& req, const ProxyTarget& target, const Endpoint& endpoint,
                      const std::shared_ptr<http::Exchange>& exchange) {
  const std::string task = "task " + std::to_string(target.task_id);
  const bool upgrade = req.find(bhttp::field::upgrade) != req.end();
  const auto [base_url, base_path] = SplitUrl(endpoint.url);
  Result<http::Url> url = http::Url::Parse(base_url, task + "'s URL");
  if (!url.ok()) return exchange->Reply(options_.error_response(502, url.status(), req), true);

  // The request as the task's service gets it: its own path, the client's headers without the
  // connection's and without the client's master credentials.
  http::Request up{req.method(), base_path + (target.rest.empty() ? "/" : target.rest), 11};
  if (!target.query.empty()) up.target(std::string(up.target()) + "?" + target.query);
  for (const auto& field : req) {
    const std::string_view name(field.name_string().data(), field.name_string().size());
    // Expect: the master's side answers "100 Continue" itself, when the body is first asked for.
    if (HopByHop(field.name(), name) || field.name() == bhttp::field::authorization ||
        field.name() == bhttp::field::expect)
      continue;
    if (field.name() == bhttp::field::cookie) {
      const std::string rest =
          WithoutSessionCookie(std::string_view(field.value().data(), field.value().size()));
      if (!rest.empty()) up.insert(bhttp::field::cookie, rest);
      continue;
    }
    up.insert(field.name_string(), field.value());
  }
  up.set("X-Forwarded-For", exchange->peer());
  up.set("X-Forwarded-Proto", options_.tls ? "https" : "http");
  if (auto host = req.find(bhttp::field::host); host != req.end())
    up.set("X-Forwarded-Host", host->value());
  up.set("X-Forwarded-Prefix", std::string(kPrefix) + std::to_string(target.task_id));
  if (upgrade)
    up.set(bhttp::field::upgrade, req[bhttp::field::upgrade]);  // the client sets Connection
  if (tokens_ && (endpoint.kind == "SERVER" || endpoint.kind == "SHELL")) {
    up.set(bhttp::field::authorization, "Bearer " + tokens_->IssueServing(target.task_id));
  } else if (tokens_ && endpoint.kind == "NOTEBOOK") {  // Jupyter's own token header
    up.set(bhttp::field::authorization, "token " + tokens_->IssueServing(target.task_id));
  }
  // The body: streamed from the client as the service takes it (the master's HTTP layer hands
  // /proxy/ requests over at their header), or as it came when the handler read it whole.
  const bool streamed_body = req.body().empty() && HasBody(req);
  up.body() = std::move(req.body());  // not needed again: an error answer reads only the version
  bool body_failed = false;
  const http::BodySource body = [&](std::string* piece) -> Result<bool> {
    switch (exchange->ReadBody(piece)) {
      case http::Exchange::BodyRead::kPiece: return true;
      case http::Exchange::BodyRead::kEnd: return false;
      case http::Exchange::BodyRead::kFailed: break;
    }
    body_failed = true;
    return Unavailable("the client's request body did not arrive whole");
  };

  http::ClientOptions o;
  if (options_.certificates) {
    if (!url->https) {
      return exchange->Reply(
          options_.error_response(502,
                                  Unavailable(task + "'s service at " + base_url +
                                              " is plain HTTP, and this master reaches tasks over TLS only "
                                              "(task_ca_cert_file): it did not get its certificate"),
                                  req),
          true);
    }
    o.peer = http::PeerIdentity{options_.certificates->ca_pem(), TaskIdentityUri(target.task_id)};
    o.client_certificate = options_.certificates->master_client();
  }
  o.timeout = options_.upstream_timeout;
  o.cancel = &stopping_;
  o.cancel_reason = "the master is stopping";
  o.ca_file = options_.ca_file;
  o.whose_certificate = task + "'s certificate";
  http::Client client(*url, o);
  bool answered = false;
  // Whether the client's connection outlives this answer: when the client keeps it (HTTP/1.1)
  // and the answer frames its own end — the service's Content-Length, its chunked body (chunked
  // again here: the client reads the pieces decoded), or no body. A browser loading a page
  // through the proxy then reuses a few connections instead of opening (over TLS: handshaking)
  // one per file. An answer delimited by the service's close is passed on with Connection: close.
  const bool client_keeps = !upgrade && req.version() == 11 && req.keep_alive();
  bool keep = false, rechunk = false;
  auto on_header = [&](const http::ResponseHeader& h) {
    const bool switching = upgrade && h.result_int() == 101;
    const int code = h.result_int();
    const bool no_body = req.method() == bhttp::verb::head || code / 100 == 1 || code == 204 || code == 304;
    rechunk = client_keeps && !no_body && Chunked(h);
    keep = client_keeps && (no_body || rechunk || h.find(bhttp::field::content_length) != h.end());
    std::string head =
        "HTTP/1.1 " + std::to_string(h.result_int()) + " " + std::string(h.reason()) + "\r\n";
    for (const auto& field : h) {
      const std::string_view name(field.name_string().data(), field.name_string().size());
      if (HopByHop(field.name(), name)) continue;
      head += std::string(name) + ": " + std::string(field.value()) + "\r\n";
    }
    if (switching) {
      head +=
          "Upgrade: " + std::string(h[bhttp::field::upgrade]) + "\r\nConnection: Upgrade\r\n\r\n";
      exchange->OpenTunnel();
    } else {
      head += rechunk ? "Transfer-Encoding: chunked\r\n\r\n" : keep ? "\r\n" : "Connection: close\r\n\r\n";
      exchange->OpenStream();
    }
    answered = true;
    return exchange->Write(head);
  };
  auto on_bytes = [&](const std::string& bytes) {
    if (stopping_) return false;
    if (!rechunk) return exchange->Write(bytes);
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
    return exchange->Write(size + bytes + "\r\n");
  };
  Result<http::ClientResponse> r =
      upgrade ? client.Upgrade(std::move(up), on_header, on_bytes,
                               [&](http::Pipe& pipe) { Tunnel(target.task_id, pipe, exchange); })
              : streamed_body ? client.Relay(std::move(up), body, on_header, on_bytes)
                              : client.Relay(std::move(up), on_header, on_bytes);
  if (answered) {
    // An answer cut short (the service closed mid-body, the client stopped taking it) ends the
    // connection, so the client sees it incomplete; a whole one leaves it for the next request.
    if (keep && r.ok() && r->complete && !stopping_ && (!rechunk || exchange->Write("0\r\n\r\n")))
      return exchange->FinishStream();
    return exchange->CloseStream();
  }
  if (body_failed) {  // the client's fault or its leaving: the server answered it, or no one is left to
    log::Info("proxy", {{"event", "request_body_incomplete"}, {"task", std::to_string(target.task_id)}});
    return;
  }
  const Status why = r.ok() ? Unavailable("no answer") : r.status();
  log::Warn("proxy", {{"event", "upstream_failed"},
                      {"task", std::to_string(target.task_id)},
                      {"error", why.message()}});
  const int status = client.failure() == http::Failure::kTimedOut ? 504 : 502;
  exchange->Reply(options_.error_response(status,
                                          Unavailable(task + "'s service at " + base_url +
                                                      " did not answer: " + why.message()),
                                          req),
                  true);
}

void TaskProxy::Tunnel(int64_t task_id, http::Pipe& pipe,
                       const std::shared_ptr<http::Exchange>& exchange) {
  // The client's bytes to the service on a thread of their own, the service's to the client
  // here. Whichever side ends first ends the other: the service's close ends the client's
  // connection (CloseStream, which also ends a ReadSome waiting on the client), the client's
  // close ends the service's (Close, which also ends a ReadSome waiting on the service); so
  // does the watchdog's Close when the task stopped serving, and the proxy's stop.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    tunnels_.emplace(&pipe, task_id);
  }
  struct Registered {
    TaskProxy* proxy;
    http::Pipe* pipe;
    ~Registered() {
      std::lock_guard<std::mutex> lock(proxy->mu_);
      proxy->tunnels_.erase(pipe);
    }
  } registered{this, &pipe};
  std::thread upstream([&pipe, exchange] {
    for (std::string bytes; exchange->ReadSome(&bytes) && pipe.Write(bytes);) {
    }
    pipe.Close();
  });
  for (std::string bytes; !stopping_ && pipe.ReadSome(&bytes) && exchange->Write(bytes);) {
  }
  exchange->CloseStream();
  pipe.Close();
  upstream.join();
}

}  // namespace sf::master
