#include "trainer/models/model_metadata.h"

#include <cstdint>
#include <cstdlib>
#include <exception>

namespace sf {

Result<int64_t> MetaInt(const Metadata& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end()) return InvalidArgument("__metadata__ has no '" + key + "'");
  const std::string& v = it->second;
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size()) return InvalidArgument("__metadata__ " + key + ": '" + v + "' is not an integer");
  return n;
}

Result<bool> MetaBool(const Metadata& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end()) return InvalidArgument("__metadata__ has no '" + key + "'");
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  return InvalidArgument("__metadata__ " + key + ": '" + it->second + "' is not true or false");
}

Result<float> MetaFloat(const Metadata& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end()) return InvalidArgument("__metadata__ has no '" + key + "'");
  char* end = nullptr;
  const float v = std::strtof(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0') {
    return InvalidArgument("__metadata__ " + key + ": '" + it->second + "' is not a number");
  }
  return v;
}

Result<float> MetaFloatOr(const Metadata& m, const std::string& key, float def) {
  if (!m.count(key)) return def;
  return MetaFloat(m, key);
}

Result<Activation> MetaActivation(const Metadata& m) {
  auto act = m.find("activation");
  if (act == m.end()) return InvalidArgument("__metadata__ has no 'activation'");
  if (act->second == "relu") return Activation::kRelu;
  if (act->second == "gelu") return Activation::kGelu;
  return InvalidArgument("__metadata__ activation: '" + act->second + "' is not relu or gelu");
}

const char* ActivationText(Activation a) { return a == Activation::kGelu ? "gelu" : "relu"; }

Result<MetaSizes> ReadMetaSizes(const Metadata& m, bool source) {
  MetaSizes s;
  if (source) {
    SF_ASSIGN_OR_RETURN(s.src_vocab, MetaInt(m, "src_vocab"));
  }
  SF_ASSIGN_OR_RETURN(s.tgt_vocab, MetaInt(m, "tgt_vocab"));
  SF_ASSIGN_OR_RETURN(int64_t pad, MetaInt(m, "pad_id"));
  if (pad < 0 || pad > INT32_MAX) return InvalidArgument("__metadata__ pad_id: out of range");
  s.pad_id = static_cast<int32_t>(pad);
  SF_ASSIGN_OR_RETURN(s.max_positions, MetaInt(m, "max_positions"));
  return s;
}

std::string MetaText(float v) { return std::to_string(v); }

}  // namespace sf
