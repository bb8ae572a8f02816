#include "trainer/decoding/fconv_generator.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "trainer/decoding/host_decoding.h"

namespace sf {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;

// An effective (weight-normalised) projection on the host: y = x wᵀ + b with w [out, in].
struct HostLinear {
  std::vector<float> w, b;
  int64_t in = 0, out = 0;
  void Apply(const float* x, int64_t rows, float* y) const { host::Linear(x, rows, in, w.data(), b.data(), out, y); }
};

// w = g v / ||v|| as the CPU backend computes it (the norm's sum in double, then fp32).
// `columns`: v is [k, in, out] (ConvTBC) and the result is transposed to [out, k·in].
HostLinear Load(ParamStore<float>& store, const std::string& name, bool conv) {
  const int vi = store.Find(name + ".weight_v"), gi = store.Find(name + ".weight_g"), bi = store.Find(name + ".bias");
  const std::vector<int64_t>& shape = store.params()[vi].shape;
  const float* v = store.host_value(vi);
  const float* g = store.host_value(gi);
  HostLinear l;
  l.out = conv ? shape[2] : shape[0];
  l.in = conv ? shape[0] * shape[1] : shape[1];
  l.w.resize(static_cast<size_t>(l.out * l.in));
  for (int64_t o = 0; o < l.out; ++o) {
    auto at = [&](int64_t j) { return conv ? j * l.out + o : o * l.in + j; };
    double ss = 0;
    for (int64_t j = 0; j < l.in; ++j) ss += static_cast<double>(v[at(j)]) * v[at(j)];
    const float k = g[o] / static_cast<float>(std::sqrt(ss));
    for (int64_t j = 0; j < l.in; ++j) l.w[static_cast<size_t>(o * l.in + j)] = k * v[at(j)];
  }
  const float* b = store.host_value(bi);
  l.b.assign(b, b + l.out);
  return l;
}

void Glu(const float* x, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = x + r * 2 * cols;
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = a[c] * (1.0f / (1.0f + std::exp(-a[cols + c])));
  }
}

// out = (y + r)·√½, as the model's residual add (residual + y, then the scale).
void ResidualScale(const float* y, const float* r, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = (r[i] + y[i]) * kSqrtHalf;
}

}  // namespace

struct FConvGenerator::Weights {
  struct Side {
    const float* table = nullptr;
    const float* positions = nullptr;
    HostLinear fc1;
    std::vector<HostLinear> proj, conv;  // proj[l].out == 0: none
    std::vector<int64_t> kernel, channels;
  };
  Side enc, dec;
  HostLinear enc_fc2, dec_fc2, fc3;  // fc3.out == 0: tied
  std::vector<HostLinear> in_proj, out_proj;
  std::vector<float> fc3_bias;
};

FConvGenerator::FConvGenerator(FConvModel<float>* model) : model_(model) {}
FConvGenerator::~FConvGenerator() = default;

Result<std::vector<Hypothesis>> FConvGenerator::Translate(const std::vector<std::vector<int32_t>>& sources,
                                                          const BeamOptions& options) {
  ParamStore<float>& store = model_->params();
  if (!store.host_accessible()) store.PullValues();  // searched on the host view
  const FConvConfig& c = model_->config();
  w_ = std::make_unique<Weights>();
  for (const char* prefix : {"encoder", "decoder"}) {
    const bool enc = std::string(prefix) == "encoder";
    Weights::Side& side = enc ? w_->enc : w_->dec;
    const std::string p = prefix;
    side.table = store.host_value(store.Find(p + ".embed_tokens.weight"));
    side.positions = store.host_value(store.Find(p + ".embed_positions.weight"));
    side.fc1 = Load(store, p + ".fc1", false);
    const auto& specs = enc ? c.encoder_convs : c.decoder_convs;
    for (size_t l = 0; l < specs.size(); ++l) {
      const std::string i = std::to_string(l);
      side.proj.push_back(store.Find(p + ".projections." + i + ".weight_v") >= 0 ? Load(store, p + ".projections." + i, false)
                                                                                   : HostLinear{});
      side.conv.push_back(Load(store, p + ".convolutions." + i, true));
      side.kernel.push_back(specs[l].kernel);
      side.channels.push_back(specs[l].channels);
    }
  }
  w_->enc_fc2 = Load(store, "encoder.fc2", false);
  w_->dec_fc2 = Load(store, "decoder.fc2", false);
  for (size_t l = 0; l < c.decoder_convs.size(); ++l) {
    const std::string a = "decoder.attention." + std::to_string(l);
    w_->in_proj.push_back(Load(store, a + ".in_projection", false));
    w_->out_proj.push_back(Load(store, a + ".out_projection", false));
  }
  if (c.share_input_output_embed) {
    const float* b = store.host_value(store.Find("decoder.fc3.bias"));
    w_->fc3_bias.assign(b, b + c.tgt_vocab);
  } else {
    w_->fc3 = Load(store, "decoder.fc3", false);
  }
  return SearchInBatches(sources, options, model_->shape(),
                         [&](const std::vector<const std::vector<int32_t>*>& batch, std::vector<Hypothesis>* hyps) {
                           return SearchBatch(batch, options, hyps);
                         });
}

Status FConvGenerator::SearchBatch(const std::vector<const std::vector<int32_t>*>& sources, const BeamOptions& opt,
                                   std::vector<Hypothesis>* out) {
  const FConvConfig& cfg = model_->config();
  const Weights& w = *w_;
  const int64_t S = static_cast<int64_t>(sources.size()), E = cfg.encoder_embed, De = cfg.decoder_embed;
  const int64_t V = cfg.tgt_vocab;
  const int32_t pad = cfg.pad_id;
  const int beam = opt.beam;

  // ---- encoder over the padded sources (each + EOS, right-padded): keys a and values b.
  int64_t Ts = 1;
  for (const auto* s : sources) Ts = std::max<int64_t>(Ts, static_cast<int64_t>(s->size()) + 1);
  const int64_t R = S * Ts;
  std::vector<uint8_t> src_pad(static_cast<size_t>(R), 1);
  std::vector<float> sqrt_len(static_cast<size_t>(S)), emb(static_cast<size_t>(R * E));
  std::vector<int64_t> max_len(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    const auto& x = *sources[s];
    const int64_t n = static_cast<int64_t>(x.size());
    for (int64_t t = 0; t <= n; ++t) {
      src_pad[s * Ts + t] = 0;
      const int32_t tok = t < n ? x[t] : kEosToken;
      const float* e = w.enc.table + static_cast<int64_t>(tok) * E;
      const float* pe = w.enc.positions + (pad + 1 + t) * E;
      float* er = emb.data() + (s * Ts + t) * E;
      for (int64_t c = 0; c < E; ++c) er[c] = e[c] + pe[c];
    }
    sqrt_len[s] = static_cast<float>(std::sqrt(static_cast<double>(n + 1)));
    max_len[s] = MaxTargetLength(opt, n, cfg.max_positions);
  }
  std::vector<float> x(static_cast<size_t>(R * w.enc.fc1.out)), next, res, unfold, conv, glu;
  w.enc.fc1.Apply(emb.data(), R, x.data());
  for (size_t l = 0; l < w.enc.conv.size(); ++l) {
    const int64_t in = l == 0 ? w.enc.fc1.out : w.enc.channels[l - 1], C = w.enc.channels[l], k = w.enc.kernel[l];
    const float* residual = x.data();
    if (w.enc.proj[l].out) {
      res.resize(static_cast<size_t>(R * C));
      w.enc.proj[l].Apply(x.data(), R, res.data());
      residual = res.data();
    }
    unfold.assign(static_cast<size_t>(R * k * in), 0.0f);
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t t = 0; t < Ts; ++t) {
        for (int64_t j = 0; j < k; ++j) {
          const int64_t u = t + j - (k - 1) / 2;
          if (u < 0 || u >= Ts || src_pad[s * Ts + u]) continue;  // padding reads zeros
          std::copy_n(x.data() + (s * Ts + u) * in, in, unfold.data() + ((s * Ts + t) * k + j) * in);
        }
      }
    }
    conv.resize(static_cast<size_t>(R * 2 * C));
    w.enc.conv[l].Apply(unfold.data(), R, conv.data());
    glu.resize(static_cast<size_t>(R * C));
    Glu(conv.data(), R, C, glu.data());
    next.resize(static_cast<size_t>(R * C));
    ResidualScale(glu.data(), residual, R * C, next.data());
    x.swap(next);
  }
  std::vector<float> enc_a(static_cast<size_t>(R * E)), enc_b(static_cast<size_t>(R * E));
  w.enc_fc2.Apply(x.data(), R, enc_a.data());
  ResidualScale(enc_a.data(), emb.data(), R * E, enc_b.data());

  // ---- beam search: each layer's buffer holds a row's last k-1 convolution inputs.
  const size_t L = w.dec.conv.size();
  BeamSearch search(max_len, beam, opt.lenpen, kEosToken);
  std::vector<std::vector<float>> buffer(L);
  for (size_t l = 0; l < L; ++l) {
    const int64_t in = l == 0 ? w.dec.fc1.out : w.dec.channels[l - 1];
    buffer[l].assign(static_cast<size_t>(S * beam * (w.dec.kernel[l] - 1) * in), 0.0f);
  }
  std::vector<float> temb, q, ctx, att, h, logits, top_scores, eos_scores;
  std::vector<int32_t> top_tokens;
  std::vector<int64_t> parents, kept;
  for (int64_t t = 0; !search.done(); ++t) {
    const std::vector<int64_t>& active = search.active();
    const int64_t N = search.rows();
    temb.resize(static_cast<size_t>(N * De));
    for (int64_t r = 0; r < N; ++r) {
      const int32_t tok = search.history(r)[t];
      const float* e = w.dec.table + static_cast<int64_t>(tok) * De;
      const float* pe = w.dec.positions + (pad + 1 + t) * De;
      for (int64_t c = 0; c < De; ++c) temb[r * De + c] = e[c] + pe[c];
    }
    x.resize(static_cast<size_t>(N * w.dec.fc1.out));
    w.dec.fc1.Apply(temb.data(), N, x.data());
    for (size_t l = 0; l < L; ++l) {
      const int64_t in = l == 0 ? w.dec.fc1.out : w.dec.channels[l - 1], C = w.dec.channels[l], k = w.dec.kernel[l];
      const float* residual = x.data();
      if (w.dec.proj[l].out) {
        res.resize(static_cast<size_t>(N * C));
        w.dec.proj[l].Apply(x.data(), N, res.data());
        residual = res.data();
      }
      // The causal convolution at the new position: the buffered k-1 inputs, then this one.
      unfold.resize(static_cast<size_t>(N * k * in));
      std::vector<float>& buf = buffer[l];
      for (int64_t r = 0; r < N; ++r) {
        float* row = unfold.data() + r * k * in;
        float* past = buf.data() + r * (k - 1) * in;
        std::copy_n(past, (k - 1) * in, row);
        std::copy_n(x.data() + r * in, in, row + (k - 1) * in);
        if (k > 1) {
          std::copy(past + in, past + (k - 1) * in, past);
          std::copy_n(x.data() + r * in, in, past + (k - 2) * in);
        }
      }
      conv.resize(static_cast<size_t>(N * 2 * C));
      w.dec.conv[l].Apply(unfold.data(), N, conv.data());
      glu.resize(static_cast<size_t>(N * C));
      Glu(conv.data(), N, C, glu.data());
      // Attention over the row's sentence.
      q.resize(static_cast<size_t>(N * De));
      w.in_proj[l].Apply(glu.data(), N, q.data());
      ResidualScale(q.data(), temb.data(), N * De, q.data());
      ctx.resize(static_cast<size_t>(N * De));
#pragma omp parallel
      {
        std::vector<float> scores(static_cast<size_t>(Ts));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < N; ++r) {
          const int64_t s = active[r / beam];
          float* cr = ctx.data() + r * De;
          host::AttendRow(q.data() + r * De, enc_a.data() + s * Ts * E, enc_b.data() + s * Ts * E, E, Ts,
                          src_pad.data() + s * Ts, 1, De, 1.0f, cr, scores.data());
          for (int64_t c = 0; c < De; ++c) cr[c] *= sqrt_len[s];
        }
      }
      att.resize(static_cast<size_t>(N * C));
      w.out_proj[l].Apply(ctx.data(), N, att.data());
      ResidualScale(att.data(), glu.data(), N * C, att.data());
      next.resize(static_cast<size_t>(N * C));
      ResidualScale(att.data(), residual, N * C, next.data());
      x.swap(next);
    }
    const int64_t O = w.dec_fc2.out;
    h.resize(static_cast<size_t>(N * O));
    w.dec_fc2.Apply(x.data(), N, h.data());
    logits.resize(static_cast<size_t>(N * V));
    if (w.fc3.out) {
      w.fc3.Apply(h.data(), N, logits.data());
    } else {
      host::Linear(h.data(), N, O, w.dec.table, w.fc3_bias.data(), V, logits.data());
    }
    const int64_t kc = search.candidates_per_row();
    top_scores.resize(static_cast<size_t>(N * kc));
    top_tokens.resize(top_scores.size());
    eos_scores.resize(static_cast<size_t>(N));
    BeamScoresOnHost(logits.data(), search.cumulative().data(), SearchScoresArgs(N, V, kc, pad), top_scores.data(),
                     top_tokens.data(), eos_scores.data());
    search.Advance(V, top_scores.data(), top_tokens.data(), eos_scores.data(), &parents, &kept);
    for (size_t l = 0; l < L; ++l) {
      const int64_t in = l == 0 ? w.dec.fc1.out : w.dec.channels[l - 1], width = (w.dec.kernel[l] - 1) * in;
      if (width == 0) continue;
      std::vector<float> moved(parents.size() * static_cast<size_t>(width));
      for (size_t r = 0; r < parents.size(); ++r) {
        std::copy_n(buffer[l].data() + parents[r] * width, width, moved.data() + static_cast<int64_t>(r) * width);
      }
      buffer[l].swap(moved);
    }
  }
  out->assign(static_cast<size_t>(S), Hypothesis{});
  for (int64_t s = 0; s < S; ++s) {
    if (!sources[s]->empty()) (*out)[s] = search.Best(s);  // an empty source translates to nothing
  }
  return Status::Ok();
}

}  // namespace sf
