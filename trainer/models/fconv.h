// fairseq's `fconv`: the convolutional sequence-to-sequence model of Gehring et al. 2017
// (ConvS2S), issue 28's second family. Hand-written forward and backward over the backend's ops.
//
// Encoder (B sentences of S tokens, E = embedding width, C_l = channels of layer l):
//   e = dropout(E_tok[src] + E_pos[pos])                      input embedding [B·S, E]
//   x_0 = fc1(e)
//   layer l: r = x_l (projections.l(x_l) when C_l differs), x_l masked to 0 at padding,
//            dropout, ConvTBC (kernel k centred), GLU, x_{l+1} = (GLU + r)·√½
//   a = fc2(x_L) (its gradient scaled by 1 / (2·attention layers): fairseq's GradMultiply),
//   b = (a + e)·√½                                            keys a, values b [B·S, E]
// Decoder (T target positions):
//   t_emb = dropout(E_tok[tgt_in] + E_pos[pos])
//   x_0 = fc1(t_emb)
//   layer l: r as above, dropout, causal ConvTBC (each position sees itself and the k-1
//            before it), g = GLU(...), then attention (every layer):
//              q = (in_projection(g) + t_emb)·√½,  p = softmax over the source of q·aᵀ
//              (padding masked), c = √s · p·b (s = the sentence's source tokens),
//              g' = (out_projection(c) + g)·√½
//            x_{l+1} = (g' + r)·√½
//   logits = fc3(dropout(fc2(x_L)))   (fc3 tied to decoder.embed_tokens with its own bias when
//                                      share_input_output_embed)
// and the label-smoothed cross-entropy summed over non-pad targets. Every Linear and ConvTBC is
// weight-normalised (nn/weight_norm.h); positions are learned (pad + 1 + t, fairseq's
// LearnedPositionalEmbedding with max_positions + pad + 1 rows). Right padding with the
// encoder's masking gives what fairseq computes on left-padded sources.
//
// Parameter names are fairseq's fconv state_dict keys: {encoder,decoder}.embed_tokens.weight,
// .embed_positions.weight, .fc1.{weight_v,weight_g,bias}, .projections.<l>.*, .convolutions.<l>.*,
// encoder.fc2.*, decoder.attention.<l>.{in_projection,out_projection}.*, decoder.fc2.*,
// decoder.fc3.* (decoder.fc3.bias alone when tied).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/models/seq2seq_model.h"
#include "trainer/nn/weight_norm.h"

namespace sf {

struct ConvSpec {
  int64_t channels = 512;
  int64_t kernel = 3;
};

struct FConvConfig {
  int64_t encoder_embed = 512, decoder_embed = 512, decoder_out_embed = 256;
  std::vector<ConvSpec> encoder_convs = std::vector<ConvSpec>(20), decoder_convs = std::vector<ConvSpec>(20);
  float dropout = 0.1f;
  bool share_input_output_embed = false;
  int64_t src_vocab = 8000, tgt_vocab = 8000;
  int32_t pad_id = 1;
  int64_t max_positions = 1024;
  float label_smoothing = 0.0f;
  // fairseq's GradMultiply: the gradient reaching the encoder's output is scaled by
  // 1 / (2 · attention layers) (the forward is unchanged). Not a hyperparameter and not stored:
  // off only where a test checks the true gradient against finite differences.
  bool scale_encoder_gradient = true;

  // Errors name the field.
  Status Validate() const;
  double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const;
};

// The weights' __metadata__ (arch "fconv"; the layer specs as "512x3,512x3,...") and back.
std::map<std::string, std::string> FConvMetadata(const FConvConfig& config);
Result<FConvConfig> FConvConfigFromMetadata(const std::map<std::string, std::string>& metadata);
// "256x3,256x3" <-> specs; errors name the text.
std::string ConvSpecsText(const std::vector<ConvSpec>& specs);
Result<std::vector<ConvSpec>> ParseConvSpecs(const std::string& text);

template <typename T>
class FConvModel final : public Seq2SeqModel<T> {
 public:
  FConvModel(const FConvConfig& config, Backend<T>* backend, DType compute);
  ~FConvModel() override;
  FConvModel(const FConvModel&) = delete;
  FConvModel& operator=(const FConvModel&) = delete;

  const FConvConfig& config() const { return config_; }
  const char* family() const override { return "fconv"; }
  ModelShape shape() const override {
    return ModelShape{config_.src_vocab, config_.tgt_vocab, config_.pad_id, config_.max_positions};
  }
  std::map<std::string, std::string> Metadata() const override { return FConvMetadata(config_); }
  double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const override {
    return config_.TrainingFlops(batch, src_len, tgt_len);
  }
  Context<T>& context() override { return ctx_; }
  ParamStore<T>& params() override { return store_; }

  void InitParameters(uint64_t seed) override;
  void WeightsUpdated() override;
  Result<CrossEntropyStats> Forward(const Seq2SeqBatch& batch) override;
  void Backward(float grad_scale) override;
  // Reports 0 only, at the end of Backward (the contract allows it).
  void set_grads_final_hook(std::function<void(int64_t offset)> hook) override { grads_final_ = std::move(hook); }

  // Logits of the last Forward [B·T, V], batch-major rows (valid until Backward). bf16 training
  // computes them a block of rows at a time (trainer/nn/output_loss.h) and keeps the last block
  // only, unless every row fitted one.
  const T* logits() const;

 private:
  struct Side;
  struct Attention;

  FConvConfig config_;
  ParamStore<T> store_;
  Context<T> ctx_;
  std::unique_ptr<Side> encoder_, decoder_;
  std::vector<std::unique_ptr<Attention>> attention_;
  std::unique_ptr<WnLinear<T>> enc_fc2_, dec_fc2_, fc3_;  // fc3 null when tied
  int fc3_bias_ = -1;                                      // tied: decoder.fc3.bias
  std::function<void(int64_t)> grads_final_;
  struct State;
  std::unique_ptr<State> s_;
};

extern template class FConvModel<float>;
extern template class FConvModel<double>;

}  // namespace sf
