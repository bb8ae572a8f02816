#include "trainer/decoding/lm_generator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "trainer/decoding/generator.h"
#include "trainer/decoding/host_decoding.h"

namespace sf {

// Per layer keys and values [rows, cap, C].
struct LmGenerator::Cache {
  int64_t cap = 0;
  std::vector<std::vector<float>> k, v;

  void Reset(int64_t layers, int64_t rows, int64_t capacity, int64_t c) {
    cap = capacity;
    k.assign(static_cast<size_t>(layers), std::vector<float>(static_cast<size_t>(rows * cap * c)));
    v.assign(static_cast<size_t>(layers), std::vector<float>(static_cast<size_t>(rows * cap * c)));
  }
  // Row r of the new caches is row parents[r] of the old, positions [0, keep).
  void Reorder(const std::vector<int64_t>& parents, int64_t keep, int64_t c) {
    for (auto* layers : {&k, &v}) {
      for (auto& cache : *layers) {
        std::vector<float> moved(parents.size() * static_cast<size_t>(cap * c));
        for (size_t r = 0; r < parents.size(); ++r) {
          std::copy_n(cache.data() + parents[r] * cap * c, keep * c, moved.data() + static_cast<int64_t>(r) * cap * c);
        }
        cache.swap(moved);
      }
    }
  }
};

LmGenerator::LmGenerator(TransformerLm<float>* model)
    : model_(model),
      pe_(SinusoidalPositions<float>(model->config().max_positions, model->config().d_model, model->config().pad_id)) {}

const float* LmGenerator::W(const std::string& name) const {
  auto& store = model_->params();
  const int id = store.Find(name);
  return id < 0 ? nullptr : store.host_value(id);
}

int64_t LmGenerator::MaxNewTokens(const GenerateOptions& o, int64_t prompt_tokens) const {
  // Fed: EOS, the prompt, and every generated token but the last (EOS or the cut): at most
  // max_positions positions, as in training.
  const int64_t room = model_->config().max_positions - 1 - prompt_tokens;
  return std::max<int64_t>(1, std::min(o.max_new_tokens, room));
}

void LmGenerator::Run(Cache& cache, const std::vector<int32_t>& tok, const std::vector<int64_t>& row,
                      const std::vector<int64_t>& pos, const std::vector<int64_t>& last, std::vector<float>* logits) {
  const TransformerLmConfig& cfg = model_->config();
  const int64_t C = cfg.d_model, F = cfg.ffn_dim, V = cfg.vocab, M = static_cast<int64_t>(tok.size());
  const bool pre = cfg.normalize_before;
  const float emb_scale = static_cast<float>(std::sqrt(static_cast<double>(C)));
  const float* table = W("decoder.embed_tokens.weight");
  const float* output_projection = cfg.share_input_output_embed ? table : W("decoder.output_projection.weight");
  std::vector<float> &x = x_, &h = h_, &o = o_, &ctx = ctx_, &qkv = qkv_, &f = f_;
  for (auto* v : {&x, &h, &o, &ctx}) v->resize(static_cast<size_t>(M * C));
  qkv.resize(static_cast<size_t>(M * 3 * C));
  f.resize(static_cast<size_t>(M * F));
  for (int64_t q = 0; q < M; ++q) {
    const float* e = table + static_cast<int64_t>(tok[q]) * C;
    const float* pe = pe_.data() + (cfg.pad_id + 1 + pos[q]) * C;
    float* xr = x.data() + q * C;
    for (int64_t c = 0; c < C; ++c) xr[c] = emb_scale * e[c] + pe[c];
  }
  auto name = [](int64_t l, const char* rest) { return "decoder.layers." + std::to_string(l) + "." + rest; };
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const host::SelfAttentionWeights self_attn{
        W(name(l, "self_attn.in_proj_weight")),   W(name(l, "self_attn.in_proj_bias")),
        W(name(l, "self_attn.out_proj.weight")),  W(name(l, "self_attn.out_proj.bias")),
        W(name(l, "self_attn_layer_norm.weight")), W(name(l, "self_attn_layer_norm.bias"))};
    host::CachedSelfAttentionBlock(x.data(), M, row.data(), pos.data(), cache.k[l].data(), cache.v[l].data(),
                                   cache.cap, C, cfg.heads, pre, self_attn, h.data(), qkv.data(), ctx.data(),
                                   o.data());
    host::FeedForwardBlock(x.data(), M, C, F, pre, W(name(l, "final_layer_norm.weight")),
                           W(name(l, "final_layer_norm.bias")), W(name(l, "fc1.weight")), W(name(l, "fc1.bias")),
                           W(name(l, "fc2.weight")), W(name(l, "fc2.bias")), cfg.activation, h.data(), f.data(),
                           o.data());
  }
  const int64_t n = static_cast<int64_t>(last.size());
  std::vector<float>& final = final_;
  final.resize(static_cast<size_t>(n * C));
  for (int64_t i = 0; i < n; ++i) std::copy_n(x.data() + last[i] * C, C, final.data() + i * C);
  if (pre) {
    host::RowLayerNorm(final.data(), W("decoder.layer_norm.weight"), W("decoder.layer_norm.bias"), final.data(), n, C);
  }
  logits->resize(static_cast<size_t>(n * V));
  host::Linear(final.data(), n, C, output_projection, nullptr, V, logits->data());
}

Result<std::vector<Hypothesis>> LmGenerator::Generate(const std::vector<std::vector<int32_t>>& prompts,
                                                      const GenerateOptions& o) {
  if (o.max_new_tokens < 1) return InvalidArgument("max_new_tokens must be >= 1");
  if (o.sample && !(o.temperature > 0.0f && std::isfinite(o.temperature))) {
    return InvalidArgument("temperature must be > 0");
  }
  if (o.top_k < 0) return InvalidArgument("top_k must be >= 0");
  if (!model_->params().host_accessible()) model_->params().PullValues();  // searched on the host view
  BeamOptions batching;
  batching.beam = o.sample ? 1 : o.beam;
  batching.max_sentences = o.max_sentences;
  return SearchInBatches(prompts, batching, model_->shape(),
                         [&](const std::vector<const std::vector<int32_t>*>& batch, std::vector<Hypothesis>* out) {
                           if (!o.sample) return SearchBatch(batch, o, out);
                           std::vector<uint64_t> streams;  // the prompt's index in the caller's order
                           for (const auto* p : batch) streams.push_back(static_cast<uint64_t>(p - prompts.data()));
                           return SampleBatch(batch, streams, o, out);
                         });
}

Status LmGenerator::SearchBatch(const std::vector<const std::vector<int32_t>*>& prompts, const GenerateOptions& o,
                                std::vector<Hypothesis>* out) {
  const TransformerLmConfig& cfg = model_->config();
  const int64_t S = static_cast<int64_t>(prompts.size()), V = cfg.vocab, C = cfg.d_model;
  const int beam = o.beam;
  std::vector<int64_t> max_len(static_cast<size_t>(S));
  int64_t cap = 0, longest_prompt = 0;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t p = static_cast<int64_t>(prompts[s]->size());
    max_len[s] = MaxNewTokens(o, p);
    cap = std::max(cap, 1 + p + max_len[s]);
    longest_prompt = std::max(longest_prompt, p);
  }
  Cache cache;
  cache.Reset(cfg.layers, S * beam, cap, C);
  BeamSearch search(max_len, beam, o.lenpen, kEosToken);
  std::vector<int32_t> tok;
  std::vector<int64_t> row, pos, last, parents, kept;
  std::vector<float> logits, top_scores, eos_scores;
  std::vector<int32_t> top_tokens;
  for (int64_t t = 0; !search.done(); ++t) {
    const std::vector<int64_t>& active = search.active();
    const int64_t N = search.rows();
    tok.clear();
    row.clear();
    pos.clear();
    last.clear();
    for (int64_t r = 0; r < N; ++r) {
      const std::vector<int32_t>& prompt = *prompts[active[r / beam]];
      const int64_t P = static_cast<int64_t>(prompt.size());
      // The row's sequence: EOS, the prompt, the tokens chosen so far (history after its EOS).
      const std::vector<int32_t>& hist = search.history(r);
      auto token_at = [&](int64_t i) { return i == 0 ? kEosToken : i <= P ? prompt[i - 1] : hist[i - P]; };
      const int64_t end = P + 1 + t;  // positions fed after this step
      const int64_t from = (o.cache && t > 0) ? end - 1 : 0;
      for (int64_t i = from; i < end; ++i) {
        tok.push_back(token_at(i));
        row.push_back(r);
        pos.push_back(i);
      }
      last.push_back(static_cast<int64_t>(tok.size()) - 1);
    }
    Run(cache, tok, row, pos, last, &logits);
    const int64_t k = search.candidates_per_row();
    top_scores.resize(static_cast<size_t>(N * k));
    top_tokens.resize(top_scores.size());
    eos_scores.resize(static_cast<size_t>(N));
    BeamScoresOnHost(logits.data(), search.cumulative().data(), SearchScoresArgs(N, V, k, cfg.pad_id),
                     top_scores.data(), top_tokens.data(), eos_scores.data());
    if (t == 0) {  // no empty continuation (fairseq's min_len 1): EOS is not a first token
      for (size_t j = 0; j < top_tokens.size(); ++j) {
        if (top_tokens[j] == kEosToken) top_scores[j] = -std::numeric_limits<float>::infinity();
      }
    }
    search.Advance(V, top_scores.data(), top_tokens.data(), eos_scores.data(), &parents, &kept);
    if (o.cache && !parents.empty()) cache.Reorder(parents, std::min(cache.cap, longest_prompt + 1 + t), C);
  }
  out->assign(static_cast<size_t>(S), Hypothesis{});
  for (int64_t s = 0; s < S; ++s) (*out)[s] = search.Best(s);
  return Status::Ok();
}

Status LmGenerator::SampleBatch(const std::vector<const std::vector<int32_t>*>& prompts,
                                const std::vector<uint64_t>& streams, const GenerateOptions& o,
                                std::vector<Hypothesis>* out) {
  const TransformerLmConfig& cfg = model_->config();
  const int64_t S = static_cast<int64_t>(prompts.size()), V = cfg.vocab, C = cfg.d_model;
  std::vector<int64_t> max_len(static_cast<size_t>(S));
  std::vector<std::mt19937_64> rng;
  int64_t cap = 0;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t p = static_cast<int64_t>(prompts[s]->size());
    max_len[s] = MaxNewTokens(o, p);
    cap = std::max(cap, 1 + p + max_len[s]);
    std::seed_seq seq{static_cast<uint32_t>(o.seed), static_cast<uint32_t>(o.seed >> 32),
                      static_cast<uint32_t>(streams[s]), static_cast<uint32_t>(streams[s] >> 32)};
    rng.emplace_back(seq);
  }
  Cache cache;
  cache.Reset(cfg.layers, S, cap, C);
  out->assign(static_cast<size_t>(S), Hypothesis{});
  std::vector<double> logp_sum(static_cast<size_t>(S), 0.0);
  std::vector<int64_t> drawn(static_cast<size_t>(S), 0);
  std::vector<uint8_t> done(static_cast<size_t>(S), 0);
  std::vector<int32_t> tok;
  std::vector<int64_t> row, pos, last, rows_asked;
  std::vector<float> logits;
  std::vector<double> p(static_cast<size_t>(V));
  std::vector<int32_t> order(static_cast<size_t>(V));
  for (int64_t t = 0;; ++t) {
    tok.clear();
    row.clear();
    pos.clear();
    last.clear();
    rows_asked.clear();
    for (int64_t s = 0; s < S; ++s) {
      if (done[s]) continue;
      const std::vector<int32_t>& prompt = *prompts[s];
      const std::vector<int32_t>& gen = (*out)[s].tokens;
      const int64_t P = static_cast<int64_t>(prompt.size());
      auto token_at = [&](int64_t i) { return i == 0 ? kEosToken : i <= P ? prompt[i - 1] : gen[i - P - 1]; };
      const int64_t end = P + 1 + t;
      for (int64_t i = (o.cache && t > 0) ? end - 1 : 0; i < end; ++i) {
        tok.push_back(token_at(i));
        row.push_back(s);
        pos.push_back(i);
      }
      last.push_back(static_cast<int64_t>(tok.size()) - 1);
      rows_asked.push_back(s);
    }
    if (rows_asked.empty()) break;
    Run(cache, tok, row, pos, last, &logits);
    for (size_t i = 0; i < rows_asked.size(); ++i) {
      const int64_t s = rows_asked[i];
      const float* l = logits.data() + static_cast<int64_t>(i) * V;
      // Never <pad> or <bos>; no EOS first (no empty continuation, fairseq's min_len 1).
      auto allowed = [&](int32_t v) { return v != cfg.pad_id && v != kBosToken && (t > 0 || v != kEosToken); };
      // The model's log-probabilities (temperature 1, the whole vocabulary, as the training loss
      // and the beam search score) score what is drawn.
      double mx = -std::numeric_limits<double>::infinity();
      for (int32_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(l[v]));
      double z = 0;
      for (int32_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(l[v]) - mx);
      const double log_z = mx + std::log(z);
      // The sampling distribution: the top_k allowed tokens (ties: lower id first), at temperature.
      int64_t n = 0;
      for (int32_t v = 0; v < V; ++v) {
        if (allowed(v)) order[static_cast<size_t>(n++)] = v;
      }
      if (o.top_k > 0 && o.top_k < n) {
        auto better = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
        std::partial_sort(order.begin(), order.begin() + o.top_k, order.begin() + n, better);
        n = o.top_k;
      }
      double total = 0;
      for (int64_t j = 0; j < n; ++j) {
        p[static_cast<size_t>(j)] = std::exp((static_cast<double>(l[order[j]]) - mx) / o.temperature);
        total += p[static_cast<size_t>(j)];
      }
      const double u = std::uniform_real_distribution<double>(0.0, total)(rng[static_cast<size_t>(s)]);
      int64_t pick = n - 1;
      double acc = 0;
      for (int64_t j = 0; j < n; ++j) {
        acc += p[static_cast<size_t>(j)];
        if (u < acc) {
          pick = j;
          break;
        }
      }
      const int32_t token = order[static_cast<size_t>(pick)];
      logp_sum[s] += static_cast<double>(l[token]) - log_z;
      ++drawn[s];
      Hypothesis& h = (*out)[s];
      if (token == kEosToken) {
        done[s] = 1;
      } else {
        h.tokens.push_back(token);
        if (static_cast<int64_t>(h.tokens.size()) >= max_len[s]) done[s] = 1;
      }
      h.score = static_cast<float>(logp_sum[s] / static_cast<double>(drawn[s]));
    }
  }
  return Status::Ok();
}

}  // namespace sf
