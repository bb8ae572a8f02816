#include "trainer/distributed/mpi_communicator.h"

#include <mpi.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/log.h"

namespace sf::dist {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

#define SF_MPI(call, what)                                                        \
  do {                                                                            \
    int sf_mpi_rc_ = (call);                                                      \
    if (sf_mpi_rc_ != MPI_SUCCESS) return Unavailable(std::string(what) + ": " + MpiError(sf_mpi_rc_)); \
  } while (0)

// bf16 / f16 sums: widen to fp32, add, round back (round to nearest even), element by element.
void Bf16Sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = FloatToBf16(Bf16ToFloat(a[i]) + Bf16ToFloat(b[i]));
}
void F16Sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = FloatToF16(F16ToFloat(a[i]) + F16ToFloat(b[i]));
}

// A short yielding spin before sleeping on the condition variable: a collective of a few
// hundred microseconds would otherwise pay two thread wake-ups (submit and completion).
constexpr auto kSpin = std::chrono::microseconds(200);

template <typename Ready>
bool SpinFor(Ready ready) {
  const auto until = Clock::now() + kSpin;
  while (Clock::now() < until) {
    if (ready()) return true;
    std::this_thread::yield();
  }
  return false;
}

// Completion of one queued job, shared by the MPI thread and the waiter.
struct JobState {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> finished{false};  // set with `done`, readable without the mutex
  bool done = false;
  Status status;
  double busy_seconds = 0;
};

void Complete(JobState& s, Status st, double busy) {
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.done = true;
    s.status = std::move(st);
    s.busy_seconds = busy;
  }
  s.finished.store(true, std::memory_order_release);
  s.cv.notify_all();
}

class MpiComm;

// What a collective is, for error messages; formatted only when one is needed, so the hot path
// builds no strings.
struct OpName {
  const char* kind;       // "allreduce", "broadcast", "barrier"
  int64_t bytes = -1;     // on the wire; -1: none
  int root = -1;          // broadcast only
  std::string str() const {
    std::string s = kind;
    if (bytes >= 0) s += " of " + std::to_string(bytes) + " bytes";
    if (root >= 0) s += " from rank " + std::to_string(root);
    return s;
  }
};

class MpiWork : public Work {
 public:
  MpiWork(std::shared_ptr<JobState> state, MpiComm* comm, OpName what)
      : state_(std::move(state)), comm_(comm), what_(what) {}
  Status Wait() override;
  double busy_seconds() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->busy_seconds;
  }

 private:
  std::shared_ptr<JobState> state_;
  MpiComm* comm_;
  OpName what_;
};

class MpiComm : public Communicator {
 public:
  using Init = std::function<Status(MpiComm&)>;

  explicit MpiComm(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~MpiComm() override { Shutdown(); }

  // Starts the MPI thread running `init`, and waits (bounded) for it.
  Status Start(Init init) {
    auto state = std::make_shared<JobState>();
    thread_ = std::thread([this, init = std::move(init), state] { Main(init, state); });
    std::unique_lock<std::mutex> lock(state->mu);
    if (!state->cv.wait_for(lock, timeout_, [&] { return state->done; })) {
      broken_ = true;
      return Unavailable("MPI bootstrap did not finish within " + std::to_string(timeout_.count() / 1000) +
                         " s: not every rank arrived (a rank that never started, or a network between "
                         "the ranks that does not let them connect)");
    }
    if (!state->status.ok()) broken_ = true;
    return state->status;
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return "mpi"; }
  bool broken() const override { return broken_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  AllreduceStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }
  void MarkBroken() { broken_ = true; }

  std::unique_ptr<Work> AllreduceAsync(void* data, int64_t count, DType dtype, ReduceOp op,
                                       DType wire) override {
    Status st = CheckCollectiveDType(dtype, op, wire);
    if (!st.ok()) return std::make_unique<FailedWork>(st);
    const bool narrow = dtype == DType::kF32 && (wire == DType::kBF16 || wire == DType::kF16);
    const int64_t wire_bytes = count * DTypeSize(narrow ? wire : dtype);
    return Submit(OpName{"allreduce", wire_bytes},
                  [this, data, count, dtype, op, wire, narrow, wire_bytes]() -> Status {
                    Status s = narrow ? NarrowSum(static_cast<float*>(data), count, wire)
                                      : Reduce(data, count, dtype, op);
                    if (s.ok()) {
                      std::lock_guard<std::mutex> lock(stats_mu_);
                      stats_.calls++;
                      stats_.bytes += wire_bytes;
                    }
                    return s;
                  });
  }

  Status Broadcast(void* data, int64_t bytes, int root) override {
    return Submit(OpName{"broadcast", bytes, root},
                  [this, data, bytes, root]() -> Status {
                    char* p = static_cast<char*>(data);
                    for (int64_t off = 0; off < bytes; off += INT_MAX / 2) {
                      const int n = static_cast<int>(std::min<int64_t>(bytes - off, INT_MAX / 2));
                      SF_MPI(MPI_Bcast(p + off, n, MPI_BYTE, root, comm_), "MPI_Bcast");
                    }
                    return Status::Ok();
                  })
        ->Wait();
  }

  Status Barrier() override {
    return Submit(OpName{"barrier"}, [this]() -> Status {
             SF_MPI(MPI_Barrier(comm_), "MPI_Barrier");
             return Status::Ok();
           })->Wait();
  }

  // ---- used by the init functions, on the MPI thread
  Status InitMpi() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // The MPI thread shares the cores with the training threads: a rank waiting for its peers
      // yields instead of spinning (unless the user set it; mpirun sets it when oversubscribed).
      setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
      int provided = 0;
      int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      if (rc != MPI_SUCCESS) return Unavailable("MPI_Init_thread failed: " + MpiError(rc));
      owns_mpi_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Op_create(&Bf16Sum, 1, &bf16_sum_);
    MPI_Op_create(&F16Sum, 1, &f16_sum_);
    return Status::Ok();
  }
  void SetComm(MPI_Comm comm, bool owned) {
    comm_ = comm;
    owns_comm_ = owned;
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_);
  }
  // Kills (and reaps) ompi-server when the communicator goes away.
  pid_t server_pid = -1;

 private:
  using Job = std::function<Status()>;
  struct Queued {
    Job job;
    std::shared_ptr<JobState> state;
  };

  std::unique_ptr<Work> Submit(OpName what, Job job) {
    if (broken_) {
      return std::make_unique<FailedWork>(
          Unavailable(what.str() + ": the communicator is broken by an earlier error or timeout"));
    }
    auto state = std::make_shared<JobState>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({std::move(job), state});
      pending_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_one();
    return std::make_unique<MpiWork>(state, this, what);
  }

  void Main(const Init& init, const std::shared_ptr<JobState>& init_state) {
    Status st = init(*this);
    Complete(*init_state, st, 0);
    if (!st.ok()) return;
    while (true) {
      Queued q;
      SpinFor([&] { return pending_.load(std::memory_order_acquire) > 0; });
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) break;  // stop_ and nothing left
        pending_.fetch_sub(1, std::memory_order_relaxed);
        q = std::move(queue_.front());
        queue_.pop_front();
      }
      const auto t0 = Clock::now();
      Status s = broken_ ? Unavailable("the communicator is broken") : q.job();
      const double busy = Seconds(t0, Clock::now());
      if (!s.ok()) broken_ = true;
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        stats_.busy_seconds += busy;
      }
      Complete(*q.state, s, busy);
    }
    if (!broken_) {
      // Leave together, so no rank tears down a connection a peer still reads from.
      MPI_Barrier(comm_);
      if (owns_comm_) MPI_Comm_free(&comm_);
      if (owns_mpi_) MPI_Finalize();
    }
  }

  void Shutdown() {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
      }
      cv_.notify_one();
      if (broken_) {
        thread_.detach();  // may be stuck inside MPI for good; the process is about to exit
      } else {
        thread_.join();
      }
    }
    if (server_pid > 0) {
      kill(server_pid, SIGTERM);
      waitpid(server_pid, nullptr, 0);
      server_pid = -1;
    }
  }

  Status Reduce(void* data, int64_t count, DType dtype, ReduceOp op) {
    MPI_Datatype type;
    MPI_Op mop = op == ReduceOp::kMax ? MPI_MAX : MPI_SUM;
    switch (dtype) {
      case DType::kF32: type = MPI_FLOAT; break;
      case DType::kF64: type = MPI_DOUBLE; break;
      case DType::kI32: type = MPI_INT32_T; break;
      case DType::kBF16: type = MPI_UINT16_T; mop = bf16_sum_; break;
      case DType::kF16: type = MPI_UINT16_T; mop = f16_sum_; break;
      default: return InvalidArgument("allreduce: unsupported dtype");
    }
    char* p = static_cast<char*>(data);
    const int64_t chunk = 1 << 28;
    for (int64_t off = 0; off < count; off += chunk) {
      const int n = static_cast<int>(std::min(chunk, count - off));
      SF_MPI(MPI_Allreduce(MPI_IN_PLACE, p + off * DTypeSize(dtype), n, type, mop, comm_), "MPI_Allreduce");
    }
    return Status::Ok();
  }

  // f32 summed in a narrower dtype: cast into the wire buffer, reduce, widen back.
  Status NarrowSum(float* data, int64_t count, DType wire) {
    if (static_cast<int64_t>(wire_.size()) < count) wire_.resize(static_cast<size_t>(count));
    uint16_t* w = wire_.data();
    if (wire == DType::kBF16) {
      for (int64_t i = 0; i < count; ++i) w[i] = FloatToBf16(data[i]);
    } else {
      for (int64_t i = 0; i < count; ++i) w[i] = FloatToF16(data[i]);
    }
    SF_RETURN_IF_ERROR(Reduce(w, count, wire, ReduceOp::kSum));
    if (wire == DType::kBF16) {
      for (int64_t i = 0; i < count; ++i) data[i] = Bf16ToFloat(w[i]);
    } else {
      for (int64_t i = 0; i < count; ++i) data[i] = F16ToFloat(w[i]);
    }
    return Status::Ok();
  }

  std::chrono::milliseconds timeout_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  std::atomic<int> pending_{0};  // queue_.size(), readable without the mutex
  bool stop_ = false;
  std::atomic<bool> broken_{false};
  mutable std::mutex stats_mu_;
  AllreduceStats stats_;
  // MPI thread only:
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owns_comm_ = false, owns_mpi_ = false;
  MPI_Op bf16_sum_ = MPI_OP_NULL, f16_sum_ = MPI_OP_NULL;
  std::vector<uint16_t> wire_;
  int rank_ = 0, world_ = 1;
};

Status MpiWork::Wait() {
  SpinFor([&] { return state_->finished.load(std::memory_order_acquire); });
  std::unique_lock<std::mutex> lock(state_->mu);
  if (!state_->cv.wait_for(lock, comm_->timeout(), [&] { return state_->done; })) {
    comm_->MarkBroken();
    return Unavailable(what_.str() + " did not finish within " + std::to_string(comm_->timeout().count() / 1000) +
                       " s: a peer rank died, hangs, or cannot be reached");
  }
  return state_->status.ok() ? Status::Ok() : state_->status.WithContext(what_.str());
}

// Starts ompi-server as our child (it dies with the thread that started it, and is killed and
// reaped with the communicator) and returns its URI.
Result<std::string> StartOmpiServer(const std::string& uri_file, std::chrono::milliseconds timeout,
                                    pid_t* pid_out) {
  SF_ASSIGN_OR_RETURN(std::string server, FindOmpiServer());
  std::error_code ec;
  std::filesystem::remove(uri_file, ec);
  pid_t pid = fork();
  if (pid < 0) return Internal(std::string("fork for ompi-server: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const char* argv[] = {server.c_str(), "--no-daemonize", "-r", uri_file.c_str(), nullptr};
    execv(server.c_str(), const_cast<char* const*>(argv));
    _exit(127);
  }
  *pid_out = pid;
  const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(60));
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      *pid_out = -1;
      return Unavailable("ompi-server exited at start (status " + std::to_string(status) + ")");
    }
    std::ifstream in(uri_file);
    std::string uri;
    if (in && std::getline(in, uri) && !uri.empty()) return uri;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Unavailable("ompi-server did not report its URI in " + uri_file);
}

std::vector<std::string> SplitLines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// The whole bootstrap of MpiConnect, on the MPI thread.
Status ConnectRanks(MpiComm& c, const MpiConnectOptions& o) {
  const int rank = o.rank, world = o.world_size;
  std::error_code ec;
  std::filesystem::create_directories(o.work_dir, ec);
  const std::string tag = std::to_string(getpid());
  // 1. rank 0 runs the rendezvous server for MPI's connect/accept; everyone learns its URI.
  std::string uri;
  if (rank == 0) {
    SF_ASSIGN_OR_RETURN(uri, StartOmpiServer(o.work_dir + "/ompi-server." + tag + ".uri", o.timeout, &c.server_pid));
  }
  SF_ASSIGN_OR_RETURN(std::vector<std::string> got, o.rendezvous("mpi-server", uri));
  if (got.empty() || got[0].empty()) return Unavailable("rendezvous gave no ompi-server URI for rank 0");
  uri = got[0];
  const std::string my_uri_file = o.work_dir + "/ompi-server-uri." + tag;
  {
    std::ofstream out(my_uri_file);
    out << uri << "\n";
    if (!out) return Internal("cannot write " + my_uri_file);
  }
  // Open MPI reads its parameters from the environment at MPI_Init (and the singleton's
  // helper daemon inherits them).
  setenv("OMPI_MCA_pmix_server_uri", ("file:" + my_uri_file).c_str(), 1);
  if (o.across_machines) setenv("OMPI_MCA_btl", "self,tcp", 1);
  // Which network carries the data (host_network.h): the named interfaces, else loopback for
  // ranks on one host, never "every interface there is" (one that vanishes mid-run would hang
  // the collective it carried half of). Loopback gives way to the user's own OMPI_MCA_* settings.
  if (!o.tcp_interfaces.empty()) {
    setenv("OMPI_MCA_btl_tcp_if_include", o.tcp_interfaces.c_str(), 1);
    setenv("OMPI_MCA_oob_tcp_if_include", o.tcp_interfaces.c_str(), 1);
  } else if (!o.across_machines && !std::getenv("OMPI_MCA_btl_tcp_if_exclude") &&
             !std::getenv("OMPI_MCA_oob_tcp_if_exclude")) {
    setenv("OMPI_MCA_btl_tcp_if_include", "127.0.0.1/8", 0);
    setenv("OMPI_MCA_oob_tcp_if_include", "127.0.0.1/8", 0);
  }
  SF_RETURN_IF_ERROR(c.InitMpi());

  // 2. rank 0 opens one port per joining rank and publishes them.
  std::vector<std::string> ports;
  std::string mine;
  if (rank == 0) {
    for (int k = 1; k < world; ++k) {
      char port[MPI_MAX_PORT_NAME] = {};
      SF_MPI(MPI_Open_port(MPI_INFO_NULL, port), "MPI_Open_port");
      mine += std::string(port) + "\n";
    }
  }
  SF_ASSIGN_OR_RETURN(got, o.rendezvous("mpi-ports", mine));
  ports = SplitLines(got.empty() ? "" : got[0]);
  if (static_cast<int>(ports.size()) != world - 1) {
    return Unavailable("rendezvous gave " + std::to_string(ports.size()) + " MPI ports for " +
                       std::to_string(world - 1) + " joining ranks");
  }

  // 3. Ranks join in order: the group {0..k-1} accepts rank k on port k.
  MPI_Comm comm = MPI_COMM_SELF;
  bool owned = false;
  int joined = 1;
  if (rank > 0) {
    MPI_Comm inter, merged;
    SF_MPI(MPI_Comm_connect(ports[rank - 1].c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter),
           "MPI_Comm_connect to rank 0");
    SF_MPI(MPI_Intercomm_merge(inter, 1, &merged), "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    comm = merged;
    owned = true;
    joined = rank + 1;
  }
  for (int k = joined; k < world; ++k) {
    MPI_Comm inter, merged;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    SF_MPI(MPI_Comm_accept(ports[k - 1].c_str(), MPI_INFO_NULL, 0, comm, &inter),
           "MPI_Comm_accept of rank " + std::to_string(k));
    SF_MPI(MPI_Intercomm_merge(inter, 0, &merged), "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    if (owned) MPI_Comm_free(&comm);
    comm = merged;
    owned = true;
  }
  if (rank == 0) {
    for (const auto& p : ports) MPI_Close_port(p.c_str());
  }
  c.SetComm(comm, owned);
  if (c.rank() != rank || c.world_size() != world) {
    return Internal("MPI bootstrap produced rank " + std::to_string(c.rank()) + " of " +
                    std::to_string(c.world_size()) + ", expected " + std::to_string(rank) + " of " +
                    std::to_string(world));
  }
  std::filesystem::remove(my_uri_file, ec);
  return Status::Ok();
}

}  // namespace

Result<std::string> FindOmpiServer() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/lib/x86_64-linux-gnu/openmpi/bin"}) {
    std::string p = std::string(dir) + "/ompi-server";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return NotFound("ompi-server (Open MPI, Debian package openmpi-bin) is not installed in /usr/bin or /usr/local/bin");
}

Result<std::unique_ptr<Communicator>> MpiFromWorld(std::chrono::milliseconds timeout) {
  auto c = std::make_unique<MpiComm>(timeout);
  SF_RETURN_IF_ERROR(c->Start([](MpiComm& m) -> Status {
    SF_RETURN_IF_ERROR(m.InitMpi());
    m.SetComm(MPI_COMM_WORLD, false);
    return Status::Ok();
  }));
  return std::unique_ptr<Communicator>(std::move(c));
}

Result<std::unique_ptr<Communicator>> MpiConnect(const MpiConnectOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is not in [0, " +
                           std::to_string(options.world_size) + ")");
  }
  if (!options.rendezvous) return InvalidArgument("MpiConnect needs a rendezvous function");
  auto c = std::make_unique<MpiComm>(options.timeout);
  MpiConnectOptions o = options;
  Status st = c->Start([o](MpiComm& m) { return ConnectRanks(m, o); });
  if (!st.ok()) return st.WithContext("rank " + std::to_string(options.rank) + " of " + std::to_string(options.world_size));
  log::Info("dist", {{"event", "connected"}, {"backend", "mpi"}, {"rank", std::to_string(c->rank())},
                     {"world_size", std::to_string(c->world_size())},
                     {"network", !options.tcp_interfaces.empty() ? options.tcp_interfaces
                                 : options.across_machines    ? "any"
                                                              : "loopback"}});
  return std::unique_ptr<Communicator>(std::move(c));
}

}  // namespace sf::dist
