#include "trainer/speech/audio.h"

#include <sndfile.h>
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>

namespace sf::speech {
namespace {

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};

}  // namespace

Result<std::vector<float>> ReadAudio(const std::string& path, int sample_rate) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return NotFound(path + ": audio file does not exist");
    return InvalidArgument(path + ": can't read audio: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + ": can't read audio: not a regular file");

  SF_INFO info;
  std::memset(&info, 0, sizeof info);
  std::unique_ptr<SNDFILE, SndfileCloser> file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) {
    return InvalidArgument(path + ": can't read audio: " + sf_strerror(nullptr));
  }
  if (info.samplerate != sample_rate) {
    return InvalidArgument(path + ": " + std::to_string(info.samplerate) +
                           " Hz, the data's sample_rate is " + std::to_string(sample_rate));
  }
  if (info.channels < 1) return InvalidArgument(path + ": can't read audio: no channels");
  const int channels = info.channels;

  // Read in blocks until the end, whatever the header claims (a truncated file ends early).
  std::vector<float> mono;
  if (info.frames > 0 && info.frames < (int64_t(1) << 34)) mono.reserve(size_t(info.frames));
  constexpr sf_count_t kBlock = 1 << 14;
  std::vector<float> block(size_t(kBlock) * size_t(channels));
  while (true) {
    sf_count_t got = sf_readf_float(file.get(), block.data(), kBlock);
    if (got <= 0) break;
    for (sf_count_t i = 0; i < got; ++i) {
      const float* frame = block.data() + size_t(i) * size_t(channels);
      float sum = 0;
      for (int c = 0; c < channels; ++c) sum += frame[c];
      mono.push_back(channels == 1 ? sum : sum / float(channels));
    }
    if (got < kBlock) break;
  }
  if (int err = sf_error(file.get()); err != SF_ERR_NO_ERROR) {
    return InvalidArgument(path + ": can't read audio: " + sf_error_number(err));
  }
  if (mono.empty()) return InvalidArgument(path + ": no samples (0 frames)");
  for (size_t i = 0; i < mono.size(); ++i) {
    if (!std::isfinite(mono[i])) {
      return InvalidArgument(path + ": sample " + std::to_string(i) + " is not a finite number");
    }
  }
  return mono;
}

}  // namespace sf::speech
