// sf-serve's HTTP server: a trained checkpoint answering translation requests (docs/serving.md).
//
// Routes:
//   POST /v1/translate  {"text": [...], "beam", "max_len_a", "max_len_b", "lenpen"} ->
//                       {"translations": [{"text", "score", "tokens"}, ...]} (translate_request.h)
//   GET  /health        200 while the process runs (never needs the token)
//   GET  /ready         200 once SetModel() has been called, 503 before
//   GET  /metrics       Prometheus text (serve_metrics.h)
//
// What a translation is: for the same checkpoint and beam options, each sentence's text is
// byte for byte what `sf-trainer translate --checkpoint DIR` prints for it as one input line
// (the same TranslationModel: tokenizer, search, detokenizer). A sentence the CLI would cut
// (more than max_positions - 3 source tokens) is refused with 400 instead of being cut. A text
// containing line breaks is translated as if they were spaces (the tokenizer's rule).
//
// Batching: the sentences of concurrent requests go through one DynamicBatcher
// (dynamic_batcher.h): one Translator call per batch, requests completed when all their
// sentences are. A connection holds no thread while its request waits for its batch.
//
// Threads: a fixed pool of `http_threads` workers runs one io_context (Boost.Beast,
// asynchronous reads and writes); tokenization, request parsing and detokenization run there.
// The search runs on the batcher's thread (its OpenMP team does the arithmetic).
//
// Errors are JSON {"code": <HTTP status>, "message": "..."}: 400 bad body (naming the field and
// sentence index), 401 missing or wrong token, 404 unknown route, 405 wrong method (with Allow),
// 413 body over max_body_bytes, 503 (with Retry-After: 1) before the model is loaded, when
// max_queue requests already wait or when over max_connections, 500 when a batch's search
// failed. Nothing a client sends stops the server. Each request must arrive, and each response
// be taken, within read_timeout; otherwise the connection is closed.
//
// TLS: with `tls` set the server speaks HTTPS only (TLS 1.2 or newer), as the master does
// (common/tls_files.h loads the files). Token: with `token` non-empty every route but /health
// needs `Authorization: Bearer <token>`, compared in constant time.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "common/http/tls_context.h"
#include "common/tls_files.h"
#include "serve/dynamic_batcher.h"
#include "serve/translate_request.h"
#include "trainer/run/translation_model.h"

namespace sf::serve {

struct ServeOptions {
  std::string bind_address = "127.0.0.1";
  int port = 8090;            // 0: pick a free one (port())
  int http_threads = 4;       // io workers
  int max_connections = 1024;
  size_t max_body_bytes = 1u << 20;
  std::chrono::milliseconds read_timeout{30000};
  ServerCertificate tls;      // empty: plain HTTP
  // With tls: only clients proving this identity connect (the master's proxy; cluster tasks).
  std::optional<http::PeerIdentity> clients;
  std::string token;          // empty: no authentication
  BatchingOptions batching;
  RequestLimits limits;
  // What is served, for sf_serve_model_info{model, version, checkpoint} in /metrics: the registry
  // model and version (empty with --checkpoint DIR) and the checkpoint directory.
  std::string model_name, model_version, checkpoint;
};

class TranslationServer {
 public:
  explicit TranslationServer(ServeOptions options);
  ~TranslationServer();  // Stop()
  TranslationServer(const TranslationServer&) = delete;
  TranslationServer& operator=(const TranslationServer&) = delete;

  // Binds and serves (/health at once; /ready and /v1/translate answer 503 until SetModel).
  // Errors: the address is taken, the TLS certificate or key cannot be used.
  Status Start();
  // The model to translate with, once its weights are loaded: starts the batcher, /ready turns
  // 200. Call once; `model` must outlive the server (or Stop()).
  void SetModel(TranslationModel* model);
  // Stops the batcher after its batch in progress (requests still waiting are failed with 503,
  // answered where the reply goes out before the workers stop), stops accepting, ends
  // connections and joins the threads. Idempotent.
  void Stop();
  int port() const { return port_; }

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace sf::serve
