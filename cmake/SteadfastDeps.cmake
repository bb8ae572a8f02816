# Every external dependency, found once. deploy/install-deps.sh installs them all on Debian 12.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 CONFIG REQUIRED)  # every program's command line
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(dnnl CONFIG REQUIRED)
find_package(OpenMP REQUIRED)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(Boost 1.74 REQUIRED)
find_package(OpenSSL REQUIRED)  # HMAC and random bytes for task tokens; TLS on every channel
find_package(CURL REQUIRED)  # S3 object storage: HTTP and AWS SigV4 (common/storage/s3_client.h)
find_package(LibXml2 REQUIRED)  # S3 answers are XML
pkg_check_modules(PQXX REQUIRED IMPORTED_TARGET libpqxx)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)  # context archives of user trials
# speech front end (trainer/speech): audio files through libsndfile, the FFT through FFTW3 (float)
pkg_check_modules(SNDFILE REQUIRED IMPORTED_TARGET sndfile)
pkg_check_modules(FFTW3F REQUIRED IMPORTED_TARGET fftw3f)
find_library(SF_SENTENCEPIECE_TRAIN sentencepiece_train REQUIRED)

if(SF_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND SF_NVCC)
    set(CMAKE_CUDA_COMPILER ${SF_NVCC})
  endif()
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  find_library(SF_NCCL nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
               /usr/local/cuda/lib /usr/local/cuda/lib64 REQUIRED)
  # CMake 3.25 has no CUDA20 dialect flags for nvcc; device code is C++17.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()
