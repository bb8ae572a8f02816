#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

namespace sf::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};

void AppendValue(const std::string& v, std::string& out) {
  bool quote = v.empty() || v.find_first_of(" \"=\t\n") != std::string::npos;
  if (!quote) {
    out += v;
    return;
  }
  out.push_back('"');
  for (char c : v) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  out.push_back('"');
}

}  // namespace

void SetLevel(Level level) { g_level = static_cast<int>(level); }

bool ParseLevel(const std::string& name, Level& level) {
  if (name == "debug") level = Level::kDebug;
  else if (name == "info") level = Level::kInfo;
  else if (name == "warn" || name == "warning") level = Level::kWarn;
  else if (name == "error") level = Level::kError;
  else return false;
  return true;
}

bool Enabled(Level level) { return static_cast<int>(level) >= g_level.load(); }

void Write(Level level, const std::string& component, Fields fields) {
  Write(level, component, std::vector<std::pair<std::string, std::string>>(fields));
}

void Write(Level level, const std::string& component,
           const std::vector<std::pair<std::string, std::string>>& fields) {
  if (!Enabled(level)) return;
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[96];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  std::string line;
  line.push_back(kLetters[static_cast<int>(level)]);
  line += ' ';
  line += stamp;
  line += ' ';
  line += component;
  for (const auto& [k, v] : fields) {
    line += ' ';
    line += k;
    line += '=';
    AppendValue(v, line);
  }
  line += '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace sf::log
