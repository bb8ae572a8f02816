// The native models' cross-field hyperparameter checks: which hyperparameters apply to which
// architecture family (hyperparameter_schema.h: HpSpec::families, ArchFamily), and the rules
// between a family's values. Internal to common/config: ParseExperimentConfig runs
// CheckNativeModelHyperparameters on a whole experiment's search space once the document is
// read; ValidateTrialHyperparameters (experiment_config.h) runs the trial versions on one
// concrete set.
#pragma once

#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/config/hyperparameter_reader.h"
#include "common/config/hyperparameter_schema.h"
#include "common/config/yaml_reader.h"

namespace sf::config {

// The values of `arch` a trial of the experiment can get, each once, in the order written: the
// constant, every categorical value, or the schema's default ("transformer") when absent. Empty
// when `arch` was written but is not valid (already reported: an unknown arch lists the known
// ones), so that no family or cross-field check guesses at it. Also the archs the data and
// metric rules check (data_config.h, ParseExperimentConfig).
std::vector<std::string> ArchCandidates(const Hyperparameters& hps,
                                        const HyperparameterLocations& locations);

// The native trainer's cross-field checks, for every value `arch` can take (ArchCandidates)
// and, per arch, every value a space can take, else the arch preset's value, else the schema
// default:
//  - a hyperparameter given that does not apply to the family of one of those archs is refused
//    at its path (NotForArchMessage);
//  - transformer and transformer_lm families: `heads` divides `d_model`;
//  - transformer family: `share_embeddings: true` needs a shared vocabulary
//    (data.tokenizer.shared) and a tied output projection;
//  - lstm family: `decoder_layers` <= `encoder_layers` (not fconv: its sides' convolutions are
//    independent), and `residual_from_layer` names an existing layer above the first;
//  - lstm and fconv families (those with a `decoder_out_embed_dim`):
//    `share_decoder_input_output_embed: true` needs `decoder_out_embed_dim` ==
//    `decoder_embed_dim`.
// Each rule is reported once, at a path the user wrote where there is one. Not for free-form
// hyperparameters.
void CheckNativeModelHyperparameters(ErrorSink& sink, const ExperimentConfig& config,
                                     const HyperparameterLocations& locations);

// The refusal of a hyperparameter that does not apply to `arch`: "does not apply to arch
// lstm_small (an lstm model); it applies to the transformer and transformer_lm families",
// "does not apply to arch transformer_lm_small (a transformer_lm model); it applies to the
// transformer, lstm and fconv families", "does not apply to arch fconv_small (an fconv model);
// it applies to the lstm family".
std::string NotForArchMessage(const HpSpec& spec, const std::string& arch);

// The same rules on one trial's concrete hyperparameters (already checked one by one), for a
// trial whose arch is of `family` ("" when its arch is invalid: nothing to check). Errors have
// no location.
void CheckTrialModelHyperparameters(ErrorSink& sink, const Value& hparams, const std::string& family);

}  // namespace sf::config
