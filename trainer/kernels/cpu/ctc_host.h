// The CTC loss of one utterance on the host (Backend::CtcLoss's semantics, backend.h): the
// log-space forward-backward of Graves et al. 2006 in double, shared by ReferenceBackend (one
// utterance after another) and CpuBackend (utterances in parallel). Its independent checks are
// PyTorch's F.ctc_loss and finite differences (tests/trainer/ctc_test.cc).
//
// With S = 2L + 1 states (blank, l1, blank, l2, ..., blank), alpha_t(s) is the log-probability of
// the alignments of the first t+1 frames that end in state s, beta_t(s) that of the alignments of
// frames t.. that start in s, both including frame t's emission; log p = logsumexp of the last
// two states' alpha at the last frame; the posterior of class c at frame t is
// Σ_{s: label(s) = c} exp(alpha_t(s) + beta_t(s) − lp_t(c) − log p).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace sf {

struct CtcWorkspace {
  std::vector<double> lp, alpha, beta, gamma;
};

inline double CtcLogAdd(double a, double b) {
  if (a == -std::numeric_limits<double>::infinity()) return b;
  if (b == -std::numeric_limits<double>::infinity()) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// Utterance b of a [frames, batch, classes] logits block: its loss (in double; the backends store
// it as fp32), and (dlogits not null) its rows of the gradient (zero past its input length). `row(t)` of logits / dlogits is
// (t * batch + b) * classes. dlogits may alias logits.
template <typename T>
double CtcLossOneUtterance(const T* logits, const int32_t* labels, int64_t input_length,
                          int64_t target_length, int64_t frames, int64_t batch, int64_t b,
                          int64_t classes, int32_t blank, bool zero_infinity, float grad_scale,
                          T* dlogits, CtcWorkspace& w) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const int64_t Tb = input_length, L = target_length, S = 2 * L + 1, C = classes;
  auto label = [&](int64_t s) { return s % 2 == 0 ? blank : labels[s / 2]; };
  // Log-softmax of the utterance's frames.
  w.lp.resize(Tb * C);
  for (int64_t t = 0; t < Tb; ++t) {
    const T* z = logits + (b * frames + t) * C;
    double m = kNegInf;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(z[c]));
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(z[c]) - m);
    const double lse = m + std::log(sum);
    for (int64_t c = 0; c < C; ++c) w.lp[t * C + c] = static_cast<double>(z[c]) - lse;
  }
  auto lp = [&](int64_t t, int64_t s) { return w.lp[t * C + label(s)]; };
  // A skip from s-2 to s (or s to s+2) is allowed into a label that differs from the one two
  // states back (blank in between).
  auto skip = [&](int64_t s) { return s >= 2 && s % 2 == 1 && label(s) != label(s - 2); };
  w.alpha.assign(Tb * S, kNegInf);
  w.beta.assign(Tb * S, kNegInf);
  double* alpha = w.alpha.data();
  double* beta = w.beta.data();
  alpha[0] = lp(0, 0);
  if (S > 1) alpha[1] = lp(0, 1);
  for (int64_t t = 1; t < Tb; ++t) {
    for (int64_t s = 0; s < S; ++s) {
      double a = alpha[(t - 1) * S + s];
      if (s >= 1) a = CtcLogAdd(a, alpha[(t - 1) * S + s - 1]);
      if (skip(s)) a = CtcLogAdd(a, alpha[(t - 1) * S + s - 2]);
      alpha[t * S + s] = a == kNegInf ? kNegInf : a + lp(t, s);
    }
  }
  beta[(Tb - 1) * S + S - 1] = lp(Tb - 1, S - 1);
  if (S > 1) beta[(Tb - 1) * S + S - 2] = lp(Tb - 1, S - 2);
  for (int64_t t = Tb - 2; t >= 0; --t) {
    for (int64_t s = 0; s < S; ++s) {
      double v = beta[(t + 1) * S + s];
      if (s + 1 < S) v = CtcLogAdd(v, beta[(t + 1) * S + s + 1]);
      if (s + 2 < S && skip(s + 2)) v = CtcLogAdd(v, beta[(t + 1) * S + s + 2]);
      beta[t * S + s] = v == kNegInf ? kNegInf : v + lp(t, s);
    }
  }
  double log_p = alpha[(Tb - 1) * S + S - 1];
  if (S > 1) log_p = CtcLogAdd(log_p, alpha[(Tb - 1) * S + S - 2]);
  const bool infinite = log_p == kNegInf;
  if (dlogits) {
    w.gamma.resize(C);
    for (int64_t t = 0; t < frames; ++t) {
      T* g = dlogits + (b * frames + t) * C;
      if (t >= Tb || (infinite && zero_infinity)) {
        std::fill(g, g + C, T(0));
        continue;
      }
      std::fill(w.gamma.begin(), w.gamma.end(), kNegInf);
      for (int64_t s = 0; s < S; ++s) {
        double& gc = w.gamma[label(s)];
        gc = CtcLogAdd(gc, alpha[t * S + s] + beta[t * S + s]);
      }
      for (int64_t c = 0; c < C; ++c) {
        const double l = w.lp[t * C + c];
        // An infinite loss: exp(-inf - l + inf) is NaN, as PyTorch's gradient there.
        const double posterior = infinite ? std::nan("") : std::exp(w.gamma[c] - l - log_p);
        g[c] = static_cast<T>(grad_scale * (std::exp(l) - posterior));
      }
    }
  }
  if (infinite) return zero_infinity ? 0.0 : std::numeric_limits<double>::infinity();
  return -log_p;
}

}  // namespace sf
