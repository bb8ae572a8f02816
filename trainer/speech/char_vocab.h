// Character targets for speech recognition: the code points of the normalised transcript.
//
// Transcripts are normalised with eval::NormalizeTranscript (trainer/eval/error_rate.h) — the
// same normalisation WER and CER use, so what the model learns to emit is what is scored:
// lowercase, every character other than a letter, digit or apostrophe becomes a space, runs
// of spaces collapse, the ends are trimmed.
//
// The vocabulary (ids are int32):
//   0        <blank>  CTC's blank; never a target
//   1        ' '      the space between words
//   2        '\''     apostrophe
//   3..28    'a'..'z'
//   29..38   '0'..'9'
//   39..     every other code point of the training transcripts (after normalisation), in the
//            order first seen (manifest order), so a vocabulary is a pure function of them.
// Saved as UTF-8 text, one symbol per line in id order: "<blank>", "<space>" for the space,
// then the characters themselves. Load checks that layout (errors name file and line).
//
// Encoding a transcript normalises it and maps each code point to its id. A code point the
// vocabulary lacks (one that appears only in valid/test transcripts) is skipped and counted
// (Encode's `unknown`; EncodeTargets sums them and logs one warning): the reference stays as
// written for WER, only the training target loses it.
//
// A CharVocabulary is immutable after construction and safe to share between threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "trainer/speech/manifest.h"

namespace sf::speech {

class CharVocabulary {
 public:
  static constexpr int32_t kBlank = 0;
  static constexpr int32_t kSpace = 1;

  // The base symbols plus every new code point of NormalizeTranscript(t) for t in `transcripts`.
  static CharVocabulary Build(const std::vector<std::string>& transcripts);
  static CharVocabulary Build(const std::vector<Utterance>& training);
  // kNotFound when missing; kInvalidArgument naming file and line for a bad layout.
  static Result<CharVocabulary> Load(const std::string& path);
  // Writes atomically (a temporary file renamed into place).
  Status Save(const std::string& path) const;
  // The saved layout as text, and back (`name` stands for the file in errors): how a checkpoint
  // carries the vocabulary.
  std::string ToText() const;
  static Result<CharVocabulary> FromText(const std::string& text, const std::string& name);
  bool operator==(const CharVocabulary& o) const { return symbols_ == o.symbols_; }

  int32_t size() const { return int32_t(symbols_.size()); }
  // The UTF-8 text of id (" " for the space, "<blank>" for the blank).
  const std::string& symbol(int32_t id) const { return symbols_[size_t(id)]; }
  // -1 when absent.
  int32_t id(char32_t code_point) const;

  // ids of NormalizeTranscript(text); code points not in the vocabulary are skipped and, when
  // `unknown` is given, added to it.
  std::vector<int32_t> Encode(std::string_view text, int64_t* unknown = nullptr) const;
  // The text of `ids`: blanks and ids outside [0, size()) are dropped (no CTC collapsing here).
  std::string Decode(std::span<const int32_t> ids) const;

 private:
  CharVocabulary() = default;
  void Add(char32_t code_point);
  std::vector<std::string> symbols_;
  std::vector<char32_t> code_points_;  // per id; 0 for the blank
  std::unordered_map<char32_t, int32_t> ids_;
};

// The targets of a split: targets[i] = vocabulary.Encode(utterances[i].text).
struct EncodedTargets {
  std::vector<std::vector<int32_t>> targets;
  int64_t unknown_characters = 0;  // skipped code points, summed
  int64_t utterances_with_unknown = 0;
};

// Encodes every transcript of a split. kInvalidArgument naming "MANIFEST:LINE" when a
// transcript normalises to nothing (e.g. only punctuation) — an utterance with no target would
// be trained on as silence. Unknown characters are counted and logged once, with the first
// utterance that had one.
Result<EncodedTargets> EncodeTargets(const std::string& manifest_path,
                                     const std::vector<Utterance>& utterances,
                                     const CharVocabulary& vocabulary);

}  // namespace sf::speech
