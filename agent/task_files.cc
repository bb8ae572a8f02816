#include "agent/task_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/read_file.h"

namespace sf::agent {

// The exit status a trainer left in <task dir>/exit_status before returning (sf-trainer
// cluster does), if any: a whole line holding an integer in [0, 255].
std::optional<int> RecordedExitStatus(const std::string& task_dir) {
  std::ifstream in(task_dir + "/exit_status");
  int code = -1;
  std::string rest;
  if (!(in >> code) || code < 0 || code > 255 || (in >> rest)) return std::nullopt;
  return code;
}

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) {
      out += ',';
    }
    out += item;
  }
  return out;
}

// Field 22 of /proc/PID/stat (start time in clock ticks since boot): with the pid it names
// one process for the life of the machine. 0 when the process does not exist.
uint64_t ProcessStartTime(pid_t pid) {
  // Not an ifstream: the process may exit while its stat is read (see common/read_file.h).
  const std::string content = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  auto close_paren = content.rfind(')');
  if (close_paren == std::string::npos) {
    return 0;
  }
  std::istringstream fields(content.substr(close_paren + 2));
  std::string field;
  // After "pid (comm) ": state is field 3, starttime is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) {
      return 0;
    }
    if (i == 3 && (field == "Z" || field == "X")) {
      return 0;  // exited, not yet reaped
    }
  }
  return std::strtoull(field.c_str(), nullptr, 10);
}

std::map<std::string, std::string> ReadKeyValues(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) {
      out[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return out;
}

int PruneTaskDirectories(const std::string& tasks_dir, std::chrono::seconds keep,
                         const std::set<std::string>& running) {
  namespace fs = std::filesystem;
  if (keep.count() <= 0) return 0;
  std::error_code ec;
  const auto cutoff = fs::file_time_type::clock::now() - keep;
  int deleted = 0;
  for (auto it = fs::directory_iterator(tasks_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code entry_ec;
    if (!it->is_directory(entry_ec) || running.count(it->path().filename().string())) continue;
    if (fs::exists(it->path() / kStateFile, entry_ec)) continue;  // a task still running (or adoptable)
    // The newest change of the directory or a file directly in it (the logs grow in place).
    auto newest = fs::last_write_time(it->path(), entry_ec);
    if (entry_ec) continue;
    bool readable = true;
    for (auto f = fs::directory_iterator(it->path(), entry_ec); !entry_ec && f != fs::directory_iterator();
         f.increment(entry_ec)) {
      std::error_code time_ec;
      const auto t = fs::last_write_time(f->path(), time_ec);
      if (time_ec) continue;
      newest = std::max(newest, t);
    }
    if (entry_ec) readable = false;
    if (!readable || newest > cutoff) continue;
    fs::remove_all(it->path(), entry_ec);
    if (!entry_ec) ++deleted;
  }
  return deleted;
}

}  // namespace sf::agent
