// Secrets kept in files (the agent join token, docs/security.md): read from a file only the
// owner can read, never taken from a command line, never logged.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace sf {

// The secret in `path`: its first line, without surrounding whitespace. Errors name the file
// and the problem: missing or unreadable, readable or writable by group or others (chmod 600),
// or shorter than `min_length` characters. `what` names the secret in messages ("join token").
Result<std::string> ReadSecretFile(const std::string& path, const std::string& what, size_t min_length = 32);

// Makes `path` hold a new random secret (64 hex digits from the kernel's random generator),
// created with mode 600, unless the file already exists (then it is kept as it is).
Status EnsureSecretFile(const std::string& path, const std::string& what);

// Lower-case hex of `bytes` (secrets and MACs are written this way).
std::string ToHex(std::string_view bytes);

// Constant-time equality (the time depends on the lengths only), for comparing secrets.
bool SecretEquals(std::string_view a, std::string_view b);

}  // namespace sf
