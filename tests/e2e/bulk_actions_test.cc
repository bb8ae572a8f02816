// Bulk experiment actions and experiment deletion, end to end against a real master and
// PostgreSQL: POST /api/v1/experiments/{kill,pause,activate,archive,unarchive,delete} with ids or
// a filter, DELETE /api/v1/experiments/{id}, and `sf experiment VERB ID...`. Every result is
// checked against what REST and PostgreSQL then say about each experiment.
#include <filesystem>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/cli/run_sf.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string IdList(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

// The ids as the bulk request's JSON array.
std::string IdsBody(const std::vector<int64_t>& ids) {
  Value::List list;
  for (int64_t id : ids) list.push_back(Value(std::to_string(id)));
  return Value(Value::Map{{"ids", Value(std::move(list))}}).ToJson();
}

struct BulkResult {
  int64_t id = 0;
  bool ok = false;
  int64_t code = 0;
  std::string error, state;
};

// The results of a bulk call answered 200, in order (a test failure otherwise).
std::vector<BulkResult> Results(const std::pair<int, Value>& reply) {
  std::vector<BulkResult> out;
  EXPECT_EQ(reply.first, 200) << reply.second.ToJson();
  const Value* results = reply.second.Find("results");
  if (reply.first != 200 || !results || !results->is_list()) return out;
  for (const Value& r : results->as_list()) {
    BulkResult b;
    b.id = Id(r);
    b.ok = r.Find("ok") && r.Find("ok")->as_bool();
    b.code = r.Find("code") ? r.Find("code")->as_int() : 0;
    b.error = r.Find("error") ? r.Find("error")->as_string() : "";
    b.state = r.Find("state") ? r.Find("state")->as_string() : "";
    out.push_back(b);
  }
  return out;
}

// How many of `ids` are in `state` in PostgreSQL, and how many of their trials are in
// `trial_state`.
int64_t ExperimentsIn(const Cluster& c, const std::vector<int64_t>& ids, const std::string& state) {
  return Count(c.db(), "SELECT count(*) FROM experiments WHERE state = '" + state + "' AND id IN (" +
                           IdList(ids) + ")");
}
int64_t TrialsIn(const Cluster& c, const std::vector<int64_t>& ids, const std::string& trial_state) {
  return Count(c.db(), "SELECT count(*) FROM trials WHERE state = '" + trial_state +
                           "' AND experiment_id IN (" + IdList(ids) + ")");
}

class BulkActions : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && cluster_) cluster_->DumpLogs();
  }
  std::unique_ptr<Cluster> cluster_;
};

// 50 experiments (no agent, so their trials wait QUEUED and every transition is immediate), acted
// on by ids with a bad id among them and by filters; after each call every experiment's result,
// its REST state and its rows in PostgreSQL agree.
TEST_F(BulkActions, FiftyExperimentsGetPerIdResultsAndConsistentStates) {
  cluster_ = std::make_unique<Cluster>(0, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  std::vector<int64_t> all, even, odd;
  for (int i = 0; i < 50; ++i) {
    int64_t id = c.Submit(TinyExperiment(1, 20, 10, std::string(i % 2 ? "bulk-odd-" : "bulk-even-") +
                                                          std::to_string(i)));
    ASSERT_GT(id, 0);
    all.push_back(id);
    (i % 2 ? odd : even).push_back(id);
  }
  constexpr int64_t kMissing = 987654321;
  ASSERT_EQ(ExperimentsIn(c, all, "ACTIVE"), 50);

  // Pause all 50 by ids, a missing id in the middle and a duplicate: 51 results in request order.
  std::vector<int64_t> request = all;
  request.insert(request.begin() + 25, kMissing);
  request.push_back(all[0]);
  std::vector<BulkResult> paused = Results(c.Post("/api/v1/experiments/pause", IdsBody(request)));
  ASSERT_EQ(paused.size(), 51u);
  for (size_t i = 0; i < paused.size(); ++i) {
    EXPECT_EQ(paused[i].id, request[i]);
    if (paused[i].id == kMissing) {
      EXPECT_FALSE(paused[i].ok);
      EXPECT_EQ(paused[i].code, 5);  // NOT_FOUND
      EXPECT_EQ(paused[i].error, "experiment 987654321 does not exist");
    } else {
      EXPECT_TRUE(paused[i].ok) << paused[i].error;
      EXPECT_EQ(paused[i].state, "EXPERIMENT_STATE_PAUSED");
    }
  }
  EXPECT_EQ(ExperimentsIn(c, all, "PAUSED"), 50);
  EXPECT_EQ(TrialsIn(c, all, "PAUSED"), 50);
  for (int64_t id : {all[0], all[25], all[49]}) EXPECT_EQ(c.ExperimentState(id), "EXPERIMENT_STATE_PAUSED");

  // Activate the even ones by a filter: exactly those 25, by id; the odd ones stay paused.
  std::vector<BulkResult> activated = Results(c.Post(
      "/api/v1/experiments/activate",
      R"({"filter": {"states": ["EXPERIMENT_STATE_PAUSED"], "name": "bulk-even-"}})"));
  ASSERT_EQ(activated.size(), 25u);
  for (size_t i = 0; i < activated.size(); ++i) {
    EXPECT_EQ(activated[i].id, even[i]);
    EXPECT_TRUE(activated[i].ok) << activated[i].error;
    EXPECT_EQ(activated[i].state, "EXPERIMENT_STATE_ACTIVE");
  }
  EXPECT_EQ(ExperimentsIn(c, even, "ACTIVE"), 25);
  EXPECT_EQ(TrialsIn(c, even, "QUEUED"), 25);
  EXPECT_EQ(ExperimentsIn(c, odd, "PAUSED"), 25);

  // Kill ten odd ones, then pause those ten and five active even ones: the ten are refused, each
  // with its own reason, and the five are paused all the same.
  std::vector<int64_t> killed(odd.begin(), odd.begin() + 10);
  for (const BulkResult& r : Results(c.Post("/api/v1/experiments/kill", IdsBody(killed)))) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.state, "EXPERIMENT_STATE_CANCELED");
  }
  std::vector<int64_t> mixed = killed;
  mixed.insert(mixed.end(), even.begin(), even.begin() + 5);
  std::vector<BulkResult> repaused = Results(c.Post("/api/v1/experiments/pause", IdsBody(mixed)));
  ASSERT_EQ(repaused.size(), 15u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_FALSE(repaused[i].ok);
    EXPECT_EQ(repaused[i].code, 9);  // FAILED_PRECONDITION
    EXPECT_EQ(repaused[i].error,
              "experiment " + std::to_string(killed[i]) + " is CANCELED and cannot be paused");
    EXPECT_EQ(repaused[i].state, "EXPERIMENT_STATE_CANCELED");
  }
  for (size_t i = 10; i < 15; ++i) EXPECT_TRUE(repaused[i].ok) << repaused[i].error;
  EXPECT_EQ(ExperimentsIn(c, killed, "CANCELED"), 10);
  EXPECT_EQ(TrialsIn(c, killed, "CANCELED"), 10);
  EXPECT_EQ(ExperimentsIn(c, std::vector<int64_t>(even.begin(), even.begin() + 5), "PAUSED"), 5);

  // Deleting live experiments is refused, with the reason; the rows stay.
  std::vector<BulkResult> refused = Results(c.Post("/api/v1/experiments/delete", IdsBody({even[0], odd[20]})));
  ASSERT_EQ(refused.size(), 2u);
  for (const BulkResult& r : refused) {
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.code, 9);
    EXPECT_NE(r.error.find("only completed, canceled or errored experiments can be deleted"), std::string::npos)
        << r.error;
  }
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments WHERE id IN (" + IdList({even[0], odd[20]}) + ")"), 2);

  // Archive the ten canceled ones by a filter; archiving a live one is refused. Listings then
  // leave the ten out until they are unarchived by a filter (which looks at archived ones).
  std::vector<BulkResult> archived = Results(c.Post(
      "/api/v1/experiments/archive", R"({"filter": {"states": ["EXPERIMENT_STATE_CANCELED"], "name": "bulk-"}})"));
  ASSERT_EQ(archived.size(), 10u);
  for (const BulkResult& r : archived) EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments WHERE archived AND id IN (" + IdList(killed) + ")"), 10);
  EXPECT_EQ(c.Get("/api/v1/experiments?limit=1").second.Find("pagination")->Find("total")->as_int(), 40);
  std::vector<BulkResult> live_archive = Results(c.Post("/api/v1/experiments/archive", IdsBody({odd[20]})));
  ASSERT_EQ(live_archive.size(), 1u);
  EXPECT_EQ(live_archive[0].code, 9);
  std::vector<BulkResult> unarchived = Results(c.Post(
      "/api/v1/experiments/unarchive", R"({"filter": {"states": ["EXPERIMENT_STATE_CANCELED"]}})"));
  EXPECT_EQ(unarchived.size(), 10u);
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments WHERE archived"), 0);

  // Kill everything this user owns whose name has "bulk-": all 50 end CANCELED with their trials.
  const std::string owner = c.Get("/api/v1/experiments/" + std::to_string(all[0])).second
                                .Find("experiment")->Find("owner")->as_string();
  Value kill_filter(Value::Map{{"filter", Value::Map{{"owner", owner}, {"name", "bulk-"}}}});
  std::vector<BulkResult> killed_all = Results(c.Post("/api/v1/experiments/kill", kill_filter.ToJson()));
  ASSERT_EQ(killed_all.size(), 50u);
  for (const BulkResult& r : killed_all) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.state, "EXPERIMENT_STATE_CANCELED");
  }
  EXPECT_EQ(ExperimentsIn(c, all, "CANCELED"), 50);
  EXPECT_EQ(TrialsIn(c, all, "CANCELED"), 50);
  Value other_owner(Value::Map{{"filter", Value::Map{{"owner", owner + "-nobody"}}}});
  EXPECT_TRUE(Results(c.Post("/api/v1/experiments/kill", other_owner.ToJson())).empty());

  // Delete 49 of them by ids with the missing id: it alone fails; the 49 are gone from REST and
  // from every table. The 50th goes through DELETE /api/v1/experiments/{id}.
  std::vector<int64_t> doomed(all.begin(), all.end() - 1);
  doomed.push_back(kMissing);
  std::vector<BulkResult> deleted = Results(c.Post("/api/v1/experiments/delete", IdsBody(doomed)));
  ASSERT_EQ(deleted.size(), 50u);
  for (const BulkResult& r : deleted) {
    EXPECT_EQ(r.ok, r.id != kMissing) << r.id << ": " << r.error;
    EXPECT_EQ(r.state, "EXPERIMENT_STATE_UNSPECIFIED");  // deleted, or never existed
  }
  EXPECT_EQ(deleted.back().code, 5);
  auto client = api::MasterClient::Create(c.url());
  ASSERT_TRUE(client.ok());
  auto one = client->Delete("/api/v1/experiments/" + std::to_string(all.back()));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->status, 200) << one->body;
  auto again = client->Delete("/api/v1/experiments/" + std::to_string(all.back()));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 404) << again->body;
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments WHERE id IN (" + IdList(all) + ")"), 0);
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM trials WHERE experiment_id IN (" + IdList(all) + ")"), 0);
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM searcher_snapshots WHERE experiment_id IN (" + IdList(all) + ")"),
            0);
  for (int64_t id : {all[0], all[49]}) {
    EXPECT_EQ(c.Get("/api/v1/experiments/" + std::to_string(id)).first, 404);
  }
  EXPECT_EQ(c.Get("/api/v1/experiments?limit=1").second.Find("pagination")->Find("total")->as_int(), 0);

  // Requests that name no experiments, or name them twice over, are the caller's mistake (400).
  for (const char* body : {"{}", R"({"filter": {}})", R"({"ids": ["1"], "filter": {"name": "x"}})",
                           R"({"filter": {"states": ["EXPERIMENT_STATE_UNSPECIFIED"]}})",
                           R"({"filter": {"name": "a\u0000b"}})", R"({"ids": "x"})"}) {
    auto [code, v] = c.Post("/api/v1/experiments/kill", body);
    EXPECT_EQ(code, 400) << body << " -> " << v.ToJson();
  }
  // Bytes that are not UTF-8 in a filter or a uuid are refused too, not sent to PostgreSQL.
  for (const auto& [route, body] : std::vector<std::pair<std::string, std::string>>{
           {"/api/v1/experiments/kill", "{\"filter\": {\"name\": \"a\xff\"}}"},
           {"/api/v1/experiments/kill", "{\"filter\": {\"owner\": \"\xc3\x28\"}}"},
           {"/api/v1/checkpoints/delete", "{\"uuids\": [\"\xff\"]}"},
           {"/api/v1/checkpoints/delete", "{\"uuids\": []}"}}) {
    auto [code, v] = c.Post(route, body);
    EXPECT_EQ(code, 400) << route << " " << body << " -> " << v.ToJson();
  }
  // A uuid with a NUL is that uuid's own error.
  std::pair<int, Value> nul = c.Post("/api/v1/checkpoints/delete", "{\"uuids\": [\"a\\u0000b\", \"zz\"]}");
  ASSERT_EQ(nul.first, 200) << nul.second.ToJson();
  ASSERT_EQ(nul.second.Find("results")->as_list().size(), 2u);
  EXPECT_EQ(nul.second.Find("results")->as_list()[0].Find("code")->as_int(), 3);  // INVALID_ARGUMENT
  EXPECT_EQ(nul.second.Find("results")->as_list()[1].Find("code")->as_int(), 5);  // NOT_FOUND
}

// The `sf` CLI over the same routes: one id keeps the single-experiment output, several ids print
// one line each, and a missing id among them is named on stderr with exit 2.
TEST_F(BulkActions, CliActsOnSeveralIdsAndNamesTheBadOne) {
  cluster_ = std::make_unique<Cluster>(0, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(c.Submit(TinyExperiment(1, 20, 10, "cli-bulk")));
  TempDir scratch;
  auto sf = [&](const std::vector<std::string>& args) {
    SfRun run = RunSf(args, scratch, {{"SF_MASTER", c.url()}});
    return std::make_tuple(run.exit_code, run.out, run.err);
  };
  const std::string a = std::to_string(ids[0]), b = std::to_string(ids[1]), d = std::to_string(ids[2]);
  auto [code, out, err] = sf({"experiment", "pause", a, "987654321", b});
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_EQ(out, "experiment " + a + ": PAUSED\nexperiment " + b + ": PAUSED\n");
  EXPECT_EQ(err, "sf: experiment 987654321: experiment 987654321 does not exist\n");

  std::tie(code, out, err) = sf({"experiment", "kill", "--name", "cli-bulk", "--state", "paused"});
  EXPECT_EQ(code, 0) << out << err;
  EXPECT_EQ(out, "experiment " + a + ": CANCELED\nexperiment " + b + ": CANCELED\n");

  std::tie(code, out, err) = sf({"experiment", "delete", a, d});
  EXPECT_EQ(code, 1) << out << err;
  EXPECT_EQ(out, "experiment " + a + ": deleted\n");
  EXPECT_NE(err.find("sf: experiment " + d + ": experiment " + d + " is ACTIVE; only completed"), std::string::npos)
      << err;

  std::tie(code, out, err) = sf({"experiment", "delete", b});
  EXPECT_EQ(code, 0) << out << err;
  EXPECT_EQ(out, "experiment " + b + ": deleted\n");
  std::tie(code, out, err) = sf({"experiment", "delete", b});
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_EQ(err, "sf: experiment " + b + " does not exist\n");
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments WHERE id IN (" + IdList(ids) + ")"), 1);
}

// Deleting a finished experiment that trained on a real trainer removes its checkpoints' files
// and every row of it (metrics, logs, checkpoints), and leaves another experiment's alone.
TEST_F(BulkActions, DeleteRemovesCheckpointFilesAndRows) {
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  const int64_t doomed = c.Submit(TinyExperiment(1, 20, 10, "doomed"));
  ASSERT_TRUE(c.WaitForState(doomed, "EXPERIMENT_STATE_COMPLETED", 300s));
  const int64_t kept = c.Submit(TinyExperiment(1, 20, 10, "kept"));
  ASSERT_TRUE(c.WaitForState(kept, "EXPERIMENT_STATE_COMPLETED", 300s));

  const std::string doomed_dir = c.checkpoint_root() + "/experiment-" + std::to_string(doomed);
  const std::string kept_dir = c.checkpoint_root() + "/experiment-" + std::to_string(kept);
  const std::string trials_of = "(SELECT id FROM trials WHERE experiment_id = " + std::to_string(doomed) + ")";
  const int64_t checkpoints = Count(c.db(), "SELECT count(*) FROM checkpoints WHERE trial_id IN " + trials_of);
  ASSERT_GE(checkpoints, 1);
  pqxx::connection conn(c.db());
  pqxx::work tx(conn);
  for (const auto& row : tx.exec("SELECT path FROM checkpoints WHERE trial_id IN " + trials_of)) {
    EXPECT_TRUE(fs::exists(row[0].as<std::string>())) << row[0].as<std::string>();
    EXPECT_EQ(row[0].as<std::string>().rfind(doomed_dir + "/", 0), 0u) << row[0].as<std::string>();
  }
  tx.commit();
  ASSERT_GT(Count(c.db(), "SELECT count(*) FROM metrics WHERE trial_id IN " + trials_of), 0);
  ASSERT_GT(Count(c.db(), "SELECT count(*) FROM task_logs WHERE trial_id IN " + trials_of), 0);
  ASSERT_TRUE(fs::exists(kept_dir));
  std::vector<int64_t> doomed_trials;
  const Value doomed_list = c.Trials(doomed);  // the loop reads into it: keep it alive
  for (const Value& t : doomed_list.as_list()) doomed_trials.push_back(Id(t));
  ASSERT_EQ(doomed_trials.size(), 1u);

  std::vector<BulkResult> deleted = Results(c.Post("/api/v1/experiments/delete", IdsBody({doomed})));
  ASSERT_EQ(deleted.size(), 1u);
  EXPECT_TRUE(deleted[0].ok) << deleted[0].error;
  EXPECT_FALSE(fs::exists(doomed_dir));
  for (const char* table : {"checkpoints", "metrics", "task_logs", "allocations"}) {
    EXPECT_EQ(Count(c.db(), std::string("SELECT count(*) FROM ") + table + " WHERE trial_id IN (" +
                                IdList(doomed_trials) + ")"),
              0)
        << table;
  }
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments WHERE id = " + std::to_string(doomed)), 0);
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM trials WHERE experiment_id = " + std::to_string(doomed)), 0);
  // The other experiment keeps its rows and files.
  EXPECT_TRUE(fs::exists(kept_dir));
  EXPECT_EQ(c.ExperimentState(kept), "EXPERIMENT_STATE_COMPLETED");
  EXPECT_GE(Count(c.db(), "SELECT count(*) FROM checkpoints c JOIN trials t ON t.id = c.trial_id "
                          "WHERE t.experiment_id = " + std::to_string(kept)),
            1);
}

}  // namespace
}  // namespace sf::testing
