// What the training loop, checkpoints, data parallelism, the bench and the search need of a
// sequence-to-sequence model, whatever its architecture family (Transformer, LSTM): one
// interface, so every entry point (sf-trainer train / translate / bench, cluster trials,
// sf-serve) runs any family the same way. Model construction from a configuration is
// model_spec.h's; the beam search over a model is generator.h's.
//
// The contract every family keeps:
//   - parameters live in one ParamStore (fp32 master values and grads, flat, in store order),
//     named as fairseq's state_dict keys of the same architecture (docs/models.md);
//   - Forward(batch) computes the label-smoothed cross-entropy summed over non-pad targets;
//     Backward(grad_scale) ACCUMULATES gradients of grad_scale * that sum until ZeroGrads();
//   - after any change of the weights (optimizer step, load) WeightsUpdated() refreshes the
//     low-precision mirror the GEMMs read;
//   - dropout draws from Context::Key(site) (seed, micro-batch, site), so a step is a function
//     of (weights, batch, seed, micro-batch counter) and a resumed run repeats it bit for bit;
//   - the grads-final hook is called during Backward with decreasing store offsets, ending with
//     0 (a family may report only 0: data parallelism then reduces every bucket after backward).
// Not thread-safe (one training loop).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "common/status.h"
#include "trainer/kernels/backend.h"
#include "trainer/nn/context.h"
#include "trainer/nn/param_store.h"
#include "trainer/optim/param.h"

namespace sf {

// One micro-batch, in host memory (Forward stages it into the backend's memory). Rows are
// right-padded with pad_id; tgt_in is the target shifted right (starting with BOS / EOS as
// fairseq does), tgt_out the tokens to predict.
struct Seq2SeqBatch {
  const int32_t* src = nullptr;      // [B, Ts]
  const int32_t* tgt_in = nullptr;   // [B, Tt]
  const int32_t* tgt_out = nullptr;  // [B, Tt]
  int64_t batch = 0, src_len = 0, tgt_len = 0;
};

// The sizes the data, the search and the checkpoints need of any model.
struct ModelShape {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int32_t pad_id = 1;
  int64_t max_positions = 1024;  // longest sequence (EOS included) the model takes, + 1
};

template <typename T>
class Seq2SeqModel {
 public:
  virtual ~Seq2SeqModel() = default;

  // The architecture family: "transformer" or "lstm" (the weights' __metadata__ "arch").
  virtual const char* family() const = 0;
  virtual ModelShape shape() const = 0;
  // The architecture as the weights' __metadata__ strings (docs/model-format.md): enough to
  // rebuild the model (model_spec.h: ModelSpecFromMetadata).
  virtual std::map<std::string, std::string> Metadata() const = 0;
  // FLOPs of one training step (forward + backward) for a batch of this shape; for GFLOP/s.
  virtual double TrainingFlops(int64_t batch, int64_t src_len, int64_t tgt_len) const = 0;

  virtual Context<T>& context() = 0;
  virtual ParamStore<T>& params() = 0;

  // The family's fairseq-style initialisation from `seed` (then WeightsUpdated()).
  virtual void InitParameters(uint64_t seed) = 0;
  virtual void WeightsUpdated() = 0;
  void ZeroGrads() { params().ZeroGrads(); }

  // The loss summed over the batch's non-pad targets. Errors: tokens out of range, sequences
  // the model cannot take; nothing is left half-done for Backward.
  virtual Result<CrossEntropyStats> Forward(const Seq2SeqBatch& batch) = 0;
  // Accumulates gradients of grad_scale * loss. Must follow Forward (consumes its state).
  virtual void Backward(float grad_scale) = 0;
  // See the contract above.
  virtual void set_grads_final_hook(std::function<void(int64_t offset)> hook) = 0;

  // Optimizer view of every parameter (T = float only), in store order with stable names.
  std::vector<ParamRef> Parameters() {
    std::vector<ParamRef> out;
    if constexpr (std::is_same_v<T, float>) {
      ParamStore<T>& store = params();
      for (size_t i = 0; i < store.params().size(); ++i) {
        const ParamInfo& p = store.params()[i];
        out.push_back(ParamRef{p.name, store.value(static_cast<int>(i)), store.grad(static_cast<int>(i)),
                               static_cast<size_t>(p.numel), p.weight_decay});
      }
    }
    return out;
  }
};

}  // namespace sf
