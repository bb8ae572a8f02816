// adaptive_asha: Determined-style adaptive asynchronous successive halving.
//
// The search runs several brackets side by side (a tournament); each bracket is one ASHA with
// its own number of rungs. Rung k of an n-rung bracket trains to ceil(max_length / divisor^(n-1-k))
// (the top rung to max_length). Every trial starts at rung 0; when it validates at a rung it
// waits there, and a rung promotes its best floor(results / divisor) trials, so the top
// 1/divisor of every rung goes on to the next, as soon as enough results are in (asynchronous:
// nobody waits for a rung to fill). A trial that can never be promoted any more is closed at
// once: its rank already puts it below the most promotions its rung can ever make, or no more
// results can reach its rung. A trial finishing the top rung is closed.
//
// Brackets: aggressive mode runs one bracket of max_rungs rungs; standard runs up to three
// (max_rungs, max_rungs-1, max_rungs-2); conservative runs max_rungs brackets (max_rungs .. 1);
// bracket_rungs overrides the mode. Unless bracket_rungs is given, max_rungs is first capped so
// that the bottom rung trains at least one unit and rung 0 can fill (Determined's caps:
// 1 + log_divisor(max_length) and 1 + log_divisor(max_trials)). Trials are split between brackets
// as Determined does, in proportion to divisor^(rungs-1) / rungs (equal budget per bracket),
// at least one each, the remainder going to the bracket with the most rungs; the total is exactly
// max_trials. max_concurrent_trials is split evenly (0: each bracket runs
// max(trials of the last bracket, divisor) at once). A trial that exits early counts as the
// worst result of the rung it was training for; one with invalid hyperparameters is replaced by
// a new sample instead.
//
// Differences from Determined: promotion-based ASHA only (its stop_once variant is not offered),
// and hopeless trials are closed early instead of being kept until the search ends.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "master/searcher/builtin_searchers.h"
#include "master/searcher/hyperparameter_sampling.h"
#include "master/searcher/snapshot_fields.h"

namespace sf::master {
namespace {

constexpr double kWorst = std::numeric_limits<double>::infinity();

// floor(n / divisor), robust against 8 / 4 = 1.9999...
int64_t FloorDiv(int64_t n, double divisor) {
  return static_cast<int64_t>(std::floor(static_cast<double>(n) / divisor + 1e-9));
}

struct BracketPlan {
  int num_rungs = 1;
  int64_t max_trials = 1;
  int64_t max_concurrent = 0;  // 0: no limit
  std::vector<int64_t> lengths;
};

class AdaptiveAshaSearch final : public SearchMethod {
 public:
  AdaptiveAshaSearch(const config::ExperimentConfig& config, const std::vector<BracketPlan>& plans)
      : hps_(config.hyperparameters),
        smaller_is_better_(config.searcher.smaller_is_better),
        divisor_(config.searcher.divisor),
        rng_(static_cast<uint64_t>(config.searcher.seed)) {
    for (const BracketPlan& p : plans) {
      Bracket b;
      b.plan = p;
      b.rungs.resize(static_cast<size_t>(p.num_rungs));
      brackets_.push_back(std::move(b));
    }
  }

  std::vector<SearcherOp> InitialOperations() override { return Advance(); }

  std::vector<SearcherOp> TrialCreated(int64_t id) override {
    auto it = trials_.find(id);
    if (it == trials_.end() || it->second.state != State::kCreating) return {};
    it->second.state = State::kTraining;
    return {TrainOp(id, brackets_[it->second.bracket].plan.lengths[0])};
  }

  std::vector<SearcherOp> ValidationCompleted(int64_t id, double metric, int64_t length) override {
    auto it = trials_.find(id);
    if (it == trials_.end() || it->second.state != State::kTraining) return {};
    Trial& t = it->second;
    Bracket& b = brackets_[t.bracket];
    if (length < b.plan.lengths[t.rung]) return {};  // not at the rung yet
    // A metric that is not finite (a diverged loss) ranks below every real one, never first.
    double internal = !std::isfinite(metric) ? kWorst : (smaller_is_better_ ? metric : -metric);
    t.validated = true;
    Insert(b.rungs[t.rung], Entry{id, internal, false, false});
    std::vector<SearcherOp> ops;
    if (t.rung == b.plan.num_rungs - 1) {
      t.state = State::kClosing;  // holds its slots until TrialClosed
      ops.push_back(CloseOp(id));
    } else {
      t.state = State::kWaiting;
      t.holds_slots = false;
    }
    Append(ops, Advance());
    return ops;
  }

  std::vector<SearcherOp> TrialExitedEarly(int64_t id, ExitReason reason) override {
    auto it = trials_.find(id);
    if (it == trials_.end() || it->second.state == State::kDone) return {};
    Trial& t = it->second;
    const State previous = t.state;
    t.state = State::kDone;
    t.holds_slots = false;
    Bracket& b = brackets_[t.bracket];
    if (reason == ExitReason::kInvalidHyperparameters) {
      ++b.invalid;  // sampled again: the bracket may create one more trial
    } else if (previous == State::kCreating || previous == State::kTraining) {
      Insert(b.rungs[t.rung], Entry{id, kWorst, false, true});
    }
    return Advance();
  }

  std::vector<SearcherOp> TrialClosed(int64_t id) override {
    auto it = trials_.find(id);
    if (it == trials_.end() || it->second.state != State::kClosing) return {};
    it->second.state = State::kDone;
    it->second.holds_slots = false;
    return Advance();
  }

  double Progress() const override {
    if (shutdown_sent_) return 1.0;
    int64_t total = 0, finished = 0;
    for (const Bracket& b : brackets_) total += Total(b);
    for (const auto& [id, t] : trials_) {
      finished += t.state == State::kDone || t.state == State::kClosing;
    }
    return total == 0 ? 0.0 : std::clamp(static_cast<double>(finished) / total, 0.0, 1.0);
  }

  Value Snapshot() const override {
    Value::List brackets;
    for (const Bracket& b : brackets_) {
      Value::List rungs;
      for (const auto& rung : b.rungs) {
        Value::List entries;
        for (const Entry& e : rung) {
          entries.push_back(Value(Value::Map{{"request_id", Value(e.request_id)},
                                             {"metric", snapshot::FromDouble(e.metric)},
                                             {"promoted", Value(e.promoted)},
                                             {"exited", Value(e.exited)}}));
        }
        rungs.push_back(Value(std::move(entries)));
      }
      brackets.push_back(Value(Value::Map{{"created", Value(b.created)},
                                          {"invalid", Value(b.invalid)},
                                          {"rungs", Value(std::move(rungs))}}));
    }
    Value::List trials;
    for (const auto& [id, t] : trials_) {
      trials.push_back(Value(Value::Map{{"request_id", Value(id)},
                                        {"bracket", Value(static_cast<int64_t>(t.bracket))},
                                        {"rung", Value(static_cast<int64_t>(t.rung))},
                                        {"state", Value(StateName(t.state))},
                                        {"holds_slots", Value(t.holds_slots)},
                                        {"validated", Value(t.validated)}}));
    }
    return Value(Value::Map{{"searcher", Value("adaptive_asha")},
                            {"version", Value(1)},
                            {"next_id", Value(next_id_)},
                            {"shutdown_sent", Value(shutdown_sent_)},
                            {"rng", Value(rng_.State())},
                            {"brackets", Value(std::move(brackets))},
                            {"trials", Value(std::move(trials))}});
  }

  Status Restore(const Value& snap) override {
    std::string name, rng_state;
    SF_RETURN_IF_ERROR(snapshot::String(snap, "searcher", name));
    if (name != "adaptive_asha") {
      return InvalidArgument("searcher snapshot is of a " + name + " searcher, not adaptive_asha");
    }
    int64_t next_id = 0;
    bool shutdown_sent = false;
    SF_RETURN_IF_ERROR(snapshot::Int(snap, "next_id", next_id));
    SF_RETURN_IF_ERROR(snapshot::Bool(snap, "shutdown_sent", shutdown_sent));
    SF_RETURN_IF_ERROR(snapshot::String(snap, "rng", rng_state));
    SearchRng rng;
    SF_RETURN_IF_ERROR(rng.SetState(rng_state));
    SF_ASSIGN_OR_RETURN(const Value* blist, snapshot::List(snap, "brackets"));
    if (blist->as_list().size() != brackets_.size()) {
      return InvalidArgument("searcher snapshot: " + std::to_string(blist->as_list().size()) +
                             " brackets, the config makes " + std::to_string(brackets_.size()));
    }
    std::vector<Bracket> brackets = brackets_;
    for (size_t i = 0; i < brackets.size(); ++i) {
      const Value& bv = blist->as_list()[i];
      Bracket& b = brackets[i];
      SF_RETURN_IF_ERROR(snapshot::Int(bv, "created", b.created));
      SF_RETURN_IF_ERROR(snapshot::Int(bv, "invalid", b.invalid));
      SF_ASSIGN_OR_RETURN(const Value* rlist, snapshot::List(bv, "rungs"));
      if (rlist->as_list().size() != b.rungs.size()) {
        return InvalidArgument("searcher snapshot: bracket " + std::to_string(i) +
                               " has the wrong number of rungs");
      }
      for (size_t r = 0; r < b.rungs.size(); ++r) {
        const Value& rv = rlist->as_list()[r];
        if (!rv.is_list()) return InvalidArgument("searcher snapshot: a rung is not a list");
        b.rungs[r].clear();
        for (const Value& ev : rv.as_list()) {
          Entry e;
          SF_RETURN_IF_ERROR(snapshot::Int(ev, "request_id", e.request_id));
          SF_RETURN_IF_ERROR(snapshot::Double(ev, "metric", e.metric));
          SF_RETURN_IF_ERROR(snapshot::Bool(ev, "promoted", e.promoted));
          SF_RETURN_IF_ERROR(snapshot::Bool(ev, "exited", e.exited));
          b.rungs[r].push_back(e);
        }
      }
    }
    SF_ASSIGN_OR_RETURN(const Value* tlist, snapshot::List(snap, "trials"));
    std::map<int64_t, Trial> trials;
    for (const Value& tv : tlist->as_list()) {
      int64_t id = 0, bracket = 0, rung = 0;
      std::string state;
      Trial t;
      SF_RETURN_IF_ERROR(snapshot::Int(tv, "request_id", id));
      SF_RETURN_IF_ERROR(snapshot::Int(tv, "bracket", bracket));
      SF_RETURN_IF_ERROR(snapshot::Int(tv, "rung", rung));
      SF_RETURN_IF_ERROR(snapshot::String(tv, "state", state));
      SF_RETURN_IF_ERROR(snapshot::Bool(tv, "holds_slots", t.holds_slots));
      SF_RETURN_IF_ERROR(snapshot::Bool(tv, "validated", t.validated));
      if (bracket < 0 || bracket >= static_cast<int64_t>(brackets.size()) || rung < 0 ||
          rung >= brackets[static_cast<size_t>(bracket)].plan.num_rungs ||
          !ParseState(state, t.state)) {
        return InvalidArgument("searcher snapshot: bad trial entry " + tv.ToJson());
      }
      t.bracket = static_cast<int>(bracket);
      t.rung = static_cast<int>(rung);
      trials[id] = t;
    }
    brackets_ = std::move(brackets);
    trials_ = std::move(trials);
    next_id_ = next_id;
    shutdown_sent_ = shutdown_sent;
    rng_ = rng;
    return Status::Ok();
  }

  Value Summary() const override {
    Value::List brackets;
    for (const Bracket& b : brackets_) {
      Value::List rungs;
      for (size_t r = 0; r < b.rungs.size(); ++r) {
        Value::List entries;
        for (const Entry& e : b.rungs[r]) {
          Value::Map m{{"request_id", Value(e.request_id)}, {"promoted", Value(e.promoted)}};
          m["metric"] = e.exited ? Value("exited")
                                 : snapshot::FromDouble(smaller_is_better_ ? e.metric : -e.metric);
          entries.push_back(Value(std::move(m)));
        }
        rungs.push_back(Value(Value::Map{{"length", Value(b.plan.lengths[r])},
                                         {"trials", Value(std::move(entries))}}));
      }
      brackets.push_back(
          Value(Value::Map{{"num_rungs", Value(static_cast<int64_t>(b.plan.num_rungs))},
                           {"max_trials", Value(b.plan.max_trials)},
                           {"max_concurrent_trials", Value(b.plan.max_concurrent)},
                           {"created", Value(b.created)},
                           {"rungs", Value(std::move(rungs))}}));
    }
    return Value(Value::Map{{"brackets", Value(std::move(brackets))}});
  }

 private:
  enum class State { kCreating, kTraining, kWaiting, kClosing, kDone };
  struct Trial {
    int bracket = 0;
    int rung = 0;  // the rung it trains for, or (waiting) the rung it reached
    State state = State::kCreating;
    bool holds_slots = true;
    bool validated = false;
  };
  // One result in a rung. `metric` is oriented so that smaller is better; kWorst for an exit.
  struct Entry {
    int64_t request_id = 0;
    double metric = 0;
    bool promoted = false;
    bool exited = false;
  };
  struct Bracket {
    BracketPlan plan;
    std::vector<std::vector<Entry>> rungs;  // each sorted best first; ties: first reported first
    int64_t created = 0;
    int64_t invalid = 0;
  };

  static const char* StateName(State s) {
    switch (s) {
      case State::kCreating:
        return "creating";
      case State::kTraining:
        return "training";
      case State::kWaiting:
        return "waiting";
      case State::kClosing:
        return "closing";
      case State::kDone:
        return "done";
    }
    return "done";
  }
  static bool ParseState(const std::string& name, State& out) {
    for (State s :
         {State::kCreating, State::kTraining, State::kWaiting, State::kClosing, State::kDone}) {
      if (name == StateName(s)) {
        out = s;
        return true;
      }
    }
    return false;
  }
  static SearcherOp TrainOp(int64_t id, int64_t length) {
    SearcherOp op;
    op.kind = SearcherOp::Kind::kTrain;
    op.request_id = id;
    op.target_length = length;
    return op;
  }
  static SearcherOp CloseOp(int64_t id) {
    SearcherOp op;
    op.kind = SearcherOp::Kind::kClose;
    op.request_id = id;
    return op;
  }
  static void Append(std::vector<SearcherOp>& to, std::vector<SearcherOp> from) {
    for (auto& op : from) to.push_back(std::move(op));
  }
  static void Insert(std::vector<Entry>& rung, const Entry& e) {
    auto pos = std::upper_bound(rung.begin(), rung.end(), e.metric,
                                [](double m, const Entry& x) { return m < x.metric; });
    rung.insert(pos, e);
  }
  // Trials the bracket may create: its share, plus one per trial with invalid hyperparameters.
  static int64_t Total(const Bracket& b) { return b.plan.max_trials + b.invalid; }

  int64_t Active(int bracket) const {
    int64_t n = 0;
    for (const auto& [id, t] : trials_) n += t.bracket == bracket && t.holds_slots;
    return n;
  }

  // Promotes what the rungs allow, closes trials that can't be promoted any more, creates trials
  // up to each bracket's concurrency, and shuts down when every trial is done.
  std::vector<SearcherOp> Advance() {
    std::vector<SearcherOp> ops;
    if (shutdown_sent_) return ops;
    for (size_t bi = 0; bi < brackets_.size(); ++bi) {
      Bracket& b = brackets_[bi];
      for (int r = 0; r + 1 < b.plan.num_rungs; ++r) Promote(b, r, ops);
      CloseHopeless(static_cast<int>(bi), ops);
    }
    for (size_t bi = 0; bi < brackets_.size(); ++bi) {
      Bracket& b = brackets_[bi];
      int64_t active = Active(static_cast<int>(bi));
      while (b.created < Total(b) &&
             (b.plan.max_concurrent == 0 || active < b.plan.max_concurrent)) {
        const int64_t id = ++next_id_;
        ++b.created;
        ++active;
        Trial t;
        t.bracket = static_cast<int>(bi);
        trials_[id] = t;
        SearcherOp op;
        op.kind = SearcherOp::Kind::kCreate;
        op.request_id = id;
        op.hparams = SampleHyperparameters(hps_, rng_);
        ops.push_back(std::move(op));
      }
    }
    bool all_created = true, all_done = true, any_validated = false;
    for (const Bracket& b : brackets_) all_created &= b.created >= Total(b);
    for (const auto& [id, t] : trials_) {
      all_done &= t.state == State::kDone;
      any_validated |= t.validated;
    }
    if (all_created && all_done) {
      SearcherOp op;
      op.kind = SearcherOp::Kind::kShutdown;
      op.failure = !any_validated;
      ops.push_back(op);
      shutdown_sent_ = true;
    }
    return ops;
  }

  // The best floor(results / divisor) entries of rung r go on to rung r + 1.
  void Promote(Bracket& b, int r, std::vector<SearcherOp>& ops) {
    auto& rung = b.rungs[static_cast<size_t>(r)];
    const int64_t promotable = std::min<int64_t>(
        FloorDiv(static_cast<int64_t>(rung.size()), divisor_), static_cast<int64_t>(rung.size()));
    for (int64_t i = 0; i < promotable; ++i) {
      Entry& e = rung[static_cast<size_t>(i)];
      if (e.promoted) continue;
      e.promoted = true;
      Trial& t = trials_[e.request_id];
      if (t.state == State::kWaiting) {
        t.state = State::kTraining;
        t.rung = r + 1;
        t.holds_slots = true;
        ops.push_back(TrainOp(e.request_id, b.plan.lengths[static_cast<size_t>(r + 1)]));
      } else {
        // The trial is gone (exited while waiting): it counts as the worst result above too.
        Insert(b.rungs[static_cast<size_t>(r + 1)], Entry{e.request_id, kWorst, false, true});
      }
    }
  }

  // Closes waiting trials that no future result can promote: their rank is at or below the
  // most promotions their rung can ever make (at most Total/divisor^r results reach rung r, and
  // a rank only worsens), or no more results can reach their rung at all.
  void CloseHopeless(int bi, std::vector<SearcherOp>& ops) {
    Bracket& b = brackets_[static_cast<size_t>(bi)];
    const int n = b.plan.num_rungs;
    std::vector<int64_t> cap(static_cast<size_t>(n), 0);
    cap[0] = Total(b);
    for (int r = 1; r < n; ++r) cap[r] = FloorDiv(cap[r - 1], divisor_);
    // lowest_in_flight: the lowest rung a live trial is still training for (n: none).
    int lowest_in_flight = b.created < Total(b) ? 0 : n;
    for (const auto& [id, t] : trials_) {
      if (t.bracket != bi) continue;
      if (t.state == State::kCreating || t.state == State::kTraining) {
        lowest_in_flight = std::min(lowest_in_flight, t.rung);
      }
    }
    for (int r = 0; r + 1 < n; ++r) {
      const bool frozen = lowest_in_flight > r;  // no result can reach rung r any more
      auto& rung = b.rungs[static_cast<size_t>(r)];
      for (size_t i = 0; i < rung.size(); ++i) {
        Entry& e = rung[i];
        if (e.promoted) continue;
        Trial& t = trials_[e.request_id];
        if (t.state != State::kWaiting || t.rung != r) continue;
        if (frozen || static_cast<int64_t>(i) >= cap[static_cast<size_t>(r + 1)]) {
          t.state = State::kClosing;  // it gave its slots back when it started waiting
          ops.push_back(CloseOp(e.request_id));
        }
      }
    }
  }

  config::Hyperparameters hps_;
  bool smaller_is_better_;
  double divisor_;
  SearchRng rng_;
  std::vector<Bracket> brackets_;
  std::map<int64_t, Trial> trials_;
  int64_t next_id_ = 0;
  bool shutdown_sent_ = false;
};

}  // namespace

Result<std::unique_ptr<SearchMethod>> MakeAdaptiveAshaSearch(
    const config::ExperimentConfig& config) {
  const config::SearcherConfig& s = config.searcher;
  const double d = s.divisor;
  if (!(d > 1.0)) return InvalidArgument("searcher.divisor: " + std::to_string(d) + " must be > 1");
  if (s.max_trials < 1) {
    return InvalidArgument("searcher.max_trials: " + std::to_string(s.max_trials) +
                           " must be >= 1");
  }
  const int64_t length = s.max_length.value;
  std::vector<int> rungs(s.bracket_rungs.begin(), s.bracket_rungs.end());
  if (rungs.empty()) {
    if (s.max_rungs < 1) return InvalidArgument("searcher.max_rungs: must be >= 1");
    int64_t max_rungs = s.max_rungs;
    max_rungs = std::min<int64_t>(
        max_rungs,
        static_cast<int64_t>(std::log(static_cast<double>(length)) / std::log(d) + 1e-9) + 1);
    max_rungs = std::min<int64_t>(
        max_rungs,
        static_cast<int64_t>(std::log(static_cast<double>(s.max_trials)) / std::log(d) + 1e-9) + 1);
    max_rungs = std::max<int64_t>(max_rungs, 1);
    const int r = static_cast<int>(max_rungs);
    using Mode = config::SearcherConfig::AshaMode;
    switch (s.mode) {
      case Mode::kAggressive:
        rungs = {r};
        break;
      case Mode::kStandard:
        for (int k = r; k >= std::max(1, r - 2); --k) rungs.push_back(k);
        break;
      case Mode::kConservative:
        for (int k = r; k >= 1; --k) rungs.push_back(k);
        break;
    }
  }
  for (int n : rungs) {
    if (n < 1)
      return InvalidArgument("searcher.bracket_rungs: every bracket needs at least 1 rung");
  }
  std::sort(rungs.rbegin(), rungs.rend());  // most early stopping first
  const auto nb = static_cast<int64_t>(rungs.size());
  if (s.max_trials < nb) {
    return InvalidArgument("searcher.max_trials: " + std::to_string(s.max_trials) +
                           " is fewer than the " + std::to_string(nb) +
                           " adaptive_asha brackets (one trial each at least)");
  }
  // Trials per bracket, proportional to divisor^(rungs-1) / rungs.
  std::vector<double> weight;
  double total_weight = 0;
  for (int n : rungs) {
    weight.push_back(std::pow(d, n - 1) / n);
    total_weight += weight.back();
  }
  std::vector<BracketPlan> plans(rungs.size());
  int64_t allocated = 0;
  for (size_t i = 0; i < rungs.size(); ++i) {
    plans[i].num_rungs = rungs[i];
    plans[i].max_trials = std::max<int64_t>(
        static_cast<int64_t>(weight[i] / total_weight * static_cast<double>(s.max_trials)), 1);
    allocated += plans[i].max_trials;
  }
  plans[0].max_trials += std::max<int64_t>(s.max_trials - allocated, 0);
  allocated = std::max(allocated, s.max_trials);
  // Rounding up to one each may overshoot: take the excess back from the largest brackets.
  while (allocated > s.max_trials) {
    auto largest = std::max_element(plans.begin(), plans.end(), [](const auto& a, const auto& b) {
      return a.max_trials < b.max_trials;
    });
    --largest->max_trials;
    --allocated;
  }
  // Concurrency per bracket.
  int64_t per = 0, remainder = 0;
  if (s.max_concurrent_trials == 0) {
    per = std::max<int64_t>(plans.back().max_trials, static_cast<int64_t>(d));
  } else {
    const int64_t mct = std::max<int64_t>(s.max_concurrent_trials, nb);
    per = mct / nb;
    remainder = mct % nb;
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    plans[i].max_concurrent = per + (static_cast<int64_t>(i) < remainder ? 1 : 0);
    for (int k = 0; k < plans[i].num_rungs; ++k) {
      const double rate = std::pow(d, plans[i].num_rungs - 1 - k);
      plans[i].lengths.push_back(std::max<int64_t>(
          static_cast<int64_t>(std::ceil(static_cast<double>(length) / rate - 1e-9)), 1));
    }
    plans[i].lengths.back() = length;
  }
  return std::unique_ptr<SearchMethod>(std::make_unique<AdaptiveAshaSearch>(config, plans));
}

}  // namespace sf::master
