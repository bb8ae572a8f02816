// `sf`'s command line as a user meets it: --help on every command, and what bad usage does
// (exit 2, one line naming the problem, a hint, nothing on stdout). Runs the real binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/run_sf.h"
#include "tests/support/config_cases.h"
#include "tests/support/testing.h"

namespace sf {
namespace {

using sf::testing::RunSf;
using sf::testing::SfRun;
using sf::testing::TempDir;

// Every command path `sf` has today. The walk below finds them from the program's own help; this
// list makes a command that disappears (or appears untested) fail loudly.
const std::set<std::string> kCommands = {
    "sf",
    "sf config",
    "sf config validate",
    "sf experiment",
    "sf experiment create",
    "sf experiment fork",
    "sf experiment continue",
    "sf experiment list",
    "sf experiment describe",
    "sf experiment kill",
    "sf experiment pause",
    "sf experiment activate",
    "sf experiment archive",
    "sf experiment unarchive",
    "sf experiment delete",
    "sf trial",
    "sf trial list",
    "sf trial describe",
    "sf trial logs",
    "sf trial metrics",
    "sf agent",
    "sf agent list",
    "sf agent revoke",
    "sf agent restore",
    "sf slot",
    "sf slot list",
    "sf login",
    "sf logout",
    "sf whoami",
    "sf user",
    "sf user list",
    "sf user create",
    "sf user activate",
    "sf user deactivate",
    "sf user set-password",
    "sf user set-role",
    "sf token",
    "sf token create",
    "sf token list",
    "sf token revoke",
    "sf workspace",
    "sf workspace list",
    "sf workspace create",
    "sf workspace set-member",
    "sf workspace remove-member",
    "sf resource-pool",
    "sf resource-pool list",
    "sf audit",
    "sf audit list",
    "sf checkpoint",
    "sf checkpoint list",
    "sf checkpoint delete",
    "sf checkpoint download",
    "sf model",
    "sf model create",
    "sf model list",
    "sf model describe",
    "sf model edit",
    "sf model register",
    "sf model archive",
    "sf model unarchive",
    "sf model delete",
    "sf model version",
    "sf model version describe",
    "sf model version delete",
    "sf webhook",
    "sf webhook create",
    "sf webhook list",
    "sf webhook delete",
    "sf webhook deliveries",
    "sf webhook test",
    "sf serve",
    "sf serve start",
    "sf serve list",
    "sf serve describe",
    "sf serve stop",
    "sf serve logs",
    "sf cmd",
    "sf cmd run",
    "sf cmd list",
    "sf cmd logs",
    "sf cmd kill",
    "sf task",
    "sf task list",
    "sf task describe",
    "sf task logs",
    "sf task kill",
    "sf notebook",
    "sf notebook start",
    "sf notebook list",
    "sf notebook kill",
    "sf shell",
    "sf shell start",
    "sf shell list",
    "sf shell kill",
    "sf shell open",
    "sf master",
    "sf master info",
    "sf deploy",
    "sf deploy local",
    "sf deploy local up",
    "sf deploy local status",
    "sf deploy local down",
    "sf help",
    "sf version",
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The entries of one section of a help text ("Subcommands:", "Options:", "Positionals:"): each
// is a line `  NAME   DESCRIPTION`, the description in a column of its own (on the next line when
// NAME reaches into it).
struct HelpEntry {
  std::string name;         // "experiment, e", "-m,--master URL", "ID REQUIRED"
  std::string description;  // empty when there is none
};

std::string Trim(const std::string& s) {
  size_t begin = s.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(' ') - begin + 1);
}

std::vector<HelpEntry> Section(const std::string& help, const std::string& title) {
  std::vector<std::string> lines = Lines(help);
  // The description column: where the help flag's description starts, as every help has one.
  size_t column = std::string::npos;
  for (const std::string& line : lines) {
    if (line.rfind("  -h,--help ", 0) == 0) column = line.find_first_not_of(' ', 11);
  }
  EXPECT_NE(column, std::string::npos) << "no -h,--help line in\n" << help;
  std::vector<HelpEntry> entries;
  size_t i = 0;
  while (i < lines.size() && lines[i] != title) ++i;
  for (++i; i < lines.size() && !lines[i].empty(); ++i) {
    const std::string& line = lines[i];
    if (line.find_first_not_of(' ') >= column) continue;  // a description's own line
    HelpEntry entry{Trim(line.substr(0, column)),
                    line.size() > column ? Trim(line.substr(column)) : ""};
    if (line.size() >= column && line[column - 1] != ' ') {  // NAME runs into the column
      entry.name = Trim(line);
      entry.description = i + 1 < lines.size() ? Trim(lines[i + 1]) : "";
    }
    entries.push_back(entry);
  }
  return entries;
}

// "experiment, e" -> {"experiment", "e"}
std::vector<std::string> NameAndAliases(const std::string& entry) {
  std::vector<std::string> names;
  std::istringstream in(entry);
  for (std::string name; std::getline(in, name, ',');) {
    names.push_back(name.substr(name.find_first_not_of(' ')));
  }
  return names;
}

std::vector<std::string> Args(const std::string& path) {  // "sf trial logs" -> {"trial", "logs"}
  std::vector<std::string> words;
  std::istringstream in(path);
  for (std::string word; in >> word;) words.push_back(word);
  words.erase(words.begin());
  return words;
}

// Checks `path --help` and `path -h`, then walks every subcommand its help lists.
void WalkHelp(const std::string& path, const TempDir& dir, std::set<std::string>& seen) {
  SCOPED_TRACE(path);
  seen.insert(path);
  std::vector<std::string> args = Args(path);
  args.push_back("--help");
  SfRun help = RunSf(args, dir);
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_EQ(help.err, "");
  EXPECT_NE(help.out.find("Usage: " + path + " "), std::string::npos) << help.out;
  args.back() = "-h";
  SfRun short_help = RunSf(args, dir);
  EXPECT_EQ(short_help.exit_code, 0);
  EXPECT_EQ(short_help.out, help.out) << "-h and --help print the same usage";

  for (const char* title : {"Positionals:", "Options:", "Subcommands:"}) {
    for (const HelpEntry& entry : Section(help.out, title)) {
      EXPECT_FALSE(entry.description.empty())
          << title << " " << entry.name << " has no description";
    }
  }
  for (const HelpEntry& entry : Section(help.out, "Subcommands:")) {
    std::vector<std::string> names = NameAndAliases(entry.name);
    WalkHelp(path + " " + names[0], dir, seen);
    for (size_t i = 1; i < names.size(); ++i) {  // an alias answers with its command's usage
      std::vector<std::string> alias_args = Args(path);
      alias_args.push_back(names[i]);
      alias_args.push_back("--help");
      SfRun alias = RunSf(alias_args, dir);
      EXPECT_EQ(alias.exit_code, 0);
      EXPECT_EQ(alias.out, RunSf(Args(path + " " + names[0] + " --help"), dir).out) << names[i];
    }
  }
}

TEST(SfUsageTest, EveryCommandAnswersHelpOnStdout) {
  TempDir dir;
  std::set<std::string> seen;
  WalkHelp("sf", dir, seen);
  EXPECT_EQ(seen, kCommands);
}

TEST(SfUsageTest, HelpListsEachCommandsFlags) {
  TempDir dir;
  SfRun create = RunSf({"experiment", "create", "--help"}, dir);
  for (const char* flag :
       {"FILE", "--master", "--json", "--follow", "--paused", "--config KEY=VALUE"}) {
    EXPECT_NE(create.out.find(flag), std::string::npos) << flag << "\n" << create.out;
  }
  SfRun up = RunSf({"deploy", "local", "up", "--help"}, dir);
  for (const char* flag : {"--agents", "--cpu-slots", "--dir", "--port", "--grpc-port"}) {
    EXPECT_NE(up.out.find(flag), std::string::npos) << flag << "\n" << up.out;
  }
  EXPECT_NE(RunSf({"trial", "logs", "-h"}, dir).out.find("-f,--follow"), std::string::npos);
  EXPECT_NE(RunSf({"trial", "metrics", "-h"}, dir).out.find("--kind"), std::string::npos);
  EXPECT_NE(RunSf({"deploy", "local", "down", "-h"}, dir).out.find("--delete-data"),
            std::string::npos);
  EXPECT_NE(RunSf({"config", "validate", "-h"}, dir).out.find("--no-file-checks"),
            std::string::npos);
  EXPECT_EQ(RunSf({"help"}, dir).out, RunSf({"--help"}, dir).out);
}

TEST(SfUsageTest, NoArgumentsPrintsUsageToStderr) {
  TempDir dir;
  SfRun run = RunSf({}, dir);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("Usage: sf "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("experiment"), std::string::npos) << run.err;
}

// Bad usage: exit 2, nothing on stdout, a first line `COMMAND: PROBLEM` naming `named`, then a
// hint pointing at that command's --help.
void ExpectUsageError(const std::vector<std::string>& args, const std::string& command,
                      const std::string& named) {
  TempDir dir;
  SfRun run = RunSf(args, dir);
  std::string shown;
  for (const auto& a : args) shown += " " + a;
  SCOPED_TRACE("sf" + shown);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  std::vector<std::string> lines = Lines(run.err);
  ASSERT_EQ(lines.size(), 2u) << run.err;
  EXPECT_EQ(lines[0].rfind(command + ": ", 0), 0u) << run.err;
  EXPECT_NE(lines[0].find(named), std::string::npos) << run.err;
  EXPECT_EQ(lines[1], "run '" + command + " --help' for usage");
}

TEST(SfUsageTest, UnknownFlagIsNamed) {
  ExpectUsageError({"experiment", "describe", "7", "--bogus"}, "sf experiment describe", "--bogus");
  ExpectUsageError({"trial", "logs", "--tail", "3"}, "sf trial logs", "--tail");
  ExpectUsageError({"deploy", "local", "down", "--force"}, "sf deploy local down", "--force");
  ExpectUsageError({"config", "validate", "--bogus", "x.yaml"}, "sf config validate", "--bogus");
  // A flag of another command is unknown here.
  ExpectUsageError({"agent", "list", "--kind", "validation"}, "sf agent list", "--kind");
}

TEST(SfUsageTest, MissingPositionalIsNamed) {
  ExpectUsageError({"experiment", "describe"}, "sf experiment describe", "ID");
  ExpectUsageError({"e", "kill", "--json"}, "sf experiment kill", "ID");
  ExpectUsageError({"experiment", "fork", "--config", "name=x"}, "sf experiment fork", "ID");
  ExpectUsageError({"experiment", "continue", "3"}, "sf experiment continue", "--max-length");
  ExpectUsageError({"experiment", "create", "--follow"}, "sf experiment create", "FILE");
  ExpectUsageError({"trial", "list"}, "sf trial list", "EXPERIMENT_ID");
  ExpectUsageError({"t", "metrics", "--kind", "validation"}, "sf trial metrics", "TRIAL_ID");
  ExpectUsageError({"checkpoint", "list"}, "sf checkpoint list", "EXPERIMENT_ID");
  ExpectUsageError({"checkpoint", "delete", "--json"}, "sf checkpoint delete", "UUID");
  ExpectUsageError({"config", "validate", "--json"}, "sf config validate", "FILE");
  ExpectUsageError({"model", "register", "wmt-de-en"}, "sf model register", "--checkpoint");
  ExpectUsageError({"model", "version", "delete", "wmt-de-en"}, "sf model version delete", "VERSION");
  ExpectUsageError({"webhook", "delete"}, "sf webhook delete", "ID");
  ExpectUsageError({"webhook", "create", "--on", "COMPLETED"}, "sf webhook create", "--url");
  ExpectUsageError({"webhook", "create", "--url", "https://x.example"}, "sf webhook create", "--on");
  ExpectUsageError({"serve", "start", "--version", "2"}, "sf serve start", "--model");
  ExpectUsageError({"serve", "start", "--model", "m", "--slots", "0"}, "sf serve start", "--slots");
  ExpectUsageError({"serve", "stop"}, "sf serve stop", "ID");
  ExpectUsageError({"cmd", "run", "--slots", "2"}, "sf cmd run", "command");
  ExpectUsageError({"cmd", "kill"}, "sf cmd kill", "ID");
}

TEST(SfUsageTest, UnknownOrMissingCommand) {
  ExpectUsageError({"frobnicate"}, "sf", "unknown command 'frobnicate'");
  ExpectUsageError({"experiment", "rename", "3"}, "sf experiment", "unknown command 'rename'");
  ExpectUsageError({"deploy", "local", "sideways"}, "sf deploy local", "'sideways'");
  ExpectUsageError({"experiment"}, "sf experiment", "subcommand");
  ExpectUsageError({"deploy"}, "sf deploy", "subcommand");
  // A flag where a command belongs is named as the unknown flag it is.
  ExpectUsageError({"--bogus"}, "sf", "unknown flag '--bogus'");
  ExpectUsageError({"experiment", "describe", "3", "4"}, "sf experiment describe", "4");
}

// Bulk experiment actions take IDs or a filter (--state/--name/--owner), never both or neither.
TEST(SfUsageTest, BulkExperimentActionsNeedIdsOrAFilterNotBoth) {
  ExpectUsageError({"experiment", "pause", "3", "--state", "active"}, "sf experiment pause", "not both");
  ExpectUsageError({"experiment", "delete", "3", "x7"}, "sf experiment delete", "\"x7\"");
  ExpectUsageError({"experiment", "archive", "--include-archived"}, "sf experiment archive", "ID");
  ExpectUsageError({"experiment", "unarchive", "3", "--include-archived"}, "sf experiment unarchive",
                   "--include-archived");
  ExpectUsageError({"experiment", "kill", "--state", "RUNNING"}, "sf experiment kill", "RUNNING");
}

TEST(SfUsageTest, BadValueIsNamed) {
  ExpectUsageError({"trial", "metrics", "5", "--kind", "Test-1"}, "sf trial metrics", "--kind");
  ExpectUsageError({"deploy", "local", "up", "--agents", "65"}, "sf deploy local up", "--agents");
  ExpectUsageError({"deploy", "local", "up", "--cpu-slots", "many"}, "sf deploy local up",
                   "--cpu-slots");
  ExpectUsageError({"deploy", "local", "status", "--port", "70000"}, "sf deploy local status",
                   "--port");
  ExpectUsageError({"experiment", "list", "--master"}, "sf experiment list", "--master");
  ExpectUsageError({"experiment", "create", "x.yaml", "--config"}, "sf experiment create",
                   "--config");
}

TEST(SfUsageTest, VersionFlagAndCommand) {
  TempDir dir;
  SfRun flag = RunSf({"--version"}, dir);
  EXPECT_EQ(flag.exit_code, 0);
  EXPECT_EQ(flag.out.rfind("sf ", 0), 0u) << flag.out;
  EXPECT_EQ(RunSf({"version"}, dir).out, flag.out);
}

// Nothing listens on port 1: a command that got past its parsing fails to connect there, and
// says so with the URL it used.
constexpr char kNowhere[] = "http://127.0.0.1:1";

void ExpectTriedMaster(const SfRun& run, const std::string& url) {
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("cannot reach the master at " + url), std::string::npos) << run.err;
}

TEST(SfUsageTest, ClusterCommandsTakeTheMasterFromFlagOrEnvironment) {
  TempDir dir;
  ExpectTriedMaster(RunSf({"experiment", "list", "--master", kNowhere}, dir), kNowhere);
  ExpectTriedMaster(RunSf({"e", "describe", "3", "-m", kNowhere}, dir), kNowhere);
  ExpectTriedMaster(RunSf({"t", "logs", "--master=" + std::string(kNowhere), "3", "-f"}, dir),
                    kNowhere);
  ExpectTriedMaster(RunSf({"trial", "metrics", "3", "--kind", "validation", "--json"}, dir,
                          {{"SF_MASTER", kNowhere}}),
                    kNowhere);
  ExpectTriedMaster(RunSf({"agent", "list"}, dir, {{"SF_MASTER", kNowhere}}), kNowhere);
  ExpectTriedMaster(RunSf({"slot", "list", "--json"}, dir, {{"SF_MASTER", kNowhere}}), kNowhere);
  ExpectTriedMaster(RunSf({"checkpoint", "list", "3"}, dir, {{"SF_MASTER", kNowhere}}), kNowhere);
  ExpectTriedMaster(RunSf({"master", "info"}, dir, {{"SF_MASTER", kNowhere}}), kNowhere);
  ExpectTriedMaster(RunSf({"master"}, dir, {{"SF_MASTER", kNowhere}}),
                    kNowhere);  // `master` alone is info
  // The flag wins over the environment.
  ExpectTriedMaster(RunSf({"experiment", "pause", "3", "--master", kNowhere}, dir,
                          {{"SF_MASTER", "http://127.0.0.1:2"}}),
                    kNowhere);
  // A URL the client cannot use is bad input.
  SfRun ftp = RunSf({"experiment", "list", "--master", "ftp://example.com"}, dir);
  EXPECT_EQ(ftp.exit_code, 2) << ftp.err;
}

// Where `det -m URL experiment list` users put them: before the command, for cluster and account
// commands alike; the command's own flag wins over the one before it.
TEST(SfUsageTest, GlobalFlagsWorkBeforeTheCommand) {
  TempDir dir;
  ExpectTriedMaster(RunSf({"--master", kNowhere, "experiment", "list"}, dir), kNowhere);
  ExpectTriedMaster(RunSf({"-m", kNowhere, "--json", "trial", "logs", "3"}, dir), kNowhere);
  ExpectTriedMaster(RunSf({"--master", kNowhere, "--ca-file", dir.path() + "/unused.pem", "user", "list"}, dir),
                    kNowhere);
  ExpectTriedMaster(RunSf({"--master", "http://127.0.0.1:2", "master", "info", "--master", kNowhere}, dir), kNowhere);
  ExpectTriedMaster(RunSf({"--master", kNowhere, "master"}, dir), kNowhere);  // `master` alone is info
  SfRun ftp = RunSf({"--master", "ftp://example.com", "experiment", "list"}, dir);
  EXPECT_EQ(ftp.exit_code, 2) << ftp.err;
}

// Without --master or $SF_MASTER the master comes from the CLI defaults file
// ($XDG_CONFIG_HOME/steadfast/cli.json, as `sf deploy local up` writes it); a broken file is bad
// input naming it; an https:// master's CA file that cannot be read is named.
TEST(SfUsageTest, ClusterCommandsTakeTheMasterFromTheDefaultsFile) {
  TempDir dir;
  const std::map<std::string, std::string> env = {{"XDG_CONFIG_HOME", dir.path()}, {"SF_MASTER", ""}};
  std::filesystem::create_directories(dir.path() + "/steadfast");
  dir.WriteFile("steadfast/cli.json", std::string("{\"master\": \"") + kNowhere + "\", \"ca_file\": \"\"}");
  ExpectTriedMaster(RunSf({"experiment", "list"}, dir, env), kNowhere);
  // $SF_MASTER wins over the file.
  auto with_master = env;
  with_master["SF_MASTER"] = "http://127.0.0.1:2";
  ExpectTriedMaster(RunSf({"agent", "list"}, dir, with_master), "http://127.0.0.1:2");

  dir.WriteFile("steadfast/cli.json", "{\"master\": 8080");
  SfRun broken = RunSf({"experiment", "list"}, dir, env);
  EXPECT_EQ(broken.exit_code, 2) << broken.err;
  EXPECT_NE(broken.err.find(dir.path() + "/steadfast/cli.json"), std::string::npos) << broken.err;

  SfRun no_ca = RunSf({"master", "info", "--master", "https://127.0.0.1:1", "--ca-file", dir.path() + "/none.pem"},
                      dir);
  EXPECT_EQ(no_ca.exit_code, 1) << no_ca.err;
  EXPECT_NE(no_ca.err.find("CA file " + dir.path() + "/none.pem: cannot read it"), std::string::npos) << no_ca.err;
}

TEST(SfUsageTest, ExperimentCreateReadsFileAndRepeatedConfigBeforeConnecting) {
  TempDir dir;
  std::string file = dir.WriteFile("exp.yaml", sf::testing::With({}));
  // Each --config takes one KEY=VALUE, so FILE may come after them.
  ExpectTriedMaster(RunSf({"experiment", "create", "--config", "name=renamed", "--config",
                           "max_restarts=2", file, "--paused", "--follow", "--master", kNowhere},
                          dir),
                    kNowhere);
  SfRun missing =
      RunSf({"experiment", "create", "--config", "name=x", dir.path() + "/nope.yaml"}, dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("cannot read " + dir.path() + "/nope.yaml"), std::string::npos)
      << missing.err;
  SfRun invalid = RunSf(
      {"experiment", "create", file, "--config", "max_restarts=-1", "--master", kNowhere}, dir);
  EXPECT_EQ(invalid.exit_code, 2) << "validated here, before the master is asked";
  EXPECT_NE(invalid.err.find("max_restarts"), std::string::npos) << invalid.err;
}

TEST(SfUsageTest, DeployLocalStatusWithoutACluster) {
  TempDir dir;
  SfRun run = RunSf({"deploy", "local", "status", "--dir", dir.path() + "/none"}, dir);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "no local cluster in " + dir.path() + "/none\n");
}

}  // namespace
}  // namespace sf
