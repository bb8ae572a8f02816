#include "trainer/speech/char_vocab.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/log.h"
#include "common/utf8.h"
#include "trainer/eval/error_rate.h"

namespace sf::speech {
namespace {

constexpr const char* kBlankSymbol = "<blank>";
constexpr const char* kSpaceSymbol = "<space>";

std::vector<char32_t> CodePoints(std::string_view s) {
  std::vector<char32_t> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = Utf8SequenceAt(s, i);
    const auto c0 = static_cast<unsigned char>(s[i]);
    if (n == 0) {  // not UTF-8: the byte stands for itself (NormalizeTranscript never emits this)
      out.push_back(c0);
      ++i;
      continue;
    }
    char32_t cp = n == 1 ? c0 : c0 & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string Utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
  return out;
}

}  // namespace

void CharVocabulary::Add(char32_t cp) {
  if (ids_.count(cp)) return;
  ids_.emplace(cp, int32_t(symbols_.size()));
  symbols_.push_back(Utf8(cp));
  code_points_.push_back(cp);
}

CharVocabulary CharVocabulary::Build(const std::vector<std::string>& transcripts) {
  CharVocabulary v;
  v.symbols_.push_back(kBlankSymbol);
  v.code_points_.push_back(0);
  v.Add(U' ');
  v.Add(U'\'');
  for (char32_t c = U'a'; c <= U'z'; ++c) v.Add(c);
  for (char32_t c = U'0'; c <= U'9'; ++c) v.Add(c);
  for (const std::string& t : transcripts) {
    for (char32_t c : CodePoints(eval::NormalizeTranscript(t))) v.Add(c);
  }
  return v;
}

CharVocabulary CharVocabulary::Build(const std::vector<Utterance>& training) {
  std::vector<std::string> texts;
  texts.reserve(training.size());
  for (const Utterance& u : training) texts.push_back(u.text);
  return Build(texts);
}

int32_t CharVocabulary::id(char32_t cp) const {
  auto it = ids_.find(cp);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int32_t> CharVocabulary::Encode(std::string_view text, int64_t* unknown) const {
  std::vector<int32_t> out;
  for (char32_t c : CodePoints(eval::NormalizeTranscript(text))) {
    const int32_t i = id(c);
    if (i < 0) {
      if (unknown) ++*unknown;
      continue;
    }
    out.push_back(i);
  }
  return out;
}

std::string CharVocabulary::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t i : ids) {
    if (i <= kBlank || i >= size()) continue;
    out += symbols_[size_t(i)];
  }
  return out;
}

std::string CharVocabulary::ToText() const {
  std::string text;
  for (size_t i = 0; i < symbols_.size(); ++i) {
    text += i == size_t(kSpace) ? std::string(kSpaceSymbol) : symbols_[i];
    text += '\n';
  }
  return text;
}

Status CharVocabulary::Save(const std::string& path) const {
  const std::string text = ToText();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Internal(tmp + ": can't write: " + std::strerror(errno));
    out << text;
    out.flush();
    if (!out) return Internal(tmp + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal(path + ": can't rename " + tmp + " into place: " + ec.message());
  return Status::Ok();
}

Result<CharVocabulary> CharVocabulary::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFound(path + ": vocabulary does not exist");
    return InvalidArgument(path + ": can't read: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return FromText(text.str(), path);
}

Result<CharVocabulary> CharVocabulary::FromText(const std::string& text, const std::string& name) {
  CharVocabulary v;
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  auto where = [&]() { return name + ":" + std::to_string(number) + ": "; };
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1) {
      if (line != kBlankSymbol)
        return InvalidArgument(where() + "the first symbol must be " + kBlankSymbol);
      v.symbols_.push_back(kBlankSymbol);
      v.code_points_.push_back(0);
      continue;
    }
    if (number == 2) {
      if (line != kSpaceSymbol)
        return InvalidArgument(where() + "the second symbol must be " + kSpaceSymbol);
      v.Add(U' ');
      continue;
    }
    if (!IsText(line)) return InvalidArgument(where() + "invalid UTF-8");
    std::vector<char32_t> cps = CodePoints(line);
    if (cps.size() != 1) {
      return InvalidArgument(where() + "'" + line + "' is not one character");
    }
    if (cps[0] == U' ' || v.id(cps[0]) >= 0) {
      return InvalidArgument(where() + "'" + line + "' appears twice");
    }
    v.Add(cps[0]);
  }
  if (number < 2)
    return InvalidArgument(name + ": not a character vocabulary (fewer than 2 lines)");
  return v;
}

Result<EncodedTargets> EncodeTargets(const std::string& manifest_path,
                                     const std::vector<Utterance>& utterances,
                                     const CharVocabulary& vocabulary) {
  EncodedTargets out;
  out.targets.reserve(utterances.size());
  std::string first;
  for (const Utterance& u : utterances) {
    int64_t unknown = 0;
    std::vector<int32_t> ids = vocabulary.Encode(u.text, &unknown);
    if (eval::NormalizeTranscript(u.text).empty()) {
      return InvalidArgument(manifest_path + ":" + std::to_string(u.line) + ": column text: '" +
                             u.text +
                             "' is empty after normalisation (no letter, digit or apostrophe)");
    }
    if (unknown > 0) {
      if (out.utterances_with_unknown++ == 0) first = manifest_path + ":" + std::to_string(u.line);
      out.unknown_characters += unknown;
    }
    out.targets.push_back(std::move(ids));
  }
  if (out.unknown_characters > 0) {
    log::Warn("speech", {{"event", "unknown_characters"},
                         {"manifest", manifest_path},
                         {"characters", std::to_string(out.unknown_characters)},
                         {"utterances", std::to_string(out.utterances_with_unknown)},
                         {"first", first},
                         {"note", "skipped in the targets; the references keep them"}});
  }
  return out;
}

}  // namespace sf::speech
