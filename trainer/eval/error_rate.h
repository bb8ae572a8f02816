// Word and character error rates of speech recognition output, as common tools compute them
// (sclite, jiwer, Kaldi's compute-wer): the Levenshtein alignment of each hypothesis with its
// reference (substitutions, deletions, insertions each cost 1), edits and reference lengths
// summed over the corpus, rate = edits / reference length (× 100 as a percentage; it can exceed
// 100 with many insertions).
//
// Both sides are normalised first (NormalizeTranscript): lowercase; every character that is not a
// letter, a digit or an apostrophe becomes a space (so "T-shirt," is "t shirt"); runs of spaces
// collapse and the ends are trimmed. Letters and digits are ASCII's plus every non-ASCII code
// point (UTF-8 is decoded, an invalid byte as U+FFFD; only ASCII is lowercased). Words are the space-separated pieces; the
// characters of CER are the normalised text's code points, spaces between words included
// (jiwer's cer). An empty reference with an empty hypothesis counts nothing; with a non-empty one,
// its words (characters) are insertions.
//
//   ErrorCounts wer = WordErrors(hyps, refs);   // wer.rate() 0.123 → "WER 12.30"
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sf::eval {

struct ErrorCounts {
  int64_t substitutions = 0, deletions = 0, insertions = 0;
  int64_t reference_length = 0;  // words or characters
  int64_t edits() const { return substitutions + deletions + insertions; }
  // edits / reference_length; 0 for an empty corpus with no edits, edits when it has none.
  double rate() const;
  // "WER 12.30 (S 10 D 2 I 3 / N 122)" with `name` first.
  std::string ToString(const std::string& name) const;
  ErrorCounts& operator+=(const ErrorCounts& o);
};

std::string NormalizeTranscript(std::string_view text);

// One hypothesis against one reference (both normalised here).
ErrorCounts WordErrors(std::string_view hypothesis, std::string_view reference);
ErrorCounts CharErrors(std::string_view hypothesis, std::string_view reference);

// A corpus: one hypothesis per reference, in order; kInvalidArgument when the counts differ.
Result<ErrorCounts> CorpusWordErrors(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::string>& references);
Result<ErrorCounts> CorpusCharErrors(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::string>& references);

}  // namespace sf::eval
