// `sf-trainer transcribe`: a speech model's checkpoint (arch speech_transformer_ctc) reads an
// audio manifest (docs/speech.md) and prints one transcript per utterance, in manifest order, on
// stdout — greedy CTC decoding, or prefix beam search with --beam N > 1; a model with an
// attention decoder (joint CTC/attention) by joint beam search of width --beam (1: greedy) with
// its training ctc_weight unless --ctc-weight, or by its CTC head alone with --ctc-only. The
// front end (sample rate, mels, window, hop, CMVN) is the one the checkpoint's experiment
// trained with, so its features match training; they are cached like a run's
// (data::WritableCacheRoot beside the manifest unless --cache-dir). The manifest's transcripts
// score the output: stderr gets the corpus WER and CER (error_rate.h).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace sf {

struct TranscribeCommandOptions {
  std::string checkpoint;
  std::string manifest;
  int beam = 1;               // 1: greedy
  double ctc_weight = -1;     // joint search's CTC weight; < 0: the checkpoint's
  bool ctc_only = false;      // a joint model decoded by its CTC head alone
  int64_t max_frames = 0;     // 0: the checkpoint's max_frames hyperparameter
  std::string cache_dir;      // "" : beside the manifest, with TranslationData's fallbacks
  std::string device = "cpu";
  int threads = 0;
  bool quiet = false;         // no score line
};

void AddTranscribeFlags(CLI::App& command, TranscribeCommandOptions* o);
// Exit status: 0, 1 (decoding failed), 2 (the checkpoint, the manifest or a flag is wrong).
int RunTranscribe(const TranscribeCommandOptions& o);

}  // namespace sf
