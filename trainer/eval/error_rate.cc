#include "trainer/eval/error_rate.h"

#include <algorithm>
#include <cstdio>

#include "common/utf8.h"

namespace sf::eval {
namespace {

bool Kept(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '\'' || c >= 0x80;
}

// The Levenshtein alignment's counts of hyp against ref (one row of the table at a time, each
// cell carrying its counts; ties prefer substitution, then deletion, then insertion, as sclite).
template <typename Seq>
ErrorCounts Align(const Seq& hyp, const Seq& ref) {
  struct Cell {
    int64_t cost = 0, s = 0, d = 0, i = 0;
  };
  const size_t n = ref.size(), m = hyp.size();
  std::vector<Cell> prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = {static_cast<int64_t>(j), 0, 0, static_cast<int64_t>(j)};
  for (size_t r = 1; r <= n; ++r) {
    cur[0] = {static_cast<int64_t>(r), 0, static_cast<int64_t>(r), 0};
    for (size_t j = 1; j <= m; ++j) {
      const bool same = ref[r - 1] == hyp[j - 1];
      Cell sub = prev[j - 1];
      sub.cost += same ? 0 : 1;
      sub.s += same ? 0 : 1;
      Cell del = prev[j];
      del.cost += 1;
      del.d += 1;
      Cell ins = cur[j - 1];
      ins.cost += 1;
      ins.i += 1;
      Cell best = sub;
      if (del.cost < best.cost) best = del;
      if (ins.cost < best.cost) best = ins;
      cur[j] = best;
    }
    std::swap(prev, cur);
  }
  const Cell& c = prev[m];
  ErrorCounts e;
  e.substitutions = c.s;
  e.deletions = c.d;
  e.insertions = c.i;
  e.reference_length = static_cast<int64_t>(n);
  return e;
}

std::vector<std::string> Words(const std::string& normalized) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < normalized.size()) {
    const size_t j = normalized.find(' ', i);
    out.push_back(normalized.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

template <typename F>
Result<ErrorCounts> Corpus(const std::vector<std::string>& hyps, const std::vector<std::string>& refs, F one) {
  if (hyps.size() != refs.size()) {
    return InvalidArgument(std::to_string(hyps.size()) + " hypotheses for " + std::to_string(refs.size()) +
                           " references");
  }
  ErrorCounts total;
  for (size_t i = 0; i < hyps.size(); ++i) total += one(hyps[i], refs[i]);
  return total;
}

}  // namespace

double ErrorCounts::rate() const {
  if (reference_length == 0) return static_cast<double>(edits());
  return static_cast<double>(edits()) / static_cast<double>(reference_length);
}

std::string ErrorCounts::ToString(const std::string& name) const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s %.2f (S %lld D %lld I %lld / N %lld)", name.c_str(), 100.0 * rate(),
                static_cast<long long>(substitutions), static_cast<long long>(deletions),
                static_cast<long long>(insertions), static_cast<long long>(reference_length));
  return buf;
}

ErrorCounts& ErrorCounts::operator+=(const ErrorCounts& o) {
  substitutions += o.substitutions;
  deletions += o.deletions;
  insertions += o.insertions;
  reference_length += o.reference_length;
  return *this;
}

std::string NormalizeTranscript(std::string_view text) {
  std::string out;
  bool space = false;
  for (char32_t c : DecodeUtf8(text)) {
    if (!Kept(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    AppendUtf8(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c, out);
  }
  return out;
}

ErrorCounts WordErrors(std::string_view hypothesis, std::string_view reference) {
  return Align(Words(NormalizeTranscript(hypothesis)), Words(NormalizeTranscript(reference)));
}

ErrorCounts CharErrors(std::string_view hypothesis, std::string_view reference) {
  return Align(DecodeUtf8(NormalizeTranscript(hypothesis)), DecodeUtf8(NormalizeTranscript(reference)));
}

Result<ErrorCounts> CorpusWordErrors(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::string>& references) {
  return Corpus(hypotheses, references, [](const std::string& h, const std::string& r) { return WordErrors(h, r); });
}

Result<ErrorCounts> CorpusCharErrors(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::string>& references) {
  return Corpus(hypotheses, references, [](const std::string& h, const std::string& r) { return CharErrors(h, r); });
}

}  // namespace sf::eval
