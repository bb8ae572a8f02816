// A notebook used in Debian's Chromium through the master's proxy (docs/tasks.md, "Notebooks";
// webui/e2e/notebook.e2e.mjs), on a real local cluster: the browser signs in to the dashboard,
// and with that session alone opens Jupyter's file list at MASTER/proxy/ID/tree, creates a
// notebook from the "New" menu, types a cell that imports torch and steadfast, runs it and reads
// its output, and saves it; a browser without a session gets 401. Then, with no browser left,
// the idle timeout stops the notebook (STOPPED; the proxy answers 503).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/subprocess.h"
#include "common/value.h"
#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
using namespace std::chrono_literals;

std::string TaskState(Cluster& c, int64_t id) {
  auto [status, body] = c.Get("/api/v1/tasks/" + std::to_string(id));
  const Value* t = body.Find("task");
  return status == 200 && t && t->Find("state") ? t->Find("state")->as_string()
                                                : "HTTP " + std::to_string(status);
}

TEST(Notebooks, InChromiumThroughTheMastersProxy) {
  namespace fs = std::filesystem;
  ASSERT_TRUE(fs::exists(SourceDir() + "/webui/dist/index.html"))
      << "the web UI is not built: run tests/webui/run.sh (deploy/test.sh does)";
  ASSERT_TRUE(fs::exists(SourceDir() + "/webui/node_modules/playwright-core"))
      << "run npm ci in webui/";
  // TLS and users on, as a deployment runs: the browser reaches the master over HTTPS, and the
  // master the notebook over the mutually authenticated hop (docs/security.md).
  ClusterLayout layout;
  layout.tls = true;
  Cluster c(1, 1, layout);
  // Jupyter's clock starts when it does (its /api/status does not count as activity), so the
  // browser has 30 s to make its first request; it makes it within seconds.
  auto [code, created] = c.Post("/api/v1/notebooks", R"({"idleTimeoutSeconds": 30})");
  ASSERT_EQ(code, 200) << created.ToJson();
  const int64_t id = Id(*created.Find("task"));
  const std::string status_path = "/proxy/" + std::to_string(id) + "/api/status";

  // Jupyter answers through the master once it reported its URL.
  std::pair<int, Value> status;
  ASSERT_TRUE(c.WaitFor([&] { return (status = c.Get(status_path)).first == 200; }, 180s))
      << "HTTP " << status.first << " " << status.second.ToJson() << " (task " << TaskState(c, id)
      << ")";
  ASSERT_EQ(TaskState(c, id), "RUNNING");

  CommandOptions o;
  o.working_dir = SourceDir() + "/webui";
  o.env["SF_MASTER_URL"] = c.url();
  o.env["NODE_EXTRA_CA_CERTS"] = c.ca_file();  // the script's own /health check (the browser's
                                               // context accepts the test CA's certificate)
  o.env["SF_E2E_USERNAME"] = "admin";
  o.env["SF_E2E_PASSWORD"] = c.admin_password();
  o.env["SF_NOTEBOOK_ID"] = std::to_string(id);
  o.env["SF_ARTIFACTS_DIR"] = BinaryDir() + "/notebook-e2e-artifacts";
  o.timeout = 4min;
  auto r = RunCommand({"node", "e2e/notebook.e2e.mjs"}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find(" 0 failed"), std::string::npos) << r->output;

  // The browser is gone and its kernel idle: 30 s later the launcher stops Jupyter (it looks
  // every 6 s), the task is STOPPED and the proxy says there is nothing to reach.
  ASSERT_TRUE(c.WaitFor([&] { return TaskState(c, id) == "STOPPED"; }, 120s)) << TaskState(c, id);
  auto gone = c.Get(status_path);
  EXPECT_EQ(gone.first, 503) << gone.second.ToJson();
}

}  // namespace
}  // namespace sf::testing
