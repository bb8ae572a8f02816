#include "trainer/optim/state_io.h"

#include <cstdlib>

namespace sf {

std::vector<safetensors::TensorView> ToTensorViews(std::span<const NamedBuffer> buffers,
                                                   std::string_view prefix) {
  std::vector<safetensors::TensorView> views;
  views.reserve(buffers.size());
  for (const NamedBuffer& b : buffers) {
    const auto dtype = safetensors::ParseDType(b.dtype);
    if (!dtype) std::abort();
    views.push_back({std::string(prefix) + b.name, *dtype, b.shape, b.data});
  }
  return views;
}

Result<std::vector<NamedBuffer>> BuffersFromFile(const safetensors::SafetensorsFile& file,
                                                 std::string_view prefix) {
  std::vector<NamedBuffer> out;
  for (const safetensors::TensorInfo& t : file.tensors()) {
    if (t.name.compare(0, prefix.size(), prefix) != 0) continue;
    NamedBuffer b;
    b.name = t.name.substr(prefix.size());
    b.dtype = safetensors::DTypeName(t.dtype);
    b.shape = t.shape;
    const auto data = file.Data(t);
    b.data.assign(data.begin(), data.end());
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace sf
