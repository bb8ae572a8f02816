// Tests read /proc files of processes that may exit at any moment: see common/read_file.h.
#pragma once

#include "common/read_file.h"

namespace sf::testing {

using sf::ReadFileOrEmpty;

}  // namespace sf::testing
