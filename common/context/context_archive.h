// Context archives: how a user trial's code travels from `sf experiment create` to every task
// (docs/core-api.md). The CLI packs the experiment's context directory; the master stores the
// archive with the experiment; each agent fetches it once per digest and unpacks a fresh copy
// into every task's working directory.
//
// The archive is a gzip-compressed POSIX (pax) tar of the directory's regular files (their
// permission bits kept, so scripts stay executable), directories and symbolic links, entries
// relative to the directory, in sorted order, minus what `.sfignore` excludes
// (ignore_rules.h). Sockets, FIFOs and devices are left out.
//
// Errors are values and name what is wrong: a context over the size limit names its largest
// files; an archive that would write outside its destination (an absolute or `..` path, a link
// pointing out of it), holds anything but files, directories and links, or unpacks to more than
// the limit is refused before or while writing, naming the entry. Functions are thread-safe
// (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sf::context {

// At most this many bytes of file content in a context, packed or unpacked.
inline constexpr int64_t kMaxContextBytes = int64_t{96} << 20;

struct PackedContext {
  std::string archive;  // the .tar.gz bytes
  std::string sha256;   // of `archive`, lower-case hex
  int64_t file_bytes = 0;
  int64_t files = 0;    // regular files
  std::vector<std::string> paths;  // the regular files packed, relative, sorted
};

// Packs `directory`. kInvalidArgument when it is not a readable directory or holds more than
// `max_file_bytes` of files after .sfignore; kDataLoss when a file can't be read.
Result<PackedContext> PackContext(const std::string& directory, int64_t max_file_bytes = kMaxContextBytes);

// Unpacks `archive` into `destination` (created if missing; it should be empty: existing files
// are not overwritten, which is an error). kInvalidArgument for an archive that is not a
// gzip tar, or has an unsafe or unsupported entry, or more than `max_file_bytes` of content.
Status UnpackContext(std::string_view archive, const std::string& destination,
                     int64_t max_file_bytes = kMaxContextBytes);

// The checks of UnpackContext without writing anything: what the master runs on an archive a
// client sent before storing it.
Status ValidateContext(std::string_view archive, int64_t max_file_bytes = kMaxContextBytes);

// One file or symbolic link of an archive (directories are implied by the paths).
struct ContextEntry {
  std::string path;         // relative
  int64_t size = 0;         // a file's bytes; 0 for a link
  std::string link_target;  // a link's target; empty for a file
};
// The files and links of `archive`, sorted by path, after the checks of ValidateContext (its
// errors, unchanged).
Result<std::vector<ContextEntry>> ListContext(std::string_view archive, int64_t max_file_bytes = kMaxContextBytes);

}  // namespace sf::context
