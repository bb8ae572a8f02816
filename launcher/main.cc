// sf-task [--drain-seconds N] -- PROGRAM [ARGS...]: run PROGRAM as the task the environment
// names and ship its output to the master (launcher/task_launcher.h). Exit status: PROGRAM's;
// 2 for bad usage or a task environment that is not usable; 127 when PROGRAM cannot be run.
//
// sf-task --slurm-job DIR [--trainer P] [--serve P] [--python-path P] [--master-ca-file F]: one
// rank of a gang the Slurm resource manager submitted, run by srun (launcher/slurm_task.h).
#include <CLI/CLI.hpp>

#include <iostream>

#include "common/command_line.h"
#include "launcher/slurm_task.h"
#include "launcher/task_launcher.h"

int main(int argc, char** argv) {
  CLI::App app("Run a program as one task of a trial and send its output to the master (no agent needed).",
               "sf-task");
  sf::cmdline::UseDefaults(app);
  sf::launcher::TaskOptions options;
  int drain_seconds = 30;
  app.add_option("--drain-seconds", drain_seconds, "how long to keep sending output after PROGRAM ends")
      ->check(sf::cmdline::AtLeast(0));
  sf::launcher::SlurmTaskOptions slurm;
  app.add_option("--slurm-job", slurm.job_dir,
                 "run one rank of the Slurm job whose files are in DIR (under srun; docs/slurm.md)");
  app.add_option("--trainer", slurm.trainer, "with --slurm-job: the sf-trainer to run");
  app.add_option("--serve", slurm.serve, "with --slurm-job: the sf-serve an entrypoint may name");
  app.add_option("--python-path", slurm.python_path, "with --slurm-job: the steadfast Python package's directory");
  app.add_option("--master-ca-file", slurm.master_ca_file, "with --slurm-job: the master's CA (TLS)");
  app.add_option("PROGRAM", options.argv, "the program and its arguments (after --)");
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  options.drain = std::chrono::seconds(drain_seconds);
  if (!slurm.job_dir.empty()) {
    if (!options.argv.empty()) {
      std::cerr << "sf-task: give --slurm-job or a PROGRAM, not both\n";
      return 2;
    }
    slurm.drain = options.drain;
    return sf::launcher::RunSlurmTask(slurm);
  }
  if (options.argv.empty()) {
    std::cerr << "sf-task: PROGRAM is required (or --slurm-job DIR); see --help\n";
    return 2;
  }
  return sf::launcher::RunTask(options);
}
