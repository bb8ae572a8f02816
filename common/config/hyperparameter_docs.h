// docs/config.md's hyperparameter reference, generated from the schema (hyperparameter_schema.h)
// so the documented names, types, ranges, defaults and families are the validator's and the
// trainer's. tests/common/hyperparameter_docs_test.cc diffs the block in docs/config.md against
// it (SF_UPDATE_DOCS=1 rewrites the block).
#pragma once

#include <string>

namespace sf::config {

// The markers around the generated block in docs/config.md.
inline constexpr const char* kHyperparameterDocsBegin =
    "<!-- BEGIN GENERATED hyperparameter reference (common/config/hyperparameter_docs.cc) -->";
inline constexpr const char* kHyperparameterDocsEnd = "<!-- END GENERATED hyperparameter reference -->";

// Markdown: one table row per hyperparameter and group member (name, type, default, range or
// values, families), then each family's archs with every value a trial of that arch is completed
// with (WithDefaults). Deterministic.
std::string HyperparameterReferenceMarkdown();

}  // namespace sf::config
