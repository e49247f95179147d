// GPU benchmark of the element-wise and max-pooling kernels on the activation shapes of a
// ResNet-50 training step (batch 64, 224x224 images, float32).
// Each op runs through its fast path and through the fallback the same op takes on other
// layouts, in the same run:
//  - element-wise: the dense kernel (16-byte vector loads) on aligned contiguous buffers, then
//    the strided kernel, reached by placing every operand one element past the 16-byte boundary
//    (as a view x[1:] would be);
//  - max pooling: the 32-bit-index kernels, then the 64-bit ones (PoolIndexing::Wide); then the
//    bfloat16 channels-last stem at batch 256 through the scalar and the vectorised kernels.
// The yardstick is a device-to-device copy of the activation (one read, one write): the GB/s
// column counts the bytes each kernel must move, so the dense kernels should approach the
// copy's figure.
// Then batch norm + residual add + ReLU, training mode, on ResNet-18's 32x32 activation shapes
// (batch 128 and 512) and ResNet-50's last two stages: the fused kernels (ops/batch_norm_relu.h)
// against the composition they replace (cuDNN batch norm, add, ReLU forward; ReLU's gradient,
// cuDNN batch norm backward), each pass timed on its own as replays of a CUDA graph of
// kRepeats calls: these kernels take a few microseconds, less than launching them from the host,
// so only a graph shows their GPU time (what a graphed training step pays).
// Prints a table; writes JSON to argv[1] (default kernel_bench.json).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/cuda_check.h"
#include "memory/registry.h"
#include "ops/batch_norm.h"
#include "ops/batch_norm_relu.h"
#include "ops/context.h"
#include "ops/copy.h"
#include "ops/cuda/pooling_cuda.h"
#include "ops/elementwise.h"
#include "ops/pooling.h"

namespace {

using namespace sublet;
using sublet::Shape;

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

// Milliseconds between CUDA events recorded on `stream` before and after `enqueue`.
float elapsed_ms(cudaStream_t stream, const std::function<void()>& enqueue) {
  cudaEvent_t start = nullptr, stop = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreate(&start));
  SUBLET_CUDA_CHECK(cudaEventCreate(&stop));
  SUBLET_CUDA_CHECK(cudaEventRecord(start, stream));
  enqueue();
  SUBLET_CUDA_CHECK(cudaEventRecord(stop, stream));
  SUBLET_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  SUBLET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  SUBLET_CUDA_CHECK(cudaEventDestroy(start));
  SUBLET_CUDA_CHECK(cudaEventDestroy(stop));
  return ms;
}

// Mean microseconds per call of `launch` over kRepeats calls, after kWarmup, by CUDA events on
// the context's stream.
double time_us(const ops::Context& ctx, const std::function<void()>& launch) {
  for (int i = 0; i < kWarmup; ++i) launch();
  const float ms = elapsed_ms(static_cast<cudaStream_t>(ctx.stream), [&] {
    for (int i = 0; i < kRepeats; ++i) launch();
  });
  return 1000.0 * ms / kRepeats;
}

// Mean microseconds per call of `launch` as a CUDA graph of kRepeats calls, replayed after one
// untimed replay (and kWarmup calls before the capture).
double graph_time_us(const ops::Context& ctx, const std::function<void()>& launch) {
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  for (int i = 0; i < kWarmup; ++i) launch();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SUBLET_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kRepeats; ++i) launch();
  SUBLET_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  SUBLET_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  SUBLET_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  const float ms = elapsed_ms(stream, [&] { SUBLET_CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
  SUBLET_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SUBLET_CUDA_CHECK(cudaGraphDestroy(graph));
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

// Fused batch norm + add + ReLU against cuDNN batch norm, add and ReLU, forward and backward, on
// a stream of its own (the legacy default stream cannot be captured).
void add_batch_norm_relu_rows(const ops::Context& default_ctx, const std::vector<float>& host,
                              const std::function<void(Row)>& add) {
  // Declared before the buffers, so it outlives their frees.
  struct OwnStream {
    cudaStream_t handle = nullptr;
    OwnStream() { SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking)); }
    ~OwnStream() {
      cudaStreamSynchronize(handle);  // a destructor cannot throw; the run's results are printed already
      cudaStreamDestroy(handle);
    }
  } stream;
  ops::Context ctx = default_ctx;
  ctx.stream = stream.handle;
  const std::vector<ops::BatchNormShape> shapes = {{128, 64, 8, 8},  {128, 128, 4, 4}, {128, 256, 2, 2},
                                                   {128, 512, 1, 1}, {512, 64, 8, 8},  {64, 1024, 14, 14},
                                                   {64, 2048, 7, 7}};
  std::int64_t largest = 0;
  for (const auto& s : shapes) largest = std::max(largest, s.numel());
  const std::size_t bytes = static_cast<std::size_t>(largest) * sizeof(float);
  Buffer x(bytes, ctx), residual(bytes, ctx), y(bytes, ctx), tmp(bytes, ctx), grad(bytes, ctx), grad_in(bytes, ctx),
      relu_grad(bytes, ctx);
  for (const Buffer* buffer : {&x, &residual, &grad}) {
    ops::copy_bytes(gpu(), buffer->as<float>(), Device::cpu(), host.data(), bytes);
  }
  const std::size_t channel_bytes = 2048 * sizeof(float);
  Buffer weight(channel_bytes, ctx), bias(channel_bytes, ctx), running_mean(channel_bytes, ctx),
      running_var(channel_bytes, ctx), save_mean(channel_bytes, ctx), save_invstd(channel_bytes, ctx),
      grad_weight(channel_bytes, ctx), grad_bias(channel_bytes, ctx);
  const std::vector<float> ones(2048, 1.0f);
  for (const Buffer* buffer : {&weight, &running_var}) {
    ops::copy_bytes(gpu(), buffer->as<float>(), Device::cpu(), ones.data(), channel_bytes);
  }
  const DType f32 = DType::Float32;
  for (const ops::BatchNormShape& s : shapes) {
    const Shape sizes = {s.batch, s.channels, s.height, s.width};
    const Shape strides = {s.channels * s.spatial(), s.spatial(), s.width, 1};
    const std::string shape = shape_str(sizes);
    const double n = static_cast<double>(s.numel());
    // Least traffic: forward reads x and the residual and writes y; backward reads the gradient,
    // y and x and writes the input's and the residual's gradients.
    const double forward_bytes = 3 * n * sizeof(float), backward_bytes = 5 * n * sizeof(float);
    auto fused_forward = [&] {
      ops::batch_norm_relu_forward_training(ctx, s, f32, x.as<float>(), residual.as<float>(), weight.as<float>(),
                                            bias.as<float>(), running_mean.as<float>(), running_var.as<float>(), 0.1,
                                            1e-5, y.as<float>(), save_mean.as<float>(), save_invstd.as<float>());
    };
    auto composed_forward = [&] {
      ops::batch_norm_forward_training(ctx, s, f32, x.as<float>(), weight.as<float>(), bias.as<float>(),
                                       running_mean.as<float>(), running_var.as<float>(), 0.1, 1e-5,
                                       tmp.as<float>(), save_mean.as<float>(), save_invstd.as<float>());
      ops::binary(ctx, ops::BinaryOp::Add, f32, sizes, {tmp.as<float>(), strides}, {tmp.as<float>(), strides},
                  {residual.as<float>(), strides}, 1.0);
      ops::unary(ctx, ops::UnaryOp::Relu, f32, sizes, {y.as<float>(), strides}, {tmp.as<float>(), strides});
    };
    auto fused_backward = [&] {
      ops::batch_norm_relu_backward_training(ctx, s, f32, grad.as<float>(), y.as<float>(), x.as<float>(),
                                             weight.as<float>(), save_mean.as<float>(), save_invstd.as<float>(),
                                             grad_in.as<float>(), grad_weight.as<float>(), grad_bias.as<float>(),
                                             relu_grad.as<float>());
    };
    auto composed_backward = [&] {
      ops::binary(ctx, ops::BinaryOp::ReluBackward, f32, sizes, {relu_grad.as<float>(), strides},
                  {grad.as<float>(), strides}, {y.as<float>(), strides}, 1.0);
      ops::batch_norm_backward_training(ctx, s, f32, relu_grad.as<float>(), x.as<float>(), weight.as<float>(),
                                        save_mean.as<float>(), save_invstd.as<float>(), grad_in.as<float>(),
                                        grad_weight.as<float>(), grad_bias.as<float>());
    };
    const bool fused = ops::batch_norm_relu_fused(ctx, s, f32);
    const double composed_forward_us = graph_time_us(ctx, composed_forward);
    if (fused) {
      add({"bn+add+relu forward", shape, "fused", graph_time_us(ctx, fused_forward), forward_bytes,
           composed_forward_us});
    }
    add({"bn+add+relu forward", shape, "cudnn+2", composed_forward_us, forward_bytes, 0});
    const double composed_backward_us = graph_time_us(ctx, composed_backward);
    if (fused) {
      add({"bn+add+relu backward", shape, "fused", graph_time_us(ctx, fused_backward), backward_bytes,
           composed_backward_us});
    }
    add({"bn+add+relu backward", shape, "cudnn+1", composed_backward_us, backward_bytes, 0});
  }
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(stream.handle));
}

// ResNet-50's stem pooling as it trains in bfloat16 channels-last at batch 256 (3x3, stride 2,
// padding 1, 256x64x112x112 -> 56x56): the scalar kernels with int64 indices (PoolIndexing::Scalar,
// what every call ran before the vectorised ones), the vectorised kernels with int64 indices, and
// the vectorised kernels with one-byte window positions (what training runs). Bytes: the input
// and output values plus the saved argmax (forward); the gradients plus the argmax (backward).
void add_stem_max_pool_rows(const ops::Context& ctx, const std::vector<float>& host, const std::function<void(Row)>& add) {
  ops::Pool2dShape pool;
  pool.batch = 256, pool.channels = 64, pool.in_height = 112, pool.in_width = 112;
  pool.kernel_h = pool.kernel_w = 3, pool.stride_h = pool.stride_w = 2, pool.pad_h = pool.pad_w = 1;
  pool.format = MemoryFormat::ChannelsLast;
  const DType bf16 = DType::BFloat16;
  const std::size_t in_count = static_cast<std::size_t>(pool.input_numel());
  const std::size_t out_count = static_cast<std::size_t>(pool.output_numel());
  Buffer x(in_count * 2, ctx), y(out_count * 2, ctx), grad_x(in_count * 2, ctx), grad_y(out_count * 2, ctx);
  Buffer indices(out_count * sizeof(std::int64_t), ctx), positions(out_count, ctx);
  // bfloat16 of the host's random floats (their high halves), repeated over both inputs.
  std::vector<std::uint16_t> pattern(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) pattern[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(host[i]) >> 16);
  for (const auto& [buffer, count] : {std::pair{&x, in_count}, std::pair{&grad_y, out_count}}) {
    for (std::size_t done = 0; done < count; done += pattern.size()) {
      const std::size_t n = std::min(pattern.size(), count - done);
      ops::copy_bytes(gpu(), buffer->as<std::uint16_t>(done), Device::cpu(), pattern.data(), n * 2);
    }
  }
  const std::string shape = "256x64x112x112 bf16 NHWC";
  auto forward = [&](ops::cuda::PoolIndexing indexing, bool compact) {
    if (compact) {
      ops::cuda::max_pool2d_forward_positions(ctx, pool, bf16, x.as<std::uint16_t>(), y.as<std::uint16_t>(), positions.as<std::uint8_t>(),
                                              indexing);
    } else {
      ops::cuda::max_pool2d_forward(ctx, pool, bf16, x.as<std::uint16_t>(), y.as<std::uint16_t>(), indices.as<std::int64_t>(), indexing);
    }
  };
  auto backward = [&](ops::cuda::PoolIndexing indexing, bool compact) {
    if (compact) {
      ops::cuda::max_pool2d_backward_positions(ctx, pool, bf16, grad_y.as<std::uint16_t>(), positions.as<std::uint8_t>(),
                                               grad_x.as<std::uint16_t>(), indexing);
    } else {
      ops::cuda::max_pool2d_backward(ctx, pool, bf16, grad_y.as<std::uint16_t>(), indices.as<std::int64_t>(), grad_x.as<std::uint16_t>(),
                                     indexing);
    }
  };
  using ops::cuda::PoolIndexing;
  const double values = in_count * 2.0 + out_count * 2.0;
  const double old_forward = time_us(ctx, [&] { forward(PoolIndexing::Scalar, false); });
  add({"max_pool2d forward", shape, "scalar+i64", old_forward, values + out_count * 8.0, 0});
  add({"max_pool2d forward", shape, "vec+i64", time_us(ctx, [&] { forward(PoolIndexing::Auto, false); }),
       values + out_count * 8.0, old_forward});
  add({"max_pool2d forward", shape, "vec+u8", time_us(ctx, [&] { forward(PoolIndexing::Auto, true); }),
       values + out_count * 1.0, old_forward});
  forward(PoolIndexing::Auto, false);  // the saved argmax of both kinds for the backward
  forward(PoolIndexing::Auto, true);
  const double old_backward = time_us(ctx, [&] { backward(PoolIndexing::Scalar, false); });
  add({"max_pool2d backward", shape, "scalar+i64", old_backward, values + out_count * 8.0, 0});
  add({"max_pool2d backward", shape, "vec+i64", time_us(ctx, [&] { backward(PoolIndexing::Auto, false); }),
       values + out_count * 8.0, old_backward});
  add({"max_pool2d backward", shape, "vec+u8", time_us(ctx, [&] { backward(PoolIndexing::Auto, true); }),
       values + out_count * 1.0, old_backward});
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.stream)));
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
  for (const auto& s : shapes) largest = std::max(largest, sublet::shape_numel(s));
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
    const std::int64_t n = sublet::shape_numel(sizes);
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
  add_stem_max_pool_rows(ctx, host, add);
  add_batch_norm_relu_rows(ctx, host, add);
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
