// The schema side of the family registry (common/config/families/model_families.h): every
// family's archs belong to it alone and are the `arch` values the schema accepts; every family a
// hyperparameter names is registered; each family's task, article and derived defaults are what
// the checks and messages built on them say.
#include "common/config/families/model_families.h"

#include <gtest/gtest.h>

#include <set>

#include "common/config/hyperparameter_schema.h"

namespace sf::config {
namespace {

TEST(ModelFamilies, EachArchBelongsToExactlyOneFamilyNamedByItsFirstArch) {
  std::vector<std::string> archs;
  std::set<std::string> seen;
  for (const FamilySchema& f : FamilySchemas()) {
    ASSERT_FALSE(f.archs.empty()) << f.name;
    EXPECT_EQ(f.archs.front().first, f.name) << "a family's first arch is named after it";
    EXPECT_TRUE(f.article == "a" || f.article == "an") << f.name;
    EXPECT_NE(f.decode, nullptr) << f.name;
    EXPECT_EQ(FindFamilySchema(f.name), &f);
    for (const auto& [arch, preset] : f.archs) {
      EXPECT_TRUE(seen.insert(arch).second) << arch << " is registered twice";
      EXPECT_EQ(FamilySchemaOfArch(arch), &f) << arch;
      EXPECT_EQ(ArchFamily(arch), f.name) << arch;
      archs.push_back(arch);
    }
  }
  // The schema's `arch` accepts exactly the registered archs, in the families' order.
  EXPECT_EQ(FindHyperparameterSpec("arch")->options, archs);
  EXPECT_EQ(FindFamilySchema("lstm_tiny"), nullptr);
  EXPECT_EQ(FamilySchemaOfArch("lstm_tiny"), nullptr);
  EXPECT_EQ(ArchFamily("lstm_tiny"), "");
}

TEST(ModelFamilies, EveryFamilyAHyperparameterNamesIsRegistered) {
  for (const auto& [name, spec] : HyperparameterSchema()) {
    for (const std::string& family : spec.families) {
      EXPECT_NE(FindFamilySchema(family), nullptr)
          << name << " names an unregistered family " << family;
    }
  }
}

TEST(ModelFamilies, TasksDecideWhichFamiliesModelLanguageOrRecogniseSpeech) {
  std::set<std::string> lm, speech;
  for (const FamilySchema& f : FamilySchemas()) {
    if (IsLanguageModelFamily(f.name)) lm.insert(f.name);
    if (IsSpeechFamily(f.name)) speech.insert(f.name);
    EXPECT_EQ(IsLanguageModelFamily(f.name), f.task == FamilyTask::kLanguageModel) << f.name;
    EXPECT_EQ(IsSpeechFamily(f.name), f.task == FamilyTask::kSpeechRecognition) << f.name;
  }
  EXPECT_EQ(lm, std::set<std::string>{"transformer_lm"});
  EXPECT_EQ(speech, std::set<std::string>{"speech_transformer_ctc"});
  EXPECT_FALSE(IsSpeechFamily(""));
  EXPECT_FALSE(IsLanguageModelFamily("nope"));
}

TEST(ModelFamilies, PresetsAreTheRegisteredOnes) {
  size_t count = 0;
  for (const FamilySchema& f : FamilySchemas()) {
    for (const auto& [arch, preset] : f.archs) {
      ++count;
      auto it = ArchPresets().find(arch);
      ASSERT_NE(it, ArchPresets().end()) << arch;
      EXPECT_EQ(Value(it->second), Value(preset)) << arch;
    }
  }
  EXPECT_EQ(ArchPresets().size(), count);
}

TEST(ModelFamilies, DerivedDefaultsAreTheFamilysOwn) {
  // The lstm's dropout rates follow `dropout`; other families get none of them.
  Value lstm = WithDefaults(Value(Value::Map{{"arch", "lstm"}, {"dropout", 0.25}}));
  EXPECT_EQ(lstm.Find("decoder_dropout_out")->as_double(), 0.25);
  Value transformer = WithDefaults(Value(Value::Map{{"arch", "transformer"}, {"dropout", 0.25}}));
  EXPECT_EQ(transformer.Find("decoder_dropout_out"), nullptr);
  // The speech model's CTC weight: 1 alone, 0.3 with an attention decoder.
  Value ctc = WithDefaults(Value(Value::Map{{"arch", "speech_transformer_ctc_small"}}));
  EXPECT_EQ(ctc.Find("ctc_weight")->as_double(), 1.0);
  Value joint = WithDefaults(
      Value(Value::Map{{"arch", "speech_transformer_ctc_small"}, {"decoder_layers", 2}}));
  EXPECT_EQ(joint.Find("ctc_weight")->as_double(), 0.3);
  EXPECT_EQ(transformer.Find("ctc_weight"), nullptr);
}

}  // namespace
}  // namespace sf::config
