// The configuration of fairseq's `lstm` architecture (lstm_model.h) and its weights'
// __metadata__: the keys are fairseq's argument names (arch "lstm", encoder_embed_dim,
// encoder_hidden_size, encoder_layers, encoder_bidirectional, encoder_bidirectional_layers (ours:
// GNMT's encoder), decoder_embed_dim,
// decoder_hidden_size, decoder_out_embed_dim, decoder_layers, share_decoder_input_output_embed,
// residual_from_layer) plus src_vocab, tgt_vocab, pad_id, max_positions and label_smoothing, as for the Transformer.
// Dropout rates are training settings: not stored.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace sf {

struct LstmConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int32_t pad_id = 1;
  int64_t encoder_embed = 512, encoder_hidden = 512;
  int encoder_layers = 1;
  bool encoder_bidirectional = false;
  // With encoder_bidirectional: how many bottom layers run both ways, the rest one way (GNMT: 1,
  // lstm_stack.h); 0: all (fairseq's lstm).
  int encoder_bidirectional_layers = 0;
  float encoder_dropout_in = 0.1f, encoder_dropout_out = 0.1f;
  int64_t decoder_embed = 512, decoder_hidden = 512, decoder_out_embed = 512;
  int decoder_layers = 1;
  float decoder_dropout_in = 0.1f, decoder_dropout_out = 0.1f;
  bool share_decoder_input_output_embed = false;
  // GNMT's residual connections from this layer (1-based) up, in the encoder and the decoder
  // (lstm_stack.h, lstm_decoder.h); 0: none (fairseq's lstm).
  int residual_from = 0;
  float label_smoothing = 0.1f;
  // Sources and targets (EOS included) are cut to max_positions - 2 tokens, as the
  // Transformer's; the LSTM itself has no length limit.
  int64_t max_positions = 1024;

  // How many of the encoder's layers run both ways (0 when not bidirectional).
  int two_way_layers() const {
    if (!encoder_bidirectional) return 0;
    return encoder_bidirectional_layers > 0 ? std::min(encoder_bidirectional_layers, encoder_layers) : encoder_layers;
  }
  // The encoder's output width: its top layer's directions times encoder_hidden.
  int64_t encoder_units() const { return encoder_hidden * (two_way_layers() == encoder_layers ? 2 : 1); }
  // Errors name the field.
  Status Validate() const;
  // FLOPs of one training step (forward + backward = 3x the forward's 2 x multiply-adds).
  double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const;
};

std::map<std::string, std::string> LstmMetadata(const LstmConfig& config);
// The inverse; errors name the key and the file's value; the result is validated.
Result<LstmConfig> LstmConfigFromMetadata(const std::map<std::string, std::string>& metadata);

}  // namespace sf
