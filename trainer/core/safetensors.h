// The safetensors file format (https://github.com/huggingface/safetensors), read and written
// natively so that weights and checkpoints open in PyTorch/NumPy without Steadfast.
//
// Layout: an 8-byte little-endian unsigned header length N, N bytes of UTF-8 JSON
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// padded with spaces so the data starts 8-byte aligned, then the tensor data: packed,
// little-endian, row-major; offsets are relative to the start of the data and the tensors tile
// the data exactly (no gaps, no overlap), as the reference implementation requires.
//
// Supported dtypes: F32, BF16, F16, F64, I64, I32.
//
// Writing lays tensors out widest dtype first (then by name), so each tensor is aligned to
// its element size; the file is written to "<path>.tmp", fsynced and renamed over <path>.
//
// Reading memory-maps the file and validates everything before returning: header length, JSON
// syntax, every entry's dtype, shape, offsets (in range, size == numel · element size, tiling
// the data), metadata values are strings. Any problem comes back as a DataLoss/NotFound Status
// whose message names the file and the problem; a corrupt file never crashes the reader.
//
// A SafetensorsFile is movable, not copyable; its views stay valid while it lives. Reading
// from one object concurrently is safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sf::safetensors {

enum class DType { kF32, kBF16, kF16, kF64, kI64, kI32 };

// "F32", "BF16", ... (the names in the header).
const char* DTypeName(DType dtype);
size_t DTypeSize(DType dtype);
std::optional<DType> ParseDType(std::string_view name);

// A tensor to write: a view of bytes owned by the caller, numel(shape) · DTypeSize(dtype) long.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};

// Convenience for fp32 data.
TensorView F32View(std::string name, std::vector<int64_t> shape, std::span<const float> values);

// Writes `tensors` (unique, non-empty names; sizes matching shapes) and `metadata` to `path`
// atomically. Errors name the file and the tensor.
Status WriteFile(const std::string& path, std::span<const TensorView> tensors,
                 const std::map<std::string, std::string>& metadata = {});

// One tensor of an open file.
struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  size_t numel;
  size_t begin;  // offsets into the data section
  size_t end;
};

class SafetensorsFile {
 public:
  // Maps and validates the file; see the header comment.
  static Result<SafetensorsFile> Open(const std::string& path);
  // Validates an in-memory copy of a file (used by tests and for small blobs); `bytes` must
  // outlive the returned object. `label` names it in errors.
  static Result<SafetensorsFile> FromBytes(std::span<const std::byte> bytes,
                                           const std::string& label);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // Tensors in data order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;
  // The raw bytes of a tensor of this file.
  std::span<const std::byte> Data(const TensorInfo& info) const;
  // The tensor `name` as fp32, checking that it exists, is F32 and has `expected_shape` (when
  // given). The span aliases the mapped file.
  Result<std::span<const float>> ReadF32(
      std::string_view name, const std::vector<int64_t>* expected_shape = nullptr) const;

 private:
  SafetensorsFile() = default;
  static Result<SafetensorsFile> Parse(SafetensorsFile file, std::span<const std::byte> bytes);

  std::string path_;
  void* map_ = nullptr;  // mmap'ed region (Open) or null (FromBytes)
  size_t map_size_ = 0;
  const std::byte* data_ = nullptr;  // start of the data section
  size_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace sf::safetensors
