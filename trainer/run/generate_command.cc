#include "trainer/run/generate_command.h"

#include <omp.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include "common/command_line.h"
#include "trainer/data/sentencepiece_model.h"
#include "trainer/decoding/lm_generator.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/device_select.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/text_run.h"

namespace sf {
namespace {

// A language model checkpoint loaded on the CPU with its tokenizer.
struct LoadedLm {
  std::unique_ptr<data::SentencePieceModel> tokenizer;
  std::unique_ptr<Backend<float>> backend;  // before the model it serves
  std::unique_ptr<Seq2SeqModel<float>> model;
  GenerateOptions defaults;
};

Result<LoadedLm> LoadLm(const std::string& dir) {
  SF_ASSIGN_OR_RETURN(CheckpointContents ck, ReadCheckpoint(dir));
  auto spec = CheckpointModelSpec(ck);
  if (!spec.ok() || ck.sentencepiece_model.empty()) {
    return InvalidArgument("checkpoint " + dir + " was not written by `sf-trainer train` on text (" +
                           (spec.ok() ? "no tokenizer" : spec.status().message()) + ")");
  }
  if (!spec->language_model()) {
    return InvalidArgument("checkpoint " + dir + " holds a " + spec->family() +
                           " translation model, not a language model (use `sf-trainer translate`)");
  }
  LoadedLm lm;
  // The model reads and writes the target side (one model for monolingual text).
  const std::string& serialized =
      ck.sentencepiece_target_model.empty() ? ck.sentencepiece_model : ck.sentencepiece_target_model;
  auto tok = data::SentencePieceModel::FromSerialized(serialized);
  if (!tok.ok()) return InvalidArgument("checkpoint tokenizer: " + tok.status().message());
  lm.tokenizer = std::move(*tok);
  SF_ASSIGN_OR_RETURN(DeviceChoice cpu, ParseDevice("cpu"));
  SF_ASSIGN_OR_RETURN(lm.backend, MakeTrainingBackend(cpu));
  lm.model = MakeModel(*spec, lm.backend.get(), DType::kF32);
  SF_RETURN_IF_ERROR(LoadModelWeights(ck, dir, *lm.model));
  const Value* hp = ck.state.Find("hparams");
  auto hparams = config::DecodeTrialHyperparameters(hp ? *hp : Value(Value::Map{}));
  if (!hparams.ok()) return hparams.status().WithContext("checkpoint " + dir + " trainer_state.json");
  const BeamOptions beam = BeamFromHyperparameters(*hparams);
  lm.defaults.beam = beam.beam;
  lm.defaults.lenpen = beam.lenpen;
  return lm;
}

}  // namespace

void AddGenerateFlags(CLI::App& cmd, GenerateCommandOptions* o) {
  cmd.add_option("--checkpoint", o->checkpoint, "language model checkpoint directory (arch transformer_lm)")
      ->required();
  cmd.add_option("--beam", o->beam, "beam size; 1 is greedy (default: the checkpoint's beam_size)")
      ->check(cmdline::AtLeast(1));
  cmd.add_option("--lenpen", o->lenpen, "beam-search length penalty (default: the checkpoint's)");
  cmd.add_flag("--sample", o->sample, "draw each token (with --temperature, --top-k, --seed) instead of searching");
  cmd.add_option("--temperature", o->temperature, "sampling temperature (> 0)")->default_val(1.0);
  cmd.add_option("--top-k", o->top_k, "sample from the k most likely tokens (0: all)")
      ->check(cmdline::AtLeast(0))
      ->default_val(0);
  cmd.add_option("--seed", o->seed, "sampling seed (prompt i draws from stream (seed, i))")->default_val(1);
  cmd.add_option("--max-new-tokens", o->max_new_tokens, "continuation tokens at most")
      ->check(cmdline::AtLeast(1))
      ->default_val(50);
  cmd.add_flag("--continuation-only", o->continuation_only, "print only the continuation, not the prompt");
  cmd.add_option("--batch-sentences", o->batch_sentences, "prompts per batch")->check(cmdline::AtLeast(1));
  cmd.add_option("--threads", o->threads, "OpenMP threads (0: OpenMP's default)")->check(cmdline::AtLeast(0));
  cmd.add_flag_callback("--no-cache", [o] { o->cache = false; },
                        "recompute the model over each whole sequence every step (the reference)");
}

int RunGenerate(const GenerateCommandOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  auto loaded = LoadLm(options.checkpoint);
  if (!loaded.ok()) {
    std::fprintf(stderr, "sf-trainer generate: %s\n", loaded.status().message().c_str());
    return 2;
  }
  GenerateOptions g = loaded->defaults;
  if (options.beam) g.beam = *options.beam;
  if (options.lenpen) g.lenpen = *options.lenpen;
  g.sample = options.sample;
  g.temperature = options.temperature;
  g.top_k = options.top_k;
  g.seed = options.seed;
  g.max_new_tokens = options.max_new_tokens;
  g.cache = options.cache;
  g.max_sentences = options.batch_sentences;
  if (g.sample && !(g.temperature > 0.0f)) {
    std::fprintf(stderr, "sf-trainer generate: --temperature must be > 0\n");
    return 2;
  }
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  const int64_t longest = loaded->model->shape().max_positions - 2;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<int32_t> ids = loaded->tokenizer->Encode(line);
    if (static_cast<int64_t>(ids.size()) > longest) {
      std::fprintf(stderr, "sf-trainer generate: prompt %zu has %zu tokens; the model takes at most %lld\n",
                   prompts.size() + 1, ids.size(), static_cast<long long>(longest));
      return 1;
    }
    prompts.push_back(std::move(ids));
  }
  LmGenerator generator(static_cast<TransformerLm<float>*>(loaded->model.get()));
  auto hyps = generator.Generate(prompts, g);
  if (!hyps.ok()) {
    std::fprintf(stderr, "sf-trainer generate: %s\n", hyps.status().message().c_str());
    return 1;
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> ids = options.continuation_only ? std::vector<int32_t>{} : prompts[i];
    ids.insert(ids.end(), (*hyps)[i].tokens.begin(), (*hyps)[i].tokens.end());
    std::fputs((loaded->tokenizer->Decode(ids) + "\n").c_str(), stdout);
  }
  return 0;
}

}  // namespace sf
