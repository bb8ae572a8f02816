#include "common/config/trial_hyperparameters.h"

#include "common/config/families/knob_reader.h"
#include "common/config/families/model_families.h"
#include "common/config/hyperparameter_schema.h"

namespace sf::config {
namespace {

Result<LrScheduleHp> DecodeLrSchedule(const KnobReader& r) {
  LrScheduleHp s;
  SF_ASSIGN_OR_RETURN(s.type, r.Choice("type"));
  SF_ASSIGN_OR_RETURN(s.warmup, r.Int("warmup"));
  SF_ASSIGN_OR_RETURN(s.warmup_init_lr, r.Number("warmup_init_lr"));
  if (r.Has("total_steps")) { SF_ASSIGN_OR_RETURN(s.total_steps, r.Int("total_steps")); }
  SF_ASSIGN_OR_RETURN(s.min_lr, r.Number("min_lr"));
  SF_ASSIGN_OR_RETURN(s.gamma, r.Number("gamma"));
  return s;
}

Result<OptimizerHp> DecodeOptimizer(const KnobReader& r, const Value::Map& group) {
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

Result<AttentionHp> DecodeAttention(const KnobReader& r) {
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
  const KnobReader r(map, "hyperparameters");

  OptimizationHp& o = hp.optimization;
  SF_ASSIGN_OR_RETURN(o.lr, r.Number("lr"));
  SF_ASSIGN_OR_RETURN(const KnobReader schedule, r.Group("lr_schedule"));
  SF_ASSIGN_OR_RETURN(o.lr_schedule, DecodeLrSchedule(schedule));
  SF_ASSIGN_OR_RETURN(const KnobReader optimizer, r.Group("optimizer"));
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
  // The family's own struct (common/config/families/model_families.h).
  const FamilySchema* schema = FindFamilySchema(family);
  if (!schema || !schema->decode) return InvalidArgument("hyperparameters.arch: family '" + family + "' has no decoder");
  SF_RETURN_IF_ERROR(schema->decode(r, hp));
  return hp;
}

}  // namespace sf::config
