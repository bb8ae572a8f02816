// Allreduce bandwidth, run under mpirun: our MPI communicator (MpiFromWorld: a queue to the
// thread that owns MPI, f32 or bf16/f16 on the wire) or, as the peer, a plain in-place
// MPI_Allreduce loop on MPI_COMM_WORLD from the main thread.
//
//   mpirun -np W allreduce_bench raw|ours|ours-bf16 [SIZE_MIB ...] [--iters N]
//
// Prints one line per buffer size (rank 0): mode, MiB, median seconds per allreduce, algorithm
// bandwidth (bytes / time) and bus bandwidth (algbw * 2(W-1)/W, the nccl-tests convention: the
// bytes each rank's link carries, comparable across world sizes).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "trainer/distributed/mpi_communicator.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Allreduce bandwidth under mpirun: our MPI communicator or plain MPI_Allreduce.",
               "allreduce_bench");
  sf::cmdline::UseDefaults(app);
  std::string mode;
  std::vector<int> sizes;
  int iters = 20;
  app.add_option("MODE", mode, "raw: MPI_Allreduce; ours / ours-bf16: the communicator, f32 or bf16 on the wire")
      ->required()
      ->check(CLI::IsMember({"raw", "ours", "ours-bf16"}));
  app.add_option("SIZE_MIB", sizes, "buffer sizes in MiB (default: 1 4 16 64)")->check(sf::cmdline::AtLeast(1));
  app.add_option("--iters", iters, "timed allreduces per size")->check(sf::cmdline::AtLeast(1));
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  if (sizes.empty()) sizes = {1, 4, 16, 64};
  std::unique_ptr<sf::dist::Communicator> comm;
  int rank = 0, world = 1;
  if (mode == "raw") {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
  } else if (mode == "ours" || mode == "ours-bf16") {
    auto c = sf::dist::MpiFromWorld();
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().message().c_str());
      return 1;
    }
    comm = std::move(c).value();
    rank = comm->rank();
    world = comm->world_size();
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  const sf::DType wire = mode == "ours-bf16" ? sf::DType::kBF16 : sf::DType::kF32;
  for (int mib : sizes) {
    const int64_t n = static_cast<int64_t>(mib) << 18;  // floats
    std::vector<float> buf(static_cast<size_t>(n), 1.0f / static_cast<float>(world));
    std::vector<double> times;
    for (int it = 0; it < iters + 2; ++it) {
      if (comm) {
        (void)comm->Barrier();
      } else {
        MPI_Barrier(MPI_COMM_WORLD);
      }
      const auto t0 = std::chrono::steady_clock::now();
      if (comm) {
        sf::Status st = comm->Allreduce(buf.data(), n, sf::DType::kF32, sf::dist::ReduceOp::kSum, wire);
        if (!st.ok()) {
          std::fprintf(stderr, "%s\n", st.message().c_str());
          return 1;
        }
      } else {
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (it >= 2) times.push_back(s);  // two warm-up rounds
    }
    // The slowest rank's time is the collective's time.
    double t = Median(times);
    if (comm) {
      (void)comm->Allreduce(&t, 1, sf::DType::kF64, sf::dist::ReduceOp::kSum);
      t /= world;
    } else {
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      t /= world;
    }
    const double bytes = static_cast<double>(n) * 4;
    const double algbw = bytes / t / 1e9, busbw = algbw * 2.0 * (world - 1) / world;
    if (rank == 0) {
      std::printf("mode=%s world=%d mib=%d seconds=%.6f algbw_gbs=%.3f busbw_gbs=%.3f\n", mode.c_str(), world, mib,
                  t, algbw, busbw);
      std::fflush(stdout);
    }
  }
  comm.reset();
  if (mode == "raw") MPI_Finalize();
  return 0;
}
