// The data of one experiment: the `data:` section of the YAML turned into tokenized,
// binarized, memory-mapped parallel text.
//
//   auto data = TranslationData::Open(config.data);   // trains/loads the tokenizer, binarizes
//   const ParallelDataset& train = data->train();      // then see batching.h
//
// Steps of Open():
//  1. Hash the bytes of every input file (train/valid/test, both sides; the tokenizer model
//     when one is given) together with the tokenizer settings and the position limits
//     (SHA-256). The hash names a cache entry `data-<hash>`.
//  2. Look for that entry beside the data (`<dir of train.src>/.steadfast-cache/`), then in
//     $XDG_CACHE_HOME/steadfast (or ~/.cache/steadfast), then /tmp/steadfast-cache. Found: map
//     it and log `event=reused` — no tokenizer training, no binarizing.
//     Monolingual text ({text: FILE}, a language model's data) is one file per split: it is the
//     target side, every source is empty, and the tokenizer is trained on it alone.
//  3. Otherwise read and check the text (parallel_text.h: missing/empty files, unequal line
//     counts, invalid UTF-8, each naming file and line), train SentencePiece on the training
//     text when data.tokenizer.model is absent (shared: one model on source+target; not
//     shared: one per side), encode every pair and skip (counting, and logging the counts):
//       empty     either side blank;
//       junk      either side only "@@" markers, or encodes to no tokens;
//       too_long  source tokens + EOS > max_source_positions, or target tokens + EOS >
//                 max_target_positions.
//     The entry is written to a temporary directory in the first writable location (beside
//     the data when that directory is writable — the shared data is read-only) and renamed
//     into place, so a crash never leaves a half-written entry and concurrent ranks agree.
//
// Everything returned is immutable and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/config/experiment_config.h"
#include "common/status.h"
#include "trainer/data/sentencepiece_model.h"
#include "trainer/data/token_file.h"

namespace sf::data {

// What happened to the raw lines of one split.
struct SplitCounts {
  int64_t lines = 0;  // pairs in the raw files
  int64_t kept = 0;
  int64_t empty = 0;     // skipped: a blank side
  int64_t junk = 0;      // skipped: a side of only "@@" markers or no tokens
  int64_t too_long = 0;  // skipped: over max_source_positions / max_target_positions
};

// One split (train, valid or test): pairs of token sequences, without EOS.
class ParallelDataset {
 public:
  ParallelDataset(std::string name, std::unique_ptr<MappedTokenFile> src,
                  std::unique_ptr<MappedTokenFile> tgt, SplitCounts counts);

  const std::string& name() const { return name_; }
  int64_t size() const { return src_->size(); }
  std::span<const int32_t> src(int64_t i) const { return (*src_)[i]; }
  std::span<const int32_t> tgt(int64_t i) const { return (*tgt_)[i]; }
  // Lengths including the EOS the batcher appends.
  int64_t src_length(int64_t i) const { return src_->length(i) + 1; }
  int64_t tgt_length(int64_t i) const { return tgt_->length(i) + 1; }
  // 1-based line of pair i in the raw files (pairs are skipped, so this is not i + 1).
  int64_t line(int64_t i) const { return src_->line(i); }
  const SplitCounts& counts() const { return counts_; }

 private:
  std::string name_;
  std::unique_ptr<MappedTokenFile> src_, tgt_;
  SplitCounts counts_;
};

struct DataOptions {
  // Where cache entries live; empty = beside the data, with the fallbacks described above.
  std::string cache_dir;
  // SentencePiece training seed.
  uint32_t tokenizer_seed = 1234;
};

// Where a data cache for `data_file` is written (speech features use it too): options.cache_dir
// when given, else the first writable of the roots above (beside the data, the user's cache
// directory, /tmp/steadfast-cache), created when missing. kFailedPrecondition when none is.
Result<std::string> WritableCacheRoot(const std::string& data_file, const DataOptions& options);

class TranslationData {
 public:
  // Errors name the file (and line): see the header comment. Config problems (bad model_type)
  // are kInvalidArgument naming the field.
  static Result<std::unique_ptr<TranslationData>> Open(const config::DataConfig& config,
                                                       const DataOptions& options = {});

  const ParallelDataset& train() const { return *train_; }
  const ParallelDataset* valid() const { return valid_.get(); }  // null when not configured
  const ParallelDataset* test() const { return test_.get(); }    // null when not configured

  // The same object when the vocabulary is shared.
  const SentencePieceModel& source_tokenizer() const { return *src_tokenizer_; }
  const SentencePieceModel& target_tokenizer() const {
    return tgt_tokenizer_ ? *tgt_tokenizer_ : *src_tokenizer_;
  }
  bool shared_vocabulary() const { return tgt_tokenizer_ == nullptr; }
  // One-sided text (data splits given as {text: FILE}): every pair's source is empty, the text
  // is the target side, and there is one tokenizer.
  bool monolingual() const { return monolingual_; }

  // The cache entry directory, and whether this Open found it already built.
  const std::string& cache_path() const { return cache_path_; }
  bool reused() const { return reused_; }
  const std::string& content_hash() const { return hash_; }

 private:
  TranslationData() = default;
  std::unique_ptr<ParallelDataset> train_, valid_, test_;
  std::unique_ptr<SentencePieceModel> src_tokenizer_, tgt_tokenizer_;
  std::string cache_path_, hash_;
  bool reused_ = false;
  bool monolingual_ = false;
};

}  // namespace sf::data
