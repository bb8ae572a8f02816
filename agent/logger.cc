// The agent's log calls, forwarded to the project's structured logger (common/log.h), so every
// daemon writes the same `LEVEL TIME COMPONENT key=value` lines.
#include "agent/logger.h"

#include "common/log.h"

namespace sf::agent {
namespace {
log::Level ToCommon(LogLevel level) { return static_cast<log::Level>(static_cast<int>(level)); }
}  // namespace

Result<LogLevel> ParseLogLevel(std::string_view name) {
  log::Level level;
  if (!log::ParseLevel(std::string(name), level)) {
    return InvalidArgument("log level \"" + std::string(name) + "\" must be one of debug, info, warn, error");
  }
  return static_cast<LogLevel>(static_cast<int>(level));
}

void SetLogLevel(LogLevel level) { log::SetLevel(ToCommon(level)); }

bool LogEnabled(LogLevel level) { return log::Enabled(ToCommon(level)); }

void LogEvent(LogLevel level, std::string_view component, std::string_view event,
              std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  std::vector<std::pair<std::string, std::string>> all;
  all.reserve(fields.size() + 1);
  all.emplace_back("event", std::string(event));
  for (const auto& [k, v] : fields) all.emplace_back(std::string(k), v);
  log::Write(ToCommon(level), std::string(component), all);
}

}  // namespace sf::agent
