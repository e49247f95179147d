// sublet demo release [--device auto|cpu|cuda|cuda:N] [--size-mb N]
// sublet demo variable-length-oom [--device ...] [--capacity-mib N] [--model gpt-nano|gpt-mini] [--block-size N]
//                                  [--seq-len-range MIN:MAX] [--tokens-per-batch N] [--vocab N] [--steps N] [--seed N]
//                                  [--knob STR]
#include <iostream>
#include <tuple>

#include "bench/step/variable_length_oom.h"

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "examples/two_step_release.h"
#include "memory/config.h"
#include "memory/registry.h"
#include "runtime/data/shape_schedule.h"
#include "train/train_options.h"

namespace sublet::cli {

void add_demo_command(CLI::App& app) {
  CLI::App* demo = app.add_subcommand("demo", "Small demonstrations of the allocator's behaviour: release (the two-step "
                                              "release), variable-length-oom (an out-of-memory error with room to spare)");
  demo->require_subcommand(1);
  CLI::App* release = demo->add_subcommand("release", "Two-step release: allocated drops at once, reserved only on empty_cache()");
  auto device = std::make_shared<std::string>();
  auto size_mb = std::make_shared<std::size_t>(256);
  add_device_option(*release, *device);
  release->add_option("--size-mb", *size_mb, "buffer size in MiB")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  release->callback([device, size_mb] {
    const Device d = train::resolve_device(*device);  // the same messages as train's --device
    const int status = examples::two_step_release_demo(d, *size_mb * memory::kMiB, std::cout);
    if (status != 0) throw CLI::RuntimeError(status);
  });

  CLI::App* oom = demo->add_subcommand(
      "variable-length-oom",
      "a GPT (gpt-nano by default) with a new window length each step on a capped device: PyTorch's default settings run out of memory "
      "with the live tensors well below the cap; sublet's defaults and expandable_segments:True finish");
  auto oom_device = std::make_shared<std::string>();
  auto options = std::make_shared<bench::VariableLengthOomOptions>();
  auto capacity_mib = std::make_shared<std::size_t>(0);
  add_device_option(*oom, *oom_device);
  oom->add_option("--capacity-mib", *capacity_mib,
                  "cap the device at N MiB (default: the smallest cap under which sublet's defaults finish, searched a 2 MiB page "
                  "at a time from the run's uncapped live peak rounded up to a page, plus one page)")
      ->check(CLI::Range(1, 1 << 24));
  oom->add_option("--model", options->model, "the GPT trained")
      ->check(CLI::IsMember({"gpt-nano", "gpt-mini"}))
      ->capture_default_str();
  oom->add_option("--block-size", options->block_size, "the model's context (default: the model's own; at least the longest window)")
      ->check(CLI::Range(1, 1 << 20));
  auto seq_len_range = std::make_shared<std::string>("8:64");
  oom->add_option("--seq-len-range", *seq_len_range,
                  "window lengths drawn each step from MIN:MAX, rounded up to a multiple of 8 (MAX must be one)")
      ->capture_default_str();
  oom->add_option("--tokens-per-batch", options->tokens_per_batch, "each step's batch is max(1, N / length)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  oom->add_option("--vocab", options->vocab_size, "vocabulary size (the logits are the largest tensors)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  oom->add_option("--steps", options->steps, "training steps")->check(CLI::Range(1, 1000))->capture_default_str();
  oom->add_option("--seed", options->seed, "seed of the length schedule and the model")->capture_default_str();
  oom->add_option("--knob", options->knob, "the SUBLET_ALLOC_CONF setting shown fixing it")->capture_default_str();
  oom->callback([oom_device, options, capacity_mib, seq_len_range] {
    options->device = train::resolve_device(*oom_device);
    std::tie(options->min_len, options->max_len) = data::parse_seq_len_range(*seq_len_range);
    options->capacity_bytes = *capacity_mib * memory::kMiB;
    memory::AllocatorConfig::parse(options->knob, {}, "--knob");  // a bad knob fails before the runs
    const int status = bench::variable_length_oom_demo(*options, std::cout);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace sublet::cli
