// The per-device kernel tables (ops/kernel_table.h): lookup of registered kernels, the one
// DTypeError for a combination without a kernel, and the registration of every op table: CPU
// float32/float64 everywhere, CUDA entries exactly in CUDA builds.
#include "ops/kernel_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "memory/registry.h"
#include "ops/batch_norm_relu.h"
#include "ops/copy.h"
#include "ops/kernel_table_list.h"
#include "ops/pooling.h"
#include "ops/stream_capture.h"
#include "tests/gpu_skip.h"

namespace sublet::ops {
namespace {

// Substring check that prints the whole message on failure (gmock is not linked here).
::testing::AssertionResult contains(const std::string& text, const std::string& fragment) {
  if (text.find(fragment) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << fragment << "\"";
}

using ProbeKernel = int(int);
int plus_one(int x) { return x + 1; }
int times_two(int x) { return x * 2; }

// A table of the test's own; the op tables are filled by the backends' registration.
KernelTable<ProbeKernel>& probe_table() {
  static constinit KernelTable<ProbeKernel> table;
  return table;
}

std::string message_of(const KernelTable<ProbeKernel>& table, const char* op, Device device, DType dtype,
                       MemoryFormat format) {
  try {
    table.get(op, device, dtype, format);
  } catch (const DTypeError& e) {
    return e.what();
  }
  return "(no DTypeError)";
}

TEST(KernelTable, ReturnsTheKernelRegisteredForEachCombination) {
  KernelTable<ProbeKernel>& table = probe_table();
  table.clear();
  table.set(DeviceType::CPU, DType::Float32, &plus_one);
  table.set(DeviceType::CUDA, DType::Float32, MemoryFormat::ChannelsLast, &times_two);
  EXPECT_EQ(table.get("probe", Device::cpu(), DType::Float32)(20), 21);
  EXPECT_EQ(table.get("probe", Device::cuda(1), DType::Float32, MemoryFormat::ChannelsLast)(20), 40);
  EXPECT_EQ(table.find(DeviceType::CPU, DType::Float32), &plus_one);
  EXPECT_EQ(table.find(DeviceType::CPU, DType::Float64), nullptr);
  EXPECT_EQ(table.find(DeviceType::CUDA, DType::Float32), nullptr);  // only channels_last there
  EXPECT_TRUE(table.has(DeviceType::CUDA, DType::Float32, MemoryFormat::ChannelsLast));
  table.set(DeviceType::CPU, DType::Float32, &times_two);  // a later registration replaces
  EXPECT_EQ(table.get("probe", Device::cpu(), DType::Float32)(20), 40);
}

TEST(KernelTable, MissingCombinationIsOneDTypeErrorNamingOpDtypeLayoutDeviceAndWhatExists) {
  KernelTable<ProbeKernel>& table = probe_table();
  table.clear();
  table.set(DeviceType::CPU, DType::Float32, &plus_one);
  table.set(DeviceType::CPU, DType::Float64, &plus_one);
  table.set(DeviceType::CUDA, DType::Float32, &plus_one);
  table.set(DeviceType::CUDA, DType::Float64, &plus_one);
  EXPECT_EQ(message_of(table, "max_pool2d", Device::cuda(0), DType::BFloat16, MemoryFormat::ChannelsLast),
            "max_pool2d: no kernel for bfloat16 channels_last on cuda:0; kernels exist for cpu float32/float64 "
            "contiguous, cuda float32/float64 contiguous");
  EXPECT_EQ(message_of(table, "probe", Device::cpu(), DType::Int64, MemoryFormat::Contiguous),
            "probe: no kernel for int64 contiguous on cpu; kernels exist for cpu float32/float64 contiguous, "
            "cuda float32/float64 contiguous");
  table.clear();
  EXPECT_EQ(message_of(table, "probe", Device::cuda(2), DType::Float16, MemoryFormat::Contiguous),
            "probe: no kernel for float16 contiguous on cuda:2; no device has a kernel for it in this build");
}

TEST(KernelTable, AnOpWithoutAKernelForTheDtypeThrowsTheTableError) {
  Pool2dShape s;
  s.batch = 1, s.channels = 1, s.in_height = 2, s.in_width = 2, s.kernel_h = 2, s.kernel_w = 2, s.stride_h = 2,
  s.stride_w = 2;
  std::vector<std::int64_t> x(4, 1), out(1), indices(1);
  try {
    max_pool2d_forward(Context{Device::cpu(), nullptr, nullptr}, s, DType::Int64, x.data(), out.data(),
                       indices.data());
    FAIL() << "int64 max pooling ran";
  } catch (const DTypeError& e) {
    EXPECT_TRUE(contains(e.what(), "max_pool2d: no kernel for int64 contiguous on cpu"));
    EXPECT_TRUE(contains(e.what(), "cpu float32/float64/bfloat16/float16 contiguous"));
  }
}

TEST(KernelTable, EveryOpTableHasCpuFloat32AndFloat64Kernels) {
  ASSERT_FALSE(all_kernel_tables().empty());
  for (const NamedKernelTable& entry : all_kernel_tables()) {
    if (!entry.needs_cpu) {
      EXPECT_FALSE(entry.table->has(DeviceType::CPU, DType::Float32)) << entry.name << " is listed as CUDA-only";
      continue;
    }
    EXPECT_TRUE(entry.table->has(DeviceType::CPU, DType::Float32)) << entry.name;
    EXPECT_TRUE(entry.table->has(DeviceType::CPU, DType::Float64)) << entry.name;
    // On the CPU the 16-bit types have casting copies and fills, and the ops autocast runs in
    // them through the float32 kernels (ops/cpu/half_adapters_cpu.h); nothing else may claim them
    // (it would reach a kernel that does not handle them); nothing registers channels_last yet.
    const std::set<std::string> cpu_half_ops = {
        "copy", "fill", "unary", "binary", "ternary", "reduce_sum", "reduce_extremum", "matmul", "conv2d_forward",
        "conv2d_backward_input", "conv2d_backward_weight", "batch_norm_forward_training", "batch_norm_forward_eval",
        "batch_norm_backward_training", "batch_norm_backward_eval", "max_pool2d_forward", "max_pool2d_backward",
        "avg_pool2d_forward", "avg_pool2d_backward", "adaptive_avg_pool2d_forward", "adaptive_avg_pool2d_backward",
        "gelu_forward", "gelu_backward"};
    const bool half_op = cpu_half_ops.count(entry.name) == 1;
    for (DType half : {DType::BFloat16, DType::Float16})
      EXPECT_EQ(entry.table->has(DeviceType::CPU, half), half_op) << entry.name << " " << dtype_name(half);
    EXPECT_FALSE(entry.table->has(DeviceType::CPU, DType::Float32, MemoryFormat::ChannelsLast)) << entry.name;
  }
}

// ctest runs each case in its own process, so here the first lookups of the process race each
// other: every thread must find its kernel (registration is once, and a lookup that misses waits
// for it) and compute the right values. Under ThreadSanitizer this also checks the table reads.
TEST(KernelTable, ConcurrentFirstCallsAllFindTheirKernels) {
  constexpr int kThreads = 8;
  constexpr std::int64_t kCount = 64;
  std::atomic<int> ready{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Context cpu{Device::cpu(), nullptr, nullptr};
      std::vector<double> f64(kCount, 0.0);
      std::vector<std::int64_t> i64(kCount, 0);
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      try {
        if (t % 2 == 0) {
          fill(cpu, DType::Float64, {kCount}, {f64.data(), {1}}, 0.5 + t);
          for (double v : f64) wrong.fetch_add(v == 0.5 + t ? 0 : 1);
        } else {
          fill(cpu, DType::Int64, {kCount}, {i64.data(), {1}}, static_cast<double>(t));
          for (std::int64_t v : i64) wrong.fetch_add(v == t ? 0 : 1);
        }
      } catch (const Error&) {
        wrong.fetch_add(kCount);  // a lookup that did not wait for the registration
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Tables without contiguous float32/float64 CUDA kernels: the GELU in GEMM epilogues is 16-bit
// only (float32 and float64 keep the separate GELU kernels); the batch norm + ReLU backward's
// mask from the input takes 16-bit and channels-last float32 (NCHW float32 keeps the stored mask);
// the float32 weight gradient of a linear is for 16-bit operands only.
const std::set<std::string> kCudaHalfOnlyOps = {"linear_gelu_forward", "linear_gelu_backward",
                                                "batch_norm_relu_backward_input_mask", "linear_weight_grad_float32"};

TEST(KernelTable, CudaEntriesExistExactlyInCudaBuilds) {
  for (const NamedKernelTable& entry : all_kernel_tables()) {
    if (kCudaHalfOnlyOps.count(entry.name) == 1) {
      EXPECT_FALSE(entry.table->has(DeviceType::CUDA, DType::Float32)) << entry.name;
      EXPECT_FALSE(entry.table->has(DeviceType::CUDA, DType::Float64)) << entry.name;
      continue;
    }
    EXPECT_EQ(entry.table->has(DeviceType::CUDA, DType::Float32), memory::cuda_built()) << entry.name;
    EXPECT_EQ(entry.table->has(DeviceType::CUDA, DType::Float64), memory::cuda_built()) << entry.name;
  }
}

// On the GPU the 16-bit types have casts, fills, element-wise ops and reductions (load 16 bits,
// compute in float32, store 16 bits), matmul, conv2d, batch norm and pooling (float32
// accumulation); every other table must refuse them until its kernel handles them, or the lookup
// would hand a 16-bit tensor to a float32/float64-only kernel.
TEST(KernelTable, CudaClaimsTheSixteenBitTypesExactlyForItsHalfKernels) {
  const std::set<std::string> half_ops = {"copy", "fill", "unary", "binary", "ternary", "dropout",
                                          "reduce_sum", "reduce_extremum", "scatter_add", "gather",
                                          "matmul", "linear_bias", "conv2d_forward", "conv2d_backward_input",
                                          "conv2d_backward_weight", "conv2d_backward_input_accumulate", "attention_forward",
                                          "attention_backward",
                                          // the transformer ops (float32 math for 16-bit data)
                                          "log_softmax_forward", "log_softmax_backward", "softmax_forward",
                                          "softmax_backward", "cross_entropy_forward", "cross_entropy_backward",
                                          "embedding_forward", "embedding_backward", "layer_norm_forward",
                                          "layer_norm_backward", "layer_norm_fused_forward",
                                          "layer_norm_fused_backward", "gelu_forward", "gelu_backward",
                                          // the GELU in GEMM epilogues (cuBLASLt)
                                          "linear_gelu_forward", "linear_gelu_backward",
                                          // the float32 weight gradient of a 16-bit linear (cuBLASLt)
                                          "linear_weight_grad_float32"};
  // Batch norm (+ReLU, float32 parameters) and pooling: 16-bit NCHW (ops/cuda/batch_norm_split.cu,
  // ops/cuda/pooling.cu).
  const std::set<std::string> norm_pool_ops = {
      "batch_norm_forward_training", "batch_norm_forward_eval", "batch_norm_backward_training",
      "batch_norm_backward_eval",    "batch_norm_relu_forward", "batch_norm_relu_backward",
      "max_pool2d_forward",          "max_pool2d_backward",     "avg_pool2d_forward",
      "avg_pool2d_backward",         "adaptive_avg_pool2d_forward", "adaptive_avg_pool2d_backward",
      "max_pool2d_forward_positions", "max_pool2d_backward_positions", "batch_norm_relu_backward_input_mask"};
  // Channels-last CUDA kernels (float32, bfloat16, float16): cuDNN's NHWC convolution, sublet's
  // NHWC batch norm and pooling.
  std::set<std::string> channels_last_ops = {"conv2d_forward", "conv2d_backward_input", "conv2d_backward_weight",
                                             "conv2d_backward_input_accumulate"};
  channels_last_ops.insert(norm_pool_ops.begin(), norm_pool_ops.end());
  for (const NamedKernelTable& entry : all_kernel_tables()) {
    const bool expected =
        memory::cuda_built() && (half_ops.count(entry.name) == 1 || norm_pool_ops.count(entry.name) == 1);
    const bool channels_last = memory::cuda_built() && channels_last_ops.count(entry.name) == 1;
    for (DType half : {DType::BFloat16, DType::Float16}) {
      EXPECT_EQ(entry.table->has(DeviceType::CUDA, half), expected) << entry.name << " " << dtype_name(half);
      EXPECT_EQ(entry.table->has(DeviceType::CUDA, half, MemoryFormat::ChannelsLast), channels_last) << entry.name;
    }
    EXPECT_EQ(entry.table->has(DeviceType::CUDA, DType::Float32, MemoryFormat::ChannelsLast), channels_last)
        << entry.name;
    EXPECT_FALSE(entry.table->has(DeviceType::CUDA, DType::Float64, MemoryFormat::ChannelsLast)) << entry.name;
    EXPECT_FALSE(entry.table->has(DeviceType::CUDA, DType::UInt8)) << entry.name;
  }
}

// The fused batch_norm_relu has kernels only where a backend registered them (the CPU: float32
// and float64 NCHW, of any size, as the CPU kernels loop over a channel); asked for elsewhere,
// its error says where they are, from the table.
TEST(KernelTable, FusedBatchNormReluSaysWhereItsKernelsAre) {
  const Context cpu{Device::cpu(), nullptr, nullptr};
  BatchNormShape s;
  s.batch = 2, s.channels = 1;
  EXPECT_TRUE(batch_norm_relu_fused(cpu, s, DType::Float32));
  EXPECT_TRUE(batch_norm_relu_fused(cpu, s, DType::Float64));
  BatchNormShape large = s;
  large.batch = 128, large.height = 28, large.width = 28;  // past CUDA's one-block-per-channel limit
  EXPECT_TRUE(batch_norm_relu_fused(cpu, large, DType::Float32));
  EXPECT_FALSE(batch_norm_relu_fused(cpu, s, DType::BFloat16));
  std::vector<float> x(2, 1.0f), y(2), mean(1), invstd(1);
  try {
    batch_norm_relu_forward_training(cpu, s, DType::BFloat16, x.data(), nullptr, nullptr, nullptr, nullptr, nullptr,
                                     0.1, 1e-5, y.data(), mean.data(), invstd.data());
    FAIL() << "the fused batch norm ran in bfloat16 on the CPU";
  } catch (const ValueError& e) {
    EXPECT_TRUE(contains(e.what(), memory::cuda_built() ? "(cpu float32/float64 contiguous, "
                                                          "cuda float32/float64/bfloat16/float16 contiguous, "
                                                          "cuda float32/bfloat16/float16 channels_last)"
                                                        : "(cpu float32/float64 contiguous)"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "got cpu, bfloat16, 2 values per channel"));
  }
}

TEST(KernelTable, CudaContextWithoutTheCudaBackendIsTheSameDTypeError) {
  if (memory::cuda_built()) GTEST_SKIP() << "CUDA is built in: this checks a CPU-only build's error";
  const Context cuda{Device::cuda(0), nullptr, nullptr};
  std::vector<float> values(4, 1.0f);
  try {
    fill(cuda, DType::Float32, {4}, {values.data(), {1}}, 2.0);
    FAIL() << "a CUDA context ran on the CPU kernel";
  } catch (const DTypeError& e) {
    EXPECT_TRUE(contains(e.what(), "fill: no kernel for float32 contiguous on cuda:0; kernels exist for cpu"));
  }
  EXPECT_FALSE(stream_is_capturing(cuda));
  EXPECT_THROW(copy_bytes(Device::cuda(0), values.data(), Device::cpu(), values.data(), 4), DeviceError);
}

TEST(KernelTable, CudaKernelsAndServicesRunThroughTheTables) {
  SUBLET_SKIP_WITHOUT_GPU("would fill device memory through the CUDA table");
  const Context ctx = Context::for_device(Device::cuda(0));
  memory::ScopedBlock block = ctx.workspace(4 * sizeof(float));
  fill(ctx, DType::Float32, {4}, {block.get(), {1}}, 2.5);
  std::vector<float> host(4, 0.0f);
  copy_bytes(Device::cpu(), host.data(), ctx.device, block.get(), 4 * sizeof(float), ctx.stream);
  for (float v : host) EXPECT_EQ(v, 2.5f);
  EXPECT_FALSE(stream_is_capturing(ctx));
}

}  // namespace
}  // namespace sublet::ops
