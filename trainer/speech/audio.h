// Reading audio files into samples, through libsndfile (Debian's libsndfile1).
//
//   SF_ASSIGN_OR_RETURN(std::vector<float> samples, ReadAudio("/data/a.flac", 16000));
//
// Every format libsndfile reads works: WAV (PCM 8/16/24/32-bit, float), FLAC, Ogg Vorbis, AIFF,
// ... The file's sample rate must equal `sample_rate`: nothing is resampled here (resample the
// corpus once, e.g. with sox). A file with several channels is averaged to mono (the mean of the
// channels at each instant). Samples come as float: integer PCM scaled into [-1, 1) (libsndfile's
// normalisation, x / 2^(bits-1)); floating-point files as stored. A non-finite sample is an error.
//
// Errors name the file: kNotFound when it does not exist; kInvalidArgument when libsndfile can't
// open or decode it (its sf_strerror text follows the path: "/d/x.wav: can't read audio:
// Format not recognised."), when its rate differs ("/d/a.wav: 8000 Hz, the data's sample_rate
// is 16000"), when it holds no samples, or when a sample is NaN or infinite. Thread-safe (each
// call opens its own handle).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace sf::speech {

Result<std::vector<float>> ReadAudio(const std::string& path, int sample_rate);

}  // namespace sf::speech
