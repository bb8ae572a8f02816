// Transformer encoder-decoder for sequence-to-sequence training (Vaswani et al. 2017, with
// fairseq's conventions: scaled embeddings + sinusoidal positions, post-norm by default, tied
// decoder input/output embeddings unless share_decoder_input_output_embed is false,
// label-smoothed cross-entropy).
//
// Data flow (B = batch, Ts/Tt = source/target length, C = d_model, V = target vocabulary):
//   src [B,Ts] -> embed -> encoder layers (-> encoder.layer_norm if pre-norm) -> enc [B,Ts,C]
//   tgt_in [B,Tt] -> embed -> decoder layers(enc) (-> decoder.layer_norm) -> y [B,Tt,C]
//   logits [B*Tt, V] = y . W_out^T  (no bias);  loss = label-smoothed CE(logits, tgt_out)
// W_out is the decoder's embedding table E_dec (tied, the default) or its own [V, C] matrix
// "decoder.output_projection.weight" (share_decoder_input_output_embed = false), stored last.
// Parameter names and shapes are listed in docs/model-format.md.
//
// Usage per micro-batch: Forward(batch) then Backward(grad_scale). Gradients ACCUMULATE into
// the parameter store until ZeroGrads(); they are gradients of grad_scale * (summed loss), so
// the driver normalises once per step by the total target tokens. After changing the weights
// (optimizer step, loading) call WeightsUpdated() so the low-precision mirror is refreshed.
//
// Activation buffers are planned on the first Forward of a batch shape and reused; a step of a
// known shape allocates nothing. Not thread-safe (one training loop).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/kernels/backend.h"
#include "trainer/models/seq2seq_model.h"
#include "trainer/nn/context.h"
#include "trainer/nn/embedding.h"
#include "trainer/nn/param_store.h"
#include "trainer/nn/transformer_layer.h"
#include "trainer/optim/param.h"

namespace sf {

struct TransformerConfig {
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t encoder_layers = 6;
  int64_t decoder_layers = 6;
  int64_t ffn_dim = 2048;
  float dropout = 0.1f;
  float attention_dropout = 0.0f;
  float activation_dropout = 0.0f;  // after the feed-forward's activation (fairseq's name)
  Activation activation = Activation::kRelu;
  bool normalize_before = false;
  bool share_embeddings = false;  // one table for source, target and output (needs equal vocab)
  // The output projection is the decoder's embedding table (true) or its own matrix (false;
  // contradicts share_embeddings, which ties all three).
  bool share_decoder_input_output_embed = true;
  int64_t src_vocab = 8000;
  int64_t tgt_vocab = 8000;
  int32_t pad_id = 1;  // fairseq's <pad>
  int64_t max_positions = 1024;
  float label_smoothing = 0.1f;

  // Checks ranges and consistency; errors name the field ("heads: 5 does not divide d_model").
  Status Validate() const;
  // Multiply-adds of one training step (forward + backward = 3x forward) per the usual count:
  // 6 * (matrix params touched per token) + attention score/context GEMMs. Used for GFLOP/s.
  double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const;
};

template <typename T>
class Transformer final : public Seq2SeqModel<T> {
 public:
  // `backend` must outlive the model. `compute` is the GEMM operand dtype (kF32 for fp32
  // training, kBF16 / kF16 for mixed precision; must be T's dtype when T = double).
  Transformer(const TransformerConfig& config, Backend<T>* backend, DType compute);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const TransformerConfig& config() const { return config_; }
  const char* family() const override { return "transformer"; }
  ModelShape shape() const override {
    return ModelShape{config_.src_vocab, config_.tgt_vocab, config_.pad_id, config_.max_positions};
  }
  std::map<std::string, std::string> Metadata() const override;  // weights_io.h: ConfigMetadata
  double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const override {
    return config_.TrainingFlops(batch, src_len, tgt_len);
  }
  Context<T>& context() override { return ctx_; }
  ParamStore<T>& params() override { return store_; }

  // fairseq-style initialisation from `seed`: embeddings N(0, C^-1/2) with zero pad rows,
  // linear weights Xavier-uniform, biases 0, layer norms 1/0, an untied output projection
  // N(0, C^-1/2) (drawn last, so the other parameters are those of the tied model).
  void InitParameters(uint64_t seed) override;
  // Call after the weights changed (refreshes the bf16/f16 mirror used by GEMMs).
  void WeightsUpdated() override;

  // Runs the forward pass and the loss (summed over non-pad targets). Errors: tokens out of
  // range, sequences longer than max_positions. bf16 training also computes the loss gradient
  // here, in the same pass over the logits (Backward scales it).
  Result<CrossEntropyStats> Forward(const Seq2SeqBatch& batch) override;
  // Accumulates gradients of grad_scale * loss. Must follow Forward (consumes its state).
  void Backward(float grad_scale) override;

  // Called during Backward each time a module's gradients are final for this micro-batch:
  // no gradient at store offset >= `offset` is written again by this Backward. Modules are
  // stored in forward order and run backward in reverse, so the offsets decrease, ending with 0.
  // Data-parallel training reduces gradient buckets from here while backward goes on.
  void set_grads_final_hook(std::function<void(int64_t offset)> hook) override { grads_final_ = std::move(hook); }

  // Logits of the last Forward [B*Tt, V] (valid until Backward, which reuses the buffer), in
  // the backend's memory. bf16 training computes them a block of rows at a time
  // (trainer/nn/output_loss.h) and keeps the last block only, unless every row fitted one.
  const T* logits() const { return logits_.data<T>(); }
  const Tensor& logits_tensor() const { return logits_; }
  // Rows per block of that computation: 0 (the default) lets the backend's memory decide.
  void set_logit_block_rows(int64_t rows) { logit_block_rows_ = rows; }

 private:
  TransformerConfig config_;
  ParamStore<T> store_;
  Context<T> ctx_;
  std::unique_ptr<TokenEmbedding<T>> enc_embed_, dec_embed_;
  std::vector<std::unique_ptr<EncoderLayer<T>>> encoder_;
  std::vector<std::unique_ptr<DecoderLayer<T>>> decoder_;
  std::unique_ptr<LayerNorm<T>> enc_norm_, dec_norm_;
  int out_proj_ = -1;  // the output projection's parameter id: the decoder table when tied
  std::function<void(int64_t)> grads_final_;
  // Store offset where each module's parameters begin.
  int64_t enc_norm_start_ = 0, dec_embed_start_ = 0, dec_norm_start_ = 0, out_proj_start_ = 0;
  std::vector<int64_t> encoder_start_, decoder_start_;
  bool mirror_stale_ = true;
  bool loss_grad_ready_ = false;  // Forward left the unscaled loss gradient in dlogits_low_
  int64_t logit_block_rows_ = 0;

  Seq2SeqBatch batch_;           // the host micro-batch of the last Forward
  std::vector<uint8_t> staging_;  // host staging of the micro-batch (see Forward)
  Tensor batch_dev_;              // staging_ in the backend's memory
  const int32_t* tgt_out_ = nullptr;  // in batch_dev_
  const T* enc_out_ = nullptr;
  const T* dec_out_ = nullptr;
  const void* dec_out_c_ = nullptr;
  Tensor enc_x0_, dec_x0_, enc_final_, dec_final_, dec_out_cast_, logits_, lse_, dlogits_low_;
  Tensor enc_final_c_, dec_final_c_;  // mixed precision, pre-norm: the final norms' outputs in bf16
  Tensor grad_a_, grad_b_, tmp1_, tmp2_, d_enc_;
};

extern template class Transformer<float>;
extern template class Transformer<double>;

}  // namespace sf
