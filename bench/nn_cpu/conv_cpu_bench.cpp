// CPU benchmark of the NN kernels of a ResNet-20 training step (1x28x28 inputs, batch 128,
// float32): conv2d forward, backward-input and backward-weight per layer, then batch_norm
// training forward + backward per activation size.
// Baseline in the same run: the same kernels on one OpenMP thread, so the table shows the
// multi-thread speed-up next to the absolute time. Prints a table; writes JSON to argv[1]
// (default conv_cpu_bench.json). SUBLET_BENCH_CLOCK=cpu times process CPU time (see now_ms).
// SUBLET_BENCH_LAYERS=TEXT times only the layers whose name contains TEXT (batch norms: "batch_norm"),
// for profiling one kernel.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ops/batch_norm.h"
#include "ops/conv2d.h"

namespace {

using sublet::ops::Conv2dShape;

struct Layer {
  std::string name;
  Conv2dShape shape;
  int count;  // how many times the layer occurs in the network
};

Conv2dShape conv(std::int64_t batch, std::int64_t in_c, std::int64_t size, std::int64_t out_c,
                 std::int64_t kernel, std::int64_t stride) {
  Conv2dShape s;
  s.batch = batch; s.in_channels = in_c; s.in_height = s.in_width = size;
  s.out_channels = out_c; s.kernel_h = s.kernel_w = kernel;
  s.stride_h = s.stride_w = stride; s.pad_h = s.pad_w = kernel / 2;
  return s;
}

// ResNet-20 (He et al., CIFAR variant) on 28x28: 3 stages of 3 basic blocks, 1x1 projection
// shortcuts where the shape changes.
std::vector<Layer> resnet20_layers(std::int64_t batch) {
  return {
      {"stem 1->16 3x3 @28", conv(batch, 1, 28, 16, 3, 1), 1},
      {"s1 16->16 3x3 @28", conv(batch, 16, 28, 16, 3, 1), 6},
      {"s2 16->32 3x3/2 @28", conv(batch, 16, 28, 32, 3, 2), 1},
      {"s2 32->32 3x3 @14", conv(batch, 32, 14, 32, 3, 1), 5},
      {"s2 short 16->32 1x1/2", conv(batch, 16, 28, 32, 1, 2), 1},
      {"s3 32->64 3x3/2 @14", conv(batch, 32, 14, 64, 3, 2), 1},
      {"s3 64->64 3x3 @7", conv(batch, 64, 7, 64, 3, 1), 5},
      {"s3 short 32->64 1x1/2", conv(batch, 32, 14, 64, 1, 2), 1},
  };
}

struct Timing {
  double forward_ms, backward_input_ms, backward_weight_ms;
  double total() const { return forward_ms + backward_input_ms + backward_weight_ms; }
};

// SUBLET_BENCH_CLOCK=cpu: process CPU time instead of wall time. On a machine shared with other
// jobs, CPU time with OMP_NUM_THREADS=1 still compares kernels (a preempted thread is not
// charged), where wall time does not.
double now_ms() {
  static const bool cpu_clock = [] {
    const char* clock = std::getenv("SUBLET_BENCH_CLOCK");
    return clock != nullptr && std::string(clock) == "cpu";
  }();
  if (cpu_clock) {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
double median_ms(F&& f, int repeats) {
  f();  // warm-up: workspaces cached, pages touched
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const double start = now_ms();
    f();
    times.push_back(now_ms() - start);
  }
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[repeats / 2];
}

Timing time_layer(const Conv2dShape& s, int repeats) {
  const auto ctx = sublet::ops::Context::for_device(sublet::Device::cpu());
  std::mt19937 engine(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto random = [&](std::int64_t n) { std::vector<float> v(n); for (float& x : v) x = dist(engine); return v; };
  const auto input = random(s.input_numel()), weight = random(s.weight_numel()), bias = random(s.out_channels);
  const auto grad_output = random(s.output_numel());
  std::vector<float> output(s.output_numel()), grad_input(s.input_numel()), grad_weight(s.weight_numel()), grad_bias(s.out_channels);
  const auto f32 = sublet::DType::Float32;
  Timing t{};
  t.forward_ms = median_ms([&] { conv2d_forward(ctx, s, f32, input.data(), weight.data(), bias.data(), output.data()); }, repeats);
  t.backward_input_ms = median_ms([&] { conv2d_backward_input(ctx, s, f32, grad_output.data(), weight.data(), grad_input.data()); }, repeats);
  t.backward_weight_ms = median_ms([&] {
    conv2d_backward_weight(ctx, s, f32, grad_output.data(), input.data(), grad_weight.data(), grad_bias.data()); }, repeats);
  return t;
}

double gflop(const Conv2dShape& s) {  // multiply-adds of one pass, x2
  return 2.0 * s.output_numel() * (s.in_channels / s.groups) * s.kernel_h * s.kernel_w * 1e-9;
}

// batch_norm training forward + backward on [batch, channels, size, size].
double time_batch_norm(std::int64_t batch, std::int64_t channels, std::int64_t size, int repeats) {
  const auto ctx = sublet::ops::Context::for_device(sublet::Device::cpu());
  const sublet::ops::BatchNormShape s{batch, channels, size, size};
  std::mt19937 engine(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto random = [&](std::int64_t n) { std::vector<float> v(n); for (float& x : v) x = dist(engine); return v; };
  const auto x = random(s.numel()), grad_out = random(s.numel()), w = random(channels), b = random(channels);
  std::vector<float> out(s.numel()), grad_in(s.numel()), mean(channels), invstd(channels), rm(channels, 0.f),
      rv(channels, 1.f), gw(channels), gb(channels);
  const auto f32 = sublet::DType::Float32;
  return median_ms([&] {
    sublet::ops::batch_norm_forward_training(ctx, s, f32, x.data(), w.data(), b.data(), rm.data(), rv.data(), 0.1,
                                             1e-5, out.data(), mean.data(), invstd.data());
    sublet::ops::batch_norm_backward_training(ctx, s, f32, grad_out.data(), x.data(), w.data(), mean.data(),
                                              invstd.data(), grad_in.data(), gw.data(), gb.data());
  }, repeats);
}

}  // namespace

// SUBLET_BENCH_LAYERS: unset or empty times everything.
bool selected(const std::string& name) {
  const char* filter = std::getenv("SUBLET_BENCH_LAYERS");
  return filter == nullptr || *filter == '\0' || name.find(filter) != std::string::npos;
}

int main(int argc, char** argv) {
  const std::string json_path = argc > 1 ? argv[1] : "conv_cpu_bench.json";
  const int threads = omp_get_max_threads();
  const int repeats = 7;
  std::printf("conv2d CPU, ResNet-20 @ 1x28x28, batch 128, float32, %d threads (baseline: 1 thread)\n", threads);
  std::printf("%-24s %5s %9s %9s %9s %9s %8s %8s\n", "layer", "count", "fwd ms", "bwd_in", "bwd_w", "1-thr ms",
              "speedup", "GFLOP/s");
  std::ofstream json(json_path);
  json << "{\"threads\": " << threads << ", \"layers\": [";
  double network_ms = 0, network_baseline_ms = 0;
  bool first = true;
  for (const Layer& layer : resnet20_layers(128)) {
    if (!selected(layer.name)) continue;
    omp_set_num_threads(1);
    const Timing baseline = time_layer(layer.shape, repeats);
    omp_set_num_threads(threads);
    const Timing t = time_layer(layer.shape, repeats);
    const double rate = 3 * gflop(layer.shape) / (t.total() * 1e-3);
    std::printf("%-24s %5d %9.2f %9.2f %9.2f %9.2f %7.2fx %8.1f\n", layer.name.c_str(), layer.count, t.forward_ms,
                t.backward_input_ms, t.backward_weight_ms, baseline.total(), baseline.total() / t.total(), rate);
    network_ms += layer.count * t.total();
    network_baseline_ms += layer.count * baseline.total();
    json << (first ? "" : ", ") << "{\"name\": \"" << layer.name << "\", \"count\": " << layer.count
         << ", \"forward_ms\": " << t.forward_ms << ", \"backward_input_ms\": " << t.backward_input_ms
         << ", \"backward_weight_ms\": " << t.backward_weight_ms << ", \"baseline_1thread_ms\": " << baseline.total()
         << ", \"gflops\": " << rate << "}";
    first = false;
  }
  std::printf("all convolutions of one training step: %.1f ms (1 thread: %.1f ms, speed-up %.2fx)\n", network_ms,
              network_baseline_ms, network_baseline_ms / network_ms);
  json << "], \"step_conv_ms\": " << network_ms << ", \"step_conv_baseline_1thread_ms\": " << network_baseline_ms;

  // ResNet-20 batch norms: 7 at 16x28x28, 6 at 32x14x14, 6 at 64x7x7.
  struct NormLayer { std::int64_t channels, size; int count; };
  const NormLayer norms[] = {{16, 28, 7}, {32, 14, 6}, {64, 7, 6}};
  std::printf("\n%-24s %5s %12s %9s %8s\n", "batch_norm fwd+bwd", "count", "ms", "1-thr ms", "speedup");
  double norm_ms = 0, norm_baseline_ms = 0;
  for (const NormLayer& n : norms) {
    if (!selected("batch_norm")) break;
    omp_set_num_threads(1);
    const double baseline = time_batch_norm(128, n.channels, n.size, repeats);
    omp_set_num_threads(threads);
    const double t = time_batch_norm(128, n.channels, n.size, repeats);
    const std::string name = std::to_string(n.channels) + "x" + std::to_string(n.size) + "x" + std::to_string(n.size);
    std::printf("%-24s %5d %12.2f %9.2f %7.2fx\n", name.c_str(), n.count, t, baseline, baseline / t);
    norm_ms += n.count * t;
    norm_baseline_ms += n.count * baseline;
  }
  std::printf("all batch norms of one training step: %.1f ms (1 thread: %.1f ms)\n", norm_ms, norm_baseline_ms);
  json << ", \"step_batch_norm_ms\": " << norm_ms << ", \"step_batch_norm_baseline_1thread_ms\": " << norm_baseline_ms
       << "}\n";
  return 0;
}
