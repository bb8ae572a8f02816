#include "trainer/run/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/sha256.h"
#include "trainer/core/safetensors.h"

namespace sf {
namespace fs = std::filesystem;

namespace {

Status WriteAndSync(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("cannot create " + path + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return Internal("cannot write " + path + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return Internal("cannot sync " + path);
  return Status::Ok();
}

Status SyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal("cannot open " + path + " to sync it");
  int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Status::Ok() : Internal("cannot sync " + path);
}

Result<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot read");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Status WriteBuffers(const std::string& path, const std::vector<NamedBuffer>& buffers,
                    const std::map<std::string, std::string>& metadata = {}) {
  std::vector<safetensors::TensorView> views;
  for (const NamedBuffer& b : buffers) {
    auto dtype = safetensors::ParseDType(b.dtype);
    if (!dtype) return InvalidArgument("buffer " + b.name + ": unknown dtype " + b.dtype);
    views.push_back({b.name, *dtype, b.shape, std::span<const std::byte>(b.data.data(), b.data.size())});
  }
  return safetensors::WriteFile(path, views, metadata);
}

Result<std::vector<NamedBuffer>> ReadBuffers(const std::string& path,
                                             std::map<std::string, std::string>* metadata = nullptr) {
  auto file = safetensors::SafetensorsFile::Open(path);
  if (!file.ok()) return file.status();
  if (metadata) *metadata = file->metadata();
  std::vector<NamedBuffer> out;
  for (const auto& info : file->tensors()) {
    NamedBuffer b;
    b.name = info.name;
    b.dtype = safetensors::DTypeName(info.dtype);
    b.shape = info.shape;
    auto bytes = file->Data(info);
    b.data.assign(bytes.begin(), bytes.end());
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace

std::string NewUuid() {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  uint64_t a = rng(), b = rng();
  a = (a & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
  b = (b & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // variant 10
  char out[37];
  std::snprintf(out, sizeof(out), "%08x-%04x-%04x-%04x-%012llx", static_cast<uint32_t>(a >> 32),
                static_cast<uint32_t>((a >> 16) & 0xFFFF), static_cast<uint32_t>(a & 0xFFFF),
                static_cast<uint32_t>(b >> 48), static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFULL));
  return out;
}

Result<WrittenCheckpoint> WriteCheckpoint(const std::string& parent, const CheckpointContents& c,
                                          std::string uuid) {
  if (uuid.empty()) uuid = NewUuid();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return Internal("cannot create checkpoint directory " + parent + ": " + ec.message());
  std::string final_dir = (fs::absolute(parent) / uuid).string();
  std::string tmp = (fs::absolute(parent) / (".tmp-" + uuid)).string();
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return Internal("cannot create " + tmp + ": " + ec.message());

  SF_RETURN_IF_ERROR(WriteBuffers(tmp + "/model.safetensors", c.model, c.model_metadata));
  SF_RETURN_IF_ERROR(WriteBuffers(tmp + "/optimizer.safetensors", c.optimizer));
  Value state = c.state;
  if (!state.is_map()) state = Value(Value::Map{});
  state.as_map()["format_version"] = kCheckpointFormatVersion;
  SF_RETURN_IF_ERROR(WriteAndSync(tmp + "/trainer_state.json", state.ToJson()));
  SF_RETURN_IF_ERROR(WriteAndSync(tmp + "/experiment.yaml", c.config_yaml));
  std::vector<std::string> names = {"model.safetensors", "optimizer.safetensors", "trainer_state.json",
                                    "experiment.yaml"};
  if (!c.sentencepiece_model.empty()) {
    SF_RETURN_IF_ERROR(WriteAndSync(tmp + "/sentencepiece.model", c.sentencepiece_model));
    names.push_back("sentencepiece.model");
  }
  if (!c.sentencepiece_target_model.empty()) {
    SF_RETURN_IF_ERROR(WriteAndSync(tmp + "/sentencepiece.tgt.model", c.sentencepiece_target_model));
    names.push_back("sentencepiece.tgt.model");
  }
  WrittenCheckpoint out;
  out.uuid = uuid;
  out.dir = final_dir;
  Value::List files;
  for (const std::string& name : names) {
    std::string path = tmp + "/" + name;
    SF_RETURN_IF_ERROR(SyncPath(path));  // safetensors::WriteFile wrote it; make it durable
    auto digest = Sha256File(path);
    if (!digest.ok()) return digest.status();
    int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
    out.files.push_back({name, size, *digest});
    out.size += size;
    files.push_back(Value(Value::Map{{"path", name}, {"size", size}, {"sha256", *digest}}));
  }
  Value manifest(Value::Map{{"format_version", kCheckpointFormatVersion}, {"uuid", uuid}, {"files", files}});
  std::string manifest_text = manifest.ToJson();
  SF_RETURN_IF_ERROR(WriteAndSync(tmp + "/manifest.json", manifest_text));
  out.files.push_back({"manifest.json", static_cast<int64_t>(manifest_text.size()), Sha256Hex(manifest_text)});
  out.size += static_cast<int64_t>(manifest_text.size());
  SF_RETURN_IF_ERROR(SyncPath(tmp));
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  if (ec) return Internal("cannot rename " + tmp + " to " + final_dir + ": " + ec.message());
  SF_RETURN_IF_ERROR(SyncPath(fs::absolute(parent).string()));
  return out;
}

Result<CheckpointContents> ReadCheckpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("checkpoint " + dir + " does not exist");
  auto manifest_text = ReadAll(dir + "/manifest.json");
  if (!manifest_text.ok()) {
    return DataLoss("checkpoint " + dir + " has no manifest.json (incomplete or not a checkpoint)");
  }
  auto manifest = Value::FromJson(*manifest_text);
  if (!manifest.ok() || !manifest->is_map()) {
    return DataLoss("checkpoint " + dir + ": manifest.json is not valid JSON");
  }
  const Value* version = manifest->Find("format_version");
  if (!version || !version->is_int() || version->as_int() != kCheckpointFormatVersion) {
    return FailedPrecondition("checkpoint " + dir + ": format version " +
                              (version ? version->ToDisplay() : "missing") + " is not supported (expected " +
                              std::to_string(kCheckpointFormatVersion) + ")");
  }
  const Value* files = manifest->Find("files");
  if (!files || !files->is_list()) return DataLoss("checkpoint " + dir + ": manifest.json lists no files");
  for (const Value& f : files->as_list()) {
    const Value* name = f.Find("path");
    const Value* size = f.Find("size");
    const Value* sha = f.Find("sha256");
    if (!name || !name->is_string() || !size || !size->is_int() || !sha || !sha->is_string()) {
      return DataLoss("checkpoint " + dir + ": malformed manifest entry " + f.ToJson());
    }
    std::string path = dir + "/" + name->as_string();
    if (!fs::exists(path, ec)) return DataLoss("checkpoint " + dir + ": " + name->as_string() + " is missing");
    int64_t actual = static_cast<int64_t>(fs::file_size(path, ec));
    if (actual != size->as_int()) {
      return DataLoss("checkpoint " + dir + ": " + name->as_string() + " is " + std::to_string(actual) +
                      " bytes, the manifest says " + std::to_string(size->as_int()) + " (truncated?)");
    }
    auto digest = Sha256File(path);
    if (!digest.ok()) return digest.status();
    if (*digest != sha->as_string()) {
      return DataLoss("checkpoint " + dir + ": " + name->as_string() + " fails its SHA-256 check (corrupt)");
    }
  }
  CheckpointContents c;
  SF_ASSIGN_OR_RETURN(c.model, ReadBuffers(dir + "/model.safetensors", &c.model_metadata));
  SF_ASSIGN_OR_RETURN(c.optimizer, ReadBuffers(dir + "/optimizer.safetensors"));
  SF_ASSIGN_OR_RETURN(std::string state_text, ReadAll(dir + "/trainer_state.json"));
  auto state = Value::FromJson(state_text);
  if (!state.ok()) return DataLoss("checkpoint " + dir + ": trainer_state.json: " + state.status().message());
  c.state = *state;
  SF_ASSIGN_OR_RETURN(c.config_yaml, ReadAll(dir + "/experiment.yaml"));
  if (fs::exists(dir + "/sentencepiece.model", ec)) {
    SF_ASSIGN_OR_RETURN(c.sentencepiece_model, ReadAll(dir + "/sentencepiece.model"));
  }
  if (fs::exists(dir + "/sentencepiece.tgt.model", ec)) {
    SF_ASSIGN_OR_RETURN(c.sentencepiece_target_model, ReadAll(dir + "/sentencepiece.tgt.model"));
  }
  return c;
}

}  // namespace sf
