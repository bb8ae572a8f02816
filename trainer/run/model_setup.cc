#include "trainer/run/model_setup.h"

#include <algorithm>

#include "common/config/hyperparameter_schema.h"
#include "trainer/models/weights_io.h"

namespace sf {
namespace {

bool Flag(const Value& v, const std::string& key, bool def) {
  const Value* x = v.Find(key);
  return x && x->is_bool() ? x->as_bool() : def;
}
std::string Text(const Value& v, const std::string& key, const std::string& def) {
  const Value* x = v.Find(key);
  return x && x->is_string() ? x->as_string() : def;
}

Result<TransformerConfig> FromMap(const Value& v) {
  TransformerConfig mc;
  mc.d_model = HpInt(v, "d_model", mc.d_model);
  mc.heads = HpInt(v, "heads", mc.heads);
  mc.encoder_layers = HpInt(v, "encoder_layers", mc.encoder_layers);
  mc.decoder_layers = HpInt(v, "decoder_layers", mc.decoder_layers);
  mc.ffn_dim = HpInt(v, "ffn_dim", mc.ffn_dim);
  mc.dropout = static_cast<float>(HpNum(v, "dropout", mc.dropout));
  mc.attention_dropout = static_cast<float>(HpNum(v, "attention_dropout", mc.attention_dropout));
  mc.activation_dropout = static_cast<float>(HpNum(v, "activation_dropout", mc.activation_dropout));
  SF_ASSIGN_OR_RETURN(mc.activation, ActivationFromHyperparameters(v));
  mc.normalize_before = Flag(v, "normalize_before", mc.normalize_before);
  mc.share_embeddings = Flag(v, "share_embeddings", mc.share_embeddings);
  mc.share_decoder_input_output_embed =
      Flag(v, "share_decoder_input_output_embed", mc.share_decoder_input_output_embed);
  mc.label_smoothing = static_cast<float>(HpNum(v, "label_smoothing", mc.label_smoothing));
  return mc;
}

// fairseq's lstm arguments; the four dropout rates default to `dropout` (as config::WithDefaults
// completes them).
Result<LstmConfig> LstmFromMap(const Value& v) {
  LstmConfig c;
  const double dropout = HpNum(v, "dropout", 0.1);
  c.encoder_embed = HpInt(v, "encoder_embed_dim", c.encoder_embed);
  c.encoder_hidden = HpInt(v, "encoder_hidden_size", c.encoder_hidden);
  c.encoder_layers = static_cast<int>(HpInt(v, "encoder_layers", c.encoder_layers));
  c.encoder_bidirectional = Flag(v, "encoder_bidirectional", c.encoder_bidirectional);
  c.encoder_bidirectional_layers =
      static_cast<int>(HpInt(v, "encoder_bidirectional_layers", c.encoder_bidirectional_layers));
  c.encoder_dropout_in = static_cast<float>(HpNum(v, "encoder_dropout_in", dropout));
  c.encoder_dropout_out = static_cast<float>(HpNum(v, "encoder_dropout_out", dropout));
  c.decoder_embed = HpInt(v, "decoder_embed_dim", c.decoder_embed);
  c.decoder_hidden = HpInt(v, "decoder_hidden_size", c.decoder_hidden);
  c.decoder_out_embed = HpInt(v, "decoder_out_embed_dim", c.decoder_out_embed);
  c.decoder_layers = static_cast<int>(HpInt(v, "decoder_layers", c.decoder_layers));
  c.decoder_dropout_in = static_cast<float>(HpNum(v, "decoder_dropout_in", dropout));
  c.decoder_dropout_out = static_cast<float>(HpNum(v, "decoder_dropout_out", dropout));
  c.share_decoder_input_output_embed =
      Flag(v, "share_decoder_input_output_embed", c.share_decoder_input_output_embed);
  c.residual_from = static_cast<int>(HpInt(v, "residual_from_layer", c.residual_from));
  c.label_smoothing = static_cast<float>(HpNum(v, "label_smoothing", c.label_smoothing));
  return c;
}

// fairseq's transformer_lm arguments (the sizes shared with the Transformer keep their names).
Result<TransformerLmConfig> LmFromMap(const Value& v) {
  SF_ASSIGN_OR_RETURN(TransformerConfig t, FromMap(v));
  TransformerLmConfig c;
  c.d_model = t.d_model;
  c.heads = t.heads;
  c.layers = t.decoder_layers;
  c.ffn_dim = t.ffn_dim;
  c.dropout = t.dropout;
  c.attention_dropout = t.attention_dropout;
  c.activation_dropout = t.activation_dropout;
  c.activation = t.activation;
  c.normalize_before = t.normalize_before;
  c.share_input_output_embed = Flag(v, "share_decoder_input_output_embed", c.share_input_output_embed);
  c.label_smoothing = t.label_smoothing;
  return c;
}

// fairseq's fconv arguments: encoder_layers / decoder_layers convolutions of conv_channels
// channels and width kernel_size each (fairseq's "[(512, 3)] * 20"), or, in a stored model
// value, the layer lists themselves ("512x3,512x3,...").
Result<FConvConfig> FConvFromMap(const Value& v) {
  FConvConfig c;
  c.encoder_embed = HpInt(v, "encoder_embed_dim", c.encoder_embed);
  c.decoder_embed = HpInt(v, "decoder_embed_dim", c.decoder_embed);
  c.decoder_out_embed = HpInt(v, "decoder_out_embed_dim", c.decoder_out_embed);
  const ConvSpec layer{HpInt(v, "conv_channels", 512), HpInt(v, "kernel_size", 3)};
  for (const char* side : {"encoder", "decoder"}) {
    std::vector<ConvSpec>& convs = std::string(side) == "encoder" ? c.encoder_convs : c.decoder_convs;
    const std::string key = std::string(side) + "_layers";
    const Value* x = v.Find(key);
    if (x && x->is_string()) {
      auto specs = ParseConvSpecs(x->as_string());
      if (!specs.ok()) return InvalidArgument("hyperparameters." + key + ": " + specs.status().message());
      convs = *specs;
    } else {
      const int64_t n = HpInt(v, key, 20);
      if (n < 1 || n > 1024) return InvalidArgument("hyperparameters." + key + ": must be from 1 to 1024");
      convs.assign(static_cast<size_t>(n), layer);
    }
  }
  c.dropout = static_cast<float>(HpNum(v, "dropout", c.dropout));
  c.share_input_output_embed = Flag(v, "share_decoder_input_output_embed", c.share_input_output_embed);
  c.label_smoothing = static_cast<float>(HpNum(v, "label_smoothing", c.label_smoothing));
  return c;
}

// The family of a hyperparameter map's (or stored model value's) arch; absent: transformer.
Result<std::string> FamilyOf(const Value& v) {
  const std::string arch = Text(v, "arch", "transformer");
  std::string family = config::ArchFamily(arch);
  if (family.empty()) family = arch;  // a stored value names the family itself
  for (const std::string& f : ModelFamilies()) {
    if (f == family) return family;
  }
  return InvalidArgument("hyperparameters.arch: '" + arch + "' is not a known architecture");
}

// spec.family's configuration from a hyperparameter map or a stored model value.
Status ConfigFromMap(const Value& v, ModelSpec& spec) {
  if (spec.family == "lstm") {
    SF_ASSIGN_OR_RETURN(spec.lstm, LstmFromMap(v));
  } else if (spec.family == "transformer_lm") {
    SF_ASSIGN_OR_RETURN(spec.lm, LmFromMap(v));
  } else if (spec.family == "fconv") {
    SF_ASSIGN_OR_RETURN(spec.fconv, FConvFromMap(v));
  } else {
    SF_ASSIGN_OR_RETURN(spec.transformer, FromMap(v));
  }
  return Status::Ok();
}

Status WithSizes(ModelSpec& spec, int64_t src_vocab, int64_t tgt_vocab, int32_t pad_id, int64_t max_positions) {
  if (spec.family == "lstm") {
    spec.lstm.src_vocab = src_vocab;
    spec.lstm.tgt_vocab = tgt_vocab;
    spec.lstm.pad_id = pad_id;
    spec.lstm.max_positions = max_positions;
  } else if (spec.family == "fconv") {
    spec.fconv.src_vocab = src_vocab;
    spec.fconv.tgt_vocab = tgt_vocab;
    spec.fconv.pad_id = pad_id;
    spec.fconv.max_positions = max_positions;
  } else if (spec.family == "transformer_lm") {
    spec.lm.vocab = tgt_vocab;  // a language model reads and writes the target side
    spec.lm.pad_id = pad_id;
    spec.lm.max_positions = max_positions;
  } else {
    spec.transformer.src_vocab = src_vocab;
    spec.transformer.tgt_vocab = tgt_vocab;
    spec.transformer.pad_id = pad_id;
    spec.transformer.max_positions = max_positions;
  }
  return spec.Validate();
}

}  // namespace

Result<Activation> ActivationFromHyperparameters(const Value& v) {
  const std::string act = Text(v, "activation", "relu");
  if (act != "relu" && act != "gelu") {
    return InvalidArgument("hyperparameters.activation: '" + act + "' must be relu or gelu");
  }
  return act == "gelu" ? Activation::kGelu : Activation::kRelu;
}

int64_t HpInt(const Value& v, const std::string& key, int64_t def) {
  const Value* x = v.Find(key);
  if (!x || !x->is_number()) return def;
  return x->is_int() ? x->as_int() : static_cast<int64_t>(x->as_double());
}
double HpNum(const Value& v, const std::string& key, double def) {
  const Value* x = v.Find(key);
  return x && x->is_number() ? x->as_double() : def;
}

Result<ModelSpec> ModelSpecFromHyperparameters(const Value& hparams, int64_t src_vocab, int64_t tgt_vocab,
                                               int64_t max_positions) {
  ModelSpec spec;
  SF_ASSIGN_OR_RETURN(spec.family, FamilyOf(hparams));
  SF_RETURN_IF_ERROR(ConfigFromMap(hparams, spec));
  SF_RETURN_IF_ERROR(WithSizes(spec, src_vocab, tgt_vocab, 1, max_positions));
  return spec;
}

Value ModelSpecToValue(const ModelSpec& spec) {
  if (spec.family == "lstm") {
    const LstmConfig& c = spec.lstm;
    return Value(Value::Map{{"arch", "lstm"},
                            {"encoder_embed_dim", c.encoder_embed},
                            {"encoder_hidden_size", c.encoder_hidden},
                            {"encoder_layers", static_cast<int64_t>(c.encoder_layers)},
                            {"encoder_bidirectional", c.encoder_bidirectional},
                            {"encoder_bidirectional_layers", static_cast<int64_t>(c.encoder_bidirectional_layers)},
                            {"encoder_dropout_in", static_cast<double>(c.encoder_dropout_in)},
                            {"encoder_dropout_out", static_cast<double>(c.encoder_dropout_out)},
                            {"decoder_embed_dim", c.decoder_embed},
                            {"decoder_hidden_size", c.decoder_hidden},
                            {"decoder_out_embed_dim", c.decoder_out_embed},
                            {"decoder_layers", static_cast<int64_t>(c.decoder_layers)},
                            {"decoder_dropout_in", static_cast<double>(c.decoder_dropout_in)},
                            {"decoder_dropout_out", static_cast<double>(c.decoder_dropout_out)},
                            {"share_decoder_input_output_embed", c.share_decoder_input_output_embed},
                            {"residual_from_layer", static_cast<int64_t>(c.residual_from)},
                            {"label_smoothing", static_cast<double>(c.label_smoothing)},
                            {"src_vocab", c.src_vocab},
                            {"tgt_vocab", c.tgt_vocab},
                            {"pad_id", static_cast<int64_t>(c.pad_id)},
                            {"max_positions", c.max_positions}});
  }
  if (spec.family == "fconv") {
    const FConvConfig& c = spec.fconv;
    return Value(Value::Map{{"arch", "fconv"},
                            {"encoder_embed_dim", c.encoder_embed},
                            {"decoder_embed_dim", c.decoder_embed},
                            {"decoder_out_embed_dim", c.decoder_out_embed},
                            {"encoder_layers", ConvSpecsText(c.encoder_convs)},
                            {"decoder_layers", ConvSpecsText(c.decoder_convs)},
                            {"dropout", static_cast<double>(c.dropout)},
                            {"share_decoder_input_output_embed", c.share_input_output_embed},
                            {"label_smoothing", static_cast<double>(c.label_smoothing)},
                            {"src_vocab", c.src_vocab},
                            {"tgt_vocab", c.tgt_vocab},
                            {"pad_id", static_cast<int64_t>(c.pad_id)},
                            {"max_positions", c.max_positions}});
  }
  if (spec.family == "transformer_lm") {
    const TransformerLmConfig& c = spec.lm;
    return Value(Value::Map{{"arch", "transformer_lm"},
                            {"d_model", c.d_model},
                            {"heads", c.heads},
                            {"decoder_layers", c.layers},
                            {"ffn_dim", c.ffn_dim},
                            {"dropout", static_cast<double>(c.dropout)},
                            {"attention_dropout", static_cast<double>(c.attention_dropout)},
                            {"activation_dropout", static_cast<double>(c.activation_dropout)},
                            {"activation", c.activation == Activation::kGelu ? "gelu" : "relu"},
                            {"normalize_before", c.normalize_before},
                            {"share_decoder_input_output_embed", c.share_input_output_embed},
                            {"label_smoothing", static_cast<double>(c.label_smoothing)},
                            {"src_vocab", c.vocab},
                            {"tgt_vocab", c.vocab},
                            {"pad_id", static_cast<int64_t>(c.pad_id)},
                            {"max_positions", c.max_positions}});
  }
  const TransformerConfig& c = spec.transformer;
  return Value(Value::Map{{"arch", "transformer"},
                          {"d_model", c.d_model},
                          {"heads", c.heads},
                          {"encoder_layers", c.encoder_layers},
                          {"decoder_layers", c.decoder_layers},
                          {"ffn_dim", c.ffn_dim},
                          {"dropout", static_cast<double>(c.dropout)},
                          {"attention_dropout", static_cast<double>(c.attention_dropout)},
                          {"activation_dropout", static_cast<double>(c.activation_dropout)},
                          {"activation", c.activation == Activation::kGelu ? "gelu" : "relu"},
                          {"normalize_before", c.normalize_before},
                          {"share_embeddings", c.share_embeddings},
                          {"share_decoder_input_output_embed", c.share_decoder_input_output_embed},
                          {"label_smoothing", static_cast<double>(c.label_smoothing)},
                          {"src_vocab", c.src_vocab},
                          {"tgt_vocab", c.tgt_vocab},
                          {"pad_id", static_cast<int64_t>(c.pad_id)},
                          {"max_positions", c.max_positions}});
}

Result<ModelSpec> ModelSpecFromValue(const Value& v) {
  if (!v.is_map()) return InvalidArgument("trainer_state.json: 'model' is missing");
  ModelSpec spec;
  auto family = FamilyOf(v);
  if (!family.ok()) return family.status().WithContext("trainer_state.json model");
  spec.family = *family;
  SF_RETURN_IF_ERROR(ConfigFromMap(v, spec));
  Status st = WithSizes(spec, HpInt(v, "src_vocab", 0), HpInt(v, "tgt_vocab", 0),
                        static_cast<int32_t>(HpInt(v, "pad_id", 1)), HpInt(v, "max_positions", 1024));
  if (!st.ok()) return st.WithContext("trainer_state.json model");
  return spec;
}

Result<ModelSpec> CheckpointModelSpec(const CheckpointContents& ck) {
  if (!ck.model_metadata.empty()) return ModelSpecFromMetadata(ck.model_metadata);
  const Value* mv = ck.state.Find("model");
  return ModelSpecFromValue(mv ? *mv : Value());
}

DType ComputeDType(config::Precision precision) {
  switch (precision) {
    case config::Precision::kBf16: return DType::kBF16;
    case config::Precision::kFp16: return DType::kF16;
    default: return DType::kF32;
  }
}

void SnapshotTraining(TrainableModel<float>& model, TrainStep& step, CheckpointContents* c) {
  auto& store = model.params();
  c->model.clear();
  c->model_metadata = model.Metadata();
  store.PullValues();  // a device model's values, copied to the host view
  for (const auto& info : store.params()) {
    int64_t numel = 1;
    for (int64_t d : info.shape) numel *= d;
    const float* v = store.host_value(store.Find(info.name));
    NamedBuffer b = NamedBuffer::F32(info.name, std::span<const float>(v, static_cast<size_t>(numel)));
    b.shape = info.shape;
    c->model.push_back(std::move(b));
  }
  c->optimizer = step.optimizer().State();
  for (NamedBuffer b : step.loss_scaler().State()) {
    b.name = "loss_scaler." + b.name;
    c->optimizer.push_back(std::move(b));
  }
}

Status LoadModelWeights(const CheckpointContents& ck, const std::string& where, TrainableModel<float>& model) {
  Status fits = CheckMetadataFits(ck.model_metadata, model);
  if (!fits.ok()) return InvalidArgument("checkpoint " + where + " does not fit this model: " + fits.message());
  auto& store = model.params();
  for (const auto& info : store.params()) {
    const NamedBuffer* b = FindBuffer(ck.model, info.name);
    int64_t numel = 1;
    for (int64_t d : info.shape) numel *= d;
    if (!b) return InvalidArgument("checkpoint " + where + " does not fit this model: no parameter " + info.name);
    if (b->AsF32().size() != static_cast<size_t>(numel)) {
      return InvalidArgument("checkpoint " + where + " does not fit this model: parameter " + info.name + " has " +
                             std::to_string(b->AsF32().size()) + " values, the model wants " + std::to_string(numel));
    }
  }
  for (const auto& info : store.params()) {
    auto values = FindBuffer(ck.model, info.name)->AsF32();
    std::copy(values.begin(), values.end(), store.host_value(store.Find(info.name)));
  }
  store.PushValues();
  model.WeightsUpdated();
  return Status::Ok();
}

Status RestoreTraining(const CheckpointContents& ck, const std::string& where, TrainableModel<float>& model,
                       TrainStep& step) {
  SF_RETURN_IF_ERROR(LoadModelWeights(ck, where, model));
  std::vector<NamedBuffer> opt_state, scaler_state;
  for (const auto& b : ck.optimizer) {
    (b.name.rfind("loss_scaler.", 0) == 0 ? scaler_state : opt_state).push_back(b);
  }
  for (auto& b : scaler_state) b.name = b.name.substr(12);
  std::vector<ParamRef> params = model.Parameters();
  Status st = step.optimizer().LoadState(opt_state, params);
  if (st.ok()) st = const_cast<LossScaler&>(step.loss_scaler()).LoadState(scaler_state);
  if (!st.ok()) return st.WithContext("checkpoint " + where + ": optimizer state");
  return Status::Ok();
}

}  // namespace sf
