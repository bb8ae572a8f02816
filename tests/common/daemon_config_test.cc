// common/config/daemon_config.h: one settings table, loaded as defaults < file < environment <
// flags, with the errors naming where a value came from. (sf-master's and sf-agent's own tests
// check their tables; this checks the loader's rules on a table of its own.)
#include "common/config/daemon_config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/support/testing.h"

namespace sf::config {
namespace {

struct TestConfig {
  std::string host = "localhost";
  int port = 80;
  bool verbose = false;
  std::vector<std::string> pools;
};

Status Port(TestConfig& c, const std::string& v) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 1 || n > 65535) return InvalidArgument("port: \"" + v + "\" is not a port");
  c.port = static_cast<int>(n);
  return Status::Ok();
}

const DaemonConfigLoader<TestConfig>& Loader() {
  static const auto* loader = [] {
    std::vector<DaemonSetting<TestConfig>> settings = {
        {"host", "HOST", "where to listen (env T_HOST)",
         [](TestConfig& c, const std::string& v) -> Status {
           if (v.empty()) return InvalidArgument("host: must not be empty");
           c.host = v;
           return Status::Ok();
         },
         [](const TestConfig& c) { return c.host; }, {"T_HOST"}},
        {"port", "PORT", "the port (env T_PORT)", Port, nullptr, {"T_PORT"}, {"-p"}},
        {"verbose", "BOOL", "say more",
         [](TestConfig& c, const std::string& v) -> Status {
           if (v != "true" && v != "false") return InvalidArgument("verbose: \"" + v + "\" is not true or false");
           c.verbose = v == "true";
           return Status::Ok();
         }},
    };
    DaemonSetting<TestConfig> pools{"pools", "", "", nullptr};
    pools.file_only = true;
    pools.from_node = [](TestConfig& c, const YAML::Node& node, const std::string& where) -> Status {
      if (!node.IsSequence()) return InvalidArgument(where + ": pools: expected a list");
      for (const auto& p : node) c.pools.push_back(p.as<std::string>());
      return Status::Ok();
    };
    settings.push_back(pools);
    return new DaemonConfigLoader<TestConfig>("testd", "A test daemon.", "Precedence: flags > env > file.",
                                              std::move(settings));
  }();
  return *loader;
}

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(DaemonConfigTest, FlagsOverTheEnvironmentOverTheFileOverTheDefaults) {
  testing::TempDir dir;
  const std::string file = dir.WriteFile("d.yaml", "host: from-file\nport: 1000\npools: [a, b]\n");
  auto defaults = Loader().Load({}, Env({}));
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->config.host, "localhost");
  EXPECT_EQ(defaults->config.port, 80);

  auto from_file = Loader().Load({"--config", file}, Env({}));
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->config.host, "from-file");
  EXPECT_EQ(from_file->config.port, 1000);
  EXPECT_EQ(from_file->config.pools, (std::vector<std::string>{"a", "b"}));

  // The environment beats the file; an empty variable counts as unset.
  auto env = Loader().Load({"--config", file}, Env({{"T_PORT", "2000"}, {"T_HOST", ""}}));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->config.port, 2000);
  EXPECT_EQ(env->config.host, "from-file");

  // Flags beat both; an alias is the same flag; a bare BOOL flag is true.
  auto flags = Loader().Load({"--config", file, "-p", "3000", "--host", "from-flag", "--verbose"},
                             Env({{"T_PORT", "2000"}}));
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->config.port, 3000);
  EXPECT_EQ(flags->config.host, "from-flag");
  EXPECT_TRUE(flags->config.verbose);
  EXPECT_EQ(flags->action, DaemonAction::kRun);
}

TEST(DaemonConfigTest, ErrorsNameWhereTheValueCameFrom) {
  testing::TempDir dir;
  auto bad_flag = Loader().Load({"--port", "http"}, Env({}));
  ASSERT_FALSE(bad_flag.ok());
  EXPECT_EQ(bad_flag.status().message(), "--port: port: \"http\" is not a port");

  auto bad_env = Loader().Load({}, Env({{"T_PORT", "0"}}));
  ASSERT_FALSE(bad_env.ok());
  EXPECT_EQ(bad_env.status().message(), "T_PORT: port: \"0\" is not a port");

  const std::string typo = dir.WriteFile("typo.yaml", "prot: 8080\n");
  auto unknown = Loader().Load({"--config", typo}, Env({}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), typo + ": unknown setting \"prot\" (did you mean \"port\"?)");

  const std::string nested = dir.WriteFile("nested.yaml", "port: {value: 1}\n");
  auto not_scalar = Loader().Load({"--config", nested}, Env({}));
  ASSERT_FALSE(not_scalar.ok());
  EXPECT_EQ(not_scalar.status().message(), nested + ": port: expected a value");

  const std::string broken = dir.WriteFile("broken.yaml", "port: [1\n");
  auto syntax = Loader().Load({"--config", broken}, Env({}));
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().message().rfind(broken + ": line ", 0), 0u) << syntax.status().message();

  auto missing = Loader().Load({"--config", dir.path() + "/none.yaml"}, Env({}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  // A file-only setting has no flag.
  auto no_flag = Loader().Load({"--pools", "a"}, Env({}));
  ASSERT_FALSE(no_flag.ok());
  EXPECT_NE(no_flag.status().message().find("(see --help)"), std::string::npos) << no_flag.status().message();

  // An empty file sets nothing.
  auto empty = Loader().Load({"--config", dir.WriteFile("empty.yaml", "")}, Env({}));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->config.port, 80);
}

TEST(DaemonConfigTest, HelpAndVersionAreActionsAndHelpShowsEveryFlagWithItsDefault) {
  auto help = Loader().Load({"--help"}, Env({}));
  ASSERT_TRUE(help.ok());
  EXPECT_EQ(help->action, DaemonAction::kHelp);
  auto version = Loader().Load({"--version"}, Env({}));
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(version->action, DaemonAction::kVersion);
  const std::string usage = Loader().Usage();
  for (const char* part : {"--host", "--port", "-p", "--verbose", "--config", "localhost", "(env T_PORT)",
                           "Precedence: flags > env > file."}) {
    EXPECT_NE(usage.find(part), std::string::npos) << part << " in\n" << usage;
  }
  EXPECT_EQ(usage.find("--pools"), std::string::npos) << usage;
}

}  // namespace
}  // namespace sf::config
