// Human-readable tables for the CLI's listings.
#pragma once

#include <string>
#include <vector>

namespace sf::cli {

// Prints rows under a header, columns padded to their widest cell.
void PrintTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace sf::cli
