// fairseq's fconv: convolutional sequence to sequence learning (ConvS2S, Gehring et al. 2017).
#include "common/config/families/model_families.h"

namespace sf::config {

FamilySchema FConvFamilySchema() {
  FamilySchema f;
  f.name = "fconv";
  f.article = "an";  // read "ef-conv"
  f.task = FamilyTask::kTranslation;
  // fairseq's fconv_iwslt_de_en: 4 + 3 convolutions of 256 channels.
  const Value::Map iwslt = {{"encoder_embed_dim", 256},
                            {"decoder_embed_dim", 256},
                            {"decoder_out_embed_dim", 256},
                            {"encoder_layers", 4},
                            {"decoder_layers", 3},
                            {"conv_channels", 256},
                            {"kernel_size", 3},
                            {"share_decoder_input_output_embed", false}};
  // Ours, sized for Multi30k on a 2-core CPU: fconv_iwslt_de_en's sizes, tied output.
  Value::Map small = iwslt;
  small["share_decoder_input_output_embed"] = true;
  small["dropout"] = 0.2;
  f.archs = {
      // fairseq's fconv base_architecture: 20 + 20 convolutions of 512 channels, width 3.
      {"fconv",
       {{"encoder_embed_dim", 512},
        {"decoder_embed_dim", 512},
        {"decoder_out_embed_dim", 256},
        {"encoder_layers", 20},
        {"decoder_layers", 20},
        {"conv_channels", 512},
        {"kernel_size", 3},
        {"share_decoder_input_output_embed", false}}},
      {"fconv_iwslt_de_en", iwslt},
      {"fconv_small", small},
  };
  f.decode = [](const KnobReader& r, TrialHyperparameters& hp) -> Status {
    FConvHp c;
    SF_ASSIGN_OR_RETURN(c.encoder_embed_dim, r.Int("encoder_embed_dim"));
    SF_ASSIGN_OR_RETURN(c.decoder_embed_dim, r.Int("decoder_embed_dim"));
    SF_ASSIGN_OR_RETURN(c.decoder_out_embed_dim, r.Int("decoder_out_embed_dim"));
    SF_ASSIGN_OR_RETURN(c.encoder_layers, r.Int("encoder_layers"));
    SF_ASSIGN_OR_RETURN(c.decoder_layers, r.Int("decoder_layers"));
    SF_ASSIGN_OR_RETURN(c.conv_channels, r.Int("conv_channels"));
    SF_ASSIGN_OR_RETURN(c.kernel_size, r.Int("kernel_size"));
    hp.fconv = c;
    return Status::Ok();
  };
  return f;
}

}  // namespace sf::config
