#include "serve/translation_server.h"

#include <array>
#include <atomic>
#include <functional>
#include <optional>
#include <vector>

#include "common/http/server.h"
#include "common/secret_file.h"
#include "serve/serve_metrics.h"

namespace sf::serve {
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;
using http::Request;

namespace {

// What a request is answered with, before it becomes bytes.
struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  bool retry_after = false;  // 503s: Retry-After: 1
  std::string allow;         // 405s: the methods the route takes
};

Reply Ok(std::string body) {
  Reply r;
  r.body = std::move(body);
  return r;
}

Reply Error(int status, const std::string& message) {
  Reply r;
  r.status = status;
  r.body = ErrorJson(status, message);
  r.retry_after = status == 503;
  return r;
}

// The HTTP status of a failed request's Status.
int HttpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

struct Route {
  const char* path;
  bhttp::verb method;
};
constexpr std::array<Route, 4> kRoutes = {{{"/v1/translate", bhttp::verb::post},
                                            {"/health", bhttp::verb::get},
                                            {"/ready", bhttp::verb::get},
                                            {"/metrics", bhttp::verb::get}}};

}  // namespace

struct TranslationServer::Impl : http::Handler {
  explicit Impl(ServeOptions o) : options(std::move(o)), server(this, TransportOptions(options)) {
    metrics.SetModelInfo(options.model_name, options.model_version, options.checkpoint);
  }

  static http::ServerOptions TransportOptions(const ServeOptions& o) {
    http::ServerOptions t;
    t.name = "serve";
    t.bind_address = o.bind_address;
    t.port = o.port;
    t.threads = o.http_threads;
    t.max_connections = o.max_connections;
    t.max_body_bytes = o.max_body_bytes;
    t.read_timeout = o.read_timeout;
    t.tls = o.tls;
    t.clients = o.clients;
    return t;
  }

  // Called when a deferred reply is ready.
  using Later = std::function<void(std::function<Reply()> make)>;

  size_t BodyLimit(const http::RequestHeader&) override { return options.max_body_bytes; }
  void Handle(Request req, std::shared_ptr<http::Exchange> exchange) override;
  http::Response Refuse(Refusal why, const std::string& detail) override;

  // Answers `req` now, or returns nothing and calls `later` once (a translation). `route` is
  // set to the route's name for metrics.
  std::optional<Reply> Dispatch(const Request& req, std::string* route, const Later& later);
  std::optional<Reply> Translate(const Request& req, const Later& later);
  bool Authorized(const Request& req) const;
  // The bytes of `reply`, counted in the metrics under `route`.
  http::Response Render(Reply reply, const std::string& route, Clock::time_point started);

  ServeOptions options;
  ServeMetrics metrics;
  std::unique_ptr<DynamicBatcher> batcher;         // made by SetModel, before `model` is published
  std::atomic<TranslationModel*> model{nullptr};
  std::atomic<bool> stopping{false};
  http::Server server;  // last: stopped and destroyed first
};

bool TranslationServer::Impl::Authorized(const Request& req) const {
  if (options.token.empty()) return true;
  auto it = req.find(bhttp::field::authorization);
  if (it == req.end()) return false;
  std::string_view value(it->value().data(), it->value().size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.substr(0, kBearer.size()) != kBearer) return false;
  return SecretEquals(value.substr(kBearer.size()), options.token);
}

std::optional<Reply> TranslationServer::Impl::Dispatch(const Request& req, std::string* route, const Later& later) {
  std::string_view target(req.target().data(), req.target().size());
  target = target.substr(0, target.find('?'));
  const Route* found = nullptr;
  for (const Route& r : kRoutes) {
    if (target == r.path) found = &r;
  }
  *route = found ? found->path : "unknown";
  if (target != "/health" && !Authorized(req)) {
    Reply r = Error(401, "missing or wrong bearer token (Authorization: Bearer <token>)");
    return r;
  }
  if (!found) return Error(404, "no route " + std::string(target.substr(0, 200)));
  if (req.method() != found->method) {
    Reply r = Error(405, std::string(target) + " takes " + std::string(bhttp::to_string(found->method)));
    r.allow = std::string(bhttp::to_string(found->method));
    return r;
  }
  if (target == "/health") return Ok(R"({"status":"ok"})");
  if (target == "/ready") {
    if (!model.load()) return Error(503, "loading the model's weights");
    return Ok(R"({"status":"ready"})");
  }
  if (target == "/metrics") {
    Reply r;
    r.content_type = "text/plain; version=0.0.4";
    TranslationModel* m = model.load();
    r.body = metrics.Render(m ? batcher->queued_requests() : 0, m != nullptr);
    return r;
  }
  return Translate(req, later);
}

std::optional<Reply> TranslationServer::Impl::Translate(const Request& req, const Later& later) {
  TranslationModel* m = model.load();
  if (!m) return Error(503, "loading the model's weights; retry later");
  auto parsed = ParseTranslateRequest(req.body(), m->default_beam(), options.limits);
  if (!parsed.ok()) return Error(400, parsed.status().message());
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(parsed->texts.size());
  for (size_t i = 0; i < parsed->texts.size(); ++i) {
    std::vector<int32_t> ids = m->Encode(parsed->texts[i]);
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n > m->max_source_tokens()) return Error(400, SourceTooLong(i, n, m->max_source_tokens()).message());
    sources.push_back(std::move(ids));
  }
  // The batcher completes the request on its thread; the text is decoded on the connection's.
  Status st = batcher->Submit(std::move(sources), parsed->beam, [m, later](Result<std::vector<Hypothesis>> hyps) {
    auto shared = std::make_shared<Result<std::vector<Hypothesis>>>(std::move(hyps));
    later([m, shared]() -> Reply {
      if (!shared->ok()) return Error(HttpStatusOf(shared->status()), shared->status().message());
      std::vector<Translation> out;
      out.reserve((*shared)->size());
      for (const Hypothesis& h : **shared) {
        out.push_back({m->Decode(h), h.score, static_cast<int64_t>(h.tokens.size())});
      }
      return Ok(TranslationsJson(out));
    });
  });
  if (!st.ok()) return Error(HttpStatusOf(st), st.message());
  return std::nullopt;
}

void TranslationServer::Impl::Handle(Request req, std::shared_ptr<http::Exchange> exchange) {
  const Clock::time_point started = Clock::now();
  auto route = std::make_shared<std::string>("unknown");
  std::optional<Reply> reply;
  try {
    reply = Dispatch(req, route.get(), [this, exchange, route, started](std::function<Reply()> make) {
      Reply r;
      try {
        r = make();
      } catch (const std::exception& e) {
        r = Error(500, std::string("internal error: ") + e.what());
      }
      exchange->Reply(Render(std::move(r), *route, started));
    });
  } catch (const std::exception& e) {
    reply = Error(500, std::string("internal error: ") + e.what());
  }
  if (reply) exchange->Reply(Render(std::move(*reply), *route, started));
}

http::Response TranslationServer::Impl::Refuse(Refusal why, const std::string& detail) {
  switch (why) {
    case Refusal::kOverCapacity: return Render(Error(503, detail), "over_capacity", Clock::now());
    case Refusal::kBodyTooLarge: return Render(Error(413, detail), "body_too_large", Clock::now());
    case Refusal::kMalformed: return Render(Error(400, detail), "malformed", Clock::now());
    case Refusal::kInternal: break;
  }
  return Render(Error(500, detail), "unknown", Clock::now());
}

http::Response TranslationServer::Impl::Render(Reply reply, const std::string& route, Clock::time_point started) {
  metrics.ObserveRequest(route, reply.status, std::chrono::duration<double>(Clock::now() - started).count());
  http::Response res{static_cast<bhttp::status>(reply.status), 11};
  res.set(bhttp::field::server, "sf-serve");
  res.set(bhttp::field::content_type, reply.content_type);
  if (reply.retry_after) res.set(bhttp::field::retry_after, "1");
  if (!reply.allow.empty()) res.set(bhttp::field::allow, reply.allow);
  if (reply.status == 401) res.set(bhttp::field::www_authenticate, "Bearer");
  res.body() = std::move(reply.body);
  res.prepare_payload();
  return res;
}

TranslationServer::TranslationServer(ServeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

TranslationServer::~TranslationServer() { Stop(); }

Status TranslationServer::Start() {
  SF_RETURN_IF_ERROR(impl_->server.Start());
  port_ = impl_->server.port();
  return Status::Ok();
}

void TranslationServer::SetModel(TranslationModel* model) {
  Impl& impl = *impl_;
  if (impl.model.load() || impl.stopping) return;
  const int64_t max_sentences = impl.options.batching.max_batch_sentences;
  // One batch is one working batch of the search (no further cut by padded tokens).
  TranslateFn translate = [model, max_sentences](const std::vector<std::vector<int32_t>>& sources,
                                                 const BeamOptions& options) {
    BeamOptions o = options;
    o.max_sentences = std::max<int64_t>(max_sentences, static_cast<int64_t>(sources.size()));
    o.max_tokens = 0;
    return model->translator().Translate(sources, o);
  };
  impl.batcher = std::make_unique<DynamicBatcher>(std::move(translate), impl.options.batching,
                                                  [&impl](const BatchReport& b) { impl.metrics.ObserveBatch(b); });
  impl.model.store(model);
}

void TranslationServer::Stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  Impl& impl = *impl_;
  // Requests still waiting for a batch are answered 503 while the workers still run; every
  // answer from now on closes its connection.
  impl.server.Quiesce();
  if (impl.batcher) impl.batcher->Stop();
  impl.server.Stop();
}

}  // namespace sf::serve
