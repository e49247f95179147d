// The autocast policy checks (tests/runtime/autocast_policy_checks.h) on the GPU: the same
// checks as the CPU suite's, with the CUDA 16-bit kernels doing the work.
#include "tests/gpu_skip.h"
#include "tests/runtime/autocast_policy_checks.h"

namespace sublet {
namespace {

using namespace sublet::testing;

const Device kGpu = Device::cuda(0);

TEST(AutocastCuda, OpsRunInThePolicysDtype) {
  SUBLET_SKIP_WITHOUT_GPU("which dtype conv2d/linear/matmul/losses/reductions run in under autocast on cuda:0");
  check_op_dtypes(kGpu, DType::BFloat16);
  check_op_dtypes(kGpu, DType::Float16);
}

TEST(AutocastCuda, MasterWeightsAndTheirGradientsStayFloat32) {
  SUBLET_SKIP_WITHOUT_GPU("float32 parameters and gradients under autocast on cuda:0");
  check_master_weights(kGpu, DType::BFloat16, 3e-2);
  check_master_weights(kGpu, DType::Float16, 4e-3);
}

TEST(AutocastCuda, GuardsNestAndRestore) {
  SUBLET_SKIP_WITHOUT_GPU("nested autocast guards on cuda:0");
  check_nesting(kGpu);
}

TEST(AutocastCuda, AParameterIsCastOncePerOutermostGuard) {
  SUBLET_SKIP_WITHOUT_GPU("the weight-cast cache and the autocast category on cuda:0");
  check_weight_cast_cache(kGpu, DType::BFloat16);
  check_weight_cast_cache(kGpu, DType::Float16);
}

TEST(AutocastCuda, LowerDataSharesTheCastCache) {
  SUBLET_SKIP_WITHOUT_GPU("amp::lower_data and to_lower sharing the weight-cast cache on cuda:0");
  check_lower_data_shares_the_cast_cache(kGpu, DType::BFloat16);
  check_lower_data_shares_the_cast_cache(kGpu, DType::Float16);
}

}  // namespace
}  // namespace sublet
