#include "trainer/speech/features.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include "trainer/core/splitmix64.h"

namespace sf::speech {
namespace {

// FFTW's planner is not thread-safe: every plan is made here, under the mutex, once per size,
// and kept for the life of the process.
fftwf_plan PlanFor(int n_fft) {
  static std::mutex mutex;
  static std::map<int, fftwf_plan> plans;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans.find(n_fft);
  if (it != plans.end()) return it->second;
  float* in = fftwf_alloc_real(size_t(n_fft));
  fftwf_complex* out = fftwf_alloc_complex(static_cast<size_t>(n_fft) / 2 + 1);
  fftwf_plan plan = fftwf_plan_dft_r2c_1d(n_fft, in, out, FFTW_ESTIMATE);
  fftwf_free(in);
  fftwf_free(out);
  plans.emplace(n_fft, plan);
  return plan;
}

double HzToMel(double f) { return 2595.0 * std::log10(1.0 + f / 700.0); }
double MelToHz(double m) { return 700.0 * (std::pow(10.0, m / 2595.0) - 1.0); }

// Integer uniform on [0, n] from the generator's 64-bit outputs, by rejection (no modulo bias,
// no dependence on the standard library's distributions).
uint64_t UniformUpTo(std::mt19937_64& rng, uint64_t n) {
  if (n == UINT64_MAX) return rng();
  const uint64_t range = n + 1;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return x % range;
}

struct FftwBuffer {
  explicit FftwBuffer(int n_fft)
      : in(fftwf_alloc_real(size_t(n_fft))),
        out(fftwf_alloc_complex(static_cast<size_t>(n_fft) / 2 + 1)) {}
  ~FftwBuffer() {
    fftwf_free(in);
    fftwf_free(out);
  }
  FftwBuffer(const FftwBuffer&) = delete;
  FftwBuffer& operator=(const FftwBuffer&) = delete;
  float* in;
  fftwf_complex* out;
};

}  // namespace

int FrontEndOptions::window_samples() const {
  return int(std::lround(window_ms * sample_rate / 1000.0));
}
int FrontEndOptions::hop_samples() const { return int(std::lround(hop_ms * sample_rate / 1000.0)); }
int FrontEndOptions::fft_size() const {
  if (n_fft > 0) return n_fft;
  int n = 1;
  while (n < window_samples()) n *= 2;
  return n;
}

std::string FrontEndOptions::ToString() const {
  std::ostringstream s;
  s.precision(17);
  s << "sample_rate=" << sample_rate << " window_ms=" << window_ms << " hop_ms=" << hop_ms
    << " n_fft=" << fft_size() << " mels=" << mels << " f_min=" << f_min
    << " f_max=" << (f_max > 0 ? f_max : sample_rate / 2.0) << " log_floor=" << double(log_floor);
  return s.str();
}

Status ValidateFrontEndOptions(const FrontEndOptions& o) {
  auto bad = [](const std::string& field, const std::string& why) {
    return InvalidArgument("front end: " + field + ": " + why);
  };
  if (o.sample_rate <= 0) return bad("sample_rate", std::to_string(o.sample_rate) + " must be > 0");
  if (!std::isfinite(o.window_ms) || o.window_samples() < 2) {
    return bad("window_ms", std::to_string(o.window_ms) + " gives fewer than 2 samples");
  }
  if (!std::isfinite(o.hop_ms) || o.hop_samples() < 1) {
    return bad("hop_ms", std::to_string(o.hop_ms) + " gives less than 1 sample");
  }
  if (o.n_fft < 0 || (o.n_fft > 0 && o.n_fft < o.window_samples())) {
    return bad("n_fft", std::to_string(o.n_fft) + " is shorter than the window (" +
                            std::to_string(o.window_samples()) + " samples)");
  }
  if (o.fft_size() > (1 << 20)) return bad("n_fft", std::to_string(o.fft_size()) + " is too large");
  if (o.mels < 1) return bad("mels", std::to_string(o.mels) + " must be >= 1");
  const double nyquist = o.sample_rate / 2.0;
  const double f_max = o.f_max > 0 ? o.f_max : nyquist;
  if (!std::isfinite(o.f_min) || o.f_min < 0)
    return bad("f_min", std::to_string(o.f_min) + " must be >= 0");
  if (!std::isfinite(o.f_max) || o.f_max < 0 || f_max > nyquist) {
    return bad("f_max", std::to_string(o.f_max) + " is above sample_rate / 2 (" +
                            std::to_string(nyquist) + ")");
  }
  if (o.f_min >= f_max) {
    return bad("f_min",
               std::to_string(o.f_min) + " is not below f_max (" + std::to_string(f_max) + ")");
  }
  if (!std::isfinite(o.log_floor) || o.log_floor <= 0) {
    return bad("log_floor", std::to_string(o.log_floor) + " must be > 0");
  }
  return Status::Ok();
}

int64_t NumFrames(int64_t samples, const FrontEndOptions& options) {
  const int64_t win = options.window_samples(), hop = options.hop_samples();
  if (samples < win || hop < 1) return 0;
  return 1 + (samples - win) / hop;
}

Result<std::unique_ptr<LogMelFrontEnd>> LogMelFrontEnd::Create(const FrontEndOptions& options) {
  SF_RETURN_IF_ERROR(ValidateFrontEndOptions(options));
  std::unique_ptr<LogMelFrontEnd> fe(new LogMelFrontEnd(options));
  fe->win_ = options.window_samples();
  fe->hop_ = options.hop_samples();
  fe->n_fft_ = options.fft_size();
  fe->bins_ = fe->n_fft_ / 2 + 1;
  const double pi = 3.14159265358979323846;
  fe->window_.resize(size_t(fe->win_));
  for (int i = 0; i < fe->win_; ++i)
    fe->window_[size_t(i)] = float(0.5 - 0.5 * std::cos(2 * pi * i / fe->win_));

  const double f_max = options.f_max > 0 ? options.f_max : options.sample_rate / 2.0;
  const double m_min = HzToMel(options.f_min), m_max = HzToMel(f_max);
  std::vector<double> f_pts(size_t(options.mels) + 2);
  for (size_t j = 0; j < f_pts.size(); ++j) {
    f_pts[j] = MelToHz(m_min + (m_max - m_min) * double(j) / double(options.mels + 1));
  }
  fe->first_bin_.resize(size_t(options.mels));
  fe->weights_.resize(size_t(options.mels));
  for (int j = 0; j < options.mels; ++j) {
    const double lo = f_pts[size_t(j)], mid = f_pts[size_t(j) + 1], hi = f_pts[size_t(j) + 2];
    int first = -1;
    std::vector<float> w;
    for (int k = 0; k < fe->bins_; ++k) {
      const double f = double(k) * options.sample_rate / fe->n_fft_;
      const double v = std::max(0.0, std::min((f - lo) / (mid - lo), (hi - f) / (hi - mid)));
      if (v > 0) {
        if (first < 0) first = k;
        w.resize(size_t(k - first) + 1, 0.0f);
        w[size_t(k - first)] = float(v);
      }
    }
    fe->first_bin_[size_t(j)] = first < 0 ? 0 : first;
    fe->weights_[size_t(j)] = std::move(w);
  }
  fe->plan_ = PlanFor(fe->n_fft_);
  return fe;
}

void LogMelFrontEnd::Compute(const float* samples, int64_t n, float* out) const {
  const int64_t frames = NumFrames(n);
  if (frames == 0) return;
  FftwBuffer buffer(n_fft_);
  std::vector<float> power(static_cast<size_t>(bins_));
  std::fill(buffer.in, buffer.in + n_fft_, 0.0f);
  const int mels = options_.mels;
  const float floor = options_.log_floor;
  for (int64_t t = 0; t < frames; ++t) {
    const float* x = samples + t * hop_;
    for (int i = 0; i < win_; ++i) buffer.in[i] = x[i] * window_[size_t(i)];
    fftwf_execute_dft_r2c(static_cast<fftwf_plan>(plan_), buffer.in, buffer.out);
    for (int k = 0; k < bins_; ++k) {
      const float re = buffer.out[k][0], im = buffer.out[k][1];
      power[size_t(k)] = re * re + im * im;
    }
    float* row = out + t * mels;
    for (int j = 0; j < mels; ++j) {
      const std::vector<float>& w = weights_[size_t(j)];
      const float* p = power.data() + first_bin_[size_t(j)];
      float e = 0;
      for (size_t k = 0; k < w.size(); ++k) e += w[k] * p[k];
      row[j] = std::log(e + floor);
    }
  }
}

std::vector<float> LogMelFrontEnd::Compute(const std::vector<float>& samples) const {
  std::vector<float> out(size_t(NumFrames(int64_t(samples.size())) * options_.mels));
  Compute(samples.data(), int64_t(samples.size()), out.data());
  return out;
}

std::vector<float> LogMelFrontEnd::DenseFilterbank() const {
  std::vector<float> dense(size_t(options_.mels) * size_t(bins_), 0.0f);
  for (int j = 0; j < options_.mels; ++j) {
    const auto& w = weights_[size_t(j)];
    for (size_t k = 0; k < w.size(); ++k)
      dense[size_t(j) * size_t(bins_) + size_t(first_bin_[size_t(j)]) + k] = w[k];
  }
  return dense;
}

void UtteranceCmvn(float* x, int64_t frames, int64_t mels) {
  if (frames <= 0 || mels <= 0) return;
  std::vector<double> mean(size_t(mels), 0.0), var(size_t(mels), 0.0);
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t j = 0; j < mels; ++j) mean[size_t(j)] += x[t * mels + j];
  }
  for (auto& m : mean) m /= double(frames);
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t j = 0; j < mels; ++j) {
      const double d = x[t * mels + j] - mean[size_t(j)];
      var[size_t(j)] += d * d;
    }
  }
  std::vector<double> inv_std(static_cast<size_t>(mels));
  for (int64_t j = 0; j < mels; ++j) {
    inv_std[size_t(j)] = 1.0 / std::sqrt(std::max(var[size_t(j)] / double(frames), 1e-10));
  }
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t j = 0; j < mels; ++j) {
      float& v = x[t * mels + j];
      v = float((v - mean[size_t(j)]) * inv_std[size_t(j)]);
    }
  }
}

Status ValidateSpecAugmentOptions(const SpecAugmentOptions& o) {
  auto bad = [](const std::string& field, const std::string& value, const std::string& why) {
    return InvalidArgument("spec_augment: " + field + ": " + value + " " + why);
  };
  if (o.freq_masks < 0) return bad("freq_masks", std::to_string(o.freq_masks), "must be >= 0");
  if (o.freq_width < 0) return bad("freq_width", std::to_string(o.freq_width), "must be >= 0");
  if (o.time_masks < 0) return bad("time_masks", std::to_string(o.time_masks), "must be >= 0");
  if (o.time_width < 0) return bad("time_width", std::to_string(o.time_width), "must be >= 0");
  if (!(o.time_ratio >= 0 && o.time_ratio <= 1)) {
    return bad("time_ratio", std::to_string(o.time_ratio), "must be in [0, 1]");
  }
  return Status::Ok();
}

void SpecAugment(float* x, int64_t frames, int64_t mels, const SpecAugmentOptions& o,
                 uint64_t seed) {
  if (frames <= 0 || mels <= 0) return;
  std::mt19937_64 rng(seed);
  for (int m = 0; m < o.freq_masks; ++m) {
    const int64_t f =
        int64_t(UniformUpTo(rng, uint64_t(std::min<int64_t>(std::max(o.freq_width, 0), mels))));
    const int64_t f0 = int64_t(UniformUpTo(rng, uint64_t(mels - f)));
    for (int64_t t = 0; t < frames; ++t) std::fill(x + t * mels + f0, x + t * mels + f0 + f, 0.0f);
  }
  const int64_t max_t = std::min<int64_t>(std::max(o.time_width, 0),
                                          int64_t(std::floor(o.time_ratio * double(frames))));
  for (int m = 0; m < o.time_masks; ++m) {
    const int64_t t = int64_t(UniformUpTo(rng, uint64_t(std::max<int64_t>(max_t, 0))));
    const int64_t t0 = int64_t(UniformUpTo(rng, uint64_t(frames - t)));
    std::fill(x + t0 * mels, x + (t0 + t) * mels, 0.0f);
  }
}

uint64_t SpecAugmentSeed(uint64_t seed, int64_t epoch, int64_t utterance) {
  SplitMix64 mix{seed ^ 0x5bd1e9955bd1e995ULL};
  uint64_t a = mix.Next();
  SplitMix64 mix2{a ^ (uint64_t(epoch) * 0xd1b54a32d192ed03ULL)};
  uint64_t b = mix2.Next();
  SplitMix64 mix3{b ^ (uint64_t(utterance) * 0x9e3779b97f4a7c15ULL)};
  return mix3.Next();
}

}  // namespace sf::speech
