// sublet: the command-line front end. Subcommands live in their own files (see commands.h).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/version.h"
#include "memory/config.h"
#include "core/errors.h"

namespace {

// The tasks the kernel has runnable at this moment, this process included (procs_running in
// /proc/stat); 0 when it cannot be read.
int runnable_tasks() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "procs_running") {
      int count = 0;
      in >> count;
      return count;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// How long an idle OpenMP thread spins before it sleeps, when the machine is otherwise idle:
// about 0.1-0.3 ms here. Sleeping at once cost a 2-thread CPU ResNet-20 step 5-21% (each of its
// ~190 parallel regions woke the other thread from a futex: ~350 context switches a step), and
// most gaps between regions are shorter than this.
constexpr const char* kIdleMachineSpinCount = "30000";

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads that spin while waiting steal the cores from each other and from anything
  // else on the machine (a ResNet-20 step took 1.7 s instead of 0.13 s on a shared 2-core
  // machine; with one other busy process, a short spin still cost 40%), so they sleep at once
  // when anything else is running, and spin briefly (kIdleMachineSpinCount) when nothing is,
  // unless the user chose with OMP_WAIT_POLICY or GOMP_SPINCOUNT. libgomp reads the variables
  // when it is loaded, before main(): set one and run this program again, once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    // The fewest runnable tasks over 5 looks 2 ms apart: a short-lived task (the shell that
    // started this one, a kernel worker) does not count, a compiler or another training run does.
    int fewest = std::numeric_limits<int>::max();
    for (int look = 0; look < 5; ++look) {
      if (look > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      fewest = std::min(fewest, runnable_tasks());
    }
    if (fewest == 1) {
      setenv("GOMP_SPINCOUNT", kIdleMachineSpinCount, /*overwrite=*/1);
    } else {
      setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
    }
    execv("/proc/self/exe", argv);  // returns only on failure: then go on with libgomp's default
  }
  CLI::App app{"sublet: a small C++ deep-learning runtime with a PyTorch-style caching allocator"};
  app.require_subcommand(1);
  app.set_version_flag("--version", sublet::cli::version_text());
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
  sublet::cli::add_generate_command(app);
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
