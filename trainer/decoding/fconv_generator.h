// The fconv family's Generator (generator.h): beam search with fairseq's incremental
// convolution state (LinearizedConvolution's input buffer).
//
// What is cached per working row (active sentences x beam): for every decoder layer, the inputs
// of its last k-1 positions (k the layer's kernel width; zeros before the sentence starts, as
// the causal padding gives), so each step runs each convolution on one new position; the
// encoder's keys and values (a, b) are computed once per sentence and read by its beams. Each
// step embeds the newest token at its position, runs every layer (convolution, GLU, attention
// with the sqrt(source length) scaling, residual), and scores the row's continuations; after
// BeamSearch::Advance the buffers are gathered by parent row.
//
// It runs on the host with the fp32 master weights (weight-normalised here as the model does:
// w = g v / ||v||), dropout off; a model whose weights live on a device has them copied to the
// host view first. Every hypothesis's score equals the teacher-forced model's score of that
// prefix (the tests check it), and results do not depend on how sentences are batched.
#pragma once

#include <memory>
#include <vector>

#include "trainer/models/fconv.h"
#include "trainer/decoding/generator.h"

namespace sf {

class FConvGenerator final : public Generator {
 public:
  // `model` must outlive the generator; its weights are read at each Translate.
  explicit FConvGenerator(FConvModel<float>* model);
  ~FConvGenerator() override;

  Result<std::vector<Hypothesis>> Translate(const std::vector<std::vector<int32_t>>& sources,
                                            const BeamOptions& options) override;

 private:
  struct Weights;
  Status SearchBatch(const std::vector<const std::vector<int32_t>*>& sources, const BeamOptions& options,
                     std::vector<Hypothesis>* out);

  FConvModel<float>* model_;
  std::unique_ptr<Weights> w_;
};

}  // namespace sf
