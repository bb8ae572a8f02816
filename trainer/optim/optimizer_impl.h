// Internal to trainer/optim: the factories the registry in optimizer.cc calls. Each optimizer
// lives in its own .cc (adamw.cc, radam.cc, sgd.cc).
#pragma once

#include <cstddef>
#include <memory>

#include "trainer/optim/optimizer.h"

namespace sf {

inline constexpr size_t kMaxOptimizerBuffers = 4;

namespace optim_internal {

std::unique_ptr<Optimizer> MakeAdamW(const OptimizerOptions& options);
std::unique_ptr<Optimizer> MakeRAdam(const OptimizerOptions& options);
std::unique_ptr<Optimizer> MakeSgd(const OptimizerOptions& options);

}  // namespace optim_internal
}  // namespace sf
