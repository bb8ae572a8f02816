// The coordinator keeps each GPU slot's latest sample from the agent's heartbeats and shows it in
// the agent listing (Cluster::Agents, behind GetAgents); what is missing, implausible or no
// longer current shows as no usage. Real PostgreSQL (the coordinator's store), no processes.
#include <gtest/gtest.h>

#include "master/core/cluster.h"
#include "master/rm/agents/agent_manager.h"
#include "tests/master/migrated_database_test.h"

namespace sf::master {
namespace {
namespace v1 = steadfast::v1;
constexpr int64_t kGiB = 1024LL * 1024 * 1024;

class NullConnection : public AgentConnection {
 public:
  void Send(const v1::MasterMessage&) override {}
};

class GpuUsageTest : public testing::MigratedDatabaseTest {
 protected:
  void SetUp() override {
    MigratedDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_unique<Store>(db_.get());
    agents_ = std::make_unique<rm::AgentManager>();
    ClusterOptions o;
    o.check_data_files = false;
    o.default_manager = agents_.get();
    cluster_ = std::make_unique<Cluster>(store_.get(), o);
    ASSERT_TRUE(cluster_->Recover().ok());
    Connect();
  }
  void TearDown() override {
    cluster_.reset();
    agents_.reset();
    MigratedDatabaseTest::TearDown();
  }
  // Registers "gpu-agent": two GPUs of 80 GiB and a CPU slot.
  void Connect() {
    v1::RegisterAgent reg;
    reg.set_agent_id("gpu-agent");
    for (int i = 0; i < 2; ++i) {
      v1::Slot* s = reg.add_slots();
      s->set_id("cuda" + std::to_string(i));
      s->set_type(v1::SLOT_TYPE_CUDA);
      s->set_device("GPU " + std::to_string(i));
      s->set_uuid("GPU-" + std::to_string(i));
      s->set_memory_total_bytes(80 * kGiB);
      s->set_enabled(true);
    }
    v1::Slot* cpu = reg.add_slots();
    cpu->set_id("cpu0");
    cpu->set_type(v1::SLOT_TYPE_CPU);
    cpu->set_enabled(true);
    conn_ = std::make_shared<NullConnection>();
    agents_->Connected(reg, conn_);
  }
  static v1::GpuUsage Usage(int percent, int64_t used) {
    v1::GpuUsage u;
    u.set_utilization_percent(percent);
    u.set_memory_used_bytes(used);
    return u;
  }
  // The listed slot `id` of the agent.
  v1::Slot Listed(const std::string& id) {
    for (const auto& a : cluster_->Agents()) {
      for (const auto& s : a.slots()) {
        if (s.id() == id) return s;
      }
    }
    ADD_FAILURE() << "no slot " << id;
    return {};
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<rm::AgentManager> agents_;
  std::unique_ptr<Cluster> cluster_;
  std::shared_ptr<NullConnection> conn_;
};

TEST_F(GpuUsageTest, TheListingShowsEachGpusLatestSample) {
  EXPECT_FALSE(Listed("cuda0").has_usage());  // none before the first heartbeat
  v1::Heartbeat beat;
  (*beat.mutable_gpu_usage())["cuda0"] = Usage(40, 1 * kGiB);
  (*beat.mutable_gpu_usage())["cuda1"] = Usage(50, 2 * kGiB);
  agents_->Heartbeat("gpu-agent", beat);
  (*beat.mutable_gpu_usage())["cuda1"] = Usage(97, 70 * kGiB);  // the latest wins
  agents_->Heartbeat("gpu-agent", beat);
  v1::Slot cuda0 = Listed("cuda0"), cuda1 = Listed("cuda1");
  ASSERT_TRUE(cuda0.has_usage());
  EXPECT_EQ(cuda0.usage().utilization_percent(), 40);
  EXPECT_EQ(cuda0.usage().memory_used_bytes(), 1 * kGiB);
  EXPECT_GT(cuda0.usage().sample_time().seconds(), 0);
  EXPECT_EQ(cuda0.uuid(), "GPU-0");
  EXPECT_EQ(cuda0.memory_total_bytes(), 80 * kGiB);
  EXPECT_EQ(cuda1.usage().utilization_percent(), 97);
  EXPECT_EQ(cuda1.usage().memory_used_bytes(), 70 * kGiB);
  EXPECT_FALSE(Listed("cpu0").has_usage());
}

TEST_F(GpuUsageTest, MissingOrImplausibleSamplesShowNone) {
  v1::Heartbeat good;
  (*good.mutable_gpu_usage())["cuda0"] = Usage(40, 1 * kGiB);
  (*good.mutable_gpu_usage())["cuda1"] = Usage(50, 2 * kGiB);
  agents_->Heartbeat("gpu-agent", good);
  // cuda0 not sampled this time (an NVML error on the agent); cuda1 beyond its memory; a sample
  // for a CPU slot and for a slot the agent does not have.
  v1::Heartbeat bad;
  (*bad.mutable_gpu_usage())["cuda1"] = Usage(50, 81 * kGiB);
  (*bad.mutable_gpu_usage())["cpu0"] = Usage(10, 0);
  (*bad.mutable_gpu_usage())["cuda7"] = Usage(10, 0);
  agents_->Heartbeat("gpu-agent", bad);
  EXPECT_FALSE(Listed("cuda0").has_usage());
  EXPECT_FALSE(Listed("cuda1").has_usage());
  EXPECT_FALSE(Listed("cpu0").has_usage());
  for (const v1::GpuUsage& u : {Usage(101, 0), Usage(-1, 0), Usage(10, -5)}) {
    v1::Heartbeat beat;
    (*beat.mutable_gpu_usage())["cuda0"] = u;
    agents_->Heartbeat("gpu-agent", beat);
    EXPECT_FALSE(Listed("cuda0").has_usage()) << u.DebugString();
  }
  agents_->Heartbeat("no-such-agent", good);  // ignored
  EXPECT_EQ(cluster_->Agents().size(), 1u);
}

TEST_F(GpuUsageTest, ADisconnectedOrReregisteredAgentShowsNoUsage) {
  v1::Heartbeat beat;
  (*beat.mutable_gpu_usage())["cuda0"] = Usage(40, 1 * kGiB);
  agents_->Heartbeat("gpu-agent", beat);
  ASSERT_TRUE(Listed("cuda0").has_usage());
  agents_->Disconnected("gpu-agent", conn_.get());
  EXPECT_FALSE(Listed("cuda0").has_usage());
  EXPECT_EQ(Listed("cuda0").uuid(), "GPU-0");  // what the GPU is stays listed

  Connect();
  agents_->Heartbeat("gpu-agent", beat);
  ASSERT_TRUE(Listed("cuda0").has_usage());
  Connect();  // a re-registration starts without samples, until the next heartbeat
  EXPECT_FALSE(Listed("cuda0").has_usage());
}

}  // namespace
}  // namespace sf::master
