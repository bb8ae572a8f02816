// Shared by the CTC decoding tests: every alignment of a small utterance enumerated, the exact
// reference that prefix beam search, the CTC prefix score and joint search are held to.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace sf::speech::test {

// log_probs [frames, vocab]: every labeling's probability (collapsing repeats, dropping blank),
// summed over all vocab^frames alignments, into *exact; with `prefix`, also every prefix's (the
// probability that the labeling begins with it, the empty prefix's being 1).
inline void EnumerateLabelings(const std::vector<float>& log_probs, int64_t frames, int64_t vocab, int32_t blank,
                               std::map<std::vector<int32_t>, double>* exact,
                               std::map<std::vector<int32_t>, double>* prefix = nullptr) {
  std::vector<int32_t> path(static_cast<size_t>(frames), 0);
  while (true) {
    double logp = 0;
    std::vector<int32_t> labels;
    int32_t prev = -1;
    for (int64_t t = 0; t < frames; ++t) {
      logp += log_probs[t * vocab + path[t]];
      if (path[t] != blank && path[t] != prev) labels.push_back(path[t]);
      prev = path[t];
    }
    const double p = std::exp(logp);
    (*exact)[labels] += p;
    if (prefix) {
      for (size_t k = 0; k <= labels.size(); ++k) {
        (*prefix)[std::vector<int32_t>(labels.begin(), labels.begin() + static_cast<std::ptrdiff_t>(k))] += p;
      }
    }
    int64_t k = 0;
    while (k < frames && ++path[k] == vocab) path[k++] = 0;
    if (k == frames) break;
  }
}

}  // namespace sf::speech::test
