#include "trainer/models/model_spec.h"

#include <cstdio>
#include <cstdlib>
#include <typeindex>

#include "trainer/models/transformer.h"

namespace sf {

ModelSpec::ModelSpec() : ModelSpec("transformer", std::make_unique<FamilyConfigOf<TransformerConfig>>(TransformerConfig{})) {}

ModelSpec::ModelSpec(const std::string& family, std::unique_ptr<FamilyConfig> config)
    : entry_(FindModelFamily(family)), config_(std::move(config)) {
  if (entry_ == nullptr || config_ == nullptr || config_->type() != entry_->config_type) {
    std::fprintf(stderr, "ModelSpec: '%s' is not a registered family with this config type\n", family.c_str());
    std::abort();
  }
}

ModelSpec::ModelSpec(const ModelSpec& other) : entry_(other.entry_), config_(other.config_->Clone()) {}

ModelSpec& ModelSpec::operator=(const ModelSpec& other) {
  if (this != &other) {
    entry_ = other.entry_;
    config_ = other.config_->Clone();
  }
  return *this;
}

void ModelSpec::CheckType(const std::type_info& type) const {
  if (std::type_index(type) != config_->type()) {
    std::fprintf(stderr, "ModelSpec: a %s model's config asked for as another family's\n", entry_->name.c_str());
    std::abort();
  }
}

Result<ModelSpec> ModelSpecFromMetadata(const std::map<std::string, std::string>& m) {
  auto arch = m.find("arch");
  if (arch == m.end()) return InvalidArgument("__metadata__ has no 'arch' (weights written without their configuration)");
  const ModelFamily* family = FindModelFamily(arch->second);
  if (family == nullptr) {
    return InvalidArgument("__metadata__ arch: '" + arch->second + "' is not a known architecture (" +
                           ModelFamilyList() + ")");
  }
  SF_ASSIGN_OR_RETURN(std::unique_ptr<FamilyConfig> config, family->from_metadata(m));
  return ModelSpec(family->name, std::move(config));
}

Result<ModelSpec> ModelSpecFromValue(const Value& v) {
  if (!v.is_map()) return InvalidArgument("trainer_state.json: 'model' is missing");
  const Value* arch = v.Find("arch");
  const std::string name = arch && arch->is_string() ? arch->as_string() : "transformer";
  const ModelFamily* family = FindModelFamily(name);
  if (family == nullptr) {
    return InvalidArgument("trainer_state.json model: arch: '" + name + "' is not a known architecture (" +
                           ModelFamilyList() + ")");
  }
  auto config = family->from_value(v);
  if (!config.ok()) return config.status().WithContext("trainer_state.json model");
  ModelSpec spec(family->name, std::move(*config));
  if (Status st = spec.Validate(); !st.ok()) return st.WithContext("trainer_state.json model");
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
    if (spec.family() != model.family()) {
      return InvalidArgument("the weights are for another model: arch is " + spec.family() + " in the weights, " +
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
  return spec.entry().make_model(spec.erased(), backend, compute);
}

}  // namespace sf
