// A SentencePiece tokenizer model: training, loading, encoding and decoding.
//
// SentencePiece itself runs in a helper process, `sf-spm` (spm_helper_main.cc): Debian's
// libsentencepiece carries private copies of Protobuf-lite and Abseil that collide with gRPC's
// in one process. Train() runs `sf-spm train`; a loaded model owns one `sf-spm serve` child and
// asks it over a socket pair. The helper is found as $SF_SPM, else beside this executable, else
// in the build tree, else on PATH. Link `sf_spm`.
//
// Special ids follow fairseq's dictionary layout, which the engine relies on (pad_id = 1):
//   bos = 0, pad = 1, eos = 2, unk = 3; ordinary pieces start at 4.
// Encode() never adds BOS or EOS; the batcher appends EOS itself.
//
// A loaded model is immutable; Encode/Decode are const and safe to call from several threads
// (requests to the helper are serialised).
// Train() is re-entrant: each call is its own helper process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sf::data {

inline constexpr int32_t kBosId = 0;
inline constexpr int32_t kPadId = 1;
inline constexpr int32_t kEosId = 2;
inline constexpr int32_t kUnkId = 3;

struct SentencePieceTrainOptions {
  std::vector<std::string> input_files;  // plain text, one sentence per line
  int64_t vocab_size = 8000;
  std::string model_type = "bpe";  // bpe | unigram | char | word
  double character_coverage = 1.0;
  std::string output_model_path;  // written atomically (temp name, then rename)
  // Sentences read for training (all of Multi30k fits); read in file order, never shuffled.
  int64_t input_sentence_size = 2'000'000;
  int num_threads = 2;
  uint32_t seed = 1234;
};

class SentencePieceModel {
 public:
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  // Trains a model and writes it to options.output_model_path. Deterministic for the same
  // inputs and options (fixed seed and thread count, no input shuffling). When the text is too
  // small for vocab_size, the vocabulary is smaller than asked (hard_vocab_limit=false).
  // Errors: kInvalidArgument (bad model_type, vocab_size), kInternal (SentencePiece failed,
  // message included), or an I/O error writing the output.
  static Status Train(const SentencePieceTrainOptions& options);

  // Loads a model file. kNotFound when missing, kInvalidArgument when it isn't a model.
  static Result<std::unique_ptr<SentencePieceModel>> Load(const std::string& path);
  // Loads from the bytes of a model file (e.g. embedded in a checkpoint).
  static Result<std::unique_ptr<SentencePieceModel>> FromSerialized(std::string_view bytes);

  // Token ids for `text` (no BOS/EOS). Unknown characters map to kUnkId.
  std::vector<int32_t> Encode(std::string_view text) const;
  // Detokenized text; special ids (bos, pad, eos) are dropped, and decoding stops at the first
  // EOS. Unknown ids print as " ⁇ " as SentencePiece does.
  std::string Decode(const std::vector<int32_t>& ids) const;
  // The piece string of one id ("▁Haus"), for debugging.
  std::string IdToPiece(int32_t id) const;

  int32_t vocab_size() const;
  // The bytes of the model file (what FromSerialized accepts).
  const std::string& serialized() const { return serialized_; }

 private:
  struct Impl;
  SentencePieceModel();
  std::unique_ptr<Impl> impl_;
  std::string serialized_;
};

}  // namespace sf::data
