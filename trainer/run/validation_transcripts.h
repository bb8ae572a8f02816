// Validation transcripts: a speech trial's fixed sample of validation utterances, each reference
// beside what the model transcribed at that validation, reported with every validation as the
// metric group "validation_transcripts" (the cluster: a ReportMetrics row of that kind; a
// standalone run: a metrics.jsonl record of that kind), so the dashboard shows the same
// utterances improving from one validation to the next (docs/speech.md).
//
// The group's values — this is the one declaration of their shape; the dashboard reads them in
// webui/src/lib/transcripts.ts:
//   {"utterances": [{"id": "utt-3", "reference": "A man ...", "hypothesis": "a man ...",
//                    "word_errors": 2, "words": 9}, ...]}
// - the first kTranscriptSampleSize utterances of the validation manifest, in manifest order (the
//   same ones every time); fewer when the split is smaller;
// - reference: the manifest's transcript as written; hypothesis: greedy decoding's output, as
//   the validation's WER and CER score it (SpeechRun::Validate);
// - word_errors and words: the utterance's word edits and reference words (error_rate.h's
//   normalisation), counted before any cut;
// - each text cut to at most kTranscriptMaxBytes bytes at a character boundary, so a row is at
//   most about 5 KB whatever the corpus.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/value.h"
#include "trainer/distributed/communicator.h"

namespace sf {

inline constexpr char kValidationTranscriptsGroup[] = "validation_transcripts";
inline constexpr int64_t kTranscriptSampleSize = 5;
inline constexpr size_t kTranscriptMaxBytes = 500;

struct TranscriptSample {
  std::string id;          // the manifest's utterance id
  std::string reference;   // as written, cut to kTranscriptMaxBytes
  std::string hypothesis;  // cut to kTranscriptMaxBytes
  int64_t word_errors = 0, words = 0;
};

// The longest prefix of `text` of at most `max_bytes` bytes that ends at a character boundary,
// with each invalid UTF-8 byte replaced by U+FFFD and NUL dropped (PostgreSQL's JSON refuses it).
std::string TranscriptText(std::string_view text, size_t max_bytes = kTranscriptMaxBytes);

// The group's values for `sample` (the shape above).
Value ValidationTranscriptsValue(const std::vector<TranscriptSample>& sample);

// Data parallel: each rank decoded part of the sample. `decoded[i]` says whether this rank's
// (*hypotheses)[i] holds utterance i's hypothesis (at most kTranscriptMaxBytes bytes, no NUL);
// afterwards every rank holds every decoded hypothesis. Every rank must call it with the same
// sample size: one allreduce (max) of sample size × (kTranscriptMaxBytes + 1) int32s; the
// communicator's error (kUnavailable, a broken communicator) when it fails.
Status GatherSampleHypotheses(dist::Communicator& comm, const std::vector<bool>& decoded,
                              std::vector<std::string>* hypotheses);

}  // namespace sf
