// The model size a native trial reports, checked against the model it trained: every training
// report of sf-trainer's cluster mode carries `parameters`, the model's parameter count, and that
// must be the number of values in the weights the trial checkpointed (model.safetensors holds each
// parameter once, as its own tensor, without the padding that aligns them in memory). What the
// dashboard's Architectures card and trial page show (docs/webui.md).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>

#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {

// The number of values the tensors of a safetensors file hold (each shape's product, summed over
// every tensor of its JSON header); -1 when the file cannot be read.
inline int64_t SafetensorsValueCount(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  if (!in || n == 0 || n > (uint64_t{1} << 30)) return -1;
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  auto parsed = Value::FromJson(header);
  if (!in || !parsed.ok() || !parsed->is_map()) return -1;
  int64_t count = 0;
  for (const auto& [name, tensor] : parsed->as_map()) {
    if (name == "__metadata__") continue;
    const Value* shape = tensor.Find("shape");
    if (!shape || !shape->is_list()) return -1;
    int64_t numel = 1;
    for (const Value& d : shape->as_list()) numel *= static_cast<int64_t>(d.as_double());
    count += numel;
  }
  return count;
}

// Expects each trial of experiment `id` that left an ACTIVE checkpoint to have reported, in every
// training report, `parameters` equal to the values in that checkpoint's weights. Returns the
// count of each such trial (trial id → parameters).
inline std::map<int64_t, int64_t> ExpectReportedParametersAreTheCheckpointedModels(Cluster& cluster,
                                                                                   int64_t id) {
  std::map<int64_t, int64_t> counts;
  auto [code, cks] = cluster.Get("/api/v1/experiments/" + std::to_string(id) + "/checkpoints");
  EXPECT_EQ(code, 200);
  if (code != 200) return counts;
  for (const Value& c : cks.Find("checkpoints")->as_list()) {
    if (c.Find("state")->as_string() != "ACTIVE") continue;
    const int64_t trial = std::stoll(c.Find("trialId")->as_string());
    const std::string weights = c.Find("path")->as_string() + "/model.safetensors";
    const int64_t values = SafetensorsValueCount(weights);
    EXPECT_GT(values, 0) << weights;
    auto [mcode, m] =
        cluster.Get("/api/v1/trials/" + std::to_string(trial) + "/metrics?kind=training");
    EXPECT_EQ(mcode, 200);
    const Value* reports = m.Find("metrics");
    EXPECT_TRUE(reports && !reports->as_list().empty()) << "trial " << trial << ": " << m.ToJson();
    if (!reports) continue;
    for (const Value& r : reports->as_list()) {
      const Value* p = r.Find("values") ? r.Find("values")->Find("parameters") : nullptr;
      EXPECT_TRUE(p && p->is_number()) << "trial " << trial << ": " << r.ToJson();
      if (p && p->is_number()) {
        EXPECT_EQ(static_cast<int64_t>(p->as_double()), values)
            << "trial " << trial << " reports " << p->as_double() << " parameters, its weights "
            << weights << " hold " << values << " values";
      }
    }
    counts[trial] = values;
  }
  return counts;
}

}  // namespace sf::testing
