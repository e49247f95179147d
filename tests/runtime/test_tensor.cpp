// Tensor factories, options, conversions, storage ownership and allocation categories.
#include <cmath>
#include <sstream>

#include "core/errors.h"
#include "runtime/allocation_scope.h"
#include "runtime/init.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

using testing::cpu_allocated;
using testing::cpu_reserved;

TEST(Tensor, FactoriesFillValues) {
  EXPECT_EQ(zeros({2, 3}).to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(ones({4}).to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(full({2, 2}, 2.5, DType::Float64).to_vector<double>(), std::vector<double>(4, 2.5));
  const Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), DType::Int64);
  EXPECT_EQ(a.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25, DType::Float32).to_vector<float>(), (std::vector<float>{1.0f, 1.25f, 1.5f, 1.75f}));
}

TEST(Tensor, OptionsChainAndMetadata) {
  const Tensor t = empty({2, 3, 4}, TensorOptions().dtype(DType::Float64).device(Device::cpu()).requires_grad(true));
  EXPECT_EQ(t.dtype(), DType::Float64);
  EXPECT_TRUE(t.requires_grad());
  EXPECT_TRUE(t.is_leaf());
  EXPECT_EQ(t.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.nbytes(), 24u * 8u);
  EXPECT_TRUE(t.is_contiguous());
}

TEST(Tensor, FromVectorRoundTripAndConversion) {
  const std::vector<float> values{1.5f, -2.0f, 3.25f, 4.0f, 5.0f, -6.5f};
  const Tensor t = Tensor::from_vector(values, {2, 3});
  EXPECT_EQ(t.to_vector<float>(), values);
  const Tensor d = Tensor::from_vector(values, {3, 2}, DType::Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_DOUBLE_EQ(d.to_vector<double>()[2], 3.25);
  EXPECT_EQ(t.to(DType::Int64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, -2, 3, 4, 5, -6}));
  EXPECT_FLOAT_EQ(t.narrow(1, 2, 1).narrow(0, 1, 1).item<float>(), -6.5f);
  EXPECT_THROW(Tensor::from_vector(values, {4, 2}), ShapeError);
  EXPECT_THROW(t.item<float>(), ShapeError);
}

TEST(Tensor, RandomIsDeterministicPerSeed) {
  Generator a(42), b(42), c(43);
  const auto x = randn({1000}, a).to_vector<float>();
  EXPECT_EQ(x, randn({1000}, b).to_vector<float>());
  EXPECT_NE(x, randn({1000}, c).to_vector<float>());
  double mean = 0, var = 0;
  for (float v : x) mean += v;
  mean /= x.size();
  for (float v : x) var += (v - mean) * (v - mean);
  var /= x.size();
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.1);
  Generator g(7);
  for (float v : uniform({1000}, -2.0, 3.0, g).to_vector<float>()) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 3.0f);
  }
  // A strided destination gets the same values, in its own element order.
  Generator g1(5), g2(5);
  Tensor base = zeros({3, 4});
  Tensor view = base.t();
  view.normal_(0.0, 1.0, g1);
  EXPECT_EQ(view.contiguous().to_vector<float>(), randn({4, 3}, g2).to_vector<float>());
}

TEST(Tensor, KaimingInitBounds) {
  Generator g(3);
  Tensor w = empty({64, 32, 3, 3});
  init::kaiming_uniform_(w, g);
  const double bound = std::sqrt(2.0) * std::sqrt(3.0 / (32 * 9));
  const auto values = w.to_vector<float>();
  float lo = 1e9f, hi = -1e9f;
  for (float v : values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_GT(hi, 0.9 * bound);  // really spread over the interval
  Tensor n = empty({256, 128});
  init::kaiming_normal_(n, g);
  const double stddev = std::sqrt(n.pow(2.0).mean().item<double>());
  EXPECT_NEAR(stddev, std::sqrt(2.0 / 128), 0.01);
}

TEST(Tensor, CloneOwnsItsStorage) {
  Tensor a = ones({3});
  Tensor b = a.clone();
  b.fill_(5.0);
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(3, 1.0f));
  EXPECT_FALSE(a.storage().is_same(b.storage()));
}

TEST(Tensor, MemoryReturnsWhenLastHandleDies) {
  const std::size_t before = cpu_allocated();
  std::size_t with_tensor = 0;
  std::size_t reserved_with_tensor = 0;
  {
    Tensor a = zeros({1024, 1024});  // 4 MiB
    Tensor view = a.narrow(0, 10, 20);
    with_tensor = cpu_allocated();
    reserved_with_tensor = cpu_reserved();
    EXPECT_GE(with_tensor, before + 4u * 1024 * 1024);
    a = Tensor();  // the view keeps the storage
    EXPECT_EQ(cpu_allocated(), with_tensor);
  }
  EXPECT_EQ(cpu_allocated(), before);
  EXPECT_EQ(cpu_reserved(), reserved_with_tensor);  // step 2: cached, not returned
}

TEST(Tensor, AllocationCategoryFollowsScopeAndRetag) {
  Tensor plain = zeros({4});
  EXPECT_EQ(plain.storage().category(), memory::BlockCategory::Unknown);
  {
    AllocationCategoryGuard guard(memory::BlockCategory::OptimizerState);
    Tensor state = zeros({4});
    EXPECT_EQ(state.storage().category(), memory::BlockCategory::OptimizerState);
    {
      AllocationCategoryGuard inner(memory::BlockCategory::Input);
      EXPECT_EQ(zeros({2}).storage().category(), memory::BlockCategory::Input);
    }
    EXPECT_EQ(zeros({2}).storage().category(), memory::BlockCategory::OptimizerState);
  }
  EXPECT_EQ(current_allocation_category(), memory::BlockCategory::Unknown);
  plain.storage().set_category(memory::BlockCategory::Parameter);
  EXPECT_EQ(plain.storage().block()->category, memory::BlockCategory::Parameter);
}

TEST(Tensor, CudaIsADeviceErrorUntilBuilt) {
  if (memory::cuda_available()) GTEST_SKIP() << "CUDA present: this checks the CPU-only build's error";
  EXPECT_THROW(ones({2}).to(Device::cuda(0)), DeviceError);
  EXPECT_THROW(zeros({2}, Device::cuda(0)), DeviceError);
}

TEST(Tensor, PrintsMetadataAndLeadingValues) {
  std::ostringstream small, large;
  small << Tensor::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f}, {1, 3});
  EXPECT_EQ(small.str(), "Tensor[1, 3] float32 cpu {0.5, -1, 2}");
  large << arange(20);
  EXPECT_NE(large.str().find("{0, 1, 2"), std::string::npos);
  EXPECT_NE(large.str().find("15, ...}"), std::string::npos);
}

TEST(Tensor, IntOpsAndDtypeErrors) {
  const Tensor a = arange(6).reshape({2, 3});
  EXPECT_EQ((a * 2 + 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(a.sum().item<std::int64_t>(), 15);
  testing::expect_throw_with([&] { a.exp(); }, {"exp", "int64"});
  testing::expect_throw_with([&] { (ones({2}) + ones({2}, DType::Float64)).sum(); }, {"add", "float32", "float64"});
  EXPECT_THROW(empty({2}, TensorOptions().dtype(DType::Int64).requires_grad(true)), DTypeError);
}

}  // namespace
}  // namespace sublet
