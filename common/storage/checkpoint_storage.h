// Where an experiment's checkpoints live, behind one interface: a shared filesystem
// (`checkpoint_storage: {type: shared_fs, host_path}`, the default) or an S3 bucket
// (`{type: s3, bucket, prefix, endpoint_url, ...}`; docs/object-storage.md). The trainer that
// writes and restores, the master that deletes by retention, `sf checkpoint download` and
// sf-serve all go through it, so every storage type behaves alike.
//
// Contract:
// - A checkpoint is a directory of files, addressed by a path: `<root>/trial-<id>/<uuid>` where
//   `<root>` is ExperimentRoot(experiment id) — a directory for shared_fs, an
//   `s3://<bucket>[/<prefix>]/experiment-<id>` URL for s3.
// - shared_fs is written in place: the writer makes `<path>` itself (trainer/run/checkpoint.h
//   renames a finished temporary directory into place), so staged() is false and Store is not
//   needed. s3 is staged: the writer makes the directory locally and Store uploads it.
// - Store uploads every file (large ones as parallel multipart uploads) and then, last, the
//   object manifest `steadfast-manifest.json` listing each file with its size and SHA-256. A
//   checkpoint whose manifest is missing was never completed: Fetch refuses it (kDataLoss,
//   "... has no steadfast-manifest.json: its upload never completed"), so a half-written
//   checkpoint is never restored. kDataLoss is the one code that says the checkpoint itself is
//   unusable (a missing bucket is kNotFound, an endpoint that does not answer kUnavailable).
//   The checkpoint is reported to the master only after Store.
// - Fetch copies a checkpoint into a local directory and verifies each file's size and SHA-256
//   (for s3 against the object manifest; for shared_fs it copies and hashes what is there and
//   the caller compares with what the master recorded). It writes into `<dir>.partial` and
//   renames when whole, so a failed fetch leaves no directory that looks complete.
// - Remove deletes a checkpoint (the s3 manifest first, so a half-deleted checkpoint is never
//   taken for whole); removing one that is already gone succeeds. RemoveAll deletes an
//   experiment's root.
// - Credentials for s3 come from the config's access_key/secret_key, else from the environment
//   of the process that opens the storage (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY); the
//   endpoint from endpoint_url, else SF_S3_ENDPOINT, else AWS's regional endpoint.
// - Errors name the storage (`s3://bucket/key at http://...` or the directory) and what failed.
// - Thread-safe: an opened storage holds only its configuration.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/status.h"

namespace sf::storage {

inline constexpr char kObjectManifest[] = "steadfast-manifest.json";

struct StoredFile {
  std::string path;  // relative to the checkpoint directory, '/'-separated
  int64_t size = 0;
  std::string sha256;
};

bool IsS3Url(std::string_view path);

class CheckpointStorage {
 public:
  virtual ~CheckpointStorage() = default;

  // The storage an experiment's config names; without a checkpoint_storage section, the
  // shared filesystem under `default_root` (the master's --checkpoint-root).
  static Result<std::unique_ptr<CheckpointStorage>> Open(
      const std::optional<config::CheckpointStorageConfig>& config,
      const std::string& default_root);
  // The storage that holds `path` (an s3:// URL or a directory), configured by `config` when
  // it is given and of the same type (its endpoint and keys), else from the environment.
  static Result<std::unique_ptr<CheckpointStorage>> ForPath(
      const std::string& path, const std::optional<config::CheckpointStorageConfig>& config);

  virtual std::string Describe() const = 0;  // "shared_fs /dir" or "s3://bucket/prefix at URL"
  virtual std::string ExperimentRoot(int64_t experiment_id) const = 0;
  virtual bool staged() const = 0;
  // One request that proves the storage usable (s3: the bucket answers to these keys).
  virtual Status Check() const = 0;
  // Uploads `local_dir`'s files (all regular files under it) as the checkpoint at `path`.
  virtual Status Store(const std::string& local_dir, const std::string& path) const = 0;
  // Copies the checkpoint at `path` into `local_dir` (which must not exist), verified.
  virtual Result<std::vector<StoredFile>> Fetch(const std::string& path,
                                                const std::string& local_dir) const = 0;
  virtual Status Remove(const std::string& path) const = 0;
  virtual Status RemoveAll(const std::string& root) const = 0;
};

// Every regular file under `dir` with its size and SHA-256, sorted by path.
Result<std::vector<StoredFile>> ListLocalFiles(const std::string& dir);

}  // namespace sf::storage
