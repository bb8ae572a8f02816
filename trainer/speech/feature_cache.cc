#include "trainer/speech/feature_cache.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "common/log.h"
#include "trainer/data/sha256.h"
#include "trainer/speech/audio.h"

namespace sf::speech {
namespace {

static_assert(std::endian::native == std::endian::little, "the cache file is little-endian");

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'S', 'F', 'L', 'O', 'G', 'M', 'E', 'L'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderSize = 64;
constexpr const char* kKeyVersion = "steadfast speech log-mel cache v1";

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t mels;
  int64_t utterances;
  int64_t total_frames;
  uint64_t checksum;
  uint8_t reserved[24];
};
static_assert(sizeof(Header) == kHeaderSize);

// FNV-1a over 32-bit words.
struct Checksum {
  uint64_t h = 0xcbf29ce484222325ULL;
  void Update(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
      uint32_t w;
      std::memcpy(&w, p + i, 4);
      h = (h ^ w) * 0x100000001b3ULL;
    }
  }
};

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Where(const std::string& manifest, const Utterance& u) {
  return manifest + ":" + std::to_string(u.line) + ": utterance " + u.id;
}

Result<std::string> CacheKey(const std::string& manifest, const std::vector<Utterance>& utterances,
                             const FrontEndOptions& options) {
  data::Sha256 h;
  h.UpdateField(kKeyVersion);
  SF_RETURN_IF_ERROR(data::HashFileInto(manifest, h));
  h.UpdateField(options.ToString());
  for (const Utterance& u : utterances) {
    struct stat st;
    if (::stat(u.audio.c_str(), &st) != 0) {
      // The audio error proper is reported when the features are computed; a missing file
      // still gets a distinct key.
      h.UpdateField("missing");
      continue;
    }
    h.UpdateField(std::to_string(int64_t(st.st_size)) + " " +
                  std::to_string(int64_t(st.st_mtim.tv_sec)) + "." +
                  std::to_string(int64_t(st.st_mtim.tv_nsec)));
  }
  return h.HexDigest();
}

Status WriteAll(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Internal(path + ": write failed: " + std::strerror(errno));
    p += n;
    bytes -= size_t(n);
  }
  return Status::Ok();
}

Status PwriteAll(int fd, const void* data, size_t bytes, off_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pwrite(fd, p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Internal(path + ": write failed: " + std::strerror(errno));
    p += n;
    bytes -= size_t(n);
    offset += n;
  }
  return Status::Ok();
}

// Computes every utterance's features into `tmp` (see the layout in the header).
Status ComputeInto(const std::string& manifest, const std::vector<Utterance>& utterances,
                   const LogMelFrontEnd& front_end, int threads, const std::string& tmp) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal(tmp + ": can't create: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  const int64_t n = int64_t(utterances.size());
  const int64_t mels = front_end.options().mels;
  const int sample_rate = front_end.options().sample_rate;
  std::vector<int64_t> frames(size_t(n), 0);
  Header header{};
  SF_RETURN_IF_ERROR(WriteAll(fd, &header, sizeof header, tmp));
  SF_RETURN_IF_ERROR(WriteAll(fd, frames.data(), frames.size() * sizeof(int64_t), tmp));

  if (threads <= 0) threads = omp_get_max_threads();
  const int64_t chunk = std::max<int64_t>(64, int64_t(threads) * 16);
  Checksum feature_sum;  // over the features in order; the frame counts are added at the end
  int64_t total_frames = 0;
  int64_t duration_mismatches = 0;
  std::string first_mismatch;
  auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    std::vector<std::vector<float>> out(size_t(end - begin));
    std::vector<Status> errors(size_t(end - begin));
    std::vector<int64_t> samples(size_t(end - begin), 0);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t i = begin; i < end; ++i) {
      const Utterance& u = utterances[size_t(i)];
      Result<std::vector<float>> audio = ReadAudio(u.audio, sample_rate);
      if (!audio.ok()) {
        errors[size_t(i - begin)] = audio.status();
        continue;
      }
      const int64_t count = int64_t(audio->size());
      samples[size_t(i - begin)] = count;
      const int64_t t = front_end.NumFrames(count);
      if (t == 0) {
        const FrontEndOptions& o = front_end.options();
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.4g", double(count) / sample_rate);
        errors[size_t(i - begin)] = InvalidArgument(
            u.audio + ": " + std::to_string(count) + " samples (" + seconds +
            " s) is shorter than one window (" + std::to_string(o.window_samples()) + " samples)");
        continue;
      }
      out[size_t(i - begin)].resize(size_t(t * mels));
      front_end.Compute(audio->data(), count, out[size_t(i - begin)].data());
    }
    for (int64_t i = begin; i < end; ++i) {
      const Status& e = errors[size_t(i - begin)];
      if (!e.ok())
        return Status(e.code(), Where(manifest, utterances[size_t(i)]) + ": " + e.message());
      const std::vector<float>& f = out[size_t(i - begin)];
      frames[size_t(i)] = int64_t(f.size()) / mels;
      total_frames += frames[size_t(i)];
      feature_sum.Update(f.data(), f.size() * sizeof(float));
      SF_RETURN_IF_ERROR(WriteAll(fd, f.data(), f.size() * sizeof(float), tmp));
      const Utterance& u = utterances[size_t(i)];
      const double actual = double(samples[size_t(i - begin)]) / sample_rate;
      if (std::fabs(actual - u.duration) > 0.1 + 0.1 * u.duration) {
        if (duration_mismatches++ == 0) {
          first_mismatch = manifest + ":" + std::to_string(u.line) + " (duration " +
                           std::to_string(u.duration) + " s, audio " + std::to_string(actual) +
                           " s)";
        }
      }
    }
    if (Since(last_report) >= 10 || end == n) {
      last_report = std::chrono::steady_clock::now();
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f", double(end) / std::max(Since(start), 1e-9));
      log::Info("speech", {{"event", "features_progress"},
                           {"manifest", manifest},
                           {"done", std::to_string(end)},
                           {"of", std::to_string(n)},
                           {"utterances_per_s", rate}});
    }
  }
  if (duration_mismatches > 0) {
    log::Warn("speech", {{"event", "duration_mismatch"},
                         {"manifest", manifest},
                         {"utterances", std::to_string(duration_mismatches)},
                         {"first", first_mismatch}});
  }

  // The checksum runs over the features (streamed above), then the frame counts.
  feature_sum.Update(frames.data(), frames.size() * sizeof(int64_t));
  SF_RETURN_IF_ERROR(
      PwriteAll(fd, frames.data(), frames.size() * sizeof(int64_t), off_t(kHeaderSize), tmp));
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kVersion;
  header.mels = uint32_t(mels);
  header.utterances = n;
  header.total_frames = total_frames;
  header.checksum = feature_sum.h;
  SF_RETURN_IF_ERROR(PwriteAll(fd, &header, sizeof header, 0, tmp));
  if (::fsync(fd) != 0) return Internal(tmp + ": fsync failed: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

SpeechFeatures::~SpeechFeatures() {
  if (base_) ::munmap(base_, mapped_size_);
}

Status SpeechFeatures::Map() {
  if (base_) {
    ::munmap(base_, mapped_size_);
    base_ = nullptr;
  }
  const std::string& path = cache_file_;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return DataLoss(path + ": can't open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return DataLoss(path + ": can't stat: " + std::strerror(errno));
  }
  const size_t size = size_t(st.st_size);
  if (size < kHeaderSize) {
    ::close(fd);
    return DataLoss(path + ": truncated (" + std::to_string(size) +
                    " bytes, shorter than the header)");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return DataLoss(path + ": can't map: " + std::strerror(errno));
  auto fail = [&](const std::string& why) {
    ::munmap(base, size);
    return DataLoss(path + ": " + why);
  };
  const auto* bytes = static_cast<const unsigned char*>(base);
  Header h;
  std::memcpy(&h, bytes, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    return fail("not a speech feature cache (bad magic)");
  if (h.version != kVersion) {
    return fail("format version " + std::to_string(h.version) + ", expected " +
                std::to_string(kVersion));
  }
  if (int64_t(h.mels) != front_end_.mels) {
    return fail(std::to_string(h.mels) + " mels, the front end has " +
                std::to_string(front_end_.mels));
  }
  const int64_t n = int64_t(utterances_.size());
  if (h.utterances != n) {
    return fail(std::to_string(h.utterances) + " utterances, the manifest has " +
                std::to_string(n));
  }
  if (h.total_frames < 0 || h.total_frames > int64_t(size))
    return fail("corrupt header (frame count)");
  const size_t expected = kHeaderSize + size_t(n) * sizeof(int64_t) +
                          size_t(h.total_frames) * size_t(h.mels) * sizeof(float);
  if (size != expected) {
    return fail(std::string(size < expected ? "truncated" : "too long") + " (" +
                std::to_string(size) + " bytes, expected " + std::to_string(expected) + ")");
  }
  const auto* frames = reinterpret_cast<const int64_t*>(bytes + kHeaderSize);
  const auto* features =
      reinterpret_cast<const float*>(bytes + kHeaderSize + size_t(n) * sizeof(int64_t));
  std::vector<int64_t> offsets(static_cast<size_t>(n));
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (frames[i] < 1 || frames[i] > h.total_frames - total) {
      return fail("corrupt frame count " + std::to_string(frames[i]) + " of utterance " +
                  std::to_string(i));
    }
    offsets[size_t(i)] = total;
    total += frames[i];
  }
  if (total != h.total_frames) return fail("frame counts do not add up to the header's total");
  Checksum sum;
  sum.Update(features, size_t(h.total_frames) * size_t(h.mels) * sizeof(float));
  sum.Update(frames, size_t(n) * sizeof(int64_t));
  if (sum.h != h.checksum) return fail("checksum mismatch (the file is corrupt)");

  base_ = base;
  mapped_size_ = size;
  mels_ = h.mels;
  total_frames_ = h.total_frames;
  frames_ = frames;
  features_ = features;
  offsets_ = std::move(offsets);
  return Status::Ok();
}

Result<std::unique_ptr<SpeechFeatures>> SpeechFeatures::Open(const std::string& manifest_path,
                                                             const FrontEndOptions& front_end,
                                                             const FeatureCacheOptions& cache) {
  const auto start = std::chrono::steady_clock::now();
  SF_RETURN_IF_ERROR(ValidateFrontEndOptions(front_end));
  if (cache.cache_dir.empty()) return InvalidArgument("speech features: no cache directory given");
  std::unique_ptr<SpeechFeatures> self(new SpeechFeatures());
  self->manifest_ = manifest_path;
  self->front_end_ = front_end;
  SF_ASSIGN_OR_RETURN(self->utterances_, ReadManifest(manifest_path));
  SF_ASSIGN_OR_RETURN(std::string key, CacheKey(manifest_path, self->utterances_, front_end));

  std::error_code ec;
  fs::create_directories(cache.cache_dir, ec);
  if (ec)
    return InvalidArgument("cache directory " + cache.cache_dir +
                           ": can't create: " + ec.message());
  self->cache_file_ = (fs::path(cache.cache_dir) / ("speech-features-" + key + ".bin")).string();

  if (fs::exists(self->cache_file_, ec)) {
    Status mapped = self->Map();
    if (mapped.ok()) {
      self->from_cache_ = true;
      self->seconds_ = Since(start);
      log::Info("speech", {{"event", "features_reused"},
                           {"manifest", manifest_path},
                           {"cache", self->cache_file_},
                           {"utterances", std::to_string(self->size())},
                           {"frames", std::to_string(self->total_frames_)}});
      return self;
    }
    self->rejected_cache_ = mapped.message();
    log::Warn(
        "speech",
        {{"event", "cache_rejected"}, {"cache", self->cache_file_}, {"reason", mapped.message()}});
  }

  SF_ASSIGN_OR_RETURN(auto fe, LogMelFrontEnd::Create(front_end));
  log::Info("speech", {{"event", "features_computing"},
                       {"manifest", manifest_path},
                       {"utterances", std::to_string(self->size())},
                       {"cache", self->cache_file_}});
  std::random_device rd;
  const std::string tmp =
      self->cache_file_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  Status computed = ComputeInto(manifest_path, self->utterances_, *fe, cache.threads, tmp);
  if (!computed.ok()) {
    fs::remove(tmp, ec);
    return computed;
  }
  fs::rename(tmp, self->cache_file_, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Internal(self->cache_file_ +
                    ": can't rename the new cache file into place: " + ec.message());
  }
  Status mapped = self->Map();
  if (!mapped.ok())
    return Internal("the cache file just written is unreadable: " + mapped.message());
  self->seconds_ = Since(start);
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f", self->seconds_);
  log::Info("speech", {{"event", "features_computed"},
                       {"manifest", manifest_path},
                       {"cache", self->cache_file_},
                       {"utterances", std::to_string(self->size())},
                       {"frames", std::to_string(self->total_frames_)},
                       {"seconds", seconds}});
  return self;
}

}  // namespace sf::speech
