// Decoding a CTC model's output (speech_ctc.h) into label sequences, on the host.
//
// Greedy: the most probable symbol of each frame, repeats collapsed, blanks dropped (best path).
// Prefix beam search (Hannun et al. 2014, "First-Pass Large Vocabulary Continuous Speech
// Recognition using Bi-Directional Recurrent DNNs", without a language model): after each frame
// the `beam` most probable label prefixes are kept, each with the log-probability of its
// alignments ending in blank and ending in its last label, so that a prefix's score sums over
// all its alignments (a label repeated needs a blank between its two copies); at the end the
// prefixes are ranked by log(p_blank + p_label). With a beam as large as the number of prefixes
// the scores are the exact log-probabilities of the labelings (tested against enumeration).
// Symbols whose log-probability at a frame is below `prune` (log space; -inf: none) are not
// extended there.
//
// log_probs: [frames, vocab] log-softmax rows of one utterance (row-major, the first `frames`
// rows of the model's output for it). Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace sf::speech {

struct CtcHypothesis {
  std::vector<int32_t> labels;
  double log_prob = 0;  // greedy: the best path's; beam: the prefix's over all alignments
};

CtcHypothesis CtcGreedy(const float* log_probs, int64_t frames, int64_t vocab, int32_t blank);

struct CtcBeamOptions {
  int beam = 8;
  int nbest = 1;
  float prune = -std::numeric_limits<float>::infinity();
};

// The `nbest` best hypotheses, best first.
std::vector<CtcHypothesis> CtcPrefixBeamSearch(const float* log_probs, int64_t frames, int64_t vocab, int32_t blank,
                                               const CtcBeamOptions& options);

// log_softmax of each row of logits [rows, vocab] into out (may alias logits).
void LogSoftmaxRows(const float* logits, float* out, int64_t rows, int64_t vocab);

}  // namespace sf::speech
