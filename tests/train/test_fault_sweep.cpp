// Fault-injection sweep over a training step (docs/reliability.md): for every n, the CPU
// backend refuses the n-th segment request of one full step of a small ResNet (forward, loss,
// backward, optimizer step, zero_grad). Each run must either recover (the allocator frees its
// cache and retries) or throw OutOfMemoryError; anything else fails the test. After an error
// and the usual clean-up of a training loop (zero_grad, as Trainer::halve_after_oom), every
// tensor of the step is gone: memory_allocated() is back at its value before the step, the
// allocator's books agree with its segments, and a step with half the batch succeeds. A run that
// recovered must have computed exactly what the run without a fault computed.
//
// The backend is memory::FaultInjectingBackend over HostBackend (real memory), installed as the
// CPU allocator's backend; every test runs in its own process (gtest_discover_tests). Each run
// starts from an emptied cache, so that the step makes its segment requests again. From a cold
// cache nearly all fall in forward (the step's peak is at its end; backward and the optimizer
// mostly reuse the freed activations; the CPU's Winograd weight gradient asks for one workspace
// segment in backward), so one case also runs without a cache, where every tensor of forward,
// backward and the optimizer update is a request of its own.
//  - Fault::Once refuses one request: the allocator's retry after emptying the cache always
//    succeeds, so every n must recover. Without a cache (OnceNoCache) the refusals fall in every
//    phase in turn, so recovery is shown after a refusal in forward, in backward and in the
//    optimizer step; the per-phase counts are asserted, so the sweep cannot silently stop
//    reaching a phase.
//  - Fault::DeviceFull refuses the n-th request and keeps the device at the bytes held then, so
//    the retry succeeds only if emptying the cache gave back enough for the rest of the step.
//    Before each run stale blocks of about half the step's growth, and at least the step's
//    largest single request (a workspace of backward can be one), are cached on another stream
//    (memory the step cannot reuse, as a prefetch stream's): an early refusal still needs more
//    than that and ends in OutOfMemoryError, a late one recovers. Without a cache there is
//    nothing to give back: every refusal ends the step, at each allocation of it in turn.
// Both kinds run with plain and with expandable segments (where a request is a map call).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../memory/allocator_invariants.h"
#include "core/errors.h"
#include "memory/fault_injecting_backend.h"
#include "memory/host_backend.h"
#include "memory/registry.h"
#include "models/resnet.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/optim/sgd.h"

namespace sublet {
namespace {

using memory::FaultInjectingBackend;
using Fault = FaultInjectingBackend::Fault;

// ResNet-20 at half width (8/16/32 planes): every n of a step is swept in seconds.
std::shared_ptr<nn::Module> small_resnet() {
  models::ResNetConfig config = models::cifar_resnet_config(20, /*in_channels=*/3, /*num_classes=*/10);
  config.stem_channels = 8;
  config.stage_planes = {8, 16, 32};
  config.seed = 3;
  return std::make_shared<models::ResNet>(config);
}

// Cached memory of another stream: never reused by the step, released by the OOM path.
const StreamHandle kOtherStream = reinterpret_cast<StreamHandle>(std::uintptr_t{0x5157});

struct SweepCase {
  const char* name;
  Fault fault;
  bool expandable_segments = false;
  bool caching = true;       // false: no cache, every tensor is a segment request of its own
  bool stale_cache = false;  // cache half the step's growth (at least its largest request) on kOtherStream first
  std::int64_t batch = 16;   // of 3 x image_size x image_size images
  std::int64_t image_size = 32;
  // false: SGD's per-parameter update with weight decay, whose temporaries make the optimizer
  // step allocate too (the fused update allocates nothing).
  bool fused_sgd = true;
};

// Test names in ctest: the case's name, not the struct's bytes.
void PrintTo(const SweepCase& sweep, std::ostream* out) { *out << sweep.name; }

// A state dict kept outside the allocator, so that the saved copy holds no block that would
// keep segments alive (with expandable segments: mapped) through empty_cache().
class HostCopy {
 public:
  HostCopy() = default;
  explicit HostCopy(const std::vector<std::pair<std::string, Tensor>>& state) {
    for (const auto& [name, tensor] : state) {
      const Tensor t = tensor.contiguous();
      Entry& e = entries_.emplace_back(Entry{name, t.sizes(), t.dtype(), std::vector<std::uint8_t>(t.nbytes())});
      std::memcpy(e.bytes.data(), t.data_ptr(), t.nbytes());
    }
  }
  std::vector<std::pair<std::string, Tensor>> tensors() const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const Entry& e : entries_) {
      Tensor t = Tensor::empty(e.sizes, TensorOptions().dtype(e.dtype));
      std::memcpy(t.data_ptr(), e.bytes.data(), e.bytes.size());
      out.emplace_back(e.name, std::move(t));
    }
    return out;
  }

 private:
  struct Entry {
    std::string name;
    Shape sizes;
    DType dtype;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Entry> entries_;
};

class FaultSweep : public ::testing::TestWithParam<SweepCase> {
 protected:
  void SetUp() override {
    memory::AllocatorConfig config;
    config.expandable_segments = GetParam().expandable_segments;
    config.caching = GetParam().caching;
    auto backend = std::make_unique<FaultInjectingBackend>(std::make_unique<memory::HostBackend>());
    backend_ = backend.get();
    memory::replace_allocator(Device::cpu(), std::make_unique<memory::CachingAllocator>(std::move(backend), config));
    allocator_ = &memory::allocator_for(Device::cpu());

    Generator generator(17);
    const std::int64_t batch = GetParam().batch, size = GetParam().image_size;
    images_ = randn({batch, 3, size, size}, generator);
    labels_ = Tensor::from_vector(random_labels(batch, 5), {batch});
    half_images_ = images_.narrow(0, 0, batch / 2).contiguous();
    half_labels_ = labels_.narrow(0, 0, batch / 2).contiguous();
    build_model_and_optimizer();
    // One step first, so that the optimizer's momentum buffers exist: a step from here on
    // creates no lasting state, and memory_allocated() must come back to its value before it.
    train_step(images_, labels_);
    model_state_ = HostCopy(model_->state_dict());
    optimizer_state_ = HostCopy(optimizer_->state_dict());
    // The same state rebuilt with nothing else alive, so that it sits packed at the start of the
    // segments instead of between the warm-up's freed activations: then empty_cache() gives back
    // all a step adds (an expandable segment can only unmap its free tail), and every run makes
    // the step's requests again.
    optimizer_.reset();
    model_.reset();
    allocator_->empty_cache();
    build_model_and_optimizer();
    restore();
  }

  void build_model_and_optimizer() {
    model_ = small_resnet();
    optim::SGDOptions options = optim::SGDOptions(0.05).momentum(0.9);
    if (!GetParam().fused_sgd) options.fused(false).weight_decay(5e-4);
    optimizer_ = std::make_unique<optim::SGD>(model_->parameters(), options);
  }

  static std::vector<std::int64_t> random_labels(std::int64_t n, std::uint64_t seed) {
    std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>((i * 7 + seed) % 10);
    return labels;
  }

  // What a training loop does per batch; every tensor of the step dies before it returns.
  // `requests_by_phase`, if given, receives the segment requests of forward (with the loss),
  // backward, and optimizer step with zero_grad.
  float train_step(const Tensor& images, const Tensor& labels, std::uint64_t* requests_by_phase = nullptr) {
    const std::uint64_t at_start = backend_->allocate_calls();
    const Tensor loss = nn::functional::cross_entropy((*model_)(images), labels);
    const std::uint64_t after_forward = backend_->allocate_calls();
    loss.backward();
    const std::uint64_t after_backward = backend_->allocate_calls();
    optimizer_->step();
    optimizer_->zero_grad();
    if (requests_by_phase) {
      requests_by_phase[0] = after_forward - at_start;
      requests_by_phase[1] = after_backward - after_forward;
      requests_by_phase[2] = backend_->allocate_calls() - after_backward;
    }
    return loss.item<float>();
  }

  // Model and optimizer as they were after the warm-up step; the copies in between are freed again.
  void restore() {
    model_->load_state_dict(model_state_.tensors());
    optimizer_->load_state_dict(optimizer_state_.tensors());
  }

  std::vector<std::vector<float>> parameter_values() const {
    std::vector<std::vector<float>> values;
    for (const Tensor& p : model_->parameters()) values.push_back(p.to_vector<float>());
    return values;
  }

  // Bytes of the blocks behind the parameters' gradients (a backward that failed half way has
  // produced some of them; they belong to the parameters, not to the step's scope).
  std::size_t gradient_block_bytes() const {
    std::set<const memory::Block*> blocks;
    for (const Tensor& p : model_->parameters())
      if (p.grad().defined()) blocks.insert(p.grad().storage().block());
    std::size_t bytes = 0;
    for (const memory::Block* b : blocks) bytes += b->size;
    return bytes;
  }

  FaultInjectingBackend* backend_ = nullptr;  // owned by the CPU allocator
  memory::CachingAllocator* allocator_ = nullptr;
  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<optim::SGD> optimizer_;
  Tensor images_, labels_, half_images_, half_labels_;
  HostCopy model_state_, optimizer_state_;
};

TEST_P(FaultSweep, EveryRefusedSegmentRequestRecoversOrThrowsOutOfMemoryAndLeavesNothingBehind) {
  const SweepCase& sweep = GetParam();
  const auto started = std::chrono::steady_clock::now();

  // The fault-free step from a cold cache: how much it grows the reserved memory, and what it computes.
  restore();
  allocator_->empty_cache();
  const std::size_t reserved_cold = allocator_->memory_reserved();
  backend_->reset_largest_request();
  const float reference_loss = train_step(images_, labels_);
  const std::size_t step_growth = allocator_->memory_reserved() - reserved_cold;
  // What the stale blocks hold: a late refusal recovers only if emptying them frees room for the
  // request refused, however large.
  const std::size_t stale_bytes =
      std::max(step_growth / 2, backend_->largest_request() + static_cast<std::size_t>(memory::kSmallSize));
  const std::vector<std::vector<float>> reference_params = parameter_values();
  if (sweep.stale_cache) {
    ASSERT_GT(step_growth, 0u);
  }

  // The state every run starts from: model and optimizer after warm-up, nothing cached but the
  // stale block (if any). Returns the number of segment requests made so far.
  const auto prepare_run = [&] {
    restore();
    allocator_->empty_cache();
    if (sweep.stale_cache) {
      // Small-pool blocks, so that what is cached is stale_bytes to within one 2 MiB segment.
      std::vector<memory::Block*> stale;
      for (std::size_t bytes = 0; bytes < stale_bytes; bytes += memory::kSmallSize)
        stale.push_back(allocator_->allocate(memory::kSmallSize, kOtherStream));
      for (memory::Block* block : stale) allocator_->free(block);
    }
    return backend_->allocate_calls();
  };
  // The step again from the state every run starts from, counting its requests.
  const std::uint64_t calls_before = prepare_run();
  std::uint64_t phase_requests[3] = {};
  EXPECT_EQ(train_step(images_, labels_, phase_requests), reference_loss);
  const std::uint64_t requests = backend_->allocate_calls() - calls_before;
  ASSERT_GE(requests, 3u) << "the step should need several segments from a cold cache";

  if (!sweep.caching) {
    EXPECT_GT(phase_requests[0], 0u) << "no request in forward";
    EXPECT_GT(phase_requests[1], 0u) << "no request in backward";
    EXPECT_GT(phase_requests[2], 0u) << "no request in the optimizer step";
  }
  // The phase the n-th request of a step falls in: 0 forward, 1 backward, 2 optimizer step.
  const auto phase_of = [&](std::uint64_t n) {
    if (n <= phase_requests[0]) return 0;
    return n <= phase_requests[0] + phase_requests[1] ? 1 : 2;
  };
  int recovered_in_phase[3] = {};

  int recovered = 0, out_of_memory = 0;
  // n = requests + 1 is never reached: that run is the fault-free one again.
  for (std::uint64_t n = 1; n <= requests + 1; ++n) {
    SCOPED_TRACE("request " + std::to_string(n) + " of " + std::to_string(requests) + " refused");
    prepare_run();
    const std::size_t allocated_before = allocator_->memory_allocated();
    const std::uint64_t failed_before = backend_->failed_calls();
    backend_->fail_nth_request(n, sweep.fault);
    bool threw_oom = false;
    float loss = 0.0f;
    try {
      loss = train_step(images_, labels_);
    } catch (const OutOfMemoryError& error) {
      threw_oom = true;
      EXPECT_NE(std::string(error.what()).find("out of memory"), std::string::npos) << error.what();
    } catch (const std::exception& error) {
      backend_->fail_nth_request(0);
      FAIL() << "a refused segment request must end in recovery or OutOfMemoryError, got: " << error.what();
    }
    backend_->fail_nth_request(0);  // the device is free again
    EXPECT_EQ(backend_->failed_calls() > failed_before, n <= requests) << "the fault hit iff n is within the step";

    if (threw_oom) {
      ++out_of_memory;
      // The step's own tensors died with the exception; what is left is only the gradients of a
      // backward that did not finish, which the loop drops.
      EXPECT_EQ(allocator_->memory_allocated(), allocated_before + gradient_block_bytes());
      optimizer_->zero_grad();
    } else {
      ++recovered;
      if (n <= requests) ++recovered_in_phase[phase_of(n)];
      EXPECT_EQ(loss, reference_loss);
      EXPECT_EQ(parameter_values(), reference_params) << "a recovered step must compute what a fault-free one does";
    }
    EXPECT_EQ(allocator_->memory_allocated(), allocated_before);
    memory::testing::expect_consistent(*allocator_);

    if (threw_oom) {
      // As Trainer::halve_after_oom: the same state, half the batch, and no fault.
      restore();
      float half_loss = NAN;
      EXPECT_NO_THROW(half_loss = train_step(half_images_, half_labels_));
      EXPECT_TRUE(std::isfinite(half_loss));
      EXPECT_EQ(allocator_->memory_allocated(), allocated_before);
      memory::testing::expect_consistent(*allocator_);
    }
  }

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << "[ fault sweep ] " << sweep.name << ": " << requests + 1 << " values of n (" << requests
            << " segment requests per step: " << phase_requests[0] << " in forward, " << phase_requests[1]
            << " in backward, " << phase_requests[2] << " in the optimizer step; " << (step_growth >> 20)
            << " MiB of growth): " << recovered << " recovered, " << out_of_memory << " OutOfMemoryError, "
            << seconds << " s\n";
  EXPECT_EQ(recovered + out_of_memory, static_cast<int>(requests + 1));
  if (sweep.fault == Fault::Once) {
    EXPECT_EQ(out_of_memory, 0) << "one refused request is always absorbed by the retry after emptying the cache";
    for (int phase = 0; phase < 3; ++phase)
      EXPECT_EQ(recovered_in_phase[phase], static_cast<int>(phase_requests[phase])) << "phase " << phase;
  } else if (!sweep.stale_cache) {
    EXPECT_EQ(out_of_memory, static_cast<int>(requests)) << "with nothing cached to give back, every refusal is final";
  } else {
    EXPECT_GE(out_of_memory, 1) << "an early refusal on a full device must end the step";
    EXPECT_GE(recovered, 2) << "the fault-free run, and at least one where the emptied cache sufficed";
  }
}

INSTANTIATE_TEST_SUITE_P(
    TrainingStep, FaultSweep,
    ::testing::Values(SweepCase{.name = "OnceSegments", .fault = Fault::Once},
                      SweepCase{.name = "DeviceFullSegments", .fault = Fault::DeviceFull, .stale_cache = true},
                      SweepCase{.name = "OnceExpandable", .fault = Fault::Once, .expandable_segments = true},
                      SweepCase{.name = "DeviceFullExpandable", .fault = Fault::DeviceFull, .expandable_segments = true,
                                .stale_cache = true},
                      SweepCase{.name = "DeviceFullNoCache", .fault = Fault::DeviceFull, .caching = false, .batch = 4,
                                .image_size = 4, .fused_sgd = false},
                      SweepCase{.name = "OnceNoCache", .fault = Fault::Once, .caching = false, .batch = 4,
                                .image_size = 4, .fused_sgd = false}),
    [](const ::testing::TestParamInfo<SweepCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sublet
