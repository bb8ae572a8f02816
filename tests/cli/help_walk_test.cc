// Every program and every subcommand answers --help and -h: its usage on stdout, exit 0.
//
// The walk starts at each program's own --help and follows the subcommands that help lists
// (the "Subcommands:" section every CLI11 app prints), so a command added later is walked too,
// and one that lacks help fails here. Bad usage is checked once per program: exit 2 and a
// message naming the problem.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "tests/support/testing.h"

namespace sf {
namespace {

struct Program {
  std::string name, path;
};

std::vector<Program> Programs() {
  const std::string b = testing::BinaryDir();
  return {{"sf", b + "/cli/sf"},
          {"sf-master", b + "/master/sf-master"},
          {"sf-agent", b + "/agent/sf-agent"},
          {"sf-trainer", b + "/trainer/sf-trainer"},
          {"sf-spm", b + "/trainer/data/sf-spm"}};
}

CommandResult Exec(const std::vector<std::string>& argv) {
  CommandOptions o;
  o.timeout = std::chrono::seconds(30);
  auto r = RunCommand(argv, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : CommandResult{};
}

// The subcommand names a CLI11 help text lists under "Subcommands:" (two-space indented).
std::vector<std::string> ListedSubcommands(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_section = true;
      continue;
    }
    if (!in_section) continue;
    if (line.empty() || line[0] != ' ') {
      in_section = !line.empty() && line[0] == ' ';
      if (!in_section) break;
    }
    if (line.size() > 2 && line[0] == ' ' && line[1] == ' ' && line[2] != ' ') {
      std::istringstream words(line);
      std::string name;
      words >> name;
      if (!name.empty() && name.back() == ',') name.pop_back();  // "experiment, e": an alias follows
      // `sf help` and `sf version` are the top-level flags spelled as words, not commands.
      if (name != "help" && name != "version") out.push_back(name);
    }
  }
  return out;
}

// Walks `command` (program + subcommand words) and everything under it; returns how many
// commands answered.
int Walk(const std::vector<std::string>& command, std::set<std::string>* seen) {
  std::string joined;
  for (const auto& w : command) joined += (joined.empty() ? "" : " ") + w;
  if (!seen->insert(joined).second) return 0;
  int walked = 1;
  std::string help;
  for (const char* flag : {"--help", "-h"}) {
    std::vector<std::string> argv = command;
    argv.push_back(flag);
    CommandResult r = Exec(argv);
    EXPECT_EQ(r.exit_code, 0) << joined << " " << flag << "\n" << r.output;
    EXPECT_NE(r.output.find("Usage:"), std::string::npos) << joined << " " << flag << "\n" << r.output;
    if (help.empty()) help = r.output;
  }
  // The help is this command's own: its usage line names the command (the last word of it).
  const std::string own = command.size() > 1 ? " " + command.back() : std::string();
  const size_t usage = help.find("Usage:");
  const std::string usage_line = usage == std::string::npos ? "" : help.substr(usage, help.find('\n', usage) - usage);
  EXPECT_NE(usage_line.find(own), std::string::npos) << joined << ": the help is not this command's\n" << help;
  if (usage_line.find(own) == std::string::npos || command.size() > 4) return walked;
  for (const std::string& sub : ListedSubcommands(help)) {
    std::vector<std::string> next = command;
    next.push_back(sub);
    walked += Walk(next, seen);
  }
  return walked;
}

TEST(HelpWalk, EveryProgramAndSubcommandPrintsUsageAndExitsZero) {
  std::set<std::string> seen;
  int total = 0;
  for (const Program& p : Programs()) {
    const int walked = Walk({p.path}, &seen);
    std::printf("%-12s %d command(s) answered --help and -h\n", p.name.c_str(), walked);
    total += walked;
  }
  // The walk went below the top level: sf-trainer alone has bench, train, translate, bleu, cluster.
  EXPECT_TRUE(seen.count(Programs()[3].path + " bench")) << "sf-trainer's subcommands were not found";
  EXPECT_TRUE(seen.count(Programs()[3].path + " bleu"));
  EXPECT_GE(total, 5 + 5 + 2);
}

TEST(HelpWalk, SubcommandsPrintTheirOwnUsage) {
  const std::string trainer = Programs()[3].path;
  CommandResult r = Exec({trainer, "bench", "--help"});
  EXPECT_NE(r.output.find("sf-trainer bench"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--allreduce-dtype"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--checkpoint"), std::string::npos) << "translate's flags in bench's help\n" << r.output;
  r = Exec({trainer, "bleu", "-h"});
  EXPECT_NE(r.output.find("--ref"), std::string::npos) << r.output;
}

TEST(HelpWalk, BadUsageExitsTwoAndNamesTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::string b = testing::BinaryDir();
  const std::vector<Case> cases = {
      {{b + "/trainer/sf-trainer"}, "A subcommand is required"},
      {{b + "/trainer/sf-trainer", "bench", "--bogus"}, "--bogus"},
      {{b + "/trainer/sf-trainer", "bench", "--batch", "0"}, "--batch: must be >= 1, not 0"},
      {{b + "/trainer/sf-trainer", "bench", "--precision", "fp64"}, "fp64"},
      {{b + "/trainer/sf-trainer", "bleu", "--ref"}, "--ref"},
      {{b + "/trainer/sf-trainer", "frobnicate"}, "unknown command 'frobnicate'"},
      {{b + "/trainer/sf-trainer", "--bogus"}, "unknown flag '--bogus'"},
      {{b + "/cli/sf", "--bogus"}, "unknown flag '--bogus'"},
      {{b + "/master/sf-master", "--grpc-port", "http"}, "--grpc-port"},
      {{b + "/master/sf-master", "--bogus"}, "--bogus"},
      {{b + "/agent/sf-agent", "--slots", "gpu:2"}, "--slots: slots: 'gpu:2'"},
      {{b + "/agent/sf-agent", "stray"}, "stray"},
      {{b + "/trainer/data/sf-spm", "train"}, "--output is required"},
  };
  for (const Case& c : cases) {
    CommandResult r = Exec(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << joined << ": expected '" << c.expect << "' in\n"
                                                          << r.output;
    EXPECT_EQ(r.output.find("Usage:"), std::string::npos) << joined << ": bad usage gets one line, not the help\n"
                                                          << r.output;
  }
}

TEST(HelpWalk, VersionFlags) {
  for (const Program& p : Programs()) {
    if (p.name == "sf-trainer" || p.name == "sf-spm") continue;  // engine tools have no --version
    CommandResult r = Exec({p.path, "--version"});
    EXPECT_EQ(r.exit_code, 0) << p.name << "\n" << r.output;
    EXPECT_NE(r.output.find(p.name + " "), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace sf
