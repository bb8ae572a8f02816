#include "trainer/core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "common/utf8.h"
#include "common/value.h"
#include "trainer/core/header_json.h"

namespace sf::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swapping");

namespace {

// The reference implementation's limit on the header size.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::kF64, "F64", 8}, {DType::kI64, "I64", 8},   {DType::kF32, "F32", 4},
    {DType::kI32, "I32", 4}, {DType::kBF16, "BF16", 2}, {DType::kF16, "F16", 2},
};

// numel of a shape, or nullopt on a negative dimension or overflow.
std::optional<size_t> Numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const auto u = static_cast<size_t>(d);
    if (u != 0 && n > std::numeric_limits<size_t>::max() / u) return std::nullopt;
    n *= u;
  }
  return n;
}

std::string ErrnoText() { return std::strerror(errno); }

Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal(path + ": write failed: " + ErrnoText());
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

const char* DTypeName(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 0;
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& e : kDTypes) {
    if (name == e.name) return e.dtype;
  }
  return std::nullopt;
}

TensorView F32View(std::string name, std::vector<int64_t> shape, std::span<const float> values) {
  return {std::move(name), DType::kF32, std::move(shape), std::as_bytes(values)};
}

// ---- Writing ----

Status WriteFile(const std::string& path, std::span<const TensorView> tensors,
                 const std::map<std::string, std::string>& metadata) {
  const std::string where = "safetensors file " + path;
  // Widest element first keeps every tensor aligned to its element size (the data section
  // starts 8-byte aligned); ties by name for a deterministic file.
  std::vector<const TensorView*> order;
  order.reserve(tensors.size());
  for (const TensorView& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorView* a, const TensorView* b) {
    const size_t sa = DTypeSize(a->dtype), sb = DTypeSize(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      header += JsonQuoted(k);
      header += ':';
      header += JsonQuoted(v);
    }
    header += '}';
  }
  size_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const TensorView& t = *order[i];
    if (t.name.empty() || t.name == "__metadata__") {
      return InvalidArgument(where + ": invalid tensor name '" + t.name + "'");
    }
    if (i > 0 && order[i - 1]->name == t.name) {
      return InvalidArgument(where + ": tensor '" + t.name + "' appears twice");
    }
    const std::optional<size_t> numel = Numel(t.shape);
    if (!numel || *numel * DTypeSize(t.dtype) != t.data.size()) {
      return InvalidArgument(where + ": tensor '" + t.name + "' has " +
                             std::to_string(t.data.size()) + " bytes, which does not match its " +
                             DTypeName(t.dtype) + " shape");
    }
    if (i > 0 || !metadata.empty()) header += ',';
    header += JsonQuoted(t.name);
    header += ":{\"dtype\":\"";
    header += DTypeName(t.dtype);
    header += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d > 0) header += ',';
      header += std::to_string(t.shape[d]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.data.size()) + "]}";
    offset += t.data.size();
  }
  header += '}';
  // Names in duplicate across different dtypes are not adjacent after sorting: check by set.
  {
    std::vector<std::string_view> names;
    for (const TensorView& t : tensors) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    if (std::adjacent_find(names.begin(), names.end()) != names.end()) {
      return InvalidArgument(where + ": tensor '" +
                             std::string(*std::adjacent_find(names.begin(), names.end())) +
                             "' appears twice");
    }
  }
  while (header.size() % 8 != 0) header += ' ';
  uint64_t header_len = header.size();

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal(where + ": cannot create " + tmp + ": " + ErrnoText());
  Status status = WriteAll(fd, &header_len, sizeof header_len, tmp);
  if (status.ok()) status = WriteAll(fd, header.data(), header.size(), tmp);
  for (size_t i = 0; status.ok() && i < order.size(); ++i) {
    status = WriteAll(fd, order[i]->data.data(), order[i]->data.size(), tmp);
  }
  if (status.ok() && ::fsync(fd) != 0) status = Internal(tmp + ": fsync failed: " + ErrnoText());
  if (::close(fd) != 0 && status.ok()) status = Internal(tmp + ": close failed: " + ErrnoText());
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = Internal(where + ": rename from " + tmp + " failed: " + ErrnoText());
  }
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
}

// ---- Reading ----

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr) ::munmap(map_, map_size_);
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    data_ = std::exchange(o.data_, nullptr);
    data_size_ = std::exchange(o.data_size_, 0);
    tensors_ = std::move(o.tensors_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  const std::string where = "safetensors file " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(where + ": no such file");
    return Internal(where + ": cannot open: " + ErrnoText());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const Status s = Internal(where + ": stat failed: " + ErrnoText());
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(where + ": not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return DataLoss(where + ": file is " + std::to_string(size) +
                    " bytes, too short for the 8-byte header length");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Internal(where + ": mmap failed: " + ErrnoText());
  SafetensorsFile file;
  file.path_ = path;
  file.map_ = map;  // owned from here on: unmapped by the destructor on any error below
  file.map_size_ = size;
  const std::span<const std::byte> bytes(static_cast<const std::byte*>(map), size);
  return Parse(std::move(file), bytes);
}

Result<SafetensorsFile> SafetensorsFile::FromBytes(std::span<const std::byte> bytes,
                                                   const std::string& label) {
  SafetensorsFile file;
  file.path_ = label;
  return Parse(std::move(file), bytes);
}

Result<SafetensorsFile> SafetensorsFile::Parse(SafetensorsFile file,
                                               std::span<const std::byte> bytes) {
  const std::string where = "safetensors file " + file.path_;
  auto corrupt = [&](const std::string& what) { return DataLoss(where + ": " + what); };
  if (bytes.size() < 8) {
    return corrupt("file is " + std::to_string(bytes.size()) +
                   " bytes, too short for the 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeaderBytes) {
    return corrupt("header length " + std::to_string(header_len) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes (not a safetensors file?)");
  }
  if (header_len > bytes.size() - 8) {
    return corrupt("header length " + std::to_string(header_len) + " runs past the end of the " +
                   std::to_string(bytes.size()) + "-byte file (truncated?)");
  }
  if (header_len < 2) return corrupt("header of " + std::to_string(header_len) + " bytes is empty");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, header_len);
  Json root;
  if (Status s = ParseHeaderJson(text, &root); !s.ok()) return corrupt(s.message());
  if (root.kind != Json::Kind::kObject) return corrupt("header is not a JSON object");

  file.data_ = bytes.data() + 8 + header_len;
  file.data_size_ = bytes.size() - 8 - header_len;
  for (auto& [name, entry] : root.object) {
    if (name == "__metadata__") {
      if (entry.kind != Json::Kind::kObject) return corrupt("__metadata__ is not an object");
      for (auto& [k, v] : entry.object) {
        if (v.kind != Json::Kind::kString) {
          return corrupt("__metadata__ value of '" + k + "' is not a string");
        }
        file.metadata_[k] = std::move(v.string);
      }
      continue;
    }
    const std::string what = "tensor '" + name + "': ";
    if (entry.kind != Json::Kind::kObject) return corrupt(what + "entry is not an object");
    const Json* dtype = nullptr;
    const Json* shape = nullptr;
    const Json* offsets = nullptr;
    for (const auto& [k, v] : entry.object) {
      if (k == "dtype") dtype = &v;
      if (k == "shape") shape = &v;
      if (k == "data_offsets") offsets = &v;
    }
    if (dtype == nullptr || dtype->kind != Json::Kind::kString) {
      return corrupt(what + "missing or non-string \"dtype\"");
    }
    TensorInfo info;
    info.name = name;
    const std::optional<DType> parsed = ParseDType(dtype->string);
    if (!parsed) {
      return corrupt(what + "unsupported dtype \"" + dtype->string +
                     "\" (supported: F32, BF16, F16, F64, I64, I32)");
    }
    info.dtype = *parsed;
    if (shape == nullptr || shape->kind != Json::Kind::kArray) {
      return corrupt(what + "missing or non-array \"shape\"");
    }
    for (const Json& d : shape->array) {
      if (!d.is_uint || d.uint > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return corrupt(what + "\"shape\" holds something other than non-negative integers");
      }
      info.shape.push_back(static_cast<int64_t>(d.uint));
    }
    if (offsets == nullptr || offsets->kind != Json::Kind::kArray || offsets->array.size() != 2 ||
        !offsets->array[0].is_uint || !offsets->array[1].is_uint) {
      return corrupt(what + "\"data_offsets\" is not a pair of non-negative integers");
    }
    const uint64_t begin = offsets->array[0].uint, end = offsets->array[1].uint;
    if (begin > end) {
      return corrupt(what + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] end before they begin");
    }
    if (end > file.data_size_) {
      return corrupt(what + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] run past the " + std::to_string(file.data_size_) +
                     "-byte data section (truncated?)");
    }
    const std::optional<size_t> numel = Numel(info.shape);
    const size_t width = DTypeSize(info.dtype);
    if (!numel || *numel > std::numeric_limits<size_t>::max() / width) {
      return corrupt(what + "shape is too large");
    }
    if (*numel * width != end - begin) {
      return corrupt(what + "shape needs " + std::to_string(*numel * width) + " bytes of " +
                     DTypeName(info.dtype) + " but data_offsets span " +
                     std::to_string(end - begin));
    }
    info.numel = *numel;
    info.begin = static_cast<size_t>(begin);
    info.end = static_cast<size_t>(end);
    file.tensors_.push_back(std::move(info));
  }
  // The tensors must tile the data section: no gaps, no overlap, nothing left over.
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  size_t cursor = 0;
  for (const TensorInfo& t : file.tensors_) {
    if (t.begin != cursor) {
      return corrupt("tensor '" + t.name + "' starts at data offset " + std::to_string(t.begin) +
                     " but the previous tensor ends at " + std::to_string(cursor) +
                     (t.begin < cursor ? " (overlap)" : " (gap)"));
    }
    cursor = t.end;
  }
  if (cursor != file.data_size_) {
    return corrupt("tensors cover " + std::to_string(cursor) + " bytes but the data section has " +
                   std::to_string(file.data_size_));
  }
  return file;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::span<const std::byte> SafetensorsFile::Data(const TensorInfo& info) const {
  return {data_ + info.begin, info.end - info.begin};
}

Result<std::span<const float>> SafetensorsFile::ReadF32(
    std::string_view name, const std::vector<int64_t>* expected_shape) const {
  const std::string where = "safetensors file " + path_ + ": tensor '" + std::string(name) + "'";
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFound(where + " is missing");
  if (info->dtype != DType::kF32) {
    return InvalidArgument(where + " is " + DTypeName(info->dtype) + ", expected F32");
  }
  if (expected_shape != nullptr && *expected_shape != info->shape) {
    auto str = [](const std::vector<int64_t>& s) {
      std::string out = "[";
      for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
      return out + "]";
    };
    return InvalidArgument(where + " has shape " + str(info->shape) + ", expected " +
                           str(*expected_shape));
  }
  const std::byte* p = data_ + info->begin;
  if (reinterpret_cast<uintptr_t>(p) % alignof(float) != 0) {
    return DataLoss(where + " is not 4-byte aligned in the file; copy it out with Data()");
  }
  return std::span<const float>(reinterpret_cast<const float*>(p), info->numel);
}

}  // namespace sf::safetensors
