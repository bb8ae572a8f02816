// fairseq's lstm: an attentional LSTM encoder-decoder (with input feeding), and GNMT's deep
// variant.
#include "common/config/families/model_families.h"

namespace sf::config {
namespace {

// fairseq's lstm: each of the four dropout rates defaults to the completed `dropout`.
constexpr const char* kDropoutRates[] = {"encoder_dropout_in", "encoder_dropout_out",
                                         "decoder_dropout_in", "decoder_dropout_out"};

Status Decode(const KnobReader& r, TrialHyperparameters& hp) {
  LstmHp l;
  SF_ASSIGN_OR_RETURN(l.encoder_embed_dim, r.Int("encoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(l.encoder_hidden_size, r.Int("encoder_hidden_size"));
  SF_ASSIGN_OR_RETURN(l.encoder_layers, r.Int("encoder_layers"));
  SF_ASSIGN_OR_RETURN(l.encoder_bidirectional, r.Bool("encoder_bidirectional"));
  SF_ASSIGN_OR_RETURN(l.encoder_bidirectional_layers, r.Int("encoder_bidirectional_layers"));
  SF_ASSIGN_OR_RETURN(l.encoder_dropout_in, r.Number("encoder_dropout_in"));
  SF_ASSIGN_OR_RETURN(l.encoder_dropout_out, r.Number("encoder_dropout_out"));
  SF_ASSIGN_OR_RETURN(l.decoder_embed_dim, r.Int("decoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(l.decoder_hidden_size, r.Int("decoder_hidden_size"));
  SF_ASSIGN_OR_RETURN(l.decoder_out_embed_dim, r.Int("decoder_out_embed_dim"));
  SF_ASSIGN_OR_RETURN(l.decoder_layers, r.Int("decoder_layers"));
  SF_ASSIGN_OR_RETURN(l.decoder_dropout_in, r.Number("decoder_dropout_in"));
  SF_ASSIGN_OR_RETURN(l.decoder_dropout_out, r.Number("decoder_dropout_out"));
  SF_ASSIGN_OR_RETURN(l.residual_from_layer, r.Int("residual_from_layer"));
  hp.lstm = l;
  return Status::Ok();
}

}  // namespace

FamilySchema LstmFamilySchema() {
  FamilySchema f;
  f.name = "lstm";
  f.article = "an";  // read "el-es-tee-em"
  f.task = FamilyTask::kTranslation;
  f.archs = {
      // fairseq's lstm base_architecture.
      {"lstm",
       {{"encoder_embed_dim", 512},
        {"encoder_hidden_size", 512},
        {"encoder_layers", 1},
        {"encoder_bidirectional", false},
        {"decoder_embed_dim", 512},
        {"decoder_hidden_size", 512},
        {"decoder_out_embed_dim", 512},
        {"decoder_layers", 1},
        {"share_decoder_input_output_embed", false}}},
      // Ours, sized for Multi30k on a CPU.
      {"lstm_small",
       {{"encoder_embed_dim", 256},
        {"encoder_hidden_size", 256},
        {"encoder_layers", 1},
        {"encoder_bidirectional", true},
        {"decoder_embed_dim", 256},
        {"decoder_hidden_size", 512},
        {"decoder_out_embed_dim", 256},
        {"decoder_layers", 1},
        {"share_decoder_input_output_embed", true},
        {"dropout", 0.2}}},
      // GNMT (Wu et al. 2016) at 4 + 4 layers: the encoder's first layer bidirectional, the
      // three above it one way; residual connections from layer 3 in the encoder and the
      // decoder; with fairseq's attention and input feeding.
      {"lstm_gnmt4",
       {{"encoder_embed_dim", 512},
        {"encoder_hidden_size", 512},
        {"encoder_layers", 4},
        {"encoder_bidirectional", true},
        {"encoder_bidirectional_layers", 1},
        {"decoder_embed_dim", 512},
        {"decoder_hidden_size", 512},
        {"decoder_out_embed_dim", 512},
        {"decoder_layers", 4},
        {"share_decoder_input_output_embed", true},
        {"residual_from_layer", 3},
        {"dropout", 0.2}}},
  };
  f.derive_defaults = [](Value::Map& completed) {
    const Value dropout = completed.at("dropout");  // given, preset or default
    for (const char* rate : kDropoutRates) completed.try_emplace(rate, dropout);
  };
  f.decode = Decode;
  return f;
}

}  // namespace sf::config
