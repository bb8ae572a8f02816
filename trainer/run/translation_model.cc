#include "trainer/run/translation_model.h"

#include "trainer/models/weights_io.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/device_select.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/text_run.h"

namespace sf {

TranslationModel::~TranslationModel() = default;

int64_t TranslationModel::max_source_tokens() const { return spec_.shape().max_positions - 3; }

Result<std::unique_ptr<TranslationModel>> TranslationModel::Load(const TranslationModelOptions& options) {
  const std::string& checkpoint = options.checkpoint;
  SF_ASSIGN_OR_RETURN(CheckpointContents ck, ReadCheckpoint(checkpoint));
  auto mc = CheckpointModelSpec(ck);
  if (!mc.ok() || ck.sentencepiece_model.empty()) {
    return InvalidArgument("checkpoint " + checkpoint + " was not written by `sf-trainer train` on text (" +
                           (mc.ok() ? "no tokenizer" : mc.status().message()) + ")");
  }
  if (mc->language_model()) {
    return InvalidArgument("checkpoint " + checkpoint + " holds a " + mc->family() +
                           " language model: it continues text and translates nothing (use `sf-trainer generate`)");
  }
  std::unique_ptr<TranslationModel> m(new TranslationModel());
  auto source = data::SentencePieceModel::FromSerialized(ck.sentencepiece_model);
  if (!source.ok()) return InvalidArgument("checkpoint tokenizer: " + source.status().message());
  m->source_ = std::move(*source);
  if (!ck.sentencepiece_target_model.empty()) {
    auto target = data::SentencePieceModel::FromSerialized(ck.sentencepiece_target_model);
    if (!target.ok()) return InvalidArgument("checkpoint target tokenizer: " + target.status().message());
    m->target_ = std::move(*target);
  }
  auto device = ParseDevice(options.device);
  if (!device.ok()) return InvalidArgument("--device: " + device.status().message());
  if (device->device != Device::kCpu && !options.cache) {
    return InvalidArgument("--no-cache is a CPU reference mode; the " + device->description +
                           " search always caches");
  }
  auto backend = MakeTrainingBackend(*device);
  if (!backend.ok()) return InvalidArgument("--device " + options.device + ": " + backend.status().message());
  m->backend_ = std::move(*backend);
  if (!mc->entry().uncached_reference && !options.cache) {
    return InvalidArgument("--no-cache is the Transformer's reference mode; an " + mc->family() +
                           " model always decodes step by step from its cached state");
  }
  m->spec_ = *mc;
  m->model_ = MakeModel(m->spec_, m->backend_.get(), DType::kF32);
  SF_RETURN_IF_ERROR(LoadModelWeights(ck, checkpoint, *m->model_));
  const Value* hp = ck.state.Find("hparams");
  auto hparams = config::DecodeTrialHyperparameters(hp ? *hp : Value(Value::Map{}));
  if (!hparams.ok()) return hparams.status().WithContext("checkpoint " + checkpoint + " trainer_state.json");
  m->default_beam_ = BeamFromHyperparameters(*hparams);
  m->default_beam_.cache = options.cache;
  m->translator_ = MakeGenerator(m->model_.get());
  return m;
}

}  // namespace sf
