#include "trainer/models/lstm_config.h"

#include <algorithm>

#include "trainer/models/model_metadata.h"

namespace sf {

Status LstmConfig::Validate() const {
  if (src_vocab < 2 || tgt_vocab < 2) return InvalidArgument("src_vocab / tgt_vocab: at least 2");
  if (pad_id < 0 || pad_id >= src_vocab || pad_id >= tgt_vocab) return InvalidArgument("pad_id: outside the vocabularies");
  if (encoder_embed < 1 || encoder_hidden < 1 || decoder_embed < 1 || decoder_hidden < 1 || decoder_out_embed < 1) {
    return InvalidArgument("encoder_embed_dim, encoder_hidden_size, decoder_embed_dim, decoder_hidden_size and "
                           "decoder_out_embed_dim must be at least 1");
  }
  if (encoder_layers < 1 || decoder_layers < 1) return InvalidArgument("encoder_layers / decoder_layers: at least 1");
  if (decoder_layers > encoder_layers) {
    return InvalidArgument("decoder_layers: " + std::to_string(decoder_layers) + " is more than encoder_layers " +
                           std::to_string(encoder_layers) +
                           " (each decoder layer starts from the final state of the encoder layer of its index)");
  }
  if (share_decoder_input_output_embed && decoder_out_embed != decoder_embed) {
    return InvalidArgument("share_decoder_input_output_embed: decoder_out_embed_dim " + std::to_string(decoder_out_embed) +
                           " must equal decoder_embed_dim " + std::to_string(decoder_embed));
  }
  if (max_positions < 3) return InvalidArgument("max_positions: at least 3");
  if (residual_from != 0 && (residual_from < 2 || residual_from > std::max(encoder_layers, decoder_layers))) {
    return InvalidArgument("residual_from_layer: " + std::to_string(residual_from) +
                           " must be 0 (none) or a layer from 2 to " +
                           std::to_string(std::max(encoder_layers, decoder_layers)));
  }
  if (encoder_bidirectional_layers != 0) {
    const int k = encoder_bidirectional_layers;
    if (!encoder_bidirectional) return InvalidArgument("encoder_bidirectional_layers: needs encoder_bidirectional");
    if (k < 0 || k > encoder_layers) {
      return InvalidArgument("encoder_bidirectional_layers: " + std::to_string(k) + " is not in [0, encoder_layers " +
                             std::to_string(encoder_layers) + "]");
    }
    if (k < encoder_layers && residual_from != 0 && residual_from < k + 2) {
      return InvalidArgument("residual_from_layer: " + std::to_string(residual_from) + " must be at least " +
                             std::to_string(k + 2) + " with encoder_bidirectional_layers " + std::to_string(k) +
                             " (the first one-way layer reads both directions: twice its width)");
    }
  }
  for (float p : {encoder_dropout_in, encoder_dropout_out, decoder_dropout_in, decoder_dropout_out}) {
    if (!(p >= 0.0f && p < 1.0f)) return InvalidArgument("dropout rates must be in [0, 1)");
  }
  return Status::Ok();
}

double LstmConfig::TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const {
  const double ns = static_cast<double>(batch * src_len), nt = static_cast<double>(batch * tgt_len);
  const double He = static_cast<double>(encoder_hidden), H = static_cast<double>(decoder_hidden);
  const double U = static_cast<double>(encoder_units()), O = static_cast<double>(decoder_out_embed);
  double fwd = 0;  // multiply-adds
  for (int i = 0; i < encoder_layers; ++i) {
    const double dirs = i < two_way_layers() ? 2 : 1, below = i <= two_way_layers() ? 2 : 1;
    const double in = i == 0 ? static_cast<double>(encoder_embed) : below * He;
    fwd += ns * dirs * 4 * He * (in + He);
  }
  for (int i = 0; i < decoder_layers; ++i) {
    const double in = i == 0 ? static_cast<double>(decoder_embed) + H : H;
    fwd += nt * 4 * H * (in + H);
  }
  fwd += nt * (H * U + 2 * static_cast<double>(src_len) * U + H * (U + H));  // attention
  if (U != H) fwd += 2 * batch * decoder_layers * U * H;                  // initial-state projections
  if (H != O) fwd += nt * H * O;                                           // additional_fc
  fwd += nt * O * static_cast<double>(tgt_vocab);                          // fc_out
  return 3 * 2 * fwd;
}

std::map<std::string, std::string> LstmMetadata(const LstmConfig& c) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  return {{"arch", "lstm"},
          {"encoder_embed_dim", std::to_string(c.encoder_embed)},
          {"encoder_hidden_size", std::to_string(c.encoder_hidden)},
          {"encoder_layers", std::to_string(c.encoder_layers)},
          {"encoder_bidirectional", b(c.encoder_bidirectional)},
          {"encoder_bidirectional_layers", std::to_string(c.encoder_bidirectional_layers)},
          {"decoder_embed_dim", std::to_string(c.decoder_embed)},
          {"decoder_hidden_size", std::to_string(c.decoder_hidden)},
          {"decoder_out_embed_dim", std::to_string(c.decoder_out_embed)},
          {"decoder_layers", std::to_string(c.decoder_layers)},
          {"share_decoder_input_output_embed", b(c.share_decoder_input_output_embed)},
          {"residual_from_layer", std::to_string(c.residual_from)},
          {"src_vocab", std::to_string(c.src_vocab)},
          {"tgt_vocab", std::to_string(c.tgt_vocab)},
          {"pad_id", std::to_string(c.pad_id)},
          {"max_positions", std::to_string(c.max_positions)},
          {"label_smoothing", MetaText(c.label_smoothing)}};
}

Result<LstmConfig> LstmConfigFromMetadata(const std::map<std::string, std::string>& m) {
  auto arch = m.find("arch");
  if (arch == m.end() || arch->second != "lstm") return InvalidArgument("__metadata__ arch: not 'lstm'");
  LstmConfig c;
  SF_ASSIGN_OR_RETURN(c.encoder_embed, MetaInt(m, "encoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(c.encoder_hidden, MetaInt(m, "encoder_hidden_size"));
  SF_ASSIGN_OR_RETURN(int64_t el, MetaInt(m, "encoder_layers"));
  SF_ASSIGN_OR_RETURN(c.encoder_bidirectional, MetaBool(m, "encoder_bidirectional"));
  if (m.count("encoder_bidirectional_layers")) {  // absent in files written before it existed: all
    SF_ASSIGN_OR_RETURN(int64_t k, MetaInt(m, "encoder_bidirectional_layers"));
    if (k < 0 || k > 1024) return InvalidArgument("__metadata__ encoder_bidirectional_layers: out of range");
    c.encoder_bidirectional_layers = static_cast<int>(k);
  }
  SF_ASSIGN_OR_RETURN(c.decoder_embed, MetaInt(m, "decoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(c.decoder_hidden, MetaInt(m, "decoder_hidden_size"));
  SF_ASSIGN_OR_RETURN(c.decoder_out_embed, MetaInt(m, "decoder_out_embed_dim"));
  SF_ASSIGN_OR_RETURN(int64_t dl, MetaInt(m, "decoder_layers"));
  if (el < 1 || el > 1024 || dl < 1 || dl > 1024) return InvalidArgument("__metadata__ encoder_layers / decoder_layers: out of range");
  c.encoder_layers = static_cast<int>(el);
  c.decoder_layers = static_cast<int>(dl);
  SF_ASSIGN_OR_RETURN(c.share_decoder_input_output_embed, MetaBool(m, "share_decoder_input_output_embed"));
  if (m.count("residual_from_layer")) {
    SF_ASSIGN_OR_RETURN(int64_t r, MetaInt(m, "residual_from_layer"));
    if (r < 0 || r > 1024) return InvalidArgument("__metadata__ residual_from_layer: out of range");
    c.residual_from = static_cast<int>(r);
  }
  SF_ASSIGN_OR_RETURN(MetaSizes sizes, ReadMetaSizes(m, true));
  c.src_vocab = sizes.src_vocab;
  c.tgt_vocab = sizes.tgt_vocab;
  c.pad_id = sizes.pad_id;
  c.max_positions = sizes.max_positions;
  SF_ASSIGN_OR_RETURN(c.label_smoothing, MetaFloatOr(m, "label_smoothing", c.label_smoothing));
  Status st = c.Validate();
  if (!st.ok()) return st.WithContext("__metadata__");
  return c;
}

}  // namespace sf
