#include "common/config/trial_hyperparameters.h"

#include <cmath>

#include "common/config/hyperparameter_schema.h"

namespace sf::config {
namespace {

// Reads the knobs of one map (the completed top level, or a group) by their specs. A member a
// group lacks (it does not apply to the group's type) is its spec's default; a top-level knob
// the map lacks is an error: after WithDefaults every knob of the family with a default or a
// preset value is there.
class Reader {
 public:
  Reader(const Value::Map& map, std::string path, const HpSpec* group = nullptr)
      : map_(map), path_(std::move(path)), group_(group) {}

  Result<int64_t> Int(const std::string& name) const {
    SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
    if (v->is_int()) return v->as_int();
    if (v->is_double() && std::trunc(v->as_double()) == v->as_double() && std::abs(v->as_double()) < 9e15) {
      return static_cast<int64_t>(v->as_double());
    }
    return InvalidArgument(Path(name) + ": expected an integer, got " + v->ToDisplay());
  }
  Result<double> Number(const std::string& name) const {
    SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
    if (!v->is_number()) return InvalidArgument(Path(name) + ": expected a number, got " + v->ToDisplay());
    return v->as_double();
  }
  Result<bool> Bool(const std::string& name) const {
    SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
    if (!v->is_bool()) return InvalidArgument(Path(name) + ": expected true or false, got " + v->ToDisplay());
    return v->as_bool();
  }
  // One of the spec's options.
  Result<std::string> Choice(const std::string& name) const {
    SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
    const HpSpec* spec = Spec(name);
    std::string options;
    for (const std::string& o : spec->options) {
      if (v->is_string() && v->as_string() == o) return o;
      options += (options.empty() ? "" : ", ") + o;
    }
    return InvalidArgument(Path(name) + ": " + v->ToDisplay() + " is not one of " + options);
  }
  bool Has(const std::string& name) const {
    auto it = map_.find(name);
    return it != map_.end() && !it->second.is_null();
  }
  Result<Reader> Group(const std::string& name) const {
    SF_ASSIGN_OR_RETURN(const Value* v, Find(name));
    if (!v->is_map()) return InvalidArgument(Path(name) + ": expected a map, got " + v->ToDisplay());
    return Reader(v->as_map(), Path(name), Spec(name));
  }
  std::string Path(const std::string& name) const { return path_ + "." + name; }

 private:
  const HpSpec* Spec(const std::string& name) const {
    return group_ ? group_->Member(name) : FindHyperparameterSpec(name);
  }
  Result<const Value*> Find(const std::string& name) const {
    if (auto it = map_.find(name); it != map_.end() && !it->second.is_null()) return &it->second;
    const HpSpec* spec = Spec(name);
    if (group_ && spec && !spec->default_value.is_null()) return &spec->default_value;
    return InvalidArgument(Path(name) + ": no value (the arch's preset gives none and the schema no default)");
  }

  const Value::Map& map_;
  std::string path_;
  const HpSpec* group_;
};

Result<LrScheduleHp> DecodeLrSchedule(const Reader& r) {
  LrScheduleHp s;
  SF_ASSIGN_OR_RETURN(s.type, r.Choice("type"));
  SF_ASSIGN_OR_RETURN(s.warmup, r.Int("warmup"));
  SF_ASSIGN_OR_RETURN(s.warmup_init_lr, r.Number("warmup_init_lr"));
  if (r.Has("total_steps")) { SF_ASSIGN_OR_RETURN(s.total_steps, r.Int("total_steps")); }
  SF_ASSIGN_OR_RETURN(s.min_lr, r.Number("min_lr"));
  SF_ASSIGN_OR_RETURN(s.gamma, r.Number("gamma"));
  return s;
}

Result<OptimizerHp> DecodeOptimizer(const Reader& r, const Value::Map& group) {
  OptimizerHp o;
  SF_ASSIGN_OR_RETURN(o.type, r.Choice("type"));
  const Value& betas = group.count("betas") ? group.at("betas") : FindHyperparameterSpec("optimizer")->Member("betas")->default_value;
  if (!betas.is_list() || betas.as_list().size() != 2 || !betas.as_list()[0].is_number() ||
      !betas.as_list()[1].is_number()) {
    return InvalidArgument(r.Path("betas") + ": expected [beta1, beta2], got " + betas.ToDisplay());
  }
  o.beta1 = betas.as_list()[0].as_double();
  o.beta2 = betas.as_list()[1].as_double();
  SF_ASSIGN_OR_RETURN(o.eps, r.Number("eps"));
  SF_ASSIGN_OR_RETURN(o.weight_decay, r.Number("weight_decay"));
  SF_ASSIGN_OR_RETURN(o.momentum, r.Number("momentum"));
  SF_ASSIGN_OR_RETURN(o.nesterov, r.Bool("nesterov"));
  SF_ASSIGN_OR_RETURN(o.rho_threshold, r.Number("rho_threshold"));
  SF_ASSIGN_OR_RETURN(o.decoupled_weight_decay, r.Bool("decoupled_weight_decay"));
  return o;
}

Result<AttentionHp> DecodeAttention(const Reader& r) {
  AttentionHp a;
  SF_ASSIGN_OR_RETURN(a.d_model, r.Int("d_model"));
  SF_ASSIGN_OR_RETURN(a.heads, r.Int("heads"));
  SF_ASSIGN_OR_RETURN(a.ffn_dim, r.Int("ffn_dim"));
  SF_ASSIGN_OR_RETURN(a.attention_dropout, r.Number("attention_dropout"));
  SF_ASSIGN_OR_RETURN(a.activation_dropout, r.Number("activation_dropout"));
  SF_ASSIGN_OR_RETURN(a.activation, r.Choice("activation"));
  SF_ASSIGN_OR_RETURN(a.normalize_before, r.Bool("normalize_before"));
  return a;
}

Result<LstmHp> DecodeLstm(const Reader& r) {
  LstmHp l;
  SF_ASSIGN_OR_RETURN(l.encoder_embed_dim, r.Int("encoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(l.encoder_hidden_size, r.Int("encoder_hidden_size"));
  SF_ASSIGN_OR_RETURN(l.encoder_layers, r.Int("encoder_layers"));
  SF_ASSIGN_OR_RETURN(l.encoder_bidirectional, r.Bool("encoder_bidirectional"));
  SF_ASSIGN_OR_RETURN(l.encoder_bidirectional_layers, r.Int("encoder_bidirectional_layers"));
  SF_ASSIGN_OR_RETURN(l.encoder_dropout_in, r.Number("encoder_dropout_in"));
  SF_ASSIGN_OR_RETURN(l.encoder_dropout_out, r.Number("encoder_dropout_out"));
  SF_ASSIGN_OR_RETURN(l.decoder_embed_dim, r.Int("decoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(l.decoder_hidden_size, r.Int("decoder_hidden_size"));
  SF_ASSIGN_OR_RETURN(l.decoder_out_embed_dim, r.Int("decoder_out_embed_dim"));
  SF_ASSIGN_OR_RETURN(l.decoder_layers, r.Int("decoder_layers"));
  SF_ASSIGN_OR_RETURN(l.decoder_dropout_in, r.Number("decoder_dropout_in"));
  SF_ASSIGN_OR_RETURN(l.decoder_dropout_out, r.Number("decoder_dropout_out"));
  SF_ASSIGN_OR_RETURN(l.residual_from_layer, r.Int("residual_from_layer"));
  return l;
}

Result<FConvHp> DecodeFConv(const Reader& r) {
  FConvHp f;
  SF_ASSIGN_OR_RETURN(f.encoder_embed_dim, r.Int("encoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(f.decoder_embed_dim, r.Int("decoder_embed_dim"));
  SF_ASSIGN_OR_RETURN(f.decoder_out_embed_dim, r.Int("decoder_out_embed_dim"));
  SF_ASSIGN_OR_RETURN(f.encoder_layers, r.Int("encoder_layers"));
  SF_ASSIGN_OR_RETURN(f.decoder_layers, r.Int("decoder_layers"));
  SF_ASSIGN_OR_RETURN(f.conv_channels, r.Int("conv_channels"));
  SF_ASSIGN_OR_RETURN(f.kernel_size, r.Int("kernel_size"));
  return f;
}

Result<SpeechCtcHp> DecodeSpeech(const Reader& r) {
  SpeechCtcHp s;
  SF_ASSIGN_OR_RETURN(s.conv_channels, r.Int("conv_channels"));
  SF_ASSIGN_OR_RETURN(s.encoder_layers, r.Int("encoder_layers"));
  if (r.Has("decoder_layers")) { SF_ASSIGN_OR_RETURN(s.decoder_layers, r.Int("decoder_layers")); }
  SF_ASSIGN_OR_RETURN(s.ctc_weight, r.Number("ctc_weight"));
  SF_ASSIGN_OR_RETURN(s.max_frames, r.Int("max_frames"));
  return s;
}

bool Applies(const std::string& name, const std::string& family) {
  return AppliesTo(*FindHyperparameterSpec(name), family);
}

}  // namespace

Result<TrialHyperparameters> DecodeTrialHyperparameters(const Value& hparams) {
  if (!hparams.is_null() && !hparams.is_map()) {
    return InvalidArgument("hyperparameters: expected a map, got " + hparams.ToDisplay());
  }
  if (const Value* arch = hparams.Find("arch"); arch && !arch->is_string()) {
    return InvalidArgument("hyperparameters.arch: expected a name, got " + arch->ToDisplay());
  }
  const Value completed = WithDefaults(hparams);
  const Value::Map& map = completed.as_map();
  TrialHyperparameters hp;
  hp.arch = map.at("arch").as_string();
  hp.family = ArchFamily(hp.arch);
  if (hp.family.empty()) return InvalidArgument("hyperparameters.arch: '" + hp.arch + "' is not a known architecture");
  const Reader r(map, "hyperparameters");

  OptimizationHp& o = hp.optimization;
  SF_ASSIGN_OR_RETURN(o.lr, r.Number("lr"));
  SF_ASSIGN_OR_RETURN(const Reader schedule, r.Group("lr_schedule"));
  SF_ASSIGN_OR_RETURN(o.lr_schedule, DecodeLrSchedule(schedule));
  SF_ASSIGN_OR_RETURN(const Reader optimizer, r.Group("optimizer"));
  SF_ASSIGN_OR_RETURN(o.optimizer, DecodeOptimizer(optimizer, map.at("optimizer").as_map()));
  SF_ASSIGN_OR_RETURN(o.clip_norm, r.Number("clip_norm"));
  SF_ASSIGN_OR_RETURN(const int64_t seed, r.Int("seed"));
  if (seed < 0) return InvalidArgument("hyperparameters.seed: must not be negative, got " + std::to_string(seed));
  o.seed = static_cast<uint64_t>(seed);
  SF_ASSIGN_OR_RETURN(hp.dropout, r.Number("dropout"));
  SF_ASSIGN_OR_RETURN(hp.beam_size, r.Int("beam_size"));

  const std::string& family = hp.family;
  if (Applies("d_model", family)) { SF_ASSIGN_OR_RETURN(hp.attention, DecodeAttention(r)); }
  if (Applies("max_tokens", family)) {
    TextHp t;
    SF_ASSIGN_OR_RETURN(t.max_tokens, r.Int("max_tokens"));
    SF_ASSIGN_OR_RETURN(t.label_smoothing, r.Number("label_smoothing"));
    SF_ASSIGN_OR_RETURN(t.lenpen, r.Number("lenpen"));
    SF_ASSIGN_OR_RETURN(t.share_decoder_input_output_embed, r.Bool("share_decoder_input_output_embed"));
    hp.text = t;
  }
  if (Applies("max_len_a", family)) {
    OutputLengthHp l;
    SF_ASSIGN_OR_RETURN(l.max_len_a, r.Number("max_len_a"));
    SF_ASSIGN_OR_RETURN(l.max_len_b, r.Int("max_len_b"));
    hp.output_length = l;
  }
  if (family == "transformer") {
    TransformerHp t;
    SF_ASSIGN_OR_RETURN(t.encoder_layers, r.Int("encoder_layers"));
    SF_ASSIGN_OR_RETURN(t.decoder_layers, r.Int("decoder_layers"));
    SF_ASSIGN_OR_RETURN(t.share_embeddings, r.Bool("share_embeddings"));
    hp.transformer = t;
  } else if (family == "transformer_lm") {
    TransformerLmHp t;
    SF_ASSIGN_OR_RETURN(t.decoder_layers, r.Int("decoder_layers"));
    hp.transformer_lm = t;
  } else if (family == "lstm") {
    SF_ASSIGN_OR_RETURN(hp.lstm, DecodeLstm(r));
  } else if (family == "fconv") {
    SF_ASSIGN_OR_RETURN(hp.fconv, DecodeFConv(r));
  } else if (IsSpeechFamily(family)) {
    SF_ASSIGN_OR_RETURN(hp.speech, DecodeSpeech(r));
  } else {
    return InvalidArgument("hyperparameters.arch: family '" + family + "' has no decoder");
  }
  return hp;
}

}  // namespace sf::config
