// fairseq's decoder-only transformer_lm: a language model over one side's text.
#include "common/config/families/model_families.h"

namespace sf::config {

FamilySchema TransformerLmFamilySchema() {
  FamilySchema f;
  f.name = "transformer_lm";
  f.article = "a";
  f.task = FamilyTask::kLanguageModel;
  f.archs = {
      // fairseq's transformer_lm base_architecture (TransformerLanguageModelConfig: an untied
      // output projection).
      {"transformer_lm",
       {{"d_model", 512},
        {"heads", 8},
        {"decoder_layers", 6},
        {"ffn_dim", 2048},
        {"share_decoder_input_output_embed", false}}},
      // Ours, sized for Multi30k's English side on a CPU.
      {"transformer_lm_small",
       {{"d_model", 256},
        {"heads", 4},
        {"decoder_layers", 3},
        {"ffn_dim", 1024},
        {"share_decoder_input_output_embed", true}}},
  };
  f.decode = [](const KnobReader& r, TrialHyperparameters& hp) -> Status {
    TransformerLmHp t;
    SF_ASSIGN_OR_RETURN(t.decoder_layers, r.Int("decoder_layers"));
    hp.transformer_lm = t;
    return Status::Ok();
  };
  return f;
}

}  // namespace sf::config
