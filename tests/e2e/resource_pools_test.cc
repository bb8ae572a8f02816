// Resource pools end to end: an experiment naming a pool no agent is in is refused at submit
// with the cluster's pools; GET /api/v1/resource-pools and `sf resource-pool list` show each
// pool's agents, slots, slots in use, running and queued trials.
#include <string>

#include "common/subprocess.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
using namespace std::chrono_literals;

class ResourcePools : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && cluster_) cluster_->DumpLogs();
  }
  std::unique_ptr<Cluster> cluster_;
};

// The pool `name` of a GET /api/v1/resource-pools reply, or null.
const Value* Pool(const Value& reply, const std::string& name) {
  const Value* pools = reply.Find("resourcePools");
  if (!pools || !pools->is_list()) return nullptr;
  for (const Value& p : pools->as_list()) {
    if (p.Find("name") && p.Find("name")->as_string() == name) return &p;
  }
  return nullptr;
}

int64_t Field(const Value* pool, const std::string& key) {
  const Value* v = pool ? pool->Find(key) : nullptr;
  return v && v->is_int() ? v->as_int() : -1;
}

TEST_F(ResourcePools, UnknownPoolIsRefusedAndPoolsShowSlotsUsageAndQueue) {
  cluster_ = std::make_unique<Cluster>(1, 1);
  Cluster& c = *cluster_;
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));

  // A pool no agent is in: 400 naming the field and listing the pools; nothing stored.
  const std::string gpu = TinyExperiment(1, 20, 10, "wrong-pool") + "resources: {resource_pool: gpu}\n";
  auto [code, refused] = c.Post("/api/v1/experiments", Value(Value::Map{{"configYaml", gpu}}).ToJson());
  EXPECT_EQ(code, 400) << refused.ToJson();
  ASSERT_TRUE(refused.Find("errors") && !refused.Find("errors")->as_list().empty()) << refused.ToJson();
  const Value& error = refused.Find("errors")->as_list()[0];
  EXPECT_EQ(error.Find("path")->as_string(), "resources.resource_pool");
  EXPECT_EQ(error.Find("message")->as_string(),
            "\"gpu\" is not a resource pool of this cluster; its pools: default");
  EXPECT_EQ(Count(c.db(), "SELECT count(*) FROM experiments"), 0);
  // sf says it once: the message's head, then each field's error.
  {
    TempDir tmp;
    const std::string file = tmp.WriteFile("gpu.yaml", gpu);
    auto create = RunCommand({"/bin/sh", "-c", "exec \"$0\" experiment create \"$1\" -m \"$2\" 2>&1",
                              Cluster::Binary("sf"), file, c.url()});
    ASSERT_TRUE(create.ok());
    EXPECT_EQ(create->exit_code, 2) << create->output;
    EXPECT_EQ(create->output,
              "sf: invalid experiment config:\n"
              "  resources.resource_pool: \"gpu\" is not a resource pool of this cluster; its pools: default\n");
  }

  // One slot, two single-trial experiments: one trial runs, the other waits in the pool's queue.
  const int64_t first = c.Submit(TinyExperiment(1, 100000, 10, "runs"));
  ASSERT_GT(first, 0);
  ASSERT_TRUE(c.WaitFor([&] { return !c.TrainerPids().empty(); }, 120s)) << "the first trial did not start";
  const int64_t second = c.Submit(TinyExperiment(1, 100000, 10, "waits"));
  ASSERT_GT(second, 0);
  Value reply;
  EXPECT_TRUE(c.WaitFor(
      [&] {
        reply = c.Get("/api/v1/resource-pools").second;
        return Field(Pool(reply, "default"), "queuedTrials") == 1;
      },
      60s))
      << reply.ToJson();
  const Value* pool = Pool(reply, "default");
  ASSERT_NE(pool, nullptr) << reply.ToJson();
  EXPECT_EQ(pool->Find("scheduler")->as_string(), "priority");
  EXPECT_EQ(Field(pool, "agents"), 1);
  EXPECT_EQ(Field(pool, "totalSlots"), 1);
  EXPECT_EQ(Field(pool, "usedSlots"), 1);
  EXPECT_EQ(Field(pool, "runningTrials"), 1);
  EXPECT_EQ(Field(pool, "queuedTrials"), 1);
  EXPECT_EQ(Field(pool, "queuedSlots"), 1);
  EXPECT_EQ(reply.Find("resourcePools")->as_list().size(), 1u);

  // The CLI shows the same row.
  auto sf = RunCommand({Cluster::Binary("sf"), "resource-pool", "list", "-m", c.url()});
  ASSERT_TRUE(sf.ok());
  EXPECT_EQ(sf->exit_code, 0) << sf->output;
  EXPECT_NE(sf->output.find("POOL"), std::string::npos) << sf->output;
  std::string row;
  for (size_t at = 0; at < sf->output.size();) {
    size_t end = sf->output.find('\n', at);
    std::string line = sf->output.substr(at, end - at);
    if (line.rfind("default ", 0) == 0) row = line;
    at = end == std::string::npos ? sf->output.size() : end + 1;
  }
  // default, priority, 1 agent, no nodes (a pool of agents), 1 slot, 1 used, 1 running, 1 queued,
  // 1 queued slot.
  std::string squeezed;
  for (char ch : row) {
    if (ch != ' ' || (!squeezed.empty() && squeezed.back() != ' ')) squeezed += ch;
  }
  while (!squeezed.empty() && squeezed.back() == ' ') squeezed.pop_back();
  EXPECT_EQ(squeezed, "default priority 1 - 1 1 1 1 1") << sf->output;

  // Once both are killed the pool is idle again.
  ASSERT_EQ(c.Post("/api/v1/experiments/kill", "{\"ids\": [\"" + std::to_string(first) + "\", \"" +
                                                   std::to_string(second) + "\"]}")
                .first,
            200);
  EXPECT_TRUE(c.WaitFor(
      [&] {
        reply = c.Get("/api/v1/resource-pools").second;
        const Value* p = Pool(reply, "default");
        return Field(p, "usedSlots") == 0 && Field(p, "queuedTrials") == 0 && Field(p, "runningTrials") == 0;
      },
      120s))
      << reply.ToJson();
}

}  // namespace
}  // namespace sf::testing
