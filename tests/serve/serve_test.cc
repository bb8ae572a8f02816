// sf-serve as a user runs it: a tiny checkpoint trained for a few steps on Multi30k-tiny, real
// sf-serve and sf-trainer processes, real HTTP on loopback.
//
//  - 200 requests from 8 concurrent clients (1-3 sentences each, two beam settings) get, byte
//    for byte, what `sf-trainer translate --checkpoint DIR --beam B` prints for those sentences;
//  - concurrent requests share batches (sf_serve_shared_batches_total in /metrics);
//  - bad input gets a 4xx JSON error naming the field (and index), and the server still answers
//    a good request afterwards;
//  - with --token-file and TLS, HTTPS only and the bearer token on every route but /health;
//  - /ready is 503 until the weights are loaded, 200 after (in-process server, real HTTP).
#include <gtest/gtest.h>

#include <filesystem>

#include "serve/translation_server.h"
#include "tests/serve/serve_process.h"

namespace sf::serve {
namespace {
namespace fs = std::filesystem;
using namespace serve_testing;

// A 2-layer, 32-wide model trained for 150 steps (about 2 s on one thread): enough that its
// translations differ from sentence to sentence.
constexpr const char* kTinyConfig = R"(name: tiny-serve
data:
  train: {src: data/train.de, tgt: data/train.en}
  valid: {src: data/valid.de, tgt: data/valid.en}
  tokenizer: {type: sentencepiece, vocab_size: 400, model_type: bpe, shared: true}
hyperparameters:
  arch: transformer
  d_model: 32
  heads: 4
  encoder_layers: 2
  decoder_layers: 2
  ffn_dim: 64
  dropout: 0.1
  share_embeddings: true
  lr: 0.002
  lr_schedule: {type: inverse_sqrt, warmup: 4}
  optimizer: {type: adamw}
  max_tokens: 600
  beam_size: 2
  max_len_b: 8
searcher: {name: single, metric: validation_loss, max_length: {batches: 150}}
)";

class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new sf::testing::TempDir();
    fs::create_directories(dir_->path() + "/data");
    const std::string tiny = sf::testing::DataCopy("multi30k-de-en-tiny");
    for (const char* f : {"train.de", "train.en", "valid.de", "valid.en", "test.de"}) {
      fs::copy_file(tiny + "/" + f, dir_->path() + "/data/" + f);
    }
    dir_->WriteFile("tiny.yaml", kTinyConfig);
    auto trained = Run({Binary("trainer/sf-trainer"), "train", "tiny.yaml", "--output", "run", "--no-test",
                        "--threads", "1", "--quiet"});
    setup_error_ = trained.exit_code == 0 ? "" : "training failed:\n" + trained.output;
    checkpoint_ = dir_->path() + "/run/latest";
    // 24 test sentences and an empty line, translated by the command line with both settings.
    auto test = Lines(ReadFile(dir_->path() + "/data/test.de"));
    sentences_.assign(test.begin(), test.begin() + 24);
    sentences_.push_back("");
    std::string input;
    for (const auto& s : sentences_) input += s + "\n";
    for (const auto& [beam, flags] : std::vector<std::pair<int, std::vector<std::string>>>{
             {3, {"--beam", "3"}}, {1, {"--beam", "1", "--lenpen", "0.6", "--max-len-b", "4"}}}) {
      // stdout alone: through the shell, into a file.
      std::string command = "'" + Binary("trainer/sf-trainer") + "' translate --checkpoint run/latest --threads 1";
      for (const auto& f : flags) command += " " + f;
      auto r = Run({"/bin/sh", "-c", command + " > ref.txt"}, input);
      if (r.exit_code != 0) setup_error_ += "translate failed:\n" + r.output;
      references_[beam] = Lines(ReadFile(dir_->path() + "/ref.txt"));
    }
    if (setup_error_.empty()) {
      server_ = new ServeProcess(dir_->path(), "serve",
                                 {"--checkpoint", checkpoint_, "--port", "0", "--threads", "1", "--max-wait-ms", "40"});
      if (!server_->WaitReady()) setup_error_ = "sf-serve did not get ready:\n" + server_->log();
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static CommandResult Run(const std::vector<std::string>& argv, const std::string& stdin_data = "") {
    CommandOptions o;
    o.working_dir = dir_->path();
    o.stdin_data = stdin_data;
    o.timeout = std::chrono::minutes(3);
    auto r = RunCommand(argv, o);
    return r.ok() ? *r : CommandResult{-1, false, r.status().ToString()};
  }
  // Checks a 200 reply's translations against the command line's for sentences `first`...
  static void ExpectSameAsCommandLine(const HttpReply& reply, size_t first, size_t count, int beam) {
    ASSERT_EQ(reply.status, 200) << reply.error << reply.body;
    auto v = Value::FromJson(reply.body);
    ASSERT_TRUE(v.ok() && v->Find("translations")) << reply.body;
    const auto& list = v->Find("translations")->as_list();
    ASSERT_EQ(list.size(), count) << reply.body;
    for (size_t i = 0; i < count; ++i) {
      const size_t s = (first + i) % sentences_.size();
      EXPECT_EQ(list[i].Find("text")->as_string(), references_.at(beam).at(s))
          << "sentence " << s << " (" << sentences_[s] << "), beam " << beam;
      EXPECT_TRUE(list[i].Find("score")->is_number());
      EXPECT_GE(list[i].Find("tokens")->as_int(), 0);
    }
  }

  static sf::testing::TempDir* dir_;
  static std::string setup_error_, checkpoint_;
  static std::vector<std::string> sentences_;
  static std::map<int, std::vector<std::string>> references_;  // beam -> the CLI's lines
  static ServeProcess* server_;
};
sf::testing::TempDir* Serve::dir_ = nullptr;
std::string Serve::setup_error_, Serve::checkpoint_;
std::vector<std::string> Serve::sentences_;
std::map<int, std::vector<std::string>> Serve::references_;
ServeProcess* Serve::server_ = nullptr;

TEST_F(Serve, ConcurrentRequestsGetExactlyWhatTheCommandLinePrints) {
  ASSERT_EQ(references_[3].size(), sentences_.size());
  ASSERT_EQ(references_[1].size(), sentences_.size());
  // The two settings translate differently, so the comparison sees which one ran.
  EXPECT_NE(references_[3], references_[1]);
  constexpr int kClients = 8, kRequests = 200;
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < kRequests;) {
        // Request i: 1-3 sentences starting at sentence 7i; every fourth with the other setting.
        const size_t first = static_cast<size_t>(i) * 7 % sentences_.size(), count = 1 + static_cast<size_t>(i) % 3;
        const bool other = i % 4 == 3;
        Value::List texts;
        for (size_t k = 0; k < count; ++k) texts.emplace_back(sentences_[(first + k) % sentences_.size()]);
        const HttpReply reply = other ? Translate(server_->port(), texts, 1, R"(, "lenpen": 0.6, "max_len_b": 4)")
                                      : Translate(server_->port(), texts, 3);
        ExpectSameAsCommandLine(reply, first, count, other ? 1 : 3);
      }
    });
  }
  for (auto& t : clients) t.join();
  const std::string metrics = Call(server_->port(), http::verb::get, "/metrics").body;
  EXPECT_EQ(Metric(metrics, "sf_serve_translated_sentences_total"), 399) << metrics;  // sum of 1 + i % 3
  EXPECT_EQ(Metric(metrics, "sf_serve_failed_batches_total"), 0) << metrics;
}

TEST_F(Serve, ConcurrentRequestsShareBatches) {
  const double before = Metric(Call(server_->port(), http::verb::get, "/metrics").body, "sf_serve_shared_batches_total");
  // Eight requests at once: the first waits up to --max-wait-ms 40 for company.
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([c] {
      ExpectSameAsCommandLine(Translate(server_->port(), {Value(sentences_[static_cast<size_t>(c)])}, 3),
                              static_cast<size_t>(c), 1, 3);
    });
  }
  for (auto& t : clients) t.join();
  const std::string metrics = Call(server_->port(), http::verb::get, "/metrics").body;
  EXPECT_GT(Metric(metrics, "sf_serve_shared_batches_total"), before) << metrics;
  // Fewer batches than sentences: requests shared forward passes.
  EXPECT_LT(Metric(metrics, "sf_serve_batch_sentences_count"), Metric(metrics, "sf_serve_batch_sentences_sum"))
      << metrics;
  EXPECT_NE(metrics.find("sf_serve_queue_requests 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("sf_serve_request_duration_seconds_bucket{route=\"/v1/translate\""), std::string::npos);
}

TEST_F(Serve, BadInputGetsAClearErrorAndTheServerGoesOn) {
  std::string many_tokens;
  for (int i = 0; i < 300; ++i) many_tokens += "Hund ";
  struct Case {
    http::verb verb;
    std::string target, body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {http::verb::post, "/v1/translate", R"({"text": ["a")", 400, "malformed JSON"},
      {http::verb::post, "/v1/translate", R"({"beam": 2})", 400, "text: missing"},
      {http::verb::post, "/v1/translate", R"({"text": "Ein Hund."})", 400, "text: expected a list of strings"},
      {http::verb::post, "/v1/translate", R"({"text": []})", 400, "text: empty list"},
      {http::verb::post, "/v1/translate", R"({"text": ["gut", {"a": 1}]})", 400, "text[1]: expected a string"},
      {http::verb::post, "/v1/translate", R"({"text": ["gut", ")" + std::string(5000, 'x') + "\"]}", 400,
       "text[1]: 5000 characters; at most 4096"},
      {http::verb::post, "/v1/translate", R"({"text": ["gut", "gut", ")" + many_tokens + "\"]}", 400,
       "text[2]: "},
      {http::verb::post, "/v1/translate", R"({"text": ["gut"], "beam": 0})", 400, "beam: must be an integer from 1 to 64"},
      {http::verb::post, "/v1/translate", R"({"text": ["gut"], "beam": 65})", 400, "beam: must be an integer from 1 to 64"},
      {http::verb::post, "/v1/translate", R"({"text": ["gut"], "lenpen": "1"})", 400, "lenpen: must be a number"},
      {http::verb::get, "/v2/translate", "", 404, "no route /v2/translate"},
      {http::verb::get, "/v1/translate", "", 405, "/v1/translate takes POST"},
      {http::verb::post, "/health", "{}", 405, "/health takes GET"},
      {http::verb::post, "/v1/translate", std::string(2 << 20, ' '), 413, "request body larger than"},
  };
  for (const Case& c : cases) {
    const HttpReply r = Call(server_->port(), c.verb, c.target, c.body);
    EXPECT_EQ(r.status, c.status) << c.target << " " << c.body.substr(0, 80) << ": " << r.error << r.body;
    auto v = Value::FromJson(r.body);
    ASSERT_TRUE(v.ok() && v->Find("message") && v->Find("code")) << r.body;
    EXPECT_EQ(v->Find("code")->as_int(), c.status);
    EXPECT_NE(v->Find("message")->as_string().find(c.message), std::string::npos)
        << "expected \"" << c.message << "\" in " << r.body;
    if (c.status == 405) {
      EXPECT_FALSE(r.allow.empty());
    }
  }
  const HttpReply too_long = Call(server_->port(), http::verb::post, "/v1/translate",
                                  R"({"text": ["gut", "gut", ")" + many_tokens + "\"]}");
  EXPECT_NE(too_long.body.find("source tokens; this model takes at most 255"), std::string::npos) << too_long.body;
  // Not HTTP at all.
  {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server_->port())));
    asio::write(socket, asio::buffer(std::string("\x16\x03\x01 garbage\r\n\r\n")));
    beast::error_code ec;
    std::string answer(256, '\0');
    answer.resize(socket.read_some(asio::buffer(answer), ec));
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
  }
  // The server goes on.
  ExpectSameAsCommandLine(Translate(server_->port(), {Value(sentences_[5]), Value(sentences_[6])}, 3), 5, 2, 3);
}

TEST_F(Serve, TlsAndBearerToken) {
  // A self-signed certificate for 127.0.0.1, and a token file only the owner may read.
  auto made = Run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                   "-keyout", "key.pem", "-out", "cert.pem", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                   "subjectAltName=IP:127.0.0.1"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string token = "0123456789abcdef0123456789abcdef";
  const std::string token_file = dir_->WriteFile("token", token + "\n");
  fs::permissions(token_file, fs::perms::owner_read | fs::perms::owner_write);
  ServeProcess secure(dir_->path(), "secure",
                      {"--checkpoint", checkpoint_, "--port", "0", "--threads", "1", "--token-file", token_file,
                       "--tls-cert-file", dir_->path() + "/cert.pem", "--tls-key-file", dir_->path() + "/key.pem"});
  ASSERT_GT(secure.port(), 0) << secure.log();
  asio::ssl::context tls(asio::ssl::context::tls_client);
  tls.set_verify_mode(asio::ssl::verify_none);
  ASSERT_TRUE(secure.WaitReady(token, &tls)) << secure.log();
  const int port = secure.port();
  // /health needs no token; everything else does.
  EXPECT_EQ(Call(port, http::verb::get, "/health", "", "", &tls).status, 200);
  for (const char* target : {"/ready", "/metrics", "/v1/translate", "/nope"}) {
    const auto verb = std::string(target) == "/v1/translate" ? http::verb::post : http::verb::get;
    const HttpReply none = Call(port, verb, target, R"({"text": ["gut"]})", "", &tls);
    EXPECT_EQ(none.status, 401) << target << ": " << none.error << none.body;
    EXPECT_NE(none.body.find("bearer token"), std::string::npos) << none.body;
    EXPECT_EQ(Call(port, verb, target, R"({"text": ["gut"]})", token + "x", &tls).status, 401) << target;
  }
  const HttpReply good = Call(port, http::verb::post, "/v1/translate",
                              R"({"text": [)" + Value(sentences_[2]).ToJson() + R"(], "beam": 3})", token, &tls);
  ExpectSameAsCommandLine(good, 2, 1, 3);
  // Plain HTTP gets no answer from an HTTPS server.
  EXPECT_EQ(Call(port, http::verb::get, "/health").status, 0);
  EXPECT_EQ(secure.Stop(), 0) << secure.log();
}

TEST_F(Serve, ReadyOnlyOnceTheWeightsAreLoaded) {
  // In process, so the moment before the weights are loaded can be held.
  ServeOptions o;
  o.port = 0;
  TranslationServer server(o);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(Call(server.port(), http::verb::get, "/health").status, 200);
  const HttpReply not_ready = Call(server.port(), http::verb::get, "/ready");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_EQ(not_ready.retry_after, "1");
  const HttpReply early = Call(server.port(), http::verb::post, "/v1/translate", R"({"text": ["gut"]})");
  EXPECT_EQ(early.status, 503) << early.body;
  EXPECT_NE(early.body.find("loading"), std::string::npos) << early.body;
  auto model = TranslationModel::Load({checkpoint_, "cpu", true});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  server.SetModel(model->get());
  EXPECT_EQ(Call(server.port(), http::verb::get, "/ready").status, 200);
  ExpectSameAsCommandLine(Translate(server.port(), {Value(sentences_[0])}, 3), 0, 1, 3);
  server.Stop();
}

}  // namespace
}  // namespace sf::serve
