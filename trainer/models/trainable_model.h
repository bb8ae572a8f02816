// What a training step (trainer/run/train_step.h), checkpoints and data parallelism need of any
// model, whatever its batches hold: parameters in one ParamStore, the family's initialisation,
// the backward of the loss the family's Forward computed, and the grads-final hook. The
// families' Forward differs by what they read — token batches (Seq2SeqModel, seq2seq_model.h)
// or feature batches (the speech recogniser, speech_ctc.h) — so it is not here: a training
// step gets it as a callback.
//
// The contract every family keeps:
//   - parameters live in one ParamStore (fp32 master values and grads, flat, in store order),
//     named as the reference implementation's state_dict keys (docs/models.md, docs/speech.md);
//   - Backward(grad_scale) ACCUMULATES gradients of grad_scale * the last Forward's summed loss
//     until ZeroGrads();
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

#include "trainer/nn/context.h"
#include "trainer/nn/param_store.h"
#include "trainer/optim/param.h"

namespace sf {

template <typename T>
class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  // The architecture family: "transformer", "lstm", ... (the weights' __metadata__ "arch").
  virtual const char* family() const = 0;
  // The architecture as the weights' __metadata__ strings (docs/model-format.md): enough to
  // rebuild the model.
  virtual std::map<std::string, std::string> Metadata() const = 0;

  virtual Context<T>& context() = 0;
  virtual ParamStore<T>& params() = 0;

  // The family's initialisation from `seed` (then WeightsUpdated()).
  virtual void InitParameters(uint64_t seed) = 0;
  virtual void WeightsUpdated() = 0;
  void ZeroGrads() { params().ZeroGrads(); }

  // Accumulates gradients of grad_scale * the loss. Must follow Forward (consumes its state).
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
