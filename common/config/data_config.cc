#include "common/config/data_config.h"

#include <optional>

#include "common/config/hyperparameter_schema.h"

namespace sf::config {
namespace {

// What a split gave: parallel text (`src`, `tgt`) or one side's text (`text`).
enum class SplitKind { kParallel, kMonolingual };

const char* KindDescription(SplitKind kind) {
  return kind == SplitKind::kMonolingual ? "monolingual (text)" : "parallel (src and tgt)";
}

// One split, `{src: FILE, tgt: FILE}` or `{text: FILE}` (read into `tgt`, `src` left empty).
// `expected`: the kind of the splits read before, to name the key an empty split misses. Returns
// the split's kind by the keys it gives; nullopt when it gives none, or both kinds' (reported).
std::optional<SplitKind> ReadSplit(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                                   std::optional<SplitKind> expected, ParallelFiles& out) {
  if (!RequireMap(sink, node, path)) return std::nullopt;
  MapReader m(sink, node, path);
  const std::vector<std::string> known = {"src", "tgt", "text"};
  const bool text = m.Has("text"), src = m.Has("src"), tgt = m.Has("tgt");
  if (text && (src || tgt)) {
    const std::string parallel_keys = src && tgt ? "src and tgt" : src ? "src" : "tgt";
    sink.Add(path, node,
             "give either text (one side's text, for a language model) or src and tgt (parallel "
             "text), not text with " +
                 parallel_keys);
    for (const auto& k : known) m.Take(k);
    m.Finish(known);
    return std::nullopt;
  }
  std::optional<SplitKind> kind;
  if (text) {
    kind = SplitKind::kMonolingual;
    if (auto v = m.Take("text")) ReadString(sink, *v, m.Child("text"), out.tgt);
    out.src.clear();
  } else if (!src && !tgt && expected == SplitKind::kMonolingual) {
    m.Missing("text");
  } else {
    if (src || tgt) kind = SplitKind::kParallel;
    if (auto v = m.Take("src"))
      ReadString(sink, *v, m.Child("src"), out.src);
    else
      m.Missing("src");
    if (auto v = m.Take("tgt"))
      ReadString(sink, *v, m.Child("tgt"), out.tgt);
    else
      m.Missing("tgt");
  }
  m.Finish(known);
  return kind;
}

void ReadTokenizer(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                   TokenizerConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("type")) ReadEnum(sink, *v, m.Child("type"), {"sentencepiece"}, out.type);
  if (auto v = m.Take("vocab_size"))
    ReadInt(sink, *v, m.Child("vocab_size"), out.vocab_size, 16, 1000000);
  if (auto v = m.Take("model_type")) {
    ReadEnum(sink, *v, m.Child("model_type"), {"bpe", "unigram", "char", "word"}, out.model_type);
  }
  if (auto v = m.Take("shared")) ReadBool(sink, *v, m.Child("shared"), out.shared);
  if (auto v = m.Take("model")) {
    std::string s;
    if (ReadString(sink, *v, m.Child("model"), s)) out.model = s;
  }
  if (auto v = m.Take("character_coverage")) {
    ReadDouble(sink, *v, m.Child("character_coverage"), out.character_coverage, 0.0, 1.0, true);
  }
  m.Finish({"type", "vocab_size", "model_type", "shared", "model", "character_coverage"});
}

}  // namespace

void ReadData(ErrorSink& sink, const YAML::Node& node, const std::string& path, DataConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  // The kind of the first split read, and where: every later split must be of it.
  std::optional<SplitKind> first_kind;
  std::string first_path;
  auto split = [&](const YAML::Node& v, const std::string& split_path, ParallelFiles& files) {
    std::optional<SplitKind> kind = ReadSplit(sink, v, split_path, first_kind, files);
    if (!kind) return;
    if (!first_kind) {
      first_kind = kind;
      first_path = split_path;
    } else if (*kind != *first_kind) {
      sink.Add(
          split_path, v,
          first_path + " is " + KindDescription(*first_kind) + "; " + split_path + " must be too");
    }
  };
  if (auto v = m.Take("train"))
    split(*v, m.Child("train"), out.train);
  else
    m.Missing("train");
  if (auto v = m.Take("valid")) split(*v, m.Child("valid"), out.valid.emplace());
  if (auto v = m.Take("test")) split(*v, m.Child("test"), out.test.emplace());
  if (auto v = m.Take("tokenizer")) ReadTokenizer(sink, *v, m.Child("tokenizer"), out.tokenizer);
  if (auto v = m.Take("max_source_positions")) {
    ReadInt(sink, *v, m.Child("max_source_positions"), out.max_source_positions, 1, 65536);
  }
  if (auto v = m.Take("max_target_positions")) {
    ReadInt(sink, *v, m.Child("max_target_positions"), out.max_target_positions, 1, 65536);
  }
  m.Finish({"train", "valid", "test", "tokenizer", "max_source_positions", "max_target_positions"});
}

void CheckDataForArchs(ErrorSink& sink, const DataConfig& data,
                       const std::vector<std::string>& archs, const YAML::Node& train_node) {
  if (data.train.tgt.empty() || !data.train.monolingual()) return;
  for (const std::string& arch : archs) {
    const std::string family = ArchFamily(arch);
    if (family.empty() || IsLanguageModelFamily(family)) continue;
    sink.Add("data.train", train_node,
             "one-sided text (text:) trains a language model; arch " + arch +
                 " translates and needs src and tgt");
    return;
  }
}

std::vector<std::pair<std::string, std::string>> DataFiles(const DataConfig& data) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const std::string& split, const ParallelFiles& f) {
    if (f.monolingual()) {
      out.emplace_back("data." + split + ".text", f.tgt);
    } else {
      out.emplace_back("data." + split + ".src", f.src);
      out.emplace_back("data." + split + ".tgt", f.tgt);
    }
  };
  add("train", data.train);
  if (data.valid) add("valid", *data.valid);
  if (data.test) add("test", *data.test);
  return out;
}

}  // namespace sf::config
