#include "common/config/data_config.h"

#include <optional>

#include "common/config/hyperparameter_schema.h"

namespace sf::config {
namespace {

// What a split gave: parallel text (`src`, `tgt`), one side's text (`text`) or speech
// (`manifest`).
enum class SplitKind { kParallel, kMonolingual, kSpeech };

const char* KindDescription(SplitKind kind) {
  switch (kind) {
    case SplitKind::kMonolingual: return "monolingual (text)";
    case SplitKind::kSpeech: return "speech (manifest)";
    default: return "parallel (src and tgt)";
  }
}

// One split, `{src: FILE, tgt: FILE}`, `{text: FILE}` (read into `tgt`, `src` left empty) or
// `{manifest: FILE}`. `expected`: the kind of the splits read before, to name the key an empty
// split misses. Returns the split's kind by the keys it gives; nullopt when it gives none, or
// keys of two kinds (reported).
std::optional<SplitKind> ReadSplit(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                                   std::optional<SplitKind> expected, ParallelFiles& out) {
  if (!RequireMap(sink, node, path)) return std::nullopt;
  MapReader m(sink, node, path);
  const std::vector<std::string> known = {"src", "tgt", "text", "manifest"};
  const bool text = m.Has("text"), src = m.Has("src"), tgt = m.Has("tgt"), manifest = m.Has("manifest");
  if (manifest && (text || src || tgt)) {
    const std::string others = text ? "text" : src && tgt ? "src and tgt" : src ? "src" : "tgt";
    sink.Add(path, node,
             "give either manifest (audio with transcripts, for a speech model) or text data, not "
             "manifest with " +
                 others);
    for (const auto& k : known) m.Take(k);
    m.Finish(known);
    return std::nullopt;
  }
  if (manifest || (!text && !src && !tgt && expected == SplitKind::kSpeech)) {
    if (auto v = m.Take("manifest"))
      ReadString(sink, *v, m.Child("manifest"), out.manifest);
    else
      m.Missing("manifest");
    out.src.clear();
    out.tgt.clear();
    m.Finish(known);
    return manifest ? std::optional<SplitKind>(SplitKind::kSpeech) : std::nullopt;
  }
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

void ReadFeatures(ErrorSink& sink, const YAML::Node& node, const std::string& path, SpeechDataConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("sample_rate")) ReadInt(sink, *v, m.Child("sample_rate"), out.sample_rate, 1000, 384000);
  if (auto v = m.Take("mels")) ReadInt(sink, *v, m.Child("mels"), out.mels, 1, 512);
  if (auto v = m.Take("window_ms")) ReadDouble(sink, *v, m.Child("window_ms"), out.window_ms, 1.0, 1000.0);
  if (auto v = m.Take("hop_ms")) ReadDouble(sink, *v, m.Child("hop_ms"), out.hop_ms, 1.0, 1000.0);
  if (auto v = m.Take("utterance_cmvn")) ReadBool(sink, *v, m.Child("utterance_cmvn"), out.utterance_cmvn);
  m.Finish({"sample_rate", "mels", "window_ms", "hop_ms", "utterance_cmvn"});
}

void ReadSpecAugment(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                     std::optional<SpecAugmentConfig>& out) {
  // `spec_augment: false` (or absent) turns it off; `true` takes the defaults.
  if (node.IsScalar()) {
    bool on = false;
    if (ReadBool(sink, node, path, on)) {
      out.reset();
      if (on) out.emplace();
    }
    return;
  }
  if (!RequireMap(sink, node, path)) return;
  SpecAugmentConfig c;
  MapReader m(sink, node, path);
  if (auto v = m.Take("freq_masks")) ReadInt(sink, *v, m.Child("freq_masks"), c.freq_masks, 0, 100);
  if (auto v = m.Take("freq_width")) ReadInt(sink, *v, m.Child("freq_width"), c.freq_width, 0, 512);
  if (auto v = m.Take("time_masks")) ReadInt(sink, *v, m.Child("time_masks"), c.time_masks, 0, 100);
  if (auto v = m.Take("time_width")) ReadInt(sink, *v, m.Child("time_width"), c.time_width, 0, 100000);
  if (auto v = m.Take("time_ratio")) ReadDouble(sink, *v, m.Child("time_ratio"), c.time_ratio, 0.0, 1.0);
  m.Finish({"freq_masks", "freq_width", "time_masks", "time_width", "time_ratio"});
  out = c;
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
  // Keys of one kind of data only, refused at the key with the other kind.
  const bool speech = first_kind == SplitKind::kSpeech;
  auto only_for = [&](const char* key, bool for_speech) {
    if (!first_kind || speech == for_speech) return true;
    sink.Add(m.Child(key), node[key],
             for_speech ? "applies to speech data (splits given as manifest:); " + first_path + " is " +
                              KindDescription(*first_kind)
                        : "applies to text data; " + first_path +
                              " is speech (manifest:), whose targets are the transcripts' characters");
    return false;
  };
  if (auto v = m.Take("tokenizer"); v && only_for("tokenizer", false)) {
    ReadTokenizer(sink, *v, m.Child("tokenizer"), out.tokenizer);
  }
  if (auto v = m.Take("max_source_positions"); v && only_for("max_source_positions", false)) {
    ReadInt(sink, *v, m.Child("max_source_positions"), out.max_source_positions, 1, 65536);
  }
  if (auto v = m.Take("max_target_positions"); v && only_for("max_target_positions", false)) {
    ReadInt(sink, *v, m.Child("max_target_positions"), out.max_target_positions, 1, 65536);
  }
  if (auto v = m.Take("features"); v && only_for("features", true)) {
    ReadFeatures(sink, *v, m.Child("features"), out.speech);
  }
  if (auto v = m.Take("spec_augment"); v && only_for("spec_augment", true)) {
    ReadSpecAugment(sink, *v, m.Child("spec_augment"), out.speech.spec_augment);
  }
  m.Finish({"train", "valid", "test", "tokenizer", "max_source_positions", "max_target_positions", "features",
            "spec_augment"});
}

void CheckDataForArchs(ErrorSink& sink, const DataConfig& data,
                       const std::vector<std::string>& archs, const YAML::Node& train_node) {
  // Speech data trains a speech model only, and a speech model reads nothing else.
  if (!data.train.manifest.empty() || !data.train.tgt.empty()) {
    for (const std::string& arch : archs) {
      const std::string family = ArchFamily(arch);
      if (family.empty() || IsSpeechFamily(family) == data.train.speech()) continue;
      sink.Add("data.train", train_node,
               data.train.speech() ? "speech data (manifest:) trains a speech model; arch " + arch + " reads text"
                                   : "arch " + arch + " recognises speech and needs speech data ({manifest: FILE})");
      return;
    }
  }
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
    if (f.speech()) {
      out.emplace_back("data." + split + ".manifest", f.manifest);
    } else if (f.monolingual()) {
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
