// A decoder-only Transformer language model: fairseq's `transformer_lm` (TransformerLanguageModel:
// a TransformerDecoder without encoder attention). The engine half of issue 28's third family:
// the model, its forward and backward, proven against finite differences and PyTorch; the
// monolingual data path, `arch: transformer_lm` and `sf-trainer generate` are still to come
// (docs/models.md).
//
// Data flow (B sentences, T tokens, C = d_model, V = vocabulary): tokens [B, T] (tgt_in of a
// Seq2SeqBatch: EOS then the sentence, right-padded) -> scaled embedding + sinusoidal positions
// (dropout) -> layers of causal self-attention and feed-forward (post-norm by default, pre-norm
// with normalize_before and then decoder.layer_norm) -> logits [B*T, V] against the embedding
// table (tied, share_input_output_embed) or decoder.output_projection.weight -> the cross-entropy
// with tgt_out (the next tokens), label-smoothed when label_smoothing > 0, summed over non-pad
// targets. The batch's src is not read.
//
// Parameter names are fairseq's transformer_lm state_dict keys: decoder.embed_tokens.weight,
// decoder.layers.<i>.self_attn.{in_proj_weight,in_proj_bias,out_proj.weight,out_proj.bias},
// decoder.layers.<i>.self_attn_layer_norm.*, decoder.layers.<i>.fc1.*, fc2.*,
// decoder.layers.<i>.final_layer_norm.*, decoder.layer_norm.* (pre-norm),
// decoder.output_projection.weight (untied).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/models/seq2seq_model.h"
#include "trainer/nn/embedding.h"
#include "trainer/nn/layer_norm.h"
#include "trainer/nn/transformer_layer.h"

namespace sf {

struct TransformerLmConfig {
  int64_t d_model = 512, heads = 8, layers = 6, ffn_dim = 2048;
  float dropout = 0.1f, attention_dropout = 0.0f, activation_dropout = 0.0f;
  Activation activation = Activation::kRelu;
  bool normalize_before = false;
  bool share_input_output_embed = false;  // fairseq's transformer_lm default
  int64_t vocab = 8000;
  int32_t pad_id = 1;
  int64_t max_positions = 1024;
  float label_smoothing = 0.0f;

  // Errors name the field.
  Status Validate() const;
  // FLOPs of one training step (forward + backward) over `batch` sequences of `len` tokens.
  double TrainingFlops(int64_t batch, int64_t len) const;
};

// The weights' __metadata__: arch "transformer_lm", d_model, heads, decoder_layers, ffn_dim,
// activation, normalize_before, share_decoder_input_output_embed, vocab (as tgt_vocab), pad_id,
// max_positions, label_smoothing.
std::map<std::string, std::string> TransformerLmMetadata(const TransformerLmConfig& config);
// Its inverse. Errors name the key ("__metadata__ heads: 'x' is not an integer") or the field
// Validate refuses.
Result<TransformerLmConfig> TransformerLmConfigFromMetadata(const std::map<std::string, std::string>& metadata);

template <typename T>
class TransformerLm final : public Seq2SeqModel<T> {
 public:
  TransformerLm(const TransformerLmConfig& config, Backend<T>* backend, DType compute);
  TransformerLm(const TransformerLm&) = delete;
  TransformerLm& operator=(const TransformerLm&) = delete;

  const TransformerLmConfig& config() const { return config_; }
  const char* family() const override { return "transformer_lm"; }
  ModelShape shape() const override { return ModelShape{config_.vocab, config_.vocab, config_.pad_id, config_.max_positions}; }
  std::map<std::string, std::string> Metadata() const override { return TransformerLmMetadata(config_); }
  double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const override {
    return config_.TrainingFlops(batch, tgt_len);
  }
  Context<T>& context() override { return ctx_; }
  ParamStore<T>& params() override { return store_; }

  // fairseq's initialisation: the embedding N(0, C^-1/2) with a zero pad row, linear weights
  // Xavier-uniform, biases 0, layer norms 1/0, an untied output projection N(0, C^-1/2).
  void InitParameters(uint64_t seed) override;
  void WeightsUpdated() override;

  // The loss of predicting tgt_out from tgt_in (src is not read). Errors: an empty batch,
  // sequences longer than max_positions, tokens outside the vocabulary.
  Result<CrossEntropyStats> Forward(const Seq2SeqBatch& batch) override;
  void Backward(float grad_scale) override;
  void set_grads_final_hook(std::function<void(int64_t offset)> hook) override { grads_final_ = std::move(hook); }

  // Logits of the last Forward [B*T, V], batch-major rows (valid until Backward). bf16 training
  // computes them a block of rows at a time (trainer/nn/output_loss.h) and keeps the last block
  // only, unless every row fitted one.
  const T* logits() const { return logits_.template data<T>(); }

 private:
  TransformerLmConfig config_;
  ParamStore<T> store_;
  Context<T> ctx_;
  std::unique_ptr<TokenEmbedding<T>> embed_;
  std::vector<std::unique_ptr<EncoderLayer<T>>> layers_;
  std::unique_ptr<LayerNorm<T>> norm_;
  int out_proj_ = -1;
  std::function<void(int64_t)> grads_final_;
  int64_t norm_start_ = 0, out_proj_start_ = 0;
  std::vector<int64_t> layer_start_;
  int64_t batch_ = 0, len_ = 0;
  std::vector<uint8_t> staging_;
  Tensor batch_dev_;
  const int32_t* tgt_out_ = nullptr;
  const T* out_ = nullptr;
  const void* out_c_ = nullptr;
  Tensor x0_, final_, out_cast_, logits_, lse_, dlogits_low_, grad_a_, grad_b_, tmp1_, tmp2_;
  bool loss_grad_ready_ = false;  // Forward left the unscaled loss gradient in dlogits_low_
};

extern template class TransformerLm<float>;
extern template class TransformerLm<double>;

}  // namespace sf
