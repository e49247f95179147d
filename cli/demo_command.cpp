// sublet demo release [--device auto|cpu|cuda|cuda:N] [--size-mb N]
#include <iostream>

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "examples/two_step_release.h"
#include "memory/registry.h"
#include "train/train_options.h"

namespace sublet::cli {

void add_demo_command(CLI::App& app) {
  CLI::App* demo = app.add_subcommand("demo", "Small demonstrations of the allocator's behaviour: release (the two-step release)");
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
}

}  // namespace sublet::cli
