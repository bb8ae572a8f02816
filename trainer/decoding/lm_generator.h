// Continuing text with a trained language model (TransformerLm, fairseq's transformer_lm): what
// `sf-trainer generate` runs. Two ways to choose the continuation:
//   - beam search (greedy when beam = 1): the common BeamSearch (beam_search.h) over the
//     continuation, scored  sum log p / (length ^ lenpen)  with EOS counted; at the length limit
//     EOS is forced, as in translation;
//   - sampling: each token drawn from softmax(logits / temperature), restricted to the top_k
//     most likely tokens when top_k > 0; a continuation ends at EOS or at the length limit (cut,
//     no EOS forced). Prompt i draws from its own stream of (seed, i), so the output does not
//     depend on how prompts are batched.
// <pad> and <bos> are never generated, and EOS is not the first token (fairseq's min_len 1: a
// continuation is never empty; the probabilities stay those of the whole vocabulary). The input is EOS, then the prompt, then the continuation
// (how the model was trained: sentences after EOS); an empty prompt asks for a sentence from
// scratch.
//
// What is cached: per layer, the self-attention keys and values of every position fed so far
// ([rows, capacity, C]); each step feeds only the newest token of each row. With cache = false
// every step re-runs the model over each row's whole sequence instead (the reference the tests
// compare against; same arithmetic per position: host_decoding.h).
//
// Where it runs: on the host, on the fp32 master weights with dropout off (a model whose weights
// live on a device has them copied to the host view first). Not thread-safe; the model must not
// be trained concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "trainer/decoding/beam_search.h"
#include "trainer/models/transformer_lm.h"

namespace sf {

struct GenerateOptions {
  int beam = 1;                // beam search width (1: greedy); ignored when sampling
  float lenpen = 1.0f;         // beam search length penalty
  bool sample = false;         // draw tokens instead of searching
  float temperature = 1.0f;    // sampling: > 0
  int64_t top_k = 0;           // sampling: 0 = the whole vocabulary
  uint64_t seed = 1;           // sampling
  int64_t max_new_tokens = 50; // continuation tokens before EOS is forced (beam) or the cut
  bool cache = true;
  int64_t max_sentences = 64;  // prompts per working batch
};

class LmGenerator {
 public:
  // `model` must outlive the generator; its weights are read at each call.
  explicit LmGenerator(TransformerLm<float>* model);

  // The continuation of each prompt (token ids without EOS; may be empty), in the caller's
  // order: tokens without EOS, and a score (beam: the search's length-normalised
  // log-probability; sampling: the model's log-probability per token of what was drawn, EOS
  // included when drawn, at temperature 1). The length limit is max_new_tokens, capped so that
  // EOS + prompt + continuation fit the model's max_positions. Errors: a token outside the vocabulary,
  // a prompt longer than max_positions - 2, options out of range.
  Result<std::vector<Hypothesis>> Generate(const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& options);

 private:
  struct Cache;
  Status SearchBatch(const std::vector<const std::vector<int32_t>*>& prompts, const GenerateOptions& options,
                     std::vector<Hypothesis>* out);
  Status SampleBatch(const std::vector<const std::vector<int32_t>*>& prompts, const std::vector<uint64_t>& streams,
                     const GenerateOptions& options, std::vector<Hypothesis>* out);
  // Feeds tokens tok[q] at positions pos[q] of cache rows row[q] through every layer; then the
  // logits [last.size(), V] of the queries listed in `last`.
  void Run(Cache& cache, const std::vector<int32_t>& tok, const std::vector<int64_t>& row,
           const std::vector<int64_t>& pos, const std::vector<int64_t>& last, std::vector<float>* logits);
  int64_t MaxNewTokens(const GenerateOptions& options, int64_t prompt_tokens) const;
  const float* W(const std::string& name) const;

  TransformerLm<float>* model_;
  std::vector<float> pe_;  // sinusoidal table [max_positions + pad + 1, C]
  // Run's activations and scratch, kept across steps (resized, not reallocated).
  std::vector<float> x_, h_, o_, ctx_, qkv_, f_, final_;
};

}  // namespace sf
