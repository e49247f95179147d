// sublet: the command-line front end. Subcommands live in their own files (see commands.h).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <new>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "memory/config.h"
#include "core/errors.h"

int main(int argc, char** argv) {
  // OpenMP threads that spin while waiting steal the cores from each other and from anything
  // else on the machine (a ResNet-20 step took 1.7 s instead of 0.13 s on a shared 2-core
  // machine), so they sleep instead unless the user chose otherwise. libgomp reads the variable
  // when it is loaded, before main(): set it and run this program again, once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
    execv("/proc/self/exe", argv);  // returns only on failure: then go on with spinning threads
  }
  CLI::App app{"sublet: a small C++ deep-learning runtime with a PyTorch-style caching allocator"};
  app.require_subcommand(1);
  app.failure_message(sublet::cli::failure_message);
  // Every command refuses a bad SUBLET_ALLOC_CONF (or PYTORCH_CUDA_ALLOC_CONF) before it starts
  // work, including those that create their allocators late (profile) or not from the
  // environment at all (bench alloc); and says once when PyTorch's variable is not used.
  app.parse_complete_callback([] {
    sublet::memory::AllocatorConfig::from_environment();
    const sublet::memory::ConfigOrigin origin = sublet::memory::config_origin_from_environment();
    if (origin.ignored_pytorch) std::cerr << "note: allocator configuration " << origin.describe() << "\n";
  });
  sublet::cli::add_demo_command(app);
  sublet::cli::add_bench_alloc_command(app);
  sublet::cli::add_bench_step_command(app);
  sublet::cli::add_replay_command(app);
  sublet::cli::add_plan_command(app);
  sublet::cli::add_profile_command(app);
  sublet::cli::add_train_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const sublet::cli::ExitWith& e) {
    return e.code;
  } catch (const sublet::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of host memory (a buffer for the requested sizes could not be allocated); "
                 "use smaller sizes (batch size, image shape, dataset limits)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
