// A test process that is SIGKILLed leaves nothing running: not its PostgreSQL server, master,
// agents or trainers, and not their directories (cluster_fixture.h, "Cleanup").
//
// The test re-runs this binary with a filter that selects the disabled helper below. The helper
// starts the shared PostgreSQL server and a two-agent cluster, submits an experiment, waits
// until trainers run, writes every pid, port and directory to a report file, and sleeps. The
// test SIGKILLs it and checks that all of it goes away within a few seconds.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/e2e/cluster_fixture.h"
#include "tests/support/read_file.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kReportEnv = "SF_NO_LEAK_REPORT";

std::string ReadFile(const std::string& path) { return sf::testing::ReadFileOrEmpty(path); }

std::string Join(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t p : pids) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

std::vector<pid_t> Split(const std::string& text) {
  std::vector<pid_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(static_cast<pid_t>(std::stol(item)));
  }
  return out;
}

// Gone: no such process, or a zombie (it has exited; in a container PID 1 may never reap it).
bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// The parent pid of `pid` (/proc/PID/stat's fourth field; its second, the name in parentheses,
// may hold spaces); 0 when the process is gone.
pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  long ppid = 0;
  rest >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

// The trainers the agents started: a trainer's child between fork and exec (its SentencePiece
// helper starting) has the trainer's command line and environment too, so count only children
// of an agent.
std::vector<pid_t> AgentTrainers(const Cluster& cluster) {
  const std::vector<pid_t> agents = cluster.agent_pids();
  std::vector<pid_t> out;
  for (pid_t p : cluster.TrainerPids()) {
    if (std::find(agents.begin(), agents.end(), ParentOf(p)) != agents.end()) out.push_back(p);
  }
  return out;
}

bool Listening(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// The helper: run only as the child of KilledTestProcessLeavesNothingRunning.
TEST(NoLeakedServers, DISABLED_StartEverythingAndSleep) {
  const char* report = std::getenv(kReportEnv);
  if (!report) GTEST_SKIP() << "run by NoLeakedServers.KilledTestProcessLeavesNothingRunning";
  PostgresServer* pg = PostgresServer::Get();
  ASSERT_NE(pg, nullptr);
  Cluster cluster(2, 1);
  ASSERT_FALSE(::testing::Test::HasFailure());
  ASSERT_NE(cluster.Submit(TinyExperiment(2, 1000000, 100, "no-leak")), 0);
  ASSERT_TRUE(
      cluster.WaitFor([&] { return AgentTrainers(cluster).size() >= 2; }, std::chrono::seconds(60)))
      << "trainers did not start";
  const std::string master_address = cluster.grpc_address();
  std::ofstream out(report);
  out << "postgres_pid="
      << std::atol(ReadFile(pg->postgres().DataDir() + "/postmaster.pid").c_str()) << "\n"
      << "postgres_port=" << pg->postgres().port() << "\n"
      << "postgres_dir=" << pg->postgres().dir() << "\n"
      << "master_pid=" << cluster.master_pid() << "\n"
      << "agent_pids=" << Join(cluster.agent_pids()) << "\n"
      << "trainer_pids=" << Join(AgentTrainers(cluster)) << "\n"
      << "http_port=" << cluster.url().substr(cluster.url().rfind(':') + 1) << "\n"
      << "grpc_port=" << master_address.substr(master_address.rfind(':') + 1) << "\n"
      << "cluster_dir=" << cluster.dir() << "\n"
      << "data_dir=" << fs::path(DataCopy("multi30k-de-en-tiny")).parent_path().string() << "\n"
      << "ready=1\n";
  out.close();
  std::this_thread::sleep_for(std::chrono::minutes(10));  // until SIGKILLed
}

TEST(NoLeakedServers, KilledTestProcessLeavesNothingRunning) {
  TempDir scratch;
  const std::string report = scratch.path() + "/report.txt";
  const std::string log = scratch.path() + "/helper.log";
  // Prepared before fork; the child only execs.
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=NoLeakedServers.DISABLED_StartEverythingAndSleep";
  std::string also_disabled = "--gtest_also_run_disabled_tests";
  std::vector<char*> argv{self.data(), filter.data(), also_disabled.data(), nullptr};
  ASSERT_EQ(setenv(kReportEnv, report.c_str(), 1), 0);
  const pid_t parent = getpid();
  const pid_t helper = fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // should this test die, the helper's watchdog cleans up
    if (getppid() != parent) _exit(1);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  unsetenv(kReportEnv);

  // Wait for the report (PostgreSQL, the cluster and two trainers start: well under a minute).
  std::map<std::string, std::string> values;
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  while (Clock::now() < deadline && values.count("ready") == 0) {
    if (waitpid(helper, nullptr, WNOHANG) == helper) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::stringstream in(ReadFile(report));
    values.clear();
    for (std::string line; std::getline(in, line);) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) values[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  if (values.count("ready") == 0) {
    kill(helper, SIGKILL);
    waitpid(helper, nullptr, 0);
    FAIL() << "the helper did not get ready; its output:\n" << ReadFile(log);
  }

  std::map<std::string, pid_t> processes;  // what must die, by name
  processes["postgres"] = static_cast<pid_t>(std::stol(values["postgres_pid"]));
  processes["master"] = static_cast<pid_t>(std::stol(values["master_pid"]));
  for (pid_t p : Split(values["agent_pids"])) processes["agent " + std::to_string(p)] = p;
  for (pid_t p : Split(values["trainer_pids"])) processes["trainer " + std::to_string(p)] = p;
  ASSERT_EQ(processes.size(), 2u + 2u + 2u) << ReadFile(report);
  for (const auto& [name, pid] : processes) ASSERT_FALSE(Gone(pid)) << name << " is not running";
  const std::vector<int> ports = {std::stoi(values["postgres_port"]),
                                  std::stoi(values["http_port"]), std::stoi(values["grpc_port"])};
  for (int port : ports) ASSERT_TRUE(Listening(port)) << "nothing listens on " << port;
  const std::vector<std::string> dirs = {values["postgres_dir"], values["cluster_dir"],
                                         values["data_dir"]};
  for (const std::string& dir : dirs) ASSERT_TRUE(fs::exists(dir)) << dir;

  const auto killed_at = Clock::now();
  ASSERT_EQ(kill(helper, SIGKILL), 0);
  waitpid(helper, nullptr, 0);

  auto all_gone = [&] {
    for (const auto& [name, pid] : processes) {
      if (!Gone(pid)) return false;
    }
    for (int port : ports) {
      if (Listening(port)) return false;
    }
    for (const std::string& dir : dirs) {
      if (fs::exists(dir)) return false;
    }
    return true;
  };
  while (!all_gone() && Clock::now() - killed_at < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  for (const auto& [name, pid] : processes) EXPECT_TRUE(Gone(pid)) << name << " still runs";
  for (int port : ports) EXPECT_FALSE(Listening(port)) << "something still listens on " << port;
  for (const std::string& dir : dirs) EXPECT_FALSE(fs::exists(dir)) << dir << " is still there";
  std::cout << "everything gone " << seconds << " s after the SIGKILL; the watchdog said:\n";
  std::stringstream helper_output(ReadFile(log));
  for (std::string line; std::getline(helper_output, line);) {
    if (line.rfind("sf-test-watchdog:", 0) == 0) std::cout << "  " << line << "\n";
  }
  EXPECT_LT(seconds, 15.0);
  if (::testing::Test::HasFailure()) std::cerr << "helper output:\n" << ReadFile(log);
}

}  // namespace
}  // namespace sf::testing
