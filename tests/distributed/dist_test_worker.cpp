// A data-parallel worker for the multi-process tests (test_gloo_process_group): started several
// times with torchrun's variables, it joins a Gloo group on the CPU and does one thing.
//   dist_test_worker collectives       every collective and dtype against values known in closed
//                                       form; exit 0, or 1 printing each mismatch
//   dist_test_worker sync_bn FILE      float64 sync batch norm of this rank's rows of a seeded
//                                       batch, forward and backward; writes the results to FILE
// Errors print one line and exit 2, as `sublet` does.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/half.h"
#include "runtime/distributed/process_group.h"
#include "runtime/factories.h"
#include "runtime/generator.h"
#include "runtime/nn/sync_batch_norm.h"
#include "tests/distributed/sync_bn_case.h"

namespace {

using namespace sublet;
using namespace sublet::distributed;

int failures = 0;

template <typename T>
void expect_equal(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!(static_cast<double>(got[i]) == static_cast<double>(want[i]))) {
      std::printf("%s: element %zu is %.17g, expected %.17g\n", what, i, static_cast<double>(got[i]),
                  static_cast<double>(want[i]));
      ++failures;
      return;
    }
  }
}

int collectives(ProcessGroup& group) {
  const int r = group.rank();
  const int w = group.world_size();
  const std::size_t n = 1000;
  {
    // Larger than Gloo's 1 MiB segments and not a multiple of the world size.
    const std::size_t big = 300'001;
    std::vector<float> v(big), want(big);
    for (std::size_t i = 0; i < big; ++i) {
      v[i] = static_cast<float>((r + 1) * (i % 1000));
      want[i] = static_cast<float>(w * (w + 1) / 2 * (i % 1000));
    }
    group.all_reduce_async(v.data(), big, DType::Float32, ReduceOp::Sum, nullptr);
    group.join_pending(nullptr);
    expect_equal("large float32 sum", v, want);
  }
  {
    std::vector<float> v(n), want(n);
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = static_cast<float>((r + 1) * (i + 1)) * 0.5f;
      want[i] = static_cast<float>(w * (w + 1) / 2 * (i + 1)) * 0.5f;
    }
    group.all_reduce(v.data(), n, DType::Float32, ReduceOp::Sum, nullptr);
    expect_equal("float32 sum", v, want);
  }
  {
    std::vector<double> v(n), want(n);
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = r + static_cast<double>(i);
      want[i] = (w - 1) / 2.0 + static_cast<double>(i);
    }
    group.all_reduce(v.data(), n, DType::Float64, ReduceOp::Average, nullptr);
    expect_equal("float64 average", v, want);
  }
  {
    std::vector<BFloat16> v(n, BFloat16(static_cast<float>(r + 1)));
    group.all_reduce(v.data(), n, DType::BFloat16, ReduceOp::Sum, nullptr);
    std::vector<float> got, want(n, static_cast<float>(w * (w + 1) / 2));
    for (const BFloat16 b : v) got.push_back(static_cast<float>(b));
    expect_equal("bfloat16 sum", got, want);
  }
  {
    std::vector<std::int64_t> v(n), want(n);
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = (static_cast<std::int64_t>(r) << 40) + static_cast<std::int64_t>(i);
      want[i] = (static_cast<std::int64_t>(w * (w - 1) / 2) << 40) + w * static_cast<std::int64_t>(i);
    }
    group.all_reduce(v.data(), n, DType::Int64, ReduceOp::Sum, nullptr);
    expect_equal("int64 sum", v, want);
  }
  {
    const int root = w - 1;
    std::vector<double> v(n, -1.0), want(n);
    for (std::size_t i = 0; i < n; ++i) {
      want[i] = static_cast<double>(i) * 3.25;
      if (r == root) v[i] = want[i];
    }
    group.broadcast(v.data(), n, DType::Float64, root, nullptr);
    expect_equal("float64 broadcast from the last rank", v, want);
  }
  {
    // Three buckets in flight at once, then one join: each holds its own sum.
    std::vector<std::vector<float>> buckets(3, std::vector<float>(n));
    for (std::size_t b = 0; b < buckets.size(); ++b)
      for (std::size_t i = 0; i < n; ++i) buckets[b][i] = static_cast<float>((b + 1) * (r + 1));
    for (auto& bucket : buckets) group.all_reduce_async(bucket.data(), n, DType::Float32, ReduceOp::Average, nullptr);
    group.join_pending(nullptr);
    for (std::size_t b = 0; b < buckets.size(); ++b)
      expect_equal("asynchronous float32 average", buckets[b],
                   std::vector<float>(n, static_cast<float>(b + 1) * static_cast<float>(w + 1) / 2.0f));
  }
  group.barrier();
  if (failures == 0) std::printf("rank %d: collectives ok\n", r);
  return failures == 0 ? 0 : 1;
}

void write_values(std::ofstream& out, const char* name, const Tensor& t) {
  out << name;
  for (const double v : t.contiguous().to_vector<double>()) out << ' ' << std::setprecision(17) << v;
  out << '\n';
}

int sync_bn(ProcessGroup& group, const std::string& path) {
  const testing::SyncBatchNormCase c;
  const std::int64_t rows = c.batch / group.world_size();
  const std::int64_t first = rows * group.rank();
  Tensor x = c.input().narrow(0, first, rows).contiguous().requires_grad_();
  Tensor weight = c.weight().requires_grad_();
  Tensor bias = c.bias().requires_grad_();
  Tensor running_mean = zeros({c.channels}, TensorOptions().dtype(DType::Float64));
  Tensor running_var = ones({c.channels}, TensorOptions().dtype(DType::Float64));
  nn::SyncBatchNormScope scope([&group](Tensor& values) {
    group.all_reduce(values.data_ptr(), static_cast<std::size_t>(values.numel()), values.dtype(), ReduceOp::Sum, nullptr);
  });
  Tensor y = nn::sync_batch_norm(x, {}, false, running_mean, running_var, weight, bias, c.momentum, c.eps);
  (y * c.upstream().narrow(0, first, rows).contiguous()).sum().backward();
  std::ofstream out(path);
  write_values(out, "output", y.detach());
  write_values(out, "input_grad", x.grad());
  write_values(out, "weight_grad", weight.grad());
  write_values(out, "bias_grad", bias.grad());
  write_values(out, "running_mean", running_mean);
  write_values(out, "running_var", running_var);
  return out ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    auto group = make_process_group(Backend::Gloo, launch_env_from_process(), Device::cpu(),
                                    {.store_timeout = std::chrono::seconds(30), .collective_timeout = std::chrono::seconds(30)});
    if (mode == "collectives") return collectives(*group);
    if (mode == "sync_bn" && argc > 2) return sync_bn(*group, argv[2]);
    std::fprintf(stderr, "usage: dist_test_worker collectives | sync_bn FILE\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
