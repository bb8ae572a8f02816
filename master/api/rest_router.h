// The REST side of the master's HTTP server without its transport (http_server.h has sockets,
// TLS, limits and threads): for one parsed request, who is calling and may they
// (Gate: the access policy, master/auth/access_policy.h), then what the answer is (Route: the
// Api methods through the route table and method table, docs/api.md; /health; /metrics; the
// API description; the dashboard's files), and the server-sent events of a log follow.
//
// Contract: Gate and Route never throw for anything a client sends and never block on the
// network; FollowLogs blocks (its caller gives it a thread). Thread-safe: every member is
// read-only after construction, and the dependencies are thread-safe.
#pragma once

#include <boost/beast/http.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/api/route_table.h"
#include "master/api/api_handlers.h"
#include "master/api/api_methods.h"
#include "master/api/http_server.h"
#include "master/api/master_metrics.h"
#include "master/api/routes/rest_query.h"
#include "master/auth/access_policy.h"

namespace sf::master {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

// The API's error body: {"code": <grpc code>, "message": "...", "errors": []}.
std::string ErrorBody(const Status& s);
// A JSON answer (no-store), and the error body as one with an explicit HTTP status (the proxy's
// 502 and 504, master/proxy/task_proxy.h).
HttpResponse JsonResponse(int status, std::string body, const HttpRequest& req);
HttpResponse JsonError(int http_status, const Status& s, const HttpRequest& req);

class RestRouter {
 public:
  // `options` must outlive the router.
  RestRouter(ApiHandlers* handlers, MasterMetrics* metrics, const HttpOptions& options);

  // A JSON answer (no-store); `body` is moved in.
  HttpResponse Json(int status, std::string body, const HttpRequest& req) const;
  // The error body with the HTTP status for `s`'s code.
  HttpResponse Error(const Status& s, const HttpRequest& req) const;

  // Holds `req` to the access policy before it runs: finds its rule, authenticates the caller
  // and checks what the rule needs. True when the request may go on to Route (with `p` the
  // caller, and `match` its rule when it has one); false with `res` (and `route`, the metrics
  // label) filled otherwise.
  bool Gate(const HttpRequest& req, const std::string& peer, HttpResponse& res, std::string& route, Principal& p,
            std::optional<RestMatch>& match);
  // The same for a request to a task's service through the proxy (master/proxy/task_proxy.h):
  // the caller must be authenticated and may "open" task `task_id` (Need::kTask). A session
  // cookie's mutations need no X-Requested-With here (a notebook's own requests cannot send it);
  // the cookie's SameSite=Strict keeps cross-site requests out.
  bool GateProxy(const HttpRequest& req, const std::string& peer, int64_t task_id, HttpResponse& res,
                 Principal& p);
  // Fills `res`, or `follow_out` for a log follow (the caller streams it with FollowLogs). `p`
  // and `match`: the caller and the policy rule, as Gate let it through.
  // An Api method's request, once decoded, goes to `decoded` (for the audit record).
  void Route(const HttpRequest& req, HttpResponse& res, std::string& route,
             std::optional<steadfast::v1::GetTrialLogsRequest>& follow_out, const Principal& p,
             const std::optional<RestMatch>& match, const std::string& peer,
             std::unique_ptr<google::protobuf::Message>& decoded);
  // Server-sent events: a trial's log lines as they arrive, until the trial ends, `send` fails
  // (the client went away or stopped reading) or `stopping` is set.
  void FollowLogs(const std::function<bool(const std::string&)>& send, unsigned version,
                  steadfast::v1::GetTrialLogsRequest r, const std::atomic<bool>& stopping);

 private:
  HttpResponse Static(const HttpRequest& req, const std::string& target_path);
  void ServeApi(const ApiRoute& api, const RestMatch& match, const Query& q, const HttpRequest& req,
                HttpResponse& res, std::string& route, std::optional<steadfast::v1::GetTrialLogsRequest>& follow_out,
                const Principal& p, std::unique_ptr<google::protobuf::Message>& decoded);
  std::string SessionCookie(const std::string& token, int64_t max_age) const;
  // The caller by the Authorization header or the session cookie (docs/security.md), with the
  // cross-site rule for a cookie's mutations when `cookie_mutations_need_header`.
  Status Authenticate(const HttpRequest& req, const std::string& peer, bool cookie_mutations_need_header,
                      Principal& p) const;
  // The caller of a master without accounts (--disable-auth): whoever X-SF-User names, as an
  // admin. True.
  static bool Unchecked(const HttpRequest& req, const std::string& peer, Principal& p);
  // An access refusal (401 with WWW-Authenticate, 403).
  HttpResponse Refusal(const Status& st, const HttpRequest& req) const;

  ApiHandlers* handlers_;
  MasterMetrics* metrics_;
  const HttpOptions& options_;
  std::unique_ptr<ApiMethods> methods_;  // what the Api routes run
};

}  // namespace sf::master
