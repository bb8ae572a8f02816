// Beam search (greedy when beam = 1) over a trained model of any family: what validation BLEU,
// `sf-trainer translate`, the test-set translation and sf-serve call. Each family has its own
// incremental decoder state (the Transformer's keys/values per layer: translator.h; the LSTM's
// h, c per layer and the input feed: lstm_generator.h); the selection of beams is the common
// BeamSearch (beam_search.h), and the batching of the caller's sentences is shared
// (SearchInBatches).
//
// The model must not be trained concurrently; a generator is driven by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "trainer/decoding/beam_search.h"
#include "trainer/models/seq2seq_model.h"

namespace sf {

class Generator {
 public:
  virtual ~Generator() = default;
  // Sources are token ids without EOS (it is appended). Returns the best hypothesis of each
  // source, in the caller's order. An empty source gives an empty translation. Errors: a token
  // outside the source vocabulary, a source longer than max_positions - 2 tokens.
  virtual Result<std::vector<Hypothesis>> Translate(const std::vector<std::vector<int32_t>>& sources,
                                                    const BeamOptions& options) = 0;
};

// The generator of `model`'s family; `model` must outlive it. Null for a language model, which
// has no source to translate (lm_generator.h).
std::unique_ptr<Generator> MakeGenerator(Seq2SeqModel<float>* model);

// Checks the sources against `shape` (the errors above), sorts them by length and cuts them
// into working batches (BeamOptions: max_sentences, max_tokens counting padding and EOS; a
// longer sentence goes alone), calls `search` on each with the batch's sources in order, and
// returns the hypotheses in the caller's order.
using BatchSearch = std::function<Status(const std::vector<const std::vector<int32_t>*>& sources,
                                         std::vector<Hypothesis>* out)>;
Result<std::vector<Hypothesis>> SearchInBatches(const std::vector<std::vector<int32_t>>& sources,
                                                const BeamOptions& options, const ModelShape& shape,
                                                const BatchSearch& search);

}  // namespace sf
