#include "trainer/kernels/cpu/gemm_onednn.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "trainer/core/allocator.h"
#include "trainer/kernels/cpu/cpu_backend.h"

namespace sf {

using dnnl::memory;

namespace {

memory::data_type ToDnnl(DType t) {
  switch (t) {
    case DType::kBF16: return memory::data_type::bf16;
    case DType::kF16: return memory::data_type::f16;
    default: return memory::data_type::f32;
  }
}

// Descriptor of a logical rows x cols operand (batched when batch > 1).
memory::desc Desc(int64_t batch, int64_t rows, int64_t cols, const GemmOperand& x, DType dt) {
  const int64_t rs = x.transposed ? 1 : x.ld, cs = x.transposed ? x.ld : 1;
  if (batch == 1) return memory::desc({rows, cols}, ToDnnl(dt), {rs, cs});
  return memory::desc({batch, rows, cols}, ToDnnl(dt), {x.batch_stride, rs, cs});
}

// Number of elements an operand spans (for widening f16 to f32 in the fallback).
int64_t Extent(int64_t batch, int64_t rows, int64_t cols, const GemmOperand& x) {
  const int64_t one = x.transposed ? (cols - 1) * x.ld + rows : (rows - 1) * x.ld + cols;
  return (batch - 1) * x.batch_stride + one;
}

}  // namespace

bool OneDnnGemm::Key::operator==(const Key& o) const {
  return std::memcmp(v, o.v, sizeof(v)) == 0;
}
size_t OneDnnGemm::KeyHash::operator()(const Key& k) const {
  size_t h = 1469598103934665603ull;
  for (int64_t x : k.v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
  return h;
}

OneDnnGemm::OneDnnGemm() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

bool OneDnnGemm::PrepackEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SF_GEMM_PREPACK");
    return !(v && std::string(v) == "0");
  }();
  return enabled;
}

OneDnnGemm::~OneDnnGemm() {
  CachingAllocator::Cpu().Free(scratch_);
  for (auto& [data, copies] : packed_) {
    for (Packed& p : copies) CachingAllocator::Cpu().Free(p.buffer);
  }
}

int64_t OneDnnGemm::packed_copies() const {
  int64_t n = 0;
  for (const auto& [data, copies] : packed_) n += static_cast<int64_t>(copies.size());
  return n;
}

const void* OneDnnGemm::PackedB(Entry& e, const void* data) {
  std::vector<Packed>& copies = packed_[data];
  Packed* found = nullptr;
  for (Packed& p : copies) {
    if (p.src_desc == e.b && p.packed_desc == e.b_packed) found = &p;
  }
  if (!found) {
    Packed& p = copies.emplace_back();
    p.src_desc = e.b;
    p.packed_desc = e.b_packed;
    p.buffer = CachingAllocator::Cpu().Allocate(e.b_packed.get_size());
    p.src = memory(e.b, engine_, const_cast<void*>(data));
    p.dst = memory(e.b_packed, engine_, p.buffer);
    p.reorder = dnnl::reorder(p.src, p.dst);
    found = &p;
  }
  Packed& p = *found;
  if (p.version != weights_version_) {
    p.reorder.execute(stream_, p.src, p.dst);
    stream_.wait();
    p.version = weights_version_;
    ++packs_;
  }
  return p.buffer;
}

OneDnnGemm::Entry& OneDnnGemm::Get(int64_t batch, int64_t m, int64_t n, int64_t k,
                                   const GemmOperand& a, const GemmOperand& b, int64_t ldc,
                                   int64_t stride_c, float alpha, float beta, DType dt,
                                   const Epilogue& ep) {
  Key key{};
  int32_t ab, bb;
  std::memcpy(&ab, &alpha, 4);
  std::memcpy(&bb, &beta, 4);
  const bool pack = PrepackEnabled() && b.constant && batch == 1;
  const int64_t vals[19] = {batch, m, n, k, a.transposed, a.ld, a.batch_stride, b.transposed,
                            b.ld, b.batch_stride, ldc, stride_c, ab, bb,
                            static_cast<int64_t>(dt), pack, ep.bias,
                            static_cast<int64_t>(ep.act), static_cast<int64_t>(ep.c_dtype)};
  std::memcpy(key.v, vals, sizeof(vals));
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Entry e;
  e.a = Desc(batch, m, k, a, dt);
  e.b = Desc(batch, k, n, b, dt);
  GemmOperand cd{nullptr, DType::kF32, false, ldc, stride_c};
  e.c = Desc(batch, m, n, cd, ep.c_dtype);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  dnnl::post_ops po;
  if (beta != 0.0f) po.append_sum(beta);
  if (ep.act == GemmActivation::kRelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (ep.act == GemmActivation::kGelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  if (po.len() > 0) attr.set_post_ops(po);
  const memory::desc bias_desc({1, n}, memory::data_type::f32, {n, 1});
  try {
    // A constant B lets oneDNN choose its layout (format_tag::any); it is reordered once per
    // WeightsChanged() instead of being re-blocked inside every matmul.
    const memory::desc b_any =
        pack ? memory::desc({k, n}, ToDnnl(dt), memory::format_tag::any) : e.b;
    dnnl::matmul::desc d = ep.bias ? dnnl::matmul::desc(e.a, b_any, bias_desc, e.c)
                                   : dnnl::matmul::desc(e.a, b_any, e.c);
    dnnl::matmul::primitive_desc pd(d, attr, engine_);
    e.prim = dnnl::matmul(pd);
    if (pack) {
      e.b_packed = pd.weights_desc();
      e.packed = e.b_packed != e.b;
    }
    e.scratch_bytes = pd.scratchpad_desc().get_size();
    if (e.scratch_bytes > scratch_size_) {
      CachingAllocator::Cpu().Free(scratch_);
      scratch_ = CachingAllocator::Cpu().Allocate(e.scratch_bytes);
      scratch_size_ = e.scratch_bytes;
      scratch_mem_ = memory(memory::desc({static_cast<int64_t>(scratch_size_)},
                                         memory::data_type::u8, memory::format_tag::a),
                            engine_, scratch_);
    }
    e.am = memory(e.a, engine_, DNNL_MEMORY_NONE);
    e.bm = memory(e.packed ? e.b_packed : e.b, engine_, DNNL_MEMORY_NONE);
    e.cm = memory(e.c, engine_, DNNL_MEMORY_NONE);
    if (ep.bias) e.biasm = memory(bias_desc, engine_, DNNL_MEMORY_NONE);
    e.ok = true;
  } catch (const dnnl::error&) {
    e.ok = false;  // e.g. no f16 (or bf16) matmul on this CPU: the caller widens to f32
  }
  ++created_;
  return cache_.emplace(key, std::move(e)).first->second;
}

void OneDnnGemm::Run(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                     const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
                     float beta) {
  if (m == 0 || n == 0) return;
  const DType dt = a.dtype;
  Entry& e = Get(batch, m, n, k, a, b, ldc, stride_c, alpha, beta, dt, Epilogue{});
  if (!e.ok && (dt == DType::kF16 || dt == DType::kBF16)) {
    // No matmul of this type on this CPU (f16 often; bf16 before AVX-512, e.g. Zen 3): widen
    // both operands to f32 (exact) and run the f32 GEMM with the same strides. The products
    // are those of the half-precision operands, accumulated in f32, as the native kernels do.
    const int64_t na = Extent(batch, m, k, a), nb = Extent(batch, k, n, b);
    if (static_cast<int64_t>(widen_a_.size()) < na) widen_a_.resize(na);
    if (static_cast<int64_t>(widen_b_.size()) < nb) widen_b_.resize(nb);
    auto widen = dt == DType::kF16 ? CastF16ToF32 : CastBf16ToF32;
    widen(static_cast<const uint16_t*>(a.data), widen_a_.data(), na);
    widen(static_cast<const uint16_t*>(b.data), widen_b_.data(), nb);
    GemmOperand a32 = a, b32 = b;
    b32.constant = false;  // the widened copy lives in a reused scratch buffer
    a32.data = widen_a_.data();
    a32.dtype = DType::kF32;
    b32.data = widen_b_.data();
    b32.dtype = DType::kF32;
    return Run(batch, m, n, k, a32, b32, c, ldc, stride_c, alpha, beta);
  }
  if (!e.ok) std::abort();  // f32 matmuls always exist on x86-64
  Execute(e, a.data, b.data, c, nullptr);
}

bool OneDnnGemm::RunBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                            const GemmOperand& b, const float* bias, GemmActivation act, void* c,
                            DType c_dtype) {
  if (m == 0 || n == 0) return true;
  Entry& e = Get(1, m, n, k, a, b, n, 0, 1.0f, 0.0f, a.dtype, Epilogue{bias != nullptr, act, c_dtype});
  if (!e.ok) return false;
  Execute(e, a.data, b.data, c, bias);
  return true;
}

void OneDnnGemm::Execute(Entry& e, const void* a, const void* b, void* c, const float* bias) {
  e.am.set_data_handle(const_cast<void*>(a));
  e.bm.set_data_handle(const_cast<void*>(e.packed ? PackedB(e, b) : b));
  e.cm.set_data_handle(c);
  // The C API takes a plain argument array (the C++ one builds an unordered_map per call).
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, e.am.get()},
                             {DNNL_ARG_WEIGHTS, e.bm.get()},
                             {DNNL_ARG_DST, e.cm.get()}};
  int nargs = 3;
  if (bias) {
    e.biasm.set_data_handle(const_cast<float*>(bias));
    args[nargs++] = {DNNL_ARG_BIAS, e.biasm.get()};
  }
  if (e.scratch_bytes) args[nargs++] = {DNNL_ARG_SCRATCHPAD, scratch_mem_.get()};
  dnnl_primitive_execute(e.prim.get(), stream_.get(), nargs, args);
  stream_.wait();
}

}  // namespace sf
