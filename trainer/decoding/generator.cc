#include "trainer/decoding/generator.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "trainer/families/model_family.h"

namespace sf {

std::unique_ptr<Generator> MakeGenerator(Seq2SeqModel<float>* model) {
  // The model's family's search; none for a language model (lm_generator.h continues text).
  const ModelFamily* family = model ? FindModelFamily(model->family()) : nullptr;
  return family ? family->make_generator(model) : nullptr;
}

Result<std::vector<Hypothesis>> SearchInBatches(const std::vector<std::vector<int32_t>>& sources,
                                                const BeamOptions& options, const ModelShape& shape,
                                                const BatchSearch& search) {
  if (options.beam < 1) return InvalidArgument("beam_size must be >= 1");
  for (size_t i = 0; i < sources.size(); ++i) {
    if (static_cast<int64_t>(sources[i].size()) + 1 > shape.max_positions - 1) {
      return InvalidArgument("source " + std::to_string(i + 1) + " has " + std::to_string(sources[i].size()) +
                             " tokens; the model takes at most " + std::to_string(shape.max_positions - 2));
    }
    for (int32_t t : sources[i]) {
      if (t < 0 || t >= shape.src_vocab) {
        return InvalidArgument("source " + std::to_string(i + 1) + ": token " + std::to_string(t) +
                               " is outside the vocabulary of " + std::to_string(shape.src_vocab));
      }
    }
  }
  std::vector<Hypothesis> out(sources.size());
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  // Batches of consecutive sentences (by length): at most max_sentences of them, and at most
  // max_tokens source tokens counting padding (sentences x longest, EOS included).
  const size_t per_batch = static_cast<size_t>(std::max<int64_t>(1, options.max_sentences));
  for (size_t first = 0, last = 0; first < order.size(); first = last) {
    last = first + 1;
    while (last < order.size() && last - first < per_batch &&
           (options.max_tokens <= 0 ||
            static_cast<int64_t>(last - first + 1) * static_cast<int64_t>(sources[order[last]].size() + 1) <=
                options.max_tokens)) {
      ++last;
    }
    std::vector<const std::vector<int32_t>*> batch;
    for (size_t i = first; i < last; ++i) batch.push_back(&sources[order[i]]);
    std::vector<Hypothesis> hyps;
    SF_RETURN_IF_ERROR(search(batch, &hyps));
    for (size_t i = first; i < last; ++i) out[order[i]] = std::move(hyps[i - first]);
  }
  return out;
}

}  // namespace sf
