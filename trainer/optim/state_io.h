// NamedBuffer lists (optimizer and loss-scaler state) to and from safetensors files, so a
// checkpoint can store them next to the weights, readable by any safetensors reader.
//
//   auto views = ToTensorViews(optimizer.State(), "optimizer.");   // aliases the buffers
//   WriteFile(path, views, metadata);
//   ...
//   SF_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
//   SF_ASSIGN_OR_RETURN(auto state, BuffersFromFile(file, "optimizer."));
//   SF_RETURN_IF_ERROR(optimizer.LoadState(state, params));
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainer/core/safetensors.h"
#include "trainer/optim/param.h"

namespace sf {

// Views named "<prefix><buffer name>"; they alias `buffers`, which must outlive them. Buffers
// with a dtype safetensors does not know are a programming error (all ours are F32/F64/I64).
std::vector<safetensors::TensorView> ToTensorViews(std::span<const NamedBuffer> buffers,
                                                   std::string_view prefix = "");

// Copies of the tensors of `file` whose names start with `prefix`, with the prefix removed.
Result<std::vector<NamedBuffer>> BuffersFromFile(const safetensors::SafetensorsFile& file,
                                                 std::string_view prefix = "");

}  // namespace sf
