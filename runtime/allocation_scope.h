#pragma once
// Which category new tensor memory is tagged with (parameters, gradients, optimizer state,
// inputs...). Higher layers set it for a scope; Storage reads it when it allocates, so the
// allocator's history and snapshots can say what each block is for without every factory call
// taking an extra argument. Per thread; the default is Unknown.
//
//   { AllocationCategoryGuard guard(memory::BlockCategory::OptimizerState); state = zeros_like(p); }
#include "memory/block.h"

namespace sublet {

memory::BlockCategory current_allocation_category();

class AllocationCategoryGuard {
 public:
  explicit AllocationCategoryGuard(memory::BlockCategory category);
  ~AllocationCategoryGuard();
  AllocationCategoryGuard(const AllocationCategoryGuard&) = delete;
  AllocationCategoryGuard& operator=(const AllocationCategoryGuard&) = delete;

 private:
  memory::BlockCategory previous_;
};

}  // namespace sublet
