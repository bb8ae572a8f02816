// FConvConfig: its checks, its cost, its conv specs as text and its __metadata__ both ways
// (fconv.h). The model is in fconv.cc.
#include <map>
#include <string>
#include <vector>

#include "trainer/models/fconv.h"
#include "trainer/models/model_metadata.h"

namespace sf {

Status FConvConfig::Validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    return InvalidArgument("hyperparameters." + field + ": " + why);
  };
  if (encoder_embed < 1) return bad("encoder_embed_dim", "must be >= 1");
  if (decoder_embed < 1) return bad("decoder_embed_dim", "must be >= 1");
  if (decoder_out_embed < 1) return bad("decoder_out_embed_dim", "must be >= 1");
  if (encoder_convs.empty()) return bad("encoder_layers", "must be >= 1");
  if (decoder_convs.empty()) return bad("decoder_layers", "must be >= 1");
  for (const auto* side : {&encoder_convs, &decoder_convs}) {
    for (const ConvSpec& c : *side) {
      if (c.channels < 1) return bad("conv_channels", "must be >= 1");
      if (c.kernel < 1) return bad("kernel_size", "must be >= 1");
    }
  }
  if (share_input_output_embed && decoder_out_embed != decoder_embed) {
    return bad("share_decoder_input_output_embed",
               "true needs decoder_out_embed_dim " + std::to_string(decoder_out_embed) + " to equal decoder_embed_dim " +
                   std::to_string(decoder_embed));
  }
  if (src_vocab < 2 || tgt_vocab < 2) return bad("vocab", "must be >= 2");
  if (pad_id < 0 || pad_id >= std::min(src_vocab, tgt_vocab)) return bad("pad_id", "outside the vocabulary");
  if (max_positions < 1) return bad("max_positions", "must be >= 1");
  if (!(dropout >= 0.0f && dropout < 1.0f)) return bad("dropout", "must be in [0, 1)");
  if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f)) return bad("label_smoothing", "must be in [0, 1)");
  return Status::Ok();
}

double FConvConfig::TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const {
  // Multiply-adds of the forward (projections, convolutions, attention, output), x2 for FLOPs,
  // x3 for forward + backward.
  const double ns = static_cast<double>(batch * src_len), nt = static_cast<double>(batch * tgt_len);
  auto stack = [](const std::vector<ConvSpec>& convs, double embed, double n) {
    double f = n * embed * static_cast<double>(convs.front().channels);
    double in = static_cast<double>(convs.front().channels);
    for (const ConvSpec& c : convs) {
      const double out = static_cast<double>(c.channels);
      f += n * static_cast<double>(c.kernel) * in * 2 * out;
      if (in != out) f += n * in * out;
      in = out;
    }
    return f + n * in * embed;
  };
  double fwd = stack(encoder_convs, static_cast<double>(encoder_embed), ns) +
               stack(decoder_convs, static_cast<double>(decoder_embed), nt);
  for (const ConvSpec& c : decoder_convs) {
    fwd += nt * 2 * static_cast<double>(c.channels * decoder_embed) +
           nt * 2 * static_cast<double>(src_len * decoder_embed);
  }
  fwd += nt * static_cast<double>(decoder_out_embed) * static_cast<double>(tgt_vocab);
  return 3 * 2 * fwd;
}

std::string ConvSpecsText(const std::vector<ConvSpec>& specs) {
  std::string out;
  for (const ConvSpec& c : specs) {
    out += (out.empty() ? "" : ",") + std::to_string(c.channels) + "x" + std::to_string(c.kernel);
  }
  return out;
}

Result<std::vector<ConvSpec>> ParseConvSpecs(const std::string& text) {
  std::vector<ConvSpec> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t x = item.find('x');
    ConvSpec c;
    try {
      if (x == std::string::npos) throw std::invalid_argument(item);
      size_t used = 0;
      c.channels = std::stoll(item.substr(0, x), &used);
      if (used != x) throw std::invalid_argument(item);
      c.kernel = std::stoll(item.substr(x + 1), &used);
      if (used != item.size() - x - 1) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return InvalidArgument("'" + text + "' is not a list of CHANNELSxKERNEL layers ('" + item + "')");
    }
    if (c.channels < 1 || c.kernel < 1 || c.channels > 65536 || c.kernel > 64) {
      return InvalidArgument("'" + item + "' is out of range");
    }
    out.push_back(c);
    start = comma + 1;
  }
  return out;
}

std::map<std::string, std::string> FConvMetadata(const FConvConfig& c) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  return {{"arch", "fconv"},
          {"encoder_embed_dim", std::to_string(c.encoder_embed)},
          {"decoder_embed_dim", std::to_string(c.decoder_embed)},
          {"decoder_out_embed_dim", std::to_string(c.decoder_out_embed)},
          {"encoder_layers", ConvSpecsText(c.encoder_convs)},
          {"decoder_layers", ConvSpecsText(c.decoder_convs)},
          {"share_decoder_input_output_embed", b(c.share_input_output_embed)},
          {"src_vocab", std::to_string(c.src_vocab)},
          {"tgt_vocab", std::to_string(c.tgt_vocab)},
          {"pad_id", std::to_string(c.pad_id)},
          {"max_positions", std::to_string(c.max_positions)},
          {"label_smoothing", MetaText(c.label_smoothing)}};
}

Result<FConvConfig> FConvConfigFromMetadata(const std::map<std::string, std::string>& m) {
  auto arch = m.find("arch");
  if (arch == m.end() || arch->second != "fconv") return InvalidArgument("__metadata__ arch: not 'fconv'");
  FConvConfig c;
  SF_ASSIGN_OR_RETURN(c.encoder_embed, MetaInt(m, "encoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(c.decoder_embed, MetaInt(m, "decoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(c.decoder_out_embed, MetaInt(m, "decoder_out_embed_dim"));
  for (const char* key : {"encoder_layers", "decoder_layers"}) {
    auto it = m.find(key);
    if (it == m.end()) return InvalidArgument(std::string("__metadata__ has no '") + key + "'");
    auto specs = ParseConvSpecs(it->second);
    if (!specs.ok()) return InvalidArgument(std::string("__metadata__ ") + key + ": " + specs.status().message());
    (std::string(key) == "encoder_layers" ? c.encoder_convs : c.decoder_convs) = *specs;
  }
  SF_ASSIGN_OR_RETURN(c.share_input_output_embed, MetaBool(m, "share_decoder_input_output_embed"));
  SF_ASSIGN_OR_RETURN(MetaSizes sizes, ReadMetaSizes(m, true));
  c.src_vocab = sizes.src_vocab;
  c.tgt_vocab = sizes.tgt_vocab;
  c.pad_id = sizes.pad_id;
  c.max_positions = sizes.max_positions;
  SF_ASSIGN_OR_RETURN(c.label_smoothing, MetaFloatOr(m, "label_smoothing", c.label_smoothing));
  Status st = c.Validate();
  if (!st.ok()) return st.WithContext("__metadata__");
  return c;
}

}  // namespace sf
