// sf-trainer: the Steadfast training engine's command line.
//
//   sf-trainer bench [--arch transformer_tiny] [--precision fp32|bf16|fp16] [--batch 128]
//                    [--src-len 32] [--tgt-len 32] [--vocab 8000] [--steps 10] [--warmup 2]
//                    [--threads N] [--dropout 0.1] [--attention-dropout 0.1] [--json]
//                    [--bucket-mb 25] [--allreduce-dtype fp32|bf16|fp16]
//   mpirun -np W sf-trainer bench ...   data parallel: W ranks, rank 0 reports
//
// Exit status: 0 on success, 2 on bad arguments, 1 on a run-time error.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include "trainer/dist/mpi_communicator.h"
#include "trainer/run/bench.h"
#include "trainer/eval/bleu.h"
#include "trainer/run/cluster_mode.h"
#include "trainer/run/text_trainer.h"

namespace {

void Usage() {
  std::fprintf(stderr,
               "usage: sf-trainer bench [--arch NAME] [--precision fp32|bf16|fp16] [--batch N]\n"
               "                        [--src-len N] [--tgt-len N] [--vocab N] [--steps N]\n"
               "                        [--warmup N] [--threads N] [--dropout P]\n"
               "                        [--attention-dropout P] [--no-gemm-peak] [--json]\n"
               "                        [--bucket-mb N] [--allreduce-dtype fp32|bf16|fp16]\n"
               "                        (under mpirun -np W: W data-parallel ranks)\n"
               "       sf-trainer train EXPERIMENT.yaml [--output DIR] [--resume CHECKPOINT] [--threads N]\n"
               "                        [--stop-after-steps N] [--no-test] [--quiet]\n"
               "       sf-trainer translate --checkpoint DIR [--beam N] [--lenpen X] [--max-len-a A]\n"
               "                        [--max-len-b B] [--max-tokens N] [--batch-sentences N]\n"
               "                        [--threads N] [--no-cache] < SOURCE\n"
               "       sf-trainer bleu --ref REF [--ref REF2 ...] [-lc] [--tokenize 13a|none]\n"
               "                        [--format text|json] < HYPOTHESES\n"
               "       sf-trainer cluster   (started by sf-agent)\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage();
    return 2;
  }
  const std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "bench") {
    auto opts = sf::ParseBenchArgs(args);
    if (!opts.ok()) {
      std::fprintf(stderr, "sf-trainer bench: %s\n", opts.status().ToString().c_str());
      return 2;
    }
    // Started by mpirun with several ranks: train data parallel through MPI_COMM_WORLD.
    std::unique_ptr<sf::dist::Communicator> comm;
    const char* mpi_world = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (mpi_world && std::atoi(mpi_world) > 1) {
      auto c = sf::dist::MpiFromWorld();
      if (!c.ok()) {
        std::fprintf(stderr, "sf-trainer bench: %s\n", c.status().ToString().c_str());
        return 1;
      }
      comm = std::move(c).value();
      opts->comm = comm.get();
    }
    auto report = sf::RunBench(*opts);
    if (!report.ok()) {
      std::fprintf(stderr, "sf-trainer bench: %s\n", report.status().ToString().c_str());
      return 1;
    }
    if (!comm || comm->rank() == 0) std::fputs(sf::FormatReport(*report, opts->json).c_str(), stdout);
    return 0;
  }
  if (cmd == "train") return sf::RunTrainCommand(args);
  if (cmd == "translate") return sf::RunTranslateCommand(args);
  if (cmd == "bleu") return sf::eval::RunBleuCommand(args, std::cin, std::cout, std::cerr);
  if (cmd == "cluster") return sf::RunClusterTrial();  // started by sf-agent; spec in the environment
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    Usage();
    return 0;
  }
  std::fprintf(stderr, "sf-trainer: unknown command '%s'\n", cmd.c_str());
  Usage();
  return 2;
}
