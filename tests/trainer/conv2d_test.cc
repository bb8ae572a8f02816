// 2-D convolution (Backend::Conv2dForward / Conv2dBackward): the f64 reference's gradients
// against central finite differences, the CPU backend (oneDNN's convolution primitives) against
// PyTorch's F.conv2d (output, dx, dw, dbias) and against the reference, the gradients'
// accumulate contract, and every other backend against the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tests/support/testing.h"
#include "tests/trainer/test_backends.h"
#include "trainer/core/safetensors.h"
#include "trainer/core/cpu_features.h"
#include "trainer/core/tensor.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/reference.h"

namespace sf {
namespace {

// Strided with padding (3x3, stride 2, padding 1), an uneven one (a 3x2 kernel, strides 1 and 2,
// padding only in width, one input channel), and the speech front end's second subsampling
// convolution made small (32 channels in and out: oneDNN's blocked kernels, not its fallbacks).
std::vector<Conv2dShape> Shapes() {
  Conv2dShape a;
  a.n = 2, a.cin = 3, a.h = 9, a.w = 7, a.cout = 4, a.kh = 3, a.kw = 3, a.sh = 2, a.sw = 2, a.ph = 1, a.pw = 1;
  Conv2dShape b;
  b.n = 3, b.cin = 1, b.h = 10, b.w = 8, b.cout = 5, b.kh = 3, b.kw = 2, b.sh = 1, b.sw = 2, b.ph = 0, b.pw = 1;
  Conv2dShape c;
  c.n = 2, c.cin = 32, c.h = 21, c.w = 17, c.cout = 32, c.kh = 3, c.kw = 3, c.sh = 2, c.sw = 2;
  return {a, b, c};
}

template <typename T>
std::vector<T> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(u(rng));
  return v;
}

struct ConvResult {
  std::vector<float> y, dx, dw, db;
};

int64_t Numel(const Conv2dShape& s, char what) {
  switch (what) {
    case 'x': return s.n * s.cin * s.h * s.w;
    case 'w': return s.cout * s.cin * s.kh * s.kw;
    case 'y': return s.n * s.cout * s.oh() * s.ow();
    default: return s.cout;
  }
}

// Forward and backward on `backend`; dw and db start from `start` (to check they accumulate).
ConvResult RunConv(Backend<float>& backend, const Conv2dShape& s, float start = 0.0f) {
  auto stage = [&](const std::vector<float>& h) {
    Tensor t({static_cast<int64_t>(h.size())}, DType::kF32, backend.allocator());
    t.CopyFromHost(h.data());
    return t;
  };
  Tensor x = stage(Random<float>(Numel(s, 'x'), 1)), w = stage(Random<float>(Numel(s, 'w'), 2));
  Tensor b = stage(Random<float>(Numel(s, 'b'), 3)), dy = stage(Random<float>(Numel(s, 'y'), 4));
  Tensor y = stage(std::vector<float>(Numel(s, 'y'))), dx = stage(std::vector<float>(Numel(s, 'x'), 9.0f));
  Tensor dw = stage(std::vector<float>(Numel(s, 'w'), start)), db = stage(std::vector<float>(Numel(s, 'b'), start));
  backend.Conv2dForward(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(), s);
  backend.Conv2dBackward(x.data<float>(), w.data<float>(), dy.data<float>(), dx.data<float>(), dw.data<float>(),
                         db.data<float>(), s);
  auto get = [&](const Tensor& t, int64_t n) {
    std::vector<float> h(n);
    backend.CopyToHost(h.data(), t.data<float>(), n * sizeof(float));
    return h;
  };
  return {get(y, Numel(s, 'y')), get(dx, Numel(s, 'x')), get(dw, Numel(s, 'w')), get(db, Numel(s, 'b'))};
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

TEST(Conv2d, ReferenceGradientsMatchFiniteDifferences) {
  for (const Conv2dShape& s : {Shapes()[0], Shapes()[1]}) {  // the third: 22k inputs, two passes each
    ReferenceBackend<double> ref;
    std::vector<double> x = Random<double>(Numel(s, 'x'), 1), w = Random<double>(Numel(s, 'w'), 2);
    std::vector<double> b = Random<double>(Numel(s, 'b'), 3), dy = Random<double>(Numel(s, 'y'), 4);
    std::vector<double> y(Numel(s, 'y')), dx(x.size()), dw(w.size(), 0.0), db(b.size(), 0.0);
    auto loss = [&] {
      ref.Conv2dForward(x.data(), w.data(), b.data(), y.data(), s);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
      return l;
    };
    loss();
    ref.Conv2dBackward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), s);
    for (auto [name, value, grad] : {std::tuple{"x", &x, &dx}, std::tuple{"w", &w, &dw}, std::tuple{"b", &b, &db}}) {
      for (size_t i = 0; i < value->size(); ++i) {
        const double v = (*value)[i], h = 1e-6;
        (*value)[i] = v + h;
        const double lp = loss();
        (*value)[i] = v - h;
        const double lm = loss();
        (*value)[i] = v;
        EXPECT_NEAR((lp - lm) / (2 * h), (*grad)[i], 1e-7) << name << "[" << i << "]";
      }
    }
  }
}

TEST(Conv2d, CpuMatchesPyTorchsConv2d) {
  for (const Conv2dShape& s : Shapes()) {
    CpuBackend cpu;
    const ConvResult r = RunConv(cpu, s);
    const std::vector<float> x = Random<float>(Numel(s, 'x'), 1), w = Random<float>(Numel(s, 'w'), 2);
    const std::vector<float> b = Random<float>(Numel(s, 'b'), 3), dy = Random<float>(Numel(s, 'y'), 4);
    const std::vector<int32_t> stride = {static_cast<int32_t>(s.sh), static_cast<int32_t>(s.sw)};
    const std::vector<int32_t> padding = {static_cast<int32_t>(s.ph), static_cast<int32_t>(s.pw)};
    const std::vector<int64_t> xs = {s.n, s.cin, s.h, s.w}, ws = {s.cout, s.cin, s.kh, s.kw},
                               ys = {s.n, s.cout, s.oh(), s.ow()};
    std::vector<safetensors::TensorView> views = {
        safetensors::F32View("input.x", xs, x),
        safetensors::F32View("input.w", ws, w),
        safetensors::F32View("input.b", {s.cout}, b),
        safetensors::F32View("input.dy", ys, dy),
        {"input.stride", safetensors::DType::kI32, {2}, std::as_bytes(std::span(stride))},
        {"input.padding", safetensors::DType::kI32, {2}, std::as_bytes(std::span(padding))},
        safetensors::F32View("ours.y", ys, r.y),
        safetensors::F32View("ours.dx", xs, r.dx),
        safetensors::F32View("ours.dw", ws, r.dw),
        safetensors::F32View("ours.db", {s.cout}, r.db)};
    testing::TempDir dir;
    const std::string path = dir.path() + "/case.safetensors";
    ASSERT_TRUE(safetensors::WriteFile(path, views, {}).ok());
    int status = 0;
    const std::string out = testing::RunShellCommand(
        "/usr/bin/python3 " + testing::SourceDir() + "/tests/trainer/reference/conv2d_reference.py " + path, &status);
    std::printf("%s", out.c_str());
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("worst:"), std::string::npos) << out;
  }
}

TEST(Conv2d, CpuEqualsTheReferenceAndAccumulatesItsParameterGradients) {
  for (const Conv2dShape& s : Shapes()) {
    CpuBackend cpu;
    ReferenceBackend<float> ref;
    const ConvResult c = RunConv(cpu, s), r = RunConv(ref, s);
    EXPECT_LT(MaxAbsDiff(c.y, r.y), 1e-5);
    EXPECT_LT(MaxAbsDiff(c.dx, r.dx), 1e-5);
    EXPECT_LT(MaxAbsDiff(c.dw, r.dw), 1e-4);
    EXPECT_LT(MaxAbsDiff(c.db, r.db), 1e-4);
    // dw and db add to what they held; dx is overwritten (RunConv fills it with 9 first).
    const ConvResult a = RunConv(cpu, s, 0.5f);
    for (size_t i = 0; i < a.dw.size(); ++i) EXPECT_NEAR(a.dw[i], c.dw[i] + 0.5f, 1e-5);
    for (size_t i = 0; i < a.db.size(); ++i) EXPECT_NEAR(a.db[i], c.db[i] + 0.5f, 1e-5);
    EXPECT_EQ(a.dx, c.dx);
  }
}

// With bf16 products (Conv2dShape::compute = kBF16) on a CPU that has them, x, w and dy are
// rounded to bf16 and summed in fp32: the result equals the reference given the same rounding
// (up to fp32 summation) and differs from the fp32 convolution by what the rounding makes. On a
// CPU without them the convolution runs in fp32 and equals the fp32 reference.
TEST(Conv2d, Bf16ProductsEqualTheReferenceWithRoundedOperands) {
  for (Conv2dShape s : Shapes()) {
    s.compute = DType::kBF16;
    CpuBackend cpu;
    const bool bf16 = cpu.conv_runs_in_bf16(s);
    if (cpu::HasAvx512Bf16()) {
      EXPECT_TRUE(bf16) << "oneDNN chose " << cpu.conv_implementation(s);
    }
    Conv2dShape f32 = s;
    f32.compute = DType::kF32;
    ReferenceBackend<float> ref;
    const ConvResult c = RunConv(cpu, s), r = RunConv(ref, bf16 ? s : f32);
    EXPECT_LT(MaxAbsDiff(c.y, r.y), 1e-5) << cpu.conv_implementation(s);
    EXPECT_LT(MaxAbsDiff(c.dx, r.dx), 1e-5);
    EXPECT_LT(MaxAbsDiff(c.dw, r.dw), 1e-4);
    EXPECT_LT(MaxAbsDiff(c.db, r.db), 1e-4);
    if (bf16) {
      const ConvResult full = RunConv(ref, f32);
      EXPECT_GT(MaxAbsDiff(c.y, full.y), 1e-3) << "the operands were not rounded to bf16";
      EXPECT_GT(MaxAbsDiff(c.dw, full.dw), 1e-3);
    }
  }
}

class Conv2dBackends : public ::testing::TestWithParam<std::string> {};

TEST_P(Conv2dBackends, EqualTheCpu) {
  std::string why;
  std::unique_ptr<Backend<float>> backend = testing::MakeTestBackend(GetParam(), &why);
  if (!backend) GTEST_SKIP() << why;
  const double tolerance = GetParam() == "guarded" ? 0 : 1e-4;
  for (const Conv2dShape& s : Shapes()) {
    CpuBackend cpu;
    const ConvResult want = RunConv(cpu, s), got = RunConv(*backend, s);
    EXPECT_LE(MaxAbsDiff(got.y, want.y), tolerance);
    EXPECT_LE(MaxAbsDiff(got.dx, want.dx), tolerance);
    EXPECT_LE(MaxAbsDiff(got.dw, want.dw), tolerance);
    EXPECT_LE(MaxAbsDiff(got.db, want.db), tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Conv2dBackends, ::testing::Values("guarded", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sf
