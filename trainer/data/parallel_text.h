// Reading and checking raw parallel text: two UTF-8 files, one sentence per line, line i of
// the source translating line i of the target.
//
// Every problem is a Status naming the file (and line where there is one):
//   kNotFound         "file /d/train.de: does not exist"
//   kInvalidArgument  "file /d/train.de: is empty", "file /d/train.de: line 12: invalid UTF-8
//                     (byte 0xff at column 7)", "file /d/train.de: can't read: Permission denied",
//                     "line counts differ: /d/train.de has 2000 lines, /d/train.en has 1999"
// Lines are returned without their terminator ("\n" or "\r\n"). Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sf::data {

// Byte offset of the first invalid UTF-8 sequence in `s` (overlong forms, surrogates and code
// points above U+10FFFF are invalid), or -1 when `s` is valid.
int64_t FindInvalidUtf8(std::string_view s);

// Reads `path` as UTF-8 lines (see the header comment for the errors).
Result<std::vector<std::string>> ReadTextLines(const std::string& path);

struct ParallelText {
  std::vector<std::string> src;
  std::vector<std::string> tgt;  // same size as src
};

// Reads both files and checks that they have the same number of lines.
Result<ParallelText> ReadParallelText(const std::string& src_path, const std::string& tgt_path);

// True for a line with nothing to translate: empty or only whitespace.
bool IsBlankLine(std::string_view line);
// True for a line that is only subword-continuation markers ("@@", "@@ @@"), as in the junk
// lines of the Multi30k copy: no real text, and "@@" clashes with BPE markers.
bool IsMarkerOnlyLine(std::string_view line);

}  // namespace sf::data
