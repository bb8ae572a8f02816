// The features of a whole manifest, computed once and cached on disk.
//
//   FeatureCacheOptions cache{.cache_dir = experiment_cache_dir};
//   SF_ASSIGN_OR_RETURN(auto train, SpeechFeatures::Open("/data/train.tsv", front_end, cache));
//   const float* x = train->features(i);   // [train->frames(i), train->mels()], raw log-mel
//
// Open() reads the manifest (manifest.h), then looks in cache_dir for the file
//   speech-features-<SHA-256 hex>.bin
// whose hash covers: a format version string, the manifest file's bytes, the front-end options
// (FrontEndOptions::ToString(), resolved sizes included) and, for each utterance in order, the
// audio file's size and modification time (so an audio file rewritten in place is not served
// stale features; copying a corpus elsewhere changes the times and recomputes once).
// Found and valid: it is memory-mapped and used (from_cache() true) — no audio is read. Missing:
// every utterance's audio is read (audio.h) and its log-mel features computed (features.h),
// in parallel over utterances with OpenMP, streamed in manifest order into a temporary file in
// cache_dir that is fsynced and renamed into place (a crash never leaves a half-written cache
// file under the real name; concurrent ranks write identical files and the last rename wins),
// then mapped. Present but invalid (truncated, wrong magic/version/sizes, checksum mismatch): a
// warning names the file and the problem (rejected_cache()), and it is recomputed and replaced.
//
// The features are the front end's raw log-mel output; per-utterance CMVN and SpecAugment are
// applied when a batch is made (speech_batches.h), so the cache does not depend on them.
//
// Cache file layout (little-endian; sections 8-byte aligned):
//   offset 0   char    magic[8]      "SFLOGMEL"
//          8   uint32  version       1
//         12   uint32  mels          M
//         16   int64   utterances    N (manifest order)
//         24   int64   total_frames  F = Σ frames[i]
//         32   uint64  checksum      over features[] and frames[] (below)
//         40   uint8   reserved[24]  zero
//         64   int64   frames[N]     frames of utterance i (≥ 1)
//     64+8N    float32 features[F·M] utterance 0's [frames[0], M] rows, then utterance 1's, ...
//   The file is exactly 64 + 8N + 4FM bytes. checksum: h = 0xcbf29ce484222325, then for each
//   32-bit little-endian word w of features[], then of frames[],
//   h = (h ^ w) · 0x100000001b3 (mod 2^64) (FNV-1a on words). Reading checks all of it (so a
//   reuse reads the whole file once).
//
// Errors (the whole Open fails; a trial never silently skips an utterance): the manifest's
// (manifest.h); an audio problem as "MANIFEST:LINE: utterance ID: <audio.h's message>" keeping
// its code; an utterance shorter than one window (0 frames); cache_dir empty, not creatable or
// not writable (kInvalidArgument / kInternal naming it); invalid front-end options.
//
// A SpeechFeatures is immutable after Open and safe to read from many threads; it owns its
// mapping (non-copyable).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/speech/features.h"
#include "trainer/speech/manifest.h"

namespace sf::speech {

struct FeatureCacheOptions {
  std::string cache_dir;  // required; created when missing
  int threads = 0;        // threads computing features; 0: OpenMP's default
};

class SpeechFeatures {
 public:
  static Result<std::unique_ptr<SpeechFeatures>> Open(const std::string& manifest_path,
                                                      const FrontEndOptions& front_end,
                                                      const FeatureCacheOptions& cache);
  ~SpeechFeatures();
  SpeechFeatures(const SpeechFeatures&) = delete;
  SpeechFeatures& operator=(const SpeechFeatures&) = delete;

  const std::string& manifest() const { return manifest_; }
  const std::vector<Utterance>& utterances() const { return utterances_; }
  const FrontEndOptions& front_end() const { return front_end_; }
  int64_t size() const { return int64_t(utterances_.size()); }
  int64_t mels() const { return mels_; }
  int64_t frames(int64_t i) const { return frames_[i]; }
  int64_t total_frames() const { return total_frames_; }
  // frames(i) for every utterance, in manifest order (what SpeechBatchIterator::Create takes).
  std::vector<int64_t> frame_counts() const { return {frames_, frames_ + size()}; }
  // Utterance i's features, [frames(i), mels()] row-major; valid while this object lives.
  const float* features(int64_t i) const { return features_ + offsets_[size_t(i)] * mels_; }

  const std::string& cache_file() const { return cache_file_; }
  // True when Open read an existing cache file; false when it computed the features.
  bool from_cache() const { return from_cache_; }
  // Why an existing cache file under this name was rejected and recomputed ("" when it was not).
  const std::string& rejected_cache() const { return rejected_cache_; }
  // Wall-clock seconds Open took (reading the manifest, hashing, computing or mapping).
  double seconds() const { return seconds_; }

 private:
  SpeechFeatures() = default;
  // Maps cache_file_ and checks it against utterances_ and front_end_; kDataLoss naming the file
  // and the problem.
  Status Map();
  std::string manifest_;
  std::vector<Utterance> utterances_;
  FrontEndOptions front_end_;
  std::string cache_file_, rejected_cache_;
  bool from_cache_ = false;
  double seconds_ = 0;
  void* base_ = nullptr;
  size_t mapped_size_ = 0;
  int64_t mels_ = 0, total_frames_ = 0;
  const int64_t* frames_ = nullptr;
  std::vector<int64_t> offsets_;  // first row of each utterance
  const float* features_ = nullptr;
};

}  // namespace sf::speech
