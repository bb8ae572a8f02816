#include "common/secret_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace sf {

Result<std::string> ReadSecretFile(const std::string& path, const std::string& what, size_t min_length) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return NotFound(what + " file " + path + ": cannot read it (does it exist?)");
  if (!S_ISREG(st.st_mode)) return InvalidArgument(what + " file " + path + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return InvalidArgument(what + " file " + path + ": mode " + mode +
                           " lets others read or change it; make it readable by its owner only (chmod 600)");
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return InvalidArgument(what + " file " + path + ": empty or unreadable");
  const size_t begin = line.find_first_not_of(" \t\r");
  const size_t end = line.find_last_not_of(" \t\r");
  line = begin == std::string::npos ? "" : line.substr(begin, end - begin + 1);
  if (line.size() < min_length) {
    return InvalidArgument(what + " file " + path + ": the " + what + " must be at least " + std::to_string(min_length) +
                           " characters");
  }
  return line;
}

Status EnsureSecretFile(const std::string& path, const std::string& what) {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal(what + ": the kernel's random generator failed: " + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  std::string hex = ToHex(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return Status::Ok();
    return Internal(what + " file " + path + ": cannot create it: " + std::strerror(errno));
  }
  hex += "\n";
  const bool written = write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
  close(fd);
  if (!written) return Internal(what + " file " + path + ": cannot write it");
  return Status::Ok();
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

bool SecretEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  // Keep the loop's cost independent of where the first difference is.
  return diff == 0;
}

}  // namespace sf
