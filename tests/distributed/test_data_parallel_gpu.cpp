// Data parallel at world size 1 on one GPU: the whole path (store, NCCL communicator, buckets on
// the communication stream, gradient views) against the plain step, bit for bit. With one rank
// the average of a gradient is the gradient itself, so any difference is a bug of the path:
// a bucket read before backward filled it, a view at the wrong offset, a lost gradient.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/gpu_skip.h"
#include "tests/runtime/graph_training_support.h"

#ifdef SUBLET_HAVE_CUDA
#include "memory/registry.h"
#include "runtime/distributed/data_parallel.h"
#include "runtime/distributed/nccl_process_group.h"
#include "runtime/optim/sgd.h"
#endif

namespace sublet {
namespace {

#ifdef SUBLET_HAVE_CUDA
using distributed::DataParallel;
using distributed::LaunchEnv;
using distributed::ProcessGroup;

LaunchEnv single_rank() {
  LaunchEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = 0;  // rank 0 serves the store on an ephemeral port
  return env;
}

struct TrainingRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
  std::size_t buckets = 0;
  std::size_t launched_in_backward = 0;
};

// Five SGD steps of ResNet-20; through DataParallel when `group` is set.
TrainingRun train(ProcessGroup* group, std::size_t bucket_cap) {
  const Device gpu = Device::cuda(0);
  auto model = testing::resnet20_on(gpu, 2024);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));
  std::unique_ptr<DataParallel> dp;
  if (group) {
    distributed::BucketOptions options;
    options.cap_bytes = bucket_cap;
    options.first_bucket_cap_bytes = bucket_cap / 4;
    dp = std::make_unique<DataParallel>(*group, model->parameters(), model->buffers(), options);
  }
  TrainingRun run;
  for (const auto& [images, labels] : testing::random_batches(5, {16, 3, 32, 32}, 10, 77)) {
    sgd.zero_grad();
    Tensor loss = nn::functional::cross_entropy((*model)(images.to(gpu)), labels.to(gpu));
    if (dp) dp->prepare_backward();
    loss.backward();
    if (dp) {
      run.launched_in_backward += dp->buckets_launched_in_backward();
      dp->finish_backward();
      for (const Tensor& p : model->parameters())
        EXPECT_EQ(p.grad().storage().category(), memory::BlockCategory::Communication) << "a gradient outside the buckets";
    }
    sgd.step();
    run.losses.push_back(loss.item<float>());
  }
  for (const Tensor& p : model->parameters()) run.params.push_back(p.detach().to(Device::cpu()).to_vector<float>());
  if (dp) run.buckets = dp->plan().buckets.size();
  return run;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
#endif

TEST(DataParallelGpu, WorldSizeOneTrainsBitForBitAsThePlainStep) {
  SUBLET_SKIP_WITHOUT_GPU("data parallel at world size 1 (NCCL on one GPU)");
#ifdef SUBLET_HAVE_CUDA
  const TrainingRun plain = train(nullptr, 0);
  distributed::NcclProcessGroup group(single_rank(), Device::cuda(0), {});
  memory::allocator_for(Device::cuda(0)).reset_accumulated_memory_stats();
  const TrainingRun parallel = train(&group, 256 * 1024);  // ResNet-20's 1.1 MB of gradients: several buckets
  EXPECT_GE(parallel.buckets, 3u);
  EXPECT_EQ(parallel.launched_in_backward, 5 * parallel.buckets) << "every bucket is launched during backward";
  ASSERT_EQ(plain.losses.size(), 5u);
  EXPECT_TRUE(same_bits(plain.losses, parallel.losses));
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(plain.losses[i], parallel.losses[i]) << "step " << i;
  ASSERT_EQ(plain.params.size(), parallel.params.size());
  for (std::size_t i = 0; i < plain.params.size(); ++i) EXPECT_TRUE(same_bits(plain.params[i], parallel.params[i])) << "parameter " << i;
  EXPECT_EQ(memory::allocator_for(Device::cuda(0)).memory_stats().at("num_sync_all_streams"), 0);
#endif
}

TEST(DataParallelGpu, DefaultBucketsMatchThePlainStepToo) {
  SUBLET_SKIP_WITHOUT_GPU("data parallel at world size 1 (NCCL on one GPU)");
#ifdef SUBLET_HAVE_CUDA
  distributed::NcclProcessGroup group(single_rank(), Device::cuda(0), {});
  const TrainingRun run = train(&group, 25 * 1024 * 1024);
  EXPECT_GE(run.buckets, 1u);
  const TrainingRun plain = train(nullptr, 0);
  EXPECT_TRUE(same_bits(plain.losses, run.losses));
#endif
}

TEST(DataParallelGpu, GradientsMayOutliveTheGroup) {
  // The parameters' gradients are views into the buckets, so the buckets die with the model,
  // after DataParallel and the group: their bytes were used on the communication stream, and
  // freeing them records an event there (this crashed `sublet train` workers at exit once).
  SUBLET_SKIP_WITHOUT_GPU("data parallel at world size 1 (NCCL on one GPU)");
#ifdef SUBLET_HAVE_CUDA
  const Device gpu = Device::cuda(0);
  auto model = testing::resnet20_on(gpu, 7);
  {
    distributed::NcclProcessGroup group(single_rank(), gpu, {});
    DataParallel dp(group, model->parameters(), model->buffers());
    const auto batch = testing::random_batches(1, {8, 3, 32, 32}, 10, 3).front();
    Tensor loss = nn::functional::cross_entropy((*model)(batch.first.to(gpu)), batch.second.to(gpu));
    dp.prepare_backward();
    loss.backward();
    dp.finish_backward();
  }
  ASSERT_TRUE(model->parameters().front().grad().defined());
  const std::vector<float> grad = model->parameters().front().grad().to(Device::cpu()).to_vector<float>();
  EXPECT_GT(grad.size(), 0u);
  model.reset();  // frees the buckets now, their communication stream's event recorded
  memory::allocator_for(gpu).empty_cache();
  EXPECT_EQ(memory::allocator_for(gpu).memory_allocated(), 0u);
#endif
}

}  // namespace
}  // namespace sublet
