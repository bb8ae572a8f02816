#include "trainer/run/validation_transcripts.h"

#include <algorithm>

#include "common/utf8.h"
#include "trainer/core/dtype.h"

namespace sf {

std::string TranscriptText(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8SequenceAt(text, i);
    const std::string_view piece = n ? text.substr(i, n) : std::string_view("\xef\xbf\xbd");
    i += n ? n : 1;
    if (piece == std::string_view("\0", 1)) continue;
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
  }
  return out;
}

Value ValidationTranscriptsValue(const std::vector<TranscriptSample>& sample) {
  Value::List utterances;
  for (const TranscriptSample& s : sample) {
    utterances.push_back(Value(Value::Map{{"id", s.id},
                                          {"reference", s.reference},
                                          {"hypothesis", s.hypothesis},
                                          {"word_errors", s.word_errors},
                                          {"words", s.words}}));
  }
  return Value(Value::Map{{"utterances", Value(std::move(utterances))}});
}

Status GatherSampleHypotheses(dist::Communicator& comm, const std::vector<bool>& decoded,
                              std::vector<std::string>* hypotheses) {
  // One slot per utterance: [length + 1, or 0 where this rank did not decode it][its bytes]. Each
  // utterance is decoded by one rank and the other ranks' slots are zeros, so the element-wise
  // max is the decoding rank's slot.
  constexpr size_t kSlot = kTranscriptMaxBytes + 1;
  const size_t n = decoded.size();
  hypotheses->resize(n);
  std::vector<int32_t> slots(n * kSlot, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!decoded[i]) continue;
    const std::string& h = (*hypotheses)[i];
    const size_t len = std::min(h.size(), kTranscriptMaxBytes);
    slots[i * kSlot] = static_cast<int32_t>(len + 1);
    for (size_t k = 0; k < len; ++k) slots[i * kSlot + 1 + k] = static_cast<unsigned char>(h[k]);
  }
  SF_RETURN_IF_ERROR(comm.Allreduce(slots.data(), static_cast<int64_t>(slots.size()), DType::kI32,
                                    dist::ReduceOp::kMax)
                         .WithContext("validation transcripts"));
  for (size_t i = 0; i < n; ++i) {
    const int32_t len = slots[i * kSlot] - 1;
    std::string& h = (*hypotheses)[i];
    h.clear();
    for (int32_t k = 0; k < len; ++k)
      h.push_back(static_cast<char>(slots[i * kSlot + 1 + static_cast<size_t>(k)]));
  }
  return Status::Ok();
}

}  // namespace sf
