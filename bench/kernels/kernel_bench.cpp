// GPU benchmark of the element-wise and max-pooling kernels on the activation shapes of a
// ResNet-50 training step (batch 64, 224x224 images, float32).
// Each op runs through its fast path and through the fallback the same op takes on other
// layouts, in the same run:
//  - element-wise: the dense kernel (16-byte vector loads) on aligned contiguous buffers, then
//    the strided kernel, reached by placing every operand one element past the 16-byte boundary
//    (as a view x[1:] would be);
//  - max pooling: the 32-bit-index kernels, then the 64-bit ones (PoolIndexing::Wide).
// The yardstick is a device-to-device copy of the activation (one read, one write): the GB/s
// column counts the bytes each kernel must move, so the dense kernels should approach the
// copy's figure. Prints a table; writes JSON to argv[1] (default kernel_bench.json).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/cuda_check.h"
#include "memory/registry.h"
#include "ops/context.h"
#include "ops/copy.h"
#include "ops/cuda/pooling_cuda.h"
#include "ops/elementwise.h"
#include "ops/pooling.h"

namespace {

using namespace sublet;
using sublet::ops::Shape;

constexpr int kWarmup = 3;
constexpr int kRepeats = 20;

Device gpu() { return Device::cuda(0); }

// Device memory from the caching allocator, filled with the benchmark's random values.
class Buffer {
 public:
  Buffer(std::size_t bytes, const ops::Context& ctx) : ctx_(ctx) {
    block_ = ctx.allocator->allocate(bytes, ctx.stream, memory::BlockCategory::Temporary);
  }
  ~Buffer() { ctx_.allocator->free(block_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T>
  T* as(std::size_t element_offset = 0) const { return static_cast<T*>(block_->ptr) + element_offset; }

 private:
  ops::Context ctx_;
  memory::Block* block_;
};

// Mean microseconds per call of `launch` over kRepeats calls, after kWarmup, by CUDA events on
// the context's stream.
double time_us(const ops::Context& ctx, const std::function<void()>& launch) {
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  for (int i = 0; i < kWarmup; ++i) launch();
  cudaEvent_t start = nullptr, stop = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreate(&start));
  SUBLET_CUDA_CHECK(cudaEventCreate(&stop));
  SUBLET_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < kRepeats; ++i) launch();
  SUBLET_CUDA_CHECK(cudaEventRecord(stop, stream));
  SUBLET_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  SUBLET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  SUBLET_CUDA_CHECK(cudaEventDestroy(start));
  SUBLET_CUDA_CHECK(cudaEventDestroy(stop));
  return 1000.0 * ms / kRepeats;
}

struct Row {
  std::string op, shape, path;
  double us = 0, bytes = 0, baseline_us = 0;  // baseline: the fallback path of the same op
};

std::string shape_str(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0) out += 'x';
    out += std::to_string(s[i]);
  }
  return out;
}

void print(const Row& r) {
  const double gbps = r.bytes / (r.us * 1e3);
  std::printf("%-22s %-16s %-9s %9.1f us %8.0f GB/s", r.op.c_str(), r.shape.c_str(), r.path.c_str(), r.us, gbps);
  if (r.baseline_us > 0) std::printf("   %.2fx faster than the fallback", r.baseline_us / r.us);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json_path = argc > 1 ? argv[1] : "kernel_bench.json";
  if (!memory::cuda_available()) {
    std::fprintf(stderr, "kernel_bench: no CUDA device\n");
    return 1;
  }
  const ops::Context ctx = ops::Context::for_device(gpu());
  // ResNet-50 at batch 64: the stem's output, then each stage's widest activation (the
  // bottlenecks' outputs, where the residual add and the last ReLU run).
  const std::vector<Shape> shapes = {{64, 64, 112, 112}, {64, 256, 56, 56}, {64, 512, 28, 28},
                                     {64, 1024, 14, 14}, {64, 2048, 7, 7}};
  std::int64_t largest = 0;
  for (const auto& s : shapes) largest = std::max(largest, ops::shape_numel(s));
  const std::size_t capacity = static_cast<std::size_t>(largest) + 4;  // room to shift by one element
  std::vector<float> host(capacity);
  std::mt19937_64 engine(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : host) v = dist(engine);
  Buffer a(capacity * sizeof(float), ctx), b(capacity * sizeof(float), ctx), out(capacity * sizeof(float), ctx);
  for (const Buffer* buffer : {&a, &b}) {
    ops::copy_bytes(gpu(), buffer->as<float>(), Device::cpu(), host.data(), capacity * sizeof(float));
  }

  std::vector<Row> rows;
  auto add = [&](Row r) {
    print(r);
    rows.push_back(std::move(r));
  };
  for (const Shape& sizes : shapes) {
    const std::int64_t n = ops::shape_numel(sizes);
    const Shape strides = {sizes[1] * sizes[2] * sizes[3], sizes[2] * sizes[3], sizes[3], 1};
    const Shape scalar_strides(4, 0);
    const double bytes1 = 2.0 * n * sizeof(float), bytes2 = 3.0 * n * sizeof(float);
    const std::string shape = shape_str(sizes);
    // shift 0: every operand 16-byte aligned (dense kernel); shift 1: one float off (strided).
    auto relu = [&](std::size_t shift) {
      ops::unary(ctx, ops::UnaryOp::Relu, DType::Float32, sizes, {out.as<float>(shift), strides},
                 {a.as<float>(shift), strides});
    };
    auto binary = [&](ops::BinaryOp op, double alpha, bool scalar_b, std::size_t shift) {
      ops::binary(ctx, op, DType::Float32, sizes, {out.as<float>(shift), strides}, {a.as<float>(shift), strides},
                  {b.as<float>(shift), scalar_b ? scalar_strides : strides}, alpha);
    };
    const double copy_us = time_us(ctx, [&] {
      SUBLET_CUDA_CHECK(cudaMemcpyAsync(out.as<float>(), a.as<float>(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                                        static_cast<cudaStream_t>(ctx.stream)));
    });
    add({"copy (yardstick)", shape, "memcpy", copy_us, bytes1, 0});
    {
      const double fallback = time_us(ctx, [&] { relu(1); });
      add({"relu", shape, "dense", time_us(ctx, [&] { relu(0); }), bytes1, fallback});
      add({"relu", shape, "strided", fallback, bytes1, 0});
    }
    struct BinaryCase {
      const char* name;
      ops::BinaryOp op;
      double alpha;
      bool scalar_b;
    };
    for (const BinaryCase& c : {BinaryCase{"relu_backward", ops::BinaryOp::ReluBackward, 1.0, false},
                                BinaryCase{"add", ops::BinaryOp::Add, 1.0, false},
                                BinaryCase{"add alpha -0.1", ops::BinaryOp::Add, -0.1, false},
                                BinaryCase{"mul by 0-d tensor", ops::BinaryOp::Mul, 1.0, true}}) {
      const double bytes = c.scalar_b ? bytes1 : bytes2;
      const double fallback = time_us(ctx, [&] { binary(c.op, c.alpha, c.scalar_b, 1); });
      add({c.name, shape, "dense", time_us(ctx, [&] { binary(c.op, c.alpha, c.scalar_b, 0); }), bytes, fallback});
      add({c.name, shape, "strided", fallback, bytes, 0});
    }
  }

  // The stem's max pooling: 64x64x112x112 -> 56x56, kernel 3, stride 2, padding 1.
  ops::Pool2dShape pool;
  pool.batch = 64, pool.channels = 64, pool.in_height = 112, pool.in_width = 112;
  pool.kernel_h = pool.kernel_w = 3, pool.stride_h = pool.stride_w = 2, pool.pad_h = pool.pad_w = 1;
  {
    Buffer indices(pool.output_numel() * sizeof(std::int64_t), ctx);
    const std::string shape = "64x64x112x112";
    // Forward reads the input and writes values and int64 indices; backward reads the gradient
    // and the indices and writes the input's gradient.
    const double forward_bytes = pool.input_numel() * 4.0 + pool.output_numel() * 12.0;
    const double backward_bytes = pool.output_numel() * 12.0 + pool.input_numel() * 4.0;
    auto forward = [&](ops::cuda::PoolIndexing indexing) {
      ops::cuda::max_pool2d_forward(ctx, pool, DType::Float32, a.as<float>(), out.as<float>(),
                                    indices.as<std::int64_t>(), indexing);
    };
    auto backward = [&](ops::cuda::PoolIndexing indexing) {
      ops::cuda::max_pool2d_backward(ctx, pool, DType::Float32, b.as<float>(), indices.as<std::int64_t>(),
                                     out.as<float>(), indexing);
    };
    const double forward_wide = time_us(ctx, [&] { forward(ops::cuda::PoolIndexing::Wide); });
    add({"max_pool2d forward", shape, "int32", time_us(ctx, [&] { forward(ops::cuda::PoolIndexing::Auto); }),
         forward_bytes, forward_wide});
    add({"max_pool2d forward", shape, "int64", forward_wide, forward_bytes, 0});
    forward(ops::cuda::PoolIndexing::Auto);  // indices for the backward
    const double backward_wide = time_us(ctx, [&] { backward(ops::cuda::PoolIndexing::Wide); });
    add({"max_pool2d backward", shape, "int32", time_us(ctx, [&] { backward(ops::cuda::PoolIndexing::Auto); }),
         backward_bytes, backward_wide});
    add({"max_pool2d backward", shape, "int64", backward_wide, backward_bytes, 0});
  }
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.stream)));

  nlohmann::json list = nlohmann::json::array();
  for (const Row& r : rows) {
    list.push_back({{"op", r.op}, {"shape", r.shape}, {"path", r.path}, {"us", r.us}, {"bytes", r.bytes},
                    {"gb_per_s", r.bytes / (r.us * 1e3)},
                    {"speedup_vs_fallback", r.baseline_us > 0 ? r.baseline_us / r.us : 0.0}});
  }
  std::ofstream(json_path) << nlohmann::json{{"benchmark", "kernel_bench"}, {"repeats", kRepeats}, {"rows", list}}.dump(2)
                           << "\n";
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}
