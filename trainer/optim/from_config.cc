#include "trainer/optim/from_config.h"

#include <algorithm>
#include <climits>

namespace sf {
namespace {

// Reads a number member of `group` into *out when present.
Status ReadNumber(const Value& group, const std::string& path, const char* name, double* out) {
  const Value* v = group.Find(name);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_number()) {
    return InvalidArgument(path + "." + name + ": expected a number, got " + v->ToDisplay());
  }
  *out = v->as_double();
  return Status::Ok();
}

Status ReadInt(const Value& group, const std::string& path, const char* name, int64_t* out) {
  const Value* v = group.Find(name);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_int()) {
    return InvalidArgument(path + "." + name + ": expected an integer, got " + v->ToDisplay());
  }
  *out = v->as_int();
  return Status::Ok();
}

Status ReadBool(const Value& group, const std::string& path, const char* name, bool* out) {
  const Value* v = group.Find(name);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_bool()) {
    return InvalidArgument(path + "." + name + ": expected true or false, got " + v->ToDisplay());
  }
  *out = v->as_bool();
  return Status::Ok();
}

Status ReadType(const Value& group, const std::string& path, std::string* out) {
  const Value* v = group.Find("type");
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_string()) {
    return InvalidArgument(path + ".type: expected a name, got " + v->ToDisplay());
  }
  *out = v->as_string();
  return Status::Ok();
}

// The group `name` of `hparams`: a map, or an empty map when absent.
Result<Value> Group(const Value& hparams, const char* name) {
  if (!hparams.is_map()) return InvalidArgument("hyperparameters: expected a map");
  const Value* g = hparams.Find(name);
  if (g == nullptr || g->is_null()) return Value(Value::Map{});
  if (g->is_string()) return Value(Value::Map{{"type", *g}});  // `optimizer: radam`
  if (!g->is_map()) {
    return InvalidArgument(std::string("hyperparameters.") + name + ": expected a map, got " +
                           g->ToDisplay());
  }
  return *g;
}

}  // namespace

Result<OptimizerOptions> OptimizerOptionsFromHyperparameters(const Value& hparams) {
  const std::string path = "hyperparameters.optimizer";
  SF_ASSIGN_OR_RETURN(const Value group, Group(hparams, "optimizer"));
  OptimizerOptions o;
  o.type = "adamw";
  SF_RETURN_IF_ERROR(ReadType(group, path, &o.type));
  if (const Value* betas = group.Find("betas"); betas != nullptr && !betas->is_null()) {
    if (!betas->is_list() || betas->as_list().size() != 2 || !betas->as_list()[0].is_number() ||
        !betas->as_list()[1].is_number()) {
      return InvalidArgument(path + ".betas: expected [beta1, beta2], got " + betas->ToDisplay());
    }
    o.beta1 = betas->as_list()[0].as_double();
    o.beta2 = betas->as_list()[1].as_double();
  }
  SF_RETURN_IF_ERROR(ReadNumber(group, path, "eps", &o.eps));
  SF_RETURN_IF_ERROR(ReadNumber(group, path, "weight_decay", &o.weight_decay));
  SF_RETURN_IF_ERROR(ReadNumber(group, path, "momentum", &o.momentum));
  SF_RETURN_IF_ERROR(ReadBool(group, path, "nesterov", &o.nesterov));
  SF_RETURN_IF_ERROR(ReadNumber(group, path, "rho_threshold", &o.radam_rho_threshold));
  SF_RETURN_IF_ERROR(ReadBool(group, path, "decoupled_weight_decay", &o.decoupled_weight_decay));
  return o;
}

Result<LrScheduleOptions> LrScheduleOptionsFromHyperparameters(const Value& hparams,
                                                               int64_t default_total_steps) {
  const std::string path = "hyperparameters.lr_schedule";
  SF_ASSIGN_OR_RETURN(const Value group, Group(hparams, "lr_schedule"));
  LrScheduleOptions o;
  o.type = "inverse_sqrt";
  o.warmup_steps = 4000;
  o.total_steps = default_total_steps;
  SF_RETURN_IF_ERROR(ReadNumber(hparams, "hyperparameters", "lr", &o.lr));
  SF_RETURN_IF_ERROR(ReadType(group, path, &o.type));
  SF_RETURN_IF_ERROR(ReadInt(group, path, "warmup", &o.warmup_steps));
  SF_RETURN_IF_ERROR(ReadNumber(group, path, "warmup_init_lr", &o.warmup_init_lr));
  SF_RETURN_IF_ERROR(ReadInt(group, path, "total_steps", &o.total_steps));
  SF_RETURN_IF_ERROR(ReadNumber(group, path, "min_lr", &o.min_lr));
  SF_RETURN_IF_ERROR(ReadNumber(group, path, "gamma", &o.gamma));
  return o;
}

LossScalerOptions LossScalerOptionsFromConfig(const config::LossScalingConfig& c, int world_size,
                                              int64_t aggregation_frequency) {
  LossScalerOptions o;
  switch (c.type) {
    case config::LossScalingConfig::Type::kNone:
      o.type = "none";
      break;
    case config::LossScalingConfig::Type::kStatic:
      o.type = "static";
      break;
    case config::LossScalingConfig::Type::kDynamic:
      o.type = "dynamic";
      break;
  }
  o.scale = c.scale;
  o.init_scale = c.init_scale;
  o.growth_interval = c.growth_interval.value_or(0);
  o.scale_factor = c.scale_factor;
  o.min_scale = c.min_scale;
  o.world_size = std::max(world_size, 1);
  o.aggregation_frequency =
      static_cast<int>(std::clamp<int64_t>(aggregation_frequency, 1, INT_MAX));
  return o;
}

}  // namespace sf
