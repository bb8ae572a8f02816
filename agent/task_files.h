// Files an agent keeps per task under <work_dir>/tasks/<task id>/, and the few facts about
// processes it reads: shared by the agent proper (agent.cc) and its adoption of surviving tasks
// after a restart (agent_adoption.cc). Stateless; thread-safe.
#pragma once

#include <sys/types.h>

#include <google/protobuf/repeated_ptr_field.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <map>
#include <optional>
#include <string>

namespace sf::agent {

// Where a running task's pid, start time, trial, rank, slots and log offsets are kept, written
// atomically (a .tmp and a rename), so a restarted agent can adopt the task.
inline constexpr const char* kStateFile = "agent-task.state";

// The exit status a trainer left in <task dir>/exit_status before returning (sf-trainer
// cluster does), if any: a whole line holding an integer in [0, 255].
std::optional<int> RecordedExitStatus(const std::string& task_dir);

// Field 22 of /proc/PID/stat (start time in clock ticks since boot): with the pid it names
// one process for the life of the machine. 0 when the process does not exist or is a zombie.
uint64_t ProcessStartTime(pid_t pid);

// "key=value" lines of a file (a state file); absent file: empty.
std::map<std::string, std::string> ReadKeyValues(const std::string& path);

// "a,b,c"
std::string Join(const google::protobuf::RepeatedPtrField<std::string>& items);

// Deletes the task directories under `tasks_dir` (<work_dir>/tasks) of tasks that have ended (no
// state file, not in `running`) and whose newest file changed more than `keep` ago: their output
// was shipped to the master long before. Returns how many it deleted; a directory that cannot
// be read or removed is left for the next pass. `keep` zero or negative: deletes nothing.
int PruneTaskDirectories(const std::string& tasks_dir, std::chrono::seconds keep,
                         const std::set<std::string>& running);

}  // namespace sf::agent
