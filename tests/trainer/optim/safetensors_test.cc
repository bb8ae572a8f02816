// safetensors: round trips, interoperability with an independent NumPy reader/writer, and
// refusal of corrupt files with messages that name the file and the problem.
#include "trainer/core/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/trainer/optim/test_util.h"

namespace sf::safetensors {
namespace {

using Bytes = std::vector<std::byte>;

template <typename T>
Bytes ToBytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

Bytes ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Bytes b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

void WriteAll(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A file from a literal header and data, padded like a writer would (or not, when raw).
Bytes MakeFile(std::string header, const Bytes& data, bool pad = true) {
  if (pad) {
    while (header.size() % 8) header += ' ';
  }
  Bytes out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The fixture described in reference/safetensors_check.py.
struct Fixture {
  const std::vector<double> floats = {0.0, -1.5, 2.25, 1000.0, -0.0078125, 3.0};
  Bytes f32, f64, f16, bf16, i64, i32, scalar, empty;
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "quote \" and \xc3\xbc"}};

  Fixture() {
    std::vector<float> vf(floats.begin(), floats.end());
    f32 = ToBytes(vf);
    f64 = ToBytes(floats);
    // IEEE half patterns of the values above.
    f16 = ToBytes(std::vector<uint16_t>{0x0000, 0xBE00, 0x4080, 0x63D0, 0xA000, 0x4200});
    std::vector<uint16_t> b;
    for (float x : vf) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      b.push_back(static_cast<uint16_t>(u >> 16));
    }
    bf16 = ToBytes(b);
    i64 = ToBytes(std::vector<int64_t>{0, -1, 2, 1000, -7, int64_t{1} << 40});
    i32 = ToBytes(std::vector<int32_t>{0, -1, 2, 1000, -7, 2147483647});
    scalar = ToBytes(std::vector<float>{42.5f});
  }

  std::vector<TensorView> Views() const {
    return {{"t_F32", DType::kF32, {2, 3}, f32}, {"t_F64", DType::kF64, {2, 3}, f64},
            {"t_F16", DType::kF16, {2, 3}, f16}, {"t_BF16", DType::kBF16, {2, 3}, bf16},
            {"t_I64", DType::kI64, {2, 3}, i64}, {"t_I32", DType::kI32, {2, 3}, i32},
            {"scalar", DType::kF32, {}, scalar}, {"empty", DType::kF32, {0, 4}, empty}};
  }

  void Check(const SafetensorsFile& file) const {
    EXPECT_EQ(file.metadata(), meta);
    ASSERT_EQ(file.tensors().size(), 8u);
    for (const TensorView& v : Views()) {
      const TensorInfo* info = file.Find(v.name);
      ASSERT_NE(info, nullptr) << v.name;
      EXPECT_EQ(info->dtype, v.dtype) << v.name;
      EXPECT_EQ(info->shape, v.shape) << v.name;
      const auto data = file.Data(*info);
      ASSERT_EQ(data.size(), v.data.size()) << v.name;
      EXPECT_EQ(std::memcmp(data.data(), v.data.data(), data.size()), 0) << v.name;
    }
    auto s = file.ReadF32("scalar");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)[0], 42.5f);
  }
};

TEST(Safetensors, RoundTripsEveryDtypeWithMetadata) {
  sf::testing::ScratchDir dir;
  const Fixture fx;
  const std::string path = dir.File("all.safetensors");
  ASSERT_TRUE(WriteFile(path, fx.Views(), fx.meta).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  fx.Check(*file);
  // Header padded to 8; each tensor aligned to its element size in the mapping.
  const Bytes raw = ReadAll(path);
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  for (const TensorInfo& t : file->tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(file->Data(t).data()) % DTypeSize(t.dtype), 0u) << t.name;
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Safetensors, NumpyReadsOurFile) {
  sf::testing::ScratchDir dir;
  const Fixture fx;
  const std::string path = dir.File("ours.safetensors");
  ASSERT_TRUE(WriteFile(path, fx.Views(), fx.meta).ok());
  std::string log;
  const int rc = sf::testing::RunReference("safetensors_check.py", "read '" + path + "'", &log);
  EXPECT_EQ(rc, 0) << "numpy could not read our file (needs /usr/bin/python3 with numpy):\n" << log;
}

TEST(Safetensors, ReadsAFileWrittenByNumpy) {
  sf::testing::ScratchDir dir;
  const std::string path = dir.File("numpy.safetensors");
  std::string log;
  const int rc = sf::testing::RunReference("safetensors_check.py", "write '" + path + "'", &log);
  ASSERT_EQ(rc, 0) << "the numpy writer failed (needs /usr/bin/python3 with numpy):\n" << log;
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Fixture().Check(*file);
}

TEST(Safetensors, WriterRejectsBadInput) {
  sf::testing::ScratchDir dir;
  const Bytes four(4);
  std::vector<TensorView> wrong_size = {{"a", DType::kF32, {2}, four}};
  Status s = WriteFile(dir.File("x"), wrong_size);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'a'"), std::string::npos) << s.message();
  std::vector<TensorView> dup = {{"a", DType::kF32, {1}, four}, {"a", DType::kI32, {1}, four}};
  s = WriteFile(dir.File("x"), dup);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("appears twice"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir.File("x")));
}

// Opens `bytes` as a file and expects a DataLoss error naming the file and containing `what`.
void ExpectRefused(const sf::testing::ScratchDir& dir, const Bytes& bytes,
                   const std::string& what) {
  const std::string path = dir.File("bad.safetensors");
  WriteAll(path, bytes);
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok()) << "accepted a file that should fail with: " << what;
  EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << file.status().ToString();
  EXPECT_NE(file.status().message().find(path), std::string::npos) << file.status().message();
  EXPECT_NE(file.status().message().find(what), std::string::npos) << file.status().message();
}

TEST(Safetensors, RefusesTruncatedFilesAtEveryLength) {
  sf::testing::ScratchDir dir;
  const Fixture fx;
  const std::string path = dir.File("all.safetensors");
  ASSERT_TRUE(WriteFile(path, fx.Views(), fx.meta).ok());
  const Bytes full = ReadAll(path);
  for (size_t n = 0; n < full.size(); ++n) {
    auto file = SafetensorsFile::FromBytes(std::span(full.data(), n), "cut");
    ASSERT_FALSE(file.ok()) << "accepted a file truncated to " << n << " bytes";
    EXPECT_EQ(file.status().code(), StatusCode::kDataLoss);
  }
  ExpectRefused(dir, Bytes(full.begin(), full.begin() + 5), "too short");
  ExpectRefused(dir, Bytes(full.begin(), full.begin() + 40), "runs past the end");
  ExpectRefused(dir, Bytes(full.begin(), full.end() - 1), "truncated");
}

TEST(Safetensors, RefusesHugeHeaderLength) {
  sf::testing::ScratchDir dir;
  Bytes b = MakeFile("{}", {});
  const uint64_t huge = uint64_t{1} << 62;
  std::memcpy(b.data(), &huge, 8);
  ExpectRefused(dir, b, "exceeds the limit");
  const uint64_t past = 1000;
  std::memcpy(b.data(), &past, 8);
  ExpectRefused(dir, b, "runs past the end");
}

TEST(Safetensors, RefusesBadJson) {
  sf::testing::ScratchDir dir;
  ExpectRefused(dir, MakeFile("{\"a\":", {}), "invalid JSON header");
  ExpectRefused(dir, MakeFile("{\"a\" 1}", {}), "invalid JSON header");
  ExpectRefused(dir, MakeFile("[1, 2]", {}), "not a JSON object");
  ExpectRefused(dir, MakeFile("{\"a\":{},\"a\":{}}", {}), "duplicate key");
  ExpectRefused(dir, MakeFile(std::string(5000, '[') + std::string(5000, ']'), {}),
                "nested deeper");
  ExpectRefused(dir, MakeFile("{\"x\":\"\x01\"}", {}), "control character");
  ExpectRefused(dir, MakeFile("{} trailing", {}), "after the JSON value");
}

TEST(Safetensors, RefusesBadEntries) {
  sf::testing::ScratchDir dir;
  const Bytes data(24);
  auto entry = [](const std::string& body) { return "{\"w\":{" + body + "}}"; };
  ExpectRefused(dir,
                MakeFile(entry(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,1000])"), data),
                "run past the 24-byte data section");
  ExpectRefused(dir, MakeFile(entry(R"("dtype":"F32","shape":[2,3],"data_offsets":[8,0])"), data),
                "end before they begin");
  ExpectRefused(dir, MakeFile(entry(R"("dtype":"F32","shape":[2,2],"data_offsets":[0,24])"), data),
                "shape needs 16 bytes");
  ExpectRefused(dir,
                MakeFile(entry(R"("dtype":"F8_E4M3","shape":[24],"data_offsets":[0,24])"), data),
                "unsupported dtype \"F8_E4M3\"");
  ExpectRefused(dir, MakeFile(entry(R"("shape":[6],"data_offsets":[0,24])"), data), "\"dtype\"");
  ExpectRefused(dir, MakeFile(entry(R"("dtype":"F32","shape":[-6],"data_offsets":[0,24])"), data),
                "non-negative integers");
  ExpectRefused(dir, MakeFile(entry(R"("dtype":"F32","shape":[6],"data_offsets":[0])"), data),
                "data_offsets");
  ExpectRefused(
      dir,
      MakeFile(
          entry(
              R"("dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,24])"),
          data),
      "too large");
  ExpectRefused(
      dir,
      MakeFile(entry(R"("dtype":"F32","shape":[6],"data_offsets":[0,18446744073709551616])"), data),
      "data_offsets");
  // Tiling: gap, overlap, unused bytes at the end.
  ExpectRefused(dir,
                MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                         data),
                "(gap)");
  ExpectRefused(dir,
                MakeFile(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                         R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                         data),
                "(overlap)");
  ExpectRefused(dir, MakeFile(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), data),
                "tensors cover 8 bytes but the data section has 24");
  ExpectRefused(dir, MakeFile(R"({"__metadata__":{"k":1}})", {}), "not a string");
}

TEST(Safetensors, MissingFileIsNotFound) {
  auto file = SafetensorsFile::Open("/nonexistent/dir/w.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/dir/w.safetensors"), std::string::npos);
}

TEST(Safetensors, ReadF32ChecksNameDtypeAndShape) {
  sf::testing::ScratchDir dir;
  const Fixture fx;
  const std::string path = dir.File("all.safetensors");
  ASSERT_TRUE(WriteFile(path, fx.Views(), fx.meta).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->ReadF32("nope").status().code(), StatusCode::kNotFound);
  auto wrong_type = file->ReadF32("t_F64");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("is F64, expected F32"), std::string::npos);
  const std::vector<int64_t> shape = {3, 2};
  auto wrong_shape = file->ReadF32("t_F32", &shape);
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().message().find("has shape [2, 3], expected [3, 2]"),
            std::string::npos);
  const std::vector<int64_t> right = {2, 3};
  auto ok = file->ReadF32("t_F32", &right);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)[1], -1.5f);
}

TEST(Safetensors, RandomCorruptionNeverCrashes) {
  sf::testing::ScratchDir dir;
  const Fixture fx;
  const std::string path = dir.File("all.safetensors");
  ASSERT_TRUE(WriteFile(path, fx.Views(), fx.meta).ok());
  const Bytes full = ReadAll(path);
  std::mt19937 rng(42);
  int accepted = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    Bytes b = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly in the header, where the structure is.
      const size_t limit = rng() % 4 ? std::min<size_t>(b.size(), 400) : b.size();
      b[rng() % limit] = static_cast<std::byte>(rng() & 0xFF);
    }
    auto file = SafetensorsFile::FromBytes(b, "fuzz");
    if (file.ok()) {
      ++accepted;  // e.g. a flip inside tensor data: must still be self-consistent
      for (const TensorInfo& t : file->tensors()) {
        ASSERT_LE(t.end, b.size());
        ASSERT_EQ(file->Data(t).size(), t.numel * DTypeSize(t.dtype));
      }
    } else {
      EXPECT_NE(file.status().message().find("fuzz"), std::string::npos);
    }
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace sf::safetensors
