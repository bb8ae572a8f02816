#include "trainer/decoding/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace sf {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

int64_t MaxTargetLength(const BeamOptions& options, int64_t source_tokens, int64_t max_positions) {
  const double limit = options.max_len_a * static_cast<double>(source_tokens + 1) +
                       static_cast<double>(options.max_len_b);
  return std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(limit), max_positions - 2));
}

BeamSearch::BeamSearch(std::vector<int64_t> max_len, int beam, float lenpen, int32_t eos)
    : max_len_(std::move(max_len)), beam_(beam), lenpen_(lenpen), eos_(eos) {
  const size_t sentences = max_len_.size();
  active_.resize(sentences);
  std::iota(active_.begin(), active_.end(), 0);
  hist_.assign(sentences * static_cast<size_t>(beam_), std::vector<int32_t>{eos_});
  cum_.assign(sentences * static_cast<size_t>(beam_), 0.0f);
  finals_.resize(sentences);
}

void BeamSearch::Advance(int64_t vocab, const float* top_scores, const int32_t* top_tokens,
                         const float* eos_scores, std::vector<int64_t>* parents,
                         std::vector<int64_t>* kept) {
  struct Cand {
    float score;
    int64_t flat;  // beam * vocab + token
  };
  auto better = [](const Cand& a, const Cand& b) {
    return a.score > b.score || (a.score == b.score && a.flat < b.flat);
  };
  const int64_t t = step_, k = candidates_per_row();
  const size_t want = static_cast<size_t>(2 * beam_);
  std::vector<int64_t> next_active;
  std::vector<int32_t> chosen;
  std::vector<float> next_cum;
  parents->clear();
  kept->clear();
  std::vector<Cand> top;
  for (int64_t a = 0; a < static_cast<int64_t>(active_.size()); ++a) {
    const int64_t s = active_[a];
    const bool at_limit = t >= max_len_[s];
    const int live_beams = t == 0 ? 1 : beam_;
    top.clear();
    for (int b = 0; b < live_beams; ++b) {
      const int64_t r = a * beam_ + b;
      if (at_limit) {
        if (eos_scores[r] != kNegInf) top.push_back(Cand{eos_scores[r], b * vocab + eos_});
        continue;
      }
      for (int64_t i = 0; i < k; ++i) {
        const int32_t v = top_tokens[r * k + i];
        if (v < 0) break;
        top.push_back(Cand{top_scores[r * k + i], b * vocab + v});
      }
    }
    std::sort(top.begin(), top.end(), better);
    if (top.size() > want) top.resize(want);
    std::vector<Cand> cont;
    for (size_t rank = 0; rank < top.size(); ++rank) {
      const Cand& c = top[rank];
      const int64_t b = c.flat / vocab;
      const int32_t v = static_cast<int32_t>(c.flat % vocab);
      if (v == eos_) {
        if (rank < static_cast<size_t>(beam_) && finals_[s].size() < static_cast<size_t>(beam_)) {
          const auto& h = hist_[a * beam_ + b];
          Hypothesis hyp;
          hyp.tokens.assign(h.begin() + 1, h.end());
          hyp.score = c.score / std::pow(static_cast<float>(t + 1), lenpen_);
          finals_[s].push_back(std::move(hyp));
        }
      } else if (cont.size() < static_cast<size_t>(beam_)) {
        cont.push_back(c);
      }
    }
    if (finals_[s].size() >= static_cast<size_t>(beam_) || cont.empty() || at_limit) continue;
    next_active.push_back(s);
    kept->push_back(a);
    for (int b = 0; b < beam_; ++b) {
      const Cand& c = cont[std::min<size_t>(b, cont.size() - 1)];
      parents->push_back(a * beam_ + c.flat / vocab);
      chosen.push_back(static_cast<int32_t>(c.flat % vocab));
      next_cum.push_back(static_cast<size_t>(b) < cont.size() ? c.score : kNegInf);
    }
  }
  std::vector<std::vector<int32_t>> next_hist(parents->size());
  for (size_t r = 0; r < parents->size(); ++r) {
    next_hist[r] = hist_[(*parents)[r]];
    next_hist[r].push_back(chosen[r]);
  }
  hist_.swap(next_hist);
  cum_.swap(next_cum);
  active_.swap(next_active);
  ++step_;
}

Hypothesis BeamSearch::Best(int64_t s) const {
  const Hypothesis* best = nullptr;
  for (const auto& hyp : finals_[s]) {
    if (!best || hyp.score > best->score) best = &hyp;
  }
  return best ? *best : Hypothesis{};
}

void DeviceBeamStep::Advance(Backend<float>& be, const float* logits, int64_t vocab, int32_t pad,
                             BeamSearch& search, std::vector<int64_t>* parents, std::vector<int64_t>* kept) {
  const int64_t N = search.rows(), k = search.candidates_per_row();
  const std::vector<float>& cumulative = search.cumulative();
  base_.Resize({static_cast<int64_t>(cumulative.size())}, DType::kF32, be.allocator());
  if (!cumulative.empty()) be.CopyToDevice(base_.raw(), cumulative.data(), cumulative.size() * sizeof(float));
  const size_t bytes = static_cast<size_t>(N * (2 * k + 1)) * sizeof(float);
  if (result_.empty() || static_cast<size_t>(result_.numel()) < bytes) {
    result_.Resize({static_cast<int64_t>(bytes)}, DType::kU8, be.allocator());
  }
  float* top_scores = reinterpret_cast<float*>(result_.data<uint8_t>());
  int32_t* top_tokens = reinterpret_cast<int32_t*>(top_scores + N * k);
  float* eos_scores = reinterpret_cast<float*>(top_tokens + N * k);
  be.BeamScores(logits, base_.data<float>(), SearchScoresArgs(N, vocab, k, pad), top_scores, top_tokens, eos_scores);
  host_.resize(bytes);
  be.CopyToHost(host_.data(), result_.raw(), bytes);
  const float* h_scores = reinterpret_cast<const float*>(host_.data());
  const int32_t* h_tokens = reinterpret_cast<const int32_t*>(h_scores + N * k);
  const float* h_eos = reinterpret_cast<const float*>(h_tokens + N * k);
  search.Advance(vocab, h_scores, h_tokens, h_eos, parents, kept);
}

}  // namespace sf
