// The CTC prefix score of a label prefix (Watanabe et al. 2017, "Hybrid CTC/Attention
// Architecture for End-to-End Speech Recognition", Algorithm 2; ESPnet's CTCPrefixScore): the
// log-probability that a CTC model's output over an utterance's frames begins with the prefix,
// summed over every alignment — what lets a label-synchronous search (the attention decoder's)
// score its hypotheses with the frame-synchronous CTC branch.
//
// A prefix's state is two log-probabilities per frame t: that frames 0..t emit exactly the
// prefix with frame t in its last label (r_n) or in blank (r_b). Extending prefix g by label c:
//   r_n'(0) = x_0(c) when g is empty, else -inf;   r_b'(0) = -inf
//   phi(t)  = r_b(t) when c repeats g's last label (the two copies need a blank between them),
//             else logadd(r_n(t), r_b(t))
//   r_n'(t) = logadd(r_n'(t-1), phi(t-1)) + x_t(c);   r_b'(t) = logadd(r_n'(t-1), r_b'(t-1)) + x_t(blank)
//   psi(g+c) = logadd(r_n'(0), logadd over t >= 1 of phi(t-1) + x_t(c))
// and the probability that the whole output is exactly g (what <eos> scores) is
// logadd(r_n(T-1), r_b(T-1)). The empty prefix: r_n = -inf, r_b(t) = Σ_{k<=t} x_k(blank), psi 0.
//
// log_probs: [frames, vocab] log-softmax rows of one utterance. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace sf::speech {

struct CtcPrefixState {
  std::vector<float> r_n, r_b;  // [frames]
  float psi = 0;                // log-probability of the prefix (0 for the empty one)
  int32_t last = -1;            // the prefix's last label; -1 when empty
};

class CtcPrefixScorer {
 public:
  // Keeps the pointer: log_probs must outlive the scorer.
  CtcPrefixScorer(const float* log_probs, int64_t frames, int64_t vocab, int32_t blank);

  CtcPrefixState Initial() const;
  // The state of `prefix` extended by label c (not blank); out is resized.
  void Extend(const CtcPrefixState& prefix, int32_t c, CtcPrefixState* out) const;
  // log P(the output is exactly the prefix).
  float Final(const CtcPrefixState& prefix) const;

  int64_t frames() const { return frames_; }

 private:
  const float* x_;
  int64_t frames_, vocab_;
  int32_t blank_;
};

}  // namespace sf::speech
