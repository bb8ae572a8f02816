#include "master/api/rest_router.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <boost/beast/core.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "common/utf8.h"
#include "master/api/experiment_json.h"
#include "master/api/grpc_services.h"
#include "master/api/routes/rest_transcoder.h"
#include "master/auth/session_cookie.h"

namespace sf::master {
namespace v1 = steadfast::v1;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

using Request = HttpRequest;
using Response = HttpResponse;

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case sf::StatusCode::kOk: return 200;
    case sf::StatusCode::kInvalidArgument: return 400;
    case sf::StatusCode::kOutOfRange: return 400;
    case sf::StatusCode::kNotFound: return 404;
    case sf::StatusCode::kAlreadyExists: return 409;
    case sf::StatusCode::kFailedPrecondition: return 409;
    case sf::StatusCode::kUnavailable: return 503;
    case sf::StatusCode::kResourceExhausted: return 429;
    case sf::StatusCode::kUnauthenticated: return 401;
    case sf::StatusCode::kPermissionDenied: return 403;
    default: return 500;
  }
}

std::string ErrorJson(const Status& s, const Value& errors = Value()) {
  Value::Map m{{"code", static_cast<int64_t>(ToGrpc(s).error_code())}, {"message", ReplaceInvalidUtf8(s.message())}};
  m["errors"] = errors.is_list() ? errors : Value(Value::List{});
  return Value(std::move(m)).ToJson();
}

std::string ContentType(const std::string& path) {
  static const std::map<std::string, std::string> kTypes = {
      {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},   {".json", "application/json"},
      {".svg", "image/svg+xml"},             {".png", "image/png"},
      {".ico", "image/x-icon"},              {".woff2", "font/woff2"},
      {".map", "application/json"},          {".txt", "text/plain; charset=utf-8"}};
  auto it = kTypes.find(std::filesystem::path(path).extension().string());
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

}  // namespace

RestRouter::RestRouter(ApiHandlers* handlers, MasterMetrics* metrics, const HttpOptions& options)
    : handlers_(handlers),
      metrics_(metrics),
      options_(options),
      methods_(std::make_unique<ApiMethods>(ApiDependencies{.handlers = handlers,
                                                            .accounts = options.accounts,
                                                            .login_limiter = options.login_limiter,
                                                            .authorizer = options.authorizer,
                                                            .revocations = options.revocations,
                                                            .audit = options.audit,
                                                            .webhooks = options.webhooks})) {}

// Takes `body` by value: every caller passes a fresh string (the experiment list's can be
// large), which is moved into the response rather than copied.
Response RestRouter::Json(int status, std::string body, const Request& req) const {
  return JsonResponse(status, std::move(body), req);
}

Response JsonResponse(int status, std::string body, const Request& req) {
  Response res{static_cast<http::status>(status), req.version()};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}
Response RestRouter::Error(const Status& s, const Request& req) const { return Json(HttpStatusFor(s), ErrorJson(s), req); }

Response RestRouter::Static(const Request& req, const std::string& target_path) {
  namespace fs = std::filesystem;
  if (options_.webui_dir.empty() || !fs::exists(options_.webui_dir + "/index.html")) {
    Response res{http::status::not_found, req.version()};
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = "The web UI is not built. Build it with `npm ci && npm run build` in webui/.\n";
    res.prepare_payload();
    return res;
  }
  std::error_code ec;
  fs::path root = fs::weakly_canonical(options_.webui_dir, ec);
  // The file asked for, with symlinks and ".." resolved, is served only if it lies under root
  // (compared by path components: "/../dist-old/x" is not under ".../dist"). A path that does
  // not resolve (too long, a NUL) is a client-side route like any other non-asset.
  fs::path file = fs::weakly_canonical(root / fs::path(target_path).relative_path(), ec);
  fs::path relative = ec ? fs::path() : file.lexically_relative(root);
  bool inside = !relative.empty() && *relative.begin() != ".." && target_path.find('\0') == std::string::npos;
  bool is_asset = inside && fs::is_regular_file(file, ec);
  if (!is_asset) file = root / "index.html";  // client-side route
  std::ifstream in(file, std::ios::binary);
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, ContentType(file.string()));
  // Hashed build assets never change; index.html must always be revalidated.
  bool immutable = file.string().find("/assets/") != std::string::npos;
  res.set(http::field::cache_control, immutable ? "public, max-age=31536000, immutable" : "no-cache");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

// Server-sent events: a trial's log lines as they arrive, until the trial ends, the client
// goes away or stops reading (read_timeout), or the server stops. Runs on a thread of its own
// and writes with `send`, which returns false when the bytes could not be sent in time.
void RestRouter::FollowLogs(const std::function<bool(const std::string&)>& send, unsigned version,
                            v1::GetTrialLogsRequest r, const std::atomic<bool>& stopping) {
  const std::string head = std::string(version == 10 ? "HTTP/1.0" : "HTTP/1.1") +
                           " 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
                           "Connection: close\r\n\r\n";
  if (!send(head)) return;
  const int64_t trial_id = r.trial_id();
  r.set_limit(0);
  auto last_keepalive = std::chrono::steady_clock::now();
  while (!stopping) {
    auto t = handlers_->store()->GetTrial(trial_id);
    bool finished = !t.ok() || !t->has_value() || IsTerminal((*t)->state());
    auto rows = handlers_->GetTrialLogs(r);
    if (!rows.ok()) return;
    std::string chunk;
    for (const auto& l : rows->logs()) {
      chunk += "id: " + std::to_string(l.id()) + "\ndata: " + MessageJson(l) + "\n\n";
      r.set_after_id(l.id());
    }
    if (chunk.empty() && std::chrono::steady_clock::now() - last_keepalive > std::chrono::seconds(10)) {
      chunk = ": keep-alive\n\n";
    }
    if (!chunk.empty()) {
      if (!send(chunk)) return;
      last_keepalive = std::chrono::steady_clock::now();
    }
    if (finished && rows->logs().empty()) {
      (void)send("event: end\ndata: {}\n\n");
      return;
    }
    if (rows->logs().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}


// Holds `req` to the access policy (master/auth/access_policy.h) before it runs: finds its
// rule, authenticates the caller and checks what the rule needs. True when the request may go
// on to Route (with `p` the caller, and `match` its rule when it has one); false with `res`
// (and `route`) filled otherwise.
bool RestRouter::Gate(const Request& req, const std::string& peer, Response& res, std::string& route, Principal& p,
          std::optional<RestMatch>& match) {
  std::string target(req.target());
  const std::string path = UrlDecode(target.substr(0, target.find('?')));
  const std::string method(http::to_string(req.method()));
  Need need = Need::kPublic;
  std::string action = "read";
  match.reset();
  if (path.rfind("/api/", 0) == 0 || path == "/health") {
    bool path_known = false;
    match = MatchRest(method, path, &path_known);
    if (!match && path_known) return true;  // Route answers 405 with the methods allowed
    if (!match) {
      route = "unknown";
      res = Json(404, ErrorJson(NotFound("no route " + method + " " + ReplaceInvalidUtf8(path))), req);
      return false;
    }
    need = match->rule->need;
    action = match->rule->action;
  } else if (path == "/metrics") {
    need = options_.metrics_public ? Need::kPublic : Need::kSignedIn;
  }
  if (!options_.accounts) return Unchecked(req, peer, p);
  p.peer = peer;
  if (need == Need::kPublic) return true;
  auto refuse = [&](const Status& st) {
    route = match ? match->rule->route : path;
    res = Refusal(st, req);
    return false;
  };
  if (Status st = Authenticate(req, peer, /*cookie_mutations_need_header=*/true, p); !st.ok()) return refuse(st);
  Resource r;
  if (match) {
    auto param = [&](const char* k) {
      auto it = match->params.find(k);
      return it == match->params.end() ? std::string() : it->second;
    };
    if (need == Need::kExperiment || need == Need::kTask) {
      try {
        (need == Need::kTask ? r.task_id : r.experiment_id) = std::stoll(param("id"));
      } catch (...) {
        return refuse(InvalidArgument(std::string(need == Need::kTask ? "task" : "experiment") + " id \"" +
                                      ReplaceInvalidUtf8(param("id")) + "\" is not a number"));
      }
    }
    r.checkpoint_uuid = param("uuid");
    r.username = param("username");
    r.workspace = param("workspace");
    r.model = param("name");
  }
  if (Status st = options_.authorizer->Check(p, need, action, r); !st.ok()) return refuse(st);
  return true;
}

HttpResponse RestRouter::Refusal(const Status& st, const HttpRequest& req) const {
  HttpResponse res = Error(st, req);
  if (st.code() == sf::StatusCode::kUnauthenticated) res.set(http::field::www_authenticate, "Bearer realm=\"steadfast\"");
  return res;
}

Status RestRouter::Authenticate(const HttpRequest& req, const std::string& peer, bool cookie_mutations_need_header,
                                Principal& p) const {
  // Credentials: the Authorization header, else the dashboard's cookie.
  std::string token;
  bool via_cookie = false;
  if (auto h = req.find(http::field::authorization); h != req.end()) {
    std::string_view v(h->value().data(), h->value().size());
    if (v.size() < 8 || !beast::iequals(beast::string_view(v.data(), 7), "Bearer ") || v.size() > 7 + Accounts::kMaxTokenBytes) {
      return Unauthenticated("Authorization header: expected \"Bearer TOKEN\" (a token from sf login or "
                             "sf token create)");
    }
    token = std::string(v.substr(7));
  } else if (auto c = req.find(http::field::cookie); c != req.end()) {
    token = SessionCookieValue(std::string_view(c->value().data(), c->value().size()));
    via_cookie = !token.empty();
  }
  if (token.empty()) return NoCredentials();
  auto who = options_.accounts->Authenticate(token);
  if (!who.ok()) return who.status();
  p = *who;
  p.via_cookie = via_cookie;
  p.peer = peer;
  // A cookie rides along with any request the browser makes, a cross-site one too: a
  // mutation by cookie must carry the dashboard's own header, which a cross-site form cannot
  // set without CORS (that the master never grants).
  if (cookie_mutations_need_header && via_cookie && req.method() != http::verb::get &&
      req.method() != http::verb::head && req["X-Requested-With"] != "steadfast") {
    return PermissionDenied("cross-site request refused: a request authenticated by the session cookie "
                            "must send X-Requested-With: steadfast");
  }
  return Status::Ok();
}

bool RestRouter::Unchecked(const HttpRequest& req, const std::string& peer, Principal& p) {
  // No authentication: the caller is whoever X-SF-User says, with every right.
  p.peer = peer;
  p.user_id = -1;
  p.role = Role::kAdmin;
  p.username = std::string(req["X-SF-User"]);
  return true;
}

bool RestRouter::GateProxy(const HttpRequest& req, const std::string& peer, int64_t task_id, HttpResponse& res,
                           Principal& p) {
  if (!options_.accounts) return Unchecked(req, peer, p);
  p.peer = peer;
  // A task's service is not the dashboard: it cannot send the dashboard's header (a notebook's
  // own requests), so a cookie's mutations are held by the cookie's SameSite=Strict (a
  // cross-site request carries no cookie) and by the service's own defences.
  Status st = Authenticate(req, peer, /*cookie_mutations_need_header=*/false, p);
  if (st.ok()) {
    Resource r;
    r.task_id = task_id;
    st = options_.authorizer->Check(p, Need::kTask, "open", r);
  }
  if (st.ok()) return true;
  res = Refusal(st, req);
  return false;
}

std::string RestRouter::SessionCookie(const std::string& token, int64_t max_age) const {
  return std::string(kSessionCookie) + "=" + token + "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
         std::to_string(max_age) + (options_.secure_cookies ? "; Secure" : "");
}

// Runs the Api method `api` for a REST request that Gate let through: the request message from
// the path, query and body (routes/rest_transcoder.h), the method from the table
// (api_methods.h), the reply in protobuf's JSON mapping. A config rejected with field errors is
// 400 with those errors; GetTrialLogs with ?follow=true becomes a log follow (`follow_out`).
void RestRouter::ServeApi(const ApiRoute& api, const RestMatch& match, const Query& q, const Request& req, Response& res,
              std::string& route, std::optional<v1::GetTrialLogsRequest>& follow_out, const Principal& p,
              std::unique_ptr<google::protobuf::Message>& decoded) {
  route = api.path;
  for (const auto& [param, value] : match.params) {
    if (!IsText(value)) {
      return void(res = Error(InvalidArgument(param + ": not UTF-8 text without NUL"), req));
    }
  }
  auto request = DecodeRestRequest(api, match.params, q, req.body());
  if (!request.ok()) return void(res = Error(request.status(), req));
  decoded = std::move(*request);  // the caller's, for the audit record
  if (!api.follow_query.empty()) {
    const auto* logs = dynamic_cast<const v1::GetTrialLogsRequest*>(decoded.get());
    if (logs && logs->follow()) {
      v1::GetTrialRequest tr;
      tr.set_trial_id(logs->trial_id());
      auto t = handlers_->GetTrial(tr);
      if (!t.ok()) return void(res = Error(t.status(), req));
      follow_out = *logs;
      return;
    }
  }
  auto out = methods_->Invoke(api.method->name(), *decoded, p);
  if (!out.ok()) {
    res = Error(out.status(), req);
    if (out.status().code() == sf::StatusCode::kResourceExhausted) {
      // The login limiter says when ("... retry in N s").
      int seconds = 6;
      const std::string m = out.status().message();
      if (size_t at = m.rfind("retry in "); at != std::string::npos) seconds = std::max(1, std::atoi(m.c_str() + at + 9));
      res.set(http::field::retry_after, std::to_string(seconds));
    }
    // The database is busy (no read connection free in time) or unreachable: come back soon
    // rather than queue (docs/cluster.md "Reads under load").
    if (out.status().code() == sf::StatusCode::kUnavailable) res.set(http::field::retry_after, "1");
    return;
  }
  const google::protobuf::Message& reply = **out;
  // The dashboard's session lives in an HttpOnly cookie: set at login, cleared at logout.
  if (const auto* login = dynamic_cast<const v1::LoginResponse*>(&reply)) {
    res = Json(200, MessageJson(reply), req);
    res.set(http::field::set_cookie, SessionCookie(login->token(), Accounts::kSessionSeconds));
    return;
  }
  if (dynamic_cast<const v1::LogoutResponse*>(&reply)) {
    res = Json(200, MessageJson(reply), req);
    res.set(http::field::set_cookie, SessionCookie("", 0));
    return;
  }
  if (const auto* list = dynamic_cast<const v1::GetExperimentsResponse*>(&reply)) {
    return void(res = Json(200, ExperimentsResponseJson(*list), req));  // the same JSON as MessageJson, faster
  }
  if (const auto config_errors = ReplyConfigErrors(reply); !config_errors.empty()) {
    Value errors(Value::List{});
    const std::string first = config_errors.front()->path() + ": " + config_errors.front()->message();
    for (const v1::ConfigError* e : config_errors) {
      errors.as_list().push_back(Value(Value::Map{{"path", e->path()}, {"message", e->message()},
                                                  {"line", static_cast<int64_t>(e->line())},
                                                  {"column", static_cast<int64_t>(e->column())}}));
    }
    return void(res = Json(400, ErrorJson(InvalidArgument("invalid experiment config: " + first), errors), req));
  }
  res = Json(200, MessageJson(reply), req);
}

// Fills `res`, or `follow_out` for a log follow (the caller streams it). `p` and `match`: the
// caller and the policy rule, as Gate let it through.
void RestRouter::Route(const Request& req, Response& res, std::string& route, std::optional<v1::GetTrialLogsRequest>& follow_out,
           const Principal& p, const std::optional<RestMatch>& match, const std::string& peer,
           std::unique_ptr<google::protobuf::Message>& decoded) {
  std::string target(req.target());
  size_t qpos = target.find('?');
  std::string path = UrlDecode(target.substr(0, qpos));
  Query q = Query::Parse(qpos == std::string::npos ? "" : target.substr(qpos + 1));
  // Query values reach PostgreSQL as text parameters: refuse what is not text here (400)
  // rather than fail in the database (500) or search for a value cut at a NUL.
  for (const auto& [key, value] : q.params) {
    if (path.rfind("/api/", 0) == 0 && (!IsText(key) || !IsText(value))) {
      route = "bad_query";
      res = Json(400, ErrorJson(InvalidArgument("query parameter \"" + (IsText(key) ? key : "?") +
                                                "\" is not UTF-8 text without NUL (percent-decoded)")),
                 req);
      return;
    }
  }
  auto method = req.method();
  auto wrong_method = [&](const char* allowed) {
    res = Json(405, ErrorJson(InvalidArgument(std::string(http::to_string(method)) + " is not allowed on " + path +
                                              "; use " + allowed)),
               req);
    res.set(http::field::allow, allowed);
  };

  if (path == "/health") {
    route = "/health";
    if (method != http::verb::get) return wrong_method("GET");
    Status db = handlers_->store()->db()->Transact("health", [](pqxx::work& tx) {
      tx.exec("SELECT 1");
      return Status::Ok();
    });
    res = db.ok() ? Json(200, R"({"status":"ok","database":"ok"})", req)
                  : Json(503, Value(Value::Map{{"status", "degraded"}, {"database", db.message()}}).ToJson(), req);
    return;
  }
  if (path == "/metrics") {
    route = "/metrics";
    res = Response{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.body() = metrics_->Render(handlers_->cluster());
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    return;
  }
  if (path == "/api/v1/openapi.json") {
    route = path;
    res = Json(200, OpenApiDocument(), req);
    return;
  }
  if (match && match->rule->api) return ServeApi(*match->rule->api, *match, q, req, res, route, follow_out, p, decoded);
  if (path.rfind("/api/", 0) == 0 && !match) {
    // Gate let it through because the path is known with other methods: 405.
    route = "unknown";
    const std::string allowed = AllowedMethods(path);
    res = Json(405, ErrorJson(InvalidArgument(std::string(http::to_string(method)) + " is not allowed on " + path +
                                              "; use " + allowed)),
               req);
    res.set(http::field::allow, allowed);
    return;
  }
  if (path.rfind("/api/", 0) == 0) {
    route = "unknown";
    res = Json(404, ErrorJson(NotFound("no route " + std::string(http::to_string(method)) + " " + path)), req);
    return;
  }
  route = "static";
  if (method != http::verb::get && method != http::verb::head) return wrong_method("GET");
  res = Static(req, path);
  return;
}

std::string ErrorBody(const Status& s) { return ErrorJson(s); }

HttpResponse JsonError(int http_status, const Status& s, const HttpRequest& req) {
  return JsonResponse(http_status, ErrorJson(s), req);
}

}  // namespace sf::master
