#include "master/api/http_server.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "common/log.h"
#include "master/api/grpc_services.h"

namespace sf::master {
namespace v1 = steadfast::v1;
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

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
    default: return 500;
  }
}

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = false;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

std::string ErrorJson(const Status& s, const Value& errors = Value()) {
  Value::Map m{{"code", static_cast<int64_t>(ToGrpc(s).error_code())}, {"message", s.message()}};
  m["errors"] = errors.is_list() ? errors : Value(Value::List{});
  return Value(std::move(m)).ToJson();
}

std::string UrlDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(s[i + 1]) && std::isxdigit(s[i + 2])) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Query parameters; keys normalised to snake_case so both `sortBy` and `sort_by` work.
std::multimap<std::string, std::string> ParseQuery(const std::string& q) {
  std::multimap<std::string, std::string> out;
  std::stringstream ss(q);
  for (std::string part; std::getline(ss, part, '&');) {
    if (part.empty()) continue;
    size_t eq = part.find('=');
    std::string key = UrlDecode(part.substr(0, eq));
    std::string value = eq == std::string::npos ? "" : UrlDecode(part.substr(eq + 1));
    std::string snake;
    for (char c : key) {
      if (std::isupper(static_cast<unsigned char>(c))) {
        snake += '_';
        snake += static_cast<char>(std::tolower(c));
      } else {
        snake += c;
      }
    }
    out.emplace(snake, value);
  }
  return out;
}

struct Query {
  std::multimap<std::string, std::string> params;
  std::string Get(const std::string& k, const std::string& def = "") const {
    auto it = params.find(k);
    return it == params.end() ? def : it->second;
  }
  Result<int64_t> Int(const std::string& k, int64_t def) const {
    auto it = params.find(k);
    if (it == params.end() || it->second.empty()) return def;
    try {
      size_t used = 0;
      int64_t v = std::stoll(it->second, &used);
      if (used != it->second.size()) throw std::invalid_argument(k);
      return v;
    } catch (...) {
      return InvalidArgument(k + ": \"" + it->second + "\" is not an integer");
    }
  }
  Result<bool> Bool(const std::string& k) const {
    auto v = Get(k);
    if (v.empty() || v == "false" || v == "0") return false;
    if (v == "true" || v == "1") return true;
    return InvalidArgument(k + ": \"" + v + "\" is not true or false");
  }
  // A point in time: RFC 3339 ("2026-11-24T16:01:00Z", "2026-11-24T17:01:00+01:00") or seconds
  // since the epoch ("1795536060"). Absent or empty: nullopt. A '+' of an offset that the client
  // did not percent-encode arrives as a space and is taken back.
  Result<std::optional<google::protobuf::Timestamp>> Time(const std::string& k) const {
    using google::protobuf::util::TimeUtil;
    auto it = params.find(k);
    if (it == params.end() || it->second.empty()) return std::optional<google::protobuf::Timestamp>();
    const std::string& raw = it->second;
    google::protobuf::Timestamp ts;
    static const std::regex kSeconds("^-?[0-9]{1,12}(\\.[0-9]*)?$");
    if (std::regex_match(raw, kSeconds)) {
      const double seconds = std::stod(raw);
      if (seconds >= static_cast<double>(TimeUtil::kTimestampMinSeconds) &&
          seconds <= static_cast<double>(TimeUtil::kTimestampMaxSeconds)) {
        ts.set_seconds(static_cast<int64_t>(std::floor(seconds)));
        return std::optional<google::protobuf::Timestamp>(ts);
      }
    } else {
      std::string text = raw;
      if (text.size() > 6 && text[text.size() - 6] == ' ') text[text.size() - 6] = '+';
      if (TimeUtil::FromString(text, &ts)) return std::optional<google::protobuf::Timestamp>(ts);
    }
    return InvalidArgument(k + ": \"" + raw +
                           "\" is not an RFC 3339 time (2026-11-24T16:01:00Z) or seconds since the epoch");
  }
};

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

struct HttpServer::Impl {
  ApiHandlers* handlers;
  MasterMetrics* metrics;
  HttpOptions options;
  asio::io_context io;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::thread accept_thread;
  std::atomic<bool> stopping{false};
  std::atomic<int> connections{0};

  // ---- routing
  Response Json(int status, const std::string& body, const Request& req) {
    Response res{static_cast<http::status>(status), req.version()};
    res.set(http::field::content_type, "application/json");
    res.set(http::field::cache_control, "no-store");
    res.keep_alive(req.keep_alive());
    res.body() = body;
    res.prepare_payload();
    return res;
  }
  Response Error(const Status& s, const Request& req) { return Json(HttpStatusFor(s), ErrorJson(s), req); }

  template <typename Resp>
  Response Reply(const Result<Resp>& r, const Request& req) {
    if (!r.ok()) return Error(r.status(), req);
    return Json(200, ToJson(*r), req);
  }

  template <typename Msg>
  Status ParseBody(const Request& req, Msg* msg) {
    if (req.body().empty()) return Status::Ok();
    google::protobuf::util::JsonParseOptions o;
    o.ignore_unknown_fields = false;
    auto st = google::protobuf::util::JsonStringToMessage(req.body(), msg, o);
    if (!st.ok()) return InvalidArgument("request body is not a valid " + msg->GetTypeName() + ": " + st.ToString());
    return Status::Ok();
  }

  Response Static(const Request& req, const std::string& target_path) {
    namespace fs = std::filesystem;
    if (options.webui_dir.empty() || !fs::exists(options.webui_dir + "/index.html")) {
      Response res{http::status::not_found, req.version()};
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "The web UI is not built. Build it with `npm ci && npm run build` in webui/.\n";
      res.prepare_payload();
      return res;
    }
    fs::path root = fs::weakly_canonical(options.webui_dir);
    fs::path file = fs::weakly_canonical(root / target_path.substr(1));
    std::error_code ec;
    bool inside = file.string().rfind(root.string(), 0) == 0;
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

  // Server-sent events: a trial's log lines as they arrive, until the trial ends or the client
  // goes away.
  void FollowLogs(tcp::socket& socket, const Request& req, int64_t trial_id, const Query& q) {
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::content_type, "text/event-stream");
    head.set(http::field::cache_control, "no-store");
    head.set(http::field::connection, "close");
    head.keep_alive(false);
    beast::error_code ec;
    http::response_serializer<http::empty_body> sr{head};
    http::write_header(socket, sr, ec);
    if (ec) return;
    v1::GetTrialLogsRequest r;
    r.set_trial_id(trial_id);
    r.set_after_id(q.Int("after_id", 0).ok() ? *q.Int("after_id", 0) : 0);
    r.set_search(q.Get("search"));
    auto last_keepalive = std::chrono::steady_clock::now();
    while (!stopping) {
      auto t = handlers->store()->GetTrial(trial_id);
      bool finished = !t.ok() || !t->has_value() || IsTerminal((*t)->state());
      auto rows = handlers->GetTrialLogs(r);
      if (!rows.ok()) return;
      std::string chunk;
      for (const auto& l : rows->logs()) {
        chunk += "id: " + std::to_string(l.id()) + "\ndata: " + ToJson(l) + "\n\n";
        r.set_after_id(l.id());
      }
      if (chunk.empty() && std::chrono::steady_clock::now() - last_keepalive > std::chrono::seconds(10)) {
        chunk = ": keep-alive\n\n";
      }
      if (!chunk.empty()) {
        asio::write(socket, asio::buffer(chunk), ec);
        if (ec) return;
        last_keepalive = std::chrono::steady_clock::now();
      }
      if (finished && rows->logs().empty()) {
        std::string end = "event: end\ndata: {}\n\n";
        asio::write(socket, asio::buffer(end), ec);
        return;
      }
      if (rows->logs().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  }

  // Returns true when the response was already written (streaming).
  bool Route(tcp::socket& socket, const Request& req, Response& res, std::string& route) {
    std::string target(req.target());
    size_t qpos = target.find('?');
    std::string path = UrlDecode(target.substr(0, qpos));
    Query q{ParseQuery(qpos == std::string::npos ? "" : target.substr(qpos + 1))};
    auto method = req.method();
    static const std::regex kExp("^/api/v1/experiments/([0-9]+)$");
    static const std::regex kExpAction("^/api/v1/experiments/([0-9]+)/(pause|activate|kill|archive)$");
    static const std::regex kExpSub("^/api/v1/experiments/([0-9]+)/(trials|checkpoints|searcher)$");
    static const std::regex kTrial("^/api/v1/trials/([0-9]+)$");
    static const std::regex kTrialSub("^/api/v1/trials/([0-9]+)/(metrics|logs)$");
    std::smatch m;
    auto wrong_method = [&](const char* allowed) {
      res = Json(405, ErrorJson(InvalidArgument(std::string(http::to_string(method)) + " is not allowed on " + path +
                                                "; use " + allowed)),
                 req);
      res.set(http::field::allow, allowed);
    };
    auto id_of = [&](const std::string& s) -> Result<int64_t> {
      try {
        return std::stoll(s);
      } catch (...) {
        return InvalidArgument("id \"" + s + "\" is out of range");
      }
    };

    if (path == "/health") {
      route = "/health";
      if (method != http::verb::get) return wrong_method("GET"), false;
      Status db = handlers->store()->db()->Transact("health", [](pqxx::work& tx) {
        tx.exec("SELECT 1");
        return Status::Ok();
      });
      res = db.ok() ? Json(200, R"({"status":"ok","database":"ok"})", req)
                    : Json(503, Value(Value::Map{{"status", "degraded"}, {"database", db.message()}}).ToJson(), req);
      return false;
    }
    if (path == "/metrics") {
      route = "/metrics";
      res = Response{http::status::ok, req.version()};
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      res.body() = metrics->Render(handlers->cluster());
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      return false;
    }
    if (path == "/api/v1/openapi.json") {
      route = path;
      res = Json(200, OpenApiDocument(), req);
      return false;
    }
    if (path == "/api/v1/experiments") {
      route = "/api/v1/experiments";
      if (method == http::verb::post) {
        v1::CreateExperimentRequest r;
        Status st = ParseBody(req, &r);
        if (!st.ok()) return res = Error(st, req), false;
        // REST default: start it, unless the body says "activate": false.
        auto body = Value::FromJson(req.body());
        if (!body.ok() || !body->Find("activate")) r.set_activate(true);
        std::string owner(req["X-SF-User"]);
        auto out = handlers->CreateExperiment(r, owner);
        if (!out.ok()) return res = Error(out.status(), req), false;
        if (out->errors_size() > 0) {
          Value errors(Value::List{});
          for (const auto& e : out->errors()) {
            errors.as_list().push_back(Value(Value::Map{{"path", e.path()}, {"message", e.message()},
                                                        {"line", static_cast<int64_t>(e.line())},
                                                        {"column", static_cast<int64_t>(e.column())}}));
          }
          std::string msg = "invalid experiment config: " + out->errors(0).path() + ": " + out->errors(0).message();
          res = Json(400, ErrorJson(InvalidArgument(msg), errors), req);
          return false;
        }
        res = Json(200, ToJson(*out), req);
        return false;
      }
      if (method != http::verb::get) return wrong_method("GET, POST"), false;
      v1::GetExperimentsRequest r;
      for (auto [it, end] = q.params.equal_range("states"); it != end; ++it) {
        std::stringstream ss(it->second);
        for (std::string s; std::getline(ss, s, ',');) {
          v1::ExperimentState state = ExperimentStateFromName(s);
          if (state == v1::EXPERIMENT_STATE_UNSPECIFIED) {
            return res = Error(InvalidArgument("states: \"" + s + "\" is not an experiment state"), req), false;
          }
          r.add_states(state);
        }
      }
      r.set_name(q.Get("name"));
      r.set_sort_by(q.Get("sort_by"));
      auto desc = q.Bool("descending");
      auto off = q.Int("offset", 0);
      auto lim = q.Int("limit", 0);
      auto arch = q.Bool("include_archived");
      for (const Status& st : {desc.status(), off.status(), lim.status(), arch.status()}) {
        if (!st.ok()) return res = Error(st, req), false;
      }
      r.set_descending(*desc);
      r.set_offset(static_cast<int32_t>(*off));
      r.set_limit(static_cast<int32_t>(*lim));
      r.set_include_archived(*arch);
      res = Reply(handlers->GetExperiments(r), req);
      return false;
    }
    if (std::regex_match(path, m, kExp)) {
      route = "/api/v1/experiments/{id}";
      if (method != http::verb::get) return wrong_method("GET"), false;
      auto id = id_of(m[1]);
      if (!id.ok()) return res = Error(id.status(), req), false;
      v1::GetExperimentRequest r;
      r.set_experiment_id(*id);
      res = Reply(handlers->GetExperiment(r), req);
      return false;
    }
    if (std::regex_match(path, m, kExpAction)) {
      std::string action = m[2];
      route = "/api/v1/experiments/{id}/" + action;
      if (method != http::verb::post) return wrong_method("POST"), false;
      auto id = id_of(m[1]);
      if (!id.ok()) return res = Error(id.status(), req), false;
      v1::ExperimentActionRequest r;
      r.set_id(*id);
      if (action == "pause") res = Reply(handlers->PauseExperiment(r), req);
      else if (action == "activate") res = Reply(handlers->ActivateExperiment(r), req);
      else if (action == "kill") res = Reply(handlers->KillExperiment(r), req);
      else res = Reply(handlers->ArchiveExperiment(r), req);
      return false;
    }
    if (std::regex_match(path, m, kExpSub)) {
      std::string sub = m[2];
      route = "/api/v1/experiments/{id}/" + sub;
      if (method != http::verb::get) return wrong_method("GET"), false;
      auto id = id_of(m[1]);
      if (!id.ok()) return res = Error(id.status(), req), false;
      if (sub == "trials") {
        v1::GetExperimentTrialsRequest r;
        r.set_experiment_id(*id);
        auto off = q.Int("offset", 0);
        auto lim = q.Int("limit", 0);
        if (!off.ok() || !lim.ok()) return res = Error(!off.ok() ? off.status() : lim.status(), req), false;
        r.set_offset(static_cast<int32_t>(*off));
        r.set_limit(static_cast<int32_t>(*lim));
        res = Reply(handlers->GetExperimentTrials(r), req);
      } else if (sub == "checkpoints") {
        v1::GetExperimentCheckpointsRequest r;
        r.set_id(*id);
        res = Reply(handlers->GetExperimentCheckpoints(r), req);
      } else {
        v1::GetExperimentRequest r;
        r.set_experiment_id(*id);
        auto e = handlers->GetExperiment(r);
        if (!e.ok()) return res = Error(e.status(), req), false;
        res = Json(200, Value(Value::Map{{"summary", handlers->cluster()->SearcherSummary(*id)}}).ToJson(), req);
      }
      return false;
    }
    if (std::regex_match(path, m, kTrial)) {
      route = "/api/v1/trials/{id}";
      if (method != http::verb::get) return wrong_method("GET"), false;
      auto id = id_of(m[1]);
      if (!id.ok()) return res = Error(id.status(), req), false;
      v1::GetTrialRequest r;
      r.set_trial_id(*id);
      res = Reply(handlers->GetTrial(r), req);
      return false;
    }
    if (std::regex_match(path, m, kTrialSub)) {
      std::string sub = m[2];
      route = "/api/v1/trials/{id}/" + sub;
      if (method != http::verb::get) return wrong_method("GET"), false;
      auto id = id_of(m[1]);
      if (!id.ok()) return res = Error(id.status(), req), false;
      if (sub == "metrics") {
        v1::GetTrialMetricsRequest r;
        r.set_trial_id(*id);
        r.set_kind(q.Get("kind", "training"));
        auto start = q.Int("start_batches", 0);
        auto end = q.Int("end_batches", 0);
        auto maxp = q.Int("max_points", 0);
        for (const Status& st : {start.status(), end.status(), maxp.status()}) {
          if (!st.ok()) return res = Error(st, req), false;
        }
        r.set_start_batches(*start);
        r.set_end_batches(*end);
        r.set_max_points(static_cast<int32_t>(*maxp));
        res = Reply(handlers->GetTrialMetrics(r), req);
        return false;
      }
      auto follow = q.Bool("follow");
      if (!follow.ok()) return res = Error(follow.status(), req), false;
      v1::GetTrialLogsRequest r;
      r.set_trial_id(*id);
      auto after = q.Int("after_id", 0);
      auto lim = q.Int("limit", 0);
      if (!after.ok() || !lim.ok()) return res = Error(!after.ok() ? after.status() : lim.status(), req), false;
      r.set_after_id(*after);
      r.set_limit(static_cast<int32_t>(*lim));
      r.set_search(q.Get("search"));
      if (*follow) {
        v1::GetTrialRequest tr;
        tr.set_trial_id(*id);
        auto t = handlers->GetTrial(tr);
        if (!t.ok()) return res = Error(t.status(), req), false;
        FollowLogs(socket, req, *id, q);
        return true;
      }
      res = Reply(handlers->GetTrialLogs(r), req);
      return false;
    }
    if (path == "/api/v1/agents") {
      route = path;
      if (method != http::verb::get) return wrong_method("GET"), false;
      res = Reply(handlers->GetAgents(v1::GetAgentsRequest()), req);
      return false;
    }
    if (path == "/api/v1/cluster/utilization") {
      route = path;
      if (method != http::verb::get) return wrong_method("GET"), false;
      auto since = q.Time("since");
      if (!since.ok()) return res = Error(since.status(), req), false;
      v1::GetClusterUtilizationRequest r;
      if (*since) *r.mutable_since() = **since;
      r.set_pool(q.Get("pool"));
      res = Reply(handlers->GetClusterUtilization(r), req);
      return false;
    }
    if (path == "/api/v1/master") {
      route = path;
      if (method != http::verb::get) return wrong_method("GET"), false;
      res = Reply(handlers->GetMaster(v1::GetMasterRequest()), req);
      return false;
    }
    if (path.rfind("/api/", 0) == 0) {
      route = "unknown";
      res = Json(404, ErrorJson(NotFound("no route " + std::string(http::to_string(method)) + " " + path)), req);
      return false;
    }
    route = "static";
    if (method != http::verb::get && method != http::verb::head) return wrong_method("GET"), false;
    res = Static(req, path);
    return false;
  }

  void Session(tcp::socket socket) {
    beast::error_code ec;
    beast::flat_buffer buffer;
    while (!stopping) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(options.max_body_bytes);
      parser.header_limit(64 * 1024);
      http::read(socket, buffer, parser, ec);
      if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) break;
      if (ec) {
        bool too_big = ec == http::error::body_limit;
        Response res{too_big ? http::status::payload_too_large : http::status::bad_request, 11};
        res.set(http::field::content_type, "application/json");
        res.body() = ErrorJson(InvalidArgument(too_big ? "request body larger than " +
                                                             std::to_string(options.max_body_bytes) + " bytes"
                                                       : "malformed HTTP request: " + ec.message()));
        res.keep_alive(false);
        res.prepare_payload();
        http::write(socket, res, ec);
        // Lingering close: read (and drop) what the client is still sending, so it sees the
        // response instead of a reset. Bounded in bytes and time.
        socket.shutdown(tcp::socket::shutdown_send, ec);
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        size_t drained = 0;
        char sink[65536];
        while (!ec && drained < (64u << 20) && std::chrono::steady_clock::now() < until) {
          drained += socket.read_some(asio::buffer(sink), ec);
        }
        return;
      }
      Request req = parser.release();
      auto start = std::chrono::steady_clock::now();
      Response res;
      std::string route;
      bool streamed = false;
      try {
        streamed = Route(socket, req, res, route);
      } catch (const std::exception& e) {
        res = Error(Internal(std::string("internal error: ") + e.what()), req);
      }
      if (streamed) break;
      int code = res.result_int();
      if (req.method() == http::verb::head) res.body().clear();
      http::write(socket, res, ec);
      metrics->ObserveRequest(route, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                              code);
      if (ec || !res.keep_alive()) break;
    }
    socket.shutdown(tcp::socket::shutdown_send, ec);
  }

  void AcceptLoop() {
    while (!stopping) {
      beast::error_code ec;
      tcp::socket socket(io);
      acceptor->accept(socket, ec);
      if (ec) {
        if (stopping) return;
        continue;
      }
      if (connections >= options.max_connections) {
        Response res{http::status::service_unavailable, 11};
        res.set(http::field::content_type, "application/json");
        res.body() = ErrorJson(Unavailable("too many connections"));
        res.keep_alive(false);
        res.prepare_payload();
        http::write(socket, res, ec);
        continue;
      }
      connections++;
      std::thread([this, s = std::move(socket)]() mutable {
        Session(std::move(s));
        connections--;
      }).detach();
    }
  }
};

HttpServer::HttpServer(ApiHandlers* handlers, MasterMetrics* metrics, HttpOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->handlers = handlers;
  impl_->metrics = metrics;
  impl_->options = std::move(options);
}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  try {
    auto address = asio::ip::make_address(impl_->options.bind_address);
    impl_->acceptor = std::make_unique<tcp::acceptor>(impl_->io);
    tcp::endpoint endpoint(address, static_cast<uint16_t>(impl_->options.port));
    impl_->acceptor->open(endpoint.protocol());
    impl_->acceptor->set_option(asio::socket_base::reuse_address(true));
    impl_->acceptor->bind(endpoint);
    impl_->acceptor->listen();
    port_ = impl_->acceptor->local_endpoint().port();
  } catch (const std::exception& e) {
    return Unavailable("cannot listen on " + impl_->options.bind_address + ":" +
                       std::to_string(impl_->options.port) + ": " + e.what());
  }
  impl_->accept_thread = std::thread([this] { impl_->AcceptLoop(); });
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  beast::error_code ec;
  if (impl_->acceptor) {
    impl_->acceptor->cancel(ec);
    impl_->acceptor->close(ec);
  }
  // Wake a blocking accept() by connecting to ourselves.
  try {
    tcp::socket s(impl_->io);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port_)), ec);
  } catch (...) {
  }
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
}

}  // namespace sf::master
