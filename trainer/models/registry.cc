#include "trainer/models/registry.h"

#include <charconv>
#include <functional>

namespace sf {
namespace {

struct Preset {
  const char* name;
  std::function<void(TransformerConfig&)> apply;
};

// A preset that sets the model's sizes (layers on each side), and its dropout when given.
std::function<void(TransformerConfig&)> Sized(int64_t d_model, int64_t heads, int64_t ffn_dim,
                                              int64_t layers, float dropout = -1.0f) {
  return [=](TransformerConfig& c) {
    c.d_model = d_model;
    c.heads = heads;
    c.ffn_dim = ffn_dim;
    c.encoder_layers = layers;
    c.decoder_layers = layers;
    if (dropout >= 0) c.dropout = dropout;
  };
}

const std::vector<Preset>& Presets() {
  static const std::vector<Preset> presets = {
      {"transformer", [](TransformerConfig&) {}},  // fairseq transformer (base) defaults
      {"transformer_tiny", Sized(256, 4, 1024, 3)},
      {"transformer_base", Sized(512, 8, 2048, 6)},
      // fairseq's transformer_vaswani_wmt_en_de_big (Vaswani et al. "big"): 1024 / 16 heads /
      // 4096 / 6+6, dropout 0.3.
      {"transformer_big", Sized(1024, 16, 4096, 6, 0.3f)},
  };
  return presets;
}

Status ParseInt(const std::string& key, const std::string& v, int64_t* out) {
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data(), end, *out);
  if (ec != std::errc() || p != end)
    return InvalidArgument("hyperparameters." + key + ": '" + v + "' is not an integer");
  return Status::Ok();
}

Status ParseFloat(const std::string& key, const std::string& v, float* out) {
  try {
    size_t pos = 0;
    *out = std::stof(v, &pos);
    if (pos != v.size()) throw std::invalid_argument(v);
  } catch (const std::exception&) {
    return InvalidArgument("hyperparameters." + key + ": '" + v + "' is not a number");
  }
  return Status::Ok();
}

Status ParseBool(const std::string& key, const std::string& v, bool* out) {
  if (v == "true" || v == "1" || v == "True") *out = true;
  else if (v == "false" || v == "0" || v == "False") *out = false;
  else return InvalidArgument("hyperparameters." + key + ": '" + v + "' is not a boolean");
  return Status::Ok();
}

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const Preset& p : Presets()) names.push_back(p.name);
  return names;
}

Result<TransformerConfig> MakeModelConfig(const std::string& name,
                                          const HyperparameterMap& overrides) {
  std::string arch = name;
  if (auto it = overrides.find("arch"); it != overrides.end() && name.empty()) arch = it->second;
  const Preset* preset = nullptr;
  for (const Preset& p : Presets())
    if (arch == p.name) preset = &p;
  if (!preset) {
    std::string known;
    for (const auto& n : ModelNames()) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgument("hyperparameters.arch: unknown model '" + arch + "' (known: " + known + ")");
  }
  TransformerConfig c;
  preset->apply(c);
  for (const auto& [key, v] : overrides) {
    int64_t i = 0;
    float f = 0;
    bool b = false;
    if (key == "arch") continue;
    if (key == "d_model" || key == "heads" || key == "encoder_layers" ||
        key == "decoder_layers" || key == "ffn_dim" || key == "src_vocab" ||
        key == "tgt_vocab" || key == "pad_id" || key == "max_positions") {
      SF_RETURN_IF_ERROR(ParseInt(key, v, &i));
      if (key == "d_model") c.d_model = i;
      else if (key == "heads") c.heads = i;
      else if (key == "encoder_layers") c.encoder_layers = i;
      else if (key == "decoder_layers") c.decoder_layers = i;
      else if (key == "ffn_dim") c.ffn_dim = i;
      else if (key == "src_vocab") c.src_vocab = i;
      else if (key == "tgt_vocab") c.tgt_vocab = i;
      else if (key == "pad_id") c.pad_id = static_cast<int32_t>(i);
      else c.max_positions = i;
    } else if (key == "dropout" || key == "attention_dropout" || key == "activation_dropout" ||
               key == "label_smoothing") {
      SF_RETURN_IF_ERROR(ParseFloat(key, v, &f));
      if (key == "dropout") c.dropout = f;
      else if (key == "attention_dropout") c.attention_dropout = f;
      else if (key == "activation_dropout") c.activation_dropout = f;
      else c.label_smoothing = f;
    } else if (key == "normalize_before" || key == "share_embeddings" ||
               key == "share_decoder_input_output_embed") {
      SF_RETURN_IF_ERROR(ParseBool(key, v, &b));
      if (key == "normalize_before") c.normalize_before = b;
      else if (key == "share_embeddings") c.share_embeddings = b;
      else c.share_decoder_input_output_embed = b;
    } else if (key == "activation") {
      if (v == "relu") c.activation = Activation::kRelu;
      else if (v == "gelu") c.activation = Activation::kGelu;
      else return InvalidArgument("hyperparameters.activation: '" + v + "' is not relu or gelu");
    } else {
      return InvalidArgument("hyperparameters." + key + ": unknown hyperparameter for " + arch);
    }
  }
  SF_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace sf
