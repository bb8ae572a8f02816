// A command's config file (common/config/command_config.h): what it may say, and that every
// mistake is named with its field and line.
#include "common/config/command_config.h"

#include <gtest/gtest.h>

namespace sf::config {
namespace {

std::string Errors(const CommandConfigResult& r) {
  std::string out;
  for (const ConfigError& e : r.errors) out += e.ToStringWithLocation("cmd.yaml") + "\n";
  return out;
}

TEST(CommandConfigTest, ReadsEveryField) {
  auto r = ParseCommandConfig(
      "entrypoint: [python3, eval.py, --split, test]\n"
      "resources:\n  slots: 2\n  resource_pool: gpu\n  priority: 10\n"
      "workspace: research\ncontext: src\n");
  ASSERT_TRUE(r.errors.empty()) << Errors(r);
  EXPECT_EQ(r.config.entrypoint,
            (std::vector<std::string>{"python3", "eval.py", "--split", "test"}));
  EXPECT_EQ(r.config.slots, 2);
  EXPECT_EQ(r.config.resource_pool, "gpu");
  EXPECT_EQ(r.config.priority, 10);
  EXPECT_EQ(r.config.workspace, "research");
  EXPECT_EQ(r.config.context, "src");
}

TEST(CommandConfigTest, AStringEntrypointIsAShellCommandAndAbsentFieldsStayUnset) {
  auto r = ParseCommandConfig("entrypoint: echo a; echo b\n");
  ASSERT_TRUE(r.errors.empty()) << Errors(r);
  EXPECT_EQ(r.config.entrypoint, (std::vector<std::string>{"/bin/sh", "-c", "echo a; echo b"}));
  EXPECT_FALSE(r.config.slots || r.config.resource_pool || r.config.priority ||
               r.config.workspace || r.config.context);
}

TEST(CommandConfigTest, EveryMistakeIsNamedWithItsFieldAndLine) {
  auto r = ParseCommandConfig(
      "entrypoint: []\n"
      "resources:\n  slots: 0\n  priority: 100\n  pool: gpu\n"
      "workspce: research\n");
  const std::string errors = Errors(r);
  EXPECT_EQ(r.errors.size(), 5u) << errors;
  EXPECT_NE(errors.find("cmd.yaml:1:13: entrypoint: expected a non-empty list"), std::string::npos)
      << errors;
  EXPECT_NE(errors.find("cmd.yaml:3:10: resources.slots:"), std::string::npos) << errors;
  EXPECT_NE(errors.find("cmd.yaml:4:13: resources.priority:"), std::string::npos) << errors;
  EXPECT_NE(errors.find("resources.pool"), std::string::npos) << errors;
  EXPECT_NE(errors.find("resource_pool"), std::string::npos) << "did you mean: " << errors;
  EXPECT_NE(errors.find("workspce"), std::string::npos) << errors;
}

TEST(CommandConfigTest, SyntaxErrorsAndOtherDocumentsAreRefused) {
  for (const char* text : {"resources: [1, 2\n", "", "- a list\n", "resources: 3\n"}) {
    auto r = ParseCommandConfig(text);
    EXPECT_FALSE(r.errors.empty()) << "'" << text << "' was accepted";
  }
  auto syntax = ParseCommandConfig("resources:\n  slots: [1, 2\n");
  ASSERT_FALSE(syntax.errors.empty());
  EXPECT_NE(Errors(syntax).find("YAML syntax error"), std::string::npos) << Errors(syntax);
  EXPECT_NE(Errors(syntax).find("cmd.yaml:"), std::string::npos) << Errors(syntax);
}

}  // namespace
}  // namespace sf::config
