// Task directories on the agent (agent/task_files.h): ended tasks' old directories are pruned;
// running ones (a state file, or in the running set) and recent ones are kept.
#include "agent/task_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/testing.h"

namespace sf::agent {
namespace {

namespace fs = std::filesystem;

// A task directory with its two logs (and a state file when `running`), all last written `age` ago.
void MakeTaskDir(const fs::path& dir, std::chrono::hours age, bool state_file = false) {
  fs::create_directories(dir / "code");
  std::ofstream(dir / "stdout.log") << "step 10 loss 3.2\n";
  std::ofstream(dir / "stderr.log") << "";
  if (state_file) std::ofstream(dir / kStateFile) << "pid=1\n";
  const auto when = fs::file_time_type::clock::now() - age;
  for (const auto& f : fs::directory_iterator(dir)) fs::last_write_time(f.path(), when);
  fs::last_write_time(dir, when);
}

TEST(TaskFiles, PruneDeletesOnlyEndedTasksOlderThanTheKeepTime) {
  sf::testing::TempDir work;
  const fs::path tasks = fs::path(work.path()) / "tasks";
  MakeTaskDir(tasks / "t1-r0-a1.0", std::chrono::hours(48));                      // ended, old: deleted
  MakeTaskDir(tasks / "t2-r0-a1.0", std::chrono::hours(48), /*state_file=*/true);  // running (adoptable)
  MakeTaskDir(tasks / "t3-r0-a1.0", std::chrono::hours(48));                      // in the running set
  MakeTaskDir(tasks / "t4-r0-a1.0", std::chrono::hours(2));                       // ended, recent
  MakeTaskDir(tasks / "t5-r0-a1.0", std::chrono::hours(48));
  std::ofstream(tasks / "t5-r0-a1.0" / "stdout.log") << "written just now\n";  // its log still grew

  EXPECT_EQ(PruneTaskDirectories(tasks.string(), std::chrono::hours(0), {}), 0) << "keep 0 keeps all";
  EXPECT_EQ(PruneTaskDirectories(tasks.string(), std::chrono::hours(24), {"t3-r0-a1.0"}), 1);
  EXPECT_FALSE(fs::exists(tasks / "t1-r0-a1.0"));
  for (const char* kept : {"t2-r0-a1.0", "t3-r0-a1.0", "t4-r0-a1.0", "t5-r0-a1.0"}) {
    EXPECT_TRUE(fs::exists(tasks / kept / "stdout.log")) << kept;
  }
  // Once t3 is no longer running it goes too; a missing tasks directory is nothing to do.
  EXPECT_EQ(PruneTaskDirectories(tasks.string(), std::chrono::hours(24), {}), 1);
  EXPECT_FALSE(fs::exists(tasks / "t3-r0-a1.0"));
  EXPECT_EQ(PruneTaskDirectories((fs::path(work.path()) / "none").string(), std::chrono::hours(24), {}), 0);
}

}  // namespace
}  // namespace sf::agent
