// Runs a test scope single-threaded (OpenMP), restoring the previous thread count after: on a
// shared 2-core host an OpenMP team of 2 spends most of a tiny model's step waiting at barriers.
#pragma once

#include <omp.h>

namespace sf {

class SingleThread {
 public:
  SingleThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThread() { omp_set_num_threads(saved_); }
  SingleThread(const SingleThread&) = delete;
  SingleThread& operator=(const SingleThread&) = delete;

 private:
  int saved_;
};

}  // namespace sf
