// Reading the `data` section of an experiment config, and the data's rules against the model.
//
// Internal to common/config: ParseExperimentConfig reads the section with ReadData and, for a
// native experiment, checks the data against the archs its trials can get with
// CheckDataForArchs once the whole document is read. DataFiles (experiment_config.h) is defined
// here too.
//
// Each split (`train`, `valid`, `test`) is either parallel text, `{src: FILE, tgt: FILE}`, or
// one side's text, `{text: FILE}`, which a language model trains on. The latter is read as
// ParallelFiles with `tgt` = FILE and `src` empty (ParallelFiles::monolingual): the text is the
// target side, the side every model's decoder predicts. All splits of a document are of one
// kind. A third kind is speech: `{manifest: FILE}`, audio with transcripts (docs/speech.md),
// read into ParallelFiles::manifest; with it the section may give `features` (the front end:
// sample_rate, mels, window_ms, hop_ms, utterance_cmvn) and `spec_augment` (a map of
// SpecAugmentConfig's fields, or a bool), and may not give the text keys (`tokenizer`,
// `max_source_positions`, `max_target_positions`); text data may not give the speech keys.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/config/yaml_reader.h"

namespace sf::config {

// Reads the section `node`, at `path` ("data"), into `out`. Besides each field's type and range
// it refuses, each at the path the user wrote:
//  - a split giving `text` together with `src` or `tgt` (at the split, naming the keys);
//  - `src` without `tgt` or the reverse (the missing key; an empty split misses `text` when an
//    earlier split is monolingual, else `src` and `tgt`);
//  - a split of another kind than the first split read (at that split: "data.train is
//    monolingual (text); data.valid must be too").
void ReadData(ErrorSink& sink, const YAML::Node& node, const std::string& path, DataConfig& out);

// The data against `archs`, the archs the experiment's trials can get (ArchCandidates): one
// side's text trains a language model only, so monolingual data with an arch of a family that
// translates (transformer, lstm, fconv) is refused at data.train, located at `train_node`,
// naming the first such arch ("one-sided text (text:) trains a language model; arch
// transformer_tiny translates and needs src and tgt"). Parallel data suits every text family (a
// language model trains on its target side). Speech data needs an arch of the speech family
// (IsSpeechFamily), and an arch of the speech family needs speech data. Archs of no family are skipped (an unknown arch is
// reported already), as is a train split that could not be read. For native experiments only:
// user code reads what data it likes.
void CheckDataForArchs(ErrorSink& sink, const DataConfig& data,
                       const std::vector<std::string>& archs, const YAML::Node& train_node);

}  // namespace sf::config
