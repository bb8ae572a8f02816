// The tests' short training runs: `steps` steps of `step` on batches from `next_batch(rng)`,
// the learning rate warming up linearly to `peak_lr` over 30 steps; returns the loss per
// target token over the last 10 steps (every step must succeed).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "tests/trainer/seq2seq_batches.h"
#include "trainer/run/train_step.h"

namespace sf {

template <typename NextBatch>
double TrainTailLossPerToken(TrainStep& step, int steps, float peak_lr, std::mt19937& rng,
                             NextBatch&& next_batch) {
  double tail = 0;
  int64_t tail_tokens = 0;
  for (int s = 0; s < steps; ++s) {
    HostBatch hb = next_batch(rng);
    Seq2SeqBatch v = hb.view();
    const float lr = peak_lr * std::min(1.0f, (s + 1) / 30.0f);
    auto r = step.Run({&v, 1}, lr);
    EXPECT_TRUE(r.ok());
    if (r.ok() && s >= steps - 10) {
      tail += r->loss;
      tail_tokens += r->tokens;
    }
  }
  return tail / static_cast<double>(tail_tokens);
}

}  // namespace sf
