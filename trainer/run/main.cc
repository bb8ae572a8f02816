// sf-trainer: the Steadfast training engine's command line.
//
//   sf-trainer bench [--arch transformer_tiny] [--precision fp32|bf16|fp16] [--batch 128]
//                    [--src-len 32] [--tgt-len 32] [--vocab 8000] [--steps 10] [--warmup 2]
//                    [--threads N] [--dropout 0.1] [--attention-dropout 0.1] [--json]
//
// Exit status: 0 on success, 2 on bad arguments, 1 on a run-time error.
#include <cstdio>
#include <string>
#include <vector>

#include "trainer/run/bench.h"
#include "trainer/run/cluster_mode.h"

namespace {

void Usage() {
  std::fprintf(stderr,
               "usage: sf-trainer bench [--arch NAME] [--precision fp32|bf16|fp16] [--batch N]\n"
               "                        [--src-len N] [--tgt-len N] [--vocab N] [--steps N]\n"
               "                        [--warmup N] [--threads N] [--dropout P]\n"
               "                        [--attention-dropout P] [--no-gemm-peak] [--json]\n");
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
    auto report = sf::RunBench(*opts);
    if (!report.ok()) {
      std::fprintf(stderr, "sf-trainer bench: %s\n", report.status().ToString().c_str());
      return 1;
    }
    std::fputs(sf::FormatReport(*report, opts->json).c_str(), stdout);
    return 0;
  }
  if (cmd == "cluster") return sf::RunClusterTrial();  // started by sf-agent; spec in the environment
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    Usage();
    return 0;
  }
  std::fprintf(stderr, "sf-trainer: unknown command '%s'\n", cmd.c_str());
  Usage();
  return 2;
}
