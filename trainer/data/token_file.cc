#include "trainer/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sf::data {
namespace {

constexpr char kMagic[8] = {'S', 'F', 'T', 'O', 'K', '0', '1', '\0'};

Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal("can't write " + path + ": " + std::strerror(errno));
    }
    p += n;
    size -= size_t(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteTokenFile(const std::string& path, const std::vector<std::vector<int32_t>>& sequences,
                      const std::vector<int64_t>& lines) {
  if (lines.size() != sequences.size()) return Internal("token file: lines/sequences differ");
  int64_t n = int64_t(sequences.size());
  std::vector<int64_t> offsets(sequences.size() + 1, 0);
  for (size_t i = 0; i < sequences.size(); ++i) {
    offsets[i + 1] = offsets[i] + int64_t(sequences[i].size());
  }
  int64_t t = offsets.back();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("can't create " + path + ": " + std::strerror(errno));
  Status st = WriteAll(fd, kMagic, 8, path);
  if (st.ok()) st = WriteAll(fd, &n, 8, path);
  if (st.ok()) st = WriteAll(fd, &t, 8, path);
  if (st.ok()) st = WriteAll(fd, offsets.data(), offsets.size() * 8, path);
  if (st.ok()) st = WriteAll(fd, lines.data(), lines.size() * 8, path);
  for (size_t i = 0; st.ok() && i < sequences.size(); ++i) {
    st = WriteAll(fd, sequences[i].data(), sequences[i].size() * 4, path);
  }
  if (st.ok() && ::fsync(fd) != 0)
    st = Internal("can't fsync " + path + ": " + std::strerror(errno));
  ::close(fd);
  return st;
}

Result<std::unique_ptr<MappedTokenFile>> MappedTokenFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("token file " + path + ": does not exist");
    return Internal("can't open " + path + ": " + std::strerror(errno));
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    ::close(fd);
    return Internal("can't stat " + path);
  }
  size_t size = size_t(sb.st_size);
  if (size < 24) {
    ::close(fd);
    return DataLoss("token file " + path + ": truncated");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return Internal("can't map " + path + ": " + std::strerror(errno));
  std::unique_ptr<MappedTokenFile> f(new MappedTokenFile());
  f->base_ = base;
  f->mapped_size_ = size;
  const char* p = static_cast<const char*>(base);
  if (std::memcmp(p, kMagic, 8) != 0) return DataLoss("token file " + path + ": bad magic");
  std::memcpy(&f->num_sequences_, p + 8, 8);
  std::memcpy(&f->num_tokens_, p + 16, 8);
  int64_t n = f->num_sequences_, t = f->num_tokens_;
  if (n < 0 || t < 0 || size != size_t(24 + 8 * (n + 1) + 8 * n + 4 * t)) {
    return DataLoss("token file " + path + ": size does not match its header");
  }
  f->offsets_ = reinterpret_cast<const int64_t*>(p + 24);
  f->lines_ = f->offsets_ + n + 1;
  f->tokens_ = reinterpret_cast<const int32_t*>(f->lines_ + n);
  if (f->offsets_[0] != 0 || f->offsets_[n] != t) {
    return DataLoss("token file " + path + ": offsets do not match its header");
  }
  return f;
}

MappedTokenFile::~MappedTokenFile() {
  if (base_) ::munmap(base_, mapped_size_);
}

}  // namespace sf::data
