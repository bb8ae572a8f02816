// Training checkpoints: a directory that restores a run bit for bit.
//
//   <parent>/<uuid>/
//     model.safetensors       fp32 master weights (names and shapes: docs/model-format.md),
//                             the model configuration in its __metadata__
//     optimizer.safetensors   optimizer state (moments, step) and loss-scaler state
//     trainer_state.json      step, epoch, data position, RNG seeds/offsets, restart, metrics
//     experiment.yaml         the experiment config the run was started with
//     sentencepiece.model     the tokenizer (when the run has one; the source side's when the
//                             vocabularies are not shared, with sentencepiece.tgt.model beside)
//     manifest.json           every file above with its size and SHA-256, and a format version
//
// Writing goes to <parent>/.tmp-<uuid>, fsyncs each file and the directory, then renames, so a
// crash mid-write never leaves a directory that looks like a checkpoint. Reading verifies the
// manifest (sizes and checksums) before anything is parsed, and refuses a corrupt, truncated or
// incompatible checkpoint with an error naming the file and the problem.
//
// Functions are thread-safe (no shared state).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/value.h"
#include "trainer/optim/param.h"

namespace sf {

inline constexpr int kCheckpointFormatVersion = 1;

struct CheckpointContents {
  std::vector<NamedBuffer> model;       // F32, with shapes
  // model.safetensors's __metadata__: the model configuration as strings (weights_io.h
  // ConfigMetadata), so the weights file describes itself. Empty in checkpoints written
  // before it was stored.
  std::map<std::string, std::string> model_metadata;
  std::vector<NamedBuffer> optimizer;   // optimizer and loss-scaler buffers
  Value state = Value(Value::Map{});    // trainer_state.json
  std::string config_yaml;
  std::string sentencepiece_model;      // bytes; empty when none (the source side when not shared)
  std::string sentencepiece_target_model;  // bytes; only when source and target vocabularies differ
};

struct CheckpointFileInfo {
  std::string path;  // relative to the checkpoint directory
  int64_t size = 0;
  std::string sha256;
};

struct WrittenCheckpoint {
  std::string uuid;
  std::string dir;   // absolute
  int64_t size = 0;  // bytes, all files
  std::vector<CheckpointFileInfo> files;
};

// A random RFC 4122 version-4 UUID.
std::string NewUuid();

// Writes `contents` as <parent>/<uuid> (uuid: NewUuid() when empty).
Result<WrittenCheckpoint> WriteCheckpoint(const std::string& parent, const CheckpointContents& contents,
                                          std::string uuid = "");

// Reads and verifies a checkpoint directory.
Result<CheckpointContents> ReadCheckpoint(const std::string& dir);

}  // namespace sf
