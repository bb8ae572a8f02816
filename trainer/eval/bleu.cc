#include "trainer/eval/bleu.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <istream>
#include <map>
#include <ostream>
#include <unordered_map>

#include "common/command_line.h"
#include "common/utf8.h"
#include "common/value.h"

namespace sf::eval {
namespace {

// ---- UTF-8 <-> code points (common/utf8.h; bad bytes become U+FFFD) ----

std::u32string Decode(std::string_view s) { return DecodeUtf8(s); }

std::string Encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, out);
  return out;
}

// Python's str.isspace() (what str.split() and str.rstrip() use).
bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool IsDigit(char32_t c) { return c >= '0' && c <= '9'; }

// The first 13a regex's class: [{-~[-` -&(-+:-@/]
bool IsSplitPunct(char32_t c) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}

std::vector<std::u32string> SplitWhitespace(const std::u32string& s) {
  std::vector<std::u32string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsPythonSpace(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !IsPythonSpace(s[j])) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

std::string RStrip(std::string_view s) {
  std::u32string u = Decode(s);
  while (!u.empty() && IsPythonSpace(u.back())) u.pop_back();
  return Encode(u);
}

// Tokens of a preprocessed segment, as Python's str.split().
std::vector<std::string> Words(std::string_view s) {
  std::vector<std::string> out;
  for (const auto& w : SplitWhitespace(Decode(s))) out.push_back(Encode(w));
  return out;
}

// n-gram -> count for orders 1..max_order; the key joins words with '\x01'.
using NgramCounts = std::unordered_map<std::string, int64_t>;

NgramCounts CountNgrams(const std::vector<std::string>& words, int max_order) {
  NgramCounts counts;
  for (int n = 1; n <= max_order; ++n) {
    for (size_t i = 0; i + n <= words.size(); ++i) {
      std::string key = std::to_string(n);
      for (int k = 0; k < n; ++k) {
        key += '\x01';
        key += words[i + k];
      }
      ++counts[key];
    }
  }
  return counts;
}

double MyLog(double x) { return x > 0 ? std::log(x) : -9999999999.0; }

std::string Preprocess(std::string_view segment, const BleuOptions& o) {
  std::string s(segment);
  if (o.lowercase) s = LowercaseUtf8(s);
  s = RStrip(s);
  if (o.tokenize == "13a") return Tokenize13a(s);
  return s;
}

}  // namespace

std::string Tokenize13a(std::string_view input) {
  std::string line(input);
  ReplaceAll(line, "<skipped>", "");
  ReplaceAll(line, "-\n", "");
  ReplaceAll(line, "\n", " ");
  ReplaceAll(line, "&quot;", "\"");
  ReplaceAll(line, "&amp;", "&");
  ReplaceAll(line, "&lt;", "<");
  ReplaceAll(line, "&gt;", ">");
  std::u32string s = U" " + Decode(line) + U" ";

  // Each rule is one left-to-right, non-overlapping pass, as Python's re.sub.
  std::u32string t;
  for (char32_t c : s) {
    if (IsSplitPunct(c)) {
      t += U' ';
      t += c;
      t += U' ';
    } else {
      t += c;
    }
  }
  auto is_period_comma = [](char32_t c) { return c == U'.' || c == U','; };
  // ([^0-9])([\.,]) -> "\1 \2 "
  s.clear();
  for (size_t i = 0; i < t.size();) {
    if (i + 1 < t.size() && !IsDigit(t[i]) && is_period_comma(t[i + 1])) {
      s += t[i];
      s += U' ';
      s += t[i + 1];
      s += U' ';
      i += 2;
    } else {
      s += t[i++];
    }
  }
  // ([\.,])([^0-9]) -> " \1 \2"
  t.clear();
  for (size_t i = 0; i < s.size();) {
    if (i + 1 < s.size() && is_period_comma(s[i]) && !IsDigit(s[i + 1])) {
      t += U' ';
      t += s[i];
      t += U' ';
      t += s[i + 1];
      i += 2;
    } else {
      t += s[i++];
    }
  }
  // ([0-9])(-) -> "\1 \2 "
  s.clear();
  for (size_t i = 0; i < t.size();) {
    if (i + 1 < t.size() && IsDigit(t[i]) && t[i + 1] == U'-') {
      s += t[i];
      s += U' ';
      s += U'-';
      s += U' ';
      i += 2;
    } else {
      s += t[i++];
    }
  }
  std::string out;
  for (const auto& w : SplitWhitespace(s)) {
    if (!out.empty()) out += ' ';
    out += Encode(w);
  }
  return out;
}

std::string LowercaseUtf8(std::string_view text) {
  static locale_t utf8 = [] {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (!l) l = newlocale(LC_CTYPE_MASK, "en_US.UTF-8", (locale_t)0);
    return l;
  }();
  std::u32string u = Decode(text);
  for (char32_t& c : u) {
    if (c < 0x80) {
      if (c >= 'A' && c <= 'Z') c = c - 'A' + 'a';
    } else if (utf8) {
      c = char32_t(towlower_l(wint_t(c), utf8));
    }
  }
  return Encode(u);
}

void BleuStats::Add(const BleuStats& other) {
  sys_len += other.sys_len;
  ref_len += other.ref_len;
  if (correct.size() < other.correct.size()) correct.resize(other.correct.size(), 0);
  if (total.size() < other.total.size()) total.resize(other.total.size(), 0);
  for (size_t i = 0; i < other.correct.size(); ++i) correct[i] += other.correct[i];
  for (size_t i = 0; i < other.total.size(); ++i) total[i] += other.total[i];
}

Result<BleuStats> SegmentStats(std::string_view hypothesis,
                               const std::vector<std::string_view>& references,
                               const BleuOptions& o) {
  const int max_order = o.max_ngram_order;
  NgramCounts ref_ngrams;
  std::vector<int64_t> ref_lens;
  for (std::string_view ref : references) {
    if (ref.empty()) continue;  // fewer references for this segment
    std::vector<std::string> words = Words(Preprocess(ref, o));
    ref_lens.push_back(int64_t(words.size()));
    for (const auto& [ngram, count] : CountNgrams(words, max_order)) {
      int64_t& best = ref_ngrams[ngram];
      best = std::max(best, count);
    }
  }
  if (ref_lens.empty()) return InvalidArgument("empty reference sentence");
  std::vector<std::string> hyp = Words(Preprocess(hypothesis, o));
  BleuStats st;
  st.sys_len = int64_t(hyp.size());
  // Closest reference length; the shorter one on ties.
  int64_t closest_diff = -1, closest_len = -1;
  for (int64_t len : ref_lens) {
    int64_t diff = std::llabs(st.sys_len - len);
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = len;
    } else if (diff == closest_diff && len < closest_len) {
      closest_len = len;
    }
  }
  st.ref_len = closest_len;
  st.correct.assign(size_t(max_order), 0);
  st.total.assign(size_t(max_order), 0);
  for (const auto& [ngram, count] : CountNgrams(hyp, max_order)) {
    int n = std::stoi(ngram.substr(0, ngram.find('\x01')));
    auto it = ref_ngrams.find(ngram);
    int64_t ref_count = it == ref_ngrams.end() ? 0 : it->second;
    st.correct[size_t(n - 1)] += std::min(count, ref_count);
    st.total[size_t(n - 1)] += count;
  }
  return st;
}

BleuScore ComputeBleu(const BleuStats& stats, const BleuOptions& o) {
  const int max_order = o.max_ngram_order;
  BleuScore s;
  s.sys_len = stats.sys_len;
  s.ref_len = stats.ref_len;
  s.ratio = s.ref_len ? double(s.sys_len) / double(s.ref_len) : 0.0;
  std::vector<double> correct(size_t(max_order), 0), total(size_t(max_order), 0);
  for (int n = 0; n < max_order && size_t(n) < stats.correct.size(); ++n) {
    correct[size_t(n)] = double(stats.correct[size_t(n)]);
    total[size_t(n)] = double(stats.total[size_t(n)]);
  }
  if (s.sys_len < s.ref_len) {
    s.bp = s.sys_len > 0 ? std::exp(1.0 - double(s.ref_len) / double(s.sys_len)) : 0.0;
  } else {
    s.bp = 1.0;
  }
  s.precisions.assign(size_t(max_order), 0.0);
  auto fill_counts = [&] {
    for (int n = 0; n < max_order; ++n) {
      s.counts.push_back(int64_t(correct[size_t(n)]));
      s.totals.push_back(int64_t(total[size_t(n)]));
    }
  };
  bool any = std::any_of(correct.begin(), correct.end(), [](double c) { return c != 0; });
  if (!any) {
    fill_counts();
    s.score = 0.0;
    return s;
  }
  double smooth_value = o.smooth_value;
  if (smooth_value < 0) smooth_value = o.smoothing == BleuSmoothing::kFloor ? 0.1 : 1.0;
  double smooth_mteval = 1.0;
  int eff_order = max_order;
  for (int n = 1; n <= max_order; ++n) {
    size_t k = size_t(n - 1);
    if (o.smoothing == BleuSmoothing::kAddK && n > 1) {
      correct[k] += smooth_value;
      total[k] += smooth_value;
    }
    if (total[k] == 0) break;
    if (o.effective_order) eff_order = n;
    if (correct[k] == 0) {
      if (o.smoothing == BleuSmoothing::kExp) {
        smooth_mteval *= 2;
        s.precisions[k] = 100.0 / (smooth_mteval * total[k]);
      } else if (o.smoothing == BleuSmoothing::kFloor) {
        s.precisions[k] = 100.0 * smooth_value / total[k];
      }
    } else {
      s.precisions[k] = 100.0 * correct[k] / total[k];
    }
  }
  double log_sum = 0;
  for (int n = 0; n < eff_order; ++n) log_sum += MyLog(s.precisions[size_t(n)]);
  s.score = s.bp * std::exp(log_sum / eff_order);
  fill_counts();
  return s;
}

Result<BleuScore> CorpusBleu(const std::vector<std::string>& hypotheses,
                             const std::vector<std::vector<std::string>>& references,
                             const BleuOptions& o) {
  SF_ASSIGN_OR_RETURN(BleuStats total, CorpusStats(hypotheses, references, o));
  return ComputeBleu(total, o);
}

Result<BleuStats> CorpusStats(const std::vector<std::string>& hypotheses,
                              const std::vector<std::vector<std::string>>& references,
                              const BleuOptions& o) {
  if (o.max_ngram_order < 1) return InvalidArgument("max_ngram_order must be >= 1");
  if (o.tokenize != "13a" && o.tokenize != "none") {
    return InvalidArgument("tokenize: '" + o.tokenize + "' is not one of 13a, none");
  }
  if (references.empty()) return InvalidArgument("no reference stream");
  for (size_t r = 0; r < references.size(); ++r) {
    if (references[r].size() != hypotheses.size()) {
      return InvalidArgument("reference stream " + std::to_string(r + 1) + " has " +
                             std::to_string(references[r].size()) + " lines, the hypotheses " +
                             std::to_string(hypotheses.size()));
    }
  }
  BleuStats total;
  total.correct.assign(size_t(o.max_ngram_order), 0);
  total.total.assign(size_t(o.max_ngram_order), 0);
  std::vector<std::string_view> refs(references.size());
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    for (size_t r = 0; r < references.size(); ++r) refs[r] = references[r][i];
    auto st = SegmentStats(hypotheses[i], refs, o);
    if (!st.ok()) return st.status().WithContext("segment " + std::to_string(i + 1));
    total.Add(*st);
  }
  return total;
}

std::string BleuScore::ToString(int width) const {
  char head[64];
  std::snprintf(head, sizeof head, "BLEU = %.*f ", width, score);
  std::string out = head;
  for (size_t i = 0; i < precisions.size(); ++i) {
    char p[32];
    std::snprintf(p, sizeof p, "%s%.1f", i ? "/" : "", precisions[i]);
    out += p;
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, " (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", bp,
                ratio, static_cast<long long>(sys_len), static_cast<long long>(ref_len));
  return out + tail;
}

std::string BleuSignature(const BleuOptions& o, int num_refs) {
  std::string smooth;
  switch (o.smoothing) {
    case BleuSmoothing::kNone:
      smooth = "none";
      break;
    case BleuSmoothing::kExp:
      smooth = "exp";
      break;
    case BleuSmoothing::kFloor:
    case BleuSmoothing::kAddK: {
      double v =
          o.smooth_value >= 0 ? o.smooth_value : (o.smoothing == BleuSmoothing::kFloor ? 0.1 : 1.0);
      char buf[48];
      std::snprintf(buf, sizeof buf, "%s[%.2f]",
                    o.smoothing == BleuSmoothing::kFloor ? "floor" : "add-k", v);
      smooth = buf;
      break;
    }
  }
  return "nrefs:" + (num_refs < 0 ? std::string("var") : std::to_string(num_refs)) +
         "|case:" + (o.lowercase ? "lc" : "mixed") + "|eff:" + (o.effective_order ? "yes" : "no") +
         "|tok:" + o.tokenize + "|smooth:" + smooth + "|version:2.4.2";
}

namespace {

// Strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
bool ValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = (c >= 0xC2 && c <= 0xDF)   ? 2
              : (c >= 0xE0 && c <= 0xEF) ? 3
              : (c >= 0xF0 && c <= 0xF4) ? 4
                                         : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

std::vector<std::string> ReadLines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

std::string BleuJson(const BleuScore& score, const BleuOptions& options, int num_refs) {
  std::string sig = BleuSignature(options, num_refs);
  std::string verbose = score.ToString();
  verbose = verbose.substr(verbose.find(' ', std::string("BLEU = ").size()) + 1);
  char num[32];
  std::snprintf(num, sizeof num, "%.2f", score.score);
  std::string out = "{\n \"name\": \"BLEU\",\n \"score\": " + std::string(num) +
                    ",\n \"signature\": " + JsonQuoted(sig) + ",\n \"verbose_score\": " +
                    JsonQuoted(verbose);
  size_t start = 0;
  while (start < sig.size()) {
    size_t end = sig.find('|', start);
    if (end == std::string::npos) end = sig.size();
    std::string field = sig.substr(start, end - start);
    size_t colon = field.find(':');
    out +=
        ",\n " + JsonQuoted(field.substr(0, colon)) + ": " + JsonQuoted(field.substr(colon + 1));
    start = end + 1;
  }
  return out + "\n}";
}

Result<std::vector<std::vector<std::string>>> ReadReferenceFiles(
    const std::vector<std::string>& paths) {
  std::vector<std::vector<std::string>> streams;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFound("reference file " + path + ": can't open");
    std::vector<std::string> lines = ReadLines(in);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (!ValidUtf8(lines[i])) {
        return InvalidArgument("reference file " + path + ": line " + std::to_string(i + 1) +
                               ": invalid UTF-8");
      }
    }
    if (!streams.empty() && lines.size() != streams.front().size()) {
      return InvalidArgument("reference file " + path + " has " + std::to_string(lines.size()) +
                             " lines, " + paths.front() + " has " +
                             std::to_string(streams.front().size()));
    }
    streams.push_back(std::move(lines));
  }
  return streams;
}

int RunBleuCommand(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                   std::ostream& err) {
  CLI::App app("Corpus BLEU of hypotheses (stdin, one per line) against reference files, "
               "with sacreBLEU's defaults (13a tokenization, exponential smoothing).",
               "sf-trainer bleu");
  cmdline::UseDefaults(app);
  std::vector<std::string> refs;
  std::string format = "text";
  BleuOptions options;
  app.add_option("-r,--ref", refs, "reference file (repeat for several references)")->required();
  app.add_flag("--lowercase", options.lowercase, "case-insensitive BLEU (also -lc, as sacreBLEU)");
  app.add_option("--tokenize", options.tokenize, "tokenizer (also -tok)")
      ->check(CLI::IsMember({"13a", "none"}));
  app.add_option("-f,--format", format, "output format")->check(CLI::IsMember({"text", "json"}));
  // sacreBLEU's single-dash spellings.
  std::vector<std::string> normalized;
  for (const std::string& a : args) {
    normalized.push_back(a == "-lc" ? "--lowercase" : a == "-tok" ? "--tokenize" : a);
  }
  if (auto exit_code = cmdline::Parse(app, normalized, out, err)) return *exit_code;
  auto streams = ReadReferenceFiles(refs);
  if (!streams.ok()) {
    err << "sf-trainer bleu: " << streams.status().message() << "\n";
    return 1;
  }
  std::vector<std::string> hyps = ReadLines(in);
  for (size_t i = 0; i < hyps.size(); ++i) {
    if (!ValidUtf8(hyps[i])) {
      err << "sf-trainer bleu: hypotheses: line " << i + 1 << ": invalid UTF-8\n";
      return 1;
    }
  }
  auto score = CorpusBleu(hyps, *streams, options);
  if (!score.ok()) {
    err << "sf-trainer bleu: " << score.status().message() << "\n";
    return 1;
  }
  if (format == "json") {
    out << BleuJson(*score, options, int(refs.size())) << "\n";
  } else {
    out << score->ToString() << "\n";
  }
  return 0;
}

}  // namespace sf::eval
