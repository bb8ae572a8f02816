// sf-serve on an LSTM checkpoint (fairseq's lstm family, arch: lstm_small made tiny): the server
// loads any family from the checkpoint's metadata and answers, byte for byte, what
// `sf-trainer translate --checkpoint DIR` prints, under concurrent requests that share batches
// (the LSTM's incremental search batches sentences of several requests together).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "tests/serve/serve_process.h"

namespace sf::serve {
namespace {
namespace fs = std::filesystem;
using namespace serve_testing;

constexpr const char* kLstmConfig = R"(name: tiny-serve-lstm
data:
  train: {src: data/train.de, tgt: data/train.en}
  valid: {src: data/valid.de, tgt: data/valid.en}
  tokenizer: {type: sentencepiece, vocab_size: 400, model_type: bpe, shared: true}
hyperparameters:
  arch: lstm_small
  encoder_embed_dim: 32
  encoder_hidden_size: 24
  decoder_embed_dim: 32
  decoder_hidden_size: 40
  decoder_out_embed_dim: 32
  dropout: 0.1
  lr: 0.005
  lr_schedule: {type: inverse_sqrt, warmup: 4}
  optimizer: {type: adamw}
  max_tokens: 600
  beam_size: 2
  max_len_b: 8
searcher: {name: single, metric: validation_loss, max_length: {batches: 400}}
)";

TEST(ServeLstm, ConcurrentRequestsGetExactlyWhatTheCommandLinePrints) {
  sf::testing::TempDir dir;
  fs::create_directories(dir.path() + "/data");
  const std::string tiny = sf::testing::DataCopy("multi30k-de-en-tiny");
  for (const char* f : {"train.de", "train.en", "valid.de", "valid.en", "test.de"}) {
    fs::copy_file(tiny + "/" + f, dir.path() + "/data/" + f);
  }
  dir.WriteFile("lstm.yaml", kLstmConfig);
  auto run = [&](const std::vector<std::string>& argv, const std::string& in = "") {
    CommandOptions o;
    o.working_dir = dir.path();
    o.stdin_data = in;
    o.timeout = std::chrono::minutes(3);
    auto r = RunCommand(argv, o);
    return r.ok() ? *r : CommandResult{-1, false, r.status().ToString()};
  };
  auto trained = run({Binary("trainer/sf-trainer"), "train", "lstm.yaml", "--output", "run", "--no-test", "--threads",
                      "1", "--quiet"});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto test = Lines(ReadFile(dir.path() + "/data/test.de"));
  std::vector<std::string> sentences(test.begin(), test.begin() + 16);
  sentences.push_back("");
  std::string input;
  for (const auto& s : sentences) input += s + "\n";
  auto cli = run({"/bin/sh", "-c",
                  "'" + Binary("trainer/sf-trainer") + "' translate --checkpoint run/latest --threads 1 --beam 3 > ref.txt"},
                 input);
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  const std::vector<std::string> want = Lines(ReadFile(dir.path() + "/ref.txt"));
  ASSERT_EQ(want.size(), sentences.size());
  EXPECT_GT(std::set<std::string>(want.begin(), want.end()).size(), 5u) << "translations differ by sentence";

  ServeProcess server(dir.path(), "serve",
                      {"--checkpoint", dir.path() + "/run/latest", "--port", "0", "--threads", "1", "--max-wait-ms", "40"});
  ASSERT_TRUE(server.WaitReady()) << server.log();
  constexpr int kClients = 4, kRequests = 40;
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < kRequests;) {
        const size_t first = static_cast<size_t>(i) * 5 % sentences.size(), count = 1 + static_cast<size_t>(i) % 3;
        Value::List texts;
        for (size_t k = 0; k < count; ++k) texts.emplace_back(sentences[(first + k) % sentences.size()]);
        const HttpReply reply = Translate(server.port(), texts, 3);
        ASSERT_EQ(reply.status, 200) << reply.error << reply.body;
        auto v = Value::FromJson(reply.body);
        ASSERT_TRUE(v.ok() && v->Find("translations")) << reply.body;
        const auto& list = v->Find("translations")->as_list();
        ASSERT_EQ(list.size(), count) << reply.body;
        for (size_t k = 0; k < count; ++k) {
          const size_t s = (first + k) % sentences.size();
          EXPECT_EQ(list[k].Find("text")->as_string(), want[s]) << "sentence " << s << " (" << sentences[s] << ")";
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  const std::string metrics = Call(server.port(), http::verb::get, "/metrics").body;
  EXPECT_EQ(Metric(metrics, "sf_serve_failed_batches_total"), 0) << metrics;
}

}  // namespace
}  // namespace sf::serve
