// The LSTM family's Generator (generator.h): beam search with an incremental decoder state.
//
// What is cached per working row (active sentences x beam): each decoder layer's h and c, and
// the input feed (the previous step's attention output), [rows, H] each; the encoder's outputs
// are computed once per batch and laid out per row ([S, rows, Ds]). Each step feeds only the
// newest token through LstmModel::DecodeStep, the same arithmetic per row as the teacher-forced
// forward, so a hypothesis's score equals the one recomputed from the whole prefix (the tests
// check it). After BeamSearch::Advance the states are gathered by parent row; the encoder rows
// only when a sentence finished (within a sentence every beam reads the same ones).
//
// Everything runs with the backend's ops, on the CPU and on a GPU alike; per step only the
// chosen tokens go in and each row's 2*beam best continuations come out. The model's compute
// dtype is used as in training (a bf16 model decodes with its bf16 weight mirror), dropout off.
#pragma once

#include <memory>
#include <vector>

#include "trainer/core/tensor.h"
#include "trainer/decoding/generator.h"
#include "trainer/models/lstm_model.h"

namespace sf {

class LstmGenerator final : public Generator {
 public:
  // `model` must outlive the generator.
  explicit LstmGenerator(LstmModel<float>* model) : model_(model) {}

  Result<std::vector<Hypothesis>> Translate(const std::vector<std::vector<int32_t>>& sources,
                                            const BeamOptions& options) override;

 private:
  Status SearchBatch(const std::vector<const std::vector<int32_t>*>& sources, const BeamOptions& options,
                     std::vector<Hypothesis>* out);

  LstmModel<float>* model_;
  std::vector<Tensor> h_, c_;
  Tensor feed_, enc_, enc_spare_, pad_, tokens_, index_;
  DeviceBeamStep step_;
};

}  // namespace sf
