// fairseq's decoder-only transformer_lm, a language model: its entry in the family registry
// (model_family.h). It translates nothing (no generator here: lm_generator.h continues text).
#include "trainer/families/family_codec.h"
#include "trainer/families/model_family.h"
#include "trainer/models/transformer_lm.h"

namespace sf {
namespace {

namespace fc = family_codec;

Result<TransformerLmConfig> FromHyperparameters(const config::TrialHyperparameters& hp) {
  TransformerLmConfig c;
  SF_RETURN_IF_ERROR(fc::SetAttention(hp, c));
  c.layers = hp.transformer_lm->decoder_layers;
  c.share_input_output_embed = hp.text->share_decoder_input_output_embed;
  c.label_smoothing = static_cast<float>(hp.text->label_smoothing);
  return c;
}

// The sizes shared with the Transformer keep their names (decoder_layers: its layers).
Result<TransformerLmConfig> FromValue(const Value& v) {
  TransformerLmConfig c;
  SF_RETURN_IF_ERROR(fc::ReadAttention(v, c));
  c.layers = fc::Int(v, "decoder_layers", c.layers);
  c.share_input_output_embed = fc::Flag(v, "share_decoder_input_output_embed", c.share_input_output_embed);
  c.label_smoothing = static_cast<float>(fc::Num(v, "label_smoothing", c.label_smoothing));
  c.vocab = fc::Int(v, "tgt_vocab", 0);
  c.pad_id = static_cast<int32_t>(fc::Int(v, "pad_id", c.pad_id));
  c.max_positions = fc::Int(v, "max_positions", c.max_positions);
  return c;
}

Value ToValue(const TransformerLmConfig& c) {
  Value::Map v{{"arch", "transformer_lm"},
               {"decoder_layers", c.layers},
               {"share_decoder_input_output_embed", c.share_input_output_embed},
               {"label_smoothing", static_cast<double>(c.label_smoothing)},
               {"src_vocab", c.vocab},  // one vocabulary, both sides
               {"tgt_vocab", c.vocab},
               {"pad_id", static_cast<int64_t>(c.pad_id)},
               {"max_positions", c.max_positions}};
  fc::WriteAttention(c, v);
  return Value(std::move(v));
}

}  // namespace

ModelFamily TransformerLmFamily() {
  FamilyCodec<TransformerLmConfig> c;
  c.name = "transformer_lm";
  c.language_model = true;
  c.from_hyperparameters = FromHyperparameters;
  c.from_metadata = TransformerLmConfigFromMetadata;
  c.metadata = TransformerLmMetadata;
  c.from_value = FromValue;
  c.to_value = ToValue;
  c.shape = [](const TransformerLmConfig& x) { return ModelShape{x.vocab, x.vocab, x.pad_id, x.max_positions}; };
  // A language model reads and writes the target side.
  c.set_shape = [](TransformerLmConfig& x, const ModelShape& s) {
    x.vocab = s.tgt_vocab;
    x.pad_id = s.pad_id;
    x.max_positions = s.max_positions;
  };
  c.make_model = [](const TransformerLmConfig& x, Backend<float>* b, DType d) -> std::unique_ptr<Seq2SeqModel<float>> {
    return std::make_unique<TransformerLm<float>>(x, b, d);
  };
  return RegisterFamily(c);
}

}  // namespace sf
