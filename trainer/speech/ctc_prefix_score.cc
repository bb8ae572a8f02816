#include "trainer/speech/ctc_prefix_score.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sf::speech {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline float LogAdd(float a, float b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const float hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log1p(std::exp(lo - hi));
}

}  // namespace

CtcPrefixScorer::CtcPrefixScorer(const float* log_probs, int64_t frames, int64_t vocab, int32_t blank)
    : x_(log_probs), frames_(frames), vocab_(vocab), blank_(blank) {}

CtcPrefixState CtcPrefixScorer::Initial() const {
  CtcPrefixState s;
  s.r_n.assign(static_cast<size_t>(frames_), kNegInf);
  s.r_b.resize(static_cast<size_t>(frames_));
  float acc = 0;
  for (int64_t t = 0; t < frames_; ++t) {
    acc += x_[t * vocab_ + blank_];
    s.r_b[t] = acc;
  }
  s.psi = 0;
  s.last = -1;
  return s;
}

void CtcPrefixScorer::Extend(const CtcPrefixState& g, int32_t c, CtcPrefixState* out) const {
  const int64_t T = frames_;
  out->r_n.resize(static_cast<size_t>(T));
  out->r_b.resize(static_cast<size_t>(T));
  out->last = c;
  if (T == 0) {
    out->psi = kNegInf;
    return;
  }
  float* rn = out->r_n.data();
  float* rb = out->r_b.data();
  rn[0] = g.last < 0 ? x_[c] : kNegInf;
  rb[0] = kNegInf;
  float psi = rn[0];
  for (int64_t t = 1; t < T; ++t) {
    const float phi = c == g.last ? g.r_b[t - 1] : LogAdd(g.r_n[t - 1], g.r_b[t - 1]);
    const float xc = x_[t * vocab_ + c];
    rn[t] = LogAdd(rn[t - 1], phi) + xc;
    rb[t] = LogAdd(rn[t - 1], rb[t - 1]) + x_[t * vocab_ + blank_];
    psi = LogAdd(psi, phi + xc);
  }
  out->psi = psi;
}

float CtcPrefixScorer::Final(const CtcPrefixState& g) const {
  if (frames_ == 0) return g.last < 0 ? 0.0f : kNegInf;
  return LogAdd(g.r_n[frames_ - 1], g.r_b[frames_ - 1]);
}

}  // namespace sf::speech
