// fairseq's LSTM encoder-decoder with attention and input feeding (and GNMT's residual and
// partly bidirectional variants): its entry in the family registry (model_family.h).
#include "trainer/decoding/lstm_generator.h"
#include "trainer/families/family_codec.h"
#include "trainer/families/model_family.h"
#include "trainer/models/lstm_config.h"
#include "trainer/models/lstm_model.h"

namespace sf {
namespace {

namespace fc = family_codec;

Result<LstmConfig> FromHyperparameters(const config::TrialHyperparameters& hp) {
  const config::LstmHp& l = *hp.lstm;
  LstmConfig c;
  c.encoder_embed = l.encoder_embed_dim;
  c.encoder_hidden = l.encoder_hidden_size;
  c.encoder_layers = static_cast<int>(l.encoder_layers);
  c.encoder_bidirectional = l.encoder_bidirectional;
  c.encoder_bidirectional_layers = static_cast<int>(l.encoder_bidirectional_layers);
  c.encoder_dropout_in = static_cast<float>(l.encoder_dropout_in);
  c.encoder_dropout_out = static_cast<float>(l.encoder_dropout_out);
  c.decoder_embed = l.decoder_embed_dim;
  c.decoder_hidden = l.decoder_hidden_size;
  c.decoder_out_embed = l.decoder_out_embed_dim;
  c.decoder_layers = static_cast<int>(l.decoder_layers);
  c.decoder_dropout_in = static_cast<float>(l.decoder_dropout_in);
  c.decoder_dropout_out = static_cast<float>(l.decoder_dropout_out);
  c.share_decoder_input_output_embed = hp.text->share_decoder_input_output_embed;
  c.residual_from = static_cast<int>(l.residual_from_layer);
  c.label_smoothing = static_cast<float>(hp.text->label_smoothing);
  return c;
}

Result<LstmConfig> FromValue(const Value& v) {
  LstmConfig c;
  c.encoder_embed = fc::Int(v, "encoder_embed_dim", c.encoder_embed);
  c.encoder_hidden = fc::Int(v, "encoder_hidden_size", c.encoder_hidden);
  c.encoder_layers = static_cast<int>(fc::Int(v, "encoder_layers", c.encoder_layers));
  c.encoder_bidirectional = fc::Flag(v, "encoder_bidirectional", c.encoder_bidirectional);
  c.encoder_bidirectional_layers =
      static_cast<int>(fc::Int(v, "encoder_bidirectional_layers", c.encoder_bidirectional_layers));
  c.encoder_dropout_in = static_cast<float>(fc::Num(v, "encoder_dropout_in", c.encoder_dropout_in));
  c.encoder_dropout_out = static_cast<float>(fc::Num(v, "encoder_dropout_out", c.encoder_dropout_out));
  c.decoder_embed = fc::Int(v, "decoder_embed_dim", c.decoder_embed);
  c.decoder_hidden = fc::Int(v, "decoder_hidden_size", c.decoder_hidden);
  c.decoder_out_embed = fc::Int(v, "decoder_out_embed_dim", c.decoder_out_embed);
  c.decoder_layers = static_cast<int>(fc::Int(v, "decoder_layers", c.decoder_layers));
  c.decoder_dropout_in = static_cast<float>(fc::Num(v, "decoder_dropout_in", c.decoder_dropout_in));
  c.decoder_dropout_out = static_cast<float>(fc::Num(v, "decoder_dropout_out", c.decoder_dropout_out));
  c.share_decoder_input_output_embed =
      fc::Flag(v, "share_decoder_input_output_embed", c.share_decoder_input_output_embed);
  c.residual_from = static_cast<int>(fc::Int(v, "residual_from_layer", c.residual_from));
  c.label_smoothing = static_cast<float>(fc::Num(v, "label_smoothing", c.label_smoothing));
  fc::ReadSizes(v, c);
  return c;
}

Value ToValue(const LstmConfig& c) {
  Value::Map v{{"arch", "lstm"},
               {"encoder_embed_dim", c.encoder_embed},
               {"encoder_hidden_size", c.encoder_hidden},
               {"encoder_layers", static_cast<int64_t>(c.encoder_layers)},
               {"encoder_bidirectional", c.encoder_bidirectional},
               {"encoder_bidirectional_layers", static_cast<int64_t>(c.encoder_bidirectional_layers)},
               {"encoder_dropout_in", static_cast<double>(c.encoder_dropout_in)},
               {"encoder_dropout_out", static_cast<double>(c.encoder_dropout_out)},
               {"decoder_embed_dim", c.decoder_embed},
               {"decoder_hidden_size", c.decoder_hidden},
               {"decoder_out_embed_dim", c.decoder_out_embed},
               {"decoder_layers", static_cast<int64_t>(c.decoder_layers)},
               {"decoder_dropout_in", static_cast<double>(c.decoder_dropout_in)},
               {"decoder_dropout_out", static_cast<double>(c.decoder_dropout_out)},
               {"share_decoder_input_output_embed", c.share_decoder_input_output_embed},
               {"residual_from_layer", static_cast<int64_t>(c.residual_from)},
               {"label_smoothing", static_cast<double>(c.label_smoothing)}};
  fc::WriteSizes(c, v);
  return Value(std::move(v));
}

}  // namespace

ModelFamily LstmFamily() {
  FamilyCodec<LstmConfig> c;
  c.name = "lstm";
  c.from_hyperparameters = FromHyperparameters;
  c.from_metadata = LstmConfigFromMetadata;
  c.metadata = LstmMetadata;
  c.from_value = FromValue;
  c.to_value = ToValue;
  fc::TranslationParts<LstmConfig, LstmModel, LstmGenerator>(c);
  return RegisterFamily(c);
}

}  // namespace sf
