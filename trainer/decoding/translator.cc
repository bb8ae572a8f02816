#include "trainer/decoding/translator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "trainer/decoding/device_decoder.h"
#include "trainer/decoding/host_decoding.h"

namespace sf {
using host::AddInPlace;
using host::AttendRow;
using host::FeedForwardBlock;
using host::Linear;
using host::RowLayerNorm;

Translator::Translator(Transformer<float>* model)
    : model_(model),
      pe_(SinusoidalPositions<float>(model->config().max_positions, model->config().d_model,
                                     model->config().pad_id)) {}

Translator::~Translator() = default;

const float* Translator::W(const std::string& name) const {
  auto& store = model_->params();
  int id = store.Find(name);
  return id < 0 ? nullptr : store.host_value(id);
}

// The state of one working batch: encoder output and per-layer caches.
struct Translator::Batch {
  int64_t sentences = 0, src_len = 0;
  std::vector<uint8_t> src_pad;                   // [S, Ts]
  std::vector<std::vector<float>> cross_k, cross_v;  // per layer [S, Ts, C]
  std::vector<std::vector<float>> self_k, self_v;    // per layer [rows, cap, C]
  int64_t cap = 0;
};

Result<std::vector<Hypothesis>> Translator::Translate(const std::vector<std::vector<int32_t>>& sources,
                                                      const BeamOptions& options) {
  if (!model_->params().host_accessible() && !device_) device_ = std::make_unique<DeviceDecoder>(model_);
  return SearchInBatches(sources, options, model_->shape(),
                         [&](const std::vector<const std::vector<int32_t>*>& batch, std::vector<Hypothesis>* hyps) {
                           return device_ ? device_->TranslateBatch(batch, options, hyps)
                                          : TranslateBatch(batch, options, hyps);
                         });
}

Status Translator::TranslateBatch(const std::vector<const std::vector<int32_t>*>& sources,
                                  const BeamOptions& opt, std::vector<Hypothesis>* out) {
  const auto& cfg = model_->config();
  const int64_t C = cfg.d_model, H = cfg.heads, D = C / H, F = cfg.ffn_dim, V = cfg.tgt_vocab;
  const int32_t pad = cfg.pad_id, eos = kEosToken;
  const float emb_scale = static_cast<float>(std::sqrt(static_cast<double>(C)));
  const float att_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const bool pre = cfg.normalize_before;
  const int64_t S = static_cast<int64_t>(sources.size());
  const int beam = opt.beam;
  const float* enc_table = W("encoder.embed_tokens.weight");
  const float* dec_table = cfg.share_embeddings ? enc_table : W("decoder.embed_tokens.weight");
  const float* output_projection =
      cfg.share_decoder_input_output_embed ? dec_table : W("decoder.output_projection.weight");
  if (!enc_table || !dec_table || !output_projection) {
    return Internal("model has no embedding tables or output projection");
  }
  auto name = [](const char* side, int64_t i, const char* rest) {
    return std::string(side) + ".layers." + std::to_string(i) + "." + rest;
  };

  // ---- encoder over the padded sources (each + EOS, right-padded)
  Batch st;
  st.sentences = S;
  int64_t Ts = 1;
  for (const auto* s : sources) Ts = std::max<int64_t>(Ts, static_cast<int64_t>(s->size()) + 1);
  st.src_len = Ts;
  st.src_pad.assign(static_cast<size_t>(S * Ts), 1);
  std::vector<float> x(static_cast<size_t>(S * Ts * C)), h(x.size()), o(x.size()), ctx(x.size());
  std::vector<float> qkv(static_cast<size_t>(S * Ts * 3 * C)), f(static_cast<size_t>(S * Ts * F));
  for (int64_t s = 0; s < S; ++s) {
    const auto& src = *sources[s];
    for (int64_t t = 0; t < Ts; ++t) {
      float* xr = x.data() + (s * Ts + t) * C;
      if (t > static_cast<int64_t>(src.size())) {
        std::fill(xr, xr + C, 0.0f);
        continue;
      }
      st.src_pad[s * Ts + t] = 0;
      const int32_t tok = t < static_cast<int64_t>(src.size()) ? src[t] : eos;
      const float* e = enc_table + static_cast<int64_t>(tok) * C;
      const float* pe = pe_.data() + (pad + 1 + t) * C;
      for (int64_t c = 0; c < C; ++c) xr[c] = emb_scale * e[c] + pe[c];
    }
  }
  const int64_t R = S * Ts;
  for (int64_t l = 0; l < cfg.encoder_layers; ++l) {
    const float* ln1_g = W(name("encoder", l, "self_attn_layer_norm.weight"));
    const float* ln1_b = W(name("encoder", l, "self_attn_layer_norm.bias"));
    const float* ln2_g = W(name("encoder", l, "final_layer_norm.weight"));
    const float* ln2_b = W(name("encoder", l, "final_layer_norm.bias"));
    const float* src = x.data();
    if (pre) {
      RowLayerNorm(x.data(), ln1_g, ln1_b, h.data(), R, C);
      src = h.data();
    }
    Linear(src, R, C, W(name("encoder", l, "self_attn.in_proj_weight")), W(name("encoder", l, "self_attn.in_proj_bias")),
           3 * C, qkv.data());
#pragma omp parallel
    {
      std::vector<float> scores(static_cast<size_t>(Ts));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < R; ++r) {
        const int64_t s = r / Ts;
        const float* base = qkv.data() + s * Ts * 3 * C;
        AttendRow(qkv.data() + r * 3 * C, base + C, base + 2 * C, 3 * C, Ts, st.src_pad.data() + s * Ts, H, D,
                  att_scale, ctx.data() + r * C, scores.data());
      }
    }
    Linear(ctx.data(), R, C, W(name("encoder", l, "self_attn.out_proj.weight")), W(name("encoder", l, "self_attn.out_proj.bias")),
           C, o.data());
    AddInPlace(x.data(), o.data(), R * C);
    if (!pre) RowLayerNorm(x.data(), ln1_g, ln1_b, x.data(), R, C);
    FeedForwardBlock(x.data(), R, C, F, pre, ln2_g, ln2_b, W(name("encoder", l, "fc1.weight")),
                     W(name("encoder", l, "fc1.bias")), W(name("encoder", l, "fc2.weight")),
                     W(name("encoder", l, "fc2.bias")), cfg.activation, h.data(), f.data(), o.data());
  }
  if (pre) RowLayerNorm(x.data(), W("encoder.layer_norm.weight"), W("encoder.layer_norm.bias"), x.data(), R, C);

  // Cross-attention keys/values, once per sentence.
  const int64_t Ld = cfg.decoder_layers;
  st.cross_k.resize(Ld);
  st.cross_v.resize(Ld);
  std::vector<host::DecoderLayerWeights> layer(static_cast<size_t>(Ld));
  for (int64_t l = 0; l < Ld; ++l) {
    layer[l] = host::DecoderLayerWeightsAt([&](const std::string& n) { return W(n); },
                                           "decoder.layers." + std::to_string(l) + ".");
    st.cross_k[l].resize(static_cast<size_t>(R * C));
    st.cross_v[l].resize(static_cast<size_t>(R * C));
    host::CrossKeysValues(x.data(), R, C, layer[l], st.cross_k[l].data(), st.cross_v[l].data());
  }

  // ---- beam search
  std::vector<int64_t> max_len(S);
  int64_t longest = 0;
  for (int64_t s = 0; s < S; ++s) {
    max_len[s] = MaxTargetLength(opt, static_cast<int64_t>(sources[s]->size()), cfg.max_positions);
    longest = std::max(longest, max_len[s]);
  }
  st.cap = longest + 2;
  st.self_k.assign(Ld, {});
  st.self_v.assign(Ld, {});
  BeamSearch search(std::move(max_len), beam, opt.lenpen, eos);
  if (opt.cache) {
    for (int64_t l = 0; l < Ld; ++l) {
      st.self_k[l].assign(static_cast<size_t>(S * beam * st.cap * C), 0.0f);
      st.self_v[l].assign(static_cast<size_t>(S * beam * st.cap * C), 0.0f);
    }
  }
  std::vector<float> logits, top_scores, eos_scores;
  std::vector<int32_t> top_tokens;
  std::vector<int64_t> parents, kept;
  for (int64_t t = 0; !search.done(); ++t) {
    const std::vector<int64_t>& active = search.active();
    const int64_t N = search.rows();
    // Decoder over the new position(s): with the cache one token at position t; without it the
    // whole prefix from position 0.
    const int64_t start = opt.cache ? t : 0, Lq = opt.cache ? 1 : t + 1;
    if (!opt.cache) {
      for (int64_t l = 0; l < Ld; ++l) {
        st.self_k[l].assign(static_cast<size_t>(N * st.cap * C), 0.0f);
        st.self_v[l].assign(static_cast<size_t>(N * st.cap * C), 0.0f);
      }
    }
    const int64_t M = N * Lq;
    std::vector<int64_t> q_row(static_cast<size_t>(M)), q_pos(static_cast<size_t>(M));
    for (int64_t q = 0; q < M; ++q) {
      q_row[q] = q / Lq;
      q_pos[q] = start + q % Lq;
    }
    x.assign(static_cast<size_t>(M * C), 0.0f);
    h.resize(x.size());
    o.resize(x.size());
    ctx.resize(x.size());
    qkv.resize(static_cast<size_t>(M * 3 * C));
    f.resize(static_cast<size_t>(M * F));
    for (int64_t r = 0; r < N; ++r) {
      for (int64_t i = 0; i < Lq; ++i) {
        const int32_t tok = search.history(r)[start + i];
        const float* e = dec_table + static_cast<int64_t>(tok) * C;
        const float* pe = pe_.data() + (pad + 1 + start + i) * C;
        float* xr = x.data() + (r * Lq + i) * C;
        for (int64_t c = 0; c < C; ++c) xr[c] = emb_scale * e[c] + pe[c];
      }
    }
    std::vector<int64_t> memory(static_cast<size_t>(M));
    for (int64_t q = 0; q < M; ++q) memory[q] = active[(q / Lq) / beam];
    for (int64_t l = 0; l < Ld; ++l) {
      host::DecoderLayerStep(x.data(), M, q_row.data(), q_pos.data(), st.self_k[l].data(), st.self_v[l].data(), st.cap,
                             st.cross_k[l].data(), st.cross_v[l].data(), memory.data(), Ts, st.src_pad.data(), C, H, F,
                             pre, cfg.activation, layer[l], h.data(), qkv.data(), ctx.data(), o.data(), f.data());
    }
    // The newest position of each row -> logits.
    std::vector<float> last(static_cast<size_t>(N * C));
    for (int64_t r = 0; r < N; ++r) {
      std::copy_n(x.data() + (r * Lq + Lq - 1) * C, C, last.data() + r * C);
    }
    if (pre) RowLayerNorm(last.data(), W("decoder.layer_norm.weight"), W("decoder.layer_norm.bias"), last.data(), N, C);
    logits.resize(static_cast<size_t>(N * V));
    Linear(last.data(), N, C, output_projection, nullptr, V, logits.data());
    // Each row's best continuations, then the choice of the next beams.
    const int64_t k = search.candidates_per_row();
    top_scores.resize(static_cast<size_t>(N * k));
    top_tokens.resize(top_scores.size());
    eos_scores.resize(static_cast<size_t>(N));
    BeamScoresOnHost(logits.data(), search.cumulative().data(), SearchScoresArgs(N, V, k, pad),
                     top_scores.data(), top_tokens.data(), eos_scores.data());
    search.Advance(V, top_scores.data(), top_tokens.data(), eos_scores.data(), &parents, &kept);
    // Reorder the caches by parent; finished sentences leave the batch.
    if (opt.cache && !parents.empty()) {
      const int64_t keep = (t + 1) * C;
      for (int64_t l = 0; l < Ld; ++l) {
        for (auto* cache : {&st.self_k[l], &st.self_v[l]}) {
          std::vector<float> moved(static_cast<size_t>(parents.size() * st.cap * C));
          for (size_t r = 0; r < parents.size(); ++r) {
            std::copy_n(cache->data() + parents[r] * st.cap * C, keep, moved.data() + r * st.cap * C);
          }
          cache->swap(moved);
        }
      }
    }
  }
  out->assign(static_cast<size_t>(S), Hypothesis{});
  for (int64_t s = 0; s < S; ++s) {
    if (!sources[s]->empty()) (*out)[s] = search.Best(s);  // an empty source translates to nothing
  }
  return Status::Ok();
}

}  // namespace sf
