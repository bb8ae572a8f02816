#include "common/config/model_hyperparameters.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "common/config/families/model_families.h"

namespace sf::config {
namespace {

// The speech family's ctc_weight below 1 without decoder_layers (experiment and trial checks).
const std::string kCtcWeightWithoutDecoder =
    "below 1 weighs an attention decoder's loss, and this model has none: set decoder_layers";

// Candidate values of a top-level hyperparameter in a trial of `arch`, for cross-field checks:
// a constant, the categorical values or a small int range when given; else the arch preset's
// value, else the schema default. Empty when unknown (a wide int range, a double space, no
// default).
std::vector<Value> Candidates(const Hyperparameters& hps, const std::string& name,
                              const std::string& arch) {
  auto it = hps.find(name);
  if (it == hps.end()) {
    if (auto preset = ArchPresets().find(arch); preset != ArchPresets().end()) {
      if (auto p = preset->second.find(name); p != preset->second.end()) return {p->second};
    }
    const HpSpec* spec = FindHyperparameterSpec(name);
    if (spec && !spec->default_value.is_null()) return {spec->default_value};
    return {};
  }
  const Hyperparameter& hp = it->second;
  switch (hp.kind) {
    case Hyperparameter::Kind::kConst:
      return {hp.value};
    case Hyperparameter::Kind::kCategorical:
      return hp.vals;
    case Hyperparameter::Kind::kInt:
      if (hp.maxval - hp.minval <= 64) {
        std::vector<Value> out;
        for (int64_t v = static_cast<int64_t>(hp.minval); v <= static_cast<int64_t>(hp.maxval);
             ++v) {
          out.push_back(Value(v));
        }
        return out;
      }
      return {};
    default:
      return {};
  }
}

// "a transformer model", "an lstm model", "a transformer_lm model", "an fconv model": the
// article the family registered (families/model_families.h).
std::string FamilyModel(const std::string& family) {
  const FamilySchema* f = FindFamilySchema(family);
  return (f ? f->article : std::string("a")) + " " + family + " model";
}

// The cross-field rules on one set of effective values (the trainer's LstmConfig and
// FConvConfig say the same). Each returns the problem, worded for the path it is reported at,
// or nullopt. The first two are the LSTM's.

// At hyperparameters.decoder_layers.
std::optional<std::string> DecoderLayersProblem(int64_t encoder_layers, int64_t decoder_layers) {
  if (decoder_layers <= encoder_layers) return std::nullopt;
  return std::to_string(decoder_layers) + " is more than encoder_layers " +
         std::to_string(encoder_layers) +
         " (each decoder layer starts from the final state of the encoder layer of its index)";
}

// At hyperparameters.residual_from_layer: 0 (none) or a layer from 2 up to the deeper side's
// count (layer 1 reads the embeddings, of another width).
std::optional<std::string> ResidualProblem(int64_t from, int64_t encoder_layers, int64_t decoder_layers) {
  const int64_t deepest = std::max(encoder_layers, decoder_layers);
  if (from == 0 || (from >= 2 && from <= deepest)) return std::nullopt;
  return std::to_string(from) + " must be 0 (none) or a layer from 2 to " + std::to_string(deepest) +
         " (layer 1 reads the embeddings, which have another width)";
}

// At `path` (encoder_bidirectional_layers, or residual_from_layer when the user gave that):
// k bottom layers both ways needs encoder_bidirectional, at most encoder_layers of them, and
// no residual connection into the first one-way layer above them (it reads both directions,
// twice its width).
std::optional<std::string> BidirectionalLayersProblem(const std::string& path, int64_t k, bool bidirectional,
                                                      int64_t encoder_layers, int64_t residual_from) {
  if (k == 0) return std::nullopt;
  if (!bidirectional) return std::to_string(k) + " needs encoder_bidirectional: true";
  if (k > encoder_layers) {
    return std::to_string(k) + " is more than encoder_layers " + std::to_string(encoder_layers);
  }
  // (residual_from 1 is ResidualProblem's.)
  if (k == encoder_layers || residual_from < 2 || residual_from >= k + 2) return std::nullopt;
  const std::string why = " (encoder layer " + std::to_string(k + 1) +
                          ", the first one-way layer, reads both directions of the layer below: "
                          "twice its width)";
  if (path == "hyperparameters.residual_from_layer") {
    return std::to_string(residual_from) + " must be at least " + std::to_string(k + 2) +
           " with encoder_bidirectional_layers " + std::to_string(k) + why;
  }
  return std::to_string(k) + " needs residual_from_layer 0 or at least " + std::to_string(k + 2) +
         ", not " + std::to_string(residual_from) + why;
}

// At `path`: share_decoder_input_output_embed, or one of the two widths. For every family with
// a decoder_out_embed_dim (HasOutEmbedDim).
std::optional<std::string> TiedOutputProblem(const std::string& path, bool shared,
                                             int64_t embed_dim, int64_t out_embed_dim) {
  if (!shared || embed_dim == out_embed_dim) return std::nullopt;
  const std::string widths =
      "decoder_out_embed_dim " + std::to_string(out_embed_dim) +
      (path == "hyperparameters.share_decoder_input_output_embed" ? " to equal "
                                                                  : " differs from ") +
      "decoder_embed_dim " + std::to_string(embed_dim);
  const char* why = " (the decoder's embedding is then its output projection)";
  if (path == "hyperparameters.share_decoder_input_output_embed") {
    return "true needs " + widths + why;
  }
  return widths + ", but share_decoder_input_output_embed is true" + why;
}

// The first of `names` the user gave, as a path; else the first's. Where a cross-field error
// is reported: at a value the user wrote rather than one from a preset.
std::string BlamedPath(const Hyperparameters& hps, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (hps.count(n)) return std::string("hyperparameters.") + n;
  }
  return std::string("hyperparameters.") + *names.begin();
}

// " (arch lstm_small)" when the config can give more than one arch, so the error says which.
std::string ArchNote(const std::vector<std::string>& archs, const std::string& arch) {
  return archs.size() > 1 ? " (arch " + arch + ")" : "";
}

YAML::Node At(const HyperparameterLocations& locations, const std::string& path) {
  auto it = locations.find(path);
  return it == locations.end() ? YAML::Node() : it->second;
}

// Whether models of `family` have attention heads over d_model (the transformer and the
// transformer_lm): where `heads` applies, it must divide `d_model`.
bool HasHeads(const std::string& family) {
  return AppliesTo(*FindHyperparameterSpec("heads"), family);
}

// Whether models of `family` project the decoder's output to decoder_out_embed_dim before the
// output projection (the lstm and the fconv): where it applies, a tied output projection needs
// it equal to decoder_embed_dim.
bool HasOutEmbedDim(const std::string& family) {
  return AppliesTo(*FindHyperparameterSpec("decoder_out_embed_dim"), family);
}

// Whether models of `family` embed a source and may share it with the target (the
// transformer): where `share_embeddings` applies, it needs a shared vocabulary and a tied output.
bool SharesEmbeddings(const std::string& family) {
  return AppliesTo(*FindHyperparameterSpec("share_embeddings"), family);
}

// Whether models of `family` have a recurrent encoder whose final states start the decoder's
// layers (the lstm): where `encoder_hidden_size` applies, decoder_layers <= encoder_layers, and
// residual_from_layer and encoder_bidirectional_layers must fit the stack.
bool HasRecurrentEncoder(const std::string& family) {
  return AppliesTo(*FindHyperparameterSpec("encoder_hidden_size"), family);
}

}  // namespace

std::vector<std::string> ArchCandidates(const Hyperparameters& hps,
                                        const HyperparameterLocations& locations) {
  auto it = hps.find("arch");
  if (it == hps.end()) {
    if (locations.count("hyperparameters.arch")) return {};
    return {FindHyperparameterSpec("arch")->default_value.as_string()};
  }
  std::vector<Value> values;
  if (it->second.kind == Hyperparameter::Kind::kConst) values = {it->second.value};
  if (it->second.kind == Hyperparameter::Kind::kCategorical) values = it->second.vals;
  std::vector<std::string> out;
  for (const Value& v : values) {
    if (v.is_string() && std::find(out.begin(), out.end(), v.as_string()) == out.end()) {
      out.push_back(v.as_string());
    }
  }
  return out;
}

std::string NotForArchMessage(const HpSpec& spec, const std::string& arch) {
  std::string families;
  for (size_t i = 0; i < spec.families.size(); ++i) {
    families += (i == 0 ? "" : i + 1 == spec.families.size() ? " and " : ", ") + spec.families[i];
  }
  return "does not apply to arch " + arch + " (" + FamilyModel(ArchFamily(arch)) +
         "); it applies to the " + families + (spec.families.size() > 1 ? " families" : " family");
}

void CheckNativeModelHyperparameters(ErrorSink& sink, const ExperimentConfig& c,
                                     const HyperparameterLocations& locations) {
  auto at = [&](const std::string& path) { return At(locations, path); };
  const Hyperparameters& hps = c.hyperparameters;
  const std::vector<std::string> archs = ArchCandidates(hps, locations);
  // A hyperparameter given for an arch of a family it does not apply to, by name (the first
  // such arch).
  for (const auto& [name, spec] : HyperparameterSchema()) {
    if (!hps.count(name)) continue;
    for (const std::string& arch : archs) {
      if (!AppliesTo(spec, ArchFamily(arch))) {
        std::string p = "hyperparameters." + name;
        sink.Add(p, at(p), NotForArchMessage(spec, arch));
        break;
      }
    }
  }
  // Speech: a CTC weight below 1 weighs an attention decoder's loss, which needs decoder_layers.
  [&] {
    for (const std::string& arch : archs) {
      if (!IsSpeechFamily(ArchFamily(arch)) || !Candidates(hps, "decoder_layers", arch).empty()) continue;
      for (const Value& w : Candidates(hps, "ctc_weight", arch)) {
        if (w.is_number() && w.as_double() < 1.0) {
          sink.Add("hyperparameters.ctc_weight", at("hyperparameters.ctc_weight"),
                   kCtcWeightWithoutDecoder + ArchNote(archs, arch));
          return;
        }
      }
    }
  }();
  std::vector<std::string> with_heads, with_out_embed_dim, sharing, recurrent;
  for (const std::string& arch : archs) {
    if (HasHeads(ArchFamily(arch))) with_heads.push_back(arch);
    if (HasOutEmbedDim(ArchFamily(arch))) with_out_embed_dim.push_back(arch);
    if (SharesEmbeddings(ArchFamily(arch))) sharing.push_back(arch);
    if (HasRecurrentEncoder(ArchFamily(arch))) recurrent.push_back(arch);
  }
  // Transformer and transformer_lm: heads must divide d_model.
  [&] {
    for (const std::string& arch : with_heads) {
      for (const Value& h : Candidates(hps, "heads", arch)) {
        for (const Value& d : Candidates(hps, "d_model", arch)) {
          if (!h.is_int() || !d.is_int() || h.as_int() <= 0) continue;
          if (d.as_int() % h.as_int() != 0) {
            std::string p =
                hps.count("heads") ? "hyperparameters.heads" : "hyperparameters.d_model";
            sink.Add(p, at(p),
                     std::to_string(h.as_int()) + " heads do not divide d_model " +
                         std::to_string(d.as_int()) + ArchNote(archs, arch));
            return;
          }
        }
      }
    }
  }();
  bool shared = false, untied = false;
  for (const std::string& arch : sharing) {
    for (const Value& s : Candidates(hps, "share_embeddings", arch)) {
      shared |= s.is_bool() && s.as_bool();
    }
    for (const Value& t : Candidates(hps, "share_decoder_input_output_embed", arch)) {
      untied |= t.is_bool() && !t.as_bool();
    }
  }
  if (shared && !c.data.tokenizer.shared) {
    sink.Add("hyperparameters.share_embeddings", at("hyperparameters.share_embeddings"),
             "true needs one shared vocabulary (data.tokenizer.shared: true)");
  }
  // share_embeddings ties source, target and output together: an untied output contradicts it
  // (fairseq would tie it silently; the trainer refuses it too, later).
  if (shared && untied) {
    sink.Add("hyperparameters.share_decoder_input_output_embed",
             at("hyperparameters.share_decoder_input_output_embed"),
             "false contradicts share_embeddings: true, which ties the output projection to the "
             "shared embedding too");
  }
  // LSTM: decoder_layers must not exceed encoder_layers.
  [&] {
    for (const std::string& arch : recurrent) {
      for (const Value& e : Candidates(hps, "encoder_layers", arch)) {
        for (const Value& d : Candidates(hps, "decoder_layers", arch)) {
          if (!e.is_int() || !d.is_int()) continue;
          if (auto problem = DecoderLayersProblem(e.as_int(), d.as_int())) {
            const std::string p = "hyperparameters.decoder_layers";
            sink.Add(p, at(p), *problem + ArchNote(archs, arch));
            return;
          }
        }
      }
    }
  }();
  // LSTM: residual connections from a layer that exists, above the first.
  [&] {
    for (const std::string& arch : recurrent) {
      for (const Value& r : Candidates(hps, "residual_from_layer", arch)) {
        for (const Value& e : Candidates(hps, "encoder_layers", arch)) {
          for (const Value& d : Candidates(hps, "decoder_layers", arch)) {
            if (!r.is_int() || !e.is_int() || !d.is_int()) continue;
            if (auto problem = ResidualProblem(r.as_int(), e.as_int(), d.as_int())) {
              const std::string p = "hyperparameters.residual_from_layer";
              sink.Add(p, at(p), *problem + ArchNote(archs, arch));
              return;
            }
          }
        }
      }
    }
  }();
  // LSTM: a GNMT encoder's bidirectional bottom layers.
  [&] {
    for (const std::string& arch : recurrent) {
      for (const Value& k : Candidates(hps, "encoder_bidirectional_layers", arch)) {
        for (const Value& b : Candidates(hps, "encoder_bidirectional", arch)) {
          for (const Value& e : Candidates(hps, "encoder_layers", arch)) {
            for (const Value& r : Candidates(hps, "residual_from_layer", arch)) {
              if (!k.is_int() || !b.is_bool() || !e.is_int() || !r.is_int()) continue;
              const std::string p = BlamedPath(hps, {"encoder_bidirectional_layers", "residual_from_layer"});
              if (auto problem = BidirectionalLayersProblem(p, k.as_int(), b.as_bool(), e.as_int(), r.as_int())) {
                sink.Add(p, at(p), *problem + ArchNote(archs, arch));
                return;
              }
            }
          }
        }
      }
    }
  }();
  // LSTM and fconv: a tied output projection needs decoder_out_embed_dim == decoder_embed_dim.
  [&] {
    for (const std::string& arch : with_out_embed_dim) {
      for (const Value& s : Candidates(hps, "share_decoder_input_output_embed", arch)) {
        for (const Value& e : Candidates(hps, "decoder_embed_dim", arch)) {
          for (const Value& o : Candidates(hps, "decoder_out_embed_dim", arch)) {
            if (!s.is_bool() || !e.is_int() || !o.is_int()) continue;
            const std::string p = BlamedPath(hps, {"share_decoder_input_output_embed",
                                                   "decoder_out_embed_dim", "decoder_embed_dim"});
            if (auto problem = TiedOutputProblem(p, s.as_bool(), e.as_int(), o.as_int())) {
              sink.Add(p, at(p), *problem + ArchNote(archs, arch));
              return;
            }
          }
        }
      }
    }
  }();
}

void CheckTrialModelHyperparameters(ErrorSink& sink, const Value& hparams, const std::string& family) {
  const Value full = WithDefaults(hparams);
  auto int_of = [&](const char* name) -> std::optional<int64_t> {
    const Value* v = full.Find(name);
    if (!v || !v->is_int()) return std::nullopt;
    return v->as_int();
  };
  if (family.empty()) return;
  if (HasHeads(family)) {
    auto d = int_of("d_model"), h = int_of("heads");
    if (d && h && *h > 0 && *d % *h != 0) {
      sink.AddNoLocation("hyperparameters.heads",
                         std::to_string(*h) + " heads do not divide d_model " + std::to_string(*d));
    }
  }
  if (IsSpeechFamily(family) && !int_of("decoder_layers")) {
    const Value* w = full.Find("ctc_weight");
    if (w && w->is_number() && w->as_double() < 1.0) {
      sink.AddNoLocation("hyperparameters.ctc_weight", kCtcWeightWithoutDecoder);
    }
  }
  if (HasRecurrentEncoder(family)) {
    auto e = int_of("encoder_layers"), d = int_of("decoder_layers");
    if (e && d) {
      if (auto problem = DecoderLayersProblem(*e, *d)) {
        sink.AddNoLocation("hyperparameters.decoder_layers", *problem);
      }
      if (auto r = int_of("residual_from_layer")) {
        if (auto problem = ResidualProblem(*r, *e, *d)) {
          sink.AddNoLocation("hyperparameters.residual_from_layer", *problem);
        }
        const Value* b = full.Find("encoder_bidirectional");
        const std::string p = "hyperparameters.encoder_bidirectional_layers";
        if (auto k = int_of("encoder_bidirectional_layers"); k && b && b->is_bool()) {
          if (auto problem = BidirectionalLayersProblem(p, *k, b->as_bool(), *e, *r)) {
            sink.AddNoLocation(p, *problem);
          }
        }
      }
    }
  }
  if (HasOutEmbedDim(family)) {
    const Value* shared = full.Find("share_decoder_input_output_embed");
    auto embed = int_of("decoder_embed_dim"), out = int_of("decoder_out_embed_dim");
    if (shared && shared->is_bool() && embed && out) {
      const std::string p = "hyperparameters.share_decoder_input_output_embed";
      if (auto problem = TiedOutputProblem(p, shared->as_bool(), *embed, *out)) {
        sink.AddNoLocation(p, *problem);
      }
    }
  }
}

}  // namespace sf::config
