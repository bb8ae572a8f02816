// One rank of the MPI bootstrap test: ranks started as independent processes (as agents start
// them) meet through a file-based rendezvous in DIR, connect with MpiConnect, and check their
// collectives against the known answer. Prints "ok rank=R world=W" and exits 0 when all hold.
//
//   dist_connect_probe RANK WORLD DIR [die|hang|soakN]
//
// `die`: rank 1 exits right after connecting; the other ranks' next allreduce must fail
// within the communicator timeout (2 s here) instead of hanging. `hang`: rank 1 stops
// taking part (sleeps) after connecting; same expectation. `soakN`: N steps of training-like
// traffic (see below), for tests that change the network under the ranks.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>
#include <algorithm>

#include "trainer/distributed/mpi_communicator.h"

namespace fs = std::filesystem;
using namespace sf;

namespace {

// Every rank writes DIR/ROUND.RANK atomically, then waits (bounded) for all WORLD of them.
Result<std::vector<std::string>> FileRendezvous(const std::string& dir, int rank, int world,
                                                const std::string& round, const std::string& payload) {
  const std::string mine = dir + "/" + round + "." + std::to_string(rank);
  {
    std::ofstream out(mine + ".tmp", std::ios::binary);
    out << payload;
  }
  fs::rename(mine + ".tmp", mine);
  std::vector<std::string> all(static_cast<size_t>(world));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < world; ++r) {
    const std::string path = dir + "/" + round + "." + std::to_string(r);
    while (!fs::exists(path)) {
      if (std::chrono::steady_clock::now() > deadline) return Unavailable("file rendezvous timed out at " + path);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    all[static_cast<size_t>(r)] = ss.str();
  }
  return all;
}

int Check(bool ok, const std::string& what) {
  if (!ok) std::cerr << "probe: FAILED: " << what << "\n";
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: dist_connect_probe RANK WORLD DIR [die|hang]\n";
    return 2;
  }
  const int rank = std::atoi(argv[1]), world = std::atoi(argv[2]);
  const std::string dir = argv[3], mode = argc > 4 ? argv[4] : "";
  dist::MpiConnectOptions o;
  o.rank = rank;
  o.world_size = world;
  o.work_dir = dir;
  o.timeout = std::chrono::seconds(mode.empty() || mode.rfind("soak", 0) == 0 ? 60 : 2);
  o.rendezvous = [&](const std::string& round, const std::string& payload) {
    return FileRendezvous(dir, rank, world, round, payload);
  };
  auto c = dist::MpiConnect(o);
  if (!c.ok()) {
    std::cerr << "probe: " << c.status().message() << "\n";
    return 1;
  }
  dist::Communicator& comm = **c;
  int bad = 0;
  bad += Check(comm.rank() == rank && comm.world_size() == world, "rank and world size");
  if (mode == "die" && rank == 1) std::_Exit(3);
  if (mode.rfind("soak", 0) == 0) {
    // soakN: N training-like steps (gradient buckets in flight together, then the scalar
    // rounds and, every 10 steps, a broadcast), printing "rank R step S" every 100.
    const int steps = std::atoi(mode.c_str() + 4);
    std::vector<std::vector<float>> buckets = {std::vector<float>(533376), std::vector<float>(700000),
                                               std::vector<float>(300000), std::vector<float>(90000)};
    for (int s = 0; s < steps; ++s) {
      std::vector<std::unique_ptr<dist::Work>> w;
      for (auto& b : buckets) {
        std::fill(b.begin(), b.end(), 1.0f);
        w.push_back(comm.AllreduceAsync(b.data(), static_cast<int64_t>(b.size()), DType::kF32,
                                        dist::ReduceOp::kSum, DType::kF32));
      }
      for (auto& x : w) {
        Status st = x->Wait();
        if (!st.ok()) { std::cerr << "probe: step " << s << ": " << st.message() << "\n"; std::_Exit(1); }
      }
      for (auto& b : buckets) if (b[0] != world || b.back() != world) { std::cerr << "bad sum\n"; std::_Exit(1); }
      double sc[3] = {1, 2, 3};
      int32_t flag = 0;
      if (!comm.Allreduce(sc, 3, DType::kF64).ok() || !comm.Allreduce(&flag, 1, DType::kI32, dist::ReduceOp::kMax).ok()) {
        std::cerr << "probe: scalars failed at " << s << "\n"; std::_Exit(1);
      }
      if (s % 10 == 0) {
        int64_t op[3] = {s, 0, 0};
        if (!comm.Broadcast(op, sizeof(op), 0).ok()) { std::cerr << "bcast failed\n"; std::_Exit(1); }
      }
      if (s % 100 == 0) std::cerr << "rank " << rank << " step " << s << std::endl;
    }
    std::cout << "ok rank=" << rank << " world=" << world << std::endl;
    return 0;
  }
  if (mode == "hang" && rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(8));
    std::_Exit(3);
  }
  // f32 sum: rank r contributes (r+1) * (i+1); the sum is (i+1) * W(W+1)/2.
  std::vector<float> f(1000);
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>((rank + 1) * (i + 1));
  Status st = comm.Allreduce(f.data(), static_cast<int64_t>(f.size()), DType::kF32);
  if (!st.ok()) {
    std::cerr << "probe: rank " << rank << ": " << st.message() << "\n";
    std::cerr.flush();
    std::_Exit(1);
  }
  const float tri = static_cast<float>(world * (world + 1) / 2);
  for (size_t i = 0; i < f.size(); ++i) bad += Check(f[i] == tri * static_cast<float>(i + 1), "f32 sum");
  // f64 sum, i32 max.
  double d[2] = {0.5 * rank, 1.0};
  bad += Check(comm.Allreduce(d, 2, DType::kF64).ok() && d[1] == world && d[0] == 0.25 * world * (world - 1), "f64 sum");
  int32_t m = rank * 7;
  bad += Check(comm.Allreduce(&m, 1, DType::kI32, dist::ReduceOp::kMax).ok() && m == 7 * (world - 1), "i32 max");
  // f32 sent as bf16: 1.0 + 2^-10 rounds to 1.0 in bf16, so W ranks sum to exactly W.
  std::vector<float> g(64, 1.0f + std::ldexp(1.0f, -10));
  bad += Check(comm.Allreduce(g.data(), 64, DType::kF32, dist::ReduceOp::kSum, DType::kBF16).ok(), "bf16 wire");
  for (float x : g) bad += Check(x == static_cast<float>(world), "bf16 wire sum");
  // Broadcast from the last rank, then a barrier.
  char text[24] = {};
  if (rank == world - 1) std::snprintf(text, sizeof(text), "from %d", rank);
  bad += Check(comm.Broadcast(text, sizeof(text), world - 1).ok() && std::string(text) == "from " + std::to_string(world - 1),
               "broadcast");
  bad += Check(comm.Barrier().ok(), "barrier");
  const dist::AllreduceStats s = comm.stats();
  bad += Check(s.calls == 4 && s.bytes == 1000 * 4 + 16 + 4 + 64 * 2, "stats");
  if (bad) return 1;
  std::cout << "ok rank=" << rank << " world=" << world << std::endl;
  return 0;
}
