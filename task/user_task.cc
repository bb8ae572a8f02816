#include "task/user_task.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/context/context_archive.h"
#include "common/log.h"
#include "common/sha256.h"
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace sf::task {
namespace fs = std::filesystem;
namespace v1 = steadfast::v1;

namespace {

// An archive larger than this can't hold a context within its limit (gzip adds little even to
// incompressible data).
constexpr int64_t kMaxArchiveBytes = context::kMaxContextBytes + (int64_t{8} << 20);

bool IsHexDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string ReadTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace

ContextCache::ContextCache(std::string work_dir, std::string ca_pem)
    : dir_((fs::path(std::move(work_dir)) / "contexts").string()), ca_pem_(std::move(ca_pem)) {}

Result<std::string> ContextCache::Get(const v1::StartTask& start, const std::string& master) {
  const std::string& digest = start.context_sha256();
  const std::string experiment = "experiment " + std::to_string(start.experiment_id());
  if (!IsHexDigest(digest)) return InvalidArgument(experiment + ": context digest \"" + digest + "\" is not SHA-256 hex");
  std::lock_guard<std::mutex> lock(mu_);
  const fs::path cached = fs::path(dir_) / (digest + ".tar.gz");
  std::error_code ec;
  if (fs::exists(cached, ec)) return cached.string();
  fs::create_directories(dir_, ec);
  if (ec) return Internal("cannot create " + dir_ + ": " + ec.message());

  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!ca_pem_.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ca_pem_;
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 << 20);
  auto stub = v1::TrialLink::NewStub(grpc::CreateCustomChannel(master, credentials, args));
  v1::GetContextRequest request;
  request.mutable_who()->set_trial_id(start.trial_id());
  request.mutable_who()->set_rank(start.rank());
  request.mutable_who()->set_task_id(start.task_id());
  request.mutable_who()->set_restart(start.restart());
  const fs::path partial = fs::path(dir_) / (digest + ".tar.gz.part" + std::to_string(getpid()));
  Status last = Unavailable(experiment + ": its context was not fetched");
  // A master that is restarting is waited out briefly; other errors are final.
  for (int attempt = 0, delay_ms = 500; attempt < 5; ++attempt, delay_ms *= 2) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    ctx.AddMetadata("x-sf-task-token", start.task_token());
    std::unique_ptr<grpc::ClientReader<v1::ContextChunk>> reader(stub->GetContext(&ctx, request));
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    Sha256 hash;
    int64_t bytes = 0;
    v1::ContextChunk chunk;
    bool too_big = false;
    while (reader->Read(&chunk)) {
      bytes += static_cast<int64_t>(chunk.data().size());
      if (bytes > kMaxArchiveBytes) {
        too_big = true;
        ctx.TryCancel();
        break;
      }
      hash.Update(chunk.data());
      out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    }
    grpc::Status st = reader->Finish();
    out.close();
    if (too_big) {
      fs::remove(partial, ec);
      return DataLoss(experiment + ": its context archive is larger than " + std::to_string(kMaxArchiveBytes) + " bytes");
    }
    if (!st.ok()) {
      fs::remove(partial, ec);
      last = Status(st.error_code() == grpc::StatusCode::NOT_FOUND ? StatusCode::kNotFound : StatusCode::kUnavailable,
                    experiment + ": cannot fetch its context from " + master + ": " + st.error_message());
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE) return last;
      continue;
    }
    if (!out) {
      fs::remove(partial, ec);
      return Internal("cannot write " + partial.string());
    }
    const std::string got = hash.HexDigest();
    if (got != digest) {
      fs::remove(partial, ec);
      return DataLoss(experiment + ": its context arrived with SHA-256 " + got + ", expected " + digest);
    }
    fs::rename(partial, cached, ec);
    if (ec) return Internal("cannot keep " + cached.string() + ": " + ec.message());
    log::Info("agent", {{"event", "context_fetched"}, {"experiment", std::to_string(start.experiment_id())},
                        {"sha256", digest}, {"bytes", std::to_string(bytes)}});
    return cached.string();
  }
  return last;
}

Status UnpackTaskContext(const std::string& archive_path, const std::string& destination) {
  std::error_code ec;
  fs::remove_all(destination, ec);
  std::ifstream in(archive_path, std::ios::binary);
  if (!in) return Internal("cannot read " + archive_path);
  std::string archive((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return context::UnpackContext(archive, destination);
}

std::vector<std::string> EntrypointArgv(const v1::StartTask& start, const std::map<std::string, std::string>& programs) {
  if (start.entrypoint().empty()) return {};
  if (start.entrypoint_shell()) return {"/bin/sh", "-c", start.entrypoint(0)};
  std::vector<std::string> argv(start.entrypoint().begin(), start.entrypoint().end());
  if (auto own = programs.find(argv[0]); own != programs.end()) argv[0] = own->second;
  return argv;
}

void AddUserTaskEnvironment(const v1::StartTask& start, const std::string& python_path,
                            std::map<std::string, std::string>& env) {
  env["SF_LOCAL_RANK"] = std::to_string(start.local_rank());
  env["SF_LOCAL_SIZE"] = std::to_string(std::max(1, start.local_size()));
  env["PYTHONUNBUFFERED"] = "1";
  if (!python_path.empty()) {
    // The user's own PYTHONPATH (from StartTask.env or the agent's environment) follows ours.
    std::string rest;
    if (auto it = env.find("PYTHONPATH"); it != env.end()) {
      rest = it->second;
    } else if (const char* own = std::getenv("PYTHONPATH")) {
      rest = own;
    }
    env["PYTHONPATH"] = rest.empty() ? python_path : python_path + ":" + rest;
  }
}

std::string PythonExceptionLine(const std::string& stderr_path) {
  const std::string text = ReadTail(stderr_path, 256 * 1024);
  const size_t tb = text.rfind("Traceback (most recent call last):");
  if (tb == std::string::npos) return "";
  size_t pos = text.find('\n', tb);
  while (pos != std::string::npos && pos + 1 < text.size()) {
    const size_t start = pos + 1;
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    pos = end;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == ' ' || line[0] == '\t') continue;  // a frame, its source, a caret
    if (line.size() > 300) line = line.substr(0, 297) + "...";
    return line;
  }
  return "";
}

std::string FirstErrorLine(const std::string& stderr_path) {
  std::ifstream in(stderr_path);
  std::string line, first_error, last;
  auto lower = [](std::string v) {
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return v;
  };
  auto structured_info = [](const std::string& l) {
    return l.size() > 2 && (l[0] == 'I' || l[0] == 'W' || l[0] == 'D') && l[1] == ' ' &&
           std::isdigit(static_cast<unsigned char>(l[2]));
  };
  while (std::getline(in, line)) {
    if (line.empty() || structured_info(line)) continue;
    if (line.rfind("sf-trainer", 0) == 0) {
      first_error = line;
      break;
    }
    if (first_error.empty() && lower(line).find("error") != std::string::npos) first_error = line;
    last = line;
  }
  std::string out = first_error.empty() ? last : first_error;
  if (out.size() > 300) out = out.substr(0, 297) + "...";
  return out;
}

std::string FailureReason(int code, const std::string& stderr_path) {
  // A Python traceback's last exception is the reason itself ("ValueError: bad shape").
  if (std::string exception = PythonExceptionLine(stderr_path); !exception.empty()) return exception;
  const std::string status = "exit status " + std::to_string(code);
  const std::string first = FirstErrorLine(stderr_path);
  return first.empty() ? status : status + ": " + first;
}

}  // namespace sf::task
