#include "trainer/kernels/cpu/conv_onednn.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

namespace sf {

using dnnl::memory;

namespace {

// oneDNN's reference kernels (what it offers for bf16 without bf16 hardware) are far slower than
// fp32 in its JIT ones.
bool IsReference(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

}  // namespace

struct OneDnnConv::Entry {
  bool bf16 = false;
  memory::desc x, w, b, y;  // the caller's: plain NCHW / OIHW / NCHW, fp32
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  // The reorder of each operand into a primitive's layout (or of a result out of it), made on
  // first use: the forward's x, w and y; the data gradient's dy, w and dx; the weights
  // gradient's x, dy and dw.
  std::unique_ptr<dnnl::reorder> rfx, rfw, rfy, rddy, rdw, rddx, rwx, rwdy, rwdw;
  // Where each slot's staged operand lies in the scratch arena, in the forward and the backward.
  size_t offset[2][kSlots] = {};
};

OneDnnConv::OneDnnConv() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}
OneDnnConv::~OneDnnConv() = default;

OneDnnConv::Entry& OneDnnConv::Get(const Conv2dShape& s) {
  const bool want_bf16 = s.compute == DType::kBF16;
  const auto key = std::make_tuple(s.n, s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, want_bf16);
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto e = std::make_unique<Entry>();
  const auto f32 = memory::data_type::f32;
  e->x = memory::desc({s.n, s.cin, s.h, s.w}, f32, memory::format_tag::nchw);
  e->w = memory::desc({s.cout, s.cin, s.kh, s.kw}, f32, memory::format_tag::oihw);
  e->b = memory::desc({s.cout}, f32, memory::format_tag::a);
  e->y = memory::desc({s.n, s.cout, s.oh(), s.ow()}, f32, memory::format_tag::nchw);
  const memory::dims strides = {s.sh, s.sw}, padding = {s.ph, s.pw};
  const auto algo = dnnl::algorithm::convolution_direct;
  // The primitives for operands of type `in` (x, w, dy), sums and results in fp32.
  auto build = [&](memory::data_type in) {
    const auto any = memory::format_tag::any;
    const memory::desc x(e->x.dims(), in, any), w(e->w.dims(), in, any), b = e->b;
    const memory::desc y(e->y.dims(), f32, any), dy(e->y.dims(), in, any), dx(e->x.dims(), f32, any);
    const memory::desc dw(e->w.dims(), f32, any);
    e->fwd_pd = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, x, w, b, y, strides, padding,
                                        padding),
        engine_);
    e->bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(algo, dx, w, dy, strides, padding, padding), engine_, e->fwd_pd);
    e->bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
        dnnl::convolution_backward_weights::desc(algo, x, dw, b, dy, strides, padding, padding), engine_,
        e->fwd_pd);
    return !IsReference(e->fwd_pd.impl_info_str()) && !IsReference(e->bwd_data_pd.impl_info_str()) &&
           !IsReference(e->bwd_weights_pd.impl_info_str());
  };
  e->bf16 = false;
  if (want_bf16) {
    try {
      e->bf16 = build(memory::data_type::bf16);
    } catch (const dnnl::error&) {  // no bf16 convolution at all on this CPU
    }
  }
  if (!e->bf16) build(f32);
  // The arena's plan: each phase's slots one after the other, each as large as the largest
  // operand it may hold.
  const size_t sizes[2][kSlots] = {
      {e->fwd_pd.src_desc().get_size(), e->fwd_pd.dst_desc().get_size(), 0, e->fwd_pd.weights_desc().get_size()},
      {std::max(e->bwd_data_pd.diff_src_desc().get_size(), e->bwd_weights_pd.src_desc().get_size()),
       e->bwd_weights_pd.diff_dst_desc().get_size(), e->bwd_data_pd.diff_dst_desc().get_size(),
       std::max(e->bwd_data_pd.weights_desc().get_size(), e->bwd_weights_pd.diff_weights_desc().get_size())}};
  for (int phase = 0; phase < 2; ++phase) {
    size_t end = 0;
    for (int slot = 0; slot < kSlots; ++slot) {
      e->offset[phase][slot] = end;
      end += (sizes[phase][slot] + 63) / 64 * 64;
    }
    if (end > arena_bytes_) {
      stream_.wait();  // nothing queued may still use the arena given back
      arena_.reset(static_cast<char*>(std::aligned_alloc(64, end)));
      if (!arena_) throw std::bad_alloc();
      arena_bytes_ = end;
    }
  }
  e->fwd = dnnl::convolution_forward(e->fwd_pd);
  e->bwd_data = dnnl::convolution_backward_data(e->bwd_data_pd);
  e->bwd_weights = dnnl::convolution_backward_weights(e->bwd_weights_pd);
  return *cache_.emplace(key, std::move(e)).first->second;
}

memory OneDnnConv::Scratch(const Entry& e, Phase phase, Slot slot, const memory::desc& d) {
  return memory(d, engine_, arena_.get() + e.offset[phase][slot]);
}

memory OneDnnConv::Stage(const Entry& e, Phase phase, const memory& user, const memory::desc& want, Slot slot,
                         std::unique_ptr<dnnl::reorder>& reorder) {
  if (user.get_desc() == want) return user;
  memory staged = Scratch(e, phase, slot, want);
  if (!reorder) reorder = std::make_unique<dnnl::reorder>(user, staged);
  reorder->execute(stream_, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, staged}});
  return staged;
}

std::string OneDnnConv::ForwardImplementation(const Conv2dShape& s) { return Get(s).fwd_pd.impl_info_str(); }

bool OneDnnConv::RunsInBf16(const Conv2dShape& s) { return Get(s).bf16; }

void OneDnnConv::Forward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s) {
  Entry& e = Get(s);
  // A null bias is a zero one (the primitive was created with a bias).
  if (!bias) dbias_.assign(s.cout, 0.0f);
  memory xm(e.x, engine_, const_cast<float*>(x)), wm(e.w, engine_, const_cast<float*>(w));
  memory bm(e.b, engine_, const_cast<float*>(bias ? bias : dbias_.data())), ym(e.y, engine_, y);
  const memory src = Stage(e, kForward, xm, e.fwd_pd.src_desc(), kImage, e.rfx);
  const memory weights = Stage(e, kForward, wm, e.fwd_pd.weights_desc(), kWeights, e.rfw);
  const bool direct = e.fwd_pd.dst_desc() == e.y;
  const memory dst = direct ? ym : Scratch(e, kForward, kOutput, e.fwd_pd.dst_desc());
  e.fwd.execute(stream_, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, dst}});
  if (!direct) {
    if (!e.rfy) e.rfy = std::make_unique<dnnl::reorder>(dst, ym);
    e.rfy->execute(stream_, {{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, ym}});
  }
  stream_.wait();
}

void OneDnnConv::Backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* dbias,
                          const Conv2dShape& s) {
  Entry& e = Get(s);
  memory xm(e.x, engine_, const_cast<float*>(x)), wm(e.w, engine_, const_cast<float*>(w));
  memory dym(e.y, engine_, const_cast<float*>(dy));
  // dy in the weights gradient's layout; the data gradient reuses it when it wants the same one.
  const memory wdy = Stage(e, kBackward, dym, e.bwd_weights_pd.diff_dst_desc(), kOutput, e.rwdy);
  if (dx) {
    memory dxm(e.x, engine_, dx);
    const memory diff_dst = e.bwd_data_pd.diff_dst_desc() == wdy.get_desc()
                                ? wdy
                                : Stage(e, kBackward, dym, e.bwd_data_pd.diff_dst_desc(), kOutput2, e.rddy);
    const memory weights = Stage(e, kBackward, wm, e.bwd_data_pd.weights_desc(), kWeights, e.rdw);
    const bool direct = e.bwd_data_pd.diff_src_desc() == e.x;
    const memory diff_src = direct ? dxm : Scratch(e, kBackward, kImage, e.bwd_data_pd.diff_src_desc());
    e.bwd_data.execute(stream_,
                       {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DIFF_SRC, diff_src}});
    if (!direct) {
      if (!e.rddx) e.rddx = std::make_unique<dnnl::reorder>(diff_src, dxm);
      e.rddx->execute(stream_, {{DNNL_ARG_FROM, diff_src}, {DNNL_ARG_TO, dxm}});
    }
  }
  const int64_t nw = s.cout * s.cin * s.kh * s.kw;
  dw_.resize(nw);
  dbias_.resize(s.cout);
  memory dwm(e.w, engine_, dw_.data()), dbm(e.b, engine_, dbias_.data());
  // dx went out of kImage above (the stream runs in order): x may take it.
  const memory src = Stage(e, kBackward, xm, e.bwd_weights_pd.src_desc(), kImage, e.rwx);
  const bool direct = e.bwd_weights_pd.diff_weights_desc() == e.w;
  const memory diff_weights = direct ? dwm : Scratch(e, kBackward, kWeights, e.bwd_weights_pd.diff_weights_desc());
  e.bwd_weights.execute(stream_, {{DNNL_ARG_SRC, src},
                                  {DNNL_ARG_DIFF_DST, wdy},
                                  {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
                                  {DNNL_ARG_DIFF_BIAS, dbm}});
  if (!direct) {
    if (!e.rwdw) e.rwdw = std::make_unique<dnnl::reorder>(diff_weights, dwm);
    e.rwdw->execute(stream_, {{DNNL_ARG_FROM, diff_weights}, {DNNL_ARG_TO, dwm}});
  }
  stream_.wait();
  for (int64_t i = 0; i < nw; ++i) dw[i] += dw_[i];
  if (!dbias) return;
  if (!e.bf16) {
    for (int64_t i = 0; i < s.cout; ++i) dbias[i] += dbias_[i];
    return;
  }
  // oneDNN's bias gradient is the sum of the rounded dy; the bias' own is the sum of dy.
  const int64_t plane = s.oh() * s.ow();
#pragma omp parallel for
  for (int64_t o = 0; o < s.cout; ++o) {
    float sum = 0.0f;
    for (int64_t n = 0; n < s.n; ++n) {
      const float* row = dy + (n * s.cout + o) * plane;
      for (int64_t i = 0; i < plane; ++i) sum += row[i];
    }
    dbias[o] += sum;
  }
}

}  // namespace sf
