#pragma once
// Runs N training steps of a model with the layer recorder attached and collects everything the
// reports are made of: the allocation history, the spans, per-step counters and snapshots. Then
// runs a few steps without hooks or history to measure what profiling costs.
//
// For the history to be complete (and its replay exact) the device's allocator must hold no
// blocks when recording starts: the session empties its cache, or replaces it with one built
// from --alloc-conf, and creates the model inside the recording.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memory/caching_allocator.h"
#include "core/device.h"
#include "memory/history.h"
#include "profile/category_accounting.h"
#include "profile/event_log.h"
#include "profile/layer_recorder.h"
#include "runtime/amp/precision.h"
#include "runtime/nn/module.h"

namespace sublet::profile {

// One step's inputs when the shape changes from step to step (a variable-length or
// variable-resolution schedule).
struct StepShape {
  std::int64_t batch = 0;
  std::int64_t seq_len = 0;                 // > 0: token windows of this length
  std::vector<std::int64_t> input_shape;    // images: C, H, W
  std::string describe() const;             // "batch 22 x 728 tokens" / "batch 64 x 3x192x192"
};

struct ProfileOptions {
  std::string model_name = "model";
  Device device = Device::cpu();
  std::int64_t batch_size = 32;
  std::vector<std::int64_t> input_shape = {3, 32, 32};  // C, H, W
  std::int64_t num_classes = 10;
  int steps = 3;          // profiled steps (the step-2-vs-step-1 diff needs two)
  int timing_steps = 3;   // unprofiled steps afterwards, for the overhead figure
  std::string alloc_conf; // empty: the device allocator as configured (memory/config.h: from the environment)
  std::string optimizer = "sgd";  // "sgd" (momentum 0.9: one state tensor per parameter) or "adam" (two)
  double learning_rate = 0.01;
  std::uint64_t seed = 0;
  std::string recomputed;  // for the report: the blocks recomputed in backward (--memory-budget), if any
  // --precision and --channels-last (runtime/amp/step_recipe.h): autocast's casts show as the
  // "autocast" category; the model and the batch in the memory format.
  amp::Precision precision = amp::Precision::Fp32;
  MemoryFormat memory_format = MemoryFormat::Contiguous;
  // > 0: a language model (GPT): the batch is token ids [batch_size, seq_len] below num_classes
  // (the vocabulary) with next-token targets of the same shape; input_shape does not apply.
  std::int64_t seq_len = 0;
  // Non-empty: step i trains on step_shapes[i - 1] (at least `steps` entries; the timing steps
  // cycle through them), its batch drawn afresh inside the step as a data loader hands it over.
  // batch_size, input_shape and seq_len then describe the last profiled step.
  std::vector<StepShape> step_shapes;
};

struct StepRecord {
  int step = 0;
  std::uint64_t begin_event = 0, end_event = 0;
  std::int64_t begin_ns = 0, end_ns = 0;
  std::size_t live_peak_allocated = 0;  // max_memory_allocated() after reset at the step's start
  std::size_t live_peak_reserved = 0;
  std::size_t allocated_at_end = 0, reserved_at_end = 0;
  std::vector<memory::SegmentInfo> segments_at_end;  // after the step's tensors went out of scope
  double loss = 0;
  std::string shape;  // StepShape::describe() of the step's inputs
};

struct ProfileRun {
  ProfileOptions options;
  std::string allocator_config;   // canonical text of the profiled allocator's configuration
  std::string allocator_config_origin;  // "--alloc-conf", or where the environment's came from
  std::string backend_name;
  std::size_t device_capacity = 0;
  Baseline baseline;
  std::vector<memory::HistoryEvent> events;
  std::vector<Span> spans;
  std::vector<StepRecord> steps;
  std::vector<memory::SegmentInfo> final_segments;
  Accounting accounting;
  std::string summary_at_end;     // memory_summary() of the live allocator after the last step
  // Static figures of the model and optimizer.
  std::size_t parameter_count = 0;      // tensors
  std::size_t parameter_bytes = 0;      // numel * element size, before rounding
  std::size_t parameter_block_bytes = 0;  // the same tensors' rounded allocator blocks
  std::size_t buffer_bytes = 0;         // buffers (running statistics), counted with the parameters
  int optimizer_state_per_parameter = 0;  // SGD with momentum: 1, Adam: 2
  // Timing: profiled steps after the first, and unprofiled steps.
  double profiled_step_ms = 0;
  double plain_step_ms = 0;
  std::vector<double> profiled_step_times_ms, plain_step_times_ms;
};

using ModelFactory = std::function<std::shared_ptr<nn::Module>()>;

// Builds the model with `make_model` while recording (so its parameters are in the history), moves
// it to options.device, and profiles options.steps training steps with synthetic data.
ProfileRun profile_training(const ModelFactory& make_model, const ProfileOptions& options);

}  // namespace sublet::profile
