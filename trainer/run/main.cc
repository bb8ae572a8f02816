// sf-trainer: the Steadfast training engine's command line.
//
//   sf-trainer bench [--arch transformer_tiny] [--precision fp32|bf16|fp16] [--batch 128]
//                    [--src-len 32] [--tgt-len 32] [--vocab 8000] [--steps 10] [--warmup 2]
//                    [--threads N] [--dropout 0.1] [--attention-dropout 0.1] [--json]
//                    [--bucket-mb 25] [--allreduce-dtype fp32|bf16|fp16]
//   mpirun -np W sf-trainer bench ...   data parallel: W ranks, rank 0 reports
//   sf-trainer train | translate | generate | transcribe | bleu | cluster ...
//
// `sf-trainer --help` and `sf-trainer COMMAND --help` print the usage (CLI11, through
// common/command_line.h). Exit status: 0 on success, 2 on bad arguments, 1 on a run-time error.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/status.h"
#include "trainer/distributed/mpi_communicator.h"
#include "trainer/run/bench.h"
#include "trainer/eval/bleu.h"
#include "trainer/run/cluster_mode.h"
#include "trainer/run/generate_command.h"
#include "trainer/run/speech_commands.h"
#include "trainer/run/standalone_commands.h"

int main(int argc, char** argv) {
  CLI::App app("Steadfast's training engine: train and translate on one machine, benchmark, "
               "score BLEU, or run a trial for an agent.",
               "sf-trainer");
  sf::cmdline::UseDefaults(app);
  app.require_subcommand(1);

  sf::BenchOptions bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "training throughput on synthetic batches (under mpirun -np W: W data-parallel ranks)");
  sf::AddBenchFlags(*bench_cmd, &bench);

  sf::TrainCommandOptions train;
  CLI::App* train_cmd = app.add_subcommand(
      "train", "train on the experiment's data (text or speech): validate, checkpoint, and score the test set at the end");
  sf::AddTrainFlags(*train_cmd, &train);

  sf::TranslateCommandOptions translate;
  CLI::App* translate_cmd = app.add_subcommand(
      "translate", "translate stdin (one sentence per line) to stdout with a checkpoint, by beam search");
  sf::AddTranslateFlags(*translate_cmd, &translate);

  sf::GenerateCommandOptions generate;
  CLI::App* generate_cmd = app.add_subcommand(
      "generate", "continue stdin's prompts (one per line) with a language model checkpoint, by beam search or sampling");
  sf::AddGenerateFlags(*generate_cmd, &generate);

  sf::TranscribeCommandOptions transcribe;
  CLI::App* transcribe_cmd = app.add_subcommand(
      "transcribe", "transcribe an audio manifest with a speech model checkpoint (one line per utterance, in order)");
  sf::AddTranscribeFlags(*transcribe_cmd, &transcribe);

  // bleu keeps sacreBLEU's single-dash spellings (-lc, -tok), so it parses its own arguments.
  CLI::App* bleu_cmd = app.add_subcommand("bleu", "sacreBLEU-compatible corpus BLEU of stdin against --ref files "
                                                  "(sf-trainer bleu --help for its flags)");
  bleu_cmd->prefix_command();
  bleu_cmd->set_help_flag();

  CLI::App* cluster_cmd = app.add_subcommand(
      "cluster", "run one trial for the master (started by sf-agent; the trial comes in SF_* environment variables)");

  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;

  if (bleu_cmd->parsed()) return sf::eval::RunBleuCommand(bleu_cmd->remaining(), std::cin, std::cout, std::cerr);
  if (cluster_cmd->parsed()) return sf::RunClusterTrial();  // the spec is in the environment
  if (train_cmd->parsed()) return sf::RunTrain(train);
  if (translate_cmd->parsed()) return sf::RunTranslate(translate);
  if (generate_cmd->parsed()) return sf::RunGenerate(generate);
  if (transcribe_cmd->parsed()) return sf::RunTranscribe(transcribe);

  // bench. Started by mpirun with several ranks: train data parallel through MPI_COMM_WORLD.
  sf::Status checked = sf::CheckBenchOptions(bench);
  if (!checked.ok()) return sf::cmdline::UsageError(*bench_cmd, checked.message(), std::cerr);
  std::unique_ptr<sf::dist::Communicator> comm;
  const char* mpi_world = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (mpi_world && std::atoi(mpi_world) > 1) {
    auto c = sf::dist::MpiFromWorld();
    if (!c.ok()) {
      std::fprintf(stderr, "sf-trainer bench: %s\n", c.status().ToString().c_str());
      return 1;
    }
    comm = std::move(c).value();
    bench.comm = comm.get();
  }
  auto report = sf::RunBench(bench);
  if (!report.ok()) {
    std::fprintf(stderr, "sf-trainer bench: %s\n", report.status().ToString().c_str());
    return 1;
  }
  if (!comm || comm->rank() == 0) std::fputs(sf::FormatReport(*report, bench.json).c_str(), stdout);
  return 0;
}
