// functional::embedding and nn::Embedding on the CPU: the lookup against indexing by hand, the
// table gradient against float64 finite differences (repeated ids included), bit-identical
// gradients on repeated runs, and the errors for bad ids, dtypes and shapes.
#include "runtime/nn/embedding.h"

#include <gtest/gtest.h>

#include "runtime/factories.h"
#include "runtime/gradcheck.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_throw_with;
using testing::random64;

Tensor ids(const std::vector<std::int64_t>& values, const Shape& sizes) {
  return Tensor::from_vector<std::int64_t>(values, sizes);
}

TEST(Embedding, LooksUpRowsForIdsOfAnyShape) {
  const Tensor table = random64({7, 5}, 1);
  const Tensor index = ids({3, 0, 6, 3, 1, 2}, {2, 3});
  const Tensor out = F::embedding(table, index);
  ASSERT_EQ(out.sizes(), (Shape{2, 3, 5}));
  const auto t = table.to_vector<double>(), o = out.to_vector<double>();
  const auto i = index.to_vector<std::int64_t>();
  for (std::size_t p = 0; p < i.size(); ++p) {
    for (std::size_t c = 0; c < 5; ++c) EXPECT_EQ(o[p * 5 + c], t[static_cast<std::size_t>(i[p]) * 5 + c]);
  }
}

TEST(Embedding, GradcheckWithRepeatedIds) {
  const Tensor table = random64({6, 4}, 2, true);
  const Tensor index = ids({5, 1, 5, 0, 5, 2, 1, 1}, {2, 4});  // id 5 thrice, id 1 thrice, ids 3 and 4 unused
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::embedding(in[0], index); }, {table}), 1e-6);
}

TEST(Embedding, BackwardIsBitIdenticalRunToRun) {
  Generator gen(3);
  Tensor table = randn({50, 33}, gen, TensorOptions().requires_grad(true));
  std::vector<std::int64_t> values(400);
  for (std::size_t k = 0; k < values.size(); ++k) values[k] = static_cast<std::int64_t>((k * 37 + k / 7) % 50);
  const Tensor index = ids(values, {20, 20});
  const Tensor upstream = randn({20, 20, 33}, gen);
  std::vector<std::vector<float>> grads;
  for (bool deterministic : {true, true, false}) {
    table.set_grad({});
    F::embedding(table, index, F::EmbeddingFuncOptions().deterministic(deterministic)).mul(upstream).sum().backward();
    grads.push_back(table.grad().to_vector<float>());
  }
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(grads[0], grads[2]);  // the CPU kernel is deterministic either way
}

TEST(Embedding, ModuleHasATableParameterAndForwardsTheOption) {
  nn::Embedding module(nn::EmbeddingOptions(10, 3).deterministic(true));
  ASSERT_EQ(module.weight.sizes(), (Shape{10, 3}));
  EXPECT_TRUE(module.weight.requires_grad());
  EXPECT_TRUE(module.options().deterministic());
  const Tensor out = module.forward(ids({9, 0}, {2}));
  EXPECT_EQ(out.sizes(), (Shape{2, 3}));
  out.sum().backward();
  EXPECT_EQ(module.weight.grad().sizes(), (Shape{10, 3}));
}

TEST(Embedding, BadIdsDtypesAndShapesAreErrors) {
  const Tensor table = random64({4, 2}, 4);
  expect_throw_with([&] { F::embedding(table, ids({0, 4, 1}, {3})); },
                    {"embedding", "id 4", "position 1", "table of 4 embeddings"});
  expect_throw_with([&] { F::embedding(table, ids({-100}, {1})); }, {"embedding", "id -100", "table of 4"});
  expect_throw_with([&] { F::embedding(table, random64({3}, 5)); }, {"embedding", "indices must be int64", "float64"});
  expect_throw_with([&] { F::embedding(random64({4}, 6), ids({0}, {1})); }, {"embedding", "weight must be 2-D"});
  EXPECT_THROW(nn::Embedding(nn::EmbeddingOptions(0, 3)), ValueError);
}

}  // namespace
}  // namespace sublet
