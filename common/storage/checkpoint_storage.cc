#include "common/storage/checkpoint_storage.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "common/env.h"
#include "common/sha256.h"
#include "common/storage/s3_client.h"
#include "common/value.h"

namespace sf::storage {
namespace fs = std::filesystem;
namespace {

constexpr int kParallelFiles = 4;

// Runs work(i) for i in [0, n) on up to `threads` threads; the first error wins.
Status ForEachParallel(size_t n, int threads, const std::function<Status(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first;
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      Status st = work(i);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = st;
        next = n;  // no more starts
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t count = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
  for (size_t t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return first;
}

// A relative path inside a checkpoint: no root, no "." or ".." parts.
bool SafeRelative(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : fs::path(p)) {
    if (part == "." || part == ".." || part.empty()) return false;
  }
  return true;
}

Status Verify(const std::string& where, const std::string& file, const StoredFile& want) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec) return DataLoss(where + ": " + want.path + " cannot be read: " + ec.message());
  if (static_cast<int64_t>(size) != want.size) {
    return DataLoss(where + ": " + want.path + " has " + std::to_string(size) +
                    " bytes, the manifest says " + std::to_string(want.size));
  }
  SF_ASSIGN_OR_RETURN(std::string digest, Sha256File(file));
  if (!want.sha256.empty() && digest != want.sha256) {
    return DataLoss(where + ": " + want.path + " does not match its SHA-256 (" +
                    digest.substr(0, 12) + "... instead of " + want.sha256.substr(0, 12) + "...)");
  }
  return Status::Ok();
}

// Prepares `<local_dir>.partial` for a fetch; the caller renames it into place.
Result<std::string> Staging(const std::string& local_dir) {
  std::error_code ec;
  if (fs::exists(local_dir, ec)) return AlreadyExists(local_dir + " already exists");
  const std::string partial = local_dir + ".partial";
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) return Internal("cannot create " + partial + ": " + ec.message());
  return partial;
}

Status Finish(const std::string& partial, const std::string& local_dir) {
  std::error_code ec;
  fs::rename(partial, local_dir, ec);
  if (ec) return Internal("cannot rename " + partial + " to " + local_dir + ": " + ec.message());
  return Status::Ok();
}

// ---- shared_fs


// Removes `path` and everything under it. Another remover may take entries from under this walk
// (retention deleting a checkpoint while its experiment's directory is deleted): an entry that
// is gone when it is reached is not a failure, unlike std::filesystem::remove_all's.
std::error_code RemoveTree(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec) return ec == std::errc::no_such_file_or_directory ? std::error_code() : ec;
  if (fs::is_directory(st)) {
    fs::directory_iterator it(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) return ec;
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (std::error_code inner = RemoveTree(it->path())) return inner;
    }
    if (ec && ec != std::errc::no_such_file_or_directory) return ec;
  }
  ec.clear();
  fs::remove(path, ec);
  return ec == std::errc::no_such_file_or_directory ? std::error_code() : ec;
}

class SharedFsStorage final : public CheckpointStorage {
 public:
  explicit SharedFsStorage(std::string root) : root_(std::move(root)) {}
  std::string Describe() const override { return "shared_fs " + root_; }
  std::string ExperimentRoot(int64_t id) const override {
    return root_ + "/experiment-" + std::to_string(id);
  }
  bool staged() const override { return false; }
  Status Check() const override { return Status::Ok(); }
  Status Store(const std::string& local_dir, const std::string& path) const override {
    if (fs::path(local_dir).lexically_normal() == fs::path(path).lexically_normal())
      return Status::Ok();
    return FailedPrecondition("shared_fs checkpoints are written in place (" + path +
                              "), not uploaded from " + local_dir);
  }
  Result<std::vector<StoredFile>> Fetch(const std::string& path,
                                        const std::string& local_dir) const override {
    std::error_code ec;
    if (!fs::is_directory(path, ec))
      return NotFound("checkpoint directory " + path + " does not exist");
    SF_ASSIGN_OR_RETURN(std::vector<StoredFile> files, ListLocalFiles(path));
    SF_ASSIGN_OR_RETURN(std::string partial, Staging(local_dir));
    for (const StoredFile& f : files) {
      const fs::path to = fs::path(partial) / f.path;
      fs::create_directories(to.parent_path(), ec);
      fs::copy_file(fs::path(path) / f.path, to, fs::copy_options::overwrite_existing, ec);
      if (ec) return Internal("copying " + path + "/" + f.path + ": " + ec.message());
      SF_RETURN_IF_ERROR(Verify("checkpoint " + path, to.string(), f));
    }
    SF_RETURN_IF_ERROR(Finish(partial, local_dir));
    return files;
  }
  Status Remove(const std::string& path) const override {
    std::error_code ec = RemoveTree(path);
    if (ec) return Internal("cannot remove " + path + ": " + ec.message());
    return Status::Ok();
  }
  Status RemoveAll(const std::string& root) const override { return Remove(root); }

 private:
  std::string root_;
};

// ---- s3

class S3Storage final : public CheckpointStorage {
 public:
  S3Storage(S3Config base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix)) {}

  std::string Describe() const override {
    return "s3://" + base_.bucket + (prefix_.empty() ? "" : "/" + prefix_) + " at " +
           base_.endpoint_url;
  }
  std::string ExperimentRoot(int64_t id) const override {
    return "s3://" + base_.bucket + (prefix_.empty() ? "" : "/" + prefix_) + "/experiment-" +
           std::to_string(id);
  }
  bool staged() const override { return true; }

  Status Check() const override {
    SF_ASSIGN_OR_RETURN(S3Client client, S3Client::Create(base_));
    Status st = client.CheckBucket();
    if (st.code() == StatusCode::kPermissionDenied &&
        st.message().find("access key") == std::string::npos) {
      st = Status(st.code(), st.message() + "; check the access key and secret key");
    }
    return st.WithContext("checkpoint storage");
  }

  Status Store(const std::string& local_dir, const std::string& path) const override {
    SF_ASSIGN_OR_RETURN(auto place, Place(path));
    auto& [client, key] = place;
    SF_ASSIGN_OR_RETURN(std::vector<StoredFile> files, ListLocalFiles(local_dir));
    Status uploaded = ForEachParallel(files.size(), kParallelFiles, [&](size_t i) {
      return client.Upload(key + "/" + files[i].path, local_dir + "/" + files[i].path);
    });
    if (!uploaded.ok()) {
      (void)DeleteUnder(client, key);  // best effort: what did arrive is never offered (no manifest)
      return uploaded;
    }
    Value::List listed;
    int64_t total = 0;
    for (const StoredFile& f : files) {
      listed.push_back(Value(Value::Map{{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}}));
      total += f.size;
    }
    const Value manifest(
        Value::Map{{"format_version", int64_t{1}}, {"files", listed}, {"size", total}});
    return client.Put(key + "/" + kObjectManifest,
                      manifest.ToJson());  // last: the checkpoint exists from here
  }

  Result<std::vector<StoredFile>> Fetch(const std::string& path,
                                        const std::string& local_dir) const override {
    SF_ASSIGN_OR_RETURN(auto place, Place(path));
    auto& [client, key] = place;
    auto text = client.Get(key + "/" + kObjectManifest);
    if (!text.ok()) {
      // The manifest's key missing means an unfinished upload; a missing bucket is not that.
      if (text.status().code() == StatusCode::kNotFound && text.status().message().find("NoSuchBucket") ==
                                                                  std::string::npos) {
        return DataLoss("checkpoint " + path + " has no " + kObjectManifest +
                        ": its upload never completed");
      }
      return text.status();
    }
    SF_ASSIGN_OR_RETURN(std::vector<StoredFile> files, ParseManifest(path, *text));
    SF_ASSIGN_OR_RETURN(std::string partial, Staging(local_dir));
    SF_RETURN_IF_ERROR(ForEachParallel(files.size(), kParallelFiles, [&](size_t i) -> Status {
      const fs::path to = fs::path(partial) / files[i].path;
      std::error_code ec;
      fs::create_directories(to.parent_path(), ec);
      if (ec) return Internal("cannot create " + to.parent_path().string() + ": " + ec.message());
      SF_RETURN_IF_ERROR(client.Download(key + "/" + files[i].path, to.string()));
      return Verify("checkpoint " + path, to.string(), files[i]);
    }));
    SF_RETURN_IF_ERROR(Finish(partial, local_dir));
    return files;
  }

  Status Remove(const std::string& path) const override {
    SF_ASSIGN_OR_RETURN(auto place, Place(path));
    auto& [client, key] = place;
    SF_RETURN_IF_ERROR(client.Delete(key + "/" + kObjectManifest));
    return DeleteUnder(client, key);
  }

  Status RemoveAll(const std::string& root) const override {
    SF_ASSIGN_OR_RETURN(auto place, Place(root));
    auto& [client, key] = place;
    SF_ASSIGN_OR_RETURN(std::vector<S3Object> objects, client.List(key + "/"));
    for (const S3Object& o : objects) {  // manifests first: no checkpoint is left looking whole
      const std::string name = "/" + std::string(kObjectManifest);
      if (o.key.size() >= name.size() &&
          o.key.compare(o.key.size() - name.size(), name.size(), name) == 0) {
        SF_RETURN_IF_ERROR(client.Delete(o.key));
      }
    }
    return DeleteUnder(client, key);
  }

 private:
  // The client for the URL's bucket and the checkpoint's key.
  Result<std::pair<S3Client, std::string>> Place(const std::string& url) const {
    SF_ASSIGN_OR_RETURN(auto parts, ParseS3Url(url));
    auto& [bucket, key] = parts;
    while (!key.empty() && key.back() == '/') key.pop_back();
    if (key.empty()) return InvalidArgument(url + " names a bucket, not a checkpoint");
    S3Config c = base_;
    c.bucket = bucket;
    SF_ASSIGN_OR_RETURN(S3Client client, S3Client::Create(std::move(c)));
    return std::make_pair(std::move(client), key);
  }

  static Status DeleteUnder(const S3Client& client, const std::string& key) {
    SF_ASSIGN_OR_RETURN(std::vector<S3Object> objects, client.List(key + "/"));
    return ForEachParallel(objects.size(), kParallelFiles,
                           [&](size_t i) { return client.Delete(objects[i].key); });
  }

  static Result<std::vector<StoredFile>> ParseManifest(const std::string& path,
                                                       const std::string& text) {
    auto parsed = Value::FromJson(text);
    const Value* files = parsed.ok() && parsed->is_map() ? parsed->Find("files") : nullptr;
    if (!files || !files->is_list()) {
      return DataLoss("checkpoint " + path + ": " + kObjectManifest +
                      " is not a manifest (no file list)");
    }
    std::vector<StoredFile> out;
    for (const Value& f : files->as_list()) {
      const Value* p = f.is_map() ? f.Find("path") : nullptr;
      const Value* size = f.is_map() ? f.Find("size") : nullptr;
      const Value* sha = f.is_map() ? f.Find("sha256") : nullptr;
      if (!p || !p->is_string() || !size || !size->is_int() || !sha || !sha->is_string() ||
          !SafeRelative(p->as_string())) {
        return DataLoss("checkpoint " + path + ": malformed entry in " + kObjectManifest + ": " +
                        f.ToJson());
      }
      out.push_back({p->as_string(), size->as_int(), sha->as_string()});
    }
    return out;
  }

  S3Config base_;       // bucket: the configured one (Place takes each URL's own)
  std::string prefix_;  // under the bucket, no leading or trailing '/'
};

S3Config S3ConfigOf(const std::optional<config::CheckpointStorageConfig>& config) {
  S3Config c;
  if (config && config->is_s3()) {
    c.bucket = config->bucket;
    c.endpoint_url = config->endpoint_url;
    c.region = config->region;
    c.access_key = config->access_key;
    c.secret_key = config->secret_key;
  }
  if (c.endpoint_url.empty()) c.endpoint_url = Env("SF_S3_ENDPOINT");
  if (c.endpoint_url.empty()) {
    const std::string region = c.region.empty() ? Env("AWS_DEFAULT_REGION", "us-east-1") : c.region;
    c.endpoint_url = "https://s3." + region + ".amazonaws.com";
  }
  return c;
}

}  // namespace

bool IsS3Url(std::string_view path) { return path.rfind("s3://", 0) == 0; }

Result<std::vector<StoredFile>> ListLocalFiles(const std::string& dir) {
  std::vector<StoredFile> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(dir + " is not a directory");
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    StoredFile f;
    f.path = fs::relative(it->path(), dir, ec).generic_string();
    f.size = static_cast<int64_t>(it->file_size(ec));
    SF_ASSIGN_OR_RETURN(f.sha256, Sha256File(it->path().string()));
    out.push_back(std::move(f));
  }
  if (ec) return Internal("listing " + dir + ": " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const StoredFile& a, const StoredFile& b) { return a.path < b.path; });
  return out;
}

Result<std::unique_ptr<CheckpointStorage>> CheckpointStorage::Open(
    const std::optional<config::CheckpointStorageConfig>& config, const std::string& default_root) {
  if (config && config->is_s3()) {
    S3Config c = S3ConfigOf(config);
    // The form (endpoint, bucket name) is checked now; credentials when first used.
    S3Config probe = c;
    if (probe.access_key.empty()) probe.access_key = probe.secret_key = "-";
    SF_RETURN_IF_ERROR(S3Client::Create(probe).status().WithContext("checkpoint_storage"));
    return std::unique_ptr<CheckpointStorage>(new S3Storage(std::move(c), config->prefix));
  }
  std::string root = default_root;
  if (config) {
    root = config->host_path;
    if (config->storage_path) root += "/" + *config->storage_path;
  }
  return std::unique_ptr<CheckpointStorage>(new SharedFsStorage(root));
}

Result<std::unique_ptr<CheckpointStorage>> CheckpointStorage::ForPath(
    const std::string& path, const std::optional<config::CheckpointStorageConfig>& config) {
  if (!IsS3Url(path)) return std::unique_ptr<CheckpointStorage>(new SharedFsStorage(path));
  SF_ASSIGN_OR_RETURN(auto parts, ParseS3Url(path));
  S3Config c = S3ConfigOf(config && config->is_s3() ? config : std::nullopt);
  c.bucket = parts.first;
  return std::unique_ptr<CheckpointStorage>(new S3Storage(std::move(c), ""));
}

}  // namespace sf::storage
