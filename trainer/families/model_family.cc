#include "trainer/families/model_family.h"

namespace sf {

// Each family's entry (trainer/families/<name>_family.cc).
ModelFamily TransformerFamily();
ModelFamily LstmFamily();
ModelFamily TransformerLmFamily();
ModelFamily FConvFamily();

namespace {

// The registrations: one line per family.
const std::vector<ModelFamily>& Registry() {
  static const auto* families = new std::vector<ModelFamily>{
      TransformerFamily(),
      LstmFamily(),
      TransformerLmFamily(),
      FConvFamily(),
  };
  return *families;
}

}  // namespace

Result<Activation> ActivationNamed(const std::string& name) {
  if (name == "relu") return Activation::kRelu;
  if (name == "gelu") return Activation::kGelu;
  return InvalidArgument("hyperparameters.activation: '" + name + "' must be relu or gelu");
}

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kGelu: return "gelu";
    case Activation::kTanh: return "tanh";
    default: return "relu";
  }
}

const ModelFamily* FindModelFamily(const std::string& name) {
  for (const ModelFamily& f : Registry()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const std::vector<std::string>& ModelFamilies() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string>;
    for (const ModelFamily& f : Registry()) out->push_back(f.name);
    return out;
  }();
  return *names;
}

std::string ModelFamilyList() {
  std::string out;
  for (const std::string& f : ModelFamilies()) out += (out.empty() ? "" : ", ") + f;
  return out;
}

}  // namespace sf
