#include "runtime/allocation_scope.h"

namespace sublet {
namespace {
thread_local memory::BlockCategory current_category = memory::BlockCategory::Unknown;
}

memory::BlockCategory current_allocation_category() { return current_category; }

AllocationCategoryGuard::AllocationCategoryGuard(memory::BlockCategory category) : previous_(current_category) {
  current_category = category;
}

AllocationCategoryGuard::~AllocationCategoryGuard() { current_category = previous_; }

}  // namespace sublet
