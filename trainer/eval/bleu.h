// Corpus BLEU compatible with sacreBLEU 2.x defaults (Post, 2018).
//
//   auto score = CorpusBleu(hypotheses, {references});       // one reference stream
//   std::cout << score->ToString() << "\n";
//   // BLEU = 35.12 67.3/41.2/27.9/19.0 (BP = 1.000 ratio = 1.012 hyp_len = 12345 ref_len = 12198)
//
// What "compatible" means (all sacreBLEU's defaults, checked against its source):
//  - Each segment is right-stripped, optionally lowercased (-lc; Unicode lowercasing of each code
//    point), then tokenized with the mteval-v13a rules (Tokenize13a below).
//  - n-grams of orders 1..4; a hypothesis n-gram's count is clipped by the largest count of
//    that n-gram in any one reference.
//  - Reference length per segment: the *closest* reference length to the hypothesis length,
//    the shorter one on ties; summed over the corpus. Brevity penalty exp(1 - r/c) when c < r
//    (0 when c = 0), else 1.
//  - Smoothing 'exp' (mteval-v13a / NIST): the k-th order with zero matches gets precision
//    100 / (2^k * total). No match at any order gives 0. effective_order is off.
//  - Empty reference lines are dropped per segment (variable number of references); a segment
//    left with none is an error, as in sacreBLEU.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sf::eval {

enum class BleuSmoothing { kNone, kFloor, kAddK, kExp };

struct BleuOptions {
  bool lowercase = false;        // sacreBLEU -lc
  std::string tokenize = "13a";  // "13a" | "none"
  BleuSmoothing smoothing = BleuSmoothing::kExp;
  double smooth_value = -1;  // floor: 0.1, add-k: 1 when < 0 (sacreBLEU's defaults)
  int max_ngram_order = 4;
  bool effective_order = false;
};

// mteval-v13a tokenization as sacreBLEU's tokenizer_13a: drops "<skipped>", joins "-\n",
// unescapes &quot; &amp; &lt; &gt;, splits off ASCII punctuation except ' - . , ; splits . and ,
// unless between digits (before a digit and after a digit both count), splits - after a digit,
// and collapses whitespace (Unicode whitespace, as Python's str.split()).
std::string Tokenize13a(std::string_view line);

// Python's str.lower() for the scripts NMT meets (Latin, Greek, Cyrillic, ...), per code point.
std::string LowercaseUtf8(std::string_view text);

// Sufficient statistics of one or more segments.
struct BleuStats {
  int64_t sys_len = 0;
  int64_t ref_len = 0;
  std::vector<int64_t> correct;  // per order, 1..max_ngram_order
  std::vector<int64_t> total;
  void Add(const BleuStats& other);
};

struct BleuScore {
  double score = 0;                // 0..100
  std::vector<double> precisions;  // percent, per order
  std::vector<int64_t> counts, totals;
  double bp = 0;
  double ratio = 0;  // sys_len / ref_len
  int64_t sys_len = 0, ref_len = 0;
  // "BLEU = 35.12 67.3/41.2/27.9/19.0 (BP = 1.000 ratio = 1.012 hyp_len = 12345 ref_len = 12198)"
  std::string ToString(int width = 2) const;
};

// Statistics of one segment against its references (empty ones ignored; at least one needed).
Result<BleuStats> SegmentStats(std::string_view hypothesis,
                               const std::vector<std::string_view>& references,
                               const BleuOptions& options = {});

// The score from (summed) statistics.
BleuScore ComputeBleu(const BleuStats& stats, const BleuOptions& options = {});

// The summed statistics of a corpus (what CorpusBleu scores; sums of shards add up to the
// whole corpus's). Same arguments and errors as CorpusBleu.
Result<BleuStats> CorpusStats(const std::vector<std::string>& hypotheses,
                              const std::vector<std::vector<std::string>>& references,
                              const BleuOptions& options = {});

// Corpus BLEU. `references` holds reference streams, each as long as `hypotheses`.
// kInvalidArgument when a stream's length differs or a segment has no non-empty reference.
Result<BleuScore> CorpusBleu(const std::vector<std::string>& hypotheses,
                             const std::vector<std::vector<std::string>>& references,
                             const BleuOptions& options = {});

// sacreBLEU-style signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.2".
// `version` is the sacreBLEU version whose behaviour this reproduces.
std::string BleuSignature(const BleuOptions& options, int num_refs);

// sacreBLEU's JSON output (`sacrebleu -f json`): name, score (2 decimals), signature,
// verbose_score and the signature fields, one per line.
std::string BleuJson(const BleuScore& score, const BleuOptions& options, int num_refs);

// Reads reference files (one segment per line; "\r\n" accepted). Errors name the file:
// missing, invalid UTF-8 (with line), or a line count different from the first file's.
Result<std::vector<std::vector<std::string>>> ReadReferenceFiles(
    const std::vector<std::string>& paths);

// The `sf-trainer bleu` command: `--ref REF [--ref REF2 ...] [-lc|--lowercase]
// [-tok|--tokenize 13a|none] [-f|--format text|json] [-h|--help]`, hypotheses on `in`, one per
// line. Writes the score line ("BLEU = ...", text) or the JSON (or the usage, for --help) to
// `out` and errors to `err`; returns the process exit status (0 ok, 1 bad data, 2 bad usage).
// `args` excludes the program and "bleu".
int RunBleuCommand(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                   std::ostream& err);

}  // namespace sf::eval
