// Beam search on the model's own device (a GPU): the encoder, the incremental decoder, the
// output projection and the scoring of continuations all run as the backend's ops on the
// device-resident fp32 master weights; the host only does BeamSearch's bookkeeping.
//
// Per decoding step the host sends the rows' newest tokens, their cumulative scores and, when
// beams were reordered or sentences finished, the gather indices; it receives each row's 2*beam
// best continuations and its EOS score (Backend::BeamScores), one copy and one sync per step.
//
// Device state of one working batch (S sentences, N = active sentences * beam rows, Ts source
// positions, C = d_model, H heads of D):
//   - cross-attention keys/values per decoder layer, head-major [A, H, Ts, D] for the A active
//     sentences, computed once from the encoder output and compacted (a row gather of each
//     sentence's Ts*C block) when sentences finish; with the queries split into [A, H, beam, D],
//     each (sentence, head) is one batch entry of the two cross-attention GEMMs;
//   - self-attention keys/values per decoder layer, time-major [t, N, C]: step t appends one
//     [N, C] block, and reordering beams gathers rows. Time-major makes every (row, head) a
//     matrix at offset (row*H + head)*D with leading dimension N*C, so each attention product is
//     one strided batched GEMM over N*H heads.
// Dropout is off and the weights are read in fp32 whatever the training precision.
// Used by Translator for models whose weights are not host memory; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/core/tensor.h"
#include "trainer/decoding/beam_search.h"
#include "trainer/models/transformer.h"

namespace sf {

class DeviceDecoder {
 public:
  // `model` must outlive the decoder.
  explicit DeviceDecoder(Transformer<float>* model);

  // Translates one working batch (sources already checked by Translator): out gets the best
  // hypothesis of each source, in order; an empty source gets an empty one.
  Status TranslateBatch(const std::vector<const std::vector<int32_t>*>& sources,
                        const BeamOptions& options, std::vector<Hypothesis>* out);

 private:
  struct Layer;  // device pointers of one decoder layer's weights
  const float* W(const std::string& name) const;
  // y [rows, out] = x [rows, in] . w^T (+ b), w stored [out, in].
  void Linear(const float* x, int64_t rows, int64_t in, const float* w, const float* b,
              int64_t out, float* y);
  void LayerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows);
  // Row r of t [*, cols] becomes old row index[r] for r < rows; t swaps storage with `spare`.
  void GatherRows(const int32_t* index, int64_t rows, int64_t cols, Tensor& t, Tensor& spare);
  // x += fc2(act(fc1(.))) with the layer's norm before (pre-norm) or after (post-norm); x is
  // swapped with h_ when the result lands there.
  void FeedForward(Tensor& x, int64_t rows, const std::string& prefix, const std::string& norm);
  // The encoder over the padded sources; returns its output [S*Ts, C] in enc_.
  void Encode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
              int64_t sentences, int64_t src_len);

  Transformer<float>* model_;
  Backend<float>& be_;
  Tensor pe_;  // sinusoidal table [max_positions + pad + 1, C]
  // Scratch, re-planned per batch and step (Resize keeps a block big enough).
  Tensor x_, h_, o_, q_, qkv_, heads_, ctx_, f_, scores_, probs_, mean_, rstd_, logits_;
  Tensor tokens_, positions_, src_pad_, index_, enc_;
  DeviceBeamStep step_;
  std::vector<Tensor> cross_k_, cross_v_, self_k_, self_v_;
  Tensor spare_, cross_spare_;  // gather targets, swapped with the cache they reorder
};

}  // namespace sf
