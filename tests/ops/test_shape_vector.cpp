// ShapeVector (the Shape of sizes and strides) against std::vector<int64_t> as the
// reference: 20,000 random operations of every kind the class offers, on vectors that cross
// between inline storage (up to kInline values) and the heap, with copies and moves in both
// states; then the conversions and the comparisons.
#include "core/shape_vector.h"

#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

namespace sublet::ops {
namespace {

using Reference = std::vector<std::int64_t>;

void expect_same(const ShapeVector& v, const Reference& r, int step) {
  ASSERT_EQ(v.size(), r.size()) << "after step " << step;
  ASSERT_EQ(v.empty(), r.empty()) << "after step " << step;
  for (std::size_t i = 0; i < r.size(); ++i) ASSERT_EQ(v[i], r[i]) << "element " << i << " after step " << step;
  ASSERT_GE(v.capacity(), v.size());
}

TEST(ShapeVector, RandomOperationsMatchStdVector) {
  std::mt19937_64 rng(7);
  ShapeVector v;
  Reference r;
  auto value = [&] { return static_cast<std::int64_t>(rng() % 1000) - 500; };
  for (int step = 0; step < 20000; ++step) {
    const std::size_t size = r.size();
    switch (rng() % 12) {
      case 0: case 1: {  // grow past the inline storage often
        const std::int64_t x = value();
        v.push_back(x);
        r.push_back(x);
        break;
      }
      case 2:
        if (size > 0) { v.pop_back(); r.pop_back(); }
        break;
      case 3: {
        const std::size_t at = size == 0 ? 0 : rng() % (size + 1);
        const std::int64_t x = value();
        EXPECT_EQ(*v.insert(v.begin() + at, x), x);
        r.insert(r.begin() + static_cast<std::ptrdiff_t>(at), x);
        break;
      }
      case 4:
        if (size > 0) {
          const std::size_t at = rng() % size;
          v.erase(v.begin() + at);
          r.erase(r.begin() + static_cast<std::ptrdiff_t>(at));
        }
        break;
      case 5: {  // insert a range of itself (aliasing)
        const std::size_t at = size == 0 ? 0 : rng() % (size + 1);
        const Reference copy = r;
        v.insert(v.begin() + at, v.begin(), v.end());
        r.insert(r.begin() + static_cast<std::ptrdiff_t>(at), copy.begin(), copy.end());
        break;
      }
      case 6: {
        const std::size_t n = rng() % 12;
        const std::int64_t x = value();
        v.resize(n, x);
        r.resize(n, x);
        break;
      }
      case 7: {  // copy, in either storage state, both ways
        ShapeVector copy = v;
        expect_same(copy, r, step);
        ShapeVector other{1, 2, 3};
        other = v;
        expect_same(other, r, step);
        v = copy;
        break;
      }
      case 8: {  // move out and back
        ShapeVector moved = std::move(v);
        expect_same(moved, r, step);
        v = ShapeVector{9};
        v = std::move(moved);
        break;
      }
      case 9:
        if (size > 1) {
          const std::size_t first = rng() % size, last = first + rng() % (size - first + 1);
          v.erase(v.begin() + first, v.begin() + last);
          r.erase(r.begin() + static_cast<std::ptrdiff_t>(first), r.begin() + static_cast<std::ptrdiff_t>(last));
        }
        break;
      case 10:
        if (rng() % 8 == 0) { v.clear(); r.clear(); }
        break;
      case 11: {
        const std::size_t n = rng() % 10;
        const std::int64_t x = value();
        v.assign(n, x);
        r.assign(n, x);
        break;
      }
    }
    expect_same(v, r, step);
    if (r.size() > 40) { v.resize(3); r.resize(3); }  // keep the vectors small, so both states recur
  }
}

TEST(ShapeVector, ConstructsConvertsAndComparesLikeAVector) {
  const ShapeVector braces{2, 3, 4};
  expect_same(braces, {2, 3, 4}, 0);
  expect_same(ShapeVector(5, 7), {7, 7, 7, 7, 7}, 0);
  expect_same(ShapeVector(3), {0, 0, 0}, 0);
  const Reference long_one{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // more than kInline: on the heap
  const ShapeVector from_vector = long_one;
  expect_same(from_vector, long_one, 0);
  EXPECT_GT(from_vector.capacity(), ShapeVector::kInline);
  const Reference back = from_vector;
  EXPECT_EQ(back, long_one);
  expect_same(ShapeVector(long_one.rbegin(), long_one.rend()), Reference(long_one.rbegin(), long_one.rend()), 0);
  EXPECT_EQ(braces, (ShapeVector{2, 3, 4}));
  EXPECT_NE(braces, (ShapeVector{2, 3}));
  EXPECT_LT((ShapeVector{2, 3}), braces);
  EXPECT_EQ(braces.front(), 2);
  EXPECT_EQ(braces.back(), 4);
  EXPECT_EQ(braces.at(1), 3);
  EXPECT_THROW(braces.at(3), std::out_of_range);
  EXPECT_EQ(*braces.rbegin(), 4);
  EXPECT_TRUE(ShapeVector().empty());
}

}  // namespace
}  // namespace sublet::ops
