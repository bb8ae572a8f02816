#include "trainer/models/weights_io.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>
#include <vector>

#include "trainer/core/safetensors.h"
#include "trainer/models/model_metadata.h"
#include "trainer/models/model_spec.h"

namespace sf {

std::map<std::string, std::string> ConfigMetadata(const TransformerConfig& c) {
  return {{"arch", "transformer"},
          {"d_model", std::to_string(c.d_model)},
          {"heads", std::to_string(c.heads)},
          {"encoder_layers", std::to_string(c.encoder_layers)},
          {"decoder_layers", std::to_string(c.decoder_layers)},
          {"ffn_dim", std::to_string(c.ffn_dim)},
          {"activation", ActivationText(c.activation)},
          {"normalize_before", c.normalize_before ? "true" : "false"},
          {"share_embeddings", c.share_embeddings ? "true" : "false"},
          {"share_decoder_input_output_embed",
           c.share_decoder_input_output_embed ? "true" : "false"},
          {"src_vocab", std::to_string(c.src_vocab)},
          {"tgt_vocab", std::to_string(c.tgt_vocab)},
          {"pad_id", std::to_string(c.pad_id)},
          {"max_positions", std::to_string(c.max_positions)},
          {"label_smoothing", std::to_string(c.label_smoothing)}};
}


Result<TransformerConfig> ConfigFromMetadata(const std::map<std::string, std::string>& m) {
  auto arch = m.find("arch");
  if (arch == m.end()) return InvalidArgument("__metadata__ has no 'arch' (weights written without their configuration)");
  if (arch->second != "transformer") {
    return InvalidArgument("__metadata__ arch: '" + arch->second + "' is not a known architecture (transformer)");
  }
  TransformerConfig c;
  SF_ASSIGN_OR_RETURN(c.d_model, MetaInt(m, "d_model"));
  SF_ASSIGN_OR_RETURN(c.heads, MetaInt(m, "heads"));
  SF_ASSIGN_OR_RETURN(c.encoder_layers, MetaInt(m, "encoder_layers"));
  SF_ASSIGN_OR_RETURN(c.decoder_layers, MetaInt(m, "decoder_layers"));
  SF_ASSIGN_OR_RETURN(c.ffn_dim, MetaInt(m, "ffn_dim"));
  SF_ASSIGN_OR_RETURN(c.normalize_before, MetaBool(m, "normalize_before"));
  SF_ASSIGN_OR_RETURN(c.share_embeddings, MetaBool(m, "share_embeddings"));
  // Files written before the output projection could be untied have no key: they are tied.
  if (m.count("share_decoder_input_output_embed")) {
    SF_ASSIGN_OR_RETURN(c.share_decoder_input_output_embed,
                        MetaBool(m, "share_decoder_input_output_embed"));
  }
  SF_ASSIGN_OR_RETURN(MetaSizes sizes, ReadMetaSizes(m, true));
  c.src_vocab = sizes.src_vocab;
  c.tgt_vocab = sizes.tgt_vocab;
  c.pad_id = sizes.pad_id;
  c.max_positions = sizes.max_positions;
  SF_ASSIGN_OR_RETURN(c.activation, MetaActivation(m));
  if (auto ls = m.find("label_smoothing"); ls != m.end()) {
    char* end = nullptr;
    const float v = std::strtof(ls->second.c_str(), &end);
    if (ls->second.empty() || *end != '\0') {
      return InvalidArgument("__metadata__ label_smoothing: '" + ls->second + "' is not a number");
    }
    c.label_smoothing = v;
  }
  Status st = c.Validate();
  if (!st.ok()) return st.WithContext("__metadata__");
  return c;
}

Status SaveWeights(Seq2SeqModel<float>& model, const std::string& path) {
  ParamStore<float>& store = model.params();
  store.PullValues();  // a device model's values, copied to the host view
  std::vector<safetensors::TensorView> views;
  for (size_t i = 0; i < store.params().size(); ++i) {
    const ParamInfo& p = store.params()[i];
    views.push_back(safetensors::F32View(
        p.name, p.shape,
        std::span<const float>(store.host_value(static_cast<int>(i)), static_cast<size_t>(p.numel))));
  }
  return safetensors::WriteFile(path, views, model.Metadata());
}

Status LoadWeights(Seq2SeqModel<float>& model, const std::string& path) {
  SF_ASSIGN_OR_RETURN(safetensors::SafetensorsFile file, safetensors::SafetensorsFile::Open(path));
  SF_RETURN_IF_ERROR(CheckMetadataFits(file.metadata(), model).WithContext(path));
  ParamStore<float>& store = model.params();
  std::vector<std::span<const float>> data;
  for (const ParamInfo& p : store.params()) {
    auto t = file.ReadF32(p.name, &p.shape);
    if (!t.ok()) return t.status().WithContext(path);
    data.push_back(*t);
  }
  for (size_t i = 0; i < data.size(); ++i)
    std::memcpy(store.host_value(static_cast<int>(i)), data[i].data(), data[i].size_bytes());
  store.PushValues();
  model.WeightsUpdated();
  return Status::Ok();
}

}  // namespace sf
