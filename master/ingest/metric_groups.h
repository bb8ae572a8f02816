// A metric report's group (Determined's core_context.train.report_metrics(group, ...)), stored as
// the metrics row's kind:
// - "training": the trial's progress (its batches raise the trial's total);
// - "validation": what the searcher and checkpoint retention read (searcher.metric);
// - a group of the trial's own ("inference", "eval_bleu"): stored and read back like the others,
//   never read by the searcher: a name of lowercase ASCII letters, digits and '_', starting
//   with a letter, at most 64 characters.
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace sf::master {

// Empty when `group` is a metric group; otherwise what is wrong with it, in one line.
inline std::string MetricGroupProblem(std::string_view group) {
  if (group.empty()) return "is empty";
  if (group.size() > 64) return "is longer than 64 characters";
  if (group[0] < 'a' || group[0] > 'z') return "must start with a lowercase letter";
  for (char c : group) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return "may hold only lowercase letters, digits and _";
    }
  }
  return "";
}

}  // namespace sf::master
