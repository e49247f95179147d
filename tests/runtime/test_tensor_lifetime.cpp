// Lifetimes behind the Tensor handle: intrusive reference counts, and Tensor::empty's joint
// allocation of a TensorImpl with its StorageImpl, whose two halves die independently (a view
// keeps the storage after the tensor is gone; a tensor whose storage was swapped keeps only
// itself). Each case checks the bytes through the allocator's statistics: a half freed too early
// or never shows there (and in ASan/TSan runs of this test).
#include <atomic>
#include <thread>
#include <vector>

#include "runtime/intrusive_ptr.h"
#include "runtime/kernel_args.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

using testing::cpu_allocated;
using testing::cpu_allocation_count;

struct Counted {
  explicit Counted(int* destroyed) : destroyed(destroyed) {}
  int* destroyed;
  RefCount& refs() const { return refs_; }
  static void destroy(Counted* c) noexcept {
    ++*c->destroyed;
    delete c;
  }
  mutable RefCount refs_;
};

TEST(IntrusivePtr, CountsCopiesAndDestroysOnceAtTheLastRelease) {
  int destroyed = 0;
  {
    IntrusivePtr<Counted> a = IntrusivePtr<Counted>::adopt(new Counted(&destroyed));
    EXPECT_EQ(a.use_count(), 1);
    IntrusivePtr<Counted> b = a;
    EXPECT_EQ(a.use_count(), 2);
    EXPECT_TRUE(a == b);
    IntrusivePtr<Counted> c = std::move(b);
    EXPECT_FALSE(b);
    EXPECT_TRUE(b == nullptr);
    EXPECT_EQ(c.use_count(), 2);
    c = a;  // self-same object: the count must not drop to zero on the way
    EXPECT_EQ(a.use_count(), 2);
    a.reset();
    EXPECT_EQ(destroyed, 0);
    EXPECT_EQ(c.use_count(), 1);
    EXPECT_EQ(a.use_count(), 0);
  }
  EXPECT_EQ(destroyed, 1);
}

TEST(TensorLifetime, FreshTensorIsTheOnlyOwnerOfItsStorage) {
  const Tensor t = Tensor::empty({3, 5});
  EXPECT_EQ(t.impl_ptr().use_count(), 1);
  EXPECT_EQ(t.storage().use_count(), 1);
  EXPECT_EQ(t.strides(), (Shape{5, 1}));
  EXPECT_EQ(t.storage().nbytes(), 60u);
  const Tensor copy = t;
  EXPECT_EQ(t.impl_ptr().use_count(), 2);
  EXPECT_EQ(t.storage().use_count(), 1);  // one TensorImpl, two handles
  const Tensor v = t.view({15});
  EXPECT_EQ(t.storage().use_count(), 2);
}

TEST(TensorLifetime, AViewOutlivesTheTensorItCameFrom) {
  const std::size_t before = cpu_allocated();
  const std::int64_t blocks_before = cpu_allocation_count();
  Tensor view;
  {
    Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    view = t.t();
  }
  EXPECT_GT(cpu_allocated(), before);  // the view holds the storage
  EXPECT_EQ(view.storage().use_count(), 1);
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  view.fill_(7.0);  // writes into the storage the dead tensor shared
  EXPECT_EQ(view.to_vector<float>(), std::vector<float>(6, 7.0f));
  view = Tensor();
  EXPECT_EQ(cpu_allocated(), before);
  EXPECT_EQ(cpu_allocation_count(), blocks_before);
}

TEST(TensorLifetime, ATensorWhoseStorageWasSwappedReleasesTheOldOneAtOnce) {
  // As Module::replace_all does: the handle stays, its TensorImpl gets another tensor's storage.
  const std::size_t before = cpu_allocated();
  Tensor t = Tensor::from_vector<double>({1, 2, 3}, {3});
  const std::size_t with_t = cpu_allocated();
  {
    const Tensor other = Tensor::from_vector<double>({4, 5, 6, 7}, {4});
    TensorImpl* impl = t.unsafe_impl();
    impl->storage = other.storage();
    impl->sizes = other.sizes();
    impl->strides = other.strides();
  }
  EXPECT_EQ(cpu_allocated(), with_t);  // the first storage went, the second stays in t
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{4, 5, 6, 7}));
  t = Tensor();
  EXPECT_EQ(cpu_allocated(), before);
}

TEST(TensorLifetime, ViewsOfViewsAndDetachedAliasesShareOneStorage) {
  const std::size_t before = cpu_allocated();
  {
    Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
    Tensor a = base.narrow(1, 1, 2);
    Tensor b = a.t().contiguous();  // a copy: its own storage
    Tensor c = base.detach().view({8}).slice(0, 0, 8, 2);
    EXPECT_TRUE(c.storage().is_same(base.storage()));
    EXPECT_FALSE(b.storage().is_same(base.storage()));
    EXPECT_EQ(base.storage().use_count(), 3);  // base, a, c (the detach itself is gone)
    base = Tensor();
    a = Tensor();
    EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 2, 4, 6}));
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 5, 2, 6}));
  }
  EXPECT_EQ(cpu_allocated(), before);
}

TEST(TensorLifetime, GradientsAndGraphsKeepTheirTensorsAlive) {
  const std::size_t before = cpu_allocated();
  {
    Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3}, TensorOptions().requires_grad(true));
    Tensor y = (x * x).sum();
    y.backward();
    const Tensor g = x.grad();
    x = Tensor();  // the leaf goes; its gradient handle stays valid
    EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{2, 4, 6}));
  }
  EXPECT_EQ(cpu_allocated(), before);
}

TEST(TensorLifetime, NegativeSizesAndIntRequiringGradAllocateNothing) {
  const std::int64_t blocks_before = cpu_allocation_count();
  EXPECT_THROW(Tensor::empty({2, -1}), ShapeError);
  EXPECT_THROW(Tensor::empty({2}, TensorOptions().dtype(DType::Int64).requires_grad(true)), DTypeError);
  EXPECT_EQ(cpu_allocation_count(), blocks_before);
  const Tensor zero = Tensor::empty({0, 3});
  EXPECT_EQ(zero.numel(), 0);
  EXPECT_EQ(zero.strides(), (Shape{3, 1}));
  const Tensor scalar = Tensor::empty({});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_TRUE(scalar.strides().empty());
}

TEST(TensorLifetime, ThreadsSharingViewsReleaseEverythingExactlyOnce) {
  const std::size_t before = cpu_allocated();
  {
    const Tensor shared = Tensor::from_vector<float>(std::vector<float>(64, 1.0f), {8, 8});
    std::vector<std::thread> threads;
    std::atomic<std::int64_t> bad{0};
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&shared, &bad, i] {
        for (int k = 0; k < 2000; ++k) {
          Tensor v = shared.narrow(0, i, 2);
          Tensor copy = v;
          Tensor own = Tensor::empty({16});  // joint allocations made and freed on every thread
          Tensor keep = own.view({4, 4});
          own = Tensor();
          if (keep.storage().use_count() != 1 || v.numel() != 16) ++bad;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(shared.storage().use_count(), 1);
    EXPECT_EQ(shared.impl_ptr().use_count(), 1);
  }
  EXPECT_EQ(cpu_allocated(), before);
}

}  // namespace
}  // namespace sublet
