// The MPI bootstrap of independently started ranks (MpiConnect): W real processes, started the
// way agents start trainers (no mpirun), meet through a rendezvous, connect through Open MPI
// and run every collective; a peer that dies or hangs turns into an error within the timeout.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/netns.h"

namespace {

namespace fs = std::filesystem;

struct Rank {
  pid_t pid = -1;
  std::string out_path, output;
  int status = -1;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Probe() { return std::string(SF_BINARY_DIR) + "/tests/trainer/distributed/dist_connect_probe"; }

// Starts W probes, waits for all (at most `limit`), returns them with exit statuses.
// `tick`, when given, is called about every 20 ms while the ranks run, with the ranks' output
// paths.
std::vector<Rank> RunRanks(int world, const std::string& mode, std::chrono::seconds limit, double* seconds,
                           const std::function<void(const std::vector<Rank>&)>& tick = nullptr) {
  const fs::path dir = fs::temp_directory_path() / ("sf-connect-" + std::to_string(getpid()) + "-" + mode +
                                                    std::to_string(world));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<Rank> ranks(static_cast<size_t>(world));
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < world; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    k.out_path = (dir / ("rank" + std::to_string(r) + ".out")).string();
    k.pid = fork();
    if (k.pid == 0) {
      FILE* f = std::freopen(k.out_path.c_str(), "w", stdout);
      (void)f;
      dup2(fileno(stdout), 2);
      const std::string p = Probe(), rs = std::to_string(r), ws = std::to_string(world), ds = dir.string();
      std::vector<const char*> argv{p.c_str(), rs.c_str(), ws.c_str(), ds.c_str()};
      if (!mode.empty()) argv.push_back(mode.c_str());
      argv.push_back(nullptr);
      execv(p.c_str(), const_cast<char* const*>(argv.data()));
      _exit(127);
    }
  }
  size_t done = 0;
  while (done < ranks.size()) {
    for (Rank& k : ranks) {
      if (k.pid < 0) continue;
      int st = 0;
      if (waitpid(k.pid, &st, WNOHANG) == k.pid) {
        k.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        k.pid = -1;
        ++done;
      }
    }
    if (std::chrono::steady_clock::now() - t0 > limit) {
      for (Rank& k : ranks) {
        if (k.pid > 0) {
          kill(k.pid, SIGKILL);
          waitpid(k.pid, nullptr, 0);
          k.status = -2;  // hung
          k.pid = -1;
          ++done;
        }
      }
    }
    if (tick) tick(ranks);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (Rank& k : ranks) k.output = ReadFile(k.out_path);
  fs::remove_all(dir);
  return ranks;
}

class MpiConnect : public ::testing::TestWithParam<int> {};

TEST_P(MpiConnect, IndependentProcessesMeetAndReduceCorrectly) {
  const int world = GetParam();
  double seconds = 0;
  auto ranks = RunRanks(world, "", std::chrono::seconds(120), &seconds);
  for (int r = 0; r < world; ++r) {
    const std::string out = ranks[static_cast<size_t>(r)].output;
    EXPECT_EQ(ranks[static_cast<size_t>(r)].status, 0) << "rank " << r << ":\n" << out;
    EXPECT_NE(out.find("ok rank=" + std::to_string(r) + " world=" + std::to_string(world)), std::string::npos) << out;
  }
  std::printf("%d ranks connected and checked in %.1f s\n", world, seconds);
}

INSTANTIATE_TEST_SUITE_P(Worlds, MpiConnect, ::testing::Values(2, 4));

// Ranks on one host talk over loopback only: a network interface that disappears while they
// train (a container bridge, a VPN, another test's network) is none of their business. Left to
// itself, Open MPI stripes messages over every interface and both ranks then wait forever
// inside an allreduce whose other half went with the vanished interface.
TEST(MpiConnect, AnInterfaceThatVanishesMidRunDoesNotStallTheRanks) {
  auto net = std::make_unique<sf::testing::TestNetwork>(0);  // a bridge with an address
  if (!net->ok()) GTEST_SKIP() << "needs CAP_NET_ADMIN and iproute2: " << net->why();
  double seconds = 0;
  bool removed = false;
  auto ranks = RunRanks(2, "soak300", std::chrono::seconds(240), &seconds, [&](const std::vector<Rank>& r) {
    if (!removed && ReadFile(r[0].out_path).find("rank 0 step 0") != std::string::npos) {
      net.reset();  // the ranks are connected and reducing: take the bridge away
      removed = true;
    }
  });
  EXPECT_TRUE(removed);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[static_cast<size_t>(r)].status, 0) << ranks[static_cast<size_t>(r)].output;
    EXPECT_NE(ranks[static_cast<size_t>(r)].output.find("ok rank=" + std::to_string(r)), std::string::npos);
  }
  std::printf("300 steps with the bridge removed after the first in %.1f s\n", seconds);
}

TEST(MpiConnectFailure, PeerThatHangsBecomesATimeoutNotAHang) {
  double seconds = 0;
  auto ranks = RunRanks(2, "hang", std::chrono::seconds(90), &seconds);
  const std::string out0 = ranks[0].output;
  EXPECT_EQ(ranks[0].status, 1) << out0;
  EXPECT_NE(out0.find("did not finish within 2 s"), std::string::npos) << out0;
  EXPECT_NE(out0.find("allreduce"), std::string::npos) << out0;
}

TEST(MpiConnectFailure, PeerThatDiesStopsTheOthers) {
  double seconds = 0;
  auto ranks = RunRanks(2, "die", std::chrono::seconds(90), &seconds);
  EXPECT_EQ(ranks[1].status, 3);
  // Rank 0 notices: an error or our timeout, never a hang (status -2 would mean we killed it).
  EXPECT_NE(ranks[0].status, 0) << ranks[0].output;
  EXPECT_NE(ranks[0].status, -2) << ranks[0].output;
  std::printf("rank 0 stopped %.1f s after start (status %d)\n", seconds, ranks[0].status);
}

}  // namespace
