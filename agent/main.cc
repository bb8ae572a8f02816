// sf-agent: runs Steadfast trainers on this machine for the master. See docs/agent.md.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/gpu_monitor.h"
#include "agent/logger.h"
#include "agent/slot_detector.h"

#ifndef SF_VERSION
#define SF_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
  using namespace sf::agent;
  std::vector<std::string> args(argv, argv + argc);
  auto parsed = ParseCommandLine(args, ProcessEnv(), SelfExecutablePath());
  if (!parsed.ok()) {
    std::fprintf(stderr, "sf-agent: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (parsed->action == CommandLineAction::kHelp) {
    std::fputs(UsageText().c_str(), stdout);
    return 0;
  }
  if (parsed->action == CommandLineAction::kVersion) {
    std::printf("sf-agent %s\n", SF_VERSION);
    return 0;
  }
  const AgentConfig& config = parsed->config;
  SetLogLevel(ParseLogLevel(config.log_level).value());

  // SIGTERM/SIGINT/SIGHUP are taken by sigwait below; blocked before any thread starts so no
  // other thread gets them. Children get an empty mask and default handlers (supervisor).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Agent::Options options;
  options.config = config;
  // `auto`: NVML first (it also reports the GPUs' usage while the agent runs), the CUDA runtime
  // as the fallback (slot_detector.h).
  std::shared_ptr<GpuMonitor> gpus;
  GpuSources sources;
  if (config.slots.auto_detect) {
    gpus = GpuMonitor::Open(config.nvml_library.empty() ? GpuMonitor::kDefaultLibrary : config.nvml_library);
    sources.nvml = gpus.get();
  }
  options.slots = DetectSlots(config.slots, sources);
  if (gpus && gpus->available() && !gpus->gpus().empty()) options.gpu_monitor = gpus;
  Agent agent(std::move(options));
  sf::Status status = agent.Start();
  if (!status.ok()) {
    LogEvent(LogLevel::kError, "agent", "start_failed", {{"error", status.message()}});
    return 1;
  }
  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) != 0) {
  }
  LogEvent(LogLevel::kInfo, "agent", "signal", {{"signal", strsignal(signal_number)}});
  agent.Shutdown();
  return 0;
}
