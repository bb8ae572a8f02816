// `sf-trainer generate`: continue text with a language model checkpoint (arch transformer_lm),
// one prompt per line of stdin, one line of output per prompt (the prompt and its continuation,
// detokenized), by beam search or sampling (lm_generator.h). Runs on the CPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace sf {

struct GenerateCommandOptions {
  std::string checkpoint;
  std::optional<int> beam;  // unset: the checkpoint's beam_size
  std::optional<float> lenpen;
  bool sample = false;
  float temperature = 1.0f;
  int64_t top_k = 0;
  uint64_t seed = 1;
  int64_t max_new_tokens = 50;
  bool continuation_only = false;
  int64_t batch_sentences = 64;
  int threads = 0;
  bool cache = true;
};

void AddGenerateFlags(CLI::App& command, GenerateCommandOptions* o);
// Exit status: 0, 1 (generation failed), 2 (the checkpoint or a flag is wrong).
int RunGenerate(const GenerateCommandOptions& o);

}  // namespace sf
