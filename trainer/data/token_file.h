// Binarized token files: the token ids of one side (source or target) of one split, memory-
// mapped read-only so many trainer ranks share one copy in the page cache.
//
// Layout (little-endian, 8-byte aligned sections):
//   char    magic[8]          "SFTOK01\0"
//   int64   num_sequences     N
//   int64   num_tokens        T
//   int64   offsets[N + 1]    sequence i is tokens[offsets[i], offsets[i+1])
//   int64   lines[N]          1-based line number of sequence i in the raw text file
//   int32   tokens[T]         SentencePiece ids, without EOS
//
// A MappedTokenFile is immutable after Open and safe to read from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace sf::data {

// Writes a token file (and fsyncs it). Callers make it visible atomically (the cache writes a
// whole directory under a temporary name and renames it).
Status WriteTokenFile(const std::string& path, const std::vector<std::vector<int32_t>>& sequences,
                      const std::vector<int64_t>& lines);

class MappedTokenFile {
 public:
  // kNotFound when missing; kDataLoss when truncated or not a token file.
  static Result<std::unique_ptr<MappedTokenFile>> Open(const std::string& path);
  ~MappedTokenFile();
  MappedTokenFile(const MappedTokenFile&) = delete;
  MappedTokenFile& operator=(const MappedTokenFile&) = delete;

  int64_t size() const { return num_sequences_; }
  int64_t num_tokens() const { return num_tokens_; }
  std::span<const int32_t> operator[](int64_t i) const {
    return {tokens_ + offsets_[i], size_t(offsets_[i + 1] - offsets_[i])};
  }
  int64_t length(int64_t i) const { return offsets_[i + 1] - offsets_[i]; }
  int64_t line(int64_t i) const { return lines_[i]; }

 private:
  MappedTokenFile() = default;
  void* base_ = nullptr;
  size_t mapped_size_ = 0;
  int64_t num_sequences_ = 0;
  int64_t num_tokens_ = 0;
  const int64_t* offsets_ = nullptr;
  const int64_t* lines_ = nullptr;
  const int32_t* tokens_ = nullptr;
};

}  // namespace sf::data
