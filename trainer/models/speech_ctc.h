// A speech recogniser trained with CTC (issue 27's `speech_transformer_ctc`): fairseq's
// s2t_transformer encoder with ESPnet's two-convolution subsampling in front and a CTC head.
// The engine half: the model, its forward and backward, proven against finite differences and
// an independent PyTorch model (tests/trainer/speech_ctc_test.cc); the run loop (manifests,
// features, WER validation, `transcribe`) is trainer/run/speech_run.h (docs/speech.md).
//
// Data flow (B utterances of up to T frames of M log-mel features, C = conv_channels,
// D = d_model, V = vocabulary with blank 0):
//   features [B, T, M] (zero-padded; one image of one channel per utterance)
//   -> Conv2d(1 -> C, 3x3, stride 2) -> ReLU -> Conv2d(C -> C, 3x3, stride 2) -> ReLU
//      (no padding, as ESPnet's Conv2dSubsampling: T' = ((T - 1) / 2 - 1) / 2, M' likewise)
//   -> [B, T', C·M'] (channels then features per frame) -> Linear(C·M' -> D)
//   -> × sqrt(D) + sinusoidal positions (fairseq's, positions 2, 3, ... as its S2T encoder's
//      make_positions gives them) -> dropout
//   -> encoder layers (fairseq's TransformerEncoderLayer; pre-norm by default, as
//      s2t_transformer) over the frames of each utterance (its subsampled length; the rest is
//      padding) -> encoder.layer_norm (pre-norm)
//   -> Linear(D -> V) = logits [B, T', V] -> the CTC loss summed over utterances
//      (Backend::CtcLoss; zero_infinity by default: an utterance whose transcript cannot fit its
//      frames contributes 0 and is counted).
//
// Parameter names: encoder.embed.conv.0.{weight,bias}, encoder.embed.conv.2.{weight,bias},
// encoder.embed.out.0.{weight,bias} (ESPnet's Conv2dSubsampling), encoder.layers.<i>.* (fairseq's
// layer names, transformer_layer.h), encoder.layer_norm.* (pre-norm), ctc.ctc_lo.{weight,bias}
// (ESPnet's CTC head). The convolutions run in fp32; the GEMMs in the context's compute dtype.
//
// Joint CTC/attention (decoder_layers > 0; Watanabe et al. 2017, ESPnet's hybrid model): a
// Transformer decoder (fairseq's TransformerDecoderLayer stack, transformer_layer.h) over the
// transcript's symbols attends to the encoder output (its padded frames masked):
//   tgt_in  = <sos> y_1 .. y_n   tgt_out = y_1 .. y_n <eos>   (right-padded with blank)
//   -> decoder.embed_tokens (× sqrt(D) + sinusoidal positions, fairseq's make_positions with
//      blank as padding) -> decoder layers (enc) -> decoder.layer_norm (pre-norm)
//   -> logits [B·(n+1), V+1] = y · decoder.embed_tokens.weight^T (tied, no bias)
//   -> label-smoothed cross-entropy (fairseq's, ε = label_smoothing) summed over targets.
// The decoder's symbols are the CTC vocabulary plus <sos/eos> at index V (ESPnet's convention);
// blank, never a decoder target, is its padding. The loss is
//   ctc_weight · CTC + (1 − ctc_weight) · attention cross-entropy
// and the encoder's gradient is the sum of both branches'. Its parameters follow the CTC head:
// decoder.embed_tokens.weight [V+1, D], decoder.layers.<i>.*, decoder.layer_norm.* (pre-norm).
// A model without a decoder has exactly the parameters and metadata it had before the decoder
// existed. Decoding: speech_joint_search.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/models/trainable_model.h"
#include "trainer/nn/context.h"
#include "trainer/nn/embedding.h"
#include "trainer/nn/layer_norm.h"
#include "trainer/nn/param_store.h"
#include "trainer/nn/transformer_layer.h"

namespace sf {

struct SpeechCtcConfig {
  int64_t mels = 80, conv_channels = 64;
  int64_t d_model = 256, heads = 4, layers = 6, ffn_dim = 1024;
  float dropout = 0.1f, attention_dropout = 0.0f, activation_dropout = 0.0f;
  Activation activation = Activation::kRelu;
  bool normalize_before = true;
  int64_t vocab = 0;  // output symbols, blank included
  int32_t blank = 0;
  int64_t max_positions = 4096;  // encoder frames (after subsampling) an utterance may have;
                                 // with a decoder also the transcript symbols plus one
  bool zero_infinity = true;
  // Joint CTC/attention: decoder layers (0: CTC only), the CTC branch's share of the loss (1
  // without a decoder; ESPnet's mtlalpha) and the decoder's label smoothing.
  int64_t decoder_layers = 0;
  float ctc_weight = 1.0f;
  float label_smoothing = 0.1f;

  bool has_decoder() const { return decoder_layers > 0; }
  // The decoder's symbols: the CTC vocabulary plus <sos/eos>.
  int64_t decoder_vocab() const { return vocab + 1; }
  int32_t sos_eos() const { return static_cast<int32_t>(vocab); }

  // Errors name the field.
  Status Validate() const;
  // The frames (or features) after the two convolutions: ((n - 1) / 2 - 1) / 2; < 1 when n < 7.
  static int64_t Subsampled(int64_t n) { return ((n - 1) / 2 - 1) / 2; }
  // FLOPs of one training step (forward + backward) over `batch` utterances of `frames` frames
  // (the encoder and the CTC head; a decoder's depend on the transcripts and are not counted).
  double TrainingFlops(int64_t batch, int64_t frames) const;
};

// The weights' __metadata__ (arch "speech_transformer_ctc", the fields above by name) and its
// inverse; errors name the key.
std::map<std::string, std::string> SpeechCtcMetadata(const SpeechCtcConfig& config);
Result<SpeechCtcConfig> SpeechCtcConfigFromMetadata(const std::map<std::string, std::string>& metadata);

// One batch on the host: features [batch, max_frames, mels] zero-padded; frames [batch] each
// utterance's frame count; targets [batch, max_target] right-padded labels in [1, vocab) (not
// blank); target_lengths [batch].
struct SpeechBatchView {
  const float* features = nullptr;
  const int32_t* frames = nullptr;
  const int32_t* targets = nullptr;
  const int32_t* target_lengths = nullptr;
  int64_t batch = 0, max_frames = 0, max_target = 0;
};

struct CtcStats {
  double loss = 0;          // ctc_weight · ctc_loss + (1 − ctc_weight) · attention_loss
  double ctc_loss = 0;      // Σ of the utterances' CTC losses (infinite ones as 0)
  double attention_loss = 0;  // the decoder's label-smoothed cross-entropy, summed (0 without)
  double attention_nll = 0;   // its plain negative log-likelihood
  int64_t utterances = 0;
  int64_t target_tokens = 0;
  int64_t infeasible = 0;   // utterances whose transcript does not fit their frames
};

// A TrainableModel (trainable_model.h): TrainStep trains it with a forward callback over its
// feature batches. Its backward reports only offset 0 to the grads-final hook.
template <typename T>
class SpeechCtcModel final : public TrainableModel<T> {
 public:
  SpeechCtcModel(const SpeechCtcConfig& config, Backend<T>* backend, DType compute);
  SpeechCtcModel(const SpeechCtcModel&) = delete;
  SpeechCtcModel& operator=(const SpeechCtcModel&) = delete;

  const SpeechCtcConfig& config() const { return config_; }
  const char* family() const override { return "speech_transformer_ctc"; }
  std::map<std::string, std::string> Metadata() const override { return SpeechCtcMetadata(config_); }
  Context<T>& context() override { return ctx_; }
  ParamStore<T>& params() override { return store_; }
  // Xavier-uniform matrices and convolution kernels (fan in/out of the kernel), zero biases, unit
  // layer norms; drawn from the seed.
  void InitParameters(uint64_t seed) override;
  void WeightsUpdated() override;
  void set_grads_final_hook(std::function<void(int64_t offset)> hook) override { grads_final_ = std::move(hook); }

  // The loss (no gradient yet). Errors: an empty batch, an utterance too short for the
  // subsampling (< 7 frames) or longer than max_positions after it, a label outside [1, vocab)
  // or equal to blank — each naming the utterance.
  Result<CtcStats> Forward(const SpeechBatchView& batch);
  // Gradients of grad_scale × the summed loss, accumulated into params().
  void Backward(float grad_scale) override;

  // After Forward: the logits [batch, frames(), vocab] in the backend's memory and each
  // utterance's subsampled length (host).
  const T* logits() const { return logits_.template data<T>(); }
  int64_t frames() const { return t2_; }
  const std::vector<int32_t>& lengths() const { return len2_; }
  // After Forward: the encoder's output [batch, frames(), d_model] (after its final layer norm)
  // and, with a decoder, its logits [batch, target_positions(), decoder_vocab()] (valid until
  // Backward), both in the backend's memory.
  const T* encoder_out() const { return enc_out_; }
  const T* decoder_logits() const { return dec_logits_.template data<T>(); }
  int64_t target_positions() const { return lt_; }

 private:
  Conv2dShape Conv1Shape() const;
  Conv2dShape Conv2Shape() const;

  SpeechCtcConfig config_;
  Context<T> ctx_;
  std::function<void(int64_t)> grads_final_;
  ParamStore<T> store_;
  int conv0_w_ = -1, conv0_b_ = -1, conv1_w_ = -1, conv1_b_ = -1, out_w_ = -1, out_b_ = -1, ctc_w_ = -1, ctc_b_ = -1;
  std::vector<std::unique_ptr<EncoderLayer<T>>> layers_;
  std::unique_ptr<LayerNorm<T>> norm_;
  std::unique_ptr<TokenEmbedding<T>> dec_embed_;
  std::vector<std::unique_ptr<DecoderLayer<T>>> decoder_;
  std::unique_ptr<LayerNorm<T>> dec_norm_;
  Tensor pe_;  // sinusoidal table [max_positions + 2, D] in the backend's memory
  // Per batch.
  int64_t batch_ = 0, t_ = 0, t1_ = 0, m1_ = 0, t2_ = 0, m2_ = 0, max_target_ = 0, lt_ = 0;
  float p_ = 0;
  bool dlogits_ready_ = false;  // Forward (training) left the unscaled CTC gradient in dlogits_
  std::vector<int32_t> len2_;
  std::vector<uint8_t> staging_;
  Tensor batch_dev_, feats_, y1_, y2_, z_cast_, h_, final_, logits_, losses_, dlogits_, pos_rows_;
  Tensor grad_a_, grad_b_, tmp1_, tmp2_, dz_, dy2_, dy1_;
  const void* z_c_ = nullptr;
  const void* x_c_ = nullptr;
  const T* enc_out_ = nullptr;
  Tensor x_cast_;
  // The decoder's, per batch.
  const int32_t* tgt_out_ = nullptr;
  const void* dec_out_c_ = nullptr;
  Tensor dec_x0_, dec_final_, dec_out_cast_, dec_logits_, dec_lse_, dec_dlogits_, d_enc_;
};

}  // namespace sf
