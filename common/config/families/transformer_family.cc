// The Transformer (Vaswani et al. 2017; fairseq's transformer archs) that translates.
#include "common/config/families/model_families.h"

namespace sf::config {

FamilySchema TransformerFamilySchema() {
  FamilySchema f;
  f.name = "transformer";
  f.article = "a";
  f.task = FamilyTask::kTranslation;
  const Value::Map base = {{"d_model", 512},
                           {"heads", 8},
                           {"encoder_layers", 6},
                           {"decoder_layers", 6},
                           {"ffn_dim", 2048}};
  f.archs = {
      // fairseq's transformer (= base sizes).
      {"transformer", base},
      {"transformer_tiny",
       {{"d_model", 256},
        {"heads", 4},
        {"encoder_layers", 3},
        {"decoder_layers", 3},
        {"ffn_dim", 1024}}},
      {"transformer_base", base},
      // fairseq's transformer_vaswani_wmt_en_de_big.
      {"transformer_big",
       {{"d_model", 1024},
        {"heads", 16},
        {"encoder_layers", 6},
        {"decoder_layers", 6},
        {"ffn_dim", 4096},
        {"dropout", 0.3}}},
  };
  f.decode = [](const KnobReader& r, TrialHyperparameters& hp) -> Status {
    TransformerHp t;
    SF_ASSIGN_OR_RETURN(t.encoder_layers, r.Int("encoder_layers"));
    SF_ASSIGN_OR_RETURN(t.decoder_layers, r.Int("decoder_layers"));
    SF_ASSIGN_OR_RETURN(t.share_embeddings, r.Bool("share_embeddings"));
    hp.transformer = t;
    return Status::Ok();
  };
  return f;
}

}  // namespace sf::config
