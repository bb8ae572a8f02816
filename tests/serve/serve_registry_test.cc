// sf-serve --model NAME on a real local cluster (tests/e2e/cluster_fixture.h): a trial's checkpoint
// registered as version 1 of a model is served by name through the master's registry, with the
// answers `sf-trainer translate --checkpoint DIR` prints; /metrics names the model, version and
// directory; an unknown model or version, or a directory that is not there, exits 2 naming it; an
// archived model is served with a warning.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/serve/serve_process.h"
#include "tests/serve/trained_model.h"

namespace sf::serve {
namespace {
using namespace serve_testing;
using namespace std::chrono_literals;

TEST(ServeRegistry, ServesAModelVersionByNameAsTheCommandLineTranslates) {
  sf::testing::Cluster c(1, 1);
  TrainedModel trained;
  ASSERT_NO_FATAL_FAILURE(TrainAndRegister(c, "serve-de-en", &trained));
  const std::string& uuid = trained.checkpoint_uuid;
  const std::string& path = trained.checkpoint_path;

  // The command line's translations of a few test sentences, with the checkpoint's beam defaults.
  sf::testing::TempDir dir;
  const std::vector<std::string> all =
      Lines(ReadFile(sf::testing::DataCopy("multi30k-de-en-tiny") + "/test.de"));
  const std::vector<std::string> sentences(all.begin(), all.begin() + 6);
  std::string input;
  Value::List texts;
  for (const auto& s : sentences) {
    input += s + "\n";
    texts.emplace_back(s);
  }
  CommandOptions o;
  o.working_dir = dir.path();
  o.stdin_data = input;
  o.timeout = 2min;
  auto translated = RunCommand({"/bin/sh", "-c",
                                "'" + Binary("trainer/sf-trainer") + "' translate --checkpoint '" +
                                    path + "' --threads 1 > ref.txt"},
                               o);
  ASSERT_TRUE(translated.ok() && translated->exit_code == 0)
      << (translated.ok() ? translated->output : "");
  const std::vector<std::string> reference = Lines(ReadFile(dir.path() + "/ref.txt"));
  ASSERT_EQ(reference.size(), sentences.size());

  // Served by name (the latest version), with the admin's token from --token-env.
  ASSERT_EQ(setenv("SF_SERVE_TEST_TOKEN", c.admin_token().c_str(), 1), 0);
  const std::vector<std::string> registry = {"--master", c.url(), "--token-env",
                                             "SF_SERVE_TEST_TOKEN"};
  auto serve_flags = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), registry.begin(), registry.end());
    return flags;
  };
  {
    ServeProcess server(dir.path(), "serve",
                        serve_flags({"--model", "serve-de-en", "--port", "0", "--threads", "1"}));
    ASSERT_TRUE(server.WaitReady()) << server.log();
    const HttpReply reply = Call(server.port(), http::verb::post, "/v1/translate",
                                 "{\"text\": " + Value(texts).ToJson() + "}");
    ASSERT_EQ(reply.status, 200) << reply.error << reply.body;
    const auto parsed = Value::FromJson(reply.body);
    ASSERT_TRUE(parsed.ok() && parsed->Find("translations")) << reply.body;
    const Value::List& got = parsed->Find("translations")->as_list();
    ASSERT_EQ(got.size(), reference.size()) << reply.body;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].Find("text")->as_string(), reference[i]) << sentences[i];
    }
    const std::string metrics = Call(server.port(), http::verb::get, "/metrics").body;
    EXPECT_NE(metrics.find("sf_serve_model_info{checkpoint=\"" + path +
                           "\",model=\"serve-de-en\",version=\"1\"} 1"),
              std::string::npos)
        << metrics;
    EXPECT_EQ(server.Stop(), 0) << server.log();
  }

  // Refusals name what is wrong, before the server listens.
  struct Refusal {
    std::vector<std::string> flags;
    std::string message;
  };
  for (const Refusal& r : std::vector<Refusal>{
           {{"--model", "nope"}, "model \"nope\" does not exist"},
           {{"--model", "serve-de-en", "--version", "7"}, "version 7"},
           {{"--model", "serve-de-en", "--checkpoint-root", dir.path() + "/elsewhere"},
            "checkpoint directory " + dir.path() + "/elsewhere/" + uuid + " is missing"},
       }) {
    ServeProcess refused(dir.path(), "refused", serve_flags(r.flags));
    EXPECT_EQ(refused.Stop(), 2) << refused.log();
    EXPECT_NE(refused.log().find(r.message), std::string::npos) << refused.log();
    EXPECT_EQ(refused.log().find("listening on"), std::string::npos) << refused.log();
  }

  // An archived model is still served (archiving hides it from listings and stops new versions).
  ASSERT_EQ(c.Post("/api/v1/models/serve-de-en/archive", "").first, 200);
  ServeProcess archived(dir.path(), "archived",
                        serve_flags({"--model", "serve-de-en", "--version", "1", "--port", "0"}));
  EXPECT_TRUE(archived.WaitReady()) << archived.log();
  EXPECT_NE(archived.log().find("model \"serve-de-en\" is archived; serving version 1 anyway"),
            std::string::npos)
      << archived.log();
  EXPECT_EQ(archived.Stop(), 0) << archived.log();
}

}  // namespace
}  // namespace sf::serve
