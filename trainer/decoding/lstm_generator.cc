#include "trainer/decoding/lstm_generator.h"

#include <algorithm>
#include <utility>

namespace sf {

Result<std::vector<Hypothesis>> LstmGenerator::Translate(const std::vector<std::vector<int32_t>>& sources,
                                                         const BeamOptions& options) {
  EvalScope<float> eval(model_->context());
  return SearchInBatches(sources, options, model_->shape(),
                         [&](const std::vector<const std::vector<int32_t>*>& batch, std::vector<Hypothesis>* hyps) {
                           return SearchBatch(batch, options, hyps);
                         });
}

Status LstmGenerator::SearchBatch(const std::vector<const std::vector<int32_t>*>& sources, const BeamOptions& opt,
                                  std::vector<Hypothesis>* out) {
  Backend<float>& be = model_->context().backend();
  const LstmConfig& cfg = model_->config();
  const int64_t S = static_cast<int64_t>(sources.size()), H = cfg.decoder_hidden, U = cfg.encoder_units();
  const int64_t V = cfg.tgt_vocab, L = cfg.decoder_layers;
  const int32_t pad = cfg.pad_id;
  const int beam = opt.beam;

  // The batch's sources, right-padded, each + EOS; encode once.
  int64_t Ts = 1;
  for (const auto* s : sources) Ts = std::max<int64_t>(Ts, static_cast<int64_t>(s->size()) + 1);
  std::vector<int32_t> src(static_cast<size_t>(S * Ts), pad);
  std::vector<uint8_t> src_pad(static_cast<size_t>(S * Ts), 1);
  std::vector<int64_t> max_len(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    const auto& x = *sources[s];
    const int64_t n = static_cast<int64_t>(x.size());
    std::copy(x.begin(), x.end(), src.begin() + s * Ts);
    src[s * Ts + n] = kEosToken;
    std::fill(src_pad.begin() + s * Ts, src_pad.begin() + s * Ts + n + 1, uint8_t{0});
    max_len[s] = MaxTargetLength(opt, n, cfg.max_positions);
  }
  SF_RETURN_IF_ERROR(model_->Encode(src.data(), S, Ts));

  BeamSearch search(max_len, beam, opt.lenpen, kEosToken);
  // Step 0's rows: sentence a's beams are rows a*beam ..; each reads its sentence's encoder
  // outputs ([Ts, S, U] -> [Ts, rows, U]), padding and initial states.
  const int64_t rows0 = S * beam;
  std::vector<int32_t> index(static_cast<size_t>(Ts * rows0));
  for (int64_t t = 0; t < Ts; ++t) {
    for (int64_t r = 0; r < rows0; ++r) index[t * rows0 + r] = static_cast<int32_t>(t * S + r / beam);
  }
  auto* idx = static_cast<const int32_t*>(StageOnDevice(be, index_, index, DType::kI32));
  GatherRowsInto(be, idx, Ts * rows0, U, model_->encoder_outputs(), enc_);
  std::vector<uint8_t> row_pad(static_cast<size_t>(rows0 * Ts));
  for (int64_t r = 0; r < rows0; ++r) {
    std::copy(src_pad.begin() + (r / beam) * Ts, src_pad.begin() + (r / beam + 1) * Ts, row_pad.begin() + r * Ts);
  }
  StageOnDevice(be, pad_, row_pad, DType::kU8);
  index.resize(static_cast<size_t>(rows0));
  for (int64_t r = 0; r < rows0; ++r) index[r] = static_cast<int32_t>(r / beam);
  idx = static_cast<const int32_t*>(StageOnDevice(be, index_, index, DType::kI32));
  h_.resize(static_cast<size_t>(L));
  c_.resize(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    GatherRowsInto(be, idx, rows0, H, model_->initial_h(static_cast<int>(i)), h_[i]);
    GatherRowsInto(be, idx, rows0, H, model_->initial_c(static_cast<int>(i)), c_[i]);
  }

  std::vector<int32_t> tokens;
  std::vector<int64_t> parents, kept;
  std::vector<const float*> hs(static_cast<size_t>(L)), cs(static_cast<size_t>(L));
  for (int64_t t = 0; !search.done(); ++t) {
    const int64_t N = search.rows(), A = static_cast<int64_t>(search.active().size());
    tokens.resize(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) tokens[r] = search.history(r)[t];
    auto* tok = static_cast<const int32_t*>(StageOnDevice(be, tokens_, tokens, DType::kI32));
    for (int64_t i = 0; i < L; ++i) {
      hs[i] = h_[i].data<float>();
      cs[i] = c_[i].data<float>();
    }
    model_->DecodeStep(tok, N, enc_.data<float>(), pad_.data<uint8_t>(), Ts, hs, cs,
                       t == 0 ? nullptr : feed_.data<float>());
    // Each row's best continuations, then the search's choice.
    step_.Advance(be, model_->logits(), V, pad, search, &parents, &kept);
    if (search.done()) break;

    // Each new row continues row parents[r]: its states and feed are that row's new ones.
    const int64_t N2 = static_cast<int64_t>(parents.size());
    index.assign(parents.begin(), parents.end());
    idx = static_cast<const int32_t*>(StageOnDevice(be, index_, index, DType::kI32));
    for (int64_t i = 0; i < L; ++i) {
      GatherRowsInto(be, idx, N2, H, model_->step_h(static_cast<int>(i)), h_[i]);
      GatherRowsInto(be, idx, N2, H, model_->step_c(static_cast<int>(i)), c_[i]);
    }
    GatherRowsInto(be, idx, N2, H, model_->step_feed(), feed_);
    // Finished sentences leave: the encoder rows and padding of the rows that remain.
    if (static_cast<int64_t>(kept.size()) < A) {
      index.resize(static_cast<size_t>(Ts * N2));
      for (int64_t tt = 0; tt < Ts; ++tt) {
        for (int64_t r = 0; r < N2; ++r) index[tt * N2 + r] = static_cast<int32_t>(tt * N + parents[r]);
      }
      idx = static_cast<const int32_t*>(StageOnDevice(be, index_, index, DType::kI32));
      GatherRowsInto(be, idx, Ts * N2, U, enc_.data<float>(), enc_spare_);
      std::swap(enc_, enc_spare_);
      row_pad.resize(static_cast<size_t>(N2 * Ts));
      for (int64_t r = 0; r < N2; ++r) {
        const int64_t s = search.active()[r / beam];
        std::copy(src_pad.begin() + s * Ts, src_pad.begin() + (s + 1) * Ts, row_pad.begin() + r * Ts);
      }
      StageOnDevice(be, pad_, row_pad, DType::kU8);
    }
  }
  out->assign(static_cast<size_t>(S), Hypothesis{});
  for (int64_t s = 0; s < S; ++s) {
    if (!sources[s]->empty()) (*out)[s] = search.Best(s);  // an empty source translates to nothing
  }
  return Status::Ok();
}

}  // namespace sf
