#include "bench/alloc/malloc_allocator.h"

#include <cstdlib>
#include <string>

#include "core/errors.h"

namespace sublet::bench {

AllocationHandle MallocUnderTest::allocate(std::size_t bytes) {
  ++calls_;
  void* ptr = std::malloc(bytes);
  if (!ptr) throw OutOfMemoryError("malloc: could not allocate " + std::to_string(bytes) + " bytes");
  return ptr;
}

void MallocUnderTest::free(AllocationHandle handle) { std::free(handle); }

}  // namespace sublet::bench
