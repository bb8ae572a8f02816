// `sf-trainer bench`: training throughput on synthetic batches of an exact shape.
//
// Builds the named model on `device` (cpu, or cuda: everything device-resident, see
// train_step.h), runs `warmup` steps (buffers planned, primitives created), then
// `steps` timed steps of AdamW on random batches of batch x src_len / tgt_len tokens (no
// padding; a speech model: batch x src_len frames of 80 log-mel features with tgt_len-character
// transcripts), and reports target tokens/s (speech: labels/s and frames/s), the forward/backward/optimizer split, peak RSS, the
// model FLOP rate and, for reference, the GEMM rate of a large GEMM measured in the same run on
// the same device (CPU: 4096x512x2048, a typical FFN GEMM; GPU: 8192x8192x8192 through
// cuBLASLt). On a GPU every timed step ends with a device synchronisation, and the memory
// reported is the device allocator's peak.
//
// Under mpirun (`mpirun -np W sf-trainer bench ...`) every rank trains on its own `batch`
// rows and gradients are summed through the MPI communicator in buckets overlapped with
// backward, as in a distributed trial; rank 0 reports the global tokens/s plus the time the
// allreduce ran, the time the step waited for it, and the fraction hidden behind backward.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/distributed/communicator.h"

namespace CLI {
class App;
}

namespace sf {

struct BenchOptions {
  std::string arch = "transformer_tiny";
  std::string precision = "fp32";  // fp32 | bf16 | fp16
  std::string device = "cpu";      // cpu | cuda | cuda:N | auto (device_select.h)
  int64_t batch = 128, src_len = 32, tgt_len = 32;
  int64_t vocab = 0;  // 0: 8000 tokens (speech: 32 characters)
  int steps = 10, warmup = 2;
  int threads = 0;  // 0 = OpenMP default
  float dropout = 0.1f, attention_dropout = 0.1f;  // as torch.nn.Transformer's default
  bool json = false;
  bool gemm_peak = true;  // also time a 4096x512x2048 GEMM in the same precision
  // Time every kernel of the timed steps (kernels/profiling_backend.h) and add the per-op table
  // to the report (text: after the key/value lines; JSON: a "profile" member).
  bool profile = false;
  // Transformer, bf16: rows per block of the output projection and its loss
  // (trainer/nn/output_loss.h); 0 lets the backend decide, a number at least the step's target
  // tokens computes every row in one block, as before blocks existed.
  int64_t logit_block_rows = 0;
  int64_t bucket_mb = 25;               // data parallel: gradient bucket size
  std::string allreduce_dtype = "fp32";  // data parallel: fp32 | bf16 | fp16 on the wire
  dist::Communicator* comm = nullptr;    // data parallel (world size > 1); not owned
};

// Registers bench's flags (--arch, --precision, --batch, ...) on `command`, parsing into `o`,
// which must outlive the parse. Types and choices are checked by the parser; CheckBenchOptions
// checks what is left after it.
void AddBenchFlags(CLI::App& command, BenchOptions* o);
// Errors name the flag ("--batch, --src-len, --tgt-len and --steps must be >= 1").
Status CheckBenchOptions(const BenchOptions& o);

struct BenchReport {
  std::vector<std::pair<std::string, std::string>> values;  // ordered key/value pairs
  std::string profile;  // the per-op table (BenchOptions::profile), else empty
};

// Runs the benchmark.
Result<BenchReport> RunBench(const BenchOptions& options);

// "key: value" lines (then the profile table), or one JSON object (the table as "profile").
std::string FormatReport(const BenchReport& report, bool json);

}  // namespace sf
