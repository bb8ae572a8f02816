#include "trainer/data/translation_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "common/log.h"
#include "trainer/data/parallel_text.h"
#include "trainer/data/sha256.h"

namespace sf::data {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormatVersion = "steadfast-data-v1";
constexpr const char* kSplitNames[3] = {"train", "valid", "test"};

// The file that names the training data in messages and places the cache: the source side, or
// the one side of monolingual text.
const std::string& TrainFile(const config::DataConfig& c) {
  return c.train.monolingual() ? c.train.tgt : c.train.src;
}

struct SplitFiles {
  const char* name;
  const config::ParallelFiles* files;
};

std::vector<SplitFiles> Splits(const config::DataConfig& c) {
  std::vector<SplitFiles> out{{kSplitNames[0], &c.train}};
  if (c.valid) out.push_back({kSplitNames[1], &*c.valid});
  if (c.test) out.push_back({kSplitNames[2], &*c.test});
  return out;
}

Result<std::string> ComputeHash(const config::DataConfig& c, const DataOptions& o) {
  Sha256 h;
  h.UpdateField(kFormatVersion);
  for (const auto& s : Splits(c)) {
    h.UpdateField(s.name);
    if (s.files->monolingual()) {
      h.UpdateField("monolingual");
    } else {
      SF_RETURN_IF_ERROR(HashFileInto(s.files->src, h));
    }
    SF_RETURN_IF_ERROR(HashFileInto(s.files->tgt, h));
  }
  const auto& t = c.tokenizer;
  std::ostringstream settings;
  settings << "type=" << t.type << " vocab_size=" << t.vocab_size << " model_type=" << t.model_type
           << " shared=" << t.shared << " coverage=" << t.character_coverage
           << " seed=" << o.tokenizer_seed << " max_source_positions=" << c.max_source_positions
           << " max_target_positions=" << c.max_target_positions;
  h.UpdateField(settings.str());
  if (t.model) {
    h.UpdateField("model");
    Status st = HashFileInto(*t.model, h);
    if (!st.ok()) return st.WithContext("data.tokenizer.model");
  }
  return h.HexDigest();
}

// True when `dir` exists as a writable directory or can be created. The permission bits are
// honoured even for root (access() says yes to root for a r-x directory, but a directory the
// owner marked read-only — like the shared data — must not get a cache written into it).
bool PermitsWriting(const fs::path& dir) {
  struct stat sb;
  if (::stat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) return false;
  if ((sb.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) return false;
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}

bool WritableDir(const std::string& dir) {
  std::error_code ec;
  fs::path p(dir);
  if (fs::is_directory(p, ec)) return PermitsWriting(p);
  // Check the nearest existing ancestor before creating anything.
  fs::path ancestor = p.parent_path();
  while (!ancestor.empty() && !fs::exists(ancestor, ec)) ancestor = ancestor.parent_path();
  if (ancestor.empty() || !PermitsWriting(ancestor)) return false;
  fs::create_directories(p, ec);
  return !ec && PermitsWriting(p);
}

std::vector<std::string> CacheRoots(const std::string& data_file, const DataOptions& o) {
  if (!o.cache_dir.empty()) return {o.cache_dir};
  std::vector<std::string> roots;
  fs::path data_dir = fs::path(data_file).parent_path();
  if (data_dir.empty()) data_dir = ".";
  roots.push_back((data_dir / ".steadfast-cache").string());
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    roots.push_back((fs::path(x) / "steadfast").string());
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    roots.push_back((fs::path(home) / ".cache" / "steadfast").string());
  }
  roots.push_back("/tmp/steadfast-cache");
  return roots;
}

std::string CountsLine(const std::string& name, const SplitCounts& c) {
  std::ostringstream s;
  s << name << ' ' << c.lines << ' ' << c.kept << ' ' << c.empty << ' ' << c.junk << ' '
    << c.too_long;
  return s.str();
}

void LogCounts(const std::string& name, const SplitCounts& c) {
  log::Info("data", {{"event", "split"},
                     {"split", name},
                     {"lines", std::to_string(c.lines)},
                     {"kept", std::to_string(c.kept)},
                     {"skipped_empty", std::to_string(c.empty)},
                     {"skipped_junk", std::to_string(c.junk)},
                     {"skipped_too_long", std::to_string(c.too_long)}});
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) return Internal("can't write " + path);
  return Status::Ok();
}

// Reads meta.txt: "<split> lines kept empty junk too_long" per line.
Result<std::map<std::string, SplitCounts>> ReadMeta(const std::string& path) {
  std::ifstream in(path);
  if (!in) return DataLoss("cache entry: " + path + " missing");
  std::map<std::string, SplitCounts> out;
  std::string name;
  SplitCounts c;
  std::string version;
  if (!std::getline(in, version) || version != kFormatVersion) {
    return DataLoss("cache entry: " + path + ": unknown version");
  }
  while (in >> name >> c.lines >> c.kept >> c.empty >> c.junk >> c.too_long) out[name] = c;
  return out;
}

struct Encoded {
  std::vector<std::vector<int32_t>> src, tgt;
  std::vector<int64_t> lines;
  SplitCounts counts;
};

// Monolingual text (`monolingual`) has no source side: text.src is empty and every pair gets an
// empty source, so only the target side is checked.
Encoded EncodeSplit(const ParallelText& text, const SentencePieceModel& src_model,
                    const SentencePieceModel& tgt_model, const config::DataConfig& c, bool monolingual) {
  Encoded e;
  e.counts.lines = int64_t(text.tgt.size());
  static const std::string kNoSource = "-";
  for (size_t i = 0; i < text.tgt.size(); ++i) {
    const std::string& s = monolingual ? kNoSource : text.src[i];
    const std::string& t = text.tgt[i];
    if (IsBlankLine(s) || IsBlankLine(t)) {
      ++e.counts.empty;
      continue;
    }
    if (IsMarkerOnlyLine(s) || IsMarkerOnlyLine(t)) {
      ++e.counts.junk;
      continue;
    }
    std::vector<int32_t> si = monolingual ? std::vector<int32_t>{} : src_model.Encode(s);
    std::vector<int32_t> ti = tgt_model.Encode(t);
    if ((!monolingual && si.empty()) || ti.empty()) {
      ++e.counts.junk;
      continue;
    }
    if (int64_t(si.size()) + 1 > c.max_source_positions ||
        int64_t(ti.size()) + 1 > c.max_target_positions) {
      ++e.counts.too_long;
      continue;
    }
    e.src.push_back(std::move(si));
    e.tgt.push_back(std::move(ti));
    e.lines.push_back(int64_t(i) + 1);
  }
  e.counts.kept = int64_t(e.tgt.size());
  return e;
}

// Lines usable for tokenizer training: not blank, not junk, and (parallel text) neither is the
// other side's line (`other` empty: monolingual text).
std::string TrainingText(const std::vector<std::string>& lines,
                         const std::vector<std::string>& other) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (IsBlankLine(lines[i]) || IsMarkerOnlyLine(lines[i]) ||
        (!other.empty() && (IsBlankLine(other[i]) || IsMarkerOnlyLine(other[i])))) {
      continue;
    }
    out += lines[i];
    out += '\n';
  }
  return out;
}

Status BuildEntry(const config::DataConfig& c, const DataOptions& o, const std::string& dir) {
  // 1. Read and check every split before spending time on the tokenizer.
  std::vector<std::pair<std::string, ParallelText>> texts;
  for (const auto& s : Splits(c)) {
    ParallelText t;
    if (s.files->monolingual()) {
      SF_ASSIGN_OR_RETURN(t.tgt, ReadTextLines(s.files->tgt));
    } else {
      SF_ASSIGN_OR_RETURN(t, ReadParallelText(s.files->src, s.files->tgt));
    }
    texts.emplace_back(s.name, std::move(t));
  }
  // 2. Tokenizer(s).
  const auto& tc = c.tokenizer;
  if (tc.type != "sentencepiece") {
    return InvalidArgument("data.tokenizer.type: '" + tc.type +
                           "' is not supported (sentencepiece)");
  }
  std::unique_ptr<SentencePieceModel> src_model, tgt_model;
  if (tc.model) {
    auto m = SentencePieceModel::Load(*tc.model);
    if (!m.ok()) return m.status().WithContext("data.tokenizer.model");
    src_model = std::move(m).value();
    SF_RETURN_IF_ERROR(WriteTextFile(dir + "/spm.model", src_model->serialized()));
  } else {
    const ParallelText& train = texts.front().second;
    auto start = std::chrono::steady_clock::now();
    log::Info("data", {{"event", "tokenizer_training"},
                       {"model_type", tc.model_type},
                       {"vocab_size", std::to_string(tc.vocab_size)},
                       {"shared", tc.shared ? "true" : "false"}});
    SentencePieceTrainOptions opt;
    opt.vocab_size = tc.vocab_size;
    opt.model_type = tc.model_type;
    opt.character_coverage = tc.character_coverage;
    opt.seed = o.tokenizer_seed;
    std::vector<std::pair<std::string, std::string>> models;  // (output, text)
    const bool monolingual = c.train.monolingual();
    std::string src_text = monolingual ? "" : TrainingText(train.src, train.tgt);
    std::string tgt_text = TrainingText(train.tgt, train.src);
    if (tc.shared || monolingual) {  // one side: one model
      models.emplace_back(dir + "/spm.model", src_text + tgt_text);
    } else {
      models.emplace_back(dir + "/spm.src.model", src_text);
      models.emplace_back(dir + "/spm.tgt.model", tgt_text);
    }
    for (auto& [output, text] : models) {
      std::string input = output + ".train.txt";
      SF_RETURN_IF_ERROR(WriteTextFile(input, text));
      opt.input_files = {input};
      opt.output_model_path = output;
      Status st = SentencePieceModel::Train(opt);
      std::error_code ec;
      fs::remove(input, ec);
      if (!st.ok()) return st.WithContext("data.tokenizer");
      auto m = SentencePieceModel::Load(output);
      if (!m.ok()) return m.status();
      (src_model ? tgt_model : src_model) = std::move(m).value();
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log::Info("data", {{"event", "tokenizer_trained"},
                       {"vocab_size", std::to_string(src_model->vocab_size())},
                       {"seconds", std::to_string(secs)}});
  }
  const SentencePieceModel& tgt = tgt_model ? *tgt_model : *src_model;
  // 3. Encode, filter and write each split.
  std::string meta = std::string(kFormatVersion) + "\n";
  for (auto& [name, text] : texts) {
    log::Info(
        "data",
        {{"event", "binarizing"}, {"split", name}, {"lines", std::to_string(text.tgt.size())}});
    Encoded e = EncodeSplit(text, *src_model, tgt, c, c.train.monolingual());
    SF_RETURN_IF_ERROR(WriteTokenFile(dir + "/" + name + ".src.bin", e.src, e.lines));
    SF_RETURN_IF_ERROR(WriteTokenFile(dir + "/" + name + ".tgt.bin", e.tgt, e.lines));
    meta += CountsLine(name, e.counts) + "\n";
  }
  return WriteTextFile(dir + "/meta.txt", meta);
}

}  // namespace

ParallelDataset::ParallelDataset(std::string name, std::unique_ptr<MappedTokenFile> src,
                                 std::unique_ptr<MappedTokenFile> tgt, SplitCounts counts)
    : name_(std::move(name)), src_(std::move(src)), tgt_(std::move(tgt)), counts_(counts) {}

Result<std::unique_ptr<TranslationData>> TranslationData::Open(const config::DataConfig& c,
                                                               const DataOptions& o) {
  if (c.max_source_positions < 1 || c.max_target_positions < 1) {
    return InvalidArgument("data.max_source_positions/max_target_positions must be >= 1");
  }
  SF_ASSIGN_OR_RETURN(std::string hash, ComputeHash(c, o));
  std::string entry_name = "data-" + hash.substr(0, 32);

  // Find an existing entry, else build one in the first writable root.
  std::vector<std::string> roots = CacheRoots(TrainFile(c), o);
  std::string entry;
  bool reused = false;
  for (const auto& root : roots) {
    std::error_code ec;
    std::string candidate = root + "/" + entry_name;
    if (fs::exists(candidate + "/meta.txt", ec)) {
      entry = candidate;
      reused = true;
      break;
    }
  }
  if (!reused) {
    std::string root;
    for (const auto& r : roots) {
      if (WritableDir(r)) {
        root = r;
        break;
      }
    }
    if (root.empty()) {
      return FailedPrecondition("no writable data cache directory (tried " + roots.front() +
                                " and fallbacks)");
    }
    entry = root + "/" + entry_name;
    std::random_device rd;
    std::string tmp = entry + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
    std::error_code ec;
    fs::create_directories(tmp, ec);
    if (ec) return Internal("can't create " + tmp + ": " + ec.message());
    log::Info("data", {{"event", "building"}, {"cache", entry}});
    Status st = BuildEntry(c, o, tmp);
    if (!st.ok()) {
      fs::remove_all(tmp, ec);
      return st;
    }
    fs::rename(tmp, entry, ec);
    if (ec) {
      // Another process finished the same entry first: use theirs.
      fs::remove_all(tmp, ec);
      if (!fs::exists(entry + "/meta.txt", ec)) {
        return Internal("can't move cache entry into place at " + entry);
      }
    }
    log::Info("data", {{"event", "built"}, {"cache", entry}});
  } else {
    log::Info("data", {{"event", "reused"}, {"cache", entry}});
  }

  std::unique_ptr<TranslationData> d(new TranslationData());
  d->cache_path_ = entry;
  d->hash_ = hash;
  d->reused_ = reused;
  d->monolingual_ = c.train.monolingual();
  SF_ASSIGN_OR_RETURN(auto meta, ReadMeta(entry + "/meta.txt"));
  for (const auto& s : Splits(c)) {
    SF_ASSIGN_OR_RETURN(auto src, MappedTokenFile::Open(entry + "/" + s.name + ".src.bin"));
    SF_ASSIGN_OR_RETURN(auto tgt, MappedTokenFile::Open(entry + "/" + s.name + ".tgt.bin"));
    if (src->size() != tgt->size()) return DataLoss("cache entry " + entry + ": sides differ");
    auto ds =
        std::make_unique<ParallelDataset>(s.name, std::move(src), std::move(tgt), meta[s.name]);
    LogCounts(s.name, ds->counts());
    if (std::string(s.name) == "train")
      d->train_ = std::move(ds);
    else if (std::string(s.name) == "valid")
      d->valid_ = std::move(ds);
    else
      d->test_ = std::move(ds);
  }
  if (d->train_->size() == 0) {
    return InvalidArgument("file " + TrainFile(c) + ": no usable training " +
                           (c.train.monolingual() ? "lines" : "pairs") + " (all " +
                           std::to_string(d->train_->counts().lines) + " skipped)");
  }
  if (fs::exists(entry + "/spm.model")) {
    SF_ASSIGN_OR_RETURN(d->src_tokenizer_, SentencePieceModel::Load(entry + "/spm.model"));
  } else {
    SF_ASSIGN_OR_RETURN(d->src_tokenizer_, SentencePieceModel::Load(entry + "/spm.src.model"));
    SF_ASSIGN_OR_RETURN(d->tgt_tokenizer_, SentencePieceModel::Load(entry + "/spm.tgt.model"));
  }
  return d;
}

Result<std::string> WritableCacheRoot(const std::string& data_file, const DataOptions& options) {
  const std::vector<std::string> roots = CacheRoots(data_file, options);
  for (const auto& r : roots) {
    if (WritableDir(r)) return r;
  }
  return FailedPrecondition("no writable data cache directory (tried " + roots.front() + " and fallbacks)");
}

}  // namespace sf::data
