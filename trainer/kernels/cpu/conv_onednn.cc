#include "trainer/kernels/cpu/conv_onednn.h"

namespace sf {

using dnnl::memory;

struct OneDnnConv::Entry {
  memory::desc x, w, b, y;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
};

OneDnnConv::OneDnnConv() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}
OneDnnConv::~OneDnnConv() = default;

OneDnnConv::Entry& OneDnnConv::Get(const Conv2dShape& s) {
  const auto key = std::make_tuple(s.n, s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw);
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
  dnnl::convolution_forward::primitive_desc fwd_pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, e->x, e->w, e->b, e->y, strides,
                                      padding, padding),
      engine_);
  e->fwd = dnnl::convolution_forward(fwd_pd);
  e->bwd_data = dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(algo, e->x, e->w, e->y, strides, padding, padding), engine_, fwd_pd));
  e->bwd_weights = dnnl::convolution_backward_weights(dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(algo, e->x, e->w, e->b, e->y, strides, padding, padding), engine_,
      fwd_pd));
  return *cache_.emplace(key, std::move(e)).first->second;
}

void OneDnnConv::Forward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s) {
  Entry& e = Get(s);
  // A null bias is a zero one (the primitive was created with a bias).
  if (!bias) dbias_.assign(s.cout, 0.0f);
  memory xm(e.x, engine_, const_cast<float*>(x)), wm(e.w, engine_, const_cast<float*>(w));
  memory bm(e.b, engine_, const_cast<float*>(bias ? bias : dbias_.data())), ym(e.y, engine_, y);
  e.fwd.execute(stream_, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, ym}});
  stream_.wait();
}

void OneDnnConv::Backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* dbias,
                          const Conv2dShape& s) {
  Entry& e = Get(s);
  memory xm(e.x, engine_, const_cast<float*>(x)), wm(e.w, engine_, const_cast<float*>(w));
  memory dym(e.y, engine_, const_cast<float*>(dy));
  if (dx) {
    memory dxm(e.x, engine_, dx);
    e.bwd_data.execute(stream_, {{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, dxm}});
  }
  const int64_t nw = s.cout * s.cin * s.kh * s.kw;
  dw_.resize(nw);
  dbias_.resize(s.cout);
  memory dwm(e.w, engine_, dw_.data()), dbm(e.b, engine_, dbias_.data());
  e.bwd_weights.execute(stream_,
                        {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_WEIGHTS, dwm}, {DNNL_ARG_DIFF_BIAS, dbm}});
  stream_.wait();
  for (int64_t i = 0; i < nw; ++i) dw[i] += dw_[i];
  if (dbias) {
    for (int64_t i = 0; i < s.cout; ++i) dbias[i] += dbias_[i];
  }
}

}  // namespace sf
