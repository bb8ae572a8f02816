// End to end: one experiment sweeps `arch` over three model families (fairseq's lstm and fconv,
// and the Transformer) on a real cluster — PostgreSQL, sf-master, sf-agent, sf-trainer processes on
// loopback. Each trial trains its family, validates and checkpoints; the checkpoint's weights say
// which family they hold; the REST API gives every trial its arch beside its metric, which is
// what the dashboard's trials table and parallel coordinates compare, and its model's size as the
// trial reported it (`parameters`), which must be what its checkpoint's weights hold.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/reported_parameters.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;

// The __metadata__ of a safetensors file: 8 bytes of header length, then the JSON header.
Value WeightsMetadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  auto v = Value::FromJson(header);
  EXPECT_TRUE(v.ok()) << path;
  const Value* m = v.ok() ? v->Find("__metadata__") : nullptr;
  return m ? *m : Value();
}

TEST(ArchSweepEndToEnd, OneGridTrainsAnLstmAConvS2SAndATransformerSideBySide) {
  Cluster cluster(2, 1);
  const std::string data = DataCopy("multi30k-de-en-tiny");
  // Only hyperparameters every family takes: the presets size each model.
  const std::string yaml = "name: arch-sweep\n"
                           "data:\n"
                           "  train: {src: " + data + "/train.de, tgt: " + data + "/train.en}\n"
                           "  valid: {src: " + data + "/valid.de, tgt: " + data + "/valid.en}\n"
                           "  tokenizer: {type: sentencepiece, vocab_size: 400, model_type: bpe, shared: true}\n"
                           "hyperparameters:\n"
                           "  arch: {type: categorical, vals: [lstm_small, transformer_tiny, fconv_small]}\n"
                           "  encoder_layers: 1\n  decoder_layers: 1\n"
                           "  dropout: 0.1\n"
                           "  lr: 0.002\n"
                           "  lr_schedule: {type: inverse_sqrt, warmup: 4}\n"
                           "  max_tokens: 512\n"
                           "searcher:\n"
                           "  name: grid\n"
                           "  metric: validation_loss\n"
                           "  max_length: {batches: 8}\n"
                           "  max_concurrent_trials: 2\n"
                           "scheduling_unit: 4\n"
                           "min_checkpoint_period: {batches: 8}\n";
  int64_t id = cluster.Submit(yaml);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(cluster.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", std::chrono::seconds(400)))
      << cluster.ExperimentState(id);

  Value trials = cluster.Trials(id);
  ASSERT_EQ(trials.as_list().size(), 3u);
  std::map<int64_t, std::string> arch_of;
  for (const Value& t : trials.as_list()) {
    EXPECT_EQ(t.Find("state")->as_string(), "TRIAL_STATE_COMPLETED");
    const Value* arch = t.Find("hparams") ? t.Find("hparams")->Find("arch") : nullptr;
    ASSERT_NE(arch, nullptr) << t.ToJson();
    arch_of[Id(t)] = arch->as_string();
    auto [code, m] = cluster.Get("/api/v1/trials/" + std::to_string(Id(t)) + "/metrics?kind=validation");
    ASSERT_EQ(code, 200);
    ASSERT_EQ(m.Find("metrics")->as_list().size(), 1u) << arch->as_string();
    EXPECT_TRUE(m.Find("metrics")->as_list()[0].Find("values")->Find("validation_loss")->is_number());
  }
  std::set<std::string> archs;
  for (const auto& [trial, arch] : arch_of) archs.insert(arch);
  EXPECT_EQ(archs, (std::set<std::string>{"lstm_small", "transformer_tiny", "fconv_small"}));

  // Each trial's weights are its family's, described in their own metadata.
  auto [code, cks] = cluster.Get("/api/v1/experiments/" + std::to_string(id) + "/checkpoints");
  ASSERT_EQ(code, 200);
  std::set<std::string> families;
  for (const Value& c : cks.Find("checkpoints")->as_list()) {
    if (c.Find("state")->as_string() != "ACTIVE") continue;
    const std::string path = c.Find("path")->as_string() + "/model.safetensors";
    ASSERT_TRUE(fs::exists(path)) << path;
    const Value meta = WeightsMetadata(path);
    ASSERT_TRUE(meta.Find("arch")) << path;
    const std::string family = meta.Find("arch")->as_string();
    families.insert(family);
    const std::string arch = arch_of[std::stoll(c.Find("trialId")->as_string())];
    EXPECT_EQ(family, arch == "lstm_small" ? "lstm" : arch == "fconv_small" ? "fconv" : "transformer") << path;
    if (family == "lstm") {
      EXPECT_EQ(meta.Find("encoder_bidirectional")->as_string(), "true");
    }
  }
  EXPECT_EQ(families, (std::set<std::string>{"lstm", "transformer", "fconv"}));

  // Each family reports its own model's size: the values its weights hold, different per family.
  const std::map<int64_t, int64_t> parameters = ExpectReportedParametersAreTheCheckpointedModels(cluster, id);
  EXPECT_EQ(parameters.size(), 3u);
  std::set<int64_t> sizes;
  for (const auto& [trial, count] : parameters) sizes.insert(count);
  EXPECT_EQ(sizes.size(), 3u) << "three families of three sizes";
}

}  // namespace
}  // namespace sf::testing
