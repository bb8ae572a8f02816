// What the agent's outbox journal (agent/outbox.h) costs per log line: N lines pushed, batched,
// sent and acknowledged in batches of 500, in memory and with the journal on this disk,
// alternating, REPEATS times each.
//
//   build/bench/outbox_journal_bench [--lines N] [--bytes B] [--repeats R] [--dir DIR]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "agent/outbox.h"
#include "common/command_line.h"

int main(int argc, char** argv) {
  int lines = 200000, bytes = 100, repeats = 2;
  std::string dir = std::filesystem::temp_directory_path().string();
  CLI::App app("The agent's outbox: microseconds per log line, in memory and journaled.",
               "outbox_journal_bench");
  sf::cmdline::UseDefaults(app);
  app.add_option("--lines", lines, "log lines per run")->check(sf::cmdline::AtLeast(1));
  app.add_option("--bytes", bytes, "bytes per line")->check(sf::cmdline::AtLeast(1));
  app.add_option("--repeats", repeats, "runs of each")->check(sf::cmdline::AtLeast(1));
  app.add_option("--dir", dir, "where the journal goes (its disk is what is measured)");
  if (auto rc = sf::cmdline::Parse(app, argc, argv)) return *rc;
  steadfast::v1::LogLine line;
  line.set_trial_id(1);
  line.set_stream("stdout");
  line.set_message(std::string(static_cast<size_t>(bytes), 'x'));
  const std::string journal = dir + "/outbox_journal_bench." + std::to_string(::getpid());
  for (int r = 0; r < repeats; ++r) {
    for (bool journaled : {false, true}) {
      sf::agent::Outbox::Options options;
      options.max_batch_delay = std::chrono::milliseconds(0);
      sf::agent::Outbox outbox(options);
      if (journaled) {
        std::filesystem::remove(journal);  // a fresh journal per run
        if (sf::Status st = outbox.OpenJournal(journal); !st.ok()) {
          std::fprintf(stderr, "outbox_journal_bench: %s\n", st.ToString().c_str());
          return 1;
        }
      }
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < lines; ++i) {
        outbox.PushLog(line);
        if (i % 500 == 499 || i + 1 == lines) {
          while (auto m = outbox.Take(std::chrono::steady_clock::now(), /*flush=*/true))
            outbox.Ack(m->sequence());
        }
      }
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%-9s %8d lines of %4d B: %.2f us per line\n",
                  journaled ? "journaled" : "in memory", lines, bytes, s / lines * 1e6);
    }
  }
  std::filesystem::remove(journal);
  std::filesystem::remove(journal + ".lock");
  return 0;
}
