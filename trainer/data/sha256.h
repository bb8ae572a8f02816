// Content hashing for naming cached data by its inputs (SHA-256, from common/sha256.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/sha256.h"
#include "common/status.h"

namespace sf::data {

// The hasher is common/sha256.h's; the data pipeline adds file hashing.
using Sha256 = ::sf::Sha256;

// Feeds the bytes of the file at `path` (length-prefixed) into `hasher`. kNotFound / an I/O
// error naming the file when it can't be read.
Status HashFileInto(const std::string& path, Sha256& hasher);

}  // namespace sf::data
