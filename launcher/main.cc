// sf-task [--drain-seconds N] -- PROGRAM [ARGS...]: run PROGRAM as the task the environment
// names and ship its output to the master (launcher/task_launcher.h). Exit status: PROGRAM's;
// 2 for bad usage or a task environment that is not usable; 127 when PROGRAM cannot be run.
#include <CLI/CLI.hpp>

#include "common/command_line.h"
#include "launcher/task_launcher.h"

int main(int argc, char** argv) {
  CLI::App app("Run a program as one task of a trial and send its output to the master (no agent needed).",
               "sf-task");
  sf::cmdline::UseDefaults(app);
  sf::launcher::TaskOptions options;
  int drain_seconds = 30;
  app.add_option("--drain-seconds", drain_seconds, "how long to keep sending output after PROGRAM ends")
      ->check(sf::cmdline::AtLeast(0));
  app.add_option("PROGRAM", options.argv, "the program and its arguments (after --)")->required();
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  options.drain = std::chrono::seconds(drain_seconds);
  return sf::launcher::RunTask(options);
}
