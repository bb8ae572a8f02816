// Translation with a trained Transformer: beam search (greedy when beam = 1) with an
// incremental decoder state.
//
// What is cached: per decoder layer, the self-attention keys and values of every position
// decoded so far ([rows, T, C]), and the cross-attention keys and values of the encoder output,
// computed once per sentence and shared by its beams. Each step feeds only the newest token.
// With `cache = false` every step re-runs the decoder over the whole prefix instead (the
// reference the tests compare against; same arithmetic per position, so the same output).
//
// Beam search follows fairseq's SequenceGenerator: at each step the 2*beam best continuations
// (cumulative log-probability) of a sentence are ranked; an EOS among the first `beam` of them
// finishes a hypothesis with score  sum log p / (length ^ lenpen)  (length counts the EOS);
// the best non-EOS continuations form the next beams. A sentence stops when it has `beam`
// finished hypotheses, and its rows leave the working batch (the caches are compacted). The
// length limit is  max_len_a * (source tokens + EOS) + max_len_b, capped by max_positions - 1;
// at the limit EOS is forced. <pad> and <bos> are never generated.
//
// Inference runs on the fp32 master weights with dropout off, on the CPU, using OpenMP (a model
// trained on a GPU is searched on the host copy of its weights, ParamStore::PullValues). Each
// output of a linear layer is one dot product in a fixed order, so results per position do not
// depend on how many rows are computed together. The model must not be trained concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/models/transformer.h"

namespace sf {

struct BeamOptions {
  int beam = 5;
  float lenpen = 1.0f;
  float max_len_a = 0.0f;
  int64_t max_len_b = 200;
  bool cache = true;
  // The caller's sentences are sorted by length and cut into working batches of at most
  // max_sentences sentences and at most max_tokens source tokens counting padding (0: no token
  // limit; a longer sentence still goes alone). Results do not depend on the batching.
  int64_t max_sentences = 64;
  int64_t max_tokens = 0;
};

struct Hypothesis {
  std::vector<int32_t> tokens;  // without EOS
  float score = 0;              // length-normalised log-probability
};

class Translator {
 public:
  // `model` must outlive the translator; its weights are read at each call.
  explicit Translator(Transformer<float>* model);

  // Sources are token ids without EOS (it is appended). Returns the best hypothesis of each
  // source, in the caller's order. An empty source gives an empty translation. Errors: a token
  // outside the source vocabulary, a source longer than max_positions - 1.
  Result<std::vector<Hypothesis>> Translate(const std::vector<std::vector<int32_t>>& sources,
                                            const BeamOptions& options);

 private:
  struct Batch;
  Status TranslateBatch(const std::vector<const std::vector<int32_t>*>& sources,
                        const BeamOptions& options, std::vector<Hypothesis>* out);
  const float* W(const std::string& name) const;

  Transformer<float>* model_;
  std::vector<float> pe_;  // sinusoidal table [max_positions + pad + 1, C]
};

}  // namespace sf
