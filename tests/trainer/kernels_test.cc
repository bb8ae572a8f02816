// Every fast CPU kernel against the plain reference (ReferenceBackend<double> on the same
// inputs), plus the allocator, the Philox generator and the casts.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <random>
#include <utility>
#include <vector>

#include "trainer/core/allocator.h"
#include "trainer/core/cpu_features.h"
#include "trainer/core/philox.h"
#include "trainer/core/tensor.h"
#include "trainer/kernels/cpu/attention_kernels.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/gemm_tn.h"
#include "trainer/kernels/cpu/gemm_onednn.h"
#include "trainer/kernels/cpu/hot_kernels.h"
#include "trainer/kernels/cpu/reference.h"
#include "trainer/optim/optimizer.h"
#include "tests/trainer/guarded_backend.h"
#if defined(SF_TEST_CUDA)
#include "trainer/kernels/cuda/cuda_backend.h"
#endif

namespace sf {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}
std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// max |a - b| / max(max |b|, 1e-30): a normwise relative error.
double RelErr(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / den;
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  Philox4x32 z = Philox(0, 0, 0);
  EXPECT_EQ(z.v[0], 0x6627e8d5u);
  EXPECT_EQ(z.v[1], 0xe169c58du);
  EXPECT_EQ(z.v[2], 0xbc57ac4cu);
  EXPECT_EQ(z.v[3], 0x9b00dbd8u);
  Philox4x32 pi = Philox(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

// Both compiled variants of the batched mask generator give exactly the scalar definition,
// for ranges that start and end mid-block and mid-group, and for block counters past 2^32.
TEST(Philox, DropoutFactorsMatchScalarDefinition) {
  struct Range {
    uint64_t stream;
    int64_t start, n;
  };
  const int64_t high = (int64_t{1} << 35) - 300;  // block index crosses 2^32
  const Range ranges[] = {{7, 0, 1},      {7, 0, 128},   {7, 3, 29},     {7, 121, 300},
                          {9, 5000, 4096}, {9, 77, 1},    {1ull << 40, 1000, 777},
                          {3, high, 600}};
  for (float p : {0.1f, 0.5f, 0.93f, 1.0f}) {
    const uint32_t threshold = DropoutThreshold(p);
    const float keep_scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
    for (const Range& r : ranges) {
      const DropoutKey key{0x1234567890abull, r.stream};
      std::vector<float> want(static_cast<size_t>(r.n));
      for (int64_t i = 0; i < r.n; ++i)
        want[i] = DropoutKept(key, static_cast<uint64_t>(r.start + i), threshold) ? keep_scale : 0;
      std::vector<float> got(static_cast<size_t>(r.n), -1.0f);
      portable::DropoutFactors(key, r.start, r.n, p, got.data());
      EXPECT_EQ(got, want) << "portable p=" << p << " start=" << r.start << " n=" << r.n;
      if (cpu::HasAvx512()) {
        std::fill(got.begin(), got.end(), -1.0f);
        avx512::DropoutFactors(key, r.start, r.n, p, got.data());
        EXPECT_EQ(got, want) << "avx512 p=" << p << " start=" << r.start << " n=" << r.n;
      }
    }
  }
}

TEST(Allocator, ReusesFreedBlocksOfTheSameClass) {
  CachingAllocator a;
  void* p = a.Allocate(1000);
  a.Free(p);
  void* q = a.Allocate(990);  // same 64-byte class
  EXPECT_EQ(p, q);
  EXPECT_EQ(a.stats().system_allocations, 1);
  EXPECT_EQ(a.stats().cache_hits, 1);
  void* r = a.Allocate(100000);
  EXPECT_EQ(a.stats().bytes_in_use,
            static_cast<int64_t>(CachingAllocator::SizeClass(990) + CachingAllocator::SizeClass(100000)));
  a.Free(r);
  a.Free(q);
  EXPECT_GE(a.stats().peak_bytes_in_use, a.stats().bytes_cached);
  a.ReleaseCached();
  EXPECT_EQ(a.stats().bytes_cached, 0);
  // Blocks of 2 MiB and more start on a huge-page boundary (so THP can back them).
  void* big = a.Allocate((size_t{3} << 20) + 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % (size_t{2} << 20), 0u);
  a.Free(big);
  EXPECT_EQ(CachingAllocator::SizeClass(5000) % 64, 0u);
  EXPECT_GE(CachingAllocator::SizeClass(5000), 5000u);
  EXPECT_LE(CachingAllocator::SizeClass(5000), 5000u * 5 / 4);
}

TEST(TensorTest, ResizeKeepsBlockWhenSmaller) {
  Tensor t({4, 8}, DType::kF32);
  void* p = t.raw();
  t.Resize({2, 8}, DType::kF32);
  EXPECT_EQ(t.raw(), p);
  EXPECT_EQ(t.numel(), 16);
  EXPECT_EQ(t.ShapeString(), "[2, 8]");
  Tensor z = Tensor::Zeros({3}, DType::kF64);
  EXPECT_EQ(z.data<double>()[2], 0.0);
}

// Stages host vectors on a backend's device and reads results back; frees everything at the end.
// Every bf16 / f16 value (raw bits) is the fp32 value `want` rounded: within half an ulp of the
// low dtype, plus slack for a last-bit difference in the fp32 value and for f16 subnormals.
void ExpectRoundingOf(const std::vector<uint16_t>& got, DType dt, const std::vector<float>& want,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size());
  const double rel = dt == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
  const double abs = dt == DType::kBF16 ? 1e-37 : 6e-8;
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = dt == DType::kBF16 ? Bf16ToFloat(got[i]) : F16ToFloat(got[i]);
    ASSERT_LE(std::fabs(g - want[i]), std::fabs(want[i]) * rel + abs)
        << what << " " << DTypeName(dt) << " element " << i;
  }
}
constexpr DType kLowDTypes[] = {DType::kBF16, DType::kF16};

class Staging {
 public:
  explicit Staging(Backend<float>& be) : be_(be) {}
  ~Staging() {
    for (void* p : ptrs_) be_.FreeDevice(p);
  }
  template <typename T>
  T* In(const std::vector<T>& host) {
    T* d = Out<T>(host.size());
    be_.CopyToDevice(d, host.data(), host.size() * sizeof(T));
    return d;
  }
  template <typename T>
  T* Out(size_t n) {
    void* p = be_.AllocateDevice(std::max<size_t>(n, 1) * sizeof(T));
    ptrs_.push_back(p);
    return static_cast<T*>(p);
  }
  template <typename T>
  std::vector<T> Get(const T* d, size_t n) {
    std::vector<T> h(n);
    be_.CopyToHost(h.data(), d, n * sizeof(T));
    return h;
  }

 private:
  Backend<float>& be_;
  std::vector<void*> ptrs_;
};

// The same test bodies run on every backend compiled in: "cpu" always; "guarded" (the CPU
// kernels on memory the host may not touch, guarded_backend.h: the device path without a GPU);
// "cuda" when built with SF_CUDA and a GPU is present (skipped otherwise).
class KernelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cpu") {
      backend_ = std::make_unique<CpuBackend>();
    } else if (GetParam() == "guarded") {
      backend_ = std::make_unique<testing::GuardedBackend>();
    } else {
#if defined(SF_TEST_CUDA)
      backend_ = MakeCudaBackend();
      if (!backend_) GTEST_SKIP() << "no usable GPU (cudaGetDeviceCount reports none)";
#else
      GTEST_SKIP() << "built without the CUDA backend (SF_CUDA=OFF)";
#endif
    }
    st_ = std::make_unique<Staging>(*backend_);
  }
  void TearDown() override { st_.reset(); }
  Backend<float>& be() { return *backend_; }
  Staging& st() { return *st_; }

  std::unique_ptr<Backend<float>> backend_;
  std::unique_ptr<Staging> st_;
  ReferenceBackend<double> ref_;
};

TEST_P(KernelTest, CastsRoundToNearestEven) {
  for (const int64_t len : {1037, 1040}) {
    std::vector<float> x = Random(static_cast<size_t>(len), 1, -100, 100);
    SCOPED_TRACE("len=" + std::to_string(len));
    x[0] = 1.0f + 1.0f / 256;  // exactly halfway between two bf16 values: rounds to even (1.0)
    const size_t n = x.size();
    float* dx = st().In(x);
    uint16_t* dy = st().Out<uint16_t>(n);
    uint16_t* dh = st().Out<uint16_t>(n);
    be().Cast(dx, dy, DType::kBF16, static_cast<int64_t>(n));
    be().Cast(dx, dh, DType::kF16, static_cast<int64_t>(n));
    auto y = st().Get(dy, n), h = st().Get(dh, n);
    EXPECT_EQ(Bf16ToFloat(y[0]), 1.0f);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(y[i], FloatToBf16(x[i])) << i;
      ASSERT_EQ(h[i], FloatToF16(x[i])) << i;
      ASSERT_LE(std::fabs(Bf16ToFloat(y[i]) - x[i]), std::fabs(x[i]) / 256);
    }
  }
}

struct GemmCase {
  int64_t batch, m, n, k;
  bool ta, tb;
  float alpha, beta;
};

TEST_P(KernelTest, GemmMatchesReferenceForAllLayouts) {
  const GemmCase cases[] = {{1, 7, 5, 3, false, false, 1, 0},  {1, 33, 17, 65, false, true, 1, 0},
                            {1, 19, 31, 9, true, false, 1, 1}, {3, 5, 7, 11, true, true, 0.5f, 1},
                            {4, 32, 32, 16, false, true, 0.125f, 0}, {2, 9, 64, 13, true, false, 1, 0},
                            // The weight gradients' form (dW (+)= dy^T x): on AVX512_BF16 hosts
                            // without AMX the bf16 case runs the packed vdpbf16ps kernel; odd k,
                            // partial register tiles and more than one block of tokens.
                            {1, 45, 77, 515, true, false, 1, 1}, {1, 57, 100, 1025, true, false, 1, 0}};
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const GemmCase& g : cases) {
      // Stored shapes: A is m x k (or k x m when transposed), B is k x n (or n x k).
      const int64_t lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
      const int64_t sa = g.m * g.k, sb = g.k * g.n, sc = g.m * g.n;
      std::vector<float> a = Random(g.batch * sa, 2), b = Random(g.batch * sb, 3),
                         c = Random(g.batch * sc, 4);
      const void* ap = st().In(a);
      const void* bp = st().In(b);
      std::vector<uint16_t> al(a.size()), bl(b.size());
      const void* ah = a.data();
      const void* bh = b.data();
      if (dt != DType::kF32) {
        for (size_t i = 0; i < a.size(); ++i) al[i] = dt == DType::kBF16 ? FloatToBf16(a[i]) : FloatToF16(a[i]);
        for (size_t i = 0; i < b.size(); ++i) bl[i] = dt == DType::kBF16 ? FloatToBf16(b[i]) : FloatToF16(b[i]);
        ap = st().In(al);
        bp = st().In(bl);
        ah = al.data();
        bh = bl.data();
      }
      float* dc = st().In(c);
      std::vector<double> cref = ToDouble(c);
      ref_.Gemm(g.batch, g.m, g.n, g.k, GemmOperand{ah, dt, g.ta, lda, sa},
                GemmOperand{bh, dt, g.tb, ldb, sb}, cref.data(), g.n, sc, g.alpha, g.beta);
      be().Gemm(g.batch, g.m, g.n, g.k, GemmOperand{ap, dt, g.ta, lda, sa},
                GemmOperand{bp, dt, g.tb, ldb, sb}, dc, g.n, sc, g.alpha, g.beta);
      EXPECT_LT(RelErr(st().Get(dc, c.size()), cref), 2e-6)
          << DTypeName(dt) << " m=" << g.m << " n=" << g.n << " k=" << g.k << " ta=" << g.ta
          << " tb=" << g.tb;
    }
  }
}

// The packed weight-gradient kernels themselves (gemm_tn.h: vdpbf16ps and AMX), on odd shapes
// with row strides wider than the matrices: C = beta*C + A^T B equals the products of the same
// bf16 values summed in double, columns beyond n are untouched, and the result is bit-identical
// for one thread and for the whole team (the order of the sums depends on k only).
using GemmTnKernel = void (*)(int64_t, int64_t, int64_t, const uint16_t*, int64_t, const uint16_t*,
                              int64_t, float*, int64_t, float);
void ExpectGemmTnExact(GemmTnKernel kernel) {
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape sh : {Shape{19, 31, 9}, Shape{45, 77, 515}, Shape{1, 1, 1}, Shape{100, 3, 2049},
                         Shape{14, 32, 2}, Shape{57, 513, 1025}, Shape{600, 40, 64},
                         Shape{200, 333, 1100}}) {
    for (const float beta : {0.0f, 1.0f}) {
      const int64_t lda = sh.m + 3, ldb = sh.n + 5, ldc = sh.n + 1;
      std::vector<float> af = Random(static_cast<size_t>(sh.k * lda), 7),
                         bf = Random(static_cast<size_t>(sh.k * ldb), 8),
                         c0 = Random(static_cast<size_t>(sh.m * ldc), 9);
      std::vector<uint16_t> a(af.size()), b(bf.size());
      for (size_t i = 0; i < a.size(); ++i) a[i] = FloatToBf16(af[i]);
      for (size_t i = 0; i < b.size(); ++i) b[i] = FloatToBf16(bf[i]);
      std::vector<float> c = c0, c1 = c0;
      kernel(sh.m, sh.n, sh.k, a.data(), lda, b.data(), ldb, c.data(), ldc, beta);
      const int team = omp_get_max_threads();
      omp_set_num_threads(1);
      kernel(sh.m, sh.n, sh.k, a.data(), lda, b.data(), ldb, c1.data(), ldc, beta);
      omp_set_num_threads(team);
      const std::string what = "m=" + std::to_string(sh.m) + " n=" + std::to_string(sh.n) +
                               " k=" + std::to_string(sh.k) + " beta=" + std::to_string(beta);
      EXPECT_EQ(c, c1) << what << ": one thread and " << team << " differ";
      double worst = 0;
      for (int64_t i = 0; i < sh.m; ++i) {
        for (int64_t j = 0; j < ldc; ++j) {
          const size_t at = static_cast<size_t>(i * ldc + j);
          if (j >= sh.n) {
            ASSERT_EQ(c[at], c0[at]) << what << ": wrote past n at " << i << "," << j;
            continue;
          }
          double want = beta * c0[at];
          for (int64_t p = 0; p < sh.k; ++p)
            want += static_cast<double>(Bf16ToFloat(a[static_cast<size_t>(p * lda + i)])) *
                    Bf16ToFloat(b[static_cast<size_t>(p * ldb + j)]);
          // fp32 sums of exact products: error grows with k, bounded well below 1e-6 * k * |terms|.
          worst = std::max(worst, std::fabs(c[at] - want) / (1.0 + std::fabs(want)));
        }
      }
      EXPECT_LT(worst, 1e-6 * static_cast<double>(sh.k) + 1e-6) << what;
    }
  }
}

TEST(CpuGemmTn, PackedBf16KernelEqualsTheExactProductsForAnyThreadCount) {
  if (!cpu::HasAvx512Bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  ExpectGemmTnExact(&cpu_internal::avx512bf16::GemmTn);
}

TEST(CpuGemmTn, AmxKernelEqualsTheExactProductsForAnyThreadCount) {
  if (!cpu::HasAmxBf16() || !cpu::EnableAmx()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU";
  ExpectGemmTnExact(&cpu_internal::amx::GemmTn);
}

// The GEMM with its epilogue: act(op(A) op(B) + bias) stored as fp32, bf16 or f16, for fp32 and
// bf16 operands, against the reference composed in double (the products of the rounded
// operands). Low-precision outputs are the fp32 result rounded once.
TEST_P(KernelTest, GemmBiasActMatchesReference) {
  const int64_t m = 37, n = 70, k = 45;
  auto a = Random(m * k, 31), w = Random(n * k, 32), bias = Random(n, 33);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    // A [m, k] plain, B = W^T with W [n, k] (a weight), as a Linear layer's forward runs it.
    std::vector<uint16_t> al(a.size()), wl(w.size());
    std::vector<double> ar(a.size()), wr(w.size());
    for (size_t i = 0; i < a.size(); ++i) {
      al[i] = FloatToBf16(a[i]);
      ar[i] = dt == DType::kF32 ? a[i] : Bf16ToFloat(al[i]);
    }
    for (size_t i = 0; i < w.size(); ++i) {
      wl[i] = FloatToBf16(w[i]);
      wr[i] = dt == DType::kF32 ? w[i] : Bf16ToFloat(wl[i]);
    }
    const void* ap = dt == DType::kF32 ? static_cast<const void*>(st().In(a)) : st().In(al);
    const void* wp = dt == DType::kF32 ? static_cast<const void*>(st().In(w)) : st().In(wl);
    const float* dbias = st().In(bias);
    const auto biasd = ToDouble(bias);
    for (GemmActivation act : {GemmActivation::kNone, GemmActivation::kRelu, GemmActivation::kGelu}) {
      for (bool with_bias : {false, true}) {
        std::vector<double> want(m * n);
        ref_.GemmBiasAct(m, n, k, GemmOperand{ar.data(), DType::kF64, false, k, 0},
                         GemmOperand{wr.data(), DType::kF64, true, k, 0, true},
                         with_bias ? biasd.data() : nullptr, act, want.data(), DType::kF64);
        const std::string what = std::string(DTypeName(dt)) + " act=" +
                                 std::to_string(static_cast<int>(act)) + " bias=" +
                                 std::to_string(with_bias);
        float* c32 = st().Out<float>(m * n);
        be().GemmBiasAct(m, n, k, GemmOperand{ap, dt, false, k, 0}, GemmOperand{wp, dt, true, k, 0, true},
                         with_bias ? dbias : nullptr, act, c32, DType::kF32);
        const auto got = st().Get(c32, m * n);
        EXPECT_LT(RelErr(got, want), 2e-6) << what;
        for (DType out : kLowDTypes) {
          uint16_t* cl = st().Out<uint16_t>(m * n);
          be().GemmBiasAct(m, n, k, GemmOperand{ap, dt, false, k, 0},
                           GemmOperand{wp, dt, true, k, 0, true}, with_bias ? dbias : nullptr,
                           act, cl, out);
          ExpectRoundingOf(st().Get(cl, m * n), out, got, what.c_str());
        }
      }
    }
  }
}

TEST(CpuGemm, PrimitivesAreCachedByShape) {
  CpuBackend cpu;
  std::vector<float> a(64), b(64), c(64);
  for (int i = 0; i < 3; ++i)
    cpu.Gemm(1, 8, 8, 8, GemmOperand{a.data(), DType::kF32, false, 8, 0},
             GemmOperand{b.data(), DType::kF32, false, 8, 0}, c.data(), 8, 0, 1, 0);
  EXPECT_EQ(cpu.gemm_primitives_created(), 1);
}

// Training batches come in many sizes: each new m is a new primitive, but a constant weight is
// packed once, not once per m (which grew a training run's memory by a copy of every weight per
// batch shape), and every m still gets the right product after the weights change.
TEST(CpuGemm, ConstantWeightsArePackedOnceForEveryBatchSize) {
  if (!OneDnnGemm::PrepackEnabled()) GTEST_SKIP() << "SF_GEMM_PREPACK=0";
  CpuBackend cpu;
  const int64_t n = 96, k = 64;
  std::vector<float> w = Random(n * k, 11), a = Random(40 * k, 12);
  GemmOperand wb{w.data(), DType::kF32, true, k, 0};
  wb.constant = true;
  for (int round = 0; round < 2; ++round) {
    for (int64_t m : {1, 7, 16, 33, 40}) {
      std::vector<float> c(m * n);
      cpu.Gemm(1, m, n, k, GemmOperand{a.data(), DType::kF32, false, k, 0}, wb, c.data(), n, 0, 1, 0);
      for (int64_t i = 0; i < m; i += 6) {
        for (int64_t j = 0; j < n; j += 5) {
          double want = 0;
          for (int64_t p = 0; p < k; ++p) want += static_cast<double>(a[i * k + p]) * w[j * k + p];
          ASSERT_NEAR(c[i * n + j], want, 1e-4) << "round " << round << " m " << m;
        }
      }
    }
    for (float& x : w) x *= -0.5f;  // new weights: the packed copy must be refreshed
    cpu.WeightsChanged();
  }
  EXPECT_EQ(cpu.gemm_primitives_created(), 5);
  // One copy per weights layout oneDNN picks: one on the hosts seen so far; allow a second in
  // case an ISA lays weights out differently for a tiny m. Per m it would be 5.
  EXPECT_LE(cpu.gemm_packed_copies(), 2);
  EXPECT_GE(cpu.gemm_packed_copies(), 1);
}

TEST_P(KernelTest, BiasDropoutResidualMatchesReferenceAndKeepsRate) {
  for (const int64_t cols : {129, 136}) {
    const int64_t rows = 37, n = rows * cols;
    SCOPED_TRACE("cols=" + std::to_string(cols));
    for (float p : {0.0f, 0.1f, 0.5f}) {
      DropoutKey key{1234, 77};
      auto x = Random(n, 5), bias = Random(cols, 6), res = Random(n, 7);
      std::vector<double> oref(n);
      auto xd = ToDouble(x), bd = ToDouble(bias), rd = ToDouble(res);
      float* dout_ = st().Out<float>(n);
      be().BiasDropoutResidualForward(st().In(x), st().In(bias), st().In(res), dout_, rows, cols, p, key);
      ref_.BiasDropoutResidualForward(xd.data(), bd.data(), rd.data(), oref.data(), rows, cols, p, key);
      auto out = st().Get(dout_, n);
      EXPECT_LT(RelErr(out, oref), 1e-6);
      int64_t dropped = 0;
      for (int64_t i = 0; i < n; ++i) dropped += out[i] == res[i];
      EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.03) << p;
      auto dout = Random(n, 8);
      std::vector<float> db(cols, 0.5f);
      std::vector<double> dxr(n), dbr(cols, 0.5);
      auto doutd = ToDouble(dout);
      float* ddx = st().Out<float>(n);
      float* ddb = st().In(db);
      be().BiasDropoutResidualBackward(st().In(dout), ddx, ddb, rows, cols, p, key);
      ref_.BiasDropoutResidualBackward(doutd.data(), dxr.data(), dbr.data(), rows, cols, p, key);
      EXPECT_LT(RelErr(st().Get(ddx, n), dxr), 1e-6);
      EXPECT_LT(RelErr(st().Get(ddb, cols), dbr), 1e-5);
    }
  }
}

TEST_P(KernelTest, BiasActivationMatchesReference) {
  for (const int64_t cols : {67, 72}) {
    const int64_t rows = 13, n = rows * cols;
    SCOPED_TRACE("cols=" + std::to_string(cols));
    for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kTanh}) {
      auto x = Random(n, 9, -4, 4), bias = Random(cols, 10);
      auto xd = ToDouble(x), bd = ToDouble(bias);
      std::vector<double> prer(n), outr(n);
      float* dpre = st().Out<float>(n);
      float* dout_ = st().Out<float>(n);
      be().BiasActivationForward(st().In(x), st().In(bias), dpre, dout_, DType::kF32, rows, cols,
                                 act);
      ref_.BiasActivationForward(xd.data(), bd.data(), prer.data(), outr.data(), DType::kF64, rows,
                                 cols, act);
      EXPECT_LT(RelErr(st().Get(dout_, n), outr), 1e-6);
      for (DType dt : kLowDTypes) {  // the output written directly as the next GEMM's operand
        float* pre2 = st().Out<float>(n);
        uint16_t* low = st().Out<uint16_t>(n);
        be().BiasActivationForward(st().In(x), st().In(bias), pre2, low, dt, rows, cols, act);
        EXPECT_EQ(st().Get(pre2, n), st().Get(dpre, n));
        ExpectRoundingOf(st().Get(low, n), dt, st().Get(dout_, n), "activation");
      }
      auto dout = Random(n, 11);
      auto doutd = ToDouble(dout);
      std::vector<double> dprer(n), dbr(cols, 0);
      float* ddpre = st().Out<float>(n);
      float* ddb = st().In(std::vector<float>(cols, 0.0f));
      be().BiasActivationBackward(st().In(dout), dpre, DType::kF32, ddpre, ddb, rows, cols, act);
      ref_.BiasActivationBackward(doutd.data(), prer.data(), DType::kF64, dprer.data(), dbr.data(),
                                  rows, cols, act);
      // GELU's erf is a 1.5e-7 (absolute) approximation on the CPU.
      EXPECT_LT(RelErr(st().Get(ddpre, n), dprer), 5e-6);
      EXPECT_LT(RelErr(st().Get(ddb, cols), dbr), 5e-6);

      // What mixed precision saves instead: pre (or ReLU's output) in bf16 / f16. The result is
      // the reference on the rounded values; for ReLU, the output gives the same as pre.
      const auto pre_host = st().Get(dpre, n), out_host = st().Get(dout_, n);
      for (DType dt : {DType::kBF16, DType::kF16}) {
        for (bool from_out : {false, true}) {
          if (from_out && act != Activation::kRelu) continue;
          const std::vector<float>& saved = from_out ? out_host : pre_host;
          uint16_t* dsaved = st().Out<uint16_t>(n);
          be().Cast(st().In(saved), dsaved, dt, n);
          std::vector<double> rounded(n);
          for (int64_t i = 0; i < n; ++i)
            rounded[i] = dt == DType::kBF16 ? Bf16ToFloat(FloatToBf16(pre_host[i]))
                                            : F16ToFloat(FloatToF16(pre_host[i]));
          std::vector<double> want(n), wantb(cols, 0);
          ref_.BiasActivationBackward(doutd.data(), rounded.data(), DType::kF64, want.data(),
                                      wantb.data(), rows, cols, act);
          float* got = st().Out<float>(n);
          float* gotb = st().In(std::vector<float>(cols, 0.0f));
          be().BiasActivationBackward(st().In(dout), dsaved, dt, got, gotb, rows, cols, act);
          EXPECT_LT(RelErr(st().Get(got, n), want), 5e-6) << DTypeName(dt) << " from_out=" << from_out;
          EXPECT_LT(RelErr(st().Get(gotb, cols), wantb), 5e-6) << DTypeName(dt);
        }
      }
    }
  }
}

TEST_P(KernelTest, LayerNormMatchesReference) {
  for (const int64_t cols : {257, 256, 1024, 1100}) {
    const int64_t rows = 19, n = rows * cols;
    SCOPED_TRACE("cols=" + std::to_string(cols));
    auto x = Random(n, 12, -3, 5), g = Random(cols, 13), b = Random(cols, 14);
    auto xd = ToDouble(x), gd = ToDouble(g), bd = ToDouble(b);
    std::vector<double> yr(n), meanr(rows), rstdr(rows);
    float *dxin = st().In(x), *dg = st().In(g), *dbeta = st().In(b);
    float *dy_out = st().Out<float>(n), *dmean = st().Out<float>(rows), *drstd = st().Out<float>(rows);
    be().LayerNormForward(dxin, dg, dbeta, dy_out, dmean, drstd, rows, cols, 1e-5f);
    ref_.LayerNormForward(xd.data(), gd.data(), bd.data(), yr.data(), meanr.data(), rstdr.data(), rows, cols, 1e-5f);
    EXPECT_LT(RelErr(st().Get(dy_out, n), yr), 2e-6);
    auto dy = Random(n, 15);
    auto dyd = ToDouble(dy);
    float* ddy = st().In(dy);
    for (bool acc : {false, true}) {
      std::vector<double> dxr(n, 0.25), dgr(cols, 0), dbr(cols, 0);
      float* ddx = st().In(std::vector<float>(n, 0.25f));
      float* ddg = st().In(std::vector<float>(cols, 0.0f));
      float* ddb = st().In(std::vector<float>(cols, 0.0f));
      be().LayerNormBackward(ddy, dxin, dg, dmean, drstd, ddx, ddg, ddb, rows, cols, acc);
      ref_.LayerNormBackward(dyd.data(), xd.data(), gd.data(), meanr.data(), rstdr.data(),
                             dxr.data(), dgr.data(), dbr.data(), rows, cols, acc);
      EXPECT_LT(RelErr(st().Get(ddx, n), dxr), 1e-5);
      EXPECT_LT(RelErr(st().Get(ddg, cols), dgr), 1e-5);
      EXPECT_LT(RelErr(st().Get(ddb, cols), dbr), 1e-5);
    }
  }
}

// The fused tail of a residual block: h = residual + dropout(x + bias), y = LN(h) (and y once
// more in bf16 / f16), and its backward (dh through the layer norm; the branch's gradient
// through the dropout mask, in fp32 or the compute dtype; bias, gamma and beta gradients
// accumulated), against the reference composed of the separate ops in double. Odd row length,
// with and without dropout, bias and residual; x null is a plain layer norm of h.
TEST_P(KernelTest, ResidualLayerNormMatchesReference) {
  for (const int64_t cols : {203, 512}) {
    const int64_t rows = 37, n = rows * cols;
    SCOPED_TRACE("cols=" + std::to_string(cols));
    auto x = Random(n, 61, -2, 2), res = Random(n, 62, -3, 3), bias = Random(cols, 63);
    auto g = Random(cols, 64, 0.5f, 1.5f), b = Random(cols, 65), dy = Random(n, 66);
    const auto xd = ToDouble(x), rd = ToDouble(res), biasd = ToDouble(bias), gd = ToDouble(g),
               bd = ToDouble(b), dyd = ToDouble(dy);
    const DropoutKey key{11, 3};
    struct Case {
      bool with_x, with_bias, with_residual;
      float p;
    };
    for (const Case c : {Case{true, true, true, 0.2f}, Case{true, false, true, 0.0f},
                         Case{true, true, false, 0.1f}, Case{false, false, false, 0.0f}}) {
      SCOPED_TRACE("x=" + std::to_string(c.with_x) + " bias=" + std::to_string(c.with_bias) +
                   " residual=" + std::to_string(c.with_residual) + " p=" + std::to_string(c.p));
      // h is the input when x is null: start it from `res` then.
      std::vector<double> hr = c.with_x ? std::vector<double>(n) : rd;
      std::vector<double> yr(n), meanr(rows), rstdr(rows);
      ref_.ResidualLayerNormForward(c.with_x ? xd.data() : nullptr, c.with_bias ? biasd.data() : nullptr,
                                    c.with_residual ? rd.data() : nullptr, c.p, key, hr.data(),
                                    gd.data(), bd.data(), yr.data(), nullptr, DType::kF64,
                                    meanr.data(), rstdr.data(), rows, cols, 1e-5f);
      float* dh = c.with_x ? st().Out<float>(n) : st().In(res);
      float *dyo = st().Out<float>(n), *dmean = st().Out<float>(rows), *drstd = st().Out<float>(rows);
      uint16_t* dlow = st().Out<uint16_t>(n);
      float* dg = st().In(g);
      be().ResidualLayerNormForward(c.with_x ? st().In(x) : nullptr, c.with_bias ? st().In(bias) : nullptr,
                                    c.with_residual ? st().In(res) : nullptr, c.p, key, dh, dg,
                                    st().In(b), dyo, dlow, DType::kBF16, dmean, drstd, rows, cols, 1e-5f);
      const auto h = st().Get(dh, n), y = st().Get(dyo, n);
      EXPECT_LT(RelErr(h, hr), 1e-6) << "h";
      EXPECT_LT(RelErr(y, yr), 2e-6) << "y";
      ExpectRoundingOf(st().Get(dlow, n), DType::kBF16, y, "y in bf16");
      // Backward, the branch's gradient in fp32 and in bf16 / f16 (same values, rounded once).
      std::vector<double> dhr(n), dbranchr(n), dbiasr(cols, 0.5), dgr(cols, 0.25), dbr(cols, -0.5);
      ref_.ResidualLayerNormBackward(dyd.data(), hr.data(), gd.data(), meanr.data(), rstdr.data(),
                                     dhr.data(), dbranchr.data(), DType::kF64, dbiasr.data(),
                                     dgr.data(), dbr.data(), c.p, key, rows, cols);
      float* ddh = st().Out<float>(n);
      float* dbranch = st().Out<float>(n);
      float* ddbias = st().In(std::vector<float>(cols, 0.5f));
      float* ddg = st().In(std::vector<float>(cols, 0.25f));
      float* ddb = st().In(std::vector<float>(cols, -0.5f));
      float* ddy = st().In(dy);
      be().ResidualLayerNormBackward(ddy, dh, dg, dmean, drstd, ddh, dbranch, DType::kF32, ddbias,
                                     ddg, ddb, c.p, key, rows, cols);
      EXPECT_LT(RelErr(st().Get(ddh, n), dhr), 1e-5) << "dh";
      const auto branch = st().Get(dbranch, n);
      EXPECT_LT(RelErr(branch, dbranchr), 1e-5) << "branch gradient";
      EXPECT_LT(RelErr(st().Get(ddbias, cols), dbiasr), 1e-5) << "dbias";
      EXPECT_LT(RelErr(st().Get(ddg, cols), dgr), 1e-5) << "dgamma";
      EXPECT_LT(RelErr(st().Get(ddb, cols), dbr), 1e-5) << "dbeta";
      for (DType low : kLowDTypes) {
        uint16_t* lb = st().Out<uint16_t>(n);
        float* dh2 = st().Out<float>(n);
        float* sink = st().In(std::vector<float>(cols, 0.0f));
        be().ResidualLayerNormBackward(ddy, dh, dg, dmean, drstd, dh2, lb, low, nullptr, sink, sink,
                                       c.p, key, rows, cols);
        ExpectRoundingOf(st().Get(lb, n), low, branch, "branch gradient, low precision");
      }
    }
  }
}

// BiasActivationBackward with its result stored as the next GEMM's operand.
TEST_P(KernelTest, BiasActivationBackwardToLowPrecisionRoundsOnce) {
  for (const int64_t cols : {77, 80}) {
    const int64_t rows = 23, n = rows * cols;
    SCOPED_TRACE("cols=" + std::to_string(cols));
    auto pre = Random(n, 71, -3, 3), dout = Random(n, 72);
    float* dpre_in = st().In(pre);
    float* ddout = st().In(dout);
    for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kTanh}) {
      float* want = st().Out<float>(n);
      float* wantb = st().In(std::vector<float>(cols, 0.0f));
      be().BiasActivationBackward(ddout, dpre_in, DType::kF32, want, wantb, rows, cols, act);
      const auto w = st().Get(want, n);
      for (DType low : kLowDTypes) {
        uint16_t* got = st().Out<uint16_t>(n);
        float* gotb = st().In(std::vector<float>(cols, 0.0f));
        be().BiasActivationBackwardTo(ddout, DType::kF32, dpre_in, DType::kF32, got, low, gotb, rows,
                                      cols, act);
        ExpectRoundingOf(st().Get(got, n), low, w, "activation gradient");
        EXPECT_EQ(st().Get(gotb, cols), st().Get(wantb, cols)) << "bias gradient from unrounded values";
        // From a low-precision dout (the GEMM wrote it so), in place: the reference's products of
        // the rounded inputs, rounded once.
        std::vector<uint16_t> dl(n), sl(n);
        for (int64_t i = 0; i < n; ++i) {
          dl[i] = low == DType::kBF16 ? FloatToBf16(dout[i]) : FloatToF16(dout[i]);
          sl[i] = low == DType::kBF16 ? FloatToBf16(pre[i]) : FloatToF16(pre[i]);
        }
        std::vector<double> wantl(n), wantlb(cols, 0.0);
        std::vector<uint16_t> wantl16(n);
        ReferenceBackend<double> ref;
        ref.BiasActivationBackwardTo(dl.data(), low, sl.data(), low, wantl.data(), DType::kF64,
                                     wantlb.data(), rows, cols, act);
        uint16_t* inplace = st().In(dl);
        float* gotlb = st().In(std::vector<float>(cols, 0.0f));
        be().BiasActivationBackwardTo(inplace, low, st().In(sl), low, inplace, low, gotlb, rows, cols,
                                      act);
        std::vector<float> wantf(wantl.begin(), wantl.end());
        ExpectRoundingOf(st().Get(inplace, n), low, wantf, "activation gradient from low dout");
        EXPECT_LT(RelErr(st().Get(gotlb, cols), wantlb), 2e-6);
      }
    }
  }
}

TEST_P(KernelTest, MaskedSoftmaxMatchesReference) {
  const int64_t B = 3, H = 2, tq = 9, tk = 11, n = B * H * tq * tk;
  std::vector<uint8_t> pad(B * tk, 0);
  for (int64_t k = 7; k < tk; ++k) pad[1 * tk + k] = 1;  // row 1 has 4 padding keys
  uint8_t* dpad = st().In(pad);
  for (bool causal : {false, true}) {
    for (float p : {0.0f, 0.2f}) {
      DropoutKey key{99, 5};
      auto s = Random(n, 16, -6, 6);
      auto sd = ToDouble(s);
      std::vector<double> prr(n), drr(n);
      float *dpr = st().Out<float>(n), *ddr = st().Out<float>(n);
      be().SoftmaxForward(st().In(s), dpr, ddr, DType::kF32, dpad, B, H, tq, tk, 0.35f, causal, p,
                          key);
      ref_.SoftmaxForward(sd.data(), prr.data(), drr.data(), DType::kF64, pad.data(), B, H, tq, tk,
                          0.35f, causal, p, key);
      auto pr = st().Get(dpr, n);
      EXPECT_LT(RelErr(pr, prr), 2e-6);
      EXPECT_LT(RelErr(st().Get(ddr, n), drr), 2e-6);
      for (int64_t q = 0; q < tq; ++q) EXPECT_EQ(pr[(1 * H * tq + q) * tk + 8], 0.0f);  // padded
      if (causal) {
        EXPECT_EQ(pr[0 * tk + 3], 0.0f);  // query 0 sees key 0 only
      }
      for (DType dt : kLowDTypes) {  // P' written directly in the GEMM's dtype (also when p = 0)
        float* pr2 = st().Out<float>(n);
        uint16_t* low = st().Out<uint16_t>(n);
        be().SoftmaxForward(st().In(s), pr2, low, dt, dpad, B, H, tq, tk, 0.35f, causal, p, key);
        EXPECT_EQ(st().Get(pr2, n), pr);
        ExpectRoundingOf(st().Get(low, n), dt, st().Get(ddr, n), "dropped probabilities");
      }
      auto dd = Random(n, 17);
      auto ddd = ToDouble(dd);
      std::vector<double> dsr(n);
      float* dds = st().Out<float>(n);
      be().SoftmaxBackward(st().In(dd), dpr, dds, DType::kF32, B, H, tq, tk, 0.35f, p, key);
      ref_.SoftmaxBackward(ddd.data(), prr.data(), dsr.data(), DType::kF64, B, H, tq, tk, 0.35f, p,
                           key);
      EXPECT_LT(RelErr(st().Get(dds, n), dsr), 2e-6);
      for (DType dt : kLowDTypes) {
        uint16_t* low = st().Out<uint16_t>(n);
        be().SoftmaxBackward(st().In(dd), dpr, low, dt, B, H, tq, tk, 0.35f, p, key);
        ExpectRoundingOf(st().Get(low, n), dt, st().Get(dds, n), "score gradients");
      }
    }
  }
}

// Fused attention against its definition (ReferenceBackend<double>, on the same rounded inputs):
// self-attention read from one [B*T, 3C] projection (q, k, v as column blocks), cross-attention
// with separate buffers and tq != tk, padding, causal masks, dropout, a head size that is not a
// multiple of the vector width, and more keys than one block (the online softmax, and the
// backward's D_i from dO.O), and enough batch entries for the kernels' whole-entry work split.
// fp32 inputs to 1e-5; bf16 / f16 to a few units of their rounding.
struct AttentionCase {
  int64_t batch, heads, tq, tk, dim;
  bool self, causal;
  float dropout;
};

TEST_P(KernelTest, FusedAttentionMatchesReference) {
  if (!be().has_fused_attention()) GTEST_SKIP() << be().name() << " has no fused attention";
  const AttentionCase cases[] = {{3, 2, 9, 9, 16, true, false, 0.0f},   {2, 3, 7, 7, 20, true, true, 0.2f},
                                 {2, 2, 5, 11, 8, false, false, 0.1f},  {1, 2, 40, 40, 12, true, true, 0.0f},
                                 {2, 1, 6, 300, 16, false, false, 0.1f}, {1, 1, 300, 300, 8, true, true, 0.1f},
                                 // Enough entries that each thread takes whole entries (staged rows).
                                 {8, 2, 6, 6, 16, true, true, 0.1f},    {9, 2, 5, 7, 8, false, false, 0.0f},
                                 // The models' head size, over two of the GPU kernels' 64-row tiles.
                                 {3, 2, 70, 70, 64, true, true, 0.1f},  {2, 2, 33, 80, 64, false, false, 0.1f}};
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const AttentionCase& c : cases) {
      const int64_t H = c.heads, D = c.dim, C = H * D;
      const int64_t nq = c.batch * c.tq, nk = c.batch * c.tk;
      SCOPED_TRACE(std::string(DTypeName(dt)) + " B=" + std::to_string(c.batch) + " H=" +
                   std::to_string(H) + " tq=" + std::to_string(c.tq) + " tk=" + std::to_string(c.tk) +
                   " D=" + std::to_string(D) + (c.causal ? " causal" : "") +
                   " p=" + std::to_string(c.dropout));
      // Inputs as values the dtype holds exactly; the same values in f32/f64 for the reference.
      auto round = [&](std::vector<float> v) {
        for (float& x : v)
          x = dt == DType::kBF16 ? Bf16ToFloat(FloatToBf16(x)) : dt == DType::kF16 ? F16ToFloat(FloatToF16(x)) : x;
        return v;
      };
      // Self: one [B*T, 3C] buffer; cross: q [B*tq, C] and kv [B*tk, 2C].
      const int64_t ldq = c.self ? 3 * C : C, ldkv = c.self ? 3 * C : 2 * C;
      std::vector<float> qbuf = round(Random(nq * ldq, 51, -2, 2));
      std::vector<float> kvbuf = c.self ? qbuf : round(Random(nk * ldkv, 52, -2, 2));
      std::vector<float> dout = round(Random(nq * C, 53));
      std::vector<uint8_t> pad(c.batch * c.tk, 0);
      for (int64_t j = c.tk - 3; j < c.tk && c.batch > 1; ++j) pad[1 * c.tk + j] = 1;
      AttentionArgs a;
      a.batch = c.batch, a.heads = H, a.tq = c.tq, a.tk = c.tk, a.head_dim = D;
      a.ldq = ldq, a.ldk = ldkv, a.ldv = ldkv, a.ldo = C;
      a.causal = c.causal;
      a.scale = 1.0f / std::sqrt(static_cast<float>(D));
      a.dropout = c.dropout;
      a.key = DropoutKey{123, 7};
      a.dtype = dt;
      // Gradients laid out like the operands: dq in q's buffer, dk | dv in k|v's (self: all three
      // side by side in one buffer).
      auto lay_out = [&](auto& g, auto* q_buf, auto* kv_buf) {
        g.dq = q_buf;
        g.dk = kv_buf + (c.self ? C : 0);
        g.dv = kv_buf + (c.self ? 2 * C : C);
      };
      // Device copies in dt.
      auto stage = [&](const std::vector<float>& v) -> const void* {
        if (dt == DType::kF32) return st().In(v);
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i) h[i] = dt == DType::kBF16 ? FloatToBf16(v[i]) : FloatToF16(v[i]);
        return st().In(h);
      };
      const char* qd = static_cast<const char*>(stage(qbuf));
      const char* kvd = c.self ? qd : static_cast<const char*>(stage(kvbuf));
      const size_t es = DTypeSize(dt);
      const void* q = qd;
      const void* k = kvd + (c.self ? C : 0) * es;
      const void* v = kvd + (c.self ? 2 * C : C) * es;
      a.key_padding = st().In(pad);
      void* out = st().Out<float>(nq * C);  // room for fp32; low dtypes use half
      float* lse = st().Out<float>(c.batch * H * c.tq);
      be().AttentionForward(a, q, k, v, out, lse);

      // The reference in double on exactly the staged values (its P' unrounded: the low dtypes'
      // tolerance below covers their rounding of P' and O).
      AttentionArgs r = a;
      r.key_padding = pad.data();
      r.dtype = DType::kF64;
      const std::vector<double> qr(qbuf.begin(), qbuf.end()), kvr(kvbuf.begin(), kvbuf.end());
      const double* rq = qr.data();
      const double* rk = kvr.data() + (c.self ? C : 0);
      const double* rv = kvr.data() + (c.self ? 2 * C : C);
      std::vector<double> outr(nq * C);
      std::vector<float> lser32(c.batch * H * c.tq);
      ReferenceBackend<double> ref;
      ref.AttentionForward(r, rq, rk, rv, outr.data(), lser32.data());
      std::vector<float> got(nq * C);
      if (dt == DType::kF32) {
        got = st().Get(static_cast<float*>(out), nq * C);
      } else {
        auto h = st().Get(static_cast<uint16_t*>(out), nq * C);
        for (size_t i = 0; i < h.size(); ++i) got[i] = dt == DType::kBF16 ? Bf16ToFloat(h[i]) : F16ToFloat(h[i]);
      }
      // Low dtypes round P' and O: within a few units of their rounding (normwise).
      const double tol = dt == DType::kF32 ? 2e-6 : dt == DType::kBF16 ? 1.5e-2 : 2e-3;
      const double out_err = RelErr(got, outr);
      EXPECT_LT(out_err, tol) << "output";
      const auto lse_got = st().Get(lse, lser32.size());
      for (size_t i = 0; i < lse_got.size(); ++i) {
        if (std::isinf(lser32[i])) {
          EXPECT_TRUE(std::isinf(lse_got[i]) && lse_got[i] < 0) << "lse " << i;
        } else {
          EXPECT_NEAR(lse_got[i], lser32[i], 1e-4 * std::max(1.0f, std::fabs(lser32[i]))) << "lse " << i;
        }
      }

      // Backward: gradients in fp32, in q's, k's and v's layouts, and the bias gradient (which
      // adds to what is there).
      const void* doutd = stage(dout);
      const std::vector<double> doutr(dout.begin(), dout.end());
      float* dqkv = st().In(std::vector<float>(nq * ldq, 7.0f));  // untouched columns keep 7
      float* dkv = c.self ? dqkv : st().In(std::vector<float>(nk * ldkv, 7.0f));
      float* dbias = st().In(std::vector<float>(3 * C, 0.5f));
      AttentionGrads<float> g;
      lay_out(g, dqkv, dkv);
      g.dbias = dbias;
      be().AttentionBackward(a, q, k, v, out, doutd, lse, g);
      std::vector<double> dqr(nq * ldq, 7.0), dkvr(c.self ? 0 : nk * ldkv, 7.0), dbr(3 * C, 0.5);
      double* rdkv = c.self ? dqr.data() : dkvr.data();
      AttentionGrads<double> gr;
      lay_out(gr, dqr.data(), rdkv);
      gr.dbias = dbr.data();
      ref.AttentionBackward(r, rq, rk, rv, outr.data(), doutr.data(), nullptr, gr);
      const double gtol = dt == DType::kF32 ? 4e-6 : dt == DType::kBF16 ? 1e-2 : 2e-3;
      const auto grads = st().Get(dqkv, nq * ldq);
      const double grad_err = RelErr(grads, dqr);
      std::printf("fused attention %s B=%lld H=%lld tq=%lld tk=%lld D=%lld%s p=%.1f: output %.2g, "
                  "gradients %.2g\n",
                  DTypeName(dt), static_cast<long long>(c.batch), static_cast<long long>(H),
                  static_cast<long long>(c.tq), static_cast<long long>(c.tk),
                  static_cast<long long>(D), c.causal ? " causal" : "", c.dropout, out_err, grad_err);
      EXPECT_LT(grad_err, gtol) << "dq (and dk, dv for self)";
      if (!c.self) {
        EXPECT_LT(RelErr(st().Get(dkv, nk * ldkv), dkvr), gtol) << "dk, dv";
      }
      EXPECT_LT(RelErr(st().Get(dbias, 3 * C), dbr), gtol) << "bias gradient";
      // The same gradients straight into the in-projection's operand dtype: the fp32 ones
      // rounded once (same bias gradient).
      for (DType low : kLowDTypes) {
        uint16_t* lq = st().In(std::vector<uint16_t>(nq * ldq, 0));
        uint16_t* lkv = c.self ? lq : st().In(std::vector<uint16_t>(nk * ldkv, 0));
        AttentionGrads<float> gl;
        lay_out(gl, lq, lkv);
        gl.dtype = low;
        be().AttentionBackward(a, q, k, v, out, doutd, lse, gl);
        std::vector<uint16_t> lh = st().Get(lq, nq * ldq);
        std::vector<float> want = grads;
        for (int64_t row = 0; row < nq; ++row)
          for (int64_t col = 0; col < ldq; ++col)
            if (grads[row * ldq + col] == 7.0f) lh[row * ldq + col] = 0, want[row * ldq + col] = 0;
        ExpectRoundingOf(lh, low, want, "low-precision attention gradients");
      }
      if (GetParam() == "cpu") {
        // Every build of the kernels this CPU can run, whichever CpuBackend chose above.
        struct Variant {
          const char* name;
          decltype(&portable::FusedAttentionForward) forward;
          decltype(&portable::FusedAttentionBackward) backward;
          bool runs;
        };
        const Variant variants[] = {
            {"AVX2", portable::FusedAttentionForward, portable::FusedAttentionBackward, true},
            {"AVX-512", avx512::FusedAttentionForward, avx512::FusedAttentionBackward, cpu::HasAvx512()},
            {"AMX", amx::FusedAttentionForward, amx::FusedAttentionBackward,
             dt == DType::kBF16 && cpu::HasAmxBf16() && cpu::EnableAmx()},
            {"AVX512-BF16", avx512_bf16::FusedAttentionForward, avx512_bf16::FusedAttentionBackward,
             dt == DType::kBF16 && cpu::HasAvx512() && cpu::HasAvx512Bf16()}};
        for (const Variant& var : variants) {
          if (!var.runs) continue;
          SCOPED_TRACE(var.name);
          std::vector<char> out2(nq * C * es);
          std::vector<float> lse2(lser32.size());
          var.forward(a, q, k, v, out2.data(), lse2.data());
          std::vector<float> got2(nq * C);
          for (int64_t i = 0; i < nq * C; ++i) {
            const uint16_t* h = reinterpret_cast<const uint16_t*>(out2.data());
            got2[i] = dt == DType::kF32 ? reinterpret_cast<const float*>(out2.data())[i]
                      : dt == DType::kBF16 ? Bf16ToFloat(h[i]) : F16ToFloat(h[i]);
          }
          EXPECT_LT(RelErr(got2, outr), tol) << "output";
          std::vector<float> g2(nq * ldq, 7.0f), gkv2(c.self ? 0 : nk * ldkv, 7.0f), db2(3 * C, 0.5f);
          float* kv2 = c.self ? g2.data() : gkv2.data();
          AttentionGrads<float> ga;
          lay_out(ga, g2.data(), kv2);
          ga.dbias = db2.data();
          var.backward(a, q, k, v, out2.data(), doutd, lse2.data(), ga);
          EXPECT_LT(RelErr(g2, dqr), gtol) << "gradients";
          if (!c.self) {
            EXPECT_LT(RelErr(gkv2, dkvr), gtol) << "dk, dv";
          }
          EXPECT_LT(RelErr(db2, dbr), gtol) << "bias gradient";
        }
      }
    }
  }
}

TEST_P(KernelTest, EmbeddingAndHeadPermutationsMatchReference) {
  const int64_t V = 23, C = 12, rows = 17;
  std::vector<int32_t> tok(rows), pos(rows);
  for (int64_t r = 0; r < rows; ++r) {
    tok[r] = static_cast<int32_t>((r * 7) % V);
    pos[r] = static_cast<int32_t>(r % 5);
  }
  tok[3] = tok[9] = 1;  // padding
  auto table = Random(V * C, 18), pe = Random(5 * C, 19);
  auto td = ToDouble(table), ped = ToDouble(pe);
  std::vector<double> outr(rows * C);
  int32_t* dtok = st().In(tok);
  float* dout_ = st().Out<float>(rows * C);
  be().EmbeddingForward(dtok, st().In(table), st().In(pe), st().In(pos), dout_, rows, C, 3.5f);
  ref_.EmbeddingForward(tok.data(), td.data(), ped.data(), pos.data(), outr.data(), rows, C, 3.5f);
  EXPECT_LT(RelErr(st().Get(dout_, rows * C), outr), 1e-6);
  auto dout = Random(rows * C, 20);
  auto doutd = ToDouble(dout);
  std::vector<double> dtr(V * C, 0);
  float* ddt = st().In(std::vector<float>(V * C, 0.0f));
  be().EmbeddingBackward(dtok, st().In(dout), ddt, rows, C, 3.5f, 1);
  ref_.EmbeddingBackward(tok.data(), doutd.data(), dtr.data(), rows, C, 3.5f, 1);
  auto dt = st().Get(ddt, V * C);
  EXPECT_LT(RelErr(dt, dtr), 1e-6);
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dt[1 * C + c], 0.0f);  // pad row: no gradient

  const int64_t B = 3, T = 5, P = 3, H = 2, D = 4, n = B * T * P * H * D;
  auto x = Random(n, 21), bias = Random(P * H * D, 22);
  auto xd = ToDouble(x), biasd = ToDouble(bias);
  std::vector<double> headsr(n);
  float *dx = st().In(x), *dheads = st().Out<float>(n), *dback = st().Out<float>(n);
  be().SplitHeads(dx, st().In(bias), dheads, DType::kF32, B, T, P, H, D);
  ref_.SplitHeads(xd.data(), biasd.data(), headsr.data(), DType::kF64, B, T, P, H, D);
  EXPECT_LT(RelErr(st().Get(dheads, n), headsr), 1e-7);
  for (DType dt : kLowDTypes) {
    uint16_t* low = st().Out<uint16_t>(n);
    be().SplitHeads(dx, st().In(bias), low, dt, B, T, P, H, D);
    ExpectRoundingOf(st().Get(low, n), dt, st().Get(dheads, n), "split heads");
  }
  be().SplitHeads(dx, nullptr, dheads, DType::kF32, B, T, P, H, D);
  be().MergeHeads(dheads, dback, DType::kF32, B, T, P, H, D);
  EXPECT_EQ(st().Get(dback, n), x);
  for (DType dt : kLowDTypes) {
    uint16_t* low = st().Out<uint16_t>(n);
    be().MergeHeads(dheads, low, dt, B, T, P, H, D);
    ExpectRoundingOf(st().Get(low, n), dt, x, "merged heads");
  }
  std::vector<double> sumr(P * H * D, 1.0);
  float* dsum = st().In(std::vector<float>(P * H * D, 1.0f));
  be().ColumnSum(dx, dsum, B * T, P * H * D);
  ref_.ColumnSum(xd.data(), sumr.data(), B * T, P * H * D);
  EXPECT_LT(RelErr(st().Get(dsum, P * H * D), sumr), 1e-6);
}

TEST_P(KernelTest, LabelSmoothedCrossEntropyMatchesReference) {
  for (const int64_t V : {1003, 1004}) {
    const int64_t rows = 29, n = rows * V;
    SCOPED_TRACE("V=" + std::to_string(V));
    auto z = Random(n, 23, -8, 8);
    auto zd = ToDouble(z);
    std::vector<int32_t> t(rows);
    for (int64_t r = 0; r < rows; ++r) t[r] = static_cast<int32_t>((r * 37) % V);
    t[4] = t[17] = 1;  // padding targets
    std::vector<double> lser(rows);
    float *dz = st().In(z), *dlse = st().Out<float>(rows);
    int32_t* dt = st().In(t);
    CrossEntropyStats s = be().CrossEntropyForward(dz, dt, dlse, rows, V, 0.1f, 1);
    CrossEntropyStats sr = ref_.CrossEntropyForward(zd.data(), t.data(), lser.data(), rows, V, 0.1f, 1);
    EXPECT_EQ(s.tokens, rows - 2);
    EXPECT_EQ(s.tokens, sr.tokens);
    EXPECT_NEAR(s.loss, sr.loss, 1e-5 * sr.loss);
    EXPECT_NEAR(s.nll, sr.nll, 1e-5 * sr.nll);
    std::vector<double> dzr(n);
    float* dgrad = st().Out<float>(n);
    be().CrossEntropyBackward(dz, dlse, dt, dgrad, DType::kF32, rows, V, 0.1f, 1, 2.0f);
    ref_.CrossEntropyBackward(zd.data(), lser.data(), t.data(), dzr.data(), DType::kF64, rows, V, 0.1f, 1, 2.0f);
    auto grad = st().Get(dgrad, n);
    EXPECT_LT(RelErr(grad, dzr), 2e-6);
    for (int64_t v = 0; v < V; ++v) EXPECT_EQ(grad[4 * V + v], 0.0f);
    // In place, and straight to bf16.
    float* dzi = st().In(z);
    be().CrossEntropyBackward(dzi, dlse, dt, dzi, DType::kF32, rows, V, 0.1f, 1, 2.0f);
    EXPECT_EQ(st().Get(dzi, n), grad);
    uint16_t* dzb = st().Out<uint16_t>(n);
    be().CrossEntropyBackward(dz, dlse, dt, dzb, DType::kBF16, rows, V, 0.1f, 1, 2.0f);
    auto zb = st().Get(dzb, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(zb[i], FloatToBf16(grad[i])) << i;
    // Loss and gradient in one call: the same as the two calls, in fp32 (in place too) and bf16.
    for (bool in_place : {false, true}) {
      float* zin = st().In(z);
      float* g32 = in_place ? zin : st().Out<float>(n);
      float* lse2 = st().Out<float>(rows);
      const CrossEntropyStats f =
          be().CrossEntropyForwardBackward(zin, dt, lse2, g32, DType::kF32, rows, V, 0.1f, 1, 2.0f);
      EXPECT_EQ(f.tokens, s.tokens);
      EXPECT_EQ(f.loss, s.loss);
      EXPECT_EQ(f.nll, s.nll);
      EXPECT_EQ(st().Get(lse2, rows), st().Get(dlse, rows));
      EXPECT_EQ(st().Get(g32, n), grad) << "in_place=" << in_place;
    }
    uint16_t* gb = st().Out<uint16_t>(n);
    float* lse3 = st().Out<float>(rows);
    be().CrossEntropyForwardBackward(dz, dt, lse3, gb, DType::kBF16, rows, V, 0.1f, 1, 2.0f);
    EXPECT_EQ(st().Get(gb, n), zb);
  }
}

TEST_P(KernelTest, SumSquaresAndScaleMatchTheirDefinitions) {
  const int64_t n = 300007;  // more than one block of partial sums, not a multiple of anything
  std::vector<float> x = Random(n, 41, -3, 3);
  double want = 0;
  for (float v : x) want += static_cast<double>(v) * v;
  float* dx = st().In(x);
  const VectorStats s = be().SumSquares(dx, n);
  EXPECT_NEAR(s.sum_squares, want, 1e-12 * want);
  EXPECT_FALSE(s.non_finite);
  // The same bits whatever the thread count (a 16-core host once differed run to run).
  const int threads = omp_get_max_threads();
  for (int t : {1, 3, 16}) {
    omp_set_num_threads(t);
    EXPECT_EQ(be().SumSquares(dx, n).sum_squares, s.sum_squares) << "not deterministic with " << t << " threads";
  }
  omp_set_num_threads(threads);
  be().Scale(dx, n, 0.5f);
  auto y = st().Get(dx, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * 0.5f) << i;
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    std::vector<float> z = x;
    z[n - 3] = bad;
    EXPECT_TRUE(be().SumSquares(st().In(z), n).non_finite) << bad;
  }
}

// Beam search's scoring (Backend::BeamScores) against its definition computed here in double:
// log-softmax plus the row's base, the k best tokens by score with ties to the lower token,
// banned tokens and -inf scores left out, and the EOS score.
TEST_P(KernelTest, BeamScoresPickEachRowsBestContinuations) {
  constexpr float kNegInf = -INFINITY;
  const int64_t vocab = 1003, k = 10;
  const int64_t rows = 5;
  std::vector<float> z = Random(rows * vocab, 43, -6, 6);
  std::vector<float> base = {0.0f, -3.5f, kNegInf, -1.25f, -0.5f};
  for (int64_t v = 0; v < vocab; ++v) z[3 * vocab + v] = 0.75f;  // row 3: every score ties
  for (int64_t v = 0; v < vocab; v += 3) z[4 * vocab + v] = kNegInf;  // row 4: masked tokens
  z[4 * vocab + 700] = 9.0f;
  BeamScoresArgs args;
  args.rows = rows;
  args.vocab = vocab;
  args.k = k;
  args.banned[0] = 1;
  args.banned[1] = 0;
  args.eos = 2;
  float* top_s = st().Out<float>(rows * k);
  int32_t* top_t = st().Out<int32_t>(rows * k);
  float* eos_s = st().Out<float>(rows);
  be().BeamScores(st().In(z), st().In(base), args, top_s, top_t, eos_s);
  const auto got_s = st().Get(top_s, rows * k);
  const auto got_t = st().Get(top_t, rows * k);
  const auto got_eos = st().Get(eos_s, rows);
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, static_cast<double>(z[r * vocab + v]));
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(z[r * vocab + v] - mx);
    const double lse = mx + std::log(sum);
    std::vector<std::pair<double, int32_t>> all;
    for (int64_t v = 0; v < vocab; ++v) {
      const double sc = base[r] + (z[r * vocab + v] - lse);
      if (v == 0 || v == 1 || sc == -INFINITY) continue;
      all.emplace_back(sc, static_cast<int32_t>(v));
    }
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    for (int64_t i = 0; i < k; ++i) {
      if (i < static_cast<int64_t>(all.size())) {
        EXPECT_EQ(got_t[r * k + i], all[i].second) << "row " << r << " place " << i;
        EXPECT_NEAR(got_s[r * k + i], all[i].first, 1e-5) << "row " << r << " place " << i;
      } else {
        EXPECT_EQ(got_t[r * k + i], -1) << "row " << r << " place " << i;
        EXPECT_EQ(got_s[r * k + i], kNegInf) << "row " << r << " place " << i;
      }
    }
    const double want_eos = base[r] + (z[r * vocab + 2] - lse);
    if (base[r] == kNegInf) {
      EXPECT_EQ(got_eos[r], kNegInf);
    } else {
      EXPECT_NEAR(got_eos[r], want_eos, 1e-5) << "row " << r;
    }
  }
  // Row 3's ties go to the lowest tokens, the banned 0 and 1 skipped; row 2 (base -inf) has none.
  EXPECT_EQ(got_t[3 * k], 2);
  EXPECT_EQ(got_t[3 * k + k - 1], 11);
  EXPECT_EQ(got_t[2 * k], -1);
  EXPECT_EQ(got_t[4 * k], 700);

  // Fewer allowed tokens than k: the rest is padding.
  BeamScoresArgs small = args;
  small.rows = 1;
  small.vocab = 4;
  const std::vector<float> z4 = {0.5f, 2.0f, -1.0f, 1.0f};
  be().BeamScores(st().In(z4), st().In(std::vector<float>{0.0f}), small, top_s, top_t, eos_s);
  const auto t4 = st().Get(top_t, k);
  EXPECT_EQ(t4[0], 3);
  EXPECT_EQ(t4[1], 2);
  for (int64_t i = 2; i < k; ++i) EXPECT_EQ(t4[i], -1) << i;
}

// The fused device update (Optimizer::PlaceOn -> Backend::ApplyOptimizerUpdate) against the
// host optimizer, bit for bit: both apply optim/update_rules.h. Three parameters with gaps
// between them (as in a ParamStore), one without weight decay, one larger than a chunk.
TEST_P(KernelTest, FusedOptimizerUpdateEqualsTheHostOptimizerBitForBit) {
  struct Case {
    const char* name;
    OptimizerOptions o;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, std::string type, auto&& tweak) {
    OptimizerOptions o;
    o.type = std::move(type);
    o.weight_decay = 0.05;
    tweak(o);
    cases.push_back({name, o});
  };
  add("adamw", "adamw", [](OptimizerOptions&) {});
  add("radam_l2", "radam", [](OptimizerOptions&) {});  // 7 steps cross rho_t > 5 at step 6
  add("radam_decoupled", "radam", [](OptimizerOptions& o) { o.decoupled_weight_decay = true; });
  add("sgd_nesterov", "sgd", [](OptimizerOptions& o) { o.nesterov = true; });
  add("sgd_momentum", "sgd", [](OptimizerOptions&) {});
  add("sgd_plain", "sgd", [](OptimizerOptions& o) { o.momentum = 0; });
  const int64_t sizes[] = {37, 16, kParamChunkElements + 1000};
  const bool decays[] = {true, false, true};
  int64_t offsets[3], total = 0;
  for (int i = 0; i < 3; ++i) {
    offsets[i] = (total + 15) / 16 * 16;
    total = offsets[i] + sizes[i];
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<float> hv = Random(total, 50, -1, 1), hg(total);
    float* dv = st().In(hv);
    float* dg = st().Out<float>(total);
    auto host_opt = std::move(MakeOptimizer(c.o)).value();
    auto dev_opt = std::move(MakeOptimizer(c.o)).value();
    dev_opt->PlaceOn(&be());
    std::vector<ParamRef> hp, dp;
    for (int i = 0; i < 3; ++i) {
      const std::string name = "p" + std::to_string(i);
      hp.push_back({name, hv.data() + offsets[i], hg.data() + offsets[i],
                    static_cast<size_t>(sizes[i]), decays[i]});
      dp.push_back({name, dv + offsets[i], dg + offsets[i], static_cast<size_t>(sizes[i]), decays[i]});
    }
    ASSERT_TRUE(dev_opt->Prepare(dp).ok());
    // The last steps fold a gradient factor (unscale / clip) and write the bf16 mirror of the
    // weights, as a mixed-precision training step does; the stored gradients stay unscaled.
    uint16_t* mirror = st().In(std::vector<uint16_t>(total, 0));
    for (int step = 0; step < 7; ++step) {
      std::vector<float> g = Random(total, 60 + step, -0.1f, 0.1f);
      std::copy(g.begin(), g.end(), hg.begin());
      be().CopyToDevice(dg, g.data(), g.size() * sizeof(float));
      StepFusion host_fusion, dev_fusion;
      if (step >= 5) {
        host_fusion.grad_factor = dev_fusion.grad_factor = 0.37f;
        dev_fusion.mirror = mirror;
      }
      host_opt->Step(hp, 1e-2f, host_fusion);
      dev_opt->Step(dp, 1e-2f, dev_fusion);
    }
    const std::vector<float> got = st().Get(dv, total);
    const std::vector<uint16_t> got_mirror = st().Get(mirror, total);
    for (int i = 0; i < 3; ++i)
      for (int64_t j = 0; j < sizes[i]; ++j) {
        ASSERT_EQ(got[offsets[i] + j], hv[offsets[i] + j]) << "p" << i << "[" << j << "]";
        ASSERT_EQ(got_mirror[offsets[i] + j], FloatToBf16(hv[offsets[i] + j])) << "mirror p" << i << "[" << j << "]";
      }
    EXPECT_EQ(st().Get(dg, total), hg) << "the stored gradients are left unscaled";
    const std::vector<NamedBuffer> a = host_opt->State(), b = dev_opt->State();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_TRUE(a[i].data == b[i].data) << a[i].name;
    }
  }
}

TEST_P(KernelTest, LstmCellMatchesReferenceWithAndWithoutItsOptionalInputs) {
  const int64_t rows = 7, H = 37, n = rows * H;
  for (bool full : {true, false}) {  // full: bias, c_prev and dc given; else all three null
    auto z = Random(rows * 4 * H, 21, -3, 3), bias = Random(4 * H, 22), cp = Random(n, 23, -2, 2);
    auto dh = Random(n, 24), dc = Random(n, 25), db0 = Random(4 * H, 26);
    std::vector<double> zr = ToDouble(z), cr(n), hr(n), dzr(rows * 4 * H), dcpr(n), dbr = ToDouble(db0);
    auto bd = ToDouble(bias), cpd = ToDouble(cp), dhd = ToDouble(dh), dcd = ToDouble(dc);
    ref_.LstmCellForward(zr.data(), full ? bd.data() : nullptr, full ? cpd.data() : nullptr, cr.data(),
                         hr.data(), rows, H);
    ref_.LstmCellBackward(zr.data(), full ? cpd.data() : nullptr, cr.data(), dhd.data(), full ? dcd.data() : nullptr,
                          dzr.data(), dcpr.data(), dbr.data(), rows, H);
    float* dz = st().In(z);
    float* dcell = st().Out<float>(n);
    float* dhid = st().Out<float>(n);
    be().LstmCellForward(dz, full ? st().In(bias) : nullptr, full ? st().In(cp) : nullptr, dcell, dhid, rows, H);
    EXPECT_LT(RelErr(st().Get(dz, rows * 4 * H), zr), 1e-6) << "activations, full=" << full;
    EXPECT_LT(RelErr(st().Get(dcell, n), cr), 1e-6) << "c, full=" << full;
    EXPECT_LT(RelErr(st().Get(dhid, n), hr), 1e-6) << "h, full=" << full;
    // Backward into a separate buffer, then in place over the activations.
    float* ddz = st().Out<float>(rows * 4 * H);
    float* ddcp = st().Out<float>(n);
    float* ddb = st().In(db0);
    const float* dcp_in = full ? st().In(cp) : nullptr;
    const float* ddc = full ? st().In(dc) : nullptr;
    be().LstmCellBackward(dz, dcp_in, dcell, st().In(dh), ddc, ddz, ddcp, ddb, rows, H);
    EXPECT_LT(RelErr(st().Get(ddz, rows * 4 * H), dzr), 2e-6) << "dgates, full=" << full;
    EXPECT_LT(RelErr(st().Get(ddcp, n), dcpr), 2e-6) << "dc_prev, full=" << full;
    EXPECT_LT(RelErr(st().Get(ddb, 4 * H), dbr), 2e-6) << "dbias accumulates, full=" << full;
    be().LstmCellBackward(dz, dcp_in, dcell, st().In(dh), ddc, dz, nullptr, nullptr, rows, H);
    EXPECT_EQ(st().Get(dz, rows * 4 * H), st().Get(ddz, rows * 4 * H)) << "in place, full=" << full;
  }
}

TEST_P(KernelTest, GluMatchesReferenceAndRunsInPlace) {
  const int64_t rows = 9, cols = 41;
  auto x = Random(rows * 2 * cols, 41, -4, 4), dy = Random(rows * cols, 42);
  std::vector<double> xr = ToDouble(x), yr(rows * cols), dxr(rows * 2 * cols), dyr = ToDouble(dy);
  ref_.GluForward(xr.data(), yr.data(), rows, cols);
  ref_.GluBackward(xr.data(), dyr.data(), dxr.data(), rows, cols);
  float* dx_in = st().In(x);
  float* y = st().Out<float>(rows * cols);
  be().GluForward(dx_in, y, rows, cols);
  EXPECT_LT(RelErr(st().Get(y, rows * cols), yr), 1e-6);
  float* dx = st().Out<float>(rows * 2 * cols);
  be().GluBackward(dx_in, st().In(dy), dx, rows, cols);
  EXPECT_LT(RelErr(st().Get(dx, rows * 2 * cols), dxr), 2e-6);
  be().GluBackward(dx_in, st().In(dy), dx_in, rows, cols);
  EXPECT_EQ(st().Get(dx_in, rows * 2 * cols), st().Get(dx, rows * 2 * cols)) << "in place over x";
}

TEST_P(KernelTest, ScaleRowGroupsScalesEachGroupByItsFactor) {
  const int64_t groups = 5, per = 7, cols = 33;
  auto x = Random(groups * per * cols, 48), f = Random(groups, 49, 0.5f, 3);
  std::vector<double> xr = ToDouble(x);
  ref_.ScaleRowGroups(xr.data(), f.data(), groups, per, cols);
  float* dx = st().In(x);
  be().ScaleRowGroups(dx, st().In(f), groups, per, cols);
  EXPECT_LT(RelErr(st().Get(dx, groups * per * cols), xr), 1e-7);
  EXPECT_FLOAT_EQ(st().Get(dx, groups * per * cols)[per * cols], x[per * cols] * f[1]) << "group 1's first element";
}

TEST_P(KernelTest, WeightNormMatchesReferenceByRowsAndByColumns) {
  // d = 300 spans more than one thread block's stride on a GPU; n = 300 columns more than one of
  // the CPU's blocks of 256 (and a partial one).
  for (const auto& [n, d] : {std::pair<int64_t, int64_t>{13, 300}, {300, 13}})
  for (bool columns : {false, true}) {
    SCOPED_TRACE(std::string(columns ? "columns" : "rows") + " n=" + std::to_string(n));
    auto v = Random(n * d, 43, -1, 1), g = Random(n, 44, 0.5f, 2), dw = Random(n * d, 45);
    auto dv0 = Random(n * d, 46), dg0 = Random(n, 47);
    std::vector<double> vr = ToDouble(v), gr = ToDouble(g), wr(n * d), nr(n), dwr = ToDouble(dw);
    std::vector<double> dvr = ToDouble(dv0), dgr = ToDouble(dg0);
    ref_.WeightNormForward(vr.data(), gr.data(), wr.data(), nr.data(), n, d, columns);
    ref_.WeightNormBackward(dwr.data(), vr.data(), gr.data(), nr.data(), dvr.data(), dgr.data(), n, d, columns);
    float* dv_in = st().In(v);
    float* dg_in = st().In(g);
    float* w = st().Out<float>(n * d);
    float* norms = st().Out<float>(n);
    be().WeightNormForward(dv_in, dg_in, w, norms, n, d, columns);
    EXPECT_LT(RelErr(st().Get(w, n * d), wr), 1e-6);
    EXPECT_LT(RelErr(st().Get(norms, n), nr), 1e-6);
    float* ddv = st().In(dv0);
    float* ddg = st().In(dg0);
    be().WeightNormBackward(st().In(dw), dv_in, dg_in, norms, ddv, ddg, n, d, columns);
    EXPECT_LT(RelErr(st().Get(ddv, n * d), dvr), 2e-6) << "dv accumulates";
    EXPECT_LT(RelErr(st().Get(ddg, n), dgr), 2e-6) << "dg accumulates";
  }
}

// GLU's and weight normalisation's backward are the gradients of their forward (f64 reference,
// central differences): L = Σ r ⊙ y for random r.
TEST(GluAndWeightNormGradient, BackwardMatchesFiniteDifferencesOfTheForward) {
  ReferenceBackend<double> ref;
  auto in = [](size_t count, uint32_t seed, double lo, double hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> v(count);
    for (double& x : v) x = u(rng);
    return v;
  };
  const double eps = 1e-6;
  {
    const int64_t rows = 3, cols = 4;
    const std::vector<double> x = in(rows * 2 * cols, 51, -2, 2), r = in(rows * cols, 52, -1, 1);
    auto loss = [&](const std::vector<double>& xx) {
      std::vector<double> y(rows * cols);
      ref.GluForward(xx.data(), y.data(), rows, cols);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += r[i] * y[i];
      return l;
    };
    std::vector<double> dx(x.size());
    ref.GluBackward(x.data(), r.data(), dx.data(), rows, cols);
    for (size_t k = 0; k < x.size(); ++k) {
      std::vector<double> xp = x, xm = x;
      xp[k] += eps;
      xm[k] -= eps;
      EXPECT_NEAR(dx[k], (loss(xp) - loss(xm)) / (2 * eps), 1e-8) << "glu x " << k;
    }
  }
  for (bool columns : {false, true}) {
    const int64_t n = 3, d = 5;
    const std::vector<double> v = in(n * d, 53, -1, 1), g = in(n, 54, 0.5, 2), r = in(n * d, 55, -1, 1);
    auto loss = [&](const std::vector<double>& vv, const std::vector<double>& gg) {
      std::vector<double> w(n * d), norms(n);
      ref.WeightNormForward(vv.data(), gg.data(), w.data(), norms.data(), n, d, columns);
      double l = 0;
      for (size_t i = 0; i < w.size(); ++i) l += r[i] * w[i];
      return l;
    };
    std::vector<double> w(n * d), norms(n), dv(n * d, 0.0), dg(n, 0.0);
    ref.WeightNormForward(v.data(), g.data(), w.data(), norms.data(), n, d, columns);
    ref.WeightNormBackward(r.data(), v.data(), g.data(), norms.data(), dv.data(), dg.data(), n, d, columns);
    for (int64_t k = 0; k < n * d; ++k) {
      std::vector<double> vp = v, vm = v;
      vp[k] += eps;
      vm[k] -= eps;
      EXPECT_NEAR(dv[k], (loss(vp, g) - loss(vm, g)) / (2 * eps), 1e-8) << "v " << k << " columns " << columns;
    }
    for (int64_t k = 0; k < n; ++k) {
      std::vector<double> gp = g, gm = g;
      gp[k] += eps;
      gm[k] -= eps;
      EXPECT_NEAR(dg[k], (loss(v, gp) - loss(v, gm)) / (2 * eps), 1e-8) << "g " << k << " columns " << columns;
    }
  }
}

// The LSTM cell's backward is the gradient of its forward: L = Σ wh⊙h + Σ wc⊙c, so dh = wh and
// dc = wc, against central differences of the f64 reference in the pre-activation gates, the
// bias and c_prev.
TEST(LstmCellGradient, BackwardMatchesFiniteDifferencesOfTheForward) {
  ReferenceBackend<double> ref;
  const int64_t rows = 3, H = 5, n = rows * H, g4 = rows * 4 * H;
  auto in = [](size_t count, uint32_t seed, double lo, double hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> v(count);
    for (double& x : v) x = u(rng);
    return v;
  };
  const std::vector<double> z = in(g4, 31, -2, 2), bias = in(4 * H, 32, -1, 1), cp = in(n, 33, -1.5, 1.5);
  const std::vector<double> wh = in(n, 34, -1, 1), wc = in(n, 35, -1, 1);
  auto loss = [&](std::vector<double> zz, const std::vector<double>& b, const std::vector<double>& c0) {
    std::vector<double> c(n), h(n);
    ref.LstmCellForward(zz.data(), b.data(), c0.data(), c.data(), h.data(), rows, H);
    double l = 0;
    for (int64_t e = 0; e < n; ++e) l += wh[e] * h[e] + wc[e] * c[e];
    return l;
  };
  std::vector<double> act = z, c(n), h(n), dz(g4), dcp(n), db(4 * H, 0.0);
  ref.LstmCellForward(act.data(), bias.data(), cp.data(), c.data(), h.data(), rows, H);
  ref.LstmCellBackward(act.data(), cp.data(), c.data(), wh.data(), wc.data(), dz.data(), dcp.data(), db.data(),
                       rows, H);
  const double eps = 1e-6;
  auto numeric = [&](int which, int64_t k) {
    std::vector<double> zp = z, zm = z, bp = bias, bm = bias, cpp = cp, cpm = cp;
    std::vector<double>& vp = which == 0 ? zp : which == 1 ? bp : cpp;
    std::vector<double>& vm = which == 0 ? zm : which == 1 ? bm : cpm;
    vp[k] += eps;
    vm[k] -= eps;
    return (loss(zp, bp, cpp) - loss(zm, bm, cpm)) / (2 * eps);
  };
  for (int64_t k = 0; k < g4; ++k) EXPECT_NEAR(dz[k], numeric(0, k), 1e-7) << "gate pre-activation " << k;
  for (int64_t k = 0; k < 4 * H; ++k) EXPECT_NEAR(db[k], numeric(1, k), 1e-7) << "bias " << k;
  for (int64_t k = 0; k < n; ++k) EXPECT_NEAR(dcp[k], numeric(2, k), 1e-7) << "c_prev " << k;
}

TEST(CpuGemm, PrePackedWeightsFollowWeightsChanged) {
  CpuBackend cpu;
  ReferenceBackend<double> ref;
  const int64_t m = 64, n = 48, k = 40;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    std::vector<float> a = Random(m * k, 30), w = Random(n * k, 31), c(m * n);
    std::vector<uint16_t> al(a.size()), wl(w.size());
    if (dt != DType::kF32) cpu.Cast(a.data(), al.data(), dt, m * k);
    auto run = [&] {
      if (dt != DType::kF32) cpu.Cast(w.data(), wl.data(), dt, n * k);
      const void* ap = dt == DType::kF32 ? static_cast<const void*>(a.data()) : al.data();
      const void* wp = dt == DType::kF32 ? static_cast<const void*>(w.data()) : wl.data();
      cpu.Gemm(1, m, n, k, GemmOperand{ap, dt, false, k, 0},
               GemmOperand{wp, dt, true, k, 0, /*constant=*/true}, c.data(), n, 0, 1, 0);
      std::vector<double> cref(m * n);
      ref.Gemm(1, m, n, k, GemmOperand{ap, dt, false, k, 0}, GemmOperand{wp, dt, true, k, 0},
               cref.data(), n, 0, 1, 0);
      return RelErr(c, cref);
    };
    EXPECT_LT(run(), 2e-6) << DTypeName(dt);
    for (auto& x : w) x *= -2;  // an optimizer step
    cpu.WeightsChanged();
    EXPECT_LT(run(), 2e-6) << DTypeName(dt) << ": stale packed weights after WeightsChanged";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, KernelTest, ::testing::Values("cpu", "guarded", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
}  // namespace
}  // namespace sf
