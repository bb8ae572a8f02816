#include "common/config/families/model_families.h"

namespace sf::config {

const std::vector<FamilySchema>& FamilySchemas() {
  static const auto* families = new std::vector<FamilySchema>{
      TransformerFamilySchema(),          LstmFamilySchema(),
      TransformerLmFamilySchema(),        FConvFamilySchema(),
      SpeechTransformerCtcFamilySchema(),
  };
  return *families;
}

const FamilySchema* FindFamilySchema(const std::string& family) {
  for (const FamilySchema& f : FamilySchemas()) {
    if (f.name == family) return &f;
  }
  return nullptr;
}

const FamilySchema* FamilySchemaOfArch(const std::string& arch) {
  for (const FamilySchema& f : FamilySchemas()) {
    for (const auto& [name, preset] : f.archs) {
      if (name == arch) return &f;
    }
  }
  return nullptr;
}

}  // namespace sf::config
