// Helpers shared by the optimizer tests: a scratch directory and running the PyTorch reference.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace sf::testing {

// A fresh directory under $TMPDIR, removed (with its contents) on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sf-optim-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : std::string();
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The directory of the PyTorch/NumPy reference scripts.
inline std::string ReferenceDir() {
  return std::string(SF_SOURCE_DIR) + "/tests/trainer/optim/reference";
}

// Runs `/usr/bin/python3 <reference>/<script> <args>` and returns its output (stdout+stderr)
// in *output. Returns the exit status; a missing interpreter or torch is a failure, never a skip.
inline int RunReference(const std::string& script, const std::string& args, std::string* output) {
  const std::string log = std::filesystem::temp_directory_path().string() + "/sf-optim-ref-" +
                          std::to_string(::getpid()) + ".log";
  const std::string cmd =
      "/usr/bin/python3 '" + ReferenceDir() + "/" + script + "' " + args + " >'" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  output->clear();
  if (FILE* f = std::fopen(log.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) output->append(buf, n);
    std::fclose(f);
  }
  std::remove(log.c_str());
  return rc;
}

}  // namespace sf::testing
