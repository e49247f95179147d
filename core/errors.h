#pragma once
// The one small family of exceptions every sublet layer throws. Messages say what was
// expected and what was found; callers catch sublet::Error to handle any of them.
#include <stdexcept>
#include <string>

namespace sublet {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The allocator could not provide the bytes, even after freeing its cache.
class OutOfMemoryError : public Error { using Error::Error; };
// A bad SUBLET_ALLOC_CONF string or AllocatorConfig value.
class ConfigError : public Error { using Error::Error; };
// Tensor shapes that do not fit the operation.
class ShapeError : public Error { using Error::Error; };
// A tensor of the wrong element type for the operation.
class DTypeError : public Error { using Error::Error; };
// Tensors on different devices, or a device that is not available.
class DeviceError : public Error { using Error::Error; };
// A missing, truncated or corrupt file.
class IoError : public Error { using Error::Error; };
// A CUDA runtime/driver, cuBLAS or cuDNN call failed (message names the call, file and line).
class CudaError : public Error { using Error::Error; };
// A loss or value that became NaN or infinite where training cannot go on with it.
class NonFiniteError : public Error { using Error::Error; };
// Data-parallel rendezvous or communication failed: the store cannot listen or be reached, a
// key or a rank did not arrive in time, a peer broke the protocol.
class DistributedError : public Error { using Error::Error; };
// A wrong argument that is neither a shape nor a dtype problem (bad flag values, bad options).
class ValueError : public Error { using Error::Error; };

}  // namespace sublet
