#include "serve/translation_server.h"

#include <openssl/ssl.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/log.h"
#include "common/secret_file.h"
#include "serve/serve_metrics.h"

namespace sf::serve {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

using Request = http::request<http::string_body>;

// What a request is answered with, before it becomes bytes.
struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  bool retry_after = false;  // 503s: Retry-After: 1
  std::string allow;         // 405s: the methods the route takes
  bool close = false;        // end the connection after it
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
  http::verb method;
};
constexpr std::array<Route, 4> kRoutes = {{{"/v1/translate", http::verb::post},
                                            {"/health", http::verb::get},
                                            {"/ready", http::verb::get},
                                            {"/metrics", http::verb::get}}};

Result<std::unique_ptr<asio::ssl::context>> ServerTlsContext(const ServerCertificate& cert) {
  try {
    auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                         asio::ssl::context::no_tlsv1_1);
    SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
    context->use_certificate_chain(asio::buffer(cert.cert_chain_pem));
    context->use_private_key(asio::buffer(cert.private_key_pem), asio::ssl::context::pem);
    return context;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("TLS: cannot use the certificate and key: ") + e.what());
  }
}

}  // namespace

struct TranslationServer::Impl {
  explicit Impl(ServeOptions o) : options(std::move(o)) {
    metrics.SetModelInfo(options.model_name, options.model_version, options.checkpoint);
  }

  // Called when a deferred reply is ready; `make` runs on the connection's strand.
  using Later = std::function<void(std::function<Reply()> make)>;

  // Answers `req` now, or returns nothing and calls `later` once (a translation). `route` is
  // set to the route's name for metrics.
  std::optional<Reply> Dispatch(const Request& req, std::string* route, const Later& later);
  std::optional<Reply> Translate(const Request& req, const Later& later);
  bool Authorized(const Request& req) const;

  ServeOptions options;
  ServeMetrics metrics;
  std::unique_ptr<DynamicBatcher> batcher;         // made by SetModel, before `model` is published
  std::atomic<TranslationModel*> model{nullptr};
  std::unique_ptr<asio::ssl::context> tls_context;  // declared before io: connections use it
  std::atomic<bool> stopping{false};
  std::atomic<int> connections{0};
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> workers;

  void Accept();
};

bool TranslationServer::Impl::Authorized(const Request& req) const {
  if (options.token.empty()) return true;
  auto it = req.find(http::field::authorization);
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
    Reply r = Error(405, std::string(target) + " takes " + std::string(http::to_string(found->method)));
    r.allow = std::string(http::to_string(found->method));
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

namespace {

// One client connection on the worker pool: (TLS handshake,) then request after request while
// kept alive; a request's handler either answers at once or hands the answer to the batcher,
// and the connection holds no thread meanwhile. kTls: a TLS stream over the TCP one.
template <bool kTls>
class Connection : public std::enable_shared_from_this<Connection<kTls>> {
 public:
  using Stream = std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;

  // `counted`: the connection holds one of max_connections (given back when it ends); when
  // false it is over the cap and only gets a 503.
  template <typename... TlsContext>
  Connection(TranslationServer::Impl* impl, tcp::socket socket, bool counted, TlsContext&... tls)
      : impl_(impl), stream_(std::move(socket), tls...), counted_(counted) {}
  ~Connection() {
    if (counted_) impl_->connections.fetch_sub(1);
  }

  void Begin() {
    auto self = this->shared_from_this();
    if constexpr (kTls) {
      Tcp().expires_after(impl_->options.read_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server, [self](beast::error_code ec) {
        if (ec) return self->Shut();  // not TLS, or the client refused the certificate
        self->Admit();
      });
    } else {
      asio::dispatch(stream_.get_executor(), [self] { self->Admit(); });
    }
  }

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void Admit() {
    if (counted_) return ReadRequest();
    Reply r = Error(503, "too many connections (" + std::to_string(impl_->options.max_connections) + ")");
    r.close = true;
    route_ = "over_capacity";
    started_ = Clock::now();
    Send(std::move(r));
  }

  void ReadRequest() {
    if (impl_->stopping) return Shut();
    parser_.emplace();
    parser_->body_limit(impl_->options.max_body_bytes);
    parser_->header_limit(16 * 1024);
    Tcp().expires_after(impl_->options.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRequest(ec); });
  }

  void OnRequest(beast::error_code ec) {
    started_ = Clock::now();
    if (ec == http::error::body_limit) {
      route_ = "body_too_large";
      Reply r = Error(413, "request body larger than " + std::to_string(impl_->options.max_body_bytes) + " bytes");
      r.close = true;
      return Send(std::move(r));
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == asio::ssl::error::stream_truncated) {
      return Shut();
    }
    if (ec) {
      route_ = "malformed";
      Reply r = Error(400, "malformed HTTP request: " + ec.message());
      r.close = true;
      return Send(std::move(r));
    }
    Request req = parser_->release();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    std::optional<Reply> reply;
    try {
      reply = impl_->Dispatch(req, &route_, [self = this->shared_from_this()](std::function<Reply()> make) {
        asio::post(self->stream_.get_executor(), [self, make = std::move(make)] { self->Send(self->Make(make)); });
      });
    } catch (const std::exception& e) {
      reply = Error(500, std::string("internal error: ") + e.what());
    }
    if (reply) Send(std::move(*reply));
  }

  Reply Make(const std::function<Reply()>& make) {
    try {
      return make();
    } catch (const std::exception& e) {
      return Error(500, std::string("internal error: ") + e.what());
    }
  }

  void Send(Reply reply) {
    const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    impl_->metrics.ObserveRequest(route_, reply.status, seconds);
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status),
                                                                   version_ ? version_ : 11);
    res->set(http::field::server, "sf-serve");
    res->set(http::field::content_type, reply.content_type);
    if (reply.retry_after) res->set(http::field::retry_after, "1");
    if (!reply.allow.empty()) res->set(http::field::allow, reply.allow);
    if (reply.status == 401) res->set(http::field::www_authenticate, "Bearer");
    res->body() = std::move(reply.body);
    res->keep_alive(keep_alive_ && !reply.close && !impl_->stopping);
    res->prepare_payload();
    const bool drain = reply.close;
    Tcp().expires_after(impl_->options.read_timeout);
    http::async_write(stream_, *res, [self = this->shared_from_this(), res, drain](beast::error_code ec, size_t) {
      if (ec) return self->Shut();
      if (drain) return self->Drain(0);
      if (!res->keep_alive()) return self->Shut();
      self->ReadRequest();
    });
  }

  // After an error that ends the connection: stop sending, then read and drop what the client
  // still sends (at most 64 MiB, 5 s), so it gets the answer rather than a reset.
  void Drain(size_t dropped) {
    if (dropped == 0) {
      beast::error_code ec;
      Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
      Tcp().expires_after(std::chrono::seconds(5));
      sink_.resize(16384);
    }
    Tcp().async_read_some(asio::buffer(sink_), [self = this->shared_from_this(), dropped](beast::error_code ec,
                                                                                         size_t n) {
      if (!ec && dropped + n < (64u << 20)) self->Drain(dropped + n);
    });
  }

  void Shut() {
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    Tcp().socket().close(ec);
  }

  TranslationServer::Impl* impl_;
  Stream stream_;
  bool counted_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string route_ = "unknown";
  Clock::time_point started_ = Clock::now();
  unsigned version_ = 11;
  bool keep_alive_ = false;
  std::vector<char> sink_;
};

}  // namespace

void TranslationServer::Impl::Accept() {
  acceptor->async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping || !acceptor->is_open()) return;
    if (ec) {  // out of descriptors and the like: try again shortly rather than spin
      auto timer = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(50));
      timer->async_wait([this, timer](beast::error_code) {
        if (!stopping) Accept();
      });
      return;
    }
    const bool counted = connections.fetch_add(1) < options.max_connections;
    if (!counted) connections.fetch_sub(1);
    if (tls_context) {
      std::make_shared<Connection<true>>(this, std::move(socket), counted, *tls_context)->Begin();
    } else {
      std::make_shared<Connection<false>>(this, std::move(socket), counted)->Begin();
    }
    Accept();
  });
}

TranslationServer::TranslationServer(ServeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

TranslationServer::~TranslationServer() { Stop(); }

Status TranslationServer::Start() {
  Impl& impl = *impl_;
  if (!impl.options.tls.cert_chain_pem.empty()) {
    SF_ASSIGN_OR_RETURN(impl.tls_context, ServerTlsContext(impl.options.tls));
  }
  try {
    tcp::endpoint endpoint(asio::ip::make_address(impl.options.bind_address),
                           static_cast<uint16_t>(impl.options.port));
    impl.acceptor = std::make_unique<tcp::acceptor>(impl.io);
    impl.acceptor->open(endpoint.protocol());
    impl.acceptor->set_option(asio::socket_base::reuse_address(true));
    impl.acceptor->bind(endpoint);
    impl.acceptor->listen(asio::socket_base::max_listen_connections);
    port_ = impl.acceptor->local_endpoint().port();
  } catch (const std::exception& e) {
    return Unavailable("cannot listen on " + impl.options.bind_address + ":" + std::to_string(impl.options.port) +
                       ": " + e.what());
  }
  impl.work.emplace(impl.io.get_executor());
  impl.Accept();
  for (int i = 0; i < std::max(1, impl.options.http_threads); ++i) {
    impl.workers.emplace_back([&impl] {
      for (;;) {
        try {
          impl.io.run();
          return;
        } catch (const std::exception& e) {
          log::Error("serve", {{"event", "handler_exception"}, {"error", e.what()}});
        }
      }
    });
  }
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
  // Requests still waiting for a batch are answered 503 while the workers still run.
  if (impl.batcher) impl.batcher->Stop();
  impl.work.reset();
  impl.io.stop();
  for (std::thread& t : impl.workers) t.join();
  impl.workers.clear();
  if (impl.acceptor) {
    beast::error_code ec;
    impl.acceptor->close(ec);
  }
}

}  // namespace sf::serve
