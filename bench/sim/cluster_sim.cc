// The cluster simulator (issue 45; bench/sim/run.sh drives it): a real master and PostgreSQL,
// and, in this one process, N simulated agents and the trainers of every task the master starts
// on them. No training happens; everything the master sees is real protocol:
//
// - each agent is the agent's own MasterLink and Outbox (agent/master_link.h): registration with
//   `slots_per_agent` CPU slots, heartbeats, STARTED and EXITED task events, delivery and acks;
// - each task the master starts gets a simulated trainer speaking TrialLink through the Core API
//   (core_api/steadfast_core.h): the searcher's operations, training metric rows every
//   `report_every` batches of `step_ms` each, a validation row, a checkpoint and the searcher
//   metric at the end of each operation, stop checks (a pause or preemption checkpoints and
//   exits, a kill exits), a rendezvous of the ranks for multi-slot trials, and failures at
//   `failure_rate` per operation (the process "exits 1" halfway through);
// - experiments are submitted over REST (POST /api/v1/experiments) at each kind's arrival
//   interval: grid, random or adaptive_asha searchers over a `dropout` hyperparameter, whose
//   value shapes the simulated loss (so ASHA has something to rank).
//
//   cluster_sim --scenario FILE.yaml --master-url http://127.0.0.1:8080 --master-grpc
//   127.0.0.1:8090
//               --join-token-file FILE --data-dir DIR [--token TOKEN]
//
// The scenario (bench/sim/scenarios/*.yaml):
//   agents: 64                # simulated agents
//   slots_per_agent: 4
//   max_seconds: 600          # the run ends then at the latest (the master keeps what it has)
//   trainer: {step_ms: 20, report_every: 10, failure_rate: 0.01}
//   pools:                    # optional: pools carved out of the agents (the rest are "default")
//     - {name: fair, agents: 4, scheduler: fair_share}   # or priority
//   experiments:              # kinds of experiment; each submitted `count` times
//     - {count: 20, every_seconds: 1, searcher: grid, trials: 8, batches: 200, slots_per_trial: 1,
//        priority: 42, weight: 1, pool: default}
// `cluster_sim --scenario FILE --print-master-config` prints the master config the pools need
// (their scheduler modes; run.sh gives it to `sf deploy local up --master-config`).
// The run ends when every experiment was submitted and no trainer has run for `idle_seconds`
// (5), or at max_seconds. Printed at the end, one `key=value` per line (run.sh adds the
// master's and PostgreSQL's side): experiments, trials started, trial starts per second, metric
// rows reported and per second, operations completed, failures injected, kills and stops
// received, ranks whose gang ended under them, and the time from a slot freeing (its task's
// EXITED) to the first metric report of the next trial on it, p50/p99/max, over the slots that
// had one; and for each fair_share pool (share_meter.h) how long its experiments all contended
// and each one's share of the slot-seconds against its weight's share. Exit status: 0; 1 when a
// simulated part met an error it should not have (first_error names it); 3 when max_seconds passed
// with trainers still running (still_running and where they wait are printed; they are left, not
// joined); 2 for a bad scenario or flag.
//
// Its parts: scenario.h (the YAML, the experiments it submits), sim_agent.h (an agent),
// sim_trainer.h (a trainer), sim_stats.h (the counters and shared channels); this file submits,
// samples the queue and prints.
#include <algorithm>
#include <atomic>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/sim/scenario.h"
#include "bench/sim/sim_agent.h"
#include "bench/sim/sim_stats.h"
#include "common/command_line.h"
#include "common/http/client.h"
#include "common/value.h"

using namespace sf::sim;

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario_path, master_url, master_grpc, join_token_file, data_dir, token;
  CLI::App app(
      "The cluster simulator: simulated agents and trainers against a real master "
      "(bench/sim/run.sh).",
      "cluster_sim");
  sf::cmdline::UseDefaults(app);
  app.add_option("--scenario", scenario_path, "the scenario YAML")->required();
  app.add_option("--master-url", master_url, "the master's REST URL");
  app.add_option("--master-grpc", master_grpc, "the master's gRPC address (HOST:PORT)");
  app.add_option("--join-token-file", join_token_file, "the cluster's join token, for the agents");
  app.add_option("--data-dir", data_dir,
                 "a directory with train.de and train.en (the experiments' data)");
  app.add_option("--token", token, "an API token (empty: a master without users)");
  bool print_master_config = false;
  app.add_flag(
      "--print-master-config", print_master_config,
      "print the master config the scenario's pools need (their scheduler modes) and exit");
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  auto loaded = LoadScenario(scenario_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "cluster_sim: %s\n", loaded.status().message().c_str());
    return 2;
  }
  const Scenario scenario = std::move(loaded).value();
  if (print_master_config) {
    std::fputs(scenario.MasterConfigYaml().c_str(), stdout);
    return 0;
  }
  if (master_url.empty() || master_grpc.empty() || data_dir.empty()) {
    std::fprintf(stderr, "cluster_sim: --master-url, --master-grpc and --data-dir are required\n");
    return 2;
  }
  std::string join_token;
  if (!join_token_file.empty()) {
    std::ifstream in(join_token_file);
    std::getline(in, join_token);
  }
  auto url = sf::http::Url::Parse(master_url, "--master-url");
  if (!url.ok()) {
    std::fprintf(stderr, "cluster_sim: %s\n", url.status().message().c_str());
    return 2;
  }

  Stats stats;
  // The fair-share pools' meter: how many experiments the scenario sends each.
  std::map<std::string, int> fair_pools;
  for (const PoolSpec& p : scenario.pools) {
    if (p.scheduler != "fair_share") continue;
    int n = 0;
    for (const ExperimentKind& k : scenario.experiments) n += k.pool == p.name ? k.count : 0;
    if (n > 0) fair_pools[p.name] = n;
  }
  ShareMeter shares(fair_pools, 3.0);
  stats.shares = &shares;
  std::atomic<bool> metering{true};
  std::thread meter([&] {
    auto last = Clock::now();
    while (metering) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto now = Clock::now();
      shares.Sample(std::chrono::duration<double>(now - last).count());
      last = now;
    }
  });
  Channels channels(master_grpc, 16);
  std::vector<std::unique_ptr<SimAgent>> agents;
  const Clock::time_point begin = Clock::now();
  for (int i = 0; i < scenario.agents; ++i) {
    agents.push_back(
        std::make_unique<SimAgent>(i, scenario, &stats, &channels, master_grpc, join_token));
    agents.back()->Start();
  }
  for (int i = 0; i < 600 && !std::all_of(agents.begin(), agents.end(),
                                          [](auto& a) { return a->connected(); });
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double connect_seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  std::printf("agents_connected_seconds=%.2f\n", connect_seconds);
  std::fflush(stdout);

  // The submissions, in time order over every kind.
  struct Due {
    double at;
    const ExperimentKind* kind;
  };
  std::vector<Due> due;
  for (const ExperimentKind& k : scenario.experiments) {
    for (int i = 0; i < k.count; ++i) due.push_back({i * k.every_seconds, &k});
  }
  std::stable_sort(due.begin(), due.end(), [](const Due& a, const Due& b) { return a.at < b.at; });
  const Clock::time_point start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(scenario.max_seconds);
  int submitted = 0, refused = 0;
  stats.last_running_ns = NowNs();
  // The experiments submitted so far, and a sampler that reads the trials of the newest few
  // every second: every QUEUED trial should say why it waits (its pending reason).
  std::mutex ids_mu;
  std::vector<std::string> experiment_ids;
  std::atomic<bool> sampling{true};
  std::atomic<int64_t> queued_seen{0}, queued_without_reason{0};
  std::thread sampler([&] {
    while (sampling) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::vector<std::string> newest;
      {
        std::lock_guard<std::mutex> lock(ids_mu);
        for (size_t i = experiment_ids.size() > 5 ? experiment_ids.size() - 5 : 0;
             i < experiment_ids.size(); ++i) {
          newest.push_back(experiment_ids[i]);
        }
      }
      for (const std::string& id : newest) {
        sf::http::ClientOptions o;
        o.timeout = std::chrono::seconds(10);
        sf::http::Client client(*url, o);
        boost::beast::http::request<boost::beast::http::string_body> req{
            boost::beast::http::verb::get, "/api/v1/experiments/" + id + "/trials?limit=1000", 11};
        if (!token.empty()) req.set(boost::beast::http::field::authorization, "Bearer " + token);
        auto r = client.Fetch(std::move(req));
        if (!r.ok() || r->status != 200) continue;
        auto body = sf::Value::FromJson(r->body);
        const sf::Value* trials = body.ok() ? body->Find("trials") : nullptr;
        if (!trials || !trials->is_list()) continue;
        for (const sf::Value& t : trials->as_list()) {
          const sf::Value* state = t.Find("state");
          if (!state || !state->is_string() ||
              state->as_string().find("QUEUED") == std::string::npos)
            continue;
          ++queued_seen;
          const sf::Value* reason = t.Find("pendingReason");
          if (!reason || !reason->is_string() || reason->as_string().empty())
            ++queued_without_reason;
        }
      }
    }
  });
  // One experiment's submission. A master that died (chaos) before answering is asked again
  // after a second; before that, the list says whether the dead one created it (found by its
  // unique name), so a retry never submits an experiment twice. A 4xx is a refusal, not retried.
  int64_t submit_retries = 0;
  auto fetch = [&](boost::beast::http::verb verb, const std::string& target,
                   const std::string& body) {
    sf::http::ClientOptions o;
    o.timeout = std::chrono::seconds(30);
    sf::http::Client client(*url, o);
    boost::beast::http::request<boost::beast::http::string_body> req{verb, target, 11};
    if (!token.empty()) req.set(boost::beast::http::field::authorization, "Bearer " + token);
    if (!body.empty()) {
      req.set(boost::beast::http::field::content_type, "application/json");
      req.body() = body;
    }
    return client.Fetch(std::move(req));
  };
  auto id_text = [](const sf::Value& id) {
    return id.is_string() ? id.as_string() : std::to_string(static_cast<int64_t>(id.as_double()));
  };
  auto submit = [&](const ExperimentKind& kind, int n) -> std::optional<std::string> {
    const std::string yaml = ExperimentYaml(kind, data_dir, n);
    const std::string name = ExperimentName(kind, n);
    const std::string body =
        sf::Value(sf::Value::Map{{"configYaml", yaml}, {"activate", true}}).ToJson();
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) {
        ++submit_retries;
        std::this_thread::sleep_for(std::chrono::seconds(1));
        auto found = fetch(boost::beast::http::verb::get,
                           "/api/v1/experiments?name=" + name + "&limit=100", "");
        if (found.ok() && found->status == 200) {
          auto list = sf::Value::FromJson(found->body);
          const sf::Value* rows = list.ok() ? list->Find("experiments") : nullptr;
          for (const sf::Value& e : rows && rows->is_list() ? rows->as_list() : sf::Value::List{}) {
            const sf::Value* n = e.Find("name");
            const sf::Value* id = e.Find("id");
            if (n && n->is_string() && n->as_string() == name && id) return id_text(*id);
          }
        } else {
          if (Clock::now() > deadline) break;
          continue;  // the master is still down: ask the list again before submitting
        }
      }
      if (Clock::now() > deadline) break;
      auto r = fetch(boost::beast::http::verb::post, "/api/v1/experiments", body);
      if (r.ok() && r->status == 200) {
        auto parsed = sf::Value::FromJson(r->body);
        const sf::Value* e = parsed.ok() ? parsed->Find("experiment") : nullptr;
        const sf::Value* id = e ? e->Find("id") : nullptr;
        if (id) return id_text(*id);
        stats.Error("submit " + name + ": no experiment id in " + r->body);
        return std::nullopt;
      }
      if (r.ok() && r->status >= 400 && r->status < 500) {
        stats.Error("submit " + name + ": " + std::to_string(r->status) + " " + r->body);
        return std::nullopt;
      }
    }
    stats.Error("submit " + name + ": no answer from the master before max_seconds");
    return std::nullopt;
  };
  for (size_t i = 0; i < due.size(); ++i) {
    const Due& d = due[i];
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(d.at)));
    if (Clock::now() > deadline) break;
    std::optional<std::string> id = submit(*d.kind, static_cast<int>(i) + 1);
    if (!id) {
      ++refused;
      continue;
    }
    ++submitted;
    std::lock_guard<std::mutex> lock(ids_mu);
    experiment_ids.push_back(*id);
    if (fair_pools.count(d.kind->pool)) {
      shares.Expect(std::stoll(*id), d.kind->pool, d.kind->weight, d.kind->trials);
    }
  }
  const double submit_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Until nothing has run for idle_seconds (the searchers have given every trial its last
  // operation), or the deadline.
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double idle = (NowNs() - stats.last_running_ns.load()) / 1e9;
    if (stats.running == 0 && idle >= scenario.idle_seconds) break;
  }
  const double run_seconds =
      std::chrono::duration<double>(Clock::now() - start).count() -
      (stats.running == 0 ? std::max(0.0, (NowNs() - stats.last_running_ns.load()) / 1e9) : 0.0);
  const int still_running = stats.running;
  sampling = false;
  sampler.join();
  metering = false;
  meter.join();
  // The agents' last events (their tasks' exits) may still wait in their outboxes when the
  // master lags behind a saturated machine: leaving now would leave those trials RUNNING in the
  // master's books. Wait (up to a minute) until every outbox is acknowledged.
  const auto drain_start = Clock::now();
  int undrained = 0;
  if (still_running == 0) {
    while (true) {
      undrained = 0;
      for (auto& a : agents) undrained += a->drained() ? 0 : 1;
      if (undrained == 0 || Clock::now() - drain_start > std::chrono::seconds(60)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    for (auto& a : agents) a->Stop();
  }
  const double drain_seconds = std::chrono::duration<double>(Clock::now() - drain_start).count();

  std::vector<double> gaps;
  {
    std::lock_guard<std::mutex> lock(stats.mu);
    gaps = stats.slot_gaps;
  }
  std::printf(
      "scenario=%s\nagents=%d\nslots=%d\nexperiments_submitted=%d\nexperiments_refused=%d\n"
      "submit_retries=%lld\n",
      scenario.name.c_str(), scenario.agents, scenario.agents * scenario.slots_per_agent, submitted,
      refused, static_cast<long long>(submit_retries));
  std::printf(
      "submit_seconds=%.1f\nrun_seconds=%.1f\ntrial_starts=%lld\ntrial_starts_per_second=%.2f\n",
      submit_seconds, run_seconds, static_cast<long long>(stats.starts.load()),
      run_seconds > 0 ? stats.starts.load() / run_seconds : 0.0);
  std::printf("metric_rows=%lld\nmetric_rows_per_second=%.1f\noperations_completed=%lld\n",
              static_cast<long long>(stats.rows.load()),
              run_seconds > 0 ? stats.rows.load() / run_seconds : 0.0,
              static_cast<long long>(stats.operations.load()));
  std::printf(
      "failures_injected=%lld\nkills=%lld\nstops=%lld\nerrors=%lld\n",
      static_cast<long long>(stats.failures.load()), static_cast<long long>(stats.kills.load()),
      static_cast<long long>(stats.stops.load()), static_cast<long long>(stats.errors.load()));
  std::printf("slot_gaps=%zu\nslot_gap_p50_ms=%.1f\nslot_gap_p99_ms=%.1f\nslot_gap_max_ms=%.1f\n",
              gaps.size(), 1000 * Percentile(gaps, 0.5), 1000 * Percentile(gaps, 0.99),
              gaps.empty() ? 0.0 : 1000 * *std::max_element(gaps.begin(), gaps.end()));
  std::printf("queued_trials_sampled=%lld\nqueued_without_reason=%lld\n",
              static_cast<long long>(queued_seen.load()),
              static_cast<long long>(queued_without_reason.load()));
  std::printf("outbox_drain_seconds=%.1f\nagents_undrained=%d\n", drain_seconds, undrained);
  std::printf("gang_ends=%lld\ndouble_booked=%lld\n",
              static_cast<long long>(stats.gang_ends.load()),
              static_cast<long long>(stats.double_booked.load()));
  if (stats.gang_ends > 0) std::printf("first_gang_end=%s\n", stats.first_gang_end.c_str());
  // Each fair-share pool: how long all its experiments contended, and each one's share of the
  // slot-seconds against its weight's share.
  for (const auto& [pool, r] : shares.Results()) {
    std::printf("fair_share_%s_seconds=%.1f\nfair_share_%s_worst_error=%.3f\nfair_share_%s=",
                pool.c_str(), r.seconds, pool.c_str(), r.worst_error, pool.c_str());
    for (const ShareMeter::Line& l : r.lines) {
      std::printf("%s%lld:%.3f/%.3f", &l == &r.lines.front() ? "" : " ",
                  static_cast<long long>(l.experiment), l.slot_share, l.weight_share);
    }
    std::printf("\n");
  }
  if (stats.errors > 0) std::printf("first_error=%s\n", stats.first_error.c_str());
  if (still_running > 0) {
    // max_seconds passed with trainers still running: say where they wait, and leave them
    // (joining could wait out their calls' retries).
    std::printf("still_running=%d\nwaiting_on_searcher=%d\nwaiting_on_rendezvous=%d\n",
                still_running, stats.in_next.load(), stats.in_gather.load());
    std::fflush(stdout);
    std::_Exit(3);
  }
  return stats.errors > 0 ? 1 : 0;
}
