// The Transformer's Generator (generator.h): beam search (greedy when beam = 1) with an
// incremental decoder state.
//
// What is cached: per decoder layer, the self-attention keys and values of every position
// decoded so far ([rows, T, C]), and the cross-attention keys and values of the encoder output,
// computed once per sentence and shared by its beams. Each step feeds only the newest token.
// With `cache = false` every step re-runs the decoder over the whole prefix instead (the
// reference the tests compare against; same arithmetic per position, so the same output).
//
// The selection of beams (fairseq's SequenceGenerator) is BeamSearch (beam_search.h); the
// length limit is max_len_a * (source tokens + EOS) + max_len_b, capped by max_positions - 2;
// at the limit EOS is forced. <pad> and <bos> are never generated.
//
// Where it runs: inference uses the fp32 master weights with dropout off.
//   - A model whose weights are host memory (the CPU engine) is searched here, with OpenMP.
//     Each output of a linear layer is one dot product in a fixed order, so results per
//     position do not depend on how many rows are computed together.
//   - A model on a device (a GPU) is searched there by DeviceDecoder (device_decoder.h), with
//     the backend's ops; per step only the chosen tokens go in and each row's 2*beam best
//     continuations come out. Its results equal the host search's up to the rounding of the
//     device's GEMMs (the tests compare the two).
// The model must not be trained concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/decoding/beam_search.h"
#include "trainer/decoding/generator.h"
#include "trainer/models/transformer.h"

namespace sf {

class DeviceDecoder;

class Translator final : public Generator {
 public:
  // `model` must outlive the translator; its weights are read at each call.
  explicit Translator(Transformer<float>* model);
  ~Translator() override;

  // Sources are token ids without EOS (it is appended). Returns the best hypothesis of each
  // source, in the caller's order. An empty source gives an empty translation. Errors: a token
  // outside the source vocabulary, a source longer than max_positions - 1.
  Result<std::vector<Hypothesis>> Translate(const std::vector<std::vector<int32_t>>& sources,
                                            const BeamOptions& options) override;

 private:
  struct Batch;
  Status TranslateBatch(const std::vector<const std::vector<int32_t>*>& sources,
                        const BeamOptions& options, std::vector<Hypothesis>* out);
  const float* W(const std::string& name) const;

  Transformer<float>* model_;
  std::unique_ptr<DeviceDecoder> device_;  // when the model's weights are not host memory
  std::vector<float> pe_;  // sinusoidal table [max_positions + pad + 1, C]
};

}  // namespace sf
