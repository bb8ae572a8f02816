// What the cluster serving tests start from (tests/serve/serve_registry_test.cc,
// serve_cluster_test.cc): a real local cluster trains one tiny trial, and its last checkpoint is
// registered as version 1 of a model.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/e2e/cluster_fixture.h"

namespace sf::serve::serve_testing {

struct TrainedModel {
  int64_t experiment_id = 0;
  std::string checkpoint_uuid, checkpoint_path;
};

// Trains one trial of 60 batches (a few seconds) and registers its ACTIVE checkpoint as version
// 1 of a new model `name`. Fails the test (and fills nothing) when a step does not work.
inline void TrainAndRegister(sf::testing::Cluster& c, const std::string& name, TrainedModel* out) {
  ASSERT_FALSE(c.db().empty()) << "no PostgreSQL";
  ASSERT_TRUE(c.WaitForAgents(1));
  const int64_t id = c.Submit(sf::testing::TinyExperiment(1, 60, 30, name));
  ASSERT_GT(id, 0);
  if (!c.WaitForState(id, "EXPERIMENT_STATE_COMPLETED", std::chrono::seconds(60))) {
    c.DumpLogs();
    FAIL() << "the experiment did not complete";
  }
  auto [status, checkpoints] = c.Get("/api/v1/experiments/" + std::to_string(id) + "/checkpoints");
  ASSERT_EQ(status, 200) << checkpoints.ToJson();
  TrainedModel m;
  m.experiment_id = id;
  for (const Value& ck : checkpoints.Find("checkpoints")->as_list()) {
    if (ck.Find("state")->as_string() == "ACTIVE") {
      m.checkpoint_uuid = ck.Find("uuid")->as_string();
      m.checkpoint_path = ck.Find("path")->as_string();
    }
  }
  ASSERT_FALSE(m.checkpoint_uuid.empty()) << checkpoints.ToJson();
  ASSERT_EQ(c.Post("/api/v1/models", "{\"name\": \"" + name + "\"}").first, 200);
  auto [registered, version] =
      c.Post("/api/v1/models/" + name + "/versions", "{\"checkpoint_uuid\": \"" + m.checkpoint_uuid + "\"}");
  ASSERT_EQ(registered, 200) << version.ToJson();
  *out = m;
}

}  // namespace sf::serve::serve_testing
