#include "trainer/models/weights_io.h"

#include <cstring>
#include <span>
#include <vector>

#include "trainer/core/safetensors.h"

namespace sf {

std::map<std::string, std::string> ConfigMetadata(const TransformerConfig& c) {
  return {{"arch", "transformer"},
          {"d_model", std::to_string(c.d_model)},
          {"heads", std::to_string(c.heads)},
          {"encoder_layers", std::to_string(c.encoder_layers)},
          {"decoder_layers", std::to_string(c.decoder_layers)},
          {"ffn_dim", std::to_string(c.ffn_dim)},
          {"activation", c.activation == Activation::kRelu ? "relu" : "gelu"},
          {"normalize_before", c.normalize_before ? "true" : "false"},
          {"share_embeddings", c.share_embeddings ? "true" : "false"},
          {"src_vocab", std::to_string(c.src_vocab)},
          {"tgt_vocab", std::to_string(c.tgt_vocab)},
          {"pad_id", std::to_string(c.pad_id)},
          {"max_positions", std::to_string(c.max_positions)},
          {"label_smoothing", std::to_string(c.label_smoothing)}};
}

Status SaveWeights(Transformer<float>& model, const std::string& path) {
  ParamStore<float>& store = model.params();
  std::vector<safetensors::TensorView> views;
  for (size_t i = 0; i < store.params().size(); ++i) {
    const ParamInfo& p = store.params()[i];
    views.push_back(safetensors::F32View(
        p.name, p.shape,
        std::span<const float>(store.value(static_cast<int>(i)), static_cast<size_t>(p.numel))));
  }
  return safetensors::WriteFile(path, views, ConfigMetadata(model.config()));
}

Status LoadWeights(Transformer<float>& model, const std::string& path) {
  SF_ASSIGN_OR_RETURN(safetensors::SafetensorsFile file, safetensors::SafetensorsFile::Open(path));
  ParamStore<float>& store = model.params();
  std::vector<std::span<const float>> data;
  for (const ParamInfo& p : store.params()) {
    auto t = file.ReadF32(p.name, &p.shape);
    if (!t.ok()) return t.status().WithContext(path);
    data.push_back(*t);
  }
  for (size_t i = 0; i < data.size(); ++i)
    std::memcpy(store.value(static_cast<int>(i)), data[i].data(), data[i].size_bytes());
  model.WeightsUpdated();
  return Status::Ok();
}

}  // namespace sf
