// NcclConnect and the NCCL Communicator on one rank (one GPU): every dtype's allreduce is the
// identity, an f32 sum sent as bf16 / f16 comes back rounded to that type, Broadcast and
// Barrier work, stats count wire bytes, bad arguments are refused without breaking the
// communicator, and a creation whose peer never arrives ends within the timeout. Without a GPU
// every test that needs one skips, with NcclAvailable's reason.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/distributed/nccl_communicator.h"

namespace sf::dist {
namespace {

// Every rank's payload is ours: a world of one.
Result<std::vector<std::string>> AloneRendezvous(const std::string& /*round*/,
                                                 const std::string& payload) {
  return std::vector<std::string>{payload};
}

// One device allocation with host round trips. The communicator's stream does not wait for any
// other stream (nccl_communicator.h), and a cudaMemcpy from pageable memory may return before
// its DMA is done, so Upload waits for the device: the buffer is complete before each call.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { error_ = cudaMalloc(&ptr_, bytes); }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  cudaError_t error() const { return error_; }
  void* get() const { return ptr_; }

  template <typename T>
  cudaError_t Upload(const std::vector<T>& host) {
    const cudaError_t e =
        cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return e != cudaSuccess ? e : cudaDeviceSynchronize();
  }
  template <typename T>
  std::vector<T> Download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    const cudaError_t e = cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost);
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
    return host;
  }

 private:
  size_t bytes_;
  void* ptr_ = nullptr;
  cudaError_t error_ = cudaSuccess;
};

uint16_t Bf16Bits(float x) {
  const __nv_bfloat16_raw raw = __float2bfloat16_rn(x);
  return raw.x;
}
float Bf16Round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
uint16_t F16Bits(float x) {
  const __half_raw raw = __float2half_rn(x);
  return raw.x;
}
float F16Round(float x) { return __half2float(__float2half_rn(x)); }

// Values that bf16 and f16 do not hold exactly (so rounding shows), of both signs.
std::vector<float> Inexact(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = (i % 2 ? -1.0f : 1.0f) * (1.0f + 0.001234f * i);
  return v;
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!NcclAvailable(&why)) GTEST_SKIP() << why;
    NcclConnectOptions options;
    options.rank = 0;
    options.world_size = 1;
    options.rendezvous = AloneRendezvous;
    options.timeout = std::chrono::seconds(60);
    Result<std::unique_ptr<Communicator>> c = NcclConnect(options);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    comm_ = std::move(c).value();
  }

  // Allreduces `values` (in place, on the device) and returns what came back.
  template <typename T>
  std::vector<T> Reduce(const std::vector<T>& values, DType dtype, ReduceOp op = ReduceOp::kSum,
                        DType wire = DType::kF32) {
    DeviceBuffer buf(values.size() * sizeof(T));
    EXPECT_EQ(buf.error(), cudaSuccess) << cudaGetErrorString(buf.error());
    EXPECT_EQ(buf.Upload(values), cudaSuccess);
    std::unique_ptr<Work> work =
        comm_->AllreduceAsync(buf.get(), static_cast<int64_t>(values.size()), dtype, op, wire);
    const Status st = work->Wait();
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_GE(work->busy_seconds(), 0.0);
    return buf.Download<T>();
  }

  std::unique_ptr<Communicator> comm_;
};

TEST(NcclConnectTest, RejectsRankOutsideWorld) {
  NcclConnectOptions options;
  options.rank = 2;
  options.world_size = 2;
  options.rendezvous = AloneRendezvous;
  Result<std::unique_ptr<Communicator>> c = NcclConnect(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().ToString();
}

TEST(NcclConnectTest, WithoutGpuReportsWhy) {
  std::string why;
  if (NcclAvailable(&why)) GTEST_SKIP() << "a GPU is visible";
  EXPECT_FALSE(why.empty());
  NcclConnectOptions options;
  options.rendezvous = AloneRendezvous;
  Result<std::unique_ptr<Communicator>> c = NcclConnect(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().ToString();
}

TEST(NcclConnectTest, RejectsMalformedId) {
  std::string why;
  if (!NcclAvailable(&why)) GTEST_SKIP() << why;
  NcclConnectOptions options;
  options.rank = 1;
  options.world_size = 2;
  options.rendezvous = [](const std::string&,
                          const std::string&) -> Result<std::vector<std::string>> {
    return std::vector<std::string>{"not an id", ""};
  };
  Result<std::unique_ptr<Communicator>> c = NcclConnect(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("NCCL id"), std::string::npos) << c.status().ToString();
}

TEST(NcclConnectTest, CreationEndsWithinTimeoutWhenPeerNeverArrives) {
  std::string why;
  if (!NcclAvailable(&why)) GTEST_SKIP() << why;
  NcclConnectOptions options;
  options.rank = 0;
  options.world_size = 2;  // rank 1 never comes
  options.rendezvous = AloneRendezvous;
  options.timeout = std::chrono::seconds(3);
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Communicator>> c = NcclConnect(options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().ToString();
  EXPECT_LT(seconds, 30.0);
}

TEST_F(NcclCommunicatorTest, DescribesOneRank) {
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->world_size(), 1);
  EXPECT_EQ(comm_->backend_name(), "nccl");
  EXPECT_FALSE(comm_->broken());
  EXPECT_EQ(comm_->timeout(), std::chrono::seconds(60));
}

TEST_F(NcclCommunicatorTest, AllreduceOverOneRankIsIdentityForEveryDType) {
  const std::vector<float> f32 = Inexact(1000);
  EXPECT_EQ(Reduce(f32, DType::kF32), f32);
  EXPECT_EQ(Reduce(f32, DType::kF32, ReduceOp::kMax), f32);

  std::vector<double> f64(777);
  for (size_t i = 0; i < f64.size(); ++i) f64[i] = 1e-3 * static_cast<double>(i) - 0.3;
  EXPECT_EQ(Reduce(f64, DType::kF64), f64);
  EXPECT_EQ(Reduce(f64, DType::kF64, ReduceOp::kMax), f64);

  std::vector<int32_t> i32(513);
  for (size_t i = 0; i < i32.size(); ++i) i32[i] = static_cast<int32_t>(i * 7919) - 1000000;
  EXPECT_EQ(Reduce(i32, DType::kI32), i32);
  EXPECT_EQ(Reduce(i32, DType::kI32, ReduceOp::kMax), i32);

  std::vector<uint16_t> bf16, f16;
  for (float x : f32) {
    bf16.push_back(Bf16Bits(x));
    f16.push_back(F16Bits(x));
  }
  EXPECT_EQ(Reduce(bf16, DType::kBF16), bf16);
  EXPECT_EQ(Reduce(f16, DType::kF16), f16);
  EXPECT_FALSE(comm_->broken());
}

TEST_F(NcclCommunicatorTest, F32SumOnBf16WireComesBackRoundedToBf16) {
  const std::vector<float> in = Inexact(4097);  // not a multiple of the block size
  const std::vector<float> out = Reduce(in, DType::kF32, ReduceOp::kSum, DType::kBF16);
  ASSERT_EQ(out.size(), in.size());
  int mismatches = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    // The project's own rounding (dtype.h) and CUDA's must agree, and be what came back.
    EXPECT_EQ(Bf16ToFloat(FloatToBf16(in[i])), Bf16Round(in[i]));
    if (out[i] != Bf16Round(in[i]) && ++mismatches <= 5) {
      ADD_FAILURE() << "element " << i << ": " << out[i] << " != bf16(" << in[i]
                    << ") = " << Bf16Round(in[i]);
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_NE(out, in);  // the rounding did happen
}

TEST_F(NcclCommunicatorTest, F32SumOnF16WireComesBackRoundedToF16) {
  const std::vector<float> in = Inexact(300);
  const std::vector<float> out = Reduce(in, DType::kF32, ReduceOp::kSum, DType::kF16);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], F16Round(in[i])) << "element " << i;
}

TEST_F(NcclCommunicatorTest, WireBufferGrowsAndShrinkingCallsReuseIt) {
  // Larger, then smaller, then larger again: each result is right whatever the buffer's history.
  for (int n : {100, 5000, 10, 20000}) {
    const std::vector<float> in = Inexact(n);
    const std::vector<float> out = Reduce(in, DType::kF32, ReduceOp::kSum, DType::kBF16);
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i], Bf16Round(in[i])) << "n " << n << " element " << i;
  }
}

TEST_F(NcclCommunicatorTest, AsyncCollectivesInFlightTogetherFinishInOrder) {
  const std::vector<float> a = Inexact(2048), b = Inexact(64);
  DeviceBuffer da(a.size() * sizeof(float)), db(b.size() * sizeof(float));
  ASSERT_EQ(da.Upload(a), cudaSuccess);
  ASSERT_EQ(db.Upload(b), cudaSuccess);
  auto wa = comm_->AllreduceAsync(da.get(), static_cast<int64_t>(a.size()), DType::kF32,
                                  ReduceOp::kSum, DType::kBF16);
  auto wb = comm_->AllreduceAsync(db.get(), static_cast<int64_t>(b.size()), DType::kF32);
  ASSERT_TRUE(wb->Wait().ok());
  ASSERT_TRUE(wa->Wait().ok());
  EXPECT_TRUE(wa->Wait().ok());  // a second Wait returns the same
  EXPECT_EQ(db.Download<float>(), b);
  const std::vector<float> got = da.Download<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(got[i], Bf16Round(a[i]));
}

TEST_F(NcclCommunicatorTest, StatsCountWireBytes) {
  EXPECT_EQ(comm_->stats().calls, 0);
  Reduce(Inexact(100), DType::kF32, ReduceOp::kSum, DType::kBF16);  // 200 bytes on the wire
  AllreduceStats s = comm_->stats();
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.bytes, 200);
  Reduce(Inexact(100), DType::kF32);                  // 400 more
  Reduce(std::vector<double>(10, 1.0), DType::kF64);  // 80 more
  s = comm_->stats();
  EXPECT_EQ(s.calls, 3);
  EXPECT_EQ(s.bytes, 680);
  EXPECT_GE(s.busy_seconds, 0.0);
  // Broadcast and Barrier are not allreduces.
  ASSERT_TRUE(comm_->Barrier().ok());
  EXPECT_EQ(comm_->stats().bytes, 680);
}

TEST_F(NcclCommunicatorTest, BroadcastFromRootKeepsItsBytes) {
  std::vector<uint8_t> bytes(1001);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + 7);
  DeviceBuffer buf(bytes.size());
  ASSERT_EQ(buf.Upload(bytes), cudaSuccess);
  const Status st = comm_->Broadcast(buf.get(), static_cast<int64_t>(bytes.size()), 0);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(buf.Download<uint8_t>(), bytes);
}

TEST_F(NcclCommunicatorTest, BarrierPasses) {
  for (int i = 0; i < 3; ++i) {
    const Status st = comm_->Barrier();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_FALSE(comm_->broken());
}

TEST_F(NcclCommunicatorTest, BadArgumentsAreRefusedWithoutBreaking) {
  DeviceBuffer buf(64);
  Status st = comm_->AllreduceAsync(buf.get(), 16, DType::kU8)->Wait();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = comm_->AllreduceAsync(buf.get(), 16, DType::kBF16, ReduceOp::kMax)->Wait();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = comm_->AllreduceAsync(buf.get(), 16, DType::kF64, ReduceOp::kSum, DType::kBF16)->Wait();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = comm_->Broadcast(buf.get(), 64, 1);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_FALSE(comm_->broken());
  // Still usable.
  EXPECT_EQ(Reduce(std::vector<float>{1, 2, 3}, DType::kF32), (std::vector<float>{1, 2, 3}));
}

// Pageable host memory (the trainer's scalars and messages) goes through a device stage: the
// results land back in the host buffer, narrow wires included, and stats count it.
TEST_F(NcclCommunicatorTest, HostMemoryIsStagedThroughTheDevice) {
  EXPECT_TRUE(comm_->device_buffers());
  std::vector<double> scalars = {1.5, -2.25, 1e300};
  ASSERT_TRUE(comm_->Allreduce(scalars.data(), 3, DType::kF64).ok());
  EXPECT_EQ(scalars, (std::vector<double>{1.5, -2.25, 1e300}));
  int32_t flag = 7;
  ASSERT_TRUE(comm_->Allreduce(&flag, 1, DType::kI32, ReduceOp::kMax).ok());
  EXPECT_EQ(flag, 7);
  std::vector<float> f(1000, 1.0f + 1.0f / 1024);  // not a bf16 value: rounds on the wire
  const int64_t calls = comm_->stats().calls;
  ASSERT_TRUE(comm_->Allreduce(f.data(), 1000, DType::kF32, ReduceOp::kSum, DType::kBF16).ok());
  EXPECT_EQ(f[999], 1.0f);
  EXPECT_EQ(comm_->stats().calls, calls + 1);
  // Larger than any earlier stage: it grows.
  std::vector<char> msg(1 << 20, 'x');
  ASSERT_TRUE(comm_->Broadcast(msg.data(), static_cast<int64_t>(msg.size()), 0).ok());
  EXPECT_EQ(msg[12345], 'x');
  EXPECT_FALSE(comm_->broken());
}

TEST_F(NcclCommunicatorTest, EmptyAllreduceSucceeds) {
  const Status st = comm_->AllreduceAsync(nullptr, 0, DType::kF32)->Wait();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace sf::dist
