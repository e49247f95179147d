// Gradient buckets: assignment in reverse parameter order under the caps, one dtype per
// bucket, aligned offsets into the flat buffers, and the readiness tracker's launch order.
#include "runtime/distributed/gradient_buckets.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace {

using namespace sublet::distributed;
using sublet::DType;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

std::vector<GradientSpec> float_gradients(const std::vector<std::size_t>& bytes) {
  std::vector<GradientSpec> specs;
  for (const auto b : bytes) specs.push_back({b, DType::Float32});
  return specs;
}

TEST(GradientBuckets, FilledInReverseParameterOrderUnderTheCaps) {
  // Parameters 0..5; backward makes 5 ready first. First bucket cap 1 MiB, then 4 MiB.
  const auto specs = float_gradients({2 * MiB, 1 * MiB, 3 * MiB, 512 * KiB, 256 * KiB, 512 * KiB});
  const BucketPlan plan = assign_gradient_buckets(specs, {.cap_bytes = 4 * MiB, .first_bucket_cap_bytes = 1 * MiB});
  ASSERT_EQ(plan.buckets.size(), 3u);
  // 5 (512K) + 4 (256K) fit 1 MiB; 3 (512K) would not: the first bucket closes before it.
  EXPECT_EQ(plan.buckets[0].parameters, (std::vector<std::size_t>{5, 4}));
  EXPECT_EQ(plan.buckets[1].parameters, (std::vector<std::size_t>{3, 2}));  // 3.5 MiB; + 1 MiB > 4
  EXPECT_EQ(plan.buckets[2].parameters, (std::vector<std::size_t>{1, 0}));  // exactly 3 MiB
  EXPECT_EQ(plan.buckets[1].bytes, 3 * MiB + 512 * KiB);
}

TEST(GradientBuckets, AGradientLargerThanTheCapGetsABucketOfItsOwn) {
  const auto specs = float_gradients({100 * KiB, 30 * MiB, 100 * KiB, 100 * KiB});
  const BucketPlan plan = assign_gradient_buckets(specs, {.cap_bytes = 25 * MiB, .first_bucket_cap_bytes = 1 * MiB});
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.buckets[0].parameters, (std::vector<std::size_t>{3, 2}));
  EXPECT_EQ(plan.buckets[1].parameters, (std::vector<std::size_t>{1}));
  EXPECT_EQ(plan.buckets[1].bytes, 30 * MiB);
  EXPECT_EQ(plan.buckets[2].parameters, (std::vector<std::size_t>{0}));
}

TEST(GradientBuckets, OffsetsAreAlignedAndSlotsPointBack) {
  // Odd float counts: 3, 100, 1 floats.
  const auto specs = float_gradients({12, 400, 4});
  const BucketPlan plan = assign_gradient_buckets(specs);
  ASSERT_EQ(plan.buckets.size(), 1u);
  const GradientBucket& bucket = plan.buckets[0];
  EXPECT_EQ(bucket.parameters, (std::vector<std::size_t>{2, 1, 0}));
  EXPECT_EQ(bucket.offsets, (std::vector<std::size_t>{0, 256, 768}));
  EXPECT_EQ(bucket.sizes, (std::vector<std::size_t>{4, 400, 12}));
  EXPECT_EQ(bucket.bytes, 1024u);
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const BucketSlot& slot = plan.slots[p];
    EXPECT_EQ(plan.buckets[slot.bucket].parameters[slot.index_in_bucket], p);
    EXPECT_EQ(slot.offset % 256, 0u);
    EXPECT_EQ(plan.buckets[slot.bucket].offsets[slot.index_in_bucket], slot.offset);
  }
  // Slices never overlap and stay inside the buffer.
  for (std::size_t i = 0; i + 1 < bucket.offsets.size(); ++i) {
    EXPECT_LE(bucket.offsets[i] + bucket.sizes[i], bucket.offsets[i + 1]);
  }
  EXPECT_LE(bucket.offsets.back() + bucket.sizes.back(), bucket.bytes);

  const BucketPlan tight = assign_gradient_buckets(specs, {.alignment_bytes = 4});
  EXPECT_EQ(tight.buckets[0].offsets, (std::vector<std::size_t>{0, 4, 404}));
}

TEST(GradientBuckets, EachDtypeHasItsOwnBucketsLaunchedInReadyOrder) {
  const std::vector<GradientSpec> specs = {
      {1000 * 4, DType::Float32}, {1000 * 2, DType::BFloat16}, {1000 * 4, DType::Float32}, {1000 * 2, DType::BFloat16}};
  const BucketPlan plan = assign_gradient_buckets(specs);
  ASSERT_EQ(plan.buckets.size(), 2u);
  // Parameter 3 (bfloat16) is ready first, so its bucket launches first.
  EXPECT_EQ(plan.buckets[0].dtype, DType::BFloat16);
  EXPECT_EQ(plan.buckets[0].parameters, (std::vector<std::size_t>{3, 1}));
  EXPECT_EQ(plan.buckets[1].dtype, DType::Float32);
  EXPECT_EQ(plan.buckets[1].parameters, (std::vector<std::size_t>{2, 0}));
}

TEST(GradientBuckets, ObservedReadyOrderCanBeUsedInstead) {
  const auto specs = float_gradients({400, 400, 400});
  const std::vector<std::size_t> observed = {1, 2, 0};
  const BucketPlan plan = assign_gradient_buckets_in_order(specs, observed, {.cap_bytes = 512, .first_bucket_cap_bytes = 512});
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.buckets[0].parameters, (std::vector<std::size_t>{1}));
  EXPECT_EQ(plan.buckets[1].parameters, (std::vector<std::size_t>{2}));
  EXPECT_EQ(plan.buckets[2].parameters, (std::vector<std::size_t>{0}));
  const std::vector<std::size_t> not_a_permutation = {0, 0, 2};
  EXPECT_THROW(assign_gradient_buckets_in_order(specs, not_a_permutation), sublet::ValueError);
}

TEST(GradientBuckets, BadInputsAreRefused) {
  EXPECT_THROW(assign_gradient_buckets(float_gradients({10})), sublet::ValueError);  // 2.5 floats
  EXPECT_THROW(assign_gradient_buckets(float_gradients({16}), {.cap_bytes = 0}), sublet::ValueError);
  EXPECT_THROW(assign_gradient_buckets(float_gradients({16}), {.alignment_bytes = 48}), sublet::ValueError);
  EXPECT_THROW(assign_gradient_buckets(float_gradients({16}), {.alignment_bytes = 2}), sublet::ValueError);
  EXPECT_EQ(assign_gradient_buckets(float_gradients({})).buckets.size(), 0u);
}

TEST(BucketReadiness, BucketsLaunchInPlanOrderEvenWhenALaterOneCompletesFirst) {
  // Three buckets of two gradients each: {5,4}, {3,2}, {1,0}.
  const auto specs = float_gradients({256, 256, 256, 256, 256, 256});
  const BucketPlan plan = assign_gradient_buckets(specs, {.cap_bytes = 512, .first_bucket_cap_bytes = 512});
  ASSERT_EQ(plan.buckets.size(), 3u);
  BucketReadiness readiness(plan);
  EXPECT_TRUE(readiness.mark_ready(5).empty());
  EXPECT_TRUE(readiness.mark_ready(3).empty());
  EXPECT_TRUE(readiness.mark_ready(2).empty());  // bucket 1 complete, but bucket 0 is not launched
  EXPECT_EQ(readiness.mark_ready(4), (std::vector<std::size_t>{0, 1}));
  EXPECT_TRUE(readiness.mark_ready(0).empty());
  EXPECT_FALSE(readiness.all_launched());
  EXPECT_EQ(readiness.unready_parameters(), (std::vector<std::size_t>{1}));
  EXPECT_EQ(readiness.mark_ready(1), (std::vector<std::size_t>{2}));
  EXPECT_TRUE(readiness.all_launched());
  EXPECT_TRUE(readiness.unready_parameters().empty());

  // Marking twice in one pass is an error; reset starts the next pass.
  EXPECT_THROW(readiness.mark_ready(1), sublet::DistributedError);
  EXPECT_THROW(readiness.mark_ready(6), sublet::DistributedError);
  readiness.reset();
  EXPECT_FALSE(readiness.all_launched());
  EXPECT_TRUE(readiness.mark_ready(5).empty());
  EXPECT_EQ(readiness.mark_ready(4), (std::vector<std::size_t>{0}));
}

TEST(BucketReadiness, ReverseOrderLaunchesEachBucketAsItsLastGradientArrives) {
  const auto specs = float_gradients({256, 256, 256, 256});
  const BucketPlan plan = assign_gradient_buckets(specs, {.cap_bytes = 512, .first_bucket_cap_bytes = 256});
  ASSERT_EQ(plan.buckets.size(), 3u);  // {3}, {2,1}, {0}
  BucketReadiness readiness(plan);
  EXPECT_EQ(readiness.mark_ready(3), (std::vector<std::size_t>{0}));
  EXPECT_TRUE(readiness.mark_ready(2).empty());
  EXPECT_EQ(readiness.mark_ready(1), (std::vector<std::size_t>{1}));
  EXPECT_EQ(readiness.mark_ready(0), (std::vector<std::size_t>{2}));
}

}  // namespace
