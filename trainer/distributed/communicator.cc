#include "trainer/distributed/communicator.h"

namespace sf::dist {

Status CheckCollectiveDType(DType dtype, ReduceOp op, DType wire) {
  switch (dtype) {
    case DType::kF32: case DType::kF64: case DType::kI32: break;
    case DType::kBF16: case DType::kF16:
      if (op != ReduceOp::kSum) return InvalidArgument("allreduce: only sums of bf16/f16 buffers");
      break;
    default:
      return InvalidArgument(std::string("allreduce: dtype ") + DTypeName(dtype) + " is not supported");
  }
  if (wire != DType::kF32 && wire != dtype) {
    if (dtype != DType::kF32 || op != ReduceOp::kSum || (wire != DType::kBF16 && wire != DType::kF16)) {
      return InvalidArgument(std::string("allreduce: cannot send ") + DTypeName(dtype) + " as " + DTypeName(wire));
    }
  }
  return Status::Ok();
}

}  // namespace sf::dist
