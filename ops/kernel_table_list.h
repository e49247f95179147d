#pragma once
// Every op kernel table by name, for checks that must cover all of them (a table that a backend
// forgot to fill fails tests/ops/test_kernel_table.cpp) and for diagnostics.
#include <span>

#include "ops/kernel_table.h"

namespace sublet::ops {

struct NamedKernelTable {
  const char* name;
  const KernelTableBase* table;
  bool needs_cpu;  // false for CUDA-only ops (the fused batch_norm_relu)
};

std::span<const NamedKernelTable> all_kernel_tables();

}  // namespace sublet::ops
