#include "trainer/decoding/speech_joint_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "trainer/decoding/host_decoding.h"
#include "trainer/nn/embedding.h"
#include "trainer/speech/ctc_decoder.h"
#include "trainer/speech/ctc_prefix_score.h"

namespace sf {
namespace {

struct Hyp {
  std::vector<int32_t> labels;
  double score = 0;
  speech::CtcPrefixState ctc;
  int64_t row = 0;  // its decoder cache row in the last step
};

struct Candidate {
  double score = 0;
  int32_t symbol = 0;  // the decoder's symbol: a label, or <eos>
  int64_t row = 0;
};

struct Utterance {
  std::vector<Hyp> running;
  JointHypothesis best;
  bool finished_any = false;
  int64_t max_len = 0;  // labels it may emit: its encoder frames (capped by the positions)
};

// λ · (psi(extended) − psi(prefix)): nothing at λ = 0, −inf for an extension CTC cannot emit
// (never inf − inf).
double CtcTerm(double lambda, float psi, float prefix_psi) {
  if (lambda == 0.0) return 0.0;
  if (std::isinf(psi)) return -std::numeric_limits<double>::infinity();
  return lambda * (static_cast<double>(psi) - prefix_psi);
}

}  // namespace

Result<std::vector<JointHypothesis>> JointBeamSearch(SpeechCtcModel<float>& model, const float* ctc_log_probs,
                                                     const JointSearchOptions& o) {
  const SpeechCtcConfig& c = model.config();
  if (!c.has_decoder()) {
    return FailedPrecondition("joint CTC/attention search needs a model with a decoder (decoder_layers)");
  }
  if (o.beam < 1) return InvalidArgument("beam: must be >= 1");
  if (!(o.ctc_weight >= 0.0f && o.ctc_weight <= 1.0f)) return InvalidArgument("ctc_weight: must be in [0, 1]");
  const int64_t B = static_cast<int64_t>(model.lengths().size()), T = model.frames();
  const int64_t D = c.d_model, H = c.heads, F = c.ffn_dim, V = c.vocab, Vd = c.decoder_vocab(), L = c.decoder_layers;
  const int32_t eos = c.sos_eos();
  const bool pre = c.normalize_before;
  const double lambda = o.ctc_weight;
  Backend<float>& be = model.context().backend();
  be.Synchronize();

  // The decoder's fp32 weights and the encoder output, on the host.
  ParamStore<float>& store = model.params();
  std::map<std::string, std::vector<float>> weights;
  for (size_t i = 0; i < store.params().size(); ++i) {
    const ParamInfo& p = store.params()[i];
    if (p.name.rfind("decoder.", 0) != 0) continue;
    std::vector<float>& w = weights[p.name];
    w.resize(static_cast<size_t>(p.numel));
    be.CopyToHost(w.data(), store.value(static_cast<int>(i)), w.size() * sizeof(float));
  }
  auto find = [&](const std::string& name) -> const float* {
    auto it = weights.find(name);
    return it == weights.end() ? nullptr : it->second.data();
  };
  const float* table = find("decoder.embed_tokens.weight");
  std::vector<host::DecoderLayerWeights> layer(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    layer[l] = host::DecoderLayerWeightsAt(find, "decoder.layers." + std::to_string(l) + ".");
  }
  const float *norm_g = find("decoder.layer_norm.weight"), *norm_b = find("decoder.layer_norm.bias");
  if (!table || (pre && !norm_g)) return Internal("the model has no decoder weights");
  std::vector<float> enc(static_cast<size_t>(B * T * D));
  be.CopyToHost(enc.data(), model.encoder_out(), enc.size() * sizeof(float));
  std::vector<uint8_t> mem_pad(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) mem_pad[b * T + t] = t >= model.lengths()[b];
  }
  std::vector<std::vector<float>> cross_k(L), cross_v(L), self_k(L), self_v(L);
  for (int64_t l = 0; l < L; ++l) {
    cross_k[l].resize(enc.size());
    cross_v[l].resize(enc.size());
    host::CrossKeysValues(enc.data(), B * T, D, layer[l], cross_k[l].data(), cross_v[l].data());
  }
  const std::vector<float> pe = SinusoidalPositions<float>(c.max_positions, D, c.blank);
  const float emb_scale = static_cast<float>(std::sqrt(static_cast<double>(D)));

  std::vector<speech::CtcPrefixScorer> scorers;
  std::vector<Utterance> utts(static_cast<size_t>(B));
  int64_t cap = 1;
  for (int64_t b = 0; b < B; ++b) {
    scorers.emplace_back(ctc_log_probs + b * T * V, model.lengths()[b], V, c.blank);
    Utterance& u = utts[b];
    u.max_len = std::min<int64_t>(model.lengths()[b], c.max_positions - 1);
    cap = std::max(cap, u.max_len + 1);
    u.running.push_back(Hyp{{}, 0.0, scorers[b].Initial(), 0});
  }

  std::vector<float> x, h, qkv, ctx, out, f, logits;
  std::vector<Candidate> cands;
  std::vector<int64_t> counts;
  std::vector<int64_t> q_row, q_pos, memory, parents;
  std::vector<std::pair<int64_t, int64_t>> rows;  // (utterance, hypothesis)
  for (int64_t t = 0;; ++t) {
    rows.clear();
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t k = 0; k < static_cast<int64_t>(utts[b].running.size()); ++k) rows.emplace_back(b, k);
    }
    const int64_t N = static_cast<int64_t>(rows.size());
    if (N == 0) break;
    // The caches in this step's row order: row r continues its hypothesis's row of the last step.
    for (int64_t l = 0; l < L && t > 0; ++l) {
      for (std::vector<float>* cache : {&self_k[l], &self_v[l]}) {
        std::vector<float> moved(static_cast<size_t>(N * cap * D));
        for (int64_t r = 0; r < N; ++r) {
          const Hyp& hyp = utts[rows[r].first].running[rows[r].second];
          std::copy_n(cache->data() + hyp.row * cap * D, t * D, moved.data() + r * cap * D);
        }
        cache->swap(moved);
      }
    }
    if (t == 0) {
      for (int64_t l = 0; l < L; ++l) {
        self_k[l].assign(static_cast<size_t>(N * cap * D), 0.0f);
        self_v[l].assign(static_cast<size_t>(N * cap * D), 0.0f);
      }
    }
    x.resize(static_cast<size_t>(N * D));
    for (auto* s : {&h, &ctx, &out}) s->resize(x.size());
    qkv.resize(static_cast<size_t>(N * 3 * D));
    f.resize(static_cast<size_t>(N * F));
    q_row.resize(static_cast<size_t>(N));
    q_pos.assign(static_cast<size_t>(N), t);
    memory.resize(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) {
      Hyp& hyp = utts[rows[r].first].running[rows[r].second];
      hyp.row = r;
      q_row[r] = r;
      memory[r] = rows[r].first;
      const int32_t tok = hyp.labels.empty() ? eos : hyp.labels.back();  // <sos> is <eos>'s symbol
      const float* e = table + static_cast<int64_t>(tok) * D;
      const float* p = pe.data() + (c.blank + 1 + t) * D;
      for (int64_t j = 0; j < D; ++j) x[r * D + j] = emb_scale * e[j] + p[j];
    }
    for (int64_t l = 0; l < L; ++l) {
      host::DecoderLayerStep(x.data(), N, q_row.data(), q_pos.data(), self_k[l].data(), self_v[l].data(), cap,
                             cross_k[l].data(), cross_v[l].data(), memory.data(), T, mem_pad.data(), D, H, F, pre,
                             c.activation, layer[l], h.data(), qkv.data(), ctx.data(), out.data(), f.data());
    }
    if (pre) host::RowLayerNorm(x.data(), norm_g, norm_b, x.data(), N, D);
    logits.resize(static_cast<size_t>(N * Vd));
    host::Linear(x.data(), N, D, table, nullptr, Vd, logits.data());
    speech::LogSoftmaxRows(logits.data(), logits.data(), N, Vd);

    // Every row's extensions: each label (not blank) while the utterance may grow, and <eos>:
    // row r's are cands[r * V, r * V + counts[r]). Only their scores are kept; the prefix states
    // of the few that go on are computed again below (the same arithmetic, the same numbers).
    cands.resize(static_cast<size_t>(N * V));
    counts.assign(static_cast<size_t>(N), 0);
#pragma omp parallel
    {
      speech::CtcPrefixState scratch;
#pragma omp for schedule(dynamic)
      for (int64_t r = 0; r < N; ++r) {
        const int64_t b = rows[r].first;
        const Hyp& hyp = utts[b].running[rows[r].second];
        const float* att = logits.data() + r * Vd;
        const speech::CtcPrefixScorer& scorer = scorers[b];
        Candidate* out_r = cands.data() + r * V;
        int64_t n = 0;
        if (t < utts[b].max_len) {
          for (int32_t s = 0; s < V; ++s) {
            if (s == c.blank) continue;
            scorer.Extend(hyp.ctc, s, &scratch);
            out_r[n++] = {hyp.score + (1.0 - lambda) * att[s] + CtcTerm(lambda, scratch.psi, hyp.ctc.psi), s, r};
          }
        }
        out_r[n++] = {hyp.score + (1.0 - lambda) * att[eos] + CtcTerm(lambda, scorer.Final(hyp.ctc), hyp.ctc.psi),
                      eos, r};
        counts[r] = n;
      }
    }
    // Per utterance: the `beam` best extensions of all its hypotheses.
    int64_t r0 = 0;
    for (int64_t b = 0; b < B; ++b) {
      Utterance& u = utts[b];
      const int64_t n = static_cast<int64_t>(u.running.size());
      if (n == 0) continue;
      std::vector<Candidate*> all;
      for (int64_t r = r0; r < r0 + n; ++r) {
        for (int64_t k = 0; k < counts[r]; ++k) all.push_back(&cands[r * V + k]);
      }
      const size_t keep = std::min(all.size(), static_cast<size_t>(o.beam));
      std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                        [](const Candidate* a, const Candidate* b2) {
                          if (a->score != b2->score) return a->score > b2->score;
                          if (a->row != b2->row) return a->row < b2->row;
                          return a->symbol < b2->symbol;
                        });
      std::vector<Hyp> next;
      for (size_t k = 0; k < keep; ++k) {
        Candidate& cand = *all[k];
        const Hyp& parent = u.running[cand.row - r0];
        if (cand.symbol == eos) {
          if (!u.finished_any || cand.score > u.best.score) {
            u.best = JointHypothesis{parent.labels, cand.score};
            u.finished_any = true;
          }
          continue;
        }
        Hyp child;
        child.labels = parent.labels;
        child.labels.push_back(cand.symbol);
        child.score = cand.score;
        scorers[b].Extend(parent.ctc, cand.symbol, &child.ctc);
        child.row = parent.row;
        next.push_back(std::move(child));
      }
      r0 += n;
      // Scores only fall as hypotheses grow: once the best finished one is at least as good as
      // every running one, nothing better can come.
      double best_running = -std::numeric_limits<double>::infinity();
      for (const Hyp& hyp : next) best_running = std::max(best_running, hyp.score);
      if (u.finished_any && u.best.score >= best_running) next.clear();
      u.running = std::move(next);
    }
  }
  std::vector<JointHypothesis> result(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) result[b] = std::move(utts[b].best);
  return result;
}

}  // namespace sf
