// Small helpers for tests that run real processes.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace sf::agent::testing {

// Writes an executable /bin/sh script `name` into `dir` and returns its path.
inline std::string WriteScript(const std::string& dir, const std::string& name,
                               const std::string& body) {
  std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

// How many lines of `text` (a process's log) contain `needle`.
inline int LinesWith(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// True while `pid` is a live process (neither gone nor a zombie).
inline bool ProcessAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close_paren = content.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= content.size()) return false;
  char state = content[close_paren + 2];
  return state != 'Z' && state != 'X';
}

// Waits until `pid` is no longer alive; false at the timeout.
inline bool WaitUntilDead(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (ProcessAlive(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Reads a pid written by a script (0 when absent), waiting up to `timeout` for it.
inline pid_t ReadPidFile(const std::string& path, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::ifstream in(path);
    long pid = 0;
    if (in >> pid && pid > 0) return static_cast<pid_t>(pid);
    if (std::chrono::steady_clock::now() >= deadline) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sf::agent::testing
