// `.sfignore`: which files of a context directory stay out of its archive (docs/core-api.md).
//
// The syntax is .gitignore's, so users write what they already know:
// - one pattern per line; blank lines and lines starting with `#` are skipped; trailing spaces
//   are trimmed;
// - `!pattern` re-includes what an earlier pattern excluded;
// - a pattern with a `/` anywhere but at its end is anchored to the context's root (a leading
//   `/` is dropped); otherwise it matches a name at any depth;
// - a trailing `/` makes the pattern match directories only;
// - `*` matches anything but `/`, `?` one character but `/`, `[...]` a class (`[!...]` or
//   `[^...]` negated), and `**` any number of directories (`**/x`, `a/**/b`, `a/**`);
// - the last pattern that matches a path decides; a directory that is excluded excludes
//   everything under it (nothing inside can be re-included, as in git).
//
// The Python package (python/steadfast/_context_archive.py) implements the same rules; both are
// tested against the same table of patterns and paths. Immutable once parsed: thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sf::context {

class IgnoreRules {
 public:
  // Never fails: a line that is not a meaningful pattern simply matches nothing.
  static IgnoreRules Parse(std::string_view text);

  // Whether `path` (relative to the root, `/`-separated, no leading `/`) is excluded by the
  // rules on their own; the caller skips the contents of an excluded directory.
  bool Excluded(std::string_view path, bool is_directory) const;

  size_t size() const { return rules_.size(); }

 private:
  struct Rule {
    std::string pattern;
    bool negated = false;
    bool directory_only = false;
    bool anchored = false;
  };
  std::vector<Rule> rules_;
};

// Glob matching as the rules use it (`*`, `?`, `[...]`, `**` as whole path segments), over
// the whole of `text`. Exposed for tests.
bool GlobMatch(std::string_view pattern, std::string_view text);

}  // namespace sf::context
