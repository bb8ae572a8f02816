#include "agent/task_files.h"

#include <cstdlib>
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

}  // namespace sf::agent
