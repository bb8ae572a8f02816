// The encoder-decoder Transformer (Vaswani et al. 2017; fairseq's transformer): its entry in the
// family registry (model_family.h).
#include "trainer/decoding/translator.h"
#include "trainer/families/family_codec.h"
#include "trainer/families/model_family.h"
#include "trainer/models/transformer.h"
#include "trainer/models/weights_io.h"

namespace sf {
namespace {

namespace fc = family_codec;

Result<TransformerConfig> FromHyperparameters(const config::TrialHyperparameters& hp) {
  TransformerConfig c;
  SF_RETURN_IF_ERROR(fc::SetAttention(hp, c));
  c.encoder_layers = hp.transformer->encoder_layers;
  c.decoder_layers = hp.transformer->decoder_layers;
  c.share_embeddings = hp.transformer->share_embeddings;
  c.share_decoder_input_output_embed = hp.text->share_decoder_input_output_embed;
  c.label_smoothing = static_cast<float>(hp.text->label_smoothing);
  return c;
}

Result<TransformerConfig> FromValue(const Value& v) {
  TransformerConfig c;
  SF_RETURN_IF_ERROR(fc::ReadAttention(v, c));
  c.encoder_layers = fc::Int(v, "encoder_layers", c.encoder_layers);
  c.decoder_layers = fc::Int(v, "decoder_layers", c.decoder_layers);
  c.share_embeddings = fc::Flag(v, "share_embeddings", c.share_embeddings);
  c.share_decoder_input_output_embed =
      fc::Flag(v, "share_decoder_input_output_embed", c.share_decoder_input_output_embed);
  c.label_smoothing = static_cast<float>(fc::Num(v, "label_smoothing", c.label_smoothing));
  fc::ReadSizes(v, c);
  return c;
}

Value ToValue(const TransformerConfig& c) {
  Value::Map v{{"arch", "transformer"},
               {"encoder_layers", c.encoder_layers},
               {"decoder_layers", c.decoder_layers},
               {"share_embeddings", c.share_embeddings},
               {"share_decoder_input_output_embed", c.share_decoder_input_output_embed},
               {"label_smoothing", static_cast<double>(c.label_smoothing)}};
  fc::WriteAttention(c, v);
  fc::WriteSizes(c, v);
  return Value(std::move(v));
}

}  // namespace

ModelFamily TransformerFamily() {
  FamilyCodec<TransformerConfig> c;
  c.name = "transformer";
  c.uncached_reference = true;  // Translator's full recomputation (translate --no-cache)
  c.from_hyperparameters = FromHyperparameters;
  c.from_metadata = ConfigFromMetadata;
  c.metadata = ConfigMetadata;
  c.from_value = FromValue;
  c.to_value = ToValue;
  fc::TranslationParts<TransformerConfig, Transformer, Translator>(c);
  return RegisterFamily(c);
}

}  // namespace sf
