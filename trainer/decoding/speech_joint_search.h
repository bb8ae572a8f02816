// Joint CTC/attention beam search for a speech model with a decoder (speech_ctc.h, decoder_layers
// > 0): Watanabe et al. 2017's one-pass decoding, as ESPnet's beam search with the CTC prefix
// scorer at full scoring. Label-synchronous: each step the decoder extends every hypothesis of
// an utterance by every symbol and <eos>, scored
//   score(g + c) = score(g) + (1 − λ) · log p_att(c | g) + λ · (psi(g + c) − psi(g))
// with psi the CTC prefix score (ctc_prefix_score.h; for <eos>, the log-probability that the
// CTC output is exactly g) and λ = ctc_weight. Of all an utterance's extensions the `beam` best
// are kept; those ending in <eos> are finished. Scores never increase along a hypothesis, so an
// utterance stops once its best finished hypothesis scores at least its best running one (the
// result is then the search's exact best), or when none runs; at the encoder's frame count (no
// CTC output is longer) only <eos> is considered. The result is the best finished hypothesis by
// score (no length normalisation, as ESPnet's default). Beam 1 is greedy joint decoding.
//
// Where it runs: on the host, after model.Forward (evaluation mode) of a batch: the encoder
// output and the decoder's fp32 weights are copied from the backend's memory (any device), the
// decoder runs incrementally with cached keys and values (host_decoding.h, OpenMP across a
// step's rows). Not thread-safe; the model must not train meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/models/speech_ctc.h"

namespace sf {

struct JointSearchOptions {
  int beam = 4;
  float ctc_weight = 0.3f;  // λ above, in [0, 1]
};

struct JointHypothesis {
  std::vector<int32_t> labels;  // without <sos>/<eos>
  double score = 0;
};

// The best hypothesis of each utterance of the batch the model last ran Forward on;
// ctc_log_probs [batch, model.frames(), vocab] are the log-softmax of model.logits() on the host.
// Errors: a model without a decoder, a beam < 1, a weight outside [0, 1].
Result<std::vector<JointHypothesis>> JointBeamSearch(SpeechCtcModel<float>& model, const float* ctc_log_probs,
                                                     const JointSearchOptions& options);

}  // namespace sf
