// The speech front end: log-mel filterbank features, utterance-level mean and variance
// normalisation (CMVN) and SpecAugment.
//
// Log-mel features (LogMelFrontEnd::Compute), exactly:
//   win = round(window_ms · sample_rate / 1000) samples, hop = round(hop_ms · sample_rate / 1000),
//   N = n_fft (0: the smallest power of two ≥ win; given, it must be ≥ win).
//   Frames without centring or padding (Kaldi's snip_edges): frame t covers the samples
//   [t·hop, t·hop + win); an utterance of n samples has 1 + floor((n − win) / hop) frames when
//   n ≥ win and none otherwise (the caller reports that as an error).
//   Each frame is multiplied by the periodic Hann window w[i] = 0.5 − 0.5·cos(2πi / win),
//   i in [0, win) (torch.hann_window(win), periodic=True), zero-padded to N samples, and
//   transformed by the N-point real DFT X_k = Σ_n x[n]·e^(−2πj·nk/N), k = 0..N/2; no pre-emphasis,
//   no dither, no DC removal.
//   Power spectrum P_k = |X_k|² (not divided by N).
//   Mel filterbank (torchaudio.functional.melscale_fbanks(N/2 + 1, f_min, f_max, mels,
//   sample_rate, norm=None, mel_scale="htk")): mel(f) = 2595·log10(1 + f/700);
//   mels + 2 points m_0..m_{mels+1} equally spaced in mel from mel(f_min) to mel(f_max)
//   (f_max 0: sample_rate/2), f_j = mel⁻¹(m_j) = 700·(10^(m_j/2595) − 1); bin k's frequency
//   is k·sample_rate/N; filter j (0-based) is the triangle
//     H_j(f) = max(0, min((f − f_j) / (f_{j+1} − f_j), (f_{j+2} − f) / (f_{j+2} − f_{j+1})))
//   (peak 1 at f_{j+1}, no area normalisation), and E_j = Σ_k H_j(k·sample_rate/N)·P_k.
//   Output log(E_j + log_floor) (natural log), as a [frames, mels] row-major float array.
// The FFT is FFTW3's single-precision real-to-complex transform (fftwf); the filterbank and
// window are computed in double and applied in float. On one machine results are
// deterministic (FFTW_ESTIMATE plans: no timing-dependent algorithm choice; aligned buffers) and
// independent of threads; another CPU may pick other FFTW codelets (last-bit differences).
//
// Thread safety: a LogMelFrontEnd is immutable after Create(); Compute() may run concurrently
// from any number of threads (each call has its own buffers and runs the shared plan through
// fftwf_execute_dft_r2c, which FFTW documents as thread-safe). Plans are made once per FFT
// size per process, under a mutex (FFTW's planner is not thread-safe), and live until exit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace sf::speech {

struct FrontEndOptions {
  int sample_rate = 16000;  // Hz; audio at another rate is an error (audio.h)
  double window_ms = 25, hop_ms = 10;
  int n_fft = 0;  // 0: the next power of two ≥ the window (512 at 16 kHz, 25 ms)
  int mels = 80;
  double f_min = 0, f_max = 0;  // Hz; f_max 0: sample_rate / 2
  float log_floor = 1e-6f;      // log(E + log_floor)

  // Window, hop and FFT sizes in samples, resolved as above.
  int window_samples() const;
  int hop_samples() const;
  int fft_size() const;
  // A canonical one-line description of every field ("sample_rate=16000 window_ms=25 ..."),
  // for cache keys and logs.
  std::string ToString() const;
};

// kInvalidArgument naming the field: sample_rate ≤ 0, a window shorter than 2 samples, a hop
// under 1 sample, n_fft < window, mels < 1, f_min < 0, f_max > sample_rate/2, f_min ≥ f_max,
// log_floor ≤ 0 or not finite.
Status ValidateFrontEndOptions(const FrontEndOptions& options);

// Frames of an utterance of `samples` samples (0 when shorter than one window).
int64_t NumFrames(int64_t samples, const FrontEndOptions& options);

class LogMelFrontEnd {
 public:
  static Result<std::unique_ptr<LogMelFrontEnd>> Create(const FrontEndOptions& options);
  LogMelFrontEnd(const LogMelFrontEnd&) = delete;
  LogMelFrontEnd& operator=(const LogMelFrontEnd&) = delete;

  const FrontEndOptions& options() const { return options_; }
  int64_t NumFrames(int64_t samples) const { return speech::NumFrames(samples, options_); }

  // Writes NumFrames(n) × mels features of samples[0, n) to `out` (row-major [frames, mels]).
  void Compute(const float* samples, int64_t n, float* out) const;
  std::vector<float> Compute(const std::vector<float>& samples) const;

  // The filterbank as a dense [mels, N/2 + 1] matrix (for tests).
  std::vector<float> DenseFilterbank() const;

 private:
  explicit LogMelFrontEnd(const FrontEndOptions& options) : options_(options) {}
  FrontEndOptions options_;
  int win_ = 0, hop_ = 0, n_fft_ = 0, bins_ = 0;
  std::vector<float> window_;
  // Filter j is weights_[j] over bins [first_bin_[j], first_bin_[j] + weights_[j].size()).
  std::vector<int> first_bin_;
  std::vector<std::vector<float>> weights_;
  void* plan_ = nullptr;  // fftwf_plan (owned by the process-wide plan cache)
};

// Utterance-level CMVN (fairseq's UtteranceCMVN): for each mel bin j over the utterance's frames,
//   mean_j = (1/T) Σ_t x_tj,  var_j = (1/T) Σ_t (x_tj − mean_j)² (population variance),
//   x_tj ← (x_tj − mean_j) / sqrt(max(var_j, 1e-10)).
// Accumulated in double. In place on [frames, mels] row-major; nothing happens when frames = 0.
void UtteranceCmvn(float* features, int64_t frames, int64_t mels);

// SpecAugment (Park et al. 2019, "SpecAugment: A Simple Data Augmentation Method for ASR")
// without time warping, as fairseq's SpecAugmentTransform. Defaults: LibriSpeech basic (LB).
struct SpecAugmentOptions {
  int freq_masks = 2;       // m_F
  int freq_width = 27;      // F: each frequency mask is f ~ U{0..F} bins wide
  int time_masks = 2;       // m_T
  int time_width = 100;     // T: each time mask is t ~ U{0..min(T, floor(p·frames))} frames
  double time_ratio = 1.0;  // p
};

// kInvalidArgument naming the field for negative counts or widths, or time_ratio outside [0, 1].
Status ValidateSpecAugmentOptions(const SpecAugmentOptions& options);

// Masks, in place, a [frames, mels] row-major utterance that has already been normalised
// (UtteranceCmvn), so the masked value 0 is the utterance's mean. Draws, in this order, from
// std::mt19937_64(seed) (whose sequence the C++ standard fixes), with U{a..b} an integer uniform
// on [a, b] by rejection sampling of its 64-bit outputs (the same on every standard library):
//   for each of freq_masks:  f = U{0..min(F, mels)},  f0 = U{0..mels − f};  x[:, f0, f0 + f) = 0
//   for each of time_masks:  t = U{0..min(T, floor(p·frames))},  t0 = U{0..frames − t};
//                            x[t0, t0 + t), :] = 0
// Masks may overlap; a width drawn as 0 masks nothing. Same seed, same masks.
void SpecAugment(float* features, int64_t frames, int64_t mels, const SpecAugmentOptions& options,
                 uint64_t seed);

// A seed for one utterance's masks in one epoch, mixed from the run's seed (splitmix64), so the
// masks do not depend on batching, ranks or threads, and a resumed run draws the same ones.
uint64_t SpecAugmentSeed(uint64_t seed, int64_t epoch, int64_t utterance);

}  // namespace sf::speech
