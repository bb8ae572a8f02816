// GPU slots end to end (docs/agent.md, "GPU slots"): a real master, PostgreSQL and two agents,
// one of them with `--slots auto` and the fake NVML (tests/agent/fake_nvml.cc: 2 GPUs, 80 GiB
// each, 1 and 2 GiB in use, 40 % and 50 % busy), in a pool of its own. The GPUs register with
// their UUIDs, names and memory, and the agent listing (REST, gRPC, `sf agent list` in text and
// --json) shows each one's utilisation and memory in use from the agent's heartbeats.
//
// A trial scheduled onto the fake GPUs shows that the device comes from the slot: its trainer
// gets CUDA_VISIBLE_DEVICES = the fake UUIDs, asks for a GPU (no hyperparameter says so), finds
// none (there is no such GPU on any machine) and says so in the trial's logs. A trial on both
// fake GPUs (2 slots) connects its ranks with NCCL, not Open MPI, and says why that fails.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <sstream>

#include "common/subprocess.h"
#include "steadfast/v1/api.grpc.pb.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {

using std::chrono::seconds;
constexpr int64_t kGiB = 1024LL * 1024 * 1024;

std::string Uuid(int i) { return "GPU-00000000-0000-4000-8000-00000000000" + std::to_string(i); }

// The listed slot `slot_id` of agent `agent_id` in an agents listing (REST JSON), or null.
const Value* ListedSlot(const Value& listing, const std::string& agent_id,
                        const std::string& slot_id) {
  const Value* agents = listing.Find("agents");
  if (!agents || !agents->is_list()) return nullptr;
  for (const Value& a : agents->as_list()) {
    if (!a.Find("id") || a.Find("id")->as_string() != agent_id || !a.Find("slots")) continue;
    for (const Value& s : a.Find("slots")->as_list()) {
      if (s.Find("id") && s.Find("id")->as_string() == slot_id) return &s;
    }
  }
  return nullptr;
}

std::string Text(const Value* v, const std::string& key) {
  const Value* f = v ? v->Find(key) : nullptr;
  return !f ? "" : f->is_string() ? f->as_string() : f->ToJson();
}

// The first line of `text` containing `needle`; "" when none does.
std::string LineWith(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

// Checks one GPU slot of the fake as the REST JSON (or `sf agent list --json`) shows it.
void ExpectFakeGpu(const Value& listing, int i) {
  const Value* slot = ListedSlot(listing, "e2e-agent-1", "cuda" + std::to_string(i));
  ASSERT_NE(slot, nullptr) << listing.ToJson();
  EXPECT_EQ(Text(slot, "type"), "SLOT_TYPE_CUDA");
  EXPECT_EQ(Text(slot, "device"), "Steadfast Fake GPU " + std::to_string(i));
  EXPECT_EQ(Text(slot, "uuid"), Uuid(i));
  EXPECT_EQ(Text(slot, "memoryTotalBytes"), std::to_string(80 * kGiB));  // int64: a JSON string
  const Value* usage = slot->Find("usage");
  ASSERT_TRUE(usage && usage->is_map()) << slot->ToJson();
  EXPECT_EQ(Text(usage, "utilizationPercent"), std::to_string(40 + 10 * i));
  EXPECT_EQ(Text(usage, "memoryUsedBytes"), std::to_string((i + 1) * kGiB));
  EXPECT_FALSE(Text(usage, "sampleTime").empty());
}

TEST(GpuSlotsEndToEnd, AnAgentWithNvmlListsItsGpusWithUtilisationAndMemory) {
  ClusterLayout layout;
  layout.agent_slots = {"", "auto"};
  layout.agent_flags = {{}, {"--nvml-library", SF_FAKE_NVML_PATH, "--resource-pool", "gpu"}};
  Cluster cluster(2, 1, layout);
  ASSERT_FALSE(cluster.db().empty()) << "no PostgreSQL";

  // REST: the GPUs with the latest sample of each, once a heartbeat carried one.
  Value listing;
  ASSERT_TRUE(cluster.WaitFor(
      [&] {
        auto [code, v] = cluster.Get("/api/v1/agents");
        listing = v;
        const Value* cuda1 = ListedSlot(v, "e2e-agent-1", "cuda1");
        return code == 200 && cuda1 && cuda1->Find("usage") &&
               ListedSlot(v, "e2e-agent-1", "cuda0")->Find("usage");
      },
      seconds(30)))
      << listing.ToJson();
  ExpectFakeGpu(listing, 0);
  ExpectFakeGpu(listing, 1);
  const Value* cpu = ListedSlot(listing, "e2e-agent-0", "cpu0");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->Find("usage"), nullptr);                          // CPU slots have no GPU usage
  EXPECT_EQ(ListedSlot(listing, "e2e-agent-1", "cpu0"), nullptr);  // GPUs found: no CPU slot

  // gRPC Api: the same listing.
  auto stub = steadfast::v1::Api::NewStub(
      grpc::CreateChannel(cluster.grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + cluster.admin_token());
  steadfast::v1::GetAgentsResponse agents;
  ASSERT_TRUE(stub->GetAgents(&ctx, steadfast::v1::GetAgentsRequest(), &agents).ok());
  bool found = false;
  for (const auto& a : agents.agents()) {
    if (a.id() != "e2e-agent-1") continue;
    found = true;
    ASSERT_EQ(a.slots_size(), 2);
    EXPECT_EQ(a.slots(1).uuid(), Uuid(1));
    EXPECT_EQ(a.slots(1).memory_total_bytes(), 80 * kGiB);
    EXPECT_EQ(a.slots(1).usage().utilization_percent(), 50);
    EXPECT_EQ(a.slots(1).usage().memory_used_bytes(), 2 * kGiB);
  }
  EXPECT_TRUE(found);

  // sf agent list --json: the master's listing, GPUs included.
  auto json =
      RunCommand({Cluster::Binary("sf"), "agent", "list", "--json", "--master", cluster.url()});
  ASSERT_TRUE(json.ok());
  ASSERT_EQ(json->exit_code, 0) << json->output;
  auto parsed = Value::FromJson(json->output);
  ASSERT_TRUE(parsed.ok()) << json->output;
  ExpectFakeGpu(*parsed, 0);
  ExpectFakeGpu(*parsed, 1);

  // sf agent list: a row per GPU with its name, memory used/total and utilisation.
  auto text = RunCommand({Cluster::Binary("sf"), "agent", "list", "--master", cluster.url()});
  ASSERT_TRUE(text.ok());
  ASSERT_EQ(text->exit_code, 0) << text->output;
  const std::string& out = text->output;
  EXPECT_NE(out.find("MEMORY USED/TOTAL"), std::string::npos) << out;
  for (int i = 0; i < 2; ++i) {
    const std::string row =
        LineWith(out, "cuda" + std::to_string(i));  // the agents table has no slot ids
    EXPECT_NE(row.find("e2e-agent-1"), std::string::npos) << out;
    EXPECT_NE(row.find("Steadfast Fake GPU " + std::to_string(i)), std::string::npos) << row;
    EXPECT_NE(row.find(std::to_string(i + 1) + ".0/80.0 GiB"), std::string::npos) << row;
    EXPECT_NE(row.find(std::to_string(40 + 10 * i) + "%"), std::string::npos) << row;
    EXPECT_NE(row.find("free"), std::string::npos) << row;
  }

  // The agent goes away: its GPUs stay listed, without figures that are no longer current.
  cluster.StopAgent(1);
  ASSERT_TRUE(cluster.WaitFor(
      [&] {
        auto [code, v] = cluster.Get("/api/v1/agents");
        const Value* cuda0 = ListedSlot(v, "e2e-agent-1", "cuda0");
        return code == 200 && cuda0 && !cuda0->Find("usage");
      },
      seconds(30)));
}

// A cluster whose one agent has the fake NVML's 2 GPUs in pool "gpu", and a trial submitted there.
class GpuTrial : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterLayout layout;
    layout.agent_slots = {"auto"};
    layout.agent_flags = {{"--nvml-library", SF_FAKE_NVML_PATH, "--resource-pool", "gpu"}};
    cluster_ = std::make_unique<Cluster>(1, 1, layout);
    ASSERT_FALSE(cluster_->db().empty()) << "no PostgreSQL";
    ASSERT_TRUE(cluster_->WaitForAgents(1));
  }
  // Submits a one-trial experiment on `slots` GPU slots; sets experiment_ and trial_.
  void Submit(const std::string& name, int slots) {
    experiment_ = cluster_->Submit(TinyExperiment(1, 20, 10, name) + "resources: {resource_pool: gpu, slots_per_trial: " +
                                   std::to_string(slots) + "}\n");
    ASSERT_GT(experiment_, 0);
    ASSERT_TRUE(cluster_->WaitFor(
        [&] {
          const Value trials = cluster_->Trials(experiment_);
          if (!trials.is_list() || trials.as_list().empty()) return false;
          trial_ = Id(trials.as_list()[0]);
          return trial_ > 0;
        },
        seconds(60)));
  }
  // The trial's logs matching `search` (URL-encoded) once they contain `needle`.
  std::string WaitForLogs(const std::string& search, const std::string& needle) {
    std::string logs;
    EXPECT_TRUE(cluster_->WaitFor(
        [&] {
          auto [code, v] = cluster_->Get("/api/v1/trials/" + std::to_string(trial_) + "/logs?search=" + search);
          logs = v.ToJson();
          return code == 200 && logs.find(needle) != std::string::npos;
        },
        seconds(120)))
        << logs;
    return logs;
  }
  // Each restart fails the same way; after max_restarts the experiment ends in ERROR.
  void ExpectError() {
    EXPECT_TRUE(cluster_->WaitForState(experiment_, "EXPERIMENT_STATE_ERROR", seconds(180)))
        << cluster_->ExperimentState(experiment_);
  }

  std::unique_ptr<Cluster> cluster_;
  int64_t experiment_ = 0, trial_ = 0;
};

TEST_F(GpuTrial, ATrialOnGpuSlotsTrainsOnTheGpuItWasGiven) {
  ASSERT_NO_FATAL_FAILURE(Submit("on-gpu", 1));
  // The trainer's refusal, with the device it was given, in the trial's logs.
  const std::string logs = WaitForLogs("no%20GPU%20is%20visible", "device cuda:0: no GPU is visible");
  std::printf("trial %lld logs, device refusal: %s\n", static_cast<long long>(trial_),
              LineWith(logs, "no GPU is visible").substr(0, 300).c_str());
  // It never trained on the CPU instead: no training metric was reported.
  auto [mcode, metrics] = cluster_->Get("/api/v1/trials/" + std::to_string(trial_) + "/metrics?kind=training");
  EXPECT_EQ(mcode, 200);
  const Value* rows = metrics.Find("metrics");
  EXPECT_TRUE(!rows || !rows->is_list() || rows->as_list().empty()) << metrics.ToJson();
  ExpectError();
}

// A data-parallel trial on GPU slots: both ranks get a GPU from their slots and meet through
// NCCL (GPU ranks reduce gradients on the device, docs/distributed.md), which finds no GPU here.
TEST_F(GpuTrial, ADataParallelTrialOnGpuSlotsConnectsItsRanksWithNccl) {
  ASSERT_NO_FATAL_FAILURE(Submit("two-gpus", 2));
  const std::string line = LineWith(WaitForLogs("connecting%20the%20ranks", "connecting the ranks"), "connecting the ranks");
  std::printf("trial %lld logs, connecting: %s\n", static_cast<long long>(trial_), line.substr(0, 300).c_str());
  // NCCL's refusal ("no usable CUDA device (cudaGetDeviceCount: ...)" without a driver, "no CUDA
  // device is visible" with one; in a build without CUDA, the reason there is no NCCL), never MPI's.
  EXPECT_TRUE(line.find("CUDA device") != std::string::npos || line.find("built without CUDA") != std::string::npos)
      << line;
  EXPECT_EQ(line.find("MPI"), std::string::npos) << line;
  ExpectError();
}

}  // namespace
}  // namespace sf::testing
