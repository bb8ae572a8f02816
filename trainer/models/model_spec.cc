#include "trainer/models/model_spec.h"

#include "trainer/models/lstm_model.h"
#include "trainer/models/weights_io.h"

namespace sf {

const std::vector<std::string>& ModelFamilies() {
  static const std::vector<std::string> families = {"transformer", "lstm", "transformer_lm", "fconv"};
  return families;
}

ModelShape ModelSpec::shape() const {
  if (family == "lstm") return ModelShape{lstm.src_vocab, lstm.tgt_vocab, lstm.pad_id, lstm.max_positions};
  if (family == "transformer_lm") return ModelShape{lm.vocab, lm.vocab, lm.pad_id, lm.max_positions};
  if (family == "fconv") return ModelShape{fconv.src_vocab, fconv.tgt_vocab, fconv.pad_id, fconv.max_positions};
  return ModelShape{transformer.src_vocab, transformer.tgt_vocab, transformer.pad_id, transformer.max_positions};
}

std::map<std::string, std::string> ModelSpec::metadata() const {
  if (family == "lstm") return LstmMetadata(lstm);
  if (family == "transformer_lm") return TransformerLmMetadata(lm);
  if (family == "fconv") return FConvMetadata(fconv);
  return ConfigMetadata(transformer);
}

Status ModelSpec::Validate() const {
  if (family == "lstm") return lstm.Validate();
  if (family == "transformer") return transformer.Validate();
  if (family == "transformer_lm") return lm.Validate();
  if (family == "fconv") return fconv.Validate();
  return InvalidArgument("model family '" + family + "' is not one of transformer, lstm, transformer_lm, fconv");
}

Result<ModelSpec> ModelSpecFromMetadata(const std::map<std::string, std::string>& m) {
  auto arch = m.find("arch");
  if (arch == m.end()) return InvalidArgument("__metadata__ has no 'arch' (weights written without their configuration)");
  ModelSpec spec;
  spec.family = arch->second;
  if (spec.family == "transformer") {
    SF_ASSIGN_OR_RETURN(spec.transformer, ConfigFromMetadata(m));
  } else if (spec.family == "lstm") {
    SF_ASSIGN_OR_RETURN(spec.lstm, LstmConfigFromMetadata(m));
  } else if (spec.family == "transformer_lm") {
    SF_ASSIGN_OR_RETURN(spec.lm, TransformerLmConfigFromMetadata(m));
  } else if (spec.family == "fconv") {
    SF_ASSIGN_OR_RETURN(spec.fconv, FConvConfigFromMetadata(m));
  } else {
    std::string known;
    for (const auto& f : ModelFamilies()) known += (known.empty() ? "" : ", ") + f;
    return InvalidArgument("__metadata__ arch: '" + arch->second + "' is not a known architecture (" + known + ")");
  }
  return spec;
}

Status CheckMetadataFits(const std::map<std::string, std::string>& metadata, const TrainableModel<float>& model) {
  if (metadata.empty()) return Status::Ok();
  auto arch = metadata.find("arch");
  if (arch != metadata.end() && arch->second != model.family()) {
    return InvalidArgument("the weights are for another model: arch is " + arch->second + " in the weights, " +
                           model.family() + " in this model");
  }
  // A text family's metadata is read back through its config (older files lack keys that have
  // defaults); another family's is compared as written.
  std::map<std::string, std::string> stored = metadata;
  if (dynamic_cast<const Seq2SeqModel<float>*>(&model)) {
    SF_ASSIGN_OR_RETURN(ModelSpec spec, ModelSpecFromMetadata(metadata));
    if (spec.family != model.family()) {
      return InvalidArgument("the weights are for another model: arch is " + spec.family + " in the weights, " +
                             model.family() + " in this model");
    }
    stored = spec.metadata();
  }
  const std::map<std::string, std::string> ours = model.Metadata();
  for (const auto& [key, value] : stored) {
    if (key == "label_smoothing") continue;  // a loss setting, not the architecture
    auto here = ours.find(key);
    if (here == ours.end() || value != here->second) {
      return InvalidArgument("the weights are for another model: " + key + " is " + value + " in the weights, " +
                             (here == ours.end() ? std::string("absent") : here->second) + " in this model");
    }
  }
  return Status::Ok();
}

std::unique_ptr<Seq2SeqModel<float>> MakeModel(const ModelSpec& spec, Backend<float>* backend, DType compute) {
  if (spec.family == "lstm") return std::make_unique<LstmModel<float>>(spec.lstm, backend, compute);
  if (spec.family == "transformer_lm") return std::make_unique<TransformerLm<float>>(spec.lm, backend, compute);
  if (spec.family == "fconv") return std::make_unique<FConvModel<float>>(spec.fconv, backend, compute);
  return std::make_unique<Transformer<float>>(spec.transformer, backend, compute);
}

}  // namespace sf
