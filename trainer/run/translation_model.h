// A trained translation model loaded from a checkpoint, ready to translate: what
// `sf-trainer translate --checkpoint DIR` and `sf-serve --checkpoint DIR` both use, so that the
// same checkpoint and beam options give the same text byte for byte in either.
//
// Loading reads the checkpoint (standalone_commands.h), rebuilds the model from the weights'
// __metadata__ (or trainer_state.json's "model" in older checkpoints), starts the source (and,
// when the vocabularies differ, the target) SentencePiece helper, makes the backend of
// `device` and copies the fp32 weights in. The default beam options are the checkpoint's
// hyperparameters (BeamFromHyperparameters: beam_size, lenpen, max_len_a, max_len_b).
//
// Threads: Encode and Decode are safe from several threads at once (sentencepiece_model.h).
// Translate runs the search on the model's weights and must be called by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/data/sentencepiece_model.h"
#include "trainer/kernels/backend.h"
#include "trainer/decoding/generator.h"
#include "trainer/models/model_spec.h"

namespace sf {

struct TranslationModelOptions {
  std::string checkpoint;  // directory
  std::string device;      // --device: "" / "cpu", "cuda", "cuda:N", "auto"
  bool cache = true;       // false: the CPU reference search (whole prefix every step)
};

class TranslationModel {
 public:
  // Errors (the message is what `sf-trainer translate:` prints after its name): an unreadable
  // or corrupt checkpoint, one not written by `sf-trainer train` on text (no tokenizer), a bad
  // --device, --no-cache off the CPU, weights that do not fit the model.
  static Result<std::unique_ptr<TranslationModel>> Load(const TranslationModelOptions& options);
  ~TranslationModel();
  TranslationModel(const TranslationModel&) = delete;
  TranslationModel& operator=(const TranslationModel&) = delete;

  // The checkpoint's beam settings, with `cache` as loaded.
  const BeamOptions& default_beam() const { return default_beam_; }
  // Sources longer than this many tokens are cut by `sf-trainer translate` (max_positions - 3).
  int64_t max_source_tokens() const;
  const data::SentencePieceModel& source_tokenizer() const { return *source_; }
  const data::SentencePieceModel& target_tokenizer() const { return target_ ? *target_ : *source_; }
  Generator& translator() { return *translator_; }

  // Source token ids of one line (no EOS; not cut).
  std::vector<int32_t> Encode(const std::string& line) const { return source_tokenizer().Encode(line); }
  // The detokenized text of a hypothesis.
  std::string Decode(const Hypothesis& h) const { return target_tokenizer().Decode(h.tokens); }

 private:
  TranslationModel() = default;

  std::unique_ptr<data::SentencePieceModel> source_, target_;
  std::unique_ptr<Backend<float>> backend_;      // declared before the model it serves
  ModelSpec spec_;
  std::unique_ptr<Seq2SeqModel<float>> model_;
  std::unique_ptr<Generator> translator_;
  BeamOptions default_beam_;
};

}  // namespace sf
