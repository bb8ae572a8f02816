#include "trainer/run/speech_commands.h"

#include <omp.h>

#include <cstdio>

#include "common/command_line.h"
#include "common/config/experiment_config.h"
#include "trainer/data/translation_data.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/device_select.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/speech_run.h"

namespace sf {
namespace {

// Exit 2 for what the user must fix (a wrong checkpoint, manifest or flag), 1 otherwise.
int Fail(const Status& st) {
  std::fprintf(stderr, "sf-trainer transcribe: %s\n", st.message().c_str());
  const StatusCode c = st.code();
  return c == StatusCode::kInvalidArgument || c == StatusCode::kNotFound || c == StatusCode::kDataLoss ? 2 : 1;
}

Status Transcribe(const TranscribeCommandOptions& o) {
  SF_ASSIGN_OR_RETURN(CheckpointContents ck, ReadCheckpoint(o.checkpoint));
  auto arch = ck.model_metadata.find("arch");
  if (arch == ck.model_metadata.end() || arch->second != "speech_transformer_ctc") {
    return InvalidArgument("checkpoint " + o.checkpoint + " holds " +
                           (arch == ck.model_metadata.end() ? std::string("no described model")
                                                            : "a " + arch->second + " model") +
                           ", not a speech recogniser (arch speech_transformer_ctc)");
  }
  SF_ASSIGN_OR_RETURN(SpeechCtcConfig mc, SpeechCtcConfigFromMetadata(ck.model_metadata));
  const Value* vocab_text = ck.state.Find("char_vocabulary");
  if (!vocab_text || !vocab_text->is_string()) {
    return InvalidArgument("checkpoint " + o.checkpoint + " has no character vocabulary (trainer_state.json)");
  }
  SF_ASSIGN_OR_RETURN(speech::CharVocabulary vocab,
                      speech::CharVocabulary::FromText(vocab_text->as_string(),
                                                       o.checkpoint + "/trainer_state.json char_vocabulary"));
  if (vocab.size() != mc.vocab) {
    return DataLoss("checkpoint " + o.checkpoint + ": the vocabulary has " + std::to_string(vocab.size()) +
                    " symbols, the model " + std::to_string(mc.vocab));
  }
  // The front end the model trained with: the checkpoint's experiment.
  config::ParseResult parsed = config::ParseExperimentConfig(ck.config_yaml);
  if (!parsed.ok()) {
    return InvalidArgument("checkpoint " + o.checkpoint + ": its experiment.yaml does not parse:\n" +
                           parsed.ErrorText());
  }
  const config::SpeechDataConfig& sd = parsed.config->data.speech;
  const Value* hp = ck.state.Find("hparams");
  TranscribeOptions to;
  to.beam = o.beam;
  to.ctc_weight = static_cast<float>(o.ctc_weight);
  to.ctc_only = o.ctc_only;
  if (!mc.has_decoder() && (o.ctc_weight >= 0 || o.ctc_only)) {
    return InvalidArgument(std::string(o.ctc_only ? "--ctc-only" : "--ctc-weight") + ": checkpoint " + o.checkpoint +
                           " holds a CTC model without a decoder (decoder_layers)");
  }
  to.utterance_cmvn = sd.utterance_cmvn;
  if (o.max_frames > 0) {
    to.max_frames = o.max_frames;
  } else {
    auto hparams = config::DecodeTrialHyperparameters(hp ? *hp : Value(Value::Map{{"arch", "speech_transformer_ctc"}}));
    if (!hparams.ok()) return hparams.status().WithContext("checkpoint " + o.checkpoint + " trainer_state.json");
    if (!hparams->speech) {
      return InvalidArgument("checkpoint " + o.checkpoint + ": its hyperparameters are a " + hparams->family +
                             " model's, not a speech recogniser's");
    }
    to.max_frames = hparams->speech->max_frames;
  }

  data::DataOptions dopt;
  dopt.cache_dir = o.cache_dir;
  speech::FeatureCacheOptions cache;
  SF_ASSIGN_OR_RETURN(cache.cache_dir, data::WritableCacheRoot(o.manifest, dopt));
  SF_ASSIGN_OR_RETURN(auto features, speech::SpeechFeatures::Open(o.manifest, FrontEndFromConfig(sd), cache));
  if (features->mels() != mc.mels) {
    return InvalidArgument(o.manifest + ": features have " + std::to_string(features->mels()) +
                           " mel bins, the model reads " + std::to_string(mc.mels));
  }
  SF_RETURN_IF_ERROR(CheckUtterancesFit(*features, mc));
  SF_ASSIGN_OR_RETURN(speech::EncodedTargets targets,
                      speech::EncodeTargets(o.manifest, features->utterances(), vocab));

  SF_ASSIGN_OR_RETURN(DeviceChoice device, ParseDevice(o.device));
  SF_ASSIGN_OR_RETURN(std::unique_ptr<Backend<float>> backend, MakeTrainingBackend(device));
  SpeechCtcModel<float> model(mc, backend.get(), DType::kF32);
  SF_RETURN_IF_ERROR(LoadModelWeights(ck, o.checkpoint, model));
  SF_ASSIGN_OR_RETURN(SplitTranscripts t, TranscribeSplit(model, *features, targets, vocab, to));
  for (const std::string& h : t.hypotheses) std::fputs((h + "\n").c_str(), stdout);
  std::fflush(stdout);
  if (!o.quiet) {
    std::string how = o.beam > 1 ? "beam " + std::to_string(o.beam) : std::string("greedy");
    if (mc.has_decoder()) {
      char w[32];
      std::snprintf(w, sizeof(w), "%.2f", o.ctc_weight >= 0 ? o.ctc_weight : static_cast<double>(mc.ctc_weight));
      how = o.ctc_only ? "CTC head only, " + how : "joint CTC/attention, " + how + ", ctc_weight " + w;
    }
    std::fprintf(stderr, "%s (%lld utterances, %s): %s, %s\n", o.manifest.c_str(),
                 static_cast<long long>(features->size()), how.c_str(), t.words.ToString("WER").c_str(),
                 t.chars.ToString("CER").c_str());
  }
  return Status::Ok();
}

}  // namespace

void AddTranscribeFlags(CLI::App& cmd, TranscribeCommandOptions* o) {
  cmd.add_option("--checkpoint", o->checkpoint, "checkpoint directory of a speech model")->required();
  cmd.add_option("--manifest", o->manifest, "audio manifest (TSV: id audio duration text speaker)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd.add_option("--beam", o->beam,
                 "beam width: CTC prefix beam, or joint CTC/attention beam for a model with a decoder (1: greedy)")
      ->check(cmdline::AtLeast(1));
  cmd.add_option("--ctc-weight", o->ctc_weight,
                 "joint search: the CTC prefix score's weight, 1 - it the decoder's "
                 "(default: the checkpoint's ctc_weight)")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_flag("--ctc-only", o->ctc_only, "decode a model with a decoder by its CTC head alone");
  cmd.add_option("--max-frames", o->max_frames, "feature frames per batch (default: the checkpoint's max_frames)")
      ->check(cmdline::AtLeast(1));
  cmd.add_option("--cache-dir", o->cache_dir, "where the manifest's features are cached (default: beside it)");
  cmd.add_option("--device", o->device, "cpu, cuda (the first visible GPU), cuda:N or auto");
  cmd.add_option("--threads", o->threads, "OpenMP threads (0: OpenMP's default)")->check(cmdline::AtLeast(0));
  cmd.add_flag("--quiet", o->quiet, "no WER/CER line on stderr");
}

int RunTranscribe(const TranscribeCommandOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  Status st = Transcribe(o);
  return st.ok() ? 0 : Fail(st);
}

}  // namespace sf
