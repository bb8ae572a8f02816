// Structured logging for sf-agent, written through common/log.h: one line per event on stderr,
//
//   I 2026-11-22T02:50:01.123Z link event=connected master=127.0.0.1:8090
//
// that is `LEVEL TIME COMPONENT key=value ...`. Values holding spaces, quotes or '=' are quoted.
//
// Thread-safe: lines from concurrent threads never interleave. The level is process-wide.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace sf::agent {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// "debug" | "info" | "warn" (or "warning") | "error"; anything else is an InvalidArgument.
Result<LogLevel> ParseLogLevel(std::string_view name);

// Lines below `level` are dropped. Default: kInfo.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

using LogField = std::pair<std::string_view, std::string>;

// Writes `level time component event=<event> key=value ...` to stderr.
void LogEvent(LogLevel level, std::string_view component, std::string_view event,
              std::initializer_list<LogField> fields = {});


}  // namespace sf::agent
