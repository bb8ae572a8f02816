// The speech recogniser (docs/speech.md): a Transformer encoder over subsampled log-mel frames
// with a CTC head, and optionally an attention decoder (joint CTC/attention).
#include "common/config/families/model_families.h"

namespace sf::config {

FamilySchema SpeechTransformerCtcFamilySchema() {
  FamilySchema f;
  f.name = "speech_transformer_ctc";
  f.article = "a";
  f.task = FamilyTask::kSpeechRecognition;
  // fairseq's s2t_transformer_s encoder (12 pre-norm layers of 256, 4 heads, 2048 inner) behind
  // ESPnet's Conv2dSubsampling at 256 channels; speech_transformer_ctc_base is its alias.
  const Value::Map base = {{"conv_channels", 256}, {"d_model", 256},  {"heads", 4},
                           {"encoder_layers", 12}, {"ffn_dim", 2048}, {"normalize_before", true}};
  f.archs = {
      {"speech_transformer_ctc", base},
      // Ours, sized for a 2-core CPU: 64 subsampling channels, 6 layers, 1024 inner.
      {"speech_transformer_ctc_small",
       {{"conv_channels", 64},
        {"d_model", 256},
        {"heads", 4},
        {"encoder_layers", 6},
        {"ffn_dim", 1024},
        {"normalize_before", true}}},
      {"speech_transformer_ctc_base", base},
  };
  f.derive_defaults = [](Value::Map& completed) {
    // Joint CTC/attention (ESPnet's mtlalpha): 0.3 with an attention decoder, 1 without one.
    auto decoder = completed.find("decoder_layers");
    completed.try_emplace("ctc_weight",
                          decoder != completed.end() && !decoder->second.is_null() ? 0.3 : 1.0);
  };
  f.decode = [](const KnobReader& r, TrialHyperparameters& hp) -> Status {
    SpeechCtcHp s;
    SF_ASSIGN_OR_RETURN(s.conv_channels, r.Int("conv_channels"));
    SF_ASSIGN_OR_RETURN(s.encoder_layers, r.Int("encoder_layers"));
    if (r.Has("decoder_layers")) {
      SF_ASSIGN_OR_RETURN(s.decoder_layers, r.Int("decoder_layers"));
    }
    SF_ASSIGN_OR_RETURN(s.ctc_weight, r.Number("ctc_weight"));
    SF_ASSIGN_OR_RETURN(s.max_frames, r.Int("max_frames"));
    hp.speech = s;
    return Status::Ok();
  };
  return f;
}

}  // namespace sf::config
