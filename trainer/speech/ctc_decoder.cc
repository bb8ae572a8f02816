#include "trainer/speech/ctc_decoder.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace sf::speech {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double LogAdd(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

struct PrefixScore {
  double blank = kNegInf, label = kNegInf;  // alignments ending in blank / in the last label
  double total() const { return LogAdd(blank, label); }
};

}  // namespace

CtcHypothesis CtcGreedy(const float* log_probs, int64_t frames, int64_t vocab, int32_t blank) {
  CtcHypothesis h;
  int32_t prev = blank;
  for (int64_t t = 0; t < frames; ++t) {
    const float* row = log_probs + t * vocab;
    const int32_t best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    h.log_prob += row[best];
    if (best != blank && best != prev) h.labels.push_back(best);
    prev = best;
  }
  return h;
}

std::vector<CtcHypothesis> CtcPrefixBeamSearch(const float* log_probs, int64_t frames, int64_t vocab, int32_t blank,
                                               const CtcBeamOptions& options) {
  // The beam: prefix -> scores (an ordered map keeps ties deterministic).
  std::map<std::vector<int32_t>, PrefixScore> beam = {{{}, PrefixScore{0.0, kNegInf}}};
  for (int64_t t = 0; t < frames; ++t) {
    const float* row = log_probs + t * vocab;
    std::map<std::vector<int32_t>, PrefixScore> next;
    for (const auto& [prefix, score] : beam) {
      const double total = score.total();
      for (int32_t c = 0; c < vocab; ++c) {
        const double p = row[c];
        if (p < options.prune || p == kNegInf) continue;
        if (c == blank) {
          if (total != kNegInf) {
            PrefixScore& s = next[prefix];
            s.blank = LogAdd(s.blank, total + p);
          }
          continue;
        }
        const bool repeat = !prefix.empty() && prefix.back() == c;
        // A repeated label extends only the alignments that end in blank; those ending in the
        // label itself stay on the same prefix (the label continues). Nothing is added from an
        // empty set of alignments (a prefix of probability 0 never enters the beam).
        const double from = repeat ? score.blank : total;
        if (from != kNegInf) {
          std::vector<int32_t> extended = prefix;
          extended.push_back(c);
          PrefixScore& e = next[extended];
          e.label = LogAdd(e.label, from + p);
        }
        if (repeat && score.label != kNegInf) {
          PrefixScore& s = next[prefix];
          s.label = LogAdd(s.label, score.label + p);
        }
      }
    }
    // Keep the `beam` best prefixes (ties: the map's order, deterministic).
    std::vector<std::pair<double, const std::vector<int32_t>*>> ranked;
    for (const auto& [prefix, score] : next) ranked.push_back({score.total(), &prefix});
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::map<std::vector<int32_t>, PrefixScore> kept;
    for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(std::max(options.beam, 1)); ++i) {
      kept.emplace(*ranked[i].second, next[*ranked[i].second]);
    }
    beam = std::move(kept);
  }
  std::vector<CtcHypothesis> out;
  for (const auto& [prefix, score] : beam) out.push_back({prefix, score.total()});
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.log_prob > b.log_prob; });
  if (out.size() > static_cast<size_t>(std::max(options.nbest, 1))) out.resize(std::max(options.nbest, 1));
  return out;
}

void LogSoftmaxRows(const float* logits, float* out, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * vocab;
    const float m = *std::max_element(z, z + vocab);
    double sum = 0;
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp(static_cast<double>(z[c]) - m);
    const float lse = m + static_cast<float>(std::log(sum));
    for (int64_t c = 0; c < vocab; ++c) out[r * vocab + c] = z[c] - lse;
  }
}

}  // namespace sf::speech
