// The client side of the SentencePiece helper (sf-spm, spm_helper_main.cc). This process never
// loads libsentencepiece: training runs `sf-spm train`, and a loaded model is a `sf-spm serve`
// child answering Encode/Decode requests over a socket pair (see the helper for the protocol
// and for why SentencePiece must live in its own process).
#include "trainer/data/sentencepiece_model.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "common/log.h"
#include "common/subprocess.h"

#ifndef SF_SPM_BUILD_PATH
#define SF_SPM_BUILD_PATH ""
#endif

namespace sf::data {
namespace {

// $SF_SPM, else sf-spm beside this executable, else the one in the build tree, else PATH.
std::string HelperPath() {
  if (const char* env = std::getenv("SF_SPM"); env && *env) return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "sf-spm";
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  std::string built = SF_SPM_BUILD_PATH;
  if (!built.empty() && std::filesystem::exists(built, ec)) return built;
  return "sf-spm";
}

}  // namespace

struct SentencePieceModel::Impl {
  std::mutex mu;
  int fd = -1;
  pid_t pid = -1;
  std::string buffer;  // bytes read past the last line
  int32_t vocab = 0;

  ~Impl() {
    if (fd >= 0) ::close(fd);  // the helper sees EOF and exits
    if (pid > 0) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  bool WriteAll(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool ReadLine(std::string* line) {
    while (true) {
      size_t nl = buffer.find('\n');
      if (nl != std::string::npos) {
        line->assign(buffer, 0, nl);
        buffer.erase(0, nl + 1);
        return true;
      }
      char chunk[65536];
      ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buffer.append(chunk, static_cast<size_t>(n));
    }
  }
  // One request line -> one response line. A dead helper is a bug in the environment (it was
  // killed): logged, and the caller gets an empty answer.
  std::string Ask(const std::string& request) {
    std::lock_guard<std::mutex> lock(mu);
    std::string line;
    if (fd < 0 || !WriteAll(request) || !ReadLine(&line)) {
      log::Error("sentencepiece", {{"event", "helper_gone"}, {"error", "the sf-spm helper stopped answering"}});
      if (fd >= 0) ::close(fd);
      fd = -1;
      return "";
    }
    return line;
  }

  Status Start(const std::string& model_path) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return Internal(std::string("socketpair: ") + std::strerror(errno));
    }
    const std::string helper = HelperPath();
    pid = ::fork();
    if (pid < 0) {
      ::close(sv[0]);
      ::close(sv[1]);
      return Internal(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::dup2(sv[1], 0);
      ::dup2(sv[1], 1);
      const char* argv[] = {helper.c_str(), "serve", model_path.c_str(), nullptr};
      ::execvp(argv[0], const_cast<char* const*>(argv));
      const char msg[] = "error can't run the SentencePiece helper sf-spm\n";
      (void)!::write(1, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::close(sv[1]);
    fd = sv[0];
    std::string hello;
    if (!ReadLine(&hello)) return Internal("the SentencePiece helper " + helper + " exited at start");
    if (hello.rfind("ok ", 0) == 0) {
      vocab = std::atoi(hello.c_str() + 3);
      return Status::Ok();
    }
    std::string why = hello.rfind("error ", 0) == 0 ? hello.substr(6) : hello;
    if (why.find("can't run") != std::string::npos) return Internal(why + " (" + helper + ")");
    return InvalidArgument(why);
  }
};

SentencePieceModel::SentencePieceModel() : impl_(std::make_unique<Impl>()) {}
SentencePieceModel::~SentencePieceModel() = default;

Status SentencePieceModel::Train(const SentencePieceTrainOptions& o) {
  if (o.model_type != "bpe" && o.model_type != "unigram" && o.model_type != "char" &&
      o.model_type != "word") {
    return InvalidArgument("tokenizer.model_type: '" + o.model_type +
                           "' must be one of bpe, unigram, char, word");
  }
  if (o.vocab_size < 8) {
    return InvalidArgument("tokenizer.vocab_size: " + std::to_string(o.vocab_size) +
                           " is too small");
  }
  if (o.input_files.empty()) return InvalidArgument("no input files to train SentencePiece on");
  if (o.output_model_path.empty()) return InvalidArgument("no output model path");
  for (const auto& f : o.input_files) {
    if (f.find(',') != std::string::npos) {
      return InvalidArgument("file " + f + ": SentencePiece can't train on a path with a comma");
    }
  }
  std::vector<std::string> argv = {HelperPath(),
                                   "train",
                                   "--output=" + o.output_model_path,
                                   "--vocab_size=" + std::to_string(o.vocab_size),
                                   "--model_type=" + o.model_type,
                                   "--character_coverage=" + std::to_string(o.character_coverage),
                                   "--input_sentence_size=" + std::to_string(o.input_sentence_size),
                                   "--num_threads=" + std::to_string(o.num_threads),
                                   "--seed=" + std::to_string(o.seed)};
  argv.insert(argv.end(), o.input_files.begin(), o.input_files.end());
  CommandOptions co;
  co.timeout = std::chrono::hours(2);
  SF_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, co));
  if (r.exit_code != 0) {
    std::string out = r.output;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return Internal(out.empty() ? "SentencePiece training failed (exit " + std::to_string(r.exit_code) + ")"
                                : out);
  }
  return Status::Ok();
}

Result<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("tokenizer model " + path + ": can't open");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (bytes.str().empty()) return InvalidArgument("tokenizer model " + path + ": empty file");
  std::unique_ptr<SentencePieceModel> m(new SentencePieceModel());
  Status st = m->impl_->Start(std::filesystem::absolute(path).string());
  if (!st.ok()) return st.WithContext("tokenizer model " + path);
  m->serialized_ = bytes.str();
  return m;
}

Result<std::unique_ptr<SentencePieceModel>> SentencePieceModel::FromSerialized(
    std::string_view bytes) {
  if (bytes.empty()) return InvalidArgument("not a SentencePiece model: no bytes");
  std::string tmpl = (std::filesystem::temp_directory_path() / "sf-spm-XXXXXX").string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return Internal(std::string("can't create a temporary file: ") + std::strerror(errno));
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  std::unique_ptr<SentencePieceModel> m(new SentencePieceModel());
  // The helper has read the file once it answers, so it can go right after.
  Status st = ok ? m->impl_->Start(tmpl) : Internal("can't write " + tmpl);
  ::unlink(tmpl.c_str());
  if (!st.ok()) return st;
  m->serialized_.assign(bytes.data(), bytes.size());
  return m;
}

std::vector<int32_t> SentencePieceModel::Encode(std::string_view text) const {
  std::string req = "E ";
  req.append(text.data(), text.size());
  for (size_t i = 2; i < req.size(); ++i) {
    if (req[i] == '\n' || req[i] == '\r') req[i] = ' ';
  }
  req += '\n';
  std::string line = impl_->Ask(req);
  std::vector<int32_t> ids;
  const char* p = line.c_str();
  char* end = nullptr;
  while (*p) {
    long v = std::strtol(p, &end, 10);
    if (end == p) break;
    ids.push_back(static_cast<int32_t>(v));
    p = end;
  }
  return ids;
}

std::string SentencePieceModel::Decode(const std::vector<int32_t>& ids) const {
  std::string req = "D";
  for (int32_t id : ids) {
    if (id == kEosId) break;
    if (id == kBosId || id == kPadId) continue;
    if (id < 0 || id >= vocab_size()) id = kUnkId;
    req += ' ';
    req += std::to_string(id);
  }
  if (req.size() == 1) req += ' ';
  req += '\n';
  return impl_->Ask(req);
}

std::string SentencePieceModel::IdToPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "<invalid>";
  return impl_->Ask("P " + std::to_string(id) + "\n");
}

int32_t SentencePieceModel::vocab_size() const { return impl_->vocab; }

}  // namespace sf::data
