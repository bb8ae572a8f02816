// What the families' codecs share (trainer/families/<name>_family.cc): reading a stored model
// value (trainer_state.json's "model", written by the family's to_value) member by member, the
// Transformer layers' knobs that the encoder-decoder and the language model both have, and the
// shape, factory and search of a family whose config has the usual members.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/config/trial_hyperparameters.h"
#include "common/value.h"
#include "trainer/families/model_family.h"

namespace sf::family_codec {

// A stored value's member; `def` is the config struct's own value, for a checkpoint written
// before the member existed.
inline int64_t Int(const Value& v, const std::string& key, int64_t def) {
  const Value* x = v.Find(key);
  if (!x || !x->is_number()) return def;
  return x->is_int() ? x->as_int() : static_cast<int64_t>(x->as_double());
}
inline double Num(const Value& v, const std::string& key, double def) {
  const Value* x = v.Find(key);
  return x && x->is_number() ? x->as_double() : def;
}
inline bool Flag(const Value& v, const std::string& key, bool def) {
  const Value* x = v.Find(key);
  return x && x->is_bool() ? x->as_bool() : def;
}
inline std::string Text(const Value& v, const std::string& key, const std::string& def) {
  const Value* x = v.Find(key);
  return x && x->is_string() ? x->as_string() : def;
}

// The Transformer layers' knobs (d_model, heads, ffn_dim, the dropouts, activation,
// normalize_before) of a config that has them, from a trial's hyperparameters...
template <class Config>
Status SetAttention(const config::TrialHyperparameters& hp, Config& c) {
  const config::AttentionHp& a = *hp.attention;
  c.d_model = a.d_model;
  c.heads = a.heads;
  c.ffn_dim = a.ffn_dim;
  c.dropout = static_cast<float>(hp.dropout);
  c.attention_dropout = static_cast<float>(a.attention_dropout);
  c.activation_dropout = static_cast<float>(a.activation_dropout);
  SF_ASSIGN_OR_RETURN(c.activation, ActivationNamed(a.activation));
  c.normalize_before = a.normalize_before;
  return Status::Ok();
}

// ... and from a stored value.
template <class Config>
Status ReadAttention(const Value& v, Config& c) {
  c.d_model = Int(v, "d_model", c.d_model);
  c.heads = Int(v, "heads", c.heads);
  c.ffn_dim = Int(v, "ffn_dim", c.ffn_dim);
  c.dropout = static_cast<float>(Num(v, "dropout", c.dropout));
  c.attention_dropout = static_cast<float>(Num(v, "attention_dropout", c.attention_dropout));
  c.activation_dropout = static_cast<float>(Num(v, "activation_dropout", c.activation_dropout));
  SF_ASSIGN_OR_RETURN(c.activation, ActivationNamed(Text(v, "activation", ActivationName(c.activation))));
  c.normalize_before = Flag(v, "normalize_before", c.normalize_before);
  return Status::Ok();
}

// ... and into a stored value.
template <class Config>
void WriteAttention(const Config& c, Value::Map& v) {
  v["d_model"] = c.d_model;
  v["heads"] = c.heads;
  v["ffn_dim"] = c.ffn_dim;
  v["dropout"] = static_cast<double>(c.dropout);
  v["attention_dropout"] = static_cast<double>(c.attention_dropout);
  v["activation_dropout"] = static_cast<double>(c.activation_dropout);
  v["activation"] = ActivationName(c.activation);
  v["normalize_before"] = c.normalize_before;
}

// A translating family's codec parts, for a config with src_vocab, tgt_vocab, pad_id and
// max_positions, a model Model<float>(config, backend, dtype) and a search Search(Model<float>*).
template <class Config, template <class> class Model, class Search>
void TranslationParts(FamilyCodec<Config>& c) {
  c.shape = [](const Config& x) { return ModelShape{x.src_vocab, x.tgt_vocab, x.pad_id, x.max_positions}; };
  c.set_shape = [](Config& x, const ModelShape& s) {
    x.src_vocab = s.src_vocab;
    x.tgt_vocab = s.tgt_vocab;
    x.pad_id = s.pad_id;
    x.max_positions = s.max_positions;
  };
  c.make_model = [](const Config& x, Backend<float>* b, DType d) -> std::unique_ptr<Seq2SeqModel<float>> {
    return std::make_unique<Model<float>>(x, b, d);
  };
  c.make_generator = [](Seq2SeqModel<float>* m) -> std::unique_ptr<Generator> {
    return std::make_unique<Search>(static_cast<Model<float>*>(m));
  };
}

// The stored value's sizes of such a config, both ways.
template <class Config>
void ReadSizes(const Value& v, Config& c) {
  c.src_vocab = Int(v, "src_vocab", 0);
  c.tgt_vocab = Int(v, "tgt_vocab", 0);
  c.pad_id = static_cast<int32_t>(Int(v, "pad_id", c.pad_id));
  c.max_positions = Int(v, "max_positions", c.max_positions);
}
template <class Config>
void WriteSizes(const Config& c, Value::Map& v) {
  v["src_vocab"] = c.src_vocab;
  v["tgt_vocab"] = c.tgt_vocab;
  v["pad_id"] = static_cast<int64_t>(c.pad_id);
  v["max_positions"] = c.max_positions;
}

}  // namespace sf::family_codec
