#include "common/config/hyperparameter_schema.h"

#include <algorithm>

#include "common/config/families/model_families.h"

namespace sf::config {
namespace {

HpSpec Int(double min, double max, Value def, std::string doc) {
  HpSpec s;
  s.type = HpSpec::Type::kInt;
  s.min = min;
  s.max = max;
  s.default_value = std::move(def);
  s.doc = std::move(doc);
  return s;
}

HpSpec Double(double min, double max, Value def, std::string doc, bool min_exclusive = false,
              bool max_exclusive = false) {
  HpSpec s;
  s.type = HpSpec::Type::kDouble;
  s.min = min;
  s.max = max;
  s.min_exclusive = min_exclusive;
  s.max_exclusive = max_exclusive;
  s.default_value = std::move(def);
  s.doc = std::move(doc);
  return s;
}

HpSpec Bool(bool def, std::string doc) {
  HpSpec s;
  s.type = HpSpec::Type::kBool;
  s.default_value = Value(def);
  s.doc = std::move(doc);
  return s;
}

HpSpec Enum(std::vector<std::string> options, Value def, std::string doc) {
  HpSpec s;
  s.type = HpSpec::Type::kEnum;
  s.options = std::move(options);
  s.default_value = std::move(def);
  s.doc = std::move(doc);
  return s;
}

// Limits a spec to some architecture families (ArchFamily).
HpSpec Families(HpSpec s, std::vector<std::string> families) {
  s.families = std::move(families);
  return s;
}

// fairseq's lstm: these four default to `dropout`.
std::vector<std::pair<std::string, HpSpec>> BuildSchema() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // The families by what their models have: Transformer layers (d_model, heads, ffn_dim...),
  // an encoder and a source sentence (encoder_layers, max_len_a/b: the output's length limit is
  // relative to the source), a source embedding to share (share_embeddings), embeddings of
  // their own width and a projection before the output one (fairseq's encoder_embed_dim,
  // decoder_embed_dim, decoder_out_embed_dim: the lstm and the fconv), LSTM cells,
  // convolutions.
  // The speech recogniser has Transformer layers in an encoder, convolutions, and optionally an
  // attention decoder (decoder_layers; joint CTC/attention), but no source embeddings or tokens
  // (docs/speech.md).
  const std::vector<std::string> kAttentionFamilies = {"transformer", "transformer_lm", "speech_transformer_ctc"};
  const std::vector<std::string> kEncoderFamilies = {"transformer", "lstm", "fconv"};
  const std::vector<std::string> kEncoderLayerFamilies = {"transformer", "lstm", "fconv", "speech_transformer_ctc"};
  const std::vector<std::string> kTextFamilies = {"transformer", "lstm", "transformer_lm", "fconv"};
  const std::vector<std::string> kConvFamilies = {"fconv", "speech_transformer_ctc"};
  const std::vector<std::string> kSpeech = {"speech_transformer_ctc"};
  const std::vector<std::string> kDecoderFamilies = {"transformer", "lstm", "transformer_lm", "fconv",
                                                     "speech_transformer_ctc"};
  const std::vector<std::string> kTransformer = {"transformer"};
  const std::vector<std::string> kEmbedDimFamilies = {"lstm", "fconv"};
  const std::vector<std::string> kLstm = {"lstm"};
  const std::vector<std::string> kFConv = {"fconv"};
  std::vector<std::pair<std::string, HpSpec>> s;
  std::vector<std::string> archs;  // every family's, in the families' order
  for (const FamilySchema& f : FamilySchemas()) {
    for (const auto& [arch, preset] : f.archs) archs.push_back(arch);
  }
  s.emplace_back("arch", Enum(std::move(archs), "transformer",
                              "model architecture; its preset sets the model sizes, which "
                              "explicit values override"));
  s.emplace_back("d_model",
                 Families(Int(8, 8192, Value(),
                              "model width (preset: tiny 256, base 512, big 1024, lm 512, "
                              "lm_small 256, speech 256)"),
                          kAttentionFamilies));
  s.emplace_back("heads", Families(Int(1, 128, Value(), "attention heads; must divide d_model"),
                                   kAttentionFamilies));
  s.emplace_back(
      "encoder_layers",
      Families(Int(1, 64, Value(),
                   "encoder layers (tiny 3, base 6, lstm 1; fconv: convolutions, fconv 20, "
                   "fconv_iwslt_de_en 4, fconv_small 4; speech_transformer_ctc 12, _small 6)"),
               kEncoderLayerFamilies));
  s.emplace_back("decoder_layers",
                 Families(Int(1, 64, Value(),
                              "decoder layers (tiny 3, base 6, lstm 1, lm 6, lm_small 3; fconv: "
                              "convolutions, fconv 20, fconv_iwslt_de_en 3, fconv_small 3; "
                              "speech_transformer_ctc: none unless set, which adds an attention "
                              "decoder for joint CTC/attention training)"),
                          kDecoderFamilies));
  s.emplace_back("ctc_weight",
                 Families(Double(0, 1, Value(),
                                 "joint CTC/attention: the CTC loss's weight, 1 − it the decoder's, "
                                 "and the CTC prefix score's in joint decoding (default 0.3 with "
                                 "decoder_layers, 1 without; below 1 needs decoder_layers)"),
                          kSpeech));
  s.emplace_back("ffn_dim", Families(Int(1, 65536, Value(),
                                         "feed-forward inner width (tiny 1024, base 2048, lm 2048, "
                                         "lm_small 1024, speech_transformer_ctc 2048, _small 1024)"),
                                     kAttentionFamilies));
  s.emplace_back("dropout", Double(0, 1, 0.1,
                                   "dropout on residual branches and embeddings (lstm: the "
                                   "default of the four dropout_in/out rates)",
                                   false, true));
  s.emplace_back("attention_dropout",
                 Families(Double(0, 1, 0.0, "dropout on attention probabilities", false, true),
                          kAttentionFamilies));
  s.emplace_back(
      "activation_dropout",
      Families(Double(0, 1, 0.0, "dropout after the feed-forward activation", false, true),
               kAttentionFamilies));
  s.emplace_back("activation", Families(Enum({"relu", "gelu"}, "relu", "feed-forward activation"),
                                        kAttentionFamilies));
  s.emplace_back("normalize_before",
                 Families(Bool(false,
                               "pre-norm (true) or post-norm (false, the original "
                               "Transformer)"),
                          kAttentionFamilies));
  s.emplace_back("share_embeddings",
                 Families(Bool(false,
                               "one embedding matrix for source and target (needs "
                               "data.tokenizer.shared: true)"),
                          kTransformer));
  s.emplace_back("share_decoder_input_output_embed",
                 Families(Bool(true,
                               "tie the decoder's input embedding and output projection (lstm, "
                               "transformer_lm, fconv, fconv_iwslt_de_en: false)"),
                          kTextFamilies));
  // fairseq's lstm (fairseq/models/lstm.py); the three embedding widths are fairseq's fconv's
  // too (fairseq/models/fconv.py). Sizes come from the preset; the four dropout rates default
  // to `dropout` (WithDefaults).
  s.emplace_back("encoder_embed_dim",
                 Families(Int(1, 65536, Value(),
                              "encoder embedding width (lstm 512, lstm_small 256, fconv 512, "
                              "fconv_iwslt_de_en 256, fconv_small 256)"),
                          kEmbedDimFamilies));
  s.emplace_back("encoder_hidden_size",
                 Families(Int(1, 65536, Value(),
                              "encoder hidden size per direction (lstm 512, lstm_small 256)"),
                          kLstm));
  s.emplace_back("encoder_bidirectional",
                 Families(Bool(false, "bidirectional encoder (lstm_small: true)"), kLstm));
  s.emplace_back("encoder_bidirectional_layers",
                 Families(Int(0, 64, 0,
                              "with encoder_bidirectional: how many of the encoder's bottom "
                              "layers run both ways, the rest one way (GNMT); 0: all "
                              "(fairseq's lstm; lstm_gnmt4: 1)"),
                          kLstm));
  s.emplace_back(
      "encoder_dropout_in",
      Families(Double(0, 1, Value(), "dropout on the encoder's embeddings (default: dropout)",
                      false, true),
               kLstm));
  s.emplace_back("encoder_dropout_out",
                 Families(Double(0, 1, Value(),
                                 "dropout on the encoder's outputs and between its layers "
                                 "(default: dropout)",
                                 false, true),
                          kLstm));
  s.emplace_back("decoder_embed_dim",
                 Families(Int(1, 65536, Value(),
                              "decoder embedding width (lstm 512, lstm_small 256, fconv 512, "
                              "fconv_iwslt_de_en 256, fconv_small 256)"),
                          kEmbedDimFamilies));
  s.emplace_back(
      "decoder_hidden_size",
      Families(Int(1, 65536, Value(), "decoder hidden size (lstm 512, lstm_small 512)"), kLstm));
  s.emplace_back("decoder_out_embed_dim",
                 Families(Int(1, 65536, Value(),
                              "width before the output projection (lstm 512, lstm_small 256, "
                              "fconv 256, fconv_iwslt_de_en 256, fconv_small 256)"),
                          kEmbedDimFamilies));
  s.emplace_back("residual_from_layer",
                 Families(Int(0, 64, 0,
                              "GNMT's residual connections from this layer (1-based) up, in the "
                              "encoder and the decoder; 0: none (lstm_gnmt4: 3)"),
                          kLstm));
  s.emplace_back(
      "decoder_dropout_in",
      Families(Double(0, 1, Value(), "dropout on the decoder's embeddings (default: dropout)",
                      false, true),
               kLstm));
  s.emplace_back("decoder_dropout_out",
                 Families(Double(0, 1, Value(),
                                 "dropout between the decoder's layers and on its outputs "
                                 "(default: dropout)",
                                 false, true),
                          kLstm));
  // fairseq's fconv (fairseq/models/fconv.py): encoder_layers and decoder_layers convolutions,
  // each of conv_channels channels and kernel_size wide (fairseq's "[(512, 3)] * 20").
  s.emplace_back("conv_channels",
                 Families(Int(1, 65536, Value(),
                              "channels of every convolution layer (fconv 512, fconv_iwslt_de_en "
                              "256, fconv_small 256; the speech model's two subsampling "
                              "convolutions: speech_transformer_ctc 256, _small 64)"),
                          kConvFamilies));
  s.emplace_back("kernel_size", Families(Int(1, 64, 3, "width of every convolution (3)"), kFConv));
  s.emplace_back("label_smoothing",
                 Families(Double(0, 1, 0.1, "label smoothing ε", false, true), kTextFamilies));
  s.emplace_back("lr", Double(0, 10, 5e-4, "peak learning rate", true));
  {
    HpSpec sched;
    sched.type = HpSpec::Type::kGroup;
    sched.doc = "learning-rate schedule";
    sched.members.emplace_back(
        "type", Enum({"constant", "inverse_sqrt", "linear", "cosine", "exponential"},
                     "inverse_sqrt", "schedule name"));
    sched.members.emplace_back("warmup", Int(0, 1e9, 4000, "linear warmup steps"));
    sched.members.emplace_back("warmup_init_lr",
                               Double(0, 10, 0.0, "learning rate at step 0 of the warmup"));
    sched.members.emplace_back(
        "total_steps",
        Int(1, 1e12, Value(), "steps to decay over (linear, cosine); default: searcher.max_length"));
    sched.members.emplace_back("min_lr", Double(0, 10, 0.0, "floor of linear/cosine decay"));
    sched.members.emplace_back("gamma",
                               Double(0, 1, 0.9999, "per-step decay factor (exponential)", true));
    sched.members_by_type = {
        {"constant", {"warmup", "warmup_init_lr"}},
        {"inverse_sqrt", {"warmup", "warmup_init_lr"}},
        {"linear", {"warmup", "warmup_init_lr", "total_steps", "min_lr"}},
        {"cosine", {"warmup", "warmup_init_lr", "total_steps", "min_lr"}},
        {"exponential", {"warmup", "warmup_init_lr", "gamma"}},
    };
    s.emplace_back("lr_schedule", std::move(sched));
  }
  {
    HpSpec opt;
    opt.type = HpSpec::Type::kGroup;
    opt.doc = "optimizer";
    opt.members.emplace_back("type", Enum({"adamw", "radam", "sgd"}, "adamw", "optimizer name"));
    HpSpec betas;
    betas.type = HpSpec::Type::kNumberList;
    betas.list_length = 2;
    betas.min = 0;
    betas.max = 1;
    betas.max_exclusive = true;
    betas.default_value = Value(Value::List{0.9, 0.98});
    betas.doc = "Adam β1, β2";
    opt.members.emplace_back("betas", std::move(betas));
    opt.members.emplace_back("eps", Double(0, 1, 1e-8, "Adam ε", true));
    opt.members.emplace_back("weight_decay", Double(0, 10, 0.0, "weight decay"));
    opt.members.emplace_back("momentum", Double(0, 1, 0.9, "SGD momentum", false, true));
    opt.members.emplace_back("nesterov", Bool(false, "SGD Nesterov momentum"));
    opt.members.emplace_back(
        "rho_threshold",
        Double(0, kInf, 5.0, "RAdam: rectified step when ρ_t exceeds this (torch: 5)"));
    opt.members.emplace_back(
        "decoupled_weight_decay",
        Bool(false, "RAdam: decoupled (AdamW-style) instead of L2 weight decay"));
    opt.members_by_type = {
        {"adamw", {"betas", "eps", "weight_decay"}},
        {"radam", {"betas", "eps", "weight_decay", "rho_threshold", "decoupled_weight_decay"}},
        {"sgd", {"momentum", "nesterov", "weight_decay"}},
    };
    s.emplace_back("optimizer", std::move(opt));
  }
  s.emplace_back("max_tokens", Families(Int(1, 1e9, 4096,
                                            "target+source token budget per micro-batch per rank (a "
                                            "language model: its text's tokens)"),
                                        kTextFamilies));
  s.emplace_back("max_frames",
                 Families(Int(1, 1e9, 10000,
                              "feature-frame budget per micro-batch per rank: utterances × the "
                              "longest one's frames (10 ms each)"),
                          kSpeech));
  s.emplace_back("clip_norm", Double(0, kInf, 0.0, "global gradient-norm clip; 0 turns it off"));
  s.emplace_back("seed", Int(0, 4294967295.0, 1, "seed for initialisation, dropout and shuffling"));
  s.emplace_back("beam_size",
                 Int(1, 64, 4,
                     "beam width for validation BLEU, translate and generate (speech: the CTC "
                     "prefix beam of transcribe --beam; validation decodes greedily)"));
  s.emplace_back("lenpen", Families(Double(0, 10, 1.0, "beam-search length penalty"), kTextFamilies));
  s.emplace_back("max_len_a", Families(Double(0, 10, 1.2, "output length limit: a·source + b"),
                                       kEncoderFamilies));
  s.emplace_back("max_len_b",
                 Families(Int(0, 4096, 10, "output length limit: a·source + b"), kEncoderFamilies));
  return s;
}

}  // namespace

const HpSpec* HpSpec::Member(const std::string& name) const {
  for (const auto& [n, spec] : members) {
    if (n == name) return &spec;
  }
  return nullptr;
}

const std::vector<std::pair<std::string, HpSpec>>& HyperparameterSchema() {
  static const auto* schema = new std::vector<std::pair<std::string, HpSpec>>(BuildSchema());
  return *schema;
}

const HpSpec* FindHyperparameterSpec(const std::string& name) {
  for (const auto& [n, spec] : HyperparameterSchema()) {
    if (n == name) return &spec;
  }
  return nullptr;
}

std::vector<std::string> HyperparameterNames() {
  std::vector<std::string> names;
  for (const auto& [n, spec] : HyperparameterSchema()) names.push_back(n);
  return names;
}

std::string ArchFamily(const std::string& arch) {
  const FamilySchema* f = FamilySchemaOfArch(arch);
  return f ? f->name : "";
}

bool IsLanguageModelFamily(const std::string& family) {
  const FamilySchema* f = FindFamilySchema(family);
  return f && f->task == FamilyTask::kLanguageModel;
}

bool IsSpeechFamily(const std::string& family) {
  const FamilySchema* f = FindFamilySchema(family);
  return f && f->task == FamilyTask::kSpeechRecognition;
}

bool AppliesTo(const HpSpec& spec, const std::string& family) {
  if (spec.families.empty()) return true;
  return std::find(spec.families.begin(), spec.families.end(), family) != spec.families.end();
}

const std::map<std::string, Value::Map>& ArchPresets() {
  static const auto* presets = [] {
    auto* m = new std::map<std::string, Value::Map>;
    for (const FamilySchema& f : FamilySchemas()) {
      for (const auto& [arch, preset] : f.archs) (*m)[arch] = preset;
    }
    return m;
  }();
  return *presets;
}

Value WithDefaults(const Value& hparams) {
  Value::Map out = hparams.is_map() ? hparams.as_map() : Value::Map{};
  std::string arch = "transformer";
  if (const Value* a = hparams.Find("arch"); a && a->is_string()) arch = a->as_string();
  out["arch"] = arch;
  const std::string family = ArchFamily(arch);
  if (auto it = ArchPresets().find(arch); it != ArchPresets().end()) {
    for (const auto& [k, v] : it->second) out.try_emplace(k, v);
  }
  for (const auto& [name, spec] : HyperparameterSchema()) {
    if (!AppliesTo(spec, family)) continue;
    if (spec.type == HpSpec::Type::kGroup) {
      Value::Map group;
      if (auto it = out.find(name); it != out.end() && it->second.is_map()) {
        group = it->second.as_map();
      }
      const HpSpec* type_spec = spec.Member("type");
      std::string type = group.count("type") && group["type"].is_string()
                             ? group["type"].as_string()
                             : type_spec->default_value.as_string();
      group["type"] = type;
      auto applies = spec.members_by_type.find(type);
      if (applies != spec.members_by_type.end()) {
        for (const std::string& member : applies->second) {
          const HpSpec* m = spec.Member(member);
          if (m && !m->default_value.is_null()) group.try_emplace(member, m->default_value);
        }
      }
      out[name] = Value(std::move(group));
    } else if (!spec.default_value.is_null()) {
      out.try_emplace(name, spec.default_value);
    }
  }
  if (const FamilySchema* f = FindFamilySchema(family); f && f->derive_defaults) f->derive_defaults(out);
  return Value(std::move(out));
}

}  // namespace sf::config
