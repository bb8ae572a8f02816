// A whole file as bytes, "" when it cannot be opened or read. Meant for /proc files, which
// vanish or fail mid-read (ESRCH) when their process exits: libstdc++'s filebuf throws from
// underflow on a read error whatever the stream's exception mask, so an ifstream read of
// /proc/PID/stat racing the process's exit once terminated the agent (and, before that, a test
// process). Plain read(2) has no such path.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace sf {

inline std::string ReadFileOrEmpty(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[8192];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n < 0) out.clear();
      break;
    }
  }
  ::close(fd);
  return out;
}

}  // namespace sf
