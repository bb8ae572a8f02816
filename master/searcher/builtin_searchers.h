// The built-in search methods, one file each; MakeSearchMethod (search_method.cc) picks one by
// searcher.name. Adding a method is one file plus one line there. Each factory checks that its
// method can run the config and errors (kInvalidArgument, naming the field) when it can't.
#pragma once

#include <memory>

#include "master/searcher/search_method.h"

namespace sf::master {

Result<std::unique_ptr<SearchMethod>> MakeSingleSearch(const config::ExperimentConfig& config);
Result<std::unique_ptr<SearchMethod>> MakeGridSearch(const config::ExperimentConfig& config);
Result<std::unique_ptr<SearchMethod>> MakeRandomSearch(const config::ExperimentConfig& config);
Result<std::unique_ptr<SearchMethod>> MakeAdaptiveAshaSearch(
    const config::ExperimentConfig& config);

}  // namespace sf::master
