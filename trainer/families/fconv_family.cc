// fairseq's convolutional sequence-to-sequence model (ConvS2S, Gehring et al. 2017): its entry in
// the family registry (model_family.h).
#include <tuple>

#include "trainer/decoding/fconv_generator.h"
#include "trainer/families/family_codec.h"
#include "trainer/families/model_family.h"
#include "trainer/models/fconv.h"

namespace sf {
namespace {

namespace fc = family_codec;

// fairseq's "[(conv_channels, kernel_size)] * encoder_layers" (and the decoder's).
Result<FConvConfig> FromHyperparameters(const config::TrialHyperparameters& hp) {
  const config::FConvHp& f = *hp.fconv;
  FConvConfig c;
  c.encoder_embed = f.encoder_embed_dim;
  c.decoder_embed = f.decoder_embed_dim;
  c.decoder_out_embed = f.decoder_out_embed_dim;
  const ConvSpec layer{f.conv_channels, f.kernel_size};
  for (const auto& [key, n, convs] : {std::tuple{"encoder_layers", f.encoder_layers, &c.encoder_convs},
                                      std::tuple{"decoder_layers", f.decoder_layers, &c.decoder_convs}}) {
    if (n < 1 || n > 1024) return InvalidArgument(std::string("hyperparameters.") + key + ": must be from 1 to 1024");
    convs->assign(static_cast<size_t>(n), layer);
  }
  c.dropout = static_cast<float>(hp.dropout);
  c.share_input_output_embed = hp.text->share_decoder_input_output_embed;
  c.label_smoothing = static_cast<float>(hp.text->label_smoothing);
  return c;
}

// The layer lists themselves ("512x3,512x3,...").
Result<FConvConfig> FromValue(const Value& v) {
  FConvConfig c;
  c.encoder_embed = fc::Int(v, "encoder_embed_dim", c.encoder_embed);
  c.decoder_embed = fc::Int(v, "decoder_embed_dim", c.decoder_embed);
  c.decoder_out_embed = fc::Int(v, "decoder_out_embed_dim", c.decoder_out_embed);
  for (const auto& [key, convs] :
       {std::pair{"encoder_layers", &c.encoder_convs}, std::pair{"decoder_layers", &c.decoder_convs}}) {
    const Value* x = v.Find(key);
    if (!x || !x->is_string()) return InvalidArgument(std::string(key) + ": expected the layer list (\"512x3,...\")");
    auto specs = ParseConvSpecs(x->as_string());
    if (!specs.ok()) return InvalidArgument(std::string(key) + ": " + specs.status().message());
    *convs = *specs;
  }
  c.dropout = static_cast<float>(fc::Num(v, "dropout", c.dropout));
  c.share_input_output_embed = fc::Flag(v, "share_decoder_input_output_embed", c.share_input_output_embed);
  c.label_smoothing = static_cast<float>(fc::Num(v, "label_smoothing", c.label_smoothing));
  fc::ReadSizes(v, c);
  return c;
}

Value ToValue(const FConvConfig& c) {
  Value::Map v{{"arch", "fconv"},
               {"encoder_embed_dim", c.encoder_embed},
               {"decoder_embed_dim", c.decoder_embed},
               {"decoder_out_embed_dim", c.decoder_out_embed},
               {"encoder_layers", ConvSpecsText(c.encoder_convs)},
               {"decoder_layers", ConvSpecsText(c.decoder_convs)},
               {"dropout", static_cast<double>(c.dropout)},
               {"share_decoder_input_output_embed", c.share_input_output_embed},
               {"label_smoothing", static_cast<double>(c.label_smoothing)}};
  fc::WriteSizes(c, v);
  return Value(std::move(v));
}

}  // namespace

ModelFamily FConvFamily() {
  FamilyCodec<FConvConfig> c;
  c.name = "fconv";
  c.from_hyperparameters = FromHyperparameters;
  c.from_metadata = FConvConfigFromMetadata;
  c.metadata = FConvMetadata;
  c.from_value = FromValue;
  c.to_value = ToValue;
  fc::TranslationParts<FConvConfig, FConvModel, FConvGenerator>(c);
  return RegisterFamily(c);
}

}  // namespace sf
