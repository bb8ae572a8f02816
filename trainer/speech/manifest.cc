#include "trainer/speech/manifest.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "common/utf8.h"

namespace sf::speech {
namespace {

constexpr const char* kKnownColumns = "audio, duration, text, id, speaker";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitTabs(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    if (tab == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
}

}  // namespace

Result<std::vector<Utterance>> ReadManifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFound(path + ": manifest does not exist");
    return InvalidArgument(path + ": can't read the manifest: " + std::strerror(errno));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return InvalidArgument(path + ": read error");
  const std::string content = buffer.str();
  const std::filesystem::path base = std::filesystem::path(path).parent_path();

  auto where = [&](int64_t line) { return path + ":" + std::to_string(line) + ": "; };

  enum Column { kAudio, kDuration, kText, kId, kSpeaker, kUnknown };
  std::vector<Column> columns;
  int index[5] = {-1, -1, -1, -1, -1};
  std::vector<Utterance> out;
  std::map<std::string, int64_t> ids;  // id -> line, when the manifest names them

  size_t pos = 0;
  int64_t line_number = 0;
  bool header_seen = false;
  if (content.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string::npos) end = content.size();
    std::string_view line(content.data() + pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!IsText(line)) return InvalidArgument(where(line_number) + "invalid UTF-8 (or a NUL byte)");
    if (line.empty()) continue;
    std::vector<std::string_view> fields = SplitTabs(line);

    if (!header_seen) {
      header_seen = true;
      for (size_t i = 0; i < fields.size(); ++i) {
        std::string name(Trim(fields[i]));
        Column c = name == "audio"      ? kAudio
                   : name == "duration" ? kDuration
                   : name == "text"     ? kText
                   : name == "id"       ? kId
                   : name == "speaker"  ? kSpeaker
                                        : kUnknown;
        if (c == kUnknown) {
          return InvalidArgument(where(line_number) + "unknown column '" + name +
                                 "' in the header (known: " + kKnownColumns + ")");
        }
        if (index[c] >= 0) {
          return InvalidArgument(where(line_number) + "column '" + name +
                                 "' appears twice in the header");
        }
        index[c] = int(i);
        columns.push_back(c);
      }
      for (const char* required : {"audio", "duration", "text"}) {
        Column c = std::string_view(required) == "audio"      ? kAudio
                   : std::string_view(required) == "duration" ? kDuration
                                                              : kText;
        if (index[c] < 0) {
          return InvalidArgument(where(line_number) + "the header has no column '" + required +
                                 "' (required: audio, duration, text; optional: id, speaker)");
        }
      }
      continue;
    }

    if (fields.size() != columns.size()) {
      return InvalidArgument(where(line_number) + std::to_string(fields.size()) + " field" +
                             (fields.size() == 1 ? "" : "s") + ", the header has " +
                             std::to_string(columns.size()));
    }
    Utterance u;
    u.line = line_number;
    std::string_view audio = Trim(fields[size_t(index[kAudio])]);
    if (audio.empty()) return InvalidArgument(where(line_number) + "column audio: empty path");
    std::filesystem::path audio_path(audio);
    u.audio = audio_path.is_absolute() || base.empty() ? audio_path.string()
                                                       : (base / audio_path).string();

    std::string duration(Trim(fields[size_t(index[kDuration])]));
    char* parse_end = nullptr;
    errno = 0;
    u.duration = duration.empty() ? 0 : std::strtod(duration.c_str(), &parse_end);
    if (duration.empty() || parse_end != duration.c_str() + duration.size() || errno == ERANGE ||
        !std::isfinite(u.duration) || u.duration <= 0) {
      return InvalidArgument(where(line_number) + "column duration: '" + duration +
                             "' is not a positive number of seconds");
    }

    u.text = std::string(Trim(fields[size_t(index[kText])]));
    if (u.text.empty())
      return InvalidArgument(where(line_number) + "column text: empty transcript");

    if (index[kSpeaker] >= 0) u.speaker = std::string(Trim(fields[size_t(index[kSpeaker])]));
    if (index[kId] >= 0) u.id = std::string(Trim(fields[size_t(index[kId])]));
    if (u.id.empty()) {
      u.id = "line " + std::to_string(line_number);
    } else {
      auto [it, inserted] = ids.emplace(u.id, line_number);
      if (!inserted) {
        return InvalidArgument(where(line_number) + "column id: '" + u.id +
                               "' is already the id of line " + std::to_string(it->second));
      }
    }
    out.push_back(std::move(u));
  }
  if (!header_seen) return InvalidArgument(path + ": empty manifest (no header line)");
  if (out.empty()) return InvalidArgument(path + ": no utterances (only a header)");
  return out;
}

}  // namespace sf::speech
