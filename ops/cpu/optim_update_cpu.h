#pragma once
// CPU kernels behind ops/optim_update.h: host scalars only (the dispatcher has checked the rest).
#include <span>

#include "ops/optim_update.h"

namespace sublet::ops::cpu {

void sgd_update(DType dtype, std::span<const SgdTensor> tensors, const SgdHyper& hyper, double lr);
void adam_update(DType dtype, std::span<const AdamTensor> tensors, const AdamHyper& hyper, double lr);

}  // namespace sublet::ops::cpu
