// Structured logs: one line per event, `LEVEL TIME COMPONENT key=value ...`, to stderr.
//
//   log::Info("trial", {{"event", "started"}, {"id", "12"}});
//   -> I 2026-11-22T03:10:04.123Z trial event=started id=12
//
// Values with spaces or quotes are quoted. Thread-safe (each line is one write). The level is
// set once at start (SetLevel), from flags or config.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace sf::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
using Fields = std::initializer_list<std::pair<std::string, std::string>>;

void SetLevel(Level level);
// "debug", "info", "warn", "error"; false when the name is unknown.
bool ParseLevel(const std::string& name, Level& level);

void Write(Level level, const std::string& component, Fields fields);
// The same with fields built at run time.
void Write(Level level, const std::string& component,
           const std::vector<std::pair<std::string, std::string>>& fields);
bool Enabled(Level level);
inline void Debug(const std::string& c, Fields f) { Write(Level::kDebug, c, f); }
inline void Info(const std::string& c, Fields f) { Write(Level::kInfo, c, f); }
inline void Warn(const std::string& c, Fields f) { Write(Level::kWarn, c, f); }
inline void Error(const std::string& c, Fields f) { Write(Level::kError, c, f); }

}  // namespace sf::log
