// The decoder-independent half of beam search: fairseq's SequenceGenerator bookkeeping, driven
// the same way whether the decoder runs on the host (Translator) or on the model's device
// (DeviceDecoder).
//
// Working rows are the active sentences times `beam`, sentence-major: rows a*beam .. a*beam +
// beam - 1 belong to active sentence a. Each step the decoder scores every row
// (Backend::BeamScores: the row's best 2*beam continuations by cumulative log-probability, and
// its EOS score), and Advance() picks, per sentence, from the 2*beam best continuations over
// all its beams (score descending; equal scores: lower beam, then lower token): an EOS among the
// first `beam` of them finishes a hypothesis scored  sum log p / (length ^ lenpen)  (length
// counts the EOS); the best non-EOS continuations form the next beams. A sentence stops when it
// has `beam` finished hypotheses or no continuation, and leaves the working rows. At a
// sentence's length limit only EOS is considered. At the first step every beam of a sentence is
// the same, so only beam 0 is read.
//
// Ranking each row's own top 2*beam first does not change the result: a continuation among a
// sentence's best 2*beam is among its row's best 2*beam, since the order within a row is the
// same order.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/core/tensor.h"
#include "trainer/kernels/backend.h"

namespace sf {

// fairseq's dictionary: <bos> = 0, <pad> = 1 (the model's pad_id), <eos> = 2.
inline constexpr int32_t kBosToken = 0;
inline constexpr int32_t kEosToken = 2;

struct BeamOptions {
  int beam = 5;
  float lenpen = 1.0f;
  float max_len_a = 0.0f;
  int64_t max_len_b = 200;
  // Host search only: false re-runs the decoder over the whole prefix at each step instead of
  // caching keys and values (the reference the tests compare against). Device search caches.
  bool cache = true;
  // The caller's sentences are sorted by length and cut into working batches of at most
  // max_sentences sentences and at most max_tokens source tokens counting padding (0: no token
  // limit; a longer sentence still goes alone). Results do not depend on the batching.
  int64_t max_sentences = 64;
  int64_t max_tokens = 0;
};

// Tokens a source of `source_tokens` tokens may be translated into before EOS is forced:
// max_len_a * (source tokens + EOS) + max_len_b, capped by max_positions - 2, at least 1.
int64_t MaxTargetLength(const BeamOptions& options, int64_t source_tokens, int64_t max_positions);

// BeamScores' arguments for `rows` rows of a model whose padding token is `pad`: <pad> and
// <bos> are never generated, and k = 2 * beam continuations are kept per row.
inline BeamScoresArgs SearchScoresArgs(int64_t rows, int64_t vocab, int64_t k, int32_t pad) {
  BeamScoresArgs a;
  a.rows = rows;
  a.vocab = vocab;
  a.k = k;
  a.banned[0] = pad;
  a.banned[1] = kBosToken;
  a.eos = kEosToken;
  return a;
}

struct Hypothesis {
  std::vector<int32_t> tokens;  // without EOS
  float score = 0;              // length-normalised log-probability
};

class BeamSearch {
 public:
  // max_len[s]: the number of tokens sentence s may generate before EOS is forced.
  BeamSearch(std::vector<int64_t> max_len, int beam, float lenpen, int32_t eos);

  bool done() const { return active_.empty(); }
  int64_t step() const { return step_; }
  int beam() const { return beam_; }
  // Continuations BeamScores must return per row.
  int64_t candidates_per_row() const { return 2 * static_cast<int64_t>(beam_); }
  int64_t rows() const { return static_cast<int64_t>(active_.size()) * beam_; }
  // The sentence (index into the batch) of each group of `beam` rows.
  const std::vector<int64_t>& active() const { return active_; }
  // Row r's tokens: EOS (the decoder's first input), then the tokens chosen so far.
  const std::vector<int32_t>& history(int64_t r) const { return hist_[r]; }
  // Cumulative log-probability of each row (-inf for a beam with no continuation).
  const std::vector<float>& cumulative() const { return cum_; }

  // One step from the decoder's scores of the current rows: top_scores / top_tokens
  // [rows, candidates_per_row()] and eos_scores [rows], as Backend::BeamScores writes them with
  // cumulative() as base. Then `parents` holds, for each new row, the row it continues, and
  // `kept` the old group index of each sentence still searching (in the new order).
  void Advance(int64_t vocab, const float* top_scores, const int32_t* top_tokens,
               const float* eos_scores, std::vector<int64_t>* parents, std::vector<int64_t>* kept);

  // The best finished hypothesis of sentence s (empty with score 0 when it has none).
  Hypothesis Best(int64_t s) const;

 private:
  std::vector<int64_t> max_len_;
  int beam_;
  float lenpen_;
  int32_t eos_;
  int64_t step_ = 0;
  std::vector<int64_t> active_;
  std::vector<std::vector<int32_t>> hist_;
  std::vector<float> cum_;
  std::vector<std::vector<Hypothesis>> finals_;
};

// Copies `host` into `dev` (resized, in `backend`'s memory) and returns its data: the tokens,
// indices and masks a device decoder hands its ops each step.
template <typename Host>
const void* StageOnDevice(Backend<float>& backend, Tensor& dev, const std::vector<Host>& host, DType dtype) {
  dev.Resize({static_cast<int64_t>(host.size())}, dtype, backend.allocator());
  if (!host.empty()) backend.CopyToDevice(dev.raw(), host.data(), host.size() * sizeof(Host));
  return dev.raw();
}

// dst [rows, cols] (resized) = rows index[0..rows) of src: a decoder state reordered by parent
// row. The backend's row gather, an embedding lookup with scale 1 (exact).
inline void GatherRowsInto(Backend<float>& backend, const int32_t* index, int64_t rows, int64_t cols,
                           const float* src, Tensor& dst) {
  dst.Resize({rows, cols}, DType::kF32, backend.allocator());
  backend.EmbeddingForward(index, src, nullptr, nullptr, dst.data<float>(), rows, cols, 1.0f);
}

// One search step on a model whose logits live in the backend's memory (a device decoder):
// Backend::BeamScores of the current rows into one block there ([rows, k] scores, [rows, k]
// tokens, [rows] EOS scores), one copy to the host, then BeamSearch::Advance. Keeps its buffers
// across steps; one per decoder.
class DeviceBeamStep {
 public:
  // logits [search.rows(), vocab] in `backend`'s memory; pad: the model's padding token.
  void Advance(Backend<float>& backend, const float* logits, int64_t vocab, int32_t pad, BeamSearch& search,
               std::vector<int64_t>* parents, std::vector<int64_t>* kept);

 private:
  Tensor base_, result_;
  std::vector<uint8_t> host_;
};

}  // namespace sf
